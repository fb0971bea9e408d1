//! `bellc import divingbell`: a Divingbell values file becomes a spec that builds and gives
//! every host what Divingbell gives it (`--verify` checks each host, module and key).

use crate::common;
use crate::common::{repo_root, Fixture};
use std::os::unix::fs::PermissionsExt;

fn fixture_file(name: &str) -> String {
    let path = repo_root().join("compiler/tests/divingbell").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The spec an import wrote.
fn spec(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.path().join("bell.kdl")).expect("bell.kdl")
}

/// `bellc import divingbell VALUES… --inventory nodes.json --verify --short EXTRA…`.
fn import_verified(fx: &Fixture, values: &[&str], extra: &[&str]) -> common::Run {
    let mut args = vec!["import", "divingbell"];
    args.extend(values);
    args.extend(["--inventory", "nodes.json", "--verify", "--short"]);
    args.extend(extra);
    fx.bellc(&args)
}

/// What an import of values with password hashes says: they ship in the clear, as Divingbell
/// shipped them, until its hosts have identities.
const IN_THE_CLEAR: &str =
    "warning[bell::import::warned]: bellc warns of this: secrets are shipped in the clear";

/// And that they are written in the spec, unless the import is given `--secrets-recipient`.
const AT_REST: &str =
    "warning[bell::import::warned]: bellc warns of this: a secret is written in the spec in the clear";

/// Without an inventory, hosts that exercise every override stand in for the fleet.
fn verifies_without_inventory(fx: &Fixture) {
    let run = fx.bellc(&[
        "import",
        "divingbell",
        "values.yaml",
        "-o",
        "probe.kdl",
        "--verify",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn every_documented_example_imports_builds_and_verifies() {
    let fx = Fixture::new()
        .file("values.yaml", &fixture_file("documentation.yaml"))
        .file("nodes.json", &fixture_file("nodes.json"));
    let run = import_verified(&fx, &["values.yaml"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Only what bellc says otherwise is a warning: downgrades are allowed for every package,
    // the password hash ships in the clear (at the first one) and is written in the spec.
    let diagnostics = run.diagnostics();
    assert_eq!(diagnostics.len(), 3, "{}", run.stderr);
    assert!(diagnostics[2].starts_with(&format!("values.yaml:113:26: {AT_REST}")));
    assert_eq!(
        diagnostics[0],
        "values.yaml:45:7: warning[bell::import::not_imported]: `conf.apt.packages[0].allow_downgrade`: bellc allows downgrades for every package or none; the spec allows them for all (`apt allow-downgrade=#true`)"
    );
    assert!(diagnostics[1].starts_with(&format!("values.yaml:112:18: {IN_THE_CLEAR}")));
    let text = spec(&fx);
    insta::assert_snapshot!("documentation", text);
    // A password hash is inside: the spec is as secret as the values.
    let mode = std::fs::metadata(fx.path().join("bell.kdl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    verifies_without_inventory(&fx);
}

#[test]
fn per_daemonset_overrides_that_differ_for_one_host_are_layered() {
    // superhost takes a host override for sysctl and, by its label, a label override for
    // mounts; node-both matches two sysctl label overrides, of which the last wins whole.
    let values = r#"conf:
  sysctl:
    net.ipv4.ip_forward: 1
    fs.file-max: 9999
  mounts:
    mnt:
      mnt_tgt: /mnt
      device: tmpfs
      type: tmpfs
      options: size=1024M
  overrides:
    divingbell_sysctl:
      labels:
      - label: {key: compute_type, values: [dpdk]}
        conf:
          sysctl:
            net.ipv4.ip_forward: 0
            kernel.pid_max: 65536
      - label: {key: rack, values: [r2]}
        conf:
          sysctl:
            fs.file-max: 23456
      hosts:
      - name: superhost
        conf:
          sysctl:
            fs.file-max: 12345
    divingbell_mounts:
      labels:
      - label: {key: blarg, values: [soup, chips]}
        conf:
          mounts:
            mnt:
              options: size=32M
            mnt2: {mnt_tgt: /mnt2, device: tmpfs, type: tmpfs}
"#;
    let nodes = r#"[
  {"name": "plain"},
  {"name": "superhost", "labels": {"blarg": "soup", "compute_type": "dpdk"}},
  {"name": "node-both", "labels": {"compute_type": "dpdk", "rack": "r2"}},
  {"name": "node-chips", "labels": {"blarg": "chips"}}
]"#;
    let fx = Fixture::new()
        .file("values.yaml", values)
        .file("nodes.json", nodes);
    let run = import_verified(&fx, &["values.yaml"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.diagnostics().is_empty(), "{}", run.stderr);
    let text = spec(&fx);
    assert!(text.contains("overrides=\"layered\""), "{text}");
    // The rack override takes back what the compute_type override set, for hosts with both.
    assert!(text.contains("kernel.pid_max #null"), "{text}");
    assert!(text.contains("net.ipv4.ip_forward 1"), "{text}");
    let explain = fx.bellc(&["explain", "superhost", "bell.kdl"]);
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    for line in ["12345", "size=32M", "/mnt2"] {
        assert!(
            explain.stdout.contains(line),
            "{line} in {}",
            explain.stdout
        );
    }
    verifies_without_inventory(&fx);
}

#[test]
fn keys_bellc_does_not_know_are_comments_and_warnings_at_their_line() {
    let values = "conf:\n  sysctl:\n    vm.swappiness: 10\n  bogus:\n    x: 1\n  mounts:\n    mnt:\n      mnt_tgt: /mnt\n      device: tmpfs\n      type: tmpfs\n      fstab: yes\n  overrides:\n    divingbell_bogus:\n      hosts:\n      - name: h\n        conf: {bogus: {}}\nimages:\n  divingbell: ubuntu:16.04\nextra: 1\n";
    let fx = Fixture::new().file("values.yaml", values);
    let run = fx.bellc(&["import", "divingbell", "values.yaml", "--short"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<String> = run
        .diagnostics()
        .iter()
        .map(|d| d.split(": warning").next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        lines,
        [
            "values.yaml:4:3",
            "values.yaml:11:7",
            "values.yaml:13:5",
            "values.yaml:19:1"
        ],
        "{}",
        run.stderr
    );
    let text = spec(&fx);
    for comment in [
        "// divingbell (values line 4): `conf.bogus` is not a Divingbell module",
        "// divingbell (values line 11): `conf.mounts.mnt.fstab` is not a key bellc knows",
        "// divingbell (values line 13): `conf.overrides.divingbell_bogus` names no Divingbell daemonset",
        "// divingbell (values line 19): `extra` is not a key of Divingbell's values",
        "// Settings of the chart, not of hosts, not imported: images.",
    ] {
        assert!(text.contains(comment), "{comment}\n{text}");
    }
    // No password in it: readable like any spec.
    let mode = std::fs::metadata(fx.path().join("bell.kdl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
}

#[test]
fn malformed_yaml_is_an_error_at_its_line_and_writes_nothing() {
    let fx = Fixture::new().file(
        "values.yaml",
        "conf:\n  sysctl:\n    a: [1, 2\n  mounts: {}\n",
    );
    let run = fx.bellc(&["import", "divingbell", "values.yaml", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diagnostics = run.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{}", run.stderr);
    assert!(
        diagnostics[0].starts_with("values.yaml:4:"),
        "{}",
        run.stderr
    );
    assert!(
        diagnostics[0].contains("error[bell::import::yaml]"),
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("bell.kdl").exists());
    let twice = Fixture::new().file("values.yaml", "conf:\n  sysctl: {}\n  sysctl: {}\n");
    let run = twice.bellc(&["import", "divingbell", "values.yaml", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("values.yaml:3:3: error[bell::import::yaml]: `sysctl` is written twice"),
        "{}",
        run.stderr
    );
}

#[test]
fn values_without_overrides_are_the_base_alone() {
    let values = "conf:\n  sysctl:\n    net/ipv4/ip_forward: 1\n  limits:\n    nofile: {domain: '*', type: soft, item: nofile, value: 4096}\n";
    let fx = Fixture::new().file("values.yaml", values).file(
        "nodes.json",
        r#"[{"name": "a"}, {"name": "b", "labels": {"rack": "r1"}}]"#,
    );
    let run = import_verified(&fx, &["values.yaml"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = spec(&fx);
    assert!(!text.contains("\noverride "), "{text}");
    // Slash-form keys are kept as written.
    assert!(text.contains("\"net/ipv4/ip_forward\" 1"), "{text}");
    let check = fx.bellc(&["check", "bell.kdl", "--short"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    // An existing spec is never overwritten unless asked.
    let again = fx.bellc(&["import", "divingbell", "values.yaml"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
}

#[test]
fn several_values_files_merge_in_order_as_helm_merges_them() {
    // The chart's own values, then a stage's, as Divingbell's gate installs them.
    let chart = "conf:\n  sysctl:\n    net.ipv4.ip_forward: 1\n    fs.file-max: 9999\n  apt:\n    blacklistpkgs: [telnetd, nis]\n";
    let stage = "conf:\n  sysctl:\n    fs.file-max: ~\n    vm.swappiness: 10\n  apt:\n    blacklistpkgs: [ntpdate]\n";
    let fx = Fixture::new()
        .file("chart.yaml", chart)
        .file("stage.yaml", stage);
    let run = fx.bellc(&[
        "import",
        "divingbell",
        "chart.yaml",
        "stage.yaml",
        "--verify",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = spec(&fx);
    assert!(text.contains("from chart.yaml, stage.yaml"), "{text}");
    assert!(
        text.contains("sysctl {\n    net.ipv4.ip_forward 1\n    vm.swappiness 10\n}"),
        "{text}"
    );
    // Lists are replaced whole.
    assert!(text.contains("package \"ntpdate\" absent=#true"), "{text}");
    assert!(!text.contains("telnetd"), "{text}");
    assert!(text.contains("fleet \"stage\""), "{text}");
}

#[test]
fn an_override_that_leaves_a_property_out_restates_its_default_or_says_it_cannot() {
    // Divingbell replaces the `users` list whole: alice, named again without `user_sudo`,
    // loses sudo (the default is restated), and without `user_sshkeys` her keys, which bellc
    // cannot take back from one resource: a warning at the override, and --verify fails.
    let values = "conf:\n  uamlite:\n    users:\n    - user_name: alice\n      user_sudo: true\n      user_crypt_passwd: $6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/\n      user_sshkeys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 a\n  overrides:\n    divingbell_uamlite:\n      labels:\n      - label: {key: role, values: [edge]}\n        conf:\n          uamlite:\n            users:\n            - user_name: alice\n";
    let fx = Fixture::new().file("values.yaml", values);
    let run = fx.bellc(&["import", "divingbell", "values.yaml", "--verify", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    // A failed import writes nothing `bellc check` could take for the values.
    assert!(!fx.path().join("bell.kdl").exists(), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("bell.kdl not written: the import stopped"),
        "{}",
        run.stderr
    );
    let unverified = fx.bellc(&["import", "divingbell", "values.yaml", "--short"]);
    assert_eq!(unverified.code, 0, "{}", unverified.stderr);
    let text = spec(&fx);
    assert!(text.contains("    user \"alice\" sudo=#false\n"), "{text}");
    let diagnostics = run.diagnostics();
    assert!(
        diagnostics.iter().any(|d| d.starts_with("values.yaml:12:9: warning[bell::import::not_imported]: this override cannot take back `ssh-key` of `user:alice`")),
        "{}",
        run.stderr
    );
    assert!(
        diagnostics.iter().any(|d| d.contains("error[bell::import::differs]: host `probe-1-0`, module uamlite, `user:alice ssh-key`: Divingbell gives nothing, the spec gives \"ssh-ed25519 ")),
        "{}",
        run.stderr
    );
    // The hash is compared, never printed.
    assert!(!run.stderr.contains("bellsalt"), "{}", run.stderr);
    assert!(!run.stderr.contains("sudo`"), "{}", run.stderr);
}

#[test]
fn the_shapes_of_divingbells_current_chart_import() {
    // As Divingbell's gate writes them: `perm.paths` beside `rerun_interval`, repositories by
    // name with subrepos, an exec `timeout`, and daemonsets `manifests` turns off.
    let values = r#"conf:
  perm:
    rerun_interval: 60
    paths:
    - path: /etc/shadow
      owner: 'root'
      group: 'shadow'
      permissions: '0640'
  apt:
    repositories:
      repository_name1:
        url: http://us.archive.ubuntu.com/ubuntu/
        distributions: [ xenial ]
        components: [ main, universe ]
        subrepos: [ backports, updates ]
        gpgkey: |-
          -----BEGIN PGP PUBLIC KEY BLOCK-----

          mQINBGV
          -----END PGP PUBLIC KEY BLOCK-----
  exec:
    011-timeout.sh:
      timeout: 11
      data: |
        #!/bin/bash
        sleep 60
  sysctl:
    net.ipv4.ip_forward: 1
manifests:
  daemonset_sysctl: false
"#;
    let fx = Fixture::new().file("values.yaml", values);
    let run = fx.bellc(&["import", "divingbell", "values.yaml", "--verify", "--short"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.diagnostics(),
        ["values.yaml:3:5: warning[bell::import::not_imported]: `conf.perm.rerun_interval`: bellc sets permissions on every apply and its check reports drift between applies; kept as a comment"]
    );
    let text = spec(&fx);
    for line in [
        "perm \"/etc/shadow\" owner=\"root\" group=\"shadow\" mode=\"0640\"",
        "apt-source \"repository_name1\" url=\"http://us.archive.ubuntu.com/ubuntu/\" suites=\"xenial xenial-backports xenial-updates\" components=\"main universe\" {",
        "exec \"011-timeout.sh\" timeout=11 {",
        "// Daemonsets `manifests` turns off, not imported: sysctl.",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
    assert!(!text.contains("ip_forward"), "{text}");
}

#[test]
fn what_bellc_refuses_is_an_error_at_the_values_it_came_from() {
    // Values Divingbell's gate expects to fail on a host (a key that is not base64, an
    // infinite timeout), and a relative mount target: caught at import, at the value itself.
    let values = "conf:\n  uamlite:\n    users:\n    - user_name: userone\n      user_sshkeys:\n      - ssh-rsa abc123 comment\n  exec:\n    011-timeout.sh:\n      timeout: infinite\n      data: |\n        #!/bin/bash\n        sleep 60\n  mounts:\n    mnt:\n      mnt_tgt: relative/path\n      device: tmpfs\n      type: tmpfs\n";
    let fx = Fixture::new().file("values.yaml", values);
    let run = fx.bellc(&["import", "divingbell", "values.yaml", "--verify", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let lines: Vec<(&str, bool)> = run
        .diagnostics()
        .iter()
        .map(|d| {
            let (at, rest) = d.split_once(": error[").unwrap_or_default();
            let line = at.rsplit_once(':').map_or(at, |(line, _column)| line);
            (line, rest.starts_with("bell::import::refused]"))
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("values.yaml:6", true),
            ("values.yaml:9", true),
            ("values.yaml:15", true)
        ],
        "{}",
        run.stderr
    );
}

/// What the import must say of one stage of Divingbell's gate.
enum Expect {
    /// It imports, verifies and builds; each warning it gives contains one of these.
    Verifies(&'static [&'static str]),
    /// It stops with an error of this code at this line of the stage's values.
    Error(&'static str, usize),
}

/// The stages of Divingbell's gate (`tools/gate/scripts/020-test-divingbell.sh` in
/// airshipit/divingbell installs the chart's values and one stage's values over them), written
/// out with the script's variables in place. The stages the gate expects to fail on a host are
/// refused here with the key and the reason, before anything moves; those that fail only on
/// particular hardware (a fixed NIC feature, settings the driver cannot combine, a device that
/// does not exist) import, and fail on the host as they do under Divingbell.
const GATE: &[(&str, Expect)] = &[
    ("sysctl-set1", Expect::Verifies(&[])),
    ("sysctl-set2", Expect::Verifies(&[])),
    (
        "sysctl-invalid-key",
        Expect::Verifies(&["`this.is.a.bogus.key` may not be a sysctl key"]),
    ),
    ("sysctl-invalid-value", Expect::Error("refused", 3)),
    ("limits", Expect::Verifies(&[])),
    ("perm-set1", Expect::Verifies(&[])),
    ("perm-set2", Expect::Verifies(&[])),
    (
        "perm-rerun-interval",
        Expect::Verifies(&["conf.perm.rerun_interval"]),
    ),
    ("perm-rerun-interval-too-short", Expect::Error("invalid", 3)),
    ("perm-bad-combination", Expect::Error("invalid", 3)),
    ("mounts-set1", Expect::Verifies(&[])),
    ("mounts-set2", Expect::Verifies(&[])),
    ("mounts-invalid", Expect::Verifies(&[])),
    ("ethtool-set1", Expect::Verifies(&[])),
    ("ethtool-set2", Expect::Verifies(&[])),
    ("ethtool-invalid-key", Expect::Error("refused", 4)),
    ("ethtool-invalid-value", Expect::Error("invalid", 4)),
    ("ethtool-fixed", Expect::Verifies(&[])),
    ("ethtool-conflict", Expect::Verifies(&[])),
    // The gate's ssh keys (`ssh-rsa abc123 comment`) are not keys: sshd would ignore them.
    ("uamlite-set1", Expect::Error("refused", 7)),
    ("uamlite-set2", Expect::Error("refused", 9)),
    ("uamlite-purge", Expect::Verifies(&[])),
    ("uamlite-bad-password", Expect::Error("refused", 5)),
    ("uamlite-bad-sshkey", Expect::Error("refused", 7)),
    ("apt-set1", Expect::Verifies(&[])),
    ("apt-set2", Expect::Verifies(&[])),
    ("apt-set3", Expect::Verifies(&[])),
    ("apt-set4", Expect::Verifies(&[])),
    ("apt-invalid-package", Expect::Error("refused", 5)),
    (
        "apt-blacklist",
        Expect::Verifies(&["which `conf.apt.blacklistpkgs` names too"]),
    ),
    ("apt-repositories", Expect::Verifies(&[])),
    ("apt-repositories-same-key", Expect::Verifies(&[])),
    ("exec-order", Expect::Verifies(&[])),
    ("exec-halt-on-failure", Expect::Verifies(&[])),
    ("exec-bad-rerun-policy", Expect::Error("invalid", 4)),
    ("exec-bad-blocking-policy", Expect::Error("invalid", 4)),
    ("exec-rerun-policies", Expect::Verifies(&[])),
    ("exec-timeout", Expect::Verifies(&[])),
    ("exec-bad-timeout", Expect::Error("refused", 4)),
    ("exec-rerun-interval-too-short", Expect::Error("invalid", 4)),
    ("exec-retry-interval-too-short", Expect::Error("invalid", 4)),
    (
        "exec-rerun-interval-bad-combination",
        Expect::Error("refused", 4),
    ),
    (
        "exec-retry-interval-bad-combination",
        Expect::Error("refused", 4),
    ),
    ("exec-rerun-interval", Expect::Verifies(&[])),
    ("exec-retry-interval", Expect::Verifies(&[])),
    ("apparmor-set1", Expect::Verifies(&[])),
    ("apparmor-set2", Expect::Verifies(&[])),
    ("apparmor-complain", Expect::Verifies(&[])),
    ("apparmor-bad-profile", Expect::Verifies(&[])),
    (
        "overrides-dryrun",
        Expect::Verifies(&["`conf.overrides.divingbell_bogus` names no Divingbell daemonset"]),
    ),
    ("overrides-functional", Expect::Verifies(&[])),
];

#[test]
fn divingbells_gate_values_import_verify_and_build_or_say_which_key_and_why() {
    let gate = |name: &str| fixture_file(&format!("gate/{name}"));
    let mut stages: Vec<&str> = GATE.iter().map(|(stage, _)| *stage).collect();
    stages.sort_unstable();
    // Every stage written out is in the table, and the other way round.
    let dir = repo_root().join("compiler/tests/divingbell/gate");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("gate fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".yaml").map(str::to_string))
        .filter(|f| f != "chart")
        .collect();
    files.sort_unstable();
    assert_eq!(files, stages);
    let mut failures = Vec::new();
    // The chart's values alone (the gate's `install_base`, which reverts every stage).
    let mut runs = vec![("chart", None, &Expect::Verifies(&[]))];
    runs.extend(
        GATE.iter()
            .map(|(stage, expect)| ("stage", Some(*stage), expect)),
    );
    for (_, stage, expect) in runs {
        let mut fx = Fixture::new()
            .file("chart.yaml", &gate("chart.yaml"))
            .file("nodes.json", &gate("nodes.json"));
        let mut files = vec!["chart.yaml"];
        let values = stage.map(|s| format!("{s}.yaml"));
        if let Some(values) = &values {
            fx = fx.file(values, &gate(values));
            files.push(values);
        }
        let run = import_verified(&fx, &files, &[]);
        let name = stage.unwrap_or("chart");
        let diagnostics = run.diagnostics();
        match expect {
            Expect::Verifies(warnings) => {
                let unexpected: Vec<&&str> = diagnostics
                    .iter()
                    .filter(|d| {
                        !warnings.iter().any(|w| d.contains(w))
                            && !d.contains(IN_THE_CLEAR)
                            && !d.contains(AT_REST)
                    })
                    .collect();
                if run.code != 0 || !unexpected.is_empty() {
                    failures.push(format!("{name}: exit {}\n{}", run.code, run.stderr));
                    continue;
                }
                let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
                if build.code != 0 {
                    failures.push(format!("{name}: build: {}", build.stderr));
                }
            }
            Expect::Error(code, line) => {
                let at = format!("{name}.yaml:{line}:");
                let code = format!("error[bell::import::{code}]");
                let found = diagnostics
                    .iter()
                    .any(|d| d.starts_with(&at) && d.contains(&code));
                if run.code != 1 || !found {
                    failures.push(format!(
                        "{name}: wanted {code} at {at}, exit {}\n{}",
                        run.code, run.stderr
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_gates_user_stages_verify_once_their_keys_are_keys() {
    // The gate's keys are placeholders; with real keys in their place the stages hold nothing
    // bellc refuses, and every host gets what Divingbell gives it.
    let keys = [
        ("ssh-rsa abc123 comment", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKaTqdFAELpxQvh5BLQdXwrqiIRxyq/mc4Vlk1NJytWM one"),
        ("ssh-rsa xyz456 comment", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIORpZ7VNaJBUGCm2HyS379MdvwzY1RqVvNBl4A+Cyc2s two"),
        ("ssh-rsa qwe789 comment", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJX/BxagQQJZ0G33p4CxoVHB5h3rrykwIWcgcB2zItOr three"),
        ("ssh-rsa rfv000 comment", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGO6W7UEUbHIFR9Fx/2jzL5wq0AmTC7iFY0lC87DfYYk four"),
    ];
    for stage in ["uamlite-set1", "uamlite-set2"] {
        let mut values = fixture_file(&format!("gate/{stage}.yaml"));
        for (placeholder, key) in keys {
            values = values.replace(placeholder, key);
        }
        let fx = Fixture::new()
            .file("chart.yaml", &fixture_file("gate/chart.yaml"))
            .file("stage.yaml", &values)
            .file("nodes.json", &fixture_file("gate/nodes.json"));
        let run = import_verified(&fx, &["chart.yaml", "stage.yaml"], &[]);
        assert_eq!(run.code, 0, "{stage}: {}", run.stderr);
        let said = run.diagnostics();
        assert!(
            said.iter()
                .all(|d| d.contains(IN_THE_CLEAR) || d.contains(AT_REST)),
            "{stage}: {}",
            run.stderr
        );
        let text = spec(&fx);
        for (_, key) in keys {
            let used = values.contains(key);
            assert_eq!(text.contains(key), used, "{key} in {text}");
        }
        let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
        assert_eq!(build.code, 0, "{stage}: {}", build.stderr);
    }
}

#[test]
fn retiring_divingbell_removes_its_files_once_and_nothing_else() {
    let fx = Fixture::new()
        .file("chart.yaml", &fixture_file("gate/chart.yaml"))
        .file("stage.yaml", &fixture_file("gate/sysctl-set1.yaml"))
        .file("nodes.json", &fixture_file("gate/nodes.json"));
    let run = import_verified(&fx, &["chart.yaml", "stage.yaml"], &["--retire-divingbell"]);
    // The script is not Divingbell's: `--verify` compares the spec without it.
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        spec(&fx).contains("exec \"zz-retire-divingbell\" rerun=\"once-successfully\""),
        "{}",
        spec(&fx)
    );
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let bundles = fx.path().join("out/bundles");
    let bundle = std::fs::read_dir(&bundles)
        .expect("bundles")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a bundle");
    let script = bundle.join("scripts/exec/zz-retire-divingbell.apply");
    assert!(script.is_file(), "{}", script.display());
    if common::have("shellcheck") {
        let out = std::process::Command::new("shellcheck")
            .args(["--shell=sh", "--severity=style"])
            .arg(&script)
            .output()
            .expect("shellcheck");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // For real, in a private mount namespace: Divingbell's files beside bell's and others'.
    let dirs = [
        "/etc/sysctl.d",
        "/etc/security/limits.d",
        "/etc/sudoers.d",
        "/etc/apparmor.d",
    ];
    if !(common::have("unshare") && common::in_memory::is_root()) {
        return;
    }
    // Mounted over, never written: they must be there (sudo and apparmor make the last two).
    if !dirs.iter().all(|d| bell_testkit::dir(d)) {
        return;
    }
    let mut driver = String::from("set -eu\n");
    for d in dirs.iter().chain(&["/var"]) {
        driver.push_str(&format!("mount -t tmpfs bell-test {d}\n"));
    }
    driver.push_str(
        "mkdir -p /var/divingbell/exec/abc /var/divingbell/apparmor /var/lib/other
touch /etc/sysctl.d/60-divingbell-net.ipv4.ip_forward.conf /etc/sysctl.d/60-bell.conf /etc/sysctl.d/99-local.conf
touch /etc/security/limits.d/60-divingbell-nofile.conf /etc/security/limits.d/local.conf
touch /etc/sudoers.d/divingbell-alice-sudo /etc/sudoers.d/bell-alice /etc/sudoers.d/README
touch /var/divingbell/apparmor/divingbell-profile-1 /etc/apparmor.d/usr.sbin.managed /var/lib/other/keep
ln -s /var/divingbell/apparmor/divingbell-profile-1 /etc/apparmor.d/divingbell-profile-1
ln -s /var/lib/other/keep /etc/apparmor.d/local-link
echo '== offline'
BELL_OFFLINE=1 sh \"$1\"
echo '== first'
BELL_OFFLINE=0 sh \"$1\"
echo '== again'
BELL_OFFLINE=0 sh \"$1\"
echo '== left'
find /etc/sysctl.d /etc/security/limits.d /etc/sudoers.d /etc/apparmor.d /var -mindepth 1 | sort
",
    );
    let driver_path = fx.path().join("driver.sh");
    std::fs::write(&driver_path, driver).expect("driver");
    let out = std::process::Command::new("unshare")
        .arg("-m")
        .arg("sh")
        .arg(&driver_path)
        .arg(&script)
        .output()
        .expect("unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |name: &str| -> Vec<&str> {
        stdout
            .lines()
            .skip_while(|l| *l != format!("== {name}"))
            .skip(1)
            .take_while(|l| !l.starts_with("== "))
            .collect()
    };
    assert_eq!(
        section("offline"),
        ["an image root: Divingbell configured booted hosts only; nothing to retire"]
    );
    assert_eq!(
        section("first"),
        [
            "removed /etc/sysctl.d/60-divingbell-net.ipv4.ip_forward.conf",
            "removed /etc/security/limits.d/60-divingbell-nofile.conf",
            "removed /etc/sudoers.d/divingbell-alice-sudo",
            "removed /etc/apparmor.d/divingbell-profile-1",
            "removed /var/divingbell",
        ]
    );
    assert!(section("again").is_empty(), "{stdout}");
    assert_eq!(
        section("left"),
        [
            "/etc/apparmor.d/local-link",
            "/etc/apparmor.d/usr.sbin.managed",
            "/etc/security/limits.d/local.conf",
            "/etc/sudoers.d/README",
            "/etc/sudoers.d/bell-alice",
            "/etc/sysctl.d/60-bell.conf",
            "/etc/sysctl.d/99-local.conf",
            "/var/lib",
            "/var/lib/other",
            "/var/lib/other/keep",
        ]
    );
}

//! `bellc import divingbell` on values shaped as the sites that ran Divingbell wrote them:
//! keys left for Deckhand to fill (`user_sshkeys: []`), daemonsets kept to some nodes, users
//! listed twice, the current chart's own keys, and the chart versions they pinned.

use crate::common;
use crate::common::Fixture;

/// The chart's current values, restated: chart settings beside the apt module's newer keys.
const CURRENT_CHART: &str = r#"images:
  tags:
    divingbell: docker.io/ubuntu:18.04
  pull_policy: IfNotPresent
labels:
  job:
    node_selector_key: openstack-control-plane
    node_selector_value: enabled
conf:
  chroot_mnt_path: '/mnt'
  log_colors: False
  extra_verbose: false
  apt:
    upgrade: false
    allow_downgrade: false
    strict: false
    blacklistpkgs:
    - telnetd
    - nis
    whitelistpkgs:
    - ubuntu-minimal
    - openssh-server
pod:
  resources:
    enabled: false
manifests:
  daemonset_apt: true
  daemonset_sysctl: true
"#;

/// A treasuremap site's uamlite before Deckhand substitutes the keys: an admin with a password
/// and `[]` for keys, as every site document wrote it.
const UNSUBSTITUTED: &str = r#"conf:
  uamlite:
    users:
    - user_name: opsadmin
      user_sudo: true
      user_crypt_passwd: $6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/
      user_sshkeys: []
"#;

const NODES: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"metadata": {"name": "cp-1", "labels": {"openstack-control-plane": "enabled"}}},
  {"metadata": {"name": "cmp-1", "labels": {"openstack-compute-node": "enabled"}}},
  {"metadata": {"name": "cmp-2", "labels": {"openstack-compute-node": "enabled", "sriov": "enabled"}}},
  {"metadata": {"name": "cmp-3", "labels": {"openstack-compute-node": "enabled"}}},
  {"metadata": {"name": "cp-2", "labels": {"openstack-control-plane": "enabled", "sriov": "enabled"}}}
]}"#;

/// `bellc import divingbell values.yaml EXTRA… --short`.
fn import(fx: &Fixture, extra: &[&str]) -> common::Run {
    let mut args = vec!["import", "divingbell", "values.yaml"];
    args.extend(extra);
    args.push("--short");
    fx.bellc(&args)
}

fn spec(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.path().join("bell.kdl")).expect("bell.kdl")
}

#[test]
fn an_empty_key_list_leaves_authorized_keys_unmanaged_as_the_chart_since_4c6ac47_does() {
    let fx = Fixture::new().file("values.yaml", UNSUBSTITUTED);
    let run = import(&fx, &["--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = spec(&fx);
    assert!(text.contains("    ssh-keys \"unmanaged\"\n"), "{text}");
    assert!(!text.contains("ssh-key \""), "{text}");
    // The chart before 4c6ac47 fails to render it: no host ever ran these values.
    for old in ["oldest", "77be358"] {
        let fx = Fixture::new().file("values.yaml", UNSUBSTITUTED);
        let run = import(&fx, &["--divingbell-version", old]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.diagnostics().iter().any(|d| d.starts_with("values.yaml:7:21: error[bell::import::invalid]: Divingbell refuses `conf.uamlite.users[0].user_sshkeys`")),
            "{}",
            run.stderr
        );
        assert!(!fx.path().join("bell.kdl").exists());
    }
}

#[test]
fn a_version_the_import_does_not_know_is_a_usage_error_naming_those_it_does() {
    let fx = Fixture::new().file("values.yaml", UNSUBSTITUTED);
    let run = fx.bellc(&[
        "import",
        "divingbell",
        "values.yaml",
        "--divingbell-version",
        "v1.9",
    ]);
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(
        run.stderr.contains("--divingbell-version: `v1.9` is not a Divingbell chart version the import knows; give `newest`, `oldest`, or the newest of these chart commits your chart includes: 77be358, 4c6ac47"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_node_selector_keeps_a_daemonset_and_its_overrides_to_its_nodes() {
    // Kernel settings for compute nodes only; SR-IOV nodes and one named node have their own.
    let values = r#"labels:
  sysctl:
    node_selector_key: openstack-compute-node
    node_selector_value: enabled
conf:
  sysctl:
    net.ipv4.ip_forward: 1
    vm.swappiness: 10
  limits:
    nofile:
      domain: root
      type: soft
      item: nofile
      value: 65536
  overrides:
    divingbell_sysctl:
      labels:
      - label: {key: sriov, values: [enabled]}
        conf:
          sysctl:
            vm.swappiness: 1
      hosts:
      - name: cmp-3
        conf:
          sysctl:
            vm.swappiness: 30
      - name: cp-1
        conf:
          sysctl:
            vm.swappiness: 60
"#;
    let fx = Fixture::new()
        .file("values.yaml", values)
        .file("nodes.json", NODES);
    let run = import(&fx, &["--inventory", "nodes.json", "--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = spec(&fx);
    assert!(text.contains("overrides=\"layered\""), "{text}");
    assert!(
        text.contains("// A daemonset runs on some nodes only (`labels.MODULE.node_selector_*`)"),
        "{text}"
    );
    assert!(
        text.contains("override \"sysctl-openstack-compute-node-enabled\" {\n    match openstack-compute-node=\"enabled\"\n"),
        "{text}"
    );
    assert!(
        text.contains("    match sriov=\"enabled\" openstack-compute-node=\"enabled\"\n"),
        "{text}"
    );
    assert!(
        text.contains("    match host=\"cmp-3\" openstack-compute-node=\"enabled\"\n"),
        "{text}"
    );
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    // What each host gets, from the build itself: compute nodes their swappiness, control
    // plane nodes (the one a host override names too) no sysctl at all, limits everywhere.
    for (host, swappiness) in [
        ("cmp-1", Some("10")),
        ("cmp-2", Some("1")),
        ("cmp-3", Some("30")),
        ("cp-1", None),
        ("cp-2", None),
    ] {
        let explain = fx.bellc(&["explain", host, "bell.kdl", "--json"]);
        assert_eq!(explain.code, 0, "{}", explain.stderr);
        let json: serde_json::Value = serde_json::from_str(&explain.stdout).unwrap();
        let text = json.to_string();
        match swappiness {
            Some(v) => assert!(
                text.contains(&format!("\"value\":\"{v}\"")) && text.contains("vm.swappiness"),
                "{host}: {text}"
            ),
            None => assert!(!text.contains("swappiness"), "{host}: {text}"),
        }
        assert!(text.contains("nofile"), "{host}: {text}");
    }
    // The control-plane node's own override applies to no node Divingbell runs sysctl on.
    assert!(run.stderr.contains("verified: 5 hosts"), "{}", run.stderr);
}

#[test]
fn a_user_listed_twice_alike_is_one_user_and_listed_otherwise_an_error_naming_both() {
    let user = |sudo: &str| {
        format!("    - user_name: ag073n\n      user_sudo: {sudo}\n      user_sshkeys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ag073n\n")
    };
    let other =
        "    - user_name: jm9213\n      user_sudo: true\n      user_sshkeys: [ Unmanaged ]\n";
    let alike = format!(
        "conf:\n  uamlite:\n    users:\n{}{other}{}",
        user("true"),
        user("true")
    );
    let fx = Fixture::new().file("values.yaml", &alike);
    let run = import(&fx, &["--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(spec(&fx).matches("user \"ag073n\"").count(), 1);

    let unlike = format!(
        "conf:\n  uamlite:\n    users:\n{}{other}{}",
        user("true"),
        user("false")
    );
    let fx = Fixture::new().file("values.yaml", &unlike);
    let run = import(&fx, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.diagnostics(),
        ["values.yaml:11:18: error[bell::import::refused]: `conf.uamlite.users[2]` declares user `ag073n` again, otherwise than `conf.uamlite.users[0]`: Divingbell runs both in turn, which one bellc user cannot say"],
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("bell.kdl").exists());
}

#[test]
fn the_current_charts_own_values_import_without_a_warning() {
    let fx = Fixture::new().file("values.yaml", CURRENT_CHART);
    let run = import(&fx, &["--verify", "--deny-warnings"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.diagnostics().is_empty(), "{}", run.stderr);
    let text = spec(&fx);
    assert!(
        text.contains("// Settings of the chart, not of hosts, not imported: images, labels, conf.chroot_mnt_path, conf.log_colors, conf.extra_verbose, pod, manifests."),
        "{text}"
    );
    assert!(text.contains("package \"telnetd\" absent=#true"), "{text}");
    assert!(!text.contains("allow-downgrade"), "{text}");
    // One line says what was compared.
    let verified: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("verified: "))
        .collect();
    assert_eq!(
        verified,
        ["verified: 2 hosts, 8 resources compared, each as Divingbell gives it"],
        "{}",
        run.stderr
    );
}

#[test]
fn the_current_charts_apt_keys_say_what_they_do() {
    // Downgrades for every package; packages grouped by name, installed in the groups' order;
    // strict mode, which bellc does not have, a warning at its key.
    let values = r#"conf:
  apt:
    allow_downgrade: true
    strict: true
    whitelistpkgs: [openssh-server]
    packages:
      tools:
      - name: htop
      base:
      - name: less
        version: 590-1ubuntu0.22.04.3
"#;
    let fx = Fixture::new().file("values.yaml", values);
    let run = import(&fx, &["--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.diagnostics(),
        ["values.yaml:4:5: warning[bell::import::not_imported]: `conf.apt.strict`: Divingbell purges every installed package `packages` does not name (but `whitelistpkgs`); bellc removes only what it installed and the spec no longer names, so the spec keeps the other packages of a host"],
        "{}",
        run.stderr
    );
    let text = spec(&fx);
    assert!(text.contains("apt allow-downgrade=#true"), "{text}");
    let less = text.find("package \"less\"").expect("less");
    let htop = text.find("package \"htop\"").expect("htop");
    assert!(less < htop, "{text}");
    // Under --deny-warnings the warning stops the import, and nothing is written.
    let fx = Fixture::new().file("values.yaml", values);
    let run = import(&fx, &["--deny-warnings"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(!fx.path().join("bell.kdl").exists());
}

#[test]
fn what_bellc_says_of_an_override_is_said_at_its_values_with_the_reason() {
    // Two label overrides for the same nodes: Divingbell takes the last, so the first applies
    // nowhere although it matches them.
    let values = r#"conf:
  sysctl:
    vm.swappiness: 10
  overrides:
    divingbell_sysctl:
      labels:
      - label: {key: openstack-compute-node, values: [enabled]}
        conf:
          sysctl:
            vm.swappiness: 20
      - label: {key: openstack-compute-node, values: [enabled]}
        conf:
          sysctl:
            vm.swappiness: 30
"#;
    let fx = Fixture::new()
        .file("values.yaml", values)
        .file("nodes.json", NODES);
    let run = import(&fx, &["--inventory", "nodes.json", "--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("values.yaml:7:9: warning[bell::import::warned]: bellc warns of this: override `openstack-compute-node-enabled` matches no host\n  help: it matches 3 hosts (cmp-1, cmp-2, cmp-3), and each takes another override: with overrides=\"exclusive\" a host takes one"),
        "{}",
        run.stderr
    );
}

#[test]
fn with_several_values_files_each_warning_and_comment_names_the_file_that_applies() {
    // Armada's stack: the chart, then the global document, then the site's.
    let chart = "conf:\n  apt:\n    blacklistpkgs: [telnetd]\n";
    let global = "conf:\n  sysctl:\n    vm.swappiness: 10\n  perm:\n    rerun_interval: 60\n";
    let site = "conf:\n  sysctl:\n    vm.swappiness: 1\n  perm:\n    rerun_interval: 120\n";
    let fx = Fixture::new()
        .file("chart.yaml", chart)
        .file("global.yaml", global)
        .file("site.yaml", site);
    let run = fx.bellc(&[
        "import",
        "divingbell",
        "chart.yaml",
        "global.yaml",
        "site.yaml",
        "--verify",
        "--short",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.diagnostics()[0].starts_with(
            "site.yaml:5:5: warning[bell::import::not_imported]: `conf.perm.rerun_interval`"
        ),
        "{}",
        run.stderr
    );
    let text = spec(&fx);
    assert!(
        text.contains("// divingbell (values site.yaml line 5): `conf.perm.rerun_interval`"),
        "{text}"
    );
    assert!(text.contains("vm.swappiness 1\n"), "{text}");
}

/// Whether the image's `ubuntu` account ends expired on `cmp-1`, from what the build gives it.
fn expires_ubuntu(fx: &Fixture) -> bool {
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short", "--force"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    fx.path()
        .join("out/hosts/cmp-1/scripts/default-account/ubuntu.apply")
        .exists()
}

#[test]
fn the_image_account_is_expired_or_kept_by_the_rule_of_the_chart_version() {
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2";
    // A lab's operator: sudo and a key, no password. Since 77be358 uamlite wants a sudo user
    // with a password too, so `ubuntu` stays; bellc's own rule would expire it.
    let lab = format!("conf:\n  uamlite:\n    users:\n    - user_name: labop\n      user_sudo: true\n      user_sshkeys:\n      - {KEY} labop\n");
    // A site's admins whose keys are left alone: the oldest charts expire `ubuntu` for any
    // other sudo user; bellc would keep it, since none can log in through it.
    let site = "conf:\n  uamlite:\n    users:\n    - user_name: siteop\n      user_sudo: true\n      user_sshkeys: [ Unmanaged ]\n";
    for (values, version, property, expired) in [
        (lab.as_str(), "newest", Some("keep"), false),
        (lab.as_str(), "oldest", None, true),
        (site, "oldest", Some("expire"), true),
        (site, "newest", None, false),
    ] {
        let fx = Fixture::new()
            .file("values.yaml", values)
            .file("nodes.json", NODES);
        let run = import(
            &fx,
            &[
                "--inventory",
                "nodes.json",
                "--target",
                "ubuntu-22.04",
                "--divingbell-version",
                version,
                "--verify",
            ],
        );
        assert_eq!(run.code, 0, "{version}: {}", run.stderr);
        let text = spec(&fx);
        match property {
            Some(p) => assert!(
                text.contains(&format!("users default-account=\"{p}\"")),
                "{version}: {text}"
            ),
            None => assert!(!text.contains("default-account"), "{version}: {text}"),
        }
        assert_eq!(expires_ubuntu(&fx), expired, "{version}: {text}");
    }
}

#[test]
fn host_lines_keep_the_labels_the_overrides_match_and_the_rest_goes_beside() {
    // What `kubectl get nodes -o json` gives: kubelet's and the site's labels by the dozen.
    let node = |name: &str, role: &str| {
        format!(
            r#"{{"metadata": {{"name": "{name}", "labels": {{"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/hostname": "{name}", "node-role.kubernetes.io/{role}": "", "openstack-compute-node": "{}", "ucp-control-plane": "enabled"}}}}, "status": {{"addresses": [{{"type": "InternalIP", "address": "10.0.0.{}"}}]}}}}"#,
            if role == "worker" {
                "enabled"
            } else {
                "disabled"
            },
            name.len()
        )
    };
    let nodes = format!(
        r#"{{"kind": "List", "items": [{}, {}]}}"#,
        node("cmp-1", "worker"),
        node("ctl-01", "master")
    );
    let values = "conf:\n  sysctl:\n    vm.swappiness: 10\n  overrides:\n    divingbell_sysctl:\n      labels:\n      - label: {key: openstack-compute-node, values: [enabled]}\n        conf:\n          sysctl:\n            vm.swappiness: 1\n";
    let fx = Fixture::new()
        .file("values.yaml", values)
        .file("nodes.json", &nodes);
    let args = [
        "import",
        "divingbell",
        "values.yaml",
        "--inventory",
        "nodes.json",
        "--verify",
        "--short",
    ];
    let run = fx.bellc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = spec(&fx);
    assert!(
        text.contains("host \"cmp-1\" address=\"10.0.0.5\" openstack-compute-node=\"enabled\"\nhost \"ctl-01\" address=\"10.0.0.6\" openstack-compute-node=\"disabled\"\n"),
        "{text}"
    );
    assert!(!text.contains("kubernetes.io"), "{text}");
    // Every label is kept beside, in an inventory bellc reads in place of the host lines.
    let beside = std::fs::read_to_string(fx.path().join("bell.nodes.json")).unwrap();
    assert!(
        beside.contains("\"beta.kubernetes.io/arch\": \"amd64\""),
        "{beside}"
    );
    let from_inventory: String = text
        .lines()
        .filter(|l| !l.starts_with("host "))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + "inventory \"bell.nodes.json\"\n";
    std::fs::write(fx.path().join("inventory.kdl"), from_inventory).unwrap();
    let check = fx.bellc(&["explain", "cmp-1", "inventory.kdl"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check.stdout.contains("beta.kubernetes.io/arch"),
        "{}",
        check.stdout
    );
    // Neither file is replaced without --force.
    let again = fx.bellc(&args);
    assert_eq!(again.code, 2, "{}", again.stderr);
    std::fs::remove_file(fx.path().join("bell.kdl")).unwrap();
    let again = fx.bellc(&args);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again.stderr.contains("bell.nodes.json exists"),
        "{}",
        again.stderr
    );
    // `--labels used` leaves the others out, and writes nothing beside.
    let fx = Fixture::new()
        .file("values.yaml", values)
        .file("nodes.json", &nodes);
    let mut used = args.to_vec();
    used.extend(["--labels", "used"]);
    let run = fx.bellc(&used);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!fx.path().join("bell.nodes.json").exists());
    assert!(spec(&fx).contains("their other labels are left out"));
}

#[test]
fn the_releases_the_sites_ran_are_targets() {
    for target in ["ubuntu-18.04", "ubuntu-20.04"] {
        let fx = Fixture::new()
            .file("values.yaml", UNSUBSTITUTED)
            .file("nodes.json", NODES);
        let run = import(
            &fx,
            &["--inventory", "nodes.json", "--target", target, "--verify"],
        );
        assert_eq!(run.code, 0, "{target}: {}", run.stderr);
        // The admin has a password and no keys: uamlite keeps `ubuntu`, bellc's rule would not.
        assert!(spec(&fx).contains("users default-account=\"keep\""));
        assert!(!expires_ubuntu(&fx), "{target}");
        // Their kernels' keys are borrowed: an unknown key is a warning, not an error.
        let with_key = spec(&fx).replace(
            "fleet \"values\"",
            "sysctl {\n    net.ipv4.no_such_key 1\n}\nfleet \"values\"",
        );
        std::fs::write(fx.path().join("key.kdl"), with_key).unwrap();
        let check = fx.bellc(&["check", "key.kdl", "--short"]);
        assert_eq!(check.code, 0, "{target}: {}", check.stderr);
        assert!(
            check.stderr.contains("no_such_key"),
            "{target}: {}",
            check.stderr
        );
    }
}

/// A site's values with a password hash and debconf passwords, imported with
/// `--secrets-recipient`: each secret goes into an age file beside the spec, encrypted to that
/// recipient and named in `secrets.kdl`, and the spec (then 0644) holds none. Built with the
/// recipient's key it gives the very release the spec with the secrets written in it gives;
/// `bellc secrets check` passes; nothing written or printed holds a secret in the clear.
#[test]
fn site_secrets_go_into_encrypted_files_and_none_into_the_spec() {
    const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
    let values = format!(
        "{UNSUBSTITUTED}  apt:\n    packages:\n    - name: mysql-server\n      debconf:\n      \
         - question: mysql-server/root_password\n        question_type: password\n        \
         answer: site-db-pass-7\n      - question: mysql-server/root_password_again\n        \
         question_type: password\n        answer: site-db-pass-7\n"
    );
    let key = common::example_secrets_key();
    let identities = common::example_secrets_identities();
    let recipient = identities[0].recipient().describe();
    let plain = Fixture::new()
        .file("values.yaml", &values)
        .file("nodes.json", NODES);
    let run = import(&plain, &["--inventory", "nodes.json", "--verify"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Without a recipient the import says where each secret is, at the values' lines.
    let at_rest = "bellc warns of this: a secret is written in the spec in the clear";
    let warned: Vec<&str> = run
        .diagnostics()
        .into_iter()
        .filter(|d| d.contains(at_rest))
        .collect();
    assert_eq!(warned.len(), 3, "{}", run.stderr);
    assert!(warned[0].starts_with("values.yaml:6:26:"), "{warned:?}");

    let fx = Fixture::new()
        .file("values.yaml", &values)
        .file("nodes.json", NODES);
    let run = import(
        &fx,
        &[
            "--inventory",
            "nodes.json",
            "--verify",
            "--secrets-recipient",
            &recipient,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains(at_rest), "{}", run.stderr);
    let text = spec(&fx);
    assert!(
        text.contains("    password file=\"secrets/opsadmin.hash.age\"\n"),
        "{text}"
    );
    assert!(
        text.contains("debconf \"mysql-server/root_password\" type=\"password\" file=\"secrets/mysql-server.root_password.age\""),
        "{text}"
    );
    let mode = std::fs::metadata(fx.path().join("bell.kdl"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o644
    );
    let secrets_kdl = std::fs::read_to_string(fx.path().join("secrets.kdl")).unwrap();
    assert!(
        secrets_kdl.contains(&format!("build \"{recipient}\"\n"))
            && secrets_kdl.contains("secret \"secrets/opsadmin.hash.age\"\n"),
        "{secrets_kdl}"
    );
    let opened = |file: &str| {
        let bytes = std::fs::read(fx.path().join(file)).unwrap();
        String::from_utf8(bell_seal::at_rest::decrypt(&bytes, &identities).unwrap()).unwrap()
    };
    assert_eq!(opened("secrets/opsadmin.hash.age"), HASH);
    assert_eq!(
        opened("secrets/mysql-server.root_password.age"),
        "site-db-pass-7"
    );

    std::fs::copy(&key, fx.path().join("ci.key")).unwrap();
    let with_key = ["--secrets-key", "ci.key"];
    let check = fx.bellc(&[&["secrets", "check", "bell.kdl"][..], &with_key].concat());
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    let built = fx.bellc(&[&["build", "bell.kdl", "-o", "out"][..], &with_key].concat());
    assert_eq!(built.code, 0, "{}", built.stderr);
    let plain_built = plain.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(plain_built.code, 0, "{}", plain_built.stderr);
    let release = |dir: &std::path::Path| std::fs::read(dir.join("out/release.json")).unwrap();
    assert_eq!(
        release(fx.path()),
        release(plain.path()),
        "the same release"
    );

    // Only values.yaml (the input) and what the build sealed for its hosts in the clear
    // (`secrets="plaintext"`: these hosts have no identities) hold them.
    for (path, bytes) in common::tree(fx.path()) {
        if path == "values.yaml" || path.starts_with("out/") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for secret in [HASH, "site-db-pass-7", "bellsalt0123"] {
            assert!(!text.contains(secret), "{path} holds {secret}");
        }
    }
    for output in [&run.stdout, &run.stderr, &built.stdout, &built.stderr] {
        assert!(
            !output.contains("bellsalt") && !output.contains("site-db-pass"),
            "{output}"
        );
    }
}

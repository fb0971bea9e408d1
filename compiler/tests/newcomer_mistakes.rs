//! What a platform engineer new to bellc gets wrong in a first spec (a YAML habit, a typo in a
//! value, a property written as a child node, a label value that matches nothing) comes back at
//! the value's own line and column, with a help line that says the fix, in one run.
use crate::common::*;

const VALUES: &str = r##"fleet "first" target="debian-12"
host "node-1" role="compute" address="10.0.2.256"
host "cmp_04" role="control" address="10.0.2.15"
host "node-2" role="compute" address="10.0.2.15"
host "node-3" role="compute" address="fd00::3"
limit "nofile" domain="*" type="soft" item="nofile" value="lots"
limit "core" domain="*" type="hard" item="core" value="unlimited"
limit "nice" domain="@staff" type="-" item="nice" value=-5
limit "memlock" {
    value "1024"
}
exec "motd.sh" {
    script "echo hello > /etc/motd\n"
}
exec "late.sh" {
    script "\n#!/bin/sh\necho hi\n"
}
"##;

fn expect(diags: &[&str], location: &str, message: &str) {
    assert!(
        diags
            .iter()
            .any(|d| d.starts_with(location) && d.contains(message)),
        "missing `{location} {message}` in:\n{}",
        diags.join("\n")
    );
}

#[test]
fn values_are_checked_where_they_are_written() {
    let run = Fixture::spec(VALUES).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "bell.kdl:2:30:",
        "error[bell::lower::invalid_value]: `10.0.2.256` is not an IPv4 address: `256`",
    );
    expect(
        &diags,
        "bell.kdl:3:6:",
        "error[bell::lower::invalid_value]: host name `cmp_04` contains `_`",
    );
    expect(
        &diags,
        "bell.kdl:4:30:",
        "warning[bell::lower::duplicate_address]: address 10.0.2.15 is given to `node-2` and to `cmp_04`",
    );
    expect(
        &diags,
        "bell.kdl:6:53:",
        "error[bell::lower::invalid_value]: `lots` is not a limit value",
    );
    expect(
        &diags,
        "bell.kdl:10:5:",
        "error[bell::lower::unknown_node]: unknown node `value` in this resource",
    );
    expect(
        &diags,
        "bell.kdl:13:12:",
        "error[bell::lower::invalid_value]: the script has no `#!` line",
    );
    expect(
        &diags,
        "bell.kdl:16:12:",
        "error[bell::lower::invalid_value]: the script's `#!` line is not its first line",
    );
    // Only these: `unlimited`, a negative nice and an IPv6 address are fine.
    assert_eq!(diags.len(), 7, "{}", diags.join("\n"));
    // `--short` keeps each help line, with the fix in it.
    for help in [
        "help: host names are letters, digits, `-` and `.` (RFC 1123); write `cmp-04`",
        "help: `value` is a property of `limit`: write it on the `limit` line",
        "help: a limit is a whole number",
        "help: bell-run runs the script as a program: begin it with an interpreter line",
    ] {
        assert!(run.stderr.contains(help), "no `{help}` in:\n{}", run.stderr);
    }
}

const SYSCTL: &str = r#"fleet "first" target="debian-12"
host "a" role="compute"
host "u" target="ubuntu-24.04" role="edge"
sysctl {
    vm.swapiness 10
    vm.swappiness "ten"
    net.ipv4.conf.eth0.rp_filtr 1
    "net/ipv4/conf/eth0.100/rp_filter" 1
    kernel.random.boot_id "x"
    net.netfilter.nf_conntrack_max 1048576
    net.bridge.bridge-nf-call-iptables 1
    vendor.knob.level 3 unknown=#true
    kernel.core_pattern "|/usr/lib/systemd/systemd-coredump %P %u"
    net.ipv4.tcp_rmem "4096 131072 6291456"
    kernel.watchdog_cpumask "0-3"
    vm.overcommit_memory #null
}
override "edge" {
    match role="edge"
    sysctl { vm.dirty_ratoi 5; }
}
"#;

#[test]
fn sysctl_keys_and_values_are_checked_against_the_targets_kernel() {
    let run = Fixture::spec(SYSCTL).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "bell.kdl:5:5:",
        "error[bell::resolve::unknown_sysctl]: `vm.swapiness` is not a sysctl key of debian-12",
    );
    expect(
        &diags,
        "bell.kdl:6:19:",
        "error[bell::resolve::sysctl_not_a_number]: `vm.swappiness` takes a number, not `ten`",
    );
    expect(
        &diags,
        "bell.kdl:7:5:",
        "`net.ipv4.conf.eth0.rp_filtr` is not a sysctl key of debian-12",
    );
    expect(
        &diags,
        "bell.kdl:9:5:",
        "error[bell::resolve::read_only_sysctl]: `kernel.random.boot_id` is read-only",
    );
    // Ubuntu borrows Debian's list, so there it is a warning.
    expect(
        &diags,
        "bell.kdl:20:14:",
        "warning[bell::resolve::unknown_sysctl]: `vm.dirty_ratoi` may not be a sysctl key of ubuntu-24.04",
    );
    assert_eq!(diags.len(), 5, "{}", diags.join("\n"));
    for help in [
        "help: did you mean `vm.swappiness`?",
        "help: did you mean `net.ipv4.conf.eth0.rp_filter`?",
        "help: did you mean `vm.dirty_ratio`?",
        "help: write a whole number, such as `vm.swappiness 10`",
    ] {
        assert!(run.stderr.contains(help), "no `{help}` in:\n{}", run.stderr);
    }

    // `--allow-unknown-sysctl` accepts keys the list lacks, not a word for a number.
    let run = Fixture::spec(SYSCTL).bellc(&["--short", "--allow-unknown-sysctl", "check"]);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 2, "{}", diags.join("\n"));
    expect(&diags, "bell.kdl:6:19:", "takes a number, not `ten`");
    expect(&diags, "bell.kdl:9:5:", "is read-only");
}

const TEMPLATES: &str = r##"fleet "first" target="debian-12"
host "c1" role="control" address="10.0.0.1" rack="r1"
host "c2" role="control" address="10.0.0.2" rack="r2"
host "w1" role="compute" address="10.0.0.3"
host "w2" role="compute" address="10.0.0.4"
override "control" {
    match role="control"
    service "etcd" port=2379
}
file "/etc/peers.conf" {
    content #"""
        {% for p in services.etcd %}
        {{ p.adress }}:{{ p.port }}
        {% endfor %}
        """#
}
file "/etc/endpoints.conf" {
    content "etcd={{ service.etcd | length }}\n"
}
file "/etc/rack.conf" {
    content "rack={{ host.labels.rack }}\n"
}
"##;

#[test]
fn a_template_error_names_the_undefined_name_once_with_its_hosts() {
    let run = Fixture::spec(TEMPLATES).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 3, "{}", diags.join("\n"));
    expect(
        &diags,
        "bell.kdl:13:12:",
        "`p.adress` is undefined (on hosts `c1`, `c2`, `w1`, `w2`)",
    );
    expect(
        &diags,
        "bell.kdl:18:22:",
        "`service` is undefined (on hosts `c1`, `c2`, `w1`, `w2`)",
    );
    // Only the hosts without the label.
    expect(
        &diags,
        "bell.kdl:21:22:",
        "`host.labels.rack` is undefined (on hosts `w1`, `w2`)",
    );
    for help in [
        "help: did you mean `p.address`? `p` has: address, host, port",
        "help: did you mean `services`? the template sees: fleet, host, services",
        "help: `host.labels` has: role",
    ] {
        assert!(run.stderr.contains(help), "no `{help}` in:\n{}", run.stderr);
    }
}

const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHgmFwCM0VkW1QLvFmHDBbg3zrF8gqAodb9wGN6x5S5W ops@laptop";
const KEY_B: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGV3bmt2k4N7RZ3q8Q6hD8fKfVQ0f5bW3vV0m8rJ7pXk ops@desk";

#[test]
fn ssh_keys_are_read_from_a_file_of_the_specs_tree() {
    let spec = r#"fleet "first" target="debian-12"
host "h"
user "ops" sudo=#true {
    ssh-key file="keys/ops.pub"
}
"#;
    let fx = Fixture::spec(spec).file(
        "keys/ops.pub",
        &format!("# the ops team\n{KEY_A}\n\n{KEY_B}\n"),
    );
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let apply =
        std::fs::read_to_string(fx.path().join("out/hosts/h/scripts/user/ops.apply")).unwrap();
    assert!(
        apply.contains("ops@laptop") && apply.contains("ops@desk"),
        "{apply}"
    );
    assert!(!apply.contains("the ops team"), "{apply}");
}

#[test]
fn a_key_file_is_checked_line_by_line_and_never_read_outside_the_tree() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id.pub");
    std::fs::write(&secret, format!("{KEY_A}\n")).unwrap();
    let spec = format!(
        r#"fleet "first" target="debian-12"
host "h"
user "a" {{
    ssh-key "keys/ops.pub"
}}
user "b" {{
    ssh-key file="keys/bad.pub"
}}
user "c" {{
    ssh-key file="{}"
}}
user "d" {{
    ssh-key file="keys/link.pub"
}}
user "e" {{
    ssh-key file="keys/none.pub"
}}
"#,
        secret.display()
    );
    let fx = Fixture::spec(&spec)
        .file("keys/ops.pub", &format!("{KEY_A}\n"))
        .file(
            "keys/bad.pub",
            &format!("{KEY_A}\nssh-rsa AAAA-not-base64\n"),
        );
    std::os::unix::fs::symlink(&secret, fx.path().join("keys/link.pub")).unwrap();
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "bell.kdl:4:13:",
        "error[bell::lower::invalid_value]: `keys/ops.pub` looks like a path, not an ssh public key",
    );
    expect(
        &diags,
        "keys/bad.pub:2:1:",
        "error[bell::lower::invalid_value]: the key data of this `ssh-rsa` key is not valid base64",
    );
    expect(
        &diags,
        "bell.kdl:10:13:",
        &format!("cannot read ssh key file `{}`", secret.display()),
    );
    assert!(
        diags
            .iter()
            .any(|d| d.starts_with("bell.kdl:10:13:")
                && d.ends_with(": outside the spec's directory")),
        "{}",
        diags.join("\n")
    );
    expect(
        &diags,
        "bell.kdl:13:13:",
        "error[bell::load::unreadable]: cannot read ssh key file `keys/link.pub`: outside the spec's directory",
    );
    expect(
        &diags,
        "bell.kdl:16:13:",
        "cannot read ssh key file `keys/none.pub`: no such file",
    );
    assert!(
        run.stderr
            .contains("help: `ssh-key` takes the key itself; to read keys from a file of the spec's tree, write `ssh-key file=\"keys/ops.pub\"`"),
        "{}",
        run.stderr
    );
    // Nothing of the file outside the tree is echoed.
    assert!(!run.stderr.contains("AAAAC3Nza"), "{}", run.stderr);
}

/// A key path from a home directory or outside the tree: each help says `~` is not expanded and
/// where to copy the file, and following it works.
#[test]
fn key_file_helps_say_tilde_is_not_expanded_and_where_to_copy_the_file() {
    let spec = r#"fleet "f" target="debian-12"
host "a"
user "ops" {
    ssh-key "~/.ssh/id_ed25519.pub"
}
user "dev" {
    ssh-key file="~/.ssh/id_ed25519.pub"
}
user "ci" {
    ssh-key file="/root/.ssh/ci.pub"
}
"#;
    let fx = Fixture::spec(spec);
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "bell.kdl:4:13:",
        "`~/.ssh/id_ed25519.pub` looks like a path, not an ssh public key",
    );
    expect(
        &diags,
        "bell.kdl:7:13:",
        "error[bell::load::unreadable]: cannot read ssh key file `~/.ssh/id_ed25519.pub`: `~` is not expanded",
    );
    expect(
        &diags,
        "bell.kdl:10:13:",
        "cannot read ssh key file `/root/.ssh/ci.pub`: outside the spec's directory",
    );
    for help in [
        "(`~` is not expanded): copy it beside the spec and write `ssh-key file=\"id_ed25519.pub\"`",
        "/id_ed25519.pub and write `\"id_ed25519.pub\"`: a path is relative to the spec's directory",
        "/ci.pub and write `\"ci.pub\"`: a path is relative to the spec's directory",
    ] {
        assert!(run.stderr.contains(help), "no `{help}` in:\n{}", run.stderr);
    }
    // Followed: the keys copied beside the spec, the names the helps gave.
    let key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@b\n";
    let fx = Fixture::spec(
        &spec
            .replace(
                "ssh-key \"~/.ssh/id_ed25519.pub\"",
                "ssh-key file=\"id_ed25519.pub\"",
            )
            .replace("file=\"~/.ssh/id_ed25519.pub\"", "file=\"id_ed25519.pub\"")
            .replace("file=\"/root/.ssh/ci.pub\"", "file=\"ci.pub\""),
    )
    .file("id_ed25519.pub", key)
    .file("ci.pub", key);
    let run = fx.bellc(&["check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn explain_shows_values_as_the_spec_writes_them_and_every_implied_resource() {
    let spec = format!(
        r#"fleet "first" target="debian-12"
host "h" role="web"
host "g" role="db"
sysctl {{
    vm.swappiness 10
    kernel.printk "4 4 1 7"
}}
limit "nofile" domain="*" type="soft" item="nofile" value=65536
override "web" {{
    match role="web"
    user "ops" sudo=#true {{
        ssh-key "{KEY_A}"
    }}
}}
"#
    );
    let fx = Fixture::spec(&spec);
    let run = fx.bellc(&["explain", "h"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = &run.stdout;
    for line in [
        "    vm.swappiness 10 ",
        "    kernel.printk \"4 4 1 7\" ",
        "    value=65536 ",
        "    sudo=#true {",
        "    ssh-key \"ssh-ed25519 ",
        "// implied: default-account \"debian\" ",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(line)),
            "no line starting `{line}` in:\n{out}"
        );
    }
    let implied = out
        .lines()
        .find(|l| l.starts_with("// implied: default-account"))
        .unwrap();
    assert!(implied.ends_with("// by web  bell.kdl:11"), "{implied}");
    assert!(
        out.contains("//   `user:ops` can log in and become root, so the image's own `debian` account is locked and expired"),
        "{out}"
    );
    // Host g has no admin: nothing implied.
    let run = fx.bellc(&["explain", "g"]);
    assert!(!run.stdout.contains("default-account"), "{}", run.stdout);

    // The build says it once, with the hosts that get it, and they are the ones whose bundle
    // has it.
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let said: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("implied:"))
        .collect();
    assert_eq!(said.len(), 1, "{}", run.stderr);
    assert!(
        said[0].starts_with("implied: default-account:debian on 1 host: `user:ops`"),
        "{}",
        said[0]
    );
    assert!(fx
        .path()
        .join("out/hosts/h/scripts/default-account/debian.apply")
        .is_file());
    assert!(!fx
        .path()
        .join("out/hosts/g/scripts/default-account")
        .exists());
}

#[test]
fn explain_takes_the_spec_and_the_host_in_either_order() {
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\"\nhost \"node-1\"\n");
    let swapped = fx.bellc(&["explain", "bell.kdl", "node-1"]);
    assert_eq!(swapped.code, 0, "{}", swapped.stderr);
    assert!(
        swapped.stdout.contains("host \"node-1\""),
        "{}",
        swapped.stdout
    );
    assert_eq!(
        swapped.stdout,
        fx.bellc(&["explain", "node-1", "bell.kdl"]).stdout
    );
}

#[test]
fn a_build_allowed_unknown_sysctl_keys_is_not_up_to_date_for_a_build_that_is_not() {
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nsysctl {\n    vendor.knob.level 3\n}\n",
    );
    let allowed = fx.bellc(&["--allow-unknown-sysctl", "build", "bell.kdl", "-o", "out"]);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let again = fx.bellc(&["--allow-unknown-sysctl", "build", "bell.kdl", "-o", "out"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let strict = fx.bellc(&["--short", "build", "bell.kdl", "-o", "out"]);
    assert_eq!(strict.code, 1, "{}", strict.stderr);
    expect(
        &strict.diagnostics(),
        "bell.kdl:4:5:",
        "`vendor.knob.level` is not a sysctl key of debian-12",
    );
}

#[test]
fn an_inventory_address_is_checked_too() {
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\"\ninventory \"nodes.json\"\n").file(
        "nodes.json",
        r#"[{"name":"a","address":"10.0.0.1; id"},{"name":"b","address":"10.0.0.7"},{"name":"c","address":"10.0.0.7"}]"#,
    );
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "nodes.json:1:10:",
        "inventory host `a`: `10.0.0.1; id` is not an IP address",
    );
    expect(
        &diags,
        "nodes.json:1:",
        "warning[bell::lower::duplicate_address]: address 10.0.0.7 is given to `c` and to `b`",
    );
}

#[test]
fn a_bare_true_says_how_kdl_writes_booleans() {
    let run = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nuser \"ops\" sudo=true\nsysctl { vm.swappiness null; }\n",
    )
    .bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    expect(
        &diags,
        "bell.kdl:3:17:",
        "error[bell::parse::syntax]: bare `true` is not a value in KDL 2",
    );
    expect(
        &diags,
        "bell.kdl:4:24:",
        "error[bell::parse::syntax]: bare `null` is not a value in KDL 2",
    );
    assert!(
        run.stderr
            .contains("help: KDL 2 booleans are `#true` and `#false`: write `#true`"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_check_with_warnings_ends_ok_with_their_count() {
    let run = Fixture::spec(
        r#"fleet "f" target="debian-12"
host "a" role="compute"
override "x" {
    match role="storage"
    sysctl { vm.swappiness 10 }
}
"#,
    )
    .bellc(&["--short", "check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    expect(
        &run.diagnostics(),
        "bell.kdl:4:11:",
        "warning[bell::resolve::unknown_label]: no host carries the label `role=storage`",
    );
    assert!(
        run.stderr.contains("help: values of `role`: compute"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.lines().last(),
        Some("bell.kdl: ok, 2 warnings"),
        "{}",
        run.stderr
    );
    // Without warnings, a bare "ok".
    let run = Fixture::spec("fleet \"f\" target=\"debian-12\"\nhost \"a\"\n").bellc(&["check"]);
    assert_eq!(run.stderr.trim_end(), "bell.kdl: ok", "{}", run.stderr);
}

/// A selector one typo away from a label, a value or a host name the inventory has is an error
/// (the override's values would miss every host they were written for); one that matches
/// nothing otherwise, or differs only in its digits (a host or rack still to come), warns.
#[test]
fn a_selector_one_typo_from_the_inventory_is_an_error() {
    let run = Fixture::spec(
        r#"fleet "f" target="debian-12"
host "web-1" role="web" rack="r01"
host "web-3" role="web" rack="r01"
override "typo-value" {
    match role="wbe"
    sysctl { vm.swappiness 10 }
}
override "typo-host" {
    match host="web3"
    sysctl { vm.swappiness 11 }
}
override "typo-label" {
    match rloe="web"
    sysctl { vm.swappiness 12 }
}
override "next-rack" {
    match rack="r02"
    sysctl { vm.swappiness 13 }
}
override "next-host" {
    match host="web-4"
    sysctl { vm.swappiness 14 }
}
"#,
    )
    .bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    for (at, selector, suggestion) in [
        ("bell.kdl:5:11:", "role=wbe", "role=\"web\""),
        ("bell.kdl:9:11:", "host=web3", "host=\"web-3\""),
        ("bell.kdl:13:11:", "rloe=web", "role=\"web\""),
    ] {
        expect(
            &diags,
            at,
            &format!(
                "error[bell::resolve::misspelt_selector]: no host carries `{selector}`: a typo of `{suggestion}`?"
            ),
        );
        assert!(
            run.stderr
                .contains(&format!("help: did you mean `{suggestion}`? A selector")),
            "{}",
            run.stderr
        );
    }
    expect(
        &diags,
        "bell.kdl:17:11:",
        "warning[bell::resolve::unknown_label]: no host carries the label `rack=r02`",
    );
    expect(
        &diags,
        "bell.kdl:21:11:",
        "warning[bell::resolve::unknown_label]: no host carries the label `host=web-4`",
    );
    assert_eq!(
        diags.iter().filter(|d| d.contains(": error[")).count(),
        3,
        "{}",
        run.stderr
    );
}

/// The reports as a user sees them (no colour, 80 columns), reviewed as a snapshot.
#[test]
fn the_reports_read_well() {
    let run = Fixture::spec(VALUES).bellc(&["check"]);
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn the_template_reports_read_well() {
    let run = Fixture::spec(TEMPLATES).bellc(&["check"]);
    insta::assert_snapshot!(run.stderr);
}

#[test]
fn the_sysctl_reports_read_well() {
    let run = Fixture::spec(SYSCTL).bellc(&["check"]);
    insta::assert_snapshot!(run.stderr);
}

/// One grammar for values: every duration takes `90`, `"90s"`, `"5m"` and `"1h"` (an exec's
/// timeout as a probe's), a number in quotes is refused wherever a number goes (as a boolean in
/// quotes is), and a mode has its four digits.
#[test]
fn durations_numbers_and_modes_have_one_grammar() {
    let good = r##"fleet "f" target="debian-12"
host "h"
exec "a.sh" timeout="1h" retry-interval="5m" rerun-interval=90 {
    script "#!/bin/sh\necho a\n"
}
health "up" timeout=5 interval="2s" {
    run "true"
}
"##;
    let fx = Fixture::spec(good);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = std::fs::read_dir(fx.path().join("out/bundles"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("bundle.json")).unwrap()).unwrap();
    let exec = manifest["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|r| r.get("exec"))
        .expect("the exec's policy");
    assert_eq!(exec["timeout"], 3600, "{exec}");
    assert_eq!(exec["retry_interval"], 300, "{exec}");
    assert_eq!(exec["rerun_interval"], 90, "{exec}");

    let bad = r##"fleet "f" target="debian-12"
host "h"
exec "b.sh" timeout="90" {
    script "#!/bin/sh\n"
}
health "up" timeout="ten" {
    run "true"
}
limit "nofile" domain="*" type="soft" item="nofile" value="65536"
file "/etc/x" mode="644" {
    content "x\n"
}
perm "/etc/y" mode="640"
exec "c.sh" timeout="1d" {
    script "#!/bin/sh\n"
}
"##;
    let run = Fixture::spec(bad).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 6, "{}", run.stderr);
    expect(
        &diags,
        "bell.kdl:3:13:",
        "`exec timeout` expects a duration",
    );
    expect(
        &diags,
        "bell.kdl:6:13:",
        "`health timeout` expects a duration",
    );
    expect(
        &diags,
        "bell.kdl:9:53:",
        "`limit value` expects a number or a word",
    );
    expect(
        &diags,
        "bell.kdl:10:15:",
        "file mode `644` has three digits",
    );
    expect(
        &diags,
        "bell.kdl:13:15:",
        "file mode `640` has three digits",
    );
    expect(
        &diags,
        "bell.kdl:14:13:",
        "`exec timeout` expects a duration",
    );
    for help in [
        "numbers are written without quotes: `90` (seconds), or give the unit: \"90s\"",
        "numbers are written without quotes: `65536`",
        "write the mode as four octal digits: `\"0644\"`",
        "such as \"90s\", \"5m\" or \"1h\"",
    ] {
        assert!(
            run.stderr.contains(help),
            "no help `{help}` in:\n{}",
            run.stderr
        );
    }
}

/// One mistake, one error: a quoted number on the base layer's `limit` is reported at the value,
/// and the override that raises it for some hosts (naming only `value`, as overrides do) is not
/// reported again for the properties the broken declaration would have given.
#[test]
fn a_broken_base_declaration_is_one_error_not_one_per_override() {
    let spec = "fleet \"f\" target=\"debian-12\"\nhost \"db-01\" role=\"db\"\nlimit \"nofile\" domain=\"*\" type=\"soft\" item=\"nofile\" value=\"65536\"\noverride \"dbs\" {\n    match role=\"db\"\n    limit \"nofile\" value=1048576\n}\n";
    let run = Fixture::spec(spec).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 1, "{}", run.stderr);
    expect(&diags, "bell.kdl:3:", "found the string \"65536\"");
    assert!(
        run.stderr.contains("numbers are written without quotes"),
        "{}",
        run.stderr
    );
}

/// A host's label value one typo from a value an override matches (`role="dbb"` where the
/// override matches `role="db"`) gets none of that override: a warning at the host, with the
/// value it was likely meant to be; a value only renumbered (`rack="r02"` beside a selector of
/// `r01`) is another rack, and says nothing.
#[test]
fn a_host_label_one_typo_from_a_matched_value_warns() {
    let run = Fixture::spec(
        r#"fleet "f" target="debian-12"
host "db-01" role="db" rack="r01"
host "db-02" role="dbb" rack="r02"
host "web-01" role="web" rack="r02"
override "dbs" {
    match role="db"
    sysctl { vm.swappiness 1 }
}
override "first-rack" {
    match rack="r01"
    sysctl { vm.dirty_ratio 5 }
}
"#,
    )
    .bellc(&["--short", "check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 1, "{}", run.stderr);
    expect(
        &diags,
        "bell.kdl:3:",
        "warning[bell::resolve::label_value_typo]: host `db-02` has `role=\"dbb\"`, one typo from `role=\"db\"` that an override matches",
    );
    assert!(
        run.stderr
            .contains("did you mean `role=\"db\"`? As written, this host gets none of override `dbs`'s values"),
        "{}",
        run.stderr
    );
}

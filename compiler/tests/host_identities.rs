//! Every host may carry an identity, the public half of its Ed25519 key (`identity=` on the
//! host, `identity` in a JSON inventory, the `bell/identity` annotation of a kubectl node):
//! checked at its value, carried into `release.json` (which the key signs) without its comment,
//! required of every host by `fleet … identities="required"`, and never shared by two hosts.
use crate::common::*;

const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2";
const KEY_B: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKSAYsxYiAVlSSWQfmJFmq4RM4FKvKuP5VAtPD6lkEDO";

fn release(fx: &Fixture) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fx.path().join("out/release.json")).unwrap()).unwrap()
}

#[test]
fn identities_reach_the_release_from_the_spec_and_both_inventory_forms() {
    let spec = format!(
        "fleet \"f\" target=\"debian-12\" identities=\"required\"\nhost \"a\" identity=\"{KEY_A} root@a\"\ninventory \"hosts.json\"\ninventory \"nodes.json\"\n"
    );
    let plain = format!(r#"[{{"name": "b", "identity": "{KEY_B}"}}]"#);
    let kube = format!(
        r#"{{"items": [{{"metadata": {{"name": "c", "annotations": {{"bell/identity": "{}"}}}}}}]}}"#,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOs+G5AtOI6fhbY2uTeXxL3vy4W4PF+IkUJXA7t0ldrA c"
    );
    let fx = Fixture::spec(&spec)
        .file("hosts.json", &plain)
        .file("nodes.json", &kube);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = release(&fx);
    assert_eq!(
        written["hosts"]["a"]["identity"], KEY_A,
        "the comment is not kept"
    );
    assert_eq!(written["hosts"]["b"]["identity"], KEY_B);
    assert_eq!(
        written["hosts"]["c"]["identity"],
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOs+G5AtOI6fhbY2uTeXxL3vy4W4PF+IkUJXA7t0ldrA"
    );
    // And explain says it, as a spec writes it.
    let explain = fx.bellc(&["explain", "a"]);
    assert!(
        explain
            .stdout
            .contains(&format!("host \"a\" identity=\"{KEY_A}\"")),
        "{}",
        explain.stdout
    );

    // Without identities the release is as before: no `identity` key at all.
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\"\nhost \"a\"\n");
    assert_eq!(fx.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    assert!(release(&fx)["hosts"]["a"].get("identity").is_none());
}

#[test]
fn a_wrong_missing_or_shared_identity_is_an_error_at_its_place() {
    let spec = format!(
        r#"fleet "f" target="debian-12" identities="required"
host "cut" identity="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJ"
host "rsa" identity="ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7"
host "none"
host "a" identity="{KEY_A}"
host "twin" identity="{KEY_A} copied"
inventory "hosts.json"
"#
    );
    let inventory = r#"[
  {"name": "j", "identity": "not a key"}
]"#;
    let run = Fixture::spec(&spec)
        .file("hosts.json", inventory)
        .bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    let expected = [
        (
            "bell.kdl:2:12:",
            "host identity: `ssh-ed25519` key is malformed: the key data is truncated",
        ),
        (
            "bell.kdl:3:12:",
            "a host identity is an Ed25519 key, not `ssh-rsa`",
        ),
        (
            "bell.kdl:4:1:",
            "host `none` has no identity, and the fleet requires one",
        ),
        (
            "bell.kdl:6:1:",
            "hosts `a` and `twin` have the same identity",
        ),
        (
            "hosts.json:2:12:",
            "inventory host `j`: host identity: unknown ssh key type `not`",
        ),
    ];
    assert_eq!(diags.len(), expected.len(), "{diags:#?}");
    for ((at, message), line) in expected.iter().zip(&diags) {
        assert!(
            line.starts_with(at) && line.contains(message),
            "expected {at} … {message}\n got {line}"
        );
    }
    assert!(run.stderr.contains("bell-run identity"), "{}", run.stderr);
    // An identity that is wrong is one mistake, not also a missing one; optional by default.
    let run =
        Fixture::spec("fleet \"f\" target=\"debian-12\" identities=\"sometimes\"\nhost \"a\"\n")
            .bellc(&["--short", "check"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("`identities` cannot be \"sometimes\""),
        "{}",
        run.stderr
    );
}

/// `bellc import known-hosts`: what `ssh-keyscan` prints (host keys made by the real
/// ssh-keygen) becomes an inventory the build takes; a known_hosts file hashed by
/// `ssh-keygen -H` cannot be read back and says so; an existing inventory is filled by address.
#[test]
fn known_hosts_become_an_inventory_the_build_takes() {
    if !have("ssh-keygen") {
        return;
    }
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\" identities=\"required\"\ninventory \"hosts.json\"\n",
    );
    let mut scanned = String::new();
    let mut keys = Vec::new();
    for (host, address) in [("web-1", "10.0.0.1"), ("web-2", "10.0.0.2")] {
        let key = fx.path().join(format!("{host}_key"));
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(made.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let public = public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        // As `ssh-keyscan -t ed25519` prints it: a comment line, then the key.
        scanned.push_str(&format!(
            "# {host}:22 SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\n{host},{address} {public}\n"
        ));
        keys.push(public);
    }
    std::fs::write(fx.path().join("scanned"), &scanned).unwrap();
    let run = fx.bellc(&["import", "known-hosts", "scanned", "-o", "hosts.json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("2 host identities"), "{}", run.stderr);
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let written = release(&fx);
    assert_eq!(written["hosts"]["web-1"]["identity"], keys[0].as_str());
    assert_eq!(written["hosts"]["web-2"]["address"], "10.0.0.2");
    // Asked again without --force, nothing is replaced.
    let again = fx.bellc(&["import", "known-hosts", "scanned", "-o", "hosts.json"]);
    assert_eq!(again.code, 2, "{}", again.stderr);

    // Hashed by ssh-keygen: the names cannot be read back.
    std::fs::copy(fx.path().join("scanned"), fx.path().join("known_hosts")).unwrap();
    let hashed = std::process::Command::new("ssh-keygen")
        .args(["-H", "-f"])
        .arg(fx.path().join("known_hosts"))
        .output()
        .unwrap();
    assert!(hashed.status.success());
    let run = fx.bellc(&["import", "known-hosts", "known_hosts"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("hashed host names"), "{}", run.stderr);

    // An inventory filled by address, its other fields kept.
    std::fs::write(
        fx.path().join("inv.json"),
        r#"[{"name": "db-1", "address": "10.0.0.2", "labels": {"rack": "r9"}}]"#,
    )
    .unwrap();
    let run = fx.bellc(&[
        "import",
        "known-hosts",
        "scanned",
        "--inventory",
        "inv.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let filled: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(filled[0]["identity"], keys[1].as_str());
    assert_eq!(filled[0]["labels"]["rack"], "r9");
}

//! An image root pulled with the host's key given as `--identity FILE` (the README's trial, a
//! bake before the host has its key in the root) files reports signed with that key, so that
//! readers verify them: its row is `up-to-date` and not flagged `unverified`. Without a key, or with
//! another host's, the pull says what its rows will read and why, before a rollout waits on it.
use crate::common::fleet::{bell_run, run_bin, text, Etcd};
use crate::common::pulling::image_root;
use crate::common::sealing::ssh_key;
use crate::common::{row, Fixture};

#[test]
fn reports_are_signed_with_the_identity_the_pull_was_given() {
    if !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let fx = Fixture::new();
    let keys = fx.path().join("keys");
    let identity = ssh_key(&keys.join("a"));
    ssh_key(&keys.join("other"));
    std::fs::write(
        fx.path().join("bell.kdl"),
        format!(
            "fleet \"f\" target=\"debian-12\"\nhost \"a\" identity=\"{identity}\"\nfile \"/etc/motd\" {{\n    content \"hi\\n\"\n}}\n"
        ),
    )
    .unwrap();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = fx.bellc(&["publish", "out", "--store", &etcd.url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = fx.path().join("out").display().to_string();
    let trust = fx.path().join("ci.pub").display().to_string();
    let pull = |key: Option<&str>| {
        let root = image_root();
        let dir = root.path().display().to_string();
        let mut args = vec![
            "pull",
            "--source",
            &out,
            "--root",
            &dir,
            "--host",
            "a",
            "--fleet",
            "f",
            "--offline",
            "--trust",
            &trust,
            "--store",
            &etcd.url,
            "--report",
            &etcd.url,
        ];
        let file = key.map(|k| keys.join(k).display().to_string());
        if let Some(file) = &file {
            args.extend(["--identity", file.as_str()]);
        }
        let done = run_bin(&bell_run(), &args, &[]);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
        String::from_utf8_lossy(&done.stderr).into_owned()
    };
    let status = || {
        let run = fx.bellc(&["status", "out", "--store", &etcd.url, "--json"]);
        let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        row(&value, "a")
    };

    // No key at all: said, and the row is unverified.
    let said = pull(None);
    assert!(
        said.contains("gives `a` an identity, but this host has no key to sign its reports")
            && said.contains("`--identity FILE`"),
        "{said}"
    );
    let a = status();
    assert!(
        a["flags"]
            .as_array()
            .unwrap()
            .contains(&"unverified".into()),
        "{a:#}"
    );
    assert!(a["unverified"].to_string().contains("not signed"), "{a:#}");

    // Another host's key: said, and the row is forged.
    let said = pull(Some("other"));
    assert!(said.contains("will read `forged`"), "{said}");
    assert_eq!(status()["state"], "forged", "{}", status());

    // The host's own key, given on the command line: signed, verified, up to date.
    let said = pull(Some("a"));
    assert!(!said.contains("warning"), "{said}");
    let a = status();
    assert_eq!(a["state"], "up-to-date", "{a:#}");
    assert!(a.get("unverified").is_none(), "{a:#}");
}

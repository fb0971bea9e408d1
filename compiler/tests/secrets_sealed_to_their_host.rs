//! Secrets are sealed (the default; `secrets="sealed"` says it): every secret of a host (a
//! password hash, a debconf password, a 0600 file, a private key) leaves the build only as an age file sealed to that host's
//! identity. OUT holds no plaintext and no unkeyed hash of one; the host's key opens its own
//! files (checked with Debian's `age`), another host's key does not; the same inputs give the
//! same tree, and a host joining a group changes nothing of the others'.
use crate::common;
use crate::common::sealing::{assert_nowhere, needles, ssh_key};
use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const SECRETS: [&str; 4] = [
    HASH,
    "debconf-pass-Xy7",
    "api-token-SUPERSECRET",
    "pem-body-Kw9",
];

fn spec(hosts: &[(&str, &str)], token: &str) -> String {
    // Sealed is the default; said here all the same.
    let mut text = String::from("fleet \"f\" target=\"debian-12\" secrets=\"sealed\"\n");
    for (name, identity) in hosts {
        text.push_str(&format!(
            "host \"{name}\" rack=\"r1\" identity=\"{identity}\"\n"
        ));
    }
    text.push_str(&format!(
        r#"user "ops" sudo=#true {{
    password "{HASH}"
}}
package "mysql-server" {{
    debconf "mysql-server/root_password" type="password" value="{}"
}}
file "/etc/app/token" mode="0600" {{
    content "{token}\n"
}}
file "/etc/ssl/app.pem" mode="0600" {{
    content "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n"
}}
file "/etc/app/public.conf" {{
    content "visible\n"
}}
"#,
        SECRETS[1], SECRETS[3]
    ));
    text
}

/// Every file under `dir` by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .filter(|e| e.file_name() != ".bell-fingerprint")
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// The `.age` files of `host` in OUT, opened with `key` by Debian's `age`: the plaintexts, or
/// `None` for each one `age` refused.
fn open_with_age(out: &Path, host: &str, key: &Path) -> Vec<Option<String>> {
    let dir = out.join("secrets").join(host);
    let mut opened = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "age") {
            let run = Command::new("age")
                .arg("-d")
                .arg("-i")
                .arg(key)
                .arg(&path)
                .output()
                .unwrap();
            opened.push(
                run.status
                    .success()
                    .then(|| String::from_utf8(run.stdout).unwrap()),
            );
        }
    }
    opened
}

#[test]
fn each_host_gets_its_secrets_sealed_to_its_own_key_and_out_holds_none() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        ssh_key(&keys.path().join("a")),
        ssh_key(&keys.path().join("b")),
        ssh_key(&keys.path().join("c")),
    );
    let fx = Fixture::spec(&spec(&[("a", &a), ("b", &b)], SECRETS[2]))
        .file("seal.key", "0123456789abcdef0123456789abcdef-example-only");
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = fx.path().join("out");
    // The secrets, and the whole content of each secret file: a served script that named its
    // sha256 would confirm a guess of it.
    let (token_file, pem_file) = (
        format!("{}\n", SECRETS[2]),
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
            SECRETS[3]
        ),
    );
    let needles = needles(&[&SECRETS[..], &[token_file.as_str(), pem_file.as_str()]].concat());
    assert_nowhere(&out, &needles);
    for text in [&run.stdout, &run.stderr] {
        assert!(needles.iter().all(|n| !text.contains(n.as_str())), "{text}");
    }

    // The release names each host's index; the index its sealed files.
    let release: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("release.json")).unwrap()).unwrap();
    let index_sha = release["hosts"]["a"]["secrets"]
        .as_str()
        .unwrap()
        .to_string();
    let index = std::fs::read(out.join(format!("secrets/a/{index_sha}.json"))).unwrap();
    assert_eq!(bell_bundle::sha256_hex(&index), index_sha);
    assert_eq!(
        release["hosts"]["a"]["bundle"], release["hosts"]["b"]["bundle"],
        "hosts with equal configurations still share their bundle"
    );

    // a's key opens a's files, and together they hold every secret; b's key opens none.
    let opened = open_with_age(&out, "a", &keys.path().join("a"));
    assert!(opened.len() >= 4, "{opened:?}");
    let all: String = opened
        .iter()
        .map(|o| o.clone().expect("age opens it"))
        .collect();
    for secret in SECRETS {
        assert!(
            all.contains(secret),
            "{secret} is in none of a's sealed files"
        );
    }
    let by_b = open_with_age(&out, "a", &keys.path().join("b"));
    assert!(
        by_b.iter().all(Option::is_none),
        "b's key opened a's secret"
    );
    // Every sealed file, and the bundle, is readable by an unprivileged web server.
    for entry in walkdir::WalkDir::new(&out) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() && !entry.path().starts_with(out.join(".bell")) {
            use std::os::unix::fs::PermissionsExt;
            let mode = entry.metadata().unwrap().permissions().mode();
            assert_eq!(
                mode & 0o004,
                0o004,
                "{} is {mode:o}",
                entry.path().display()
            );
        }
    }

    // The same inputs: the same tree, in a fresh OUT and in place.
    let again = fx.bellc(&["build", "bell.kdl", "-o", "again", "--seal-key", "seal.key"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let before = tree(&out);
    assert_eq!(tree(&fx.path().join("again")), before);
    let check = fx.bellc(&[
        "build",
        "--check",
        "bell.kdl",
        "-o",
        "out",
        "--seal-key",
        "seal.key",
    ]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let plan = fx.bellc(&[
        "plan",
        "bell.kdl",
        "--against",
        "out",
        "--seal-key",
        "seal.key",
    ]);
    assert!(
        plan.stdout.contains("nothing to roll out"),
        "{}",
        plan.stdout
    );

    // c joins the group: the bundle and a's and b's files stay as they were. A rebuild takes
    // a kept sealed file as it is only when it is what its index recorded: one spoiled in OUT
    // is sealed again.
    let spoiled = before
        .keys()
        .find(|rel| rel.starts_with("secrets/a/") && rel.ends_with(".age"))
        .unwrap()
        .clone();
    std::fs::write(out.join(&spoiled), "spoiled").unwrap();
    std::fs::write(
        fx.path().join("bell.kdl"),
        spec(&[("a", &a), ("b", &b), ("c", &c)], SECRETS[2]),
    )
    .unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let after = tree(&out);
    for (rel, bytes) in &before {
        if rel.starts_with("secrets/") || rel.starts_with("bundles/") {
            assert_eq!(after.get(rel), Some(bytes), "{rel} changed when c joined");
        }
    }
    assert!(after.keys().any(|rel| rel.starts_with("secrets/c/")));

    // A secret changed: the diff says so, and nothing of either value.
    let changed = "api-token-CHANGED-Vb2";
    std::fs::write(
        fx.path().join("bell.kdl"),
        spec(&[("a", &a), ("b", &b), ("c", &c)], changed),
    )
    .unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out2", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let diff = fx.bellc(&["diff", "out", "out2"]);
    let shown = format!("{}{}", diff.stdout, diff.stderr);
    assert!(shown.contains("secret content changed"), "{shown}");
    let mut with_changed = needles.clone();
    with_changed.extend(common::sealing::needles(&[
        changed,
        &format!("{changed}\n"),
    ]));
    assert!(
        with_changed.iter().all(|n| !shown.contains(n.as_str())),
        "{shown}"
    );
    assert_nowhere(&fx.path().join("out2"), &with_changed);
}

#[test]
fn sealed_secrets_need_an_identity_and_without_a_key_take_bellcs_own() {
    let keys = tempfile::tempdir().unwrap();
    if !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let a = ssh_key(&keys.path().join("a"));
    // A host without an identity: an error at the host, with the way out.
    let text = spec(&[("a", &a)], SECRETS[2]) + "host \"lonely\"\n";
    let fx = Fixture::spec(&text).file("seal.key", &"k".repeat(32));
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("host `lonely` is given secrets, and has no identity to seal them to"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("bell.kdl:"), "{}", run.stderr);
    assert!(
        run.stderr.contains("secrets=\"plaintext\""),
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("out").exists());

    // No key given: bellc's own, made once in its state directory (0600), names and seals
    // them alike from build to build.
    let fx = Fixture::spec(&spec(&[("a", &a)], SECRETS[2])).file("short.key", "short");
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let own = fx.path().join("bellc-state/seal.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&own).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let run = fx.bellc(&["build", "bell.kdl", "-o", "again"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(tree(&fx.path().join("out")), tree(&fx.path().join("again")));
    // plan names them with that key too, so an unchanged spec plans nothing.
    let plan = fx.bellc(&["plan", "bell.kdl", "--against", "out"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("nothing to roll out"),
        "{}",
        plan.stdout
    );
    let run = fx.bellc(&[
        "build",
        "bell.kdl",
        "-o",
        "short",
        "--seal-key",
        "short.key",
    ]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("fewer than 32"), "{}", run.stderr);
    assert!(!fx.path().join("short").exists());

    // A word secrets= does not know.
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\" secrets=\"hidden\"\nhost \"a\"\n");
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("`secrets` cannot be \"hidden\""),
        "{}",
        run.stderr
    );
}

#[test]
fn sealing_is_the_default_plaintext_warns_and_a_key_is_kept_only_once_something_is_sealed() {
    let keys = tempfile::tempdir().unwrap();
    if !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let a = ssh_key(&keys.path().join("a"));
    let unsaid = |text: String| text.replace(" secrets=\"sealed\"", "");
    // Said nothing: sealed, so a host without an identity is an error.
    let text = unsaid(spec(&[("a", &a)], SECRETS[2])) + "host \"lonely\"\n";
    let fx = Fixture::spec(&text);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("host `lonely` is given secrets, and has no identity to seal them to"),
        "{}",
        run.stderr
    );
    // A fleet without a secret builds without keeping a key.
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\"\nhost \"a\"\npackage \"htop\"\n");
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!fx.path().join("bellc-state/seal.key").exists());

    // secrets="plaintext": built, the secrets in the bundle, and a warning on every build
    // (a rebuild of unchanged inputs says it again).
    let text = text.replacen(
        "target=\"debian-12\"",
        "target=\"debian-12\" secrets=\"plaintext\"",
        1,
    );
    let fx = Fixture::spec(&text);
    for _ in 0..2 {
        let run = fx.bellc(&["--short", "build", "bell.kdl", "-o", "out"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let warned: Vec<&str> = run
            .diagnostics()
            .into_iter()
            .filter(|d| d.contains("warning[bell::lower::plaintext_secrets]"))
            .collect();
        assert_eq!(warned.len(), 1, "{}", run.stderr);
        assert!(warned[0].starts_with("bell.kdl:1:"), "{}", run.stderr);
    }
    assert!(!fx.path().join("out/secrets").exists());
    let deny = fx.bellc(&["--deny-warnings", "build", "bell.kdl", "-o", "denied"]);
    assert_ne!(deny.code, 0, "{}", deny.stderr);

    // Sealed with one key, then built with another: OUT is not up to date for it, and the
    // secrets are sealed again under the new key.
    let fx = Fixture::spec(&spec(&[("a", &a)], SECRETS[2])).file("seal.key", &"k".repeat(32));
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let before = tree(&fx.path().join("out/secrets"));
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("up to date"), "{}", run.stderr);
    assert_ne!(before, tree(&fx.path().join("out/secrets")));
    assert!(fx.path().join("bellc-state/seal.key").exists());
    let again = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert!(again.stderr.contains("up to date"), "{}", again.stderr);
}

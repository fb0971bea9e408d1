//! Signed releases: `bellc keygen` and `--sign-key` write minisign keys and signatures that
//! Debian's `minisign` verifies, keys from `minisign -G -W` sign here, every signing raises
//! the sequence, and releases are kept by version until pruned.
use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// The three-role example with its seal key (a signed build otherwise seals with a key derived
/// from the signing key, which an unsigned rebuild does not have).
fn example_fixture() -> Fixture {
    let seal = std::fs::read_to_string(repo_root().join("examples/keys/seal.key")).unwrap();
    Fixture::example("three-role", "bell.kdl").file("seal.key", &seal)
}

fn release(path: &Path) -> bell_bundle::Release {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `bellc ARGS` with BELLC_KEY_PASSWORD set (or removed).
fn bellc_with_password(dir: &Path, password: Option<&str>, args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bellc"));
    command.args(args).current_dir(dir).env("NO_COLOR", "1");
    match password {
        Some(p) => command.env("BELLC_KEY_PASSWORD", p),
        None => command.env_remove("BELLC_KEY_PASSWORD"),
    };
    let output = command.output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `minisign -V`: the standard tool's verdict, and its output (the trusted comment).
fn minisign_verifies(dir: &Path, public: &str, file: &str) -> (bool, String) {
    let output = Command::new("minisign")
        .args(["-V", "-p", public, "-m", file])
        .current_dir(dir)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

#[test]
fn keygen_writes_a_private_key_and_never_overwrites_one() {
    let fx = Fixture::new();
    let run = fx.bellc(&["keygen", "ci"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let key = fx.path().join("ci.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let public = std::fs::read_to_string(fx.path().join("ci.pub")).unwrap();
    assert!(
        public.starts_with("untrusted comment: minisign public key"),
        "{public}"
    );
    // The secret key is never printed.
    let secret = std::fs::read_to_string(&key).unwrap();
    let secret_line = secret.lines().nth(1).unwrap();
    assert!(!run.stdout.contains(secret_line) && !run.stderr.contains(secret_line));

    let before = std::fs::read(&key).unwrap();
    let again = fx.bellc(&["keygen", "ci"]);
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    assert_eq!(std::fs::read(&key).unwrap(), before);

    // A public half alone (or a link planted at the name) also stops it, writing nothing.
    std::fs::write(fx.path().join("other.pub"), "x").unwrap();
    assert_ne!(fx.bellc(&["keygen", "other"]).code, 0);
    assert!(!fx.path().join("other.key").exists());
    std::os::unix::fs::symlink("/tmp/elsewhere", fx.path().join("linked.key")).unwrap();
    assert_ne!(fx.bellc(&["keygen", "linked"]).code, 0);
    assert!(!Path::new("/tmp/elsewhere").exists());
}

#[test]
fn minisign_verifies_a_signed_build_and_the_sequence_only_grows() {
    if !have("minisign") {
        return;
    }
    let fx = example_fixture();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let run = fx.bellc(&[
        "build",
        "bell.kdl",
        "-o",
        "out",
        "--sign-key",
        "ci.key",
        "--seal-key",
        "seal.key",
        "--expires",
        "30d",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = release(&fx.path().join("out/release.json"));
    let sequence = first.sequence.expect("a signed release carries a sequence");
    let expires = first.expires.expect("--expires sets an expiry");
    assert!(
        (29 * 86400..=31 * 86400).contains(&(expires - sequence / 1000)),
        "{first:?}"
    );

    let (ok, said) = minisign_verifies(fx.path(), "ci.pub", "out/release.json");
    assert!(ok, "{said}");
    assert!(
        said.contains(&format!("version:{}", first.version)),
        "{said}"
    );
    assert!(said.contains(&format!("sequence:{sequence}")), "{said}");
    // The kept copy is the same file with the same signature.
    let kept = format!("out/releases/{}.json", first.version);
    assert_eq!(
        std::fs::read(fx.path().join(&kept)).unwrap(),
        std::fs::read(fx.path().join("out/release.json")).unwrap()
    );
    assert!(minisign_verifies(fx.path(), "ci.pub", &kept).0);

    // A release changed after signing no longer verifies.
    let tampered = std::fs::read_to_string(fx.path().join("out/release.json"))
        .unwrap()
        .replacen("\"sequence\": ", "\"sequence\": 1", 1);
    std::fs::write(fx.path().join("tampered.json"), tampered).unwrap();
    std::fs::copy(
        fx.path().join("out/release.json.minisig"),
        fx.path().join("tampered.json.minisig"),
    )
    .unwrap();
    assert!(!minisign_verifies(fx.path(), "ci.pub", "tampered.json").0);

    // Signing the same build again (unchanged inputs) is a newer release, even in the same
    // second; an unsigned rebuild of unchanged inputs (and seal key) keeps the signature.
    let seal = ["--seal-key", "seal.key"];
    let signed = ["build", "bell.kdl", "-o", "out", "--sign-key", "ci.key"];
    let run = fx.bellc(&[&signed[..], &seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let second = release(&fx.path().join("out/release.json"));
    assert!(second.sequence.unwrap() > sequence, "{second:?}");
    assert_eq!(second.expires, None);
    let run = fx.bellc(&[&["build", "--force", "bell.kdl", "-o", "out"][..], &seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(release(&fx.path().join("out/release.json")), second);
    assert!(minisign_verifies(fx.path(), "ci.pub", "out/release.json").0);

    // A changed spec built without a key into an OUT of signed releases: refused before
    // anything is written (an unsigned release.json would be refused by every host that
    // trusts the key); with the key, it is signed and the release it replaced stays kept,
    // signed.
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap();
    let spec = spec.replace("match role=\"storage\"", "match role=\"storage-gone\"");
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let unsigned = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(unsigned.code, 64, "{}", unsigned.stderr);
    assert!(
        unsigned.stderr.contains("--sign-key"),
        "{}",
        unsigned.stderr
    );
    assert_eq!(release(&fx.path().join("out/release.json")), second);
    assert!(minisign_verifies(fx.path(), "ci.pub", "out/release.json").0);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let third = release(&fx.path().join("out/release.json"));
    assert!(third.sequence.unwrap() > second.sequence.unwrap());
    assert!(minisign_verifies(fx.path(), "ci.pub", &kept).0);

    let run = fx.bellc(&["releases", "out", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let rows: Vec<(String, bool, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["version"].as_str().unwrap().to_string(),
                r["signed"].as_bool().unwrap(),
                r["current"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.contains(&(first.version.clone(), true, false)),
        "{rows:?}"
    );
    assert!(
        rows.contains(&(third.version.clone(), true, true)),
        "{rows:?}"
    );
}

#[test]
fn keys_from_minisign_sign_here_and_encrypted_keys_need_their_password() {
    if !have("minisign") {
        return;
    }
    let fx = example_fixture();
    assert_eq!(fx.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    let made = Command::new("minisign")
        .args(["-G", "-W", "-p", "m.pub", "-s", "m.key"])
        .current_dir(fx.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let run = fx.bellc(&["publish", "out", "--sign-key", "m.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(minisign_verifies(fx.path(), "m.pub", "out/release.json").0);

    let run = bellc_with_password(
        fx.path(),
        Some("s3cret pass"),
        &["keygen", "enc", "--encrypt"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("encrypted"), "{}", run.stdout);
    let signed_before = std::fs::read(fx.path().join("out/release.json")).unwrap();
    for (password, says) in [
        (None, "BELLC_KEY_PASSWORD is not set"),
        (Some("wrong"), "cannot decrypt"),
    ] {
        let run = bellc_with_password(
            fx.path(),
            password,
            &["publish", "out", "--sign-key", "enc.key"],
        );
        assert_ne!(run.code, 0);
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert!(!run.stderr.contains("s3cret"), "{}", run.stderr);
        assert_eq!(
            std::fs::read(fx.path().join("out/release.json")).unwrap(),
            signed_before,
            "a key that cannot sign changes nothing"
        );
    }
    let run = bellc_with_password(
        fx.path(),
        Some("s3cret pass"),
        &["publish", "out", "--sign-key", "enc.key"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(minisign_verifies(fx.path(), "enc.pub", "out/release.json").0);
    assert!(!minisign_verifies(fx.path(), "m.pub", "out/release.json").0);

    // `--encrypt` without a password, and a file that is not a key, are refused.
    let run = bellc_with_password(fx.path(), None, &["keygen", "none", "--encrypt"]);
    assert_ne!(run.code, 0);
    assert!(!fx.path().join("none.key").exists());
    std::fs::write(fx.path().join("junk.key"), "not a key\n").unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out2", "--sign-key", "junk.key"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("not a minisign secret key"),
        "{}",
        run.stderr
    );
    assert!(
        !fx.path().join("out2").exists(),
        "nothing is built with a bad key"
    );
    // `--expires` means nothing without a key.
    assert_eq!(
        fx.bellc(&[
            "publish",
            "out",
            "--expires",
            "30d",
            "--store",
            "etcd://127.0.0.1:1"
        ])
        .code,
        64
    );
}

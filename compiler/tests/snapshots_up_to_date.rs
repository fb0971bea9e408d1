//! `snapshots/` holds the builds of `examples/`; this fails when a change to the compiler or
//! the stdlib changes what the examples build into, until the snapshots are rebuilt and the
//! difference is reviewed in the pull request.
use crate::common::*;

/// The key the snapshots are built with (public, as the examples' host keys are).
const SEAL_KEY: &str = "examples/keys/seal.key";

fn check(example: &str) {
    let root = repo_root();
    let spec = format!("examples/{example}.kdl");
    let out = format!("snapshots/{example}");
    let run = bellc_in(
        &root,
        &[
            "build",
            "--check",
            &spec,
            "-o",
            &out,
            "--seal-key",
            SEAL_KEY,
            "--secrets-key",
            &example_secrets_key().to_string_lossy(),
        ],
    );
    assert_eq!(
        run.code, 0,
        "snapshots/{example} is stale; rebuild with `cargo run -p bellc -- build {spec} -o {out} --seal-key {SEAL_KEY} --secrets-key examples/keys/secrets.key` (delete it first; `chmod 600` the key) and review the diff:\n{}",
        run.stderr
    );
    // --check compares what the build writes; it must also not leave extra bundles behind.
    let release: bell_bundle::Release = serde_json::from_str(
        &std::fs::read_to_string(root.join(&out).join("release.json")).unwrap(),
    )
    .unwrap();
    let used: std::collections::BTreeSet<String> =
        release.hosts.values().map(|h| h.bundle.clone()).collect();
    let on_disk: std::collections::BTreeSet<String> =
        std::fs::read_dir(root.join(&out).join("bundles"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    assert_eq!(
        on_disk, used,
        "snapshots/{example}/bundles holds bundles no host uses"
    );
}

#[test]
fn divingbell_snapshot_is_up_to_date() {
    check("divingbell");
}

#[test]
fn three_role_snapshot_is_up_to_date() {
    check("three-role");
}

/// What the examples' hosts are given as secrets (password hashes, 0600 files) is in the
/// examples only encrypted (`examples/secrets/`, opened with the example build key) and in
/// `snapshots/` only sealed: each host's ciphertexts open with that host's example key, and no
/// file of the examples or the snapshot holds a plaintext, its sha256 or a password hash in
/// the clear.
fn holds_no_secret_in_the_clear(example: &str) {
    let root = repo_root();
    let out = root.join("snapshots").join(example);
    let keys = example_secrets_identities();
    let mut secrets: Vec<String> = std::fs::read_dir(root.join("examples/secrets"))
        .unwrap()
        .map(|file| {
            let bytes = std::fs::read(file.unwrap().path()).unwrap();
            String::from_utf8(bell_seal::at_rest::decrypt(&bytes, &keys).unwrap()).unwrap()
        })
        .collect();
    assert!(!secrets.is_empty(), "examples/secrets/ holds no secret");
    let spec = std::fs::read_to_string(root.join(format!("examples/{example}.kdl"))).unwrap();
    assert!(
        !spec.contains("password \""),
        "examples/{example}.kdl writes a password"
    );
    let mut opened = 0;
    for host in std::fs::read_dir(out.join("secrets")).unwrap() {
        let host = host.unwrap();
        let key = root.join("examples/keys").join(host.file_name());
        let identity = bell_seal::Identity::from_seed(sealing::ssh_seed(&key)).unwrap();
        for file in std::fs::read_dir(host.path()).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "age") {
                let plain = bell_seal::open(&std::fs::read(&path).unwrap(), &identity)
                    .unwrap_or_else(|e| panic!("{} does not open: {e}", path.display()));
                secrets.push(String::from_utf8(plain).unwrap());
                opened += 1;
            }
        }
    }
    assert!(opened > 0, "snapshots/{example} holds no sealed secret");
    let needles: Vec<&str> = secrets.iter().map(String::as_str).collect();
    sealing::assert_nowhere(&out, &sealing::needles(&needles));
    sealing::assert_nowhere(&root.join("examples"), &sealing::needles(&needles));
}

#[test]
fn the_divingbell_snapshot_holds_no_secret_in_the_clear() {
    holds_no_secret_in_the_clear("divingbell");
}

#[test]
fn the_three_role_snapshot_holds_no_secret_in_the_clear() {
    holds_no_secret_in_the_clear("three-role");
}

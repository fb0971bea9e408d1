//! The files bell seals are age files: the `age` tool opens them with the host's SSH key, and
//! bell opens what `age -R` seals to that key. Run against Debian's `age`.

use bell_seal::{open, Identity, Recipient, SealKey};
use std::path::Path;
use std::process::Command;

/// An ed25519 key made by `ssh-keygen`: its seed and public key, read from OpenSSH's private
/// key format the way bell-run reads a host's key.
fn ssh_key(dir: &Path, name: &str) -> ([u8; 32], [u8; 32]) {
    let path = dir.join(name);
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let key = bell_seal::openssh::read_ed25519(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (key.seed, key.public)
}

fn secrets() -> Vec<Vec<u8>> {
    [0usize, 1, 17, 65535, 65536, 65537, 200_000]
        .iter()
        .map(|len| (0..*len).map(|i| (i * 7 % 256) as u8).collect())
        .collect()
}

#[test]
fn age_opens_what_bell_seals_with_the_hosts_ssh_key() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, public) = ssh_key(dir.path(), "host");
    let (_, other_public) = ssh_key(dir.path(), "other");
    let key = SealKey::derive(b"build secret", "test");
    for secret in secrets() {
        let sealed = dir.path().join("secret.age");
        let to = Recipient::from_ed25519(public).unwrap();
        std::fs::write(&sealed, key.seal(&secret, &to).unwrap()).unwrap();
        let out = Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(dir.path().join("host"))
            .arg(&sealed)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} bytes: {}",
            secret.len(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == secret, "{} bytes differ", secret.len());

        let to_other = Recipient::from_ed25519(other_public).unwrap();
        std::fs::write(&sealed, key.seal(&secret, &to_other).unwrap()).unwrap();
        let out = Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(dir.path().join("host"))
            .arg(&sealed)
            .output()
            .unwrap();
        assert!(!out.status.success(), "age opened another host's secret");
    }
}

#[test]
fn bell_opens_what_age_seals_to_the_hosts_ssh_key() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (seed, _) = ssh_key(dir.path(), "host");
    let (other_seed, _) = ssh_key(dir.path(), "other");
    let identity = Identity::from_seed(seed).unwrap();
    let other = Identity::from_seed(other_seed).unwrap();
    for secret in secrets() {
        let plain = dir.path().join("plain");
        std::fs::write(&plain, &secret).unwrap();
        let sealed = dir.path().join("secret.age");
        let status = Command::new("age")
            .arg("-R")
            .arg(dir.path().join("host.pub"))
            .arg("-o")
            .arg(&sealed)
            .arg(&plain)
            .status()
            .unwrap();
        assert!(status.success());
        let bytes = std::fs::read(&sealed).unwrap();
        assert!(
            open(&bytes, &identity).unwrap() == secret,
            "{} bytes",
            secret.len()
        );
        assert_eq!(
            open(&bytes, &other).unwrap_err(),
            bell_seal::SealError::NotForThisKey
        );
    }
}

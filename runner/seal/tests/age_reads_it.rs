//! The files bell seals are age files: the `age` tool opens them with the host's SSH key, and
//! bell opens what `age -R` seals to that key. Run against Debian's `age`.

use bell_seal::{open, Identity, Recipient, SealKey};
use std::path::Path;
use std::process::Command;

/// An ed25519 key made by `ssh-keygen`: its seed and public key, read from OpenSSH's private
/// key format the way a host's key is.
fn ssh_key(dir: &Path, name: &str) -> ([u8; 32], [u8; 32]) {
    let path = dir.join(name);
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let text = std::fs::read_to_string(&path).unwrap();
    let b64: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    let blob = decode(&b64);
    // openssh-key-v1\0, cipher, kdf, kdf options, one key, the public key, then the private
    // section: two check words, the type, the public key and seed || public key.
    let mut at = b"openssh-key-v1\0".len();
    for _ in 0..3 {
        string(&blob, &mut at);
    }
    at += 4;
    string(&blob, &mut at);
    let private = string(&blob, &mut at);
    let mut at = 8;
    string(&private, &mut at);
    let public: [u8; 32] = string(&private, &mut at).try_into().unwrap();
    let secret = string(&private, &mut at);
    (secret[..32].try_into().unwrap(), public)
}

/// An SSH wire-format string at `at`, moving past it.
fn string(blob: &[u8], at: &mut usize) -> Vec<u8> {
    let len = u32::from_be_bytes(blob[*at..*at + 4].try_into().unwrap()) as usize;
    *at += 4 + len;
    blob[*at - len..*at].to_vec()
}

fn decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        acc = acc << 6 | ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits & 0xff) as u8);
        }
    }
    out
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

//! For the sealed-secret tests: host keys made by `ssh-keygen`, the seed a host opens its
//! secrets with, and every form in which a leaked secret could be found.

use std::path::Path;
use std::process::Command;

/// An Ed25519 key made by `ssh-keygen` at `path` (and `path.pub`): its public line without
/// the comment, as a host's `identity=` takes it.
pub fn ssh_key(path: &Path) -> String {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
    let line = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    line.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The host's SSH key in an image root, where Debian makes it at first boot.
pub fn host_key_in(root: &Path) -> String {
    ssh_key(&root.join("etc/ssh/ssh_host_ed25519_key"))
}

/// The seed of an OpenSSH Ed25519 private key file (what `bell_seal::Identity` opens with).
pub fn ssh_seed(path: &Path) -> [u8; 32] {
    let text = std::fs::read_to_string(path).unwrap();
    bell_seal::openssh::read_ed25519(&text).unwrap().seed
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| acc << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Every form in which a secret could be found: itself, and its sha256 in hex and in base64.
pub fn needles(secrets: &[&str]) -> Vec<String> {
    use sha2::Digest;
    let mut out = Vec::new();
    for secret in secrets {
        out.push(secret.to_string());
        let digest = sha2::Sha256::digest(secret.as_bytes());
        out.push(digest.iter().map(|b| format!("{b:02x}")).collect());
        out.push(base64(&digest));
    }
    out
}

/// Fails naming the file when any file under `dir` holds one of `needles`.
pub fn assert_nowhere(dir: &Path, needles: &[String]) {
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        assert_not_in(
            &entry.path().display().to_string(),
            &String::from_utf8_lossy(&bytes),
            needles,
        );
    }
}

/// Fails naming `what` when `text` holds one of `needles`.
pub fn assert_not_in(what: &str, text: &str, needles: &[String]) {
    for needle in needles {
        assert!(!text.contains(needle.as_str()), "{what} holds {needle}");
    }
}

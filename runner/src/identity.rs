//! The host's identity: the Ed25519 key its reports are signed with. The SSH host key when
//! there is one (every Debian host with OpenSSH has made it by its first boot, and it is what
//! `ssh-keyscan` collects from outside, as agenix and sops-nix use it); else bell's own key,
//! made once by `bell-run identity --init` (an image root, a host without sshd). Both are read
//! in OpenSSH's private key format, so `ssh-keygen -y -f` prints either one's public half.
//!
//! Also the count of signed reports, kept beside bell-run's state, that makes a report put
//! back later older than one already seen.

use crate::rootfs::{self, Root};
use bell_seal::openssh::{MAGIC, PEM_BEGIN, PEM_END};
use bell_store::proof::{put_string, SigningKey};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The SSH host key, inside the root.
pub const SSH_HOST_KEY: &str = "/etc/ssh/ssh_host_ed25519_key";
/// bell's own key, where there is no SSH host key.
pub const BELL_KEY: &str = "/etc/bell/identity.key";

/// The host's key and the file it came from.
pub struct HostKey {
    pub key: SigningKey,
    pub file: PathBuf,
}

/// The host's key: the SSH host key, else bell's own; `None` when neither is there.
pub fn load(root: &Root) -> Result<Option<HostKey>, String> {
    for path in [SSH_HOST_KEY, BELL_KEY] {
        if let Some(key) = read_key(root, path)? {
            return Ok(Some(HostKey {
                key,
                file: root.host(path),
            }));
        }
    }
    Ok(None)
}

/// The key this run signs with: the one given with `--identity FILE` (an image whose own key
/// is not in its root yet speaks as the host it becomes), else the root's.
pub fn signing_key(root: &Root, given: Option<&Path>) -> Result<Option<HostKey>, String> {
    match given {
        Some(file) => Ok(Some(HostKey {
            key: load_file(file)?,
            file: file.to_path_buf(),
        })),
        None => load(root),
    }
}

/// The host's key, made as bell's own when there is none. `true` when it was made now.
pub fn load_or_make(root: &Root) -> Result<(HostKey, bool), String> {
    if let Some(key) = load(root)? {
        return Ok((key, false));
    }
    root.check_contained(BELL_KEY)?;
    let file = root.host(BELL_KEY);
    let mut seed = [0u8; 32];
    bell_seal::random_bytes(&mut seed)
        .map_err(|e| format!("cannot read /dev/urandom for a new key: {e}"))?;
    let key = SigningKey::from_seed(seed);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Checked again now that the directories exist: one of them may have been a link.
    root.check_contained(BELL_KEY)?;
    rootfs::write_atomic(&file, encode(&key).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok((HostKey { key, file }, true))
}

/// `--identity FILE`: a host's key given on the command line (an image baked before the host
/// it becomes has its own key in the root). The same format and the same refusals as a key
/// read from a root.
pub fn load_file(file: &Path) -> Result<SigningKey, String> {
    let bytes = bell_bundle::read_regular(file, 64 << 10)
        .map_err(|e| format!("cannot read the key {}: {e}", file.display()))?;
    let meta = std::fs::symlink_metadata(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is readable by others (mode {:04o}): a host key is 0600; `chmod 600` it",
            file.display(),
            meta.mode() & 0o7777
        ));
    }
    decode(&String::from_utf8_lossy(&bytes)).map_err(|e| {
        format!(
            "{} is not an unencrypted OpenSSH Ed25519 key: {e}",
            file.display()
        )
    })
}

/// Reads one private key file under the root, never through a link and never one that others
/// could read (as ssh refuses such a key).
fn read_key(root: &Root, path: &str) -> Result<Option<SigningKey>, String> {
    let file = root.host(path);
    if std::fs::symlink_metadata(&file).is_err() {
        return Ok(None);
    }
    root.check_contained(path)?;
    let Some(text) = rootfs::read_record(&file)? else {
        return Ok(None);
    };
    let meta = std::fs::symlink_metadata(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is readable by others (mode {:04o}): a host key is 0600, root's alone; \
             `chmod 600` it",
            file.display(),
            meta.mode() & 0o7777
        ));
    }
    decode(&text).map(Some).map_err(|e| {
        format!(
            "{} is not an unencrypted OpenSSH Ed25519 key: {e}",
            file.display()
        )
    })
}

/// OpenSSH's private key format (PROTOCOL.key), unencrypted, with one Ed25519 key.
fn decode(text: &str) -> Result<SigningKey, String> {
    bell_seal::openssh::read_ed25519(text).map(|key| SigningKey::from_seed(key.seed))
}

/// What [`decode`] reads, as `ssh-keygen -t ed25519` writes it.
fn encode(key: &SigningKey) -> String {
    let identity = key.identity();
    let mut private = Vec::new();
    // The check number only has to repeat; a key's own bytes serve as well as random ones.
    let check = key.openssh_private()[..4].to_vec();
    private.extend(&check);
    private.extend(&check);
    put_string(&mut private, b"ssh-ed25519");
    put_string(&mut private, identity.key_bytes());
    put_string(&mut private, &key.openssh_private());
    put_string(&mut private, b"bell identity");
    let mut pad = 1u8;
    while private.len() % 8 != 0 {
        private.push(pad);
        pad += 1;
    }
    let mut bytes = MAGIC.to_vec();
    put_string(&mut bytes, b"none");
    put_string(&mut bytes, b"none");
    put_string(&mut bytes, b"");
    bytes.extend(1u32.to_be_bytes());
    put_string(&mut bytes, &identity.blob());
    put_string(&mut bytes, &private);
    let body = bell_wire::base64(&bytes);
    let mut text = format!("{PEM_BEGIN}\n");
    for line in body.as_bytes().chunks(70) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str(PEM_END);
    text.push('\n');
    text
}

/// The next number of a signed report: one more than the last, and never less than the time,
/// so that a host whose state was wiped (its key kept) still numbers above what it said before
/// (with a clock that is roughly right).
pub fn next_sequence(root: &Root, now: u64) -> Result<u64, String> {
    let path = sequence_file(root);
    let last = rootfs::read_record(&path)?
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let next = (last + 1).max(now);
    // A refused first run leaves the root alone: the time alone numbers its report.
    if !root.bell_dir().is_dir() {
        return Ok(next);
    }
    rootfs::write_atomic(&path, format!("{next}\n").as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(next)
}

fn sequence_file(root: &Root) -> PathBuf {
    root.bell_dir().join("report-sequence")
}

/// The file a key was read from, as the host names it.
pub fn host_path<'a>(root: &Root, file: &'a Path) -> std::borrow::Cow<'a, str> {
    match file.strip_prefix(&root.dir) {
        Ok(rest) => format!("/{}", rest.display()).into(),
        Err(_) => file.to_string_lossy(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_reads_back() {
        let key = SigningKey::from_seed([5; 32]);
        let read = decode(&encode(&key)).unwrap();
        assert_eq!(read.identity(), key.identity());
        assert!(decode(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----"
        )
        .is_err());
        assert!(decode("").is_err());
    }
}

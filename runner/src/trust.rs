//! Which releases a host accepts: signed by a key it trusts, no older than the newest it has
//! accepted, not expired. The chain from there is the bundle format's own: the release names
//! this host's bundle id, the id is the sha256 of the manifest, and the manifest names the
//! sha256 of every file.
//!
//! The rollback and freeze attacks (as TUF and Uptane name them) are why the record of the
//! newest accepted release lives in bell-run's own directory: whoever controls the transport
//! or the store cannot move a host back to an old, validly signed release with a known hole,
//! nor hold it on one past its expiry without the host saying so.

use crate::rootfs::{self, Root};
use bell_bundle::Release;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a host's trusted keys are when `--trust` is not given (inside the root).
pub const DEFAULT_TRUST_FILE: &str = "/etc/bell/trusted.pub";

/// The public keys of a trust file: minisign's `.pub` format, several keys one after another
/// (for rotation: trust the new key beside the old one, sign with the new, drop the old).
pub struct TrustedKeys {
    pub file: PathBuf,
    keys: Vec<(String, minisign_verify::PublicKey)>,
}

/// Refuses a trust file, or the directory that holds it, that someone other than root (or the
/// user bell-run runs as) could have written: whoever can change the keys can sign anything
/// the host then applies. As sshd's StrictModes does for authorized_keys.
fn check_guarded(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = crate::sys::effective_uid();
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for (path, what) in [(file, "trust file"), (dir, "directory of the trust file")] {
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "the {what} {} belongs to uid {}, not to root: whoever owns it can make this \
                 host trust any key",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "the {what} {} is writable by {} (mode {:04o}): whoever can write it can make \
                 this host trust any key",
                path.display(),
                if meta.mode() & 0o002 != 0 {
                    "everyone"
                } else {
                    "its group"
                },
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

impl TrustedKeys {
    pub fn load(file: &Path) -> Result<TrustedKeys, String> {
        let text = rootfs::read_record(file)?
            .ok_or_else(|| format!("the trust file {} does not exist", file.display()))?;
        check_guarded(file)?;
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("untrusted comment:") || line.starts_with('#') {
                continue;
            }
            let key = minisign_verify::PublicKey::from_base64(line).map_err(|e| {
                format!(
                    "{}:{}: not a minisign public key ({e})",
                    file.display(),
                    number + 1
                )
            })?;
            keys.push((key_id(line).unwrap_or_default(), key));
        }
        if keys.is_empty() {
            return Err(format!("the trust file {} holds no key", file.display()));
        }
        Ok(TrustedKeys {
            file: file.to_path_buf(),
            keys,
        })
    }

    /// The id of the trusted key that made `signature` over `bytes`.
    pub fn verify(&self, bytes: &[u8], signature: &str) -> Result<String, String> {
        let decoded = minisign_verify::Signature::decode(signature)
            .map_err(|e| format!("the release's signature is not a minisign signature: {e}"))?;
        let signer = signature
            .lines()
            .nth(1)
            .and_then(key_id)
            .unwrap_or_default();
        for (id, key) in &self.keys {
            if *id != signer {
                continue;
            }
            return match key.verify(bytes, &decoded, false) {
                Ok(()) => Ok(id.clone()),
                Err(e) => Err(format!(
                    "the release does not match its signature by key {id} ({e}): it was changed \
                     after signing"
                )),
            };
        }
        Err(format!(
            "the release is signed by key {signer}, which {} does not trust",
            self.file.display()
        ))
    }
}

/// minisign's key id from the base64 line of a key or signature: bytes 2..10, little-endian,
/// printed as 16 upper-case hex digits.
fn key_id(line: &str) -> Option<String> {
    let bytes = base64(line.trim())?;
    let number = bytes.get(2..10)?;
    let mut le = [0u8; 8];
    le.copy_from_slice(number);
    Some(format!("{:016X}", u64::from_le_bytes(le)))
}

/// Standard base64 (with padding), enough for key and signature lines.
fn base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for byte in text.trim_end_matches('=').bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The newest release this host accepted of one fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub fleet: String,
    pub version: String,
    pub sequence: u64,
    pub sha256: String,
    pub key: String,
}

/// What a host accepted, per fleet, in `/var/lib/bell/accepted-releases.json`. Per fleet,
/// because one key may sign several fleets' releases: a record of one fleet must never stand
/// in for another's, or a release of fleet B would wipe out what the host knows of fleet A
/// and an old release of A would be accepted again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedReleases {
    /// The fleet of the release accepted last: the host's fleet when `--fleet` is not given.
    pub current: Option<String>,
    pub fleets: std::collections::BTreeMap<String, Accepted>,
}

impl AcceptedReleases {
    pub fn of(&self, fleet: &str) -> Option<&Accepted> {
        self.fleets.get(fleet)
    }
}

fn accepted_path(root: &Root) -> PathBuf {
    root.bell_dir().join("accepted-releases.json")
}

/// Written by bell-run before the records were kept per fleet: one record, read as its
/// fleet's when the new file has none for it.
fn legacy_accepted_path(root: &Root) -> PathBuf {
    root.bell_dir().join("accepted-release.json")
}

pub fn load_accepted(root: &Root) -> Result<AcceptedReleases, String> {
    let path = accepted_path(root);
    let mut all: AcceptedReleases = match rootfs::read_record(&path)? {
        None => AcceptedReleases::default(),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| format!("{} is damaged: {e}", path.display()))?,
    };
    let legacy = legacy_accepted_path(root);
    if let Some(text) = rootfs::read_record(&legacy)? {
        let old: Accepted = serde_json::from_str(&text)
            .map_err(|e| format!("{} is damaged: {e}", legacy.display()))?;
        all.current.get_or_insert_with(|| old.fleet.clone());
        all.fleets.entry(old.fleet.clone()).or_insert(old);
    }
    Ok(all)
}

/// Records `accepted` as its fleet's newest, leaving every other fleet's record as it was.
pub fn save_accepted(root: &Root, accepted: &Accepted) -> Result<(), String> {
    let mut all = load_accepted(root)?;
    all.current = Some(accepted.fleet.clone());
    all.fleets.insert(accepted.fleet.clone(), accepted.clone());
    let path = accepted_path(root);
    let text = serde_json::to_string_pretty(&all).unwrap_or_default();
    rootfs::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Checks a verified release against what this host accepted before and the clock: the
/// rollback and freeze refusals.
pub fn check_fresh(
    release: &Release,
    sha256: &str,
    accepted: Option<&Accepted>,
    now: u64,
) -> Result<u64, String> {
    let sequence = release.sequence.ok_or_else(|| {
        "the release is signed but carries no sequence; sign it with `bellc build --sign-key` \
         or `bellc publish --sign-key`"
            .to_string()
    })?;
    if let Some(accepted) = accepted.filter(|a| a.fleet == release.fleet) {
        {
            if sequence < accepted.sequence {
                return Err(format!(
                    "release {} has sequence {sequence}, older than release {} (sequence {}) \
                     which this host already accepted: a rollback is refused (to go back, sign \
                     the old release again, as a newer one)",
                    short(&release.version),
                    short(&accepted.version),
                    accepted.sequence
                ));
            }
            if sequence == accepted.sequence && sha256 != accepted.sha256 {
                return Err(format!(
                    "release {} reuses sequence {sequence} of the release this host accepted, \
                     with different content",
                    short(&release.version)
                ));
            }
        }
    }
    if let Some(expires) = release.expires {
        if expires <= now {
            return Err(format!(
                "the newest release available ({}, sequence {sequence}) expired at {}: the \
                 source is stale or frozen; this host keeps its configuration until a newer \
                 signed release is published",
                short(&release.version),
                bell_bundle::utc(expires)
            ));
        }
    }
    Ok(sequence)
}

fn short(version: &str) -> &str {
    bell_bundle::short(version, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_key_lines() {
        assert_eq!(base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64("aGk=").unwrap(), b"hi");
        assert!(base64("a*b").is_none());
    }
}

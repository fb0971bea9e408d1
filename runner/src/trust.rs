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
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a host's trusted keys are when `--trust` is not given (inside the root).
pub const DEFAULT_TRUST_FILE: &str = "/etc/bell/trusted.pub";

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

/// The public keys of a trust file (see [`bell_bundle::trust::TrustedKeys`]), read from a
/// file that only root could have written.
pub use bell_bundle::trust::TrustedKeys;

/// Loads the trust file at `file`: refused when someone other than root could have written
/// it or its directory.
pub fn load(file: &Path) -> Result<TrustedKeys, String> {
    let text = rootfs::read_record(file)?
        .ok_or_else(|| format!("the trust file {} does not exist", file.display()))?;
    check_guarded(file)?;
    TrustedKeys::parse(&text, file)
}

pub use bell_bundle::accept::{check_fresh, Accepted};

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

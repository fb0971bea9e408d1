//! Every release a build output has held, kept under `OUT/releases/<version>.json` (with its
//! `.minisig` when signed), and the bundles they name kept with them.
//!
//! Why: during a rollout some hosts still run the previous release, and an abort moves hosts
//! back to it, so a served directory must answer for more than the newest release. Build
//! outputs copied one over another into one served directory (each CI run's OUT) hold every
//! release and bundle a host may be asked for, because every name in OUT is either content-
//! addressed (bundles, store files) or a version; only `release.json`, the newest, is
//! overwritten. `bellc prune --keep N` is the only thing that removes a kept release.

use super::files::{io_err, prune_store, remove_any, remove_if_present, EmitError};
use bell_bundle::{Release, RELEASES_DIR, SIGNATURE_SUFFIX};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use bell_bundle::RELEASE_FILE;

/// One kept release, as `bellc releases` lists it.
#[derive(Debug, Clone)]
pub struct KeptRelease {
    pub version: String,
    pub sequence: Option<u64>,
    pub expires: Option<u64>,
    pub hosts: usize,
    pub bundles: BTreeSet<String>,
    /// A `.minisig` lies beside it (`bellc releases` does not check it; hosts do).
    pub signed: bool,
    /// The release `release.json` names.
    pub current: bool,
    pub path: PathBuf,
    modified: SystemTime,
}

/// The path of the signature of a release file.
pub fn signature_path(release_file: &Path) -> PathBuf {
    let mut name = release_file.as_os_str().to_os_string();
    name.push(SIGNATURE_SUFFIX);
    PathBuf::from(name)
}

/// Copies `OUT/release.json` (and its signature, or the lack of one) to
/// `OUT/releases/<version>.json` unless that copy is already the same.
pub fn keep_current(out: &Path) -> Result<(), EmitError> {
    let current = out.join(RELEASE_FILE);
    let Ok(bytes) = fs::read(&current) else {
        return Ok(());
    };
    let Ok(release) = serde_json::from_slice::<Release>(&bytes) else {
        // Not a release this bellc can read: nothing to keep it by.
        return Ok(());
    };
    keep(out, &release.version, release.sequence, &bytes)
}

/// Copies `bytes`, the text of `OUT/release.json` (whose version is `version`, signed with
/// `sequence`), and its signature or the lack of one, to `OUT/releases/<version>.json` unless
/// that copy is already the same, or newer. The caller has parsed `bytes` as a release.
///
/// Newer: the controller signs a version again when it gives it (a wave, an abort whose
/// release is the build's own), and only into `releases/`. Its copy carries the key's latest
/// sequence for that version, which the controller's record holds it to; the build's older
/// copy put over it would read as a replay, and the next rollout would be refused.
pub(super) fn keep(
    out: &Path,
    version: &str,
    sequence: Option<u64>,
    bytes: &[u8],
) -> Result<(), EmitError> {
    if !bell_bundle::is_bundle_id(version) {
        return Ok(());
    }
    let current = out.join(RELEASE_FILE);
    let dir = out.join(RELEASES_DIR);
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let kept = dir.join(format!("{version}.json"));
    let signature = fs::read(signature_path(&current)).ok();
    let kept_signature = signature_path(&kept);
    let kept_bytes = fs::read(&kept).ok();
    if kept_bytes.as_deref() == Some(bytes) && fs::read(&kept_signature).ok() == signature {
        return Ok(());
    }
    if kept_bytes.is_some_and(|b| sequence_of(&b) > sequence) {
        return Ok(());
    }
    // The signature goes first and the file it signs second, each renamed into place, so a
    // reader never takes an unsigned copy for the whole story; a stale signature is removed.
    match &signature {
        Some(sig) => write_atomic(&kept_signature, sig)?,
        None => remove_if_present(&kept_signature)?,
    }
    write_atomic(&kept, bytes)
}

/// A release text's sequence, read without building its host map (large at scale).
fn sequence_of(bytes: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Sequence {
        #[serde(default)]
        sequence: Option<u64>,
    }
    serde_json::from_slice::<Sequence>(bytes).ok()?.sequence
}

/// Writes a file under a temporary name and renames it into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EmitError> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string());
    let tmp = path.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
    fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

/// Every kept release, oldest first: by sequence (signed releases), then by modification
/// time (unsigned builds carry no sequence), then by version.
pub fn list(out: &Path) -> Result<Vec<KeptRelease>, EmitError> {
    let current = fs::read(out.join(RELEASE_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<Release>(&b).ok())
        .map(|r| r.version);
    let dir = out.join(RELEASES_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&dir)(e)),
    };
    let mut kept = Vec::new();
    for entry in entries {
        let path = entry.map_err(io_err(&dir))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        let Some(version) = name.as_deref().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if !bell_bundle::is_bundle_id(version) {
            continue;
        }
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        let release: Release = serde_json::from_slice(&bytes).map_err(|e| EmitError::Io {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        let modified = fs::metadata(&path)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        kept.push(KeptRelease {
            version: version.to_string(),
            sequence: release.sequence,
            expires: release.expires,
            hosts: release.hosts.len(),
            bundles: release.hosts.values().map(|h| h.bundle.clone()).collect(),
            signed: signature_path(&path).is_file(),
            current: current.as_deref() == Some(version),
            path,
            modified,
        });
    }
    kept.sort_by(|a, b| {
        (a.sequence.unwrap_or(0), a.modified, &a.version).cmp(&(
            b.sequence.unwrap_or(0),
            b.modified,
            &b.version,
        ))
    });
    Ok(kept)
}

/// Every bundle id a kept release names.
pub fn bundles_in_use(out: &Path) -> Result<BTreeSet<String>, EmitError> {
    Ok(list(out)?.into_iter().flat_map(|r| r.bundles).collect())
}

/// What `prune` removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub releases: Vec<String>,
    pub bundles: usize,
}

/// Keeps the `keep` newest releases and the current one; removes the others and every bundle
/// that only they named.
pub fn prune(out: &Path, keep: usize) -> Result<Pruned, EmitError> {
    let current_path = out.join(RELEASE_FILE);
    // The bundles of release.json are never removed, whatever the releases directory says.
    let mut in_use: BTreeSet<String> = match fs::read(&current_path) {
        Ok(bytes) => serde_json::from_slice::<Release>(&bytes)
            .map_err(|e| EmitError::Io {
                path: current_path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?
            .hosts
            .into_values()
            .map(|h| h.bundle)
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
        Err(e) => return Err(io_err(&current_path)(e)),
    };
    keep_current(out)?;
    let kept = list(out)?;
    let cut = kept.len().saturating_sub(keep);
    let mut pruned = Pruned::default();
    for (index, release) in kept.into_iter().enumerate() {
        if index >= cut || release.current {
            in_use.extend(release.bundles);
            continue;
        }
        remove_if_present(&signature_path(&release.path))?;
        remove_if_present(&release.path)?;
        pruned.releases.push(release.version);
    }
    // Hosts follow release.json, which is always kept, so no host link loses its bundle.
    let bundles_dir = out.join("bundles");
    if let Ok(entries) = fs::read_dir(&bundles_dir) {
        for entry in entries {
            let entry = entry.map_err(io_err(&bundles_dir))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if bell_bundle::is_bundle_id(&name) && !in_use.contains(&name) {
                remove_any(&entry.path())?;
                pruned.bundles += 1;
            }
        }
    }
    if pruned.bundles > 0 {
        prune_store(&out.join(super::STORE_DIR))?;
        super::values::prune(out)?;
    }
    Ok(pruned)
}

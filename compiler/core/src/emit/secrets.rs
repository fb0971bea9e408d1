//! Each host's sealed secrets, beside the bundles: `secrets/<host>/<digest>.age`, one age file
//! per secret encrypted to the host's identity, and `secrets/<host>/<sha256>.json`, the
//! [`SealedIndex`] whose sha256 the host's release entry carries (and so the signature covers).
//!
//! Sealing is deterministic under the build's key, so a rebuild with the same inputs rewrites
//! nothing, and a host joining a group touches only its own directory.

use super::files::{io_err, EmitError};
use super::releases::write_atomic;
use bell_bundle::{Release, SealedFile, SealedIndex};
use bell_seal::{Recipient, SealKey};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::Path;
use std::sync::Arc;

/// The sealed contents of the bundles a build rendered, by bundle id, then keyed digest.
pub type SealedContents = HashMap<String, BTreeMap<String, Arc<[u8]>>>;

/// Called with each sealed file a build makes: its host, its path in OUT, its bytes, and
/// whether it is the file OUT holds already (kept, so read and checked once).
type EachFile<'a> = dyn FnMut(&str, String, Vec<u8>, bool) -> Result<(), EmitError> + 'a;

/// What [`write`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SealStats {
    pub hosts: usize,
    pub files_written: usize,
    pub files_removed: usize,
}

/// Seals every host's secrets to its identity into OUT and gives each host's release entry
/// the sha256 of its index. Files no release in OUT names any more are removed. With `kept`
/// (OUT is as the last build left it), a secret whose digest and host identity are unchanged
/// keeps the file sealed then, as its index recorded it, instead of being sealed again: the
/// same bytes (sealing is deterministic), without two X25519 operations per file.
pub fn write(
    out: &Path,
    release: &mut Release,
    sealed: &SealedContents,
    key: &SealKey,
    kept: bool,
) -> Result<SealStats, EmitError> {
    let mut stats = SealStats::default();
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let previous = if kept {
        previous_indexes(out)
    } else {
        HashMap::new()
    };
    stats.hosts = seal_hosts(
        out,
        release,
        sealed,
        key,
        &previous,
        &mut |_, rel, bytes, kept| {
            if !kept {
                stats.files_written += usize::from(write_if_changed(&out.join(&rel), &bytes)?);
            }
            wanted.insert(rel);
            Ok(())
        },
    )?;
    stats.files_removed = prune(out, &wanted)?;
    Ok(stats)
}

/// For `build --check`: gives each host's release entry the sha256 of its index, as
/// [`write`] does, and returns the hosts whose sealed files OUT lacks or holds differently.
pub fn check(
    out: &Path,
    release: &mut Release,
    sealed: &SealedContents,
    key: &SealKey,
) -> Result<BTreeSet<String>, EmitError> {
    let mut differing = BTreeSet::new();
    // Everything sealed afresh: a check takes nothing of OUT on trust.
    let previous = HashMap::new();
    seal_hosts(
        out,
        release,
        sealed,
        key,
        &previous,
        &mut |host, rel, bytes, _| {
            if !fs::read(out.join(&rel)).is_ok_and(|have| have == bytes) {
                differing.insert(host.to_string());
            }
            Ok(())
        },
    )?;
    Ok(differing)
}

/// Seals each host's secrets, handing every file (host, path in OUT, bytes) to `each`, and
/// sets the hosts' `secrets`. Returns how many hosts have secrets. Hosts are sealed a chunk
/// at a time on every core (two X25519 operations per file), in the release's host order.
fn seal_hosts(
    out: &Path,
    release: &mut Release,
    sealed: &SealedContents,
    key: &SealKey,
    previous: &HashMap<String, String>,
    each: &mut EachFile<'_>,
) -> Result<usize, EmitError> {
    use rayon::prelude::*;
    let mut hosts = 0;
    let names: Vec<String> = release.hosts.keys().cloned().collect();
    // Enough hosts to keep every core busy, few enough that their files stay small in memory.
    let chunk_len = 64 * rayon::current_num_threads();
    for chunk in names.chunks(chunk_len) {
        let made: Vec<Option<SealedHost>> = chunk
            .par_iter()
            .map(|name| {
                let host = &release.hosts[name];
                match sealed.get(&host.bundle).filter(|s| !s.is_empty()) {
                    Some(secrets) => {
                        let before = previous
                            .get(name)
                            .and_then(|sha| kept_index(out, name, sha));
                        seal_host(out, name, host, secrets, key, before.as_ref()).map(Some)
                    }
                    None => Ok(None),
                }
            })
            .collect::<Result<_, EmitError>>()?;
        for (name, made) in chunk.iter().zip(made) {
            let sha = match made {
                Some(made) => {
                    for (rel, bytes, kept) in made.files {
                        each(name, rel, bytes, kept)?;
                    }
                    hosts += 1;
                    Some(made.index_sha)
                }
                None => None,
            };
            if let Some(host) = release.hosts.get_mut(name) {
                host.secrets = sha;
            }
        }
    }
    Ok(hosts)
}

/// One host's sealed files (and its index, last), by path in OUT.
struct SealedHost {
    /// Path in OUT, bytes, and whether OUT holds them already.
    files: Vec<(String, Vec<u8>, bool)>,
    index_sha: String,
}

fn seal_host(
    out: &Path,
    name: &str,
    host: &bell_bundle::ReleaseHost,
    secrets: &BTreeMap<String, Arc<[u8]>>,
    key: &SealKey,
    before: Option<&SealedIndex>,
) -> Result<SealedHost, EmitError> {
    let dir = &out.join(bell_bundle::SECRETS_DIR);
    // The render stage refused a host with secrets and no identity.
    let identity = host.identity.as_deref().ok_or_else(|| invalid(dir, name))?;
    let recipient = bell_store::proof::Identity::parse(identity)
        .ok()
        .and_then(|id| <[u8; 32]>::try_from(id.key_bytes()).ok())
        .and_then(|key| Recipient::from_ed25519(key).ok())
        .ok_or_else(|| invalid(dir, name))?;
    let mut index = SealedIndex {
        format: bell_bundle::FORMAT,
        host: name.to_string(),
        identity: identity.to_string(),
        secrets: BTreeMap::new(),
    };
    let mut files = Vec::with_capacity(secrets.len() + 1);
    let before = before.filter(|b| b.identity == identity);
    for (digest, content) in secrets {
        let kept = before
            .and_then(|b| b.secrets.get(digest))
            .and_then(|file| kept_file(out, name, digest, file));
        let was_kept = kept.is_some();
        let sealed = match kept {
            Some(bytes) => bytes,
            None => key
                .seal(content, &recipient)
                .map_err(|e| invalid_data(dir, e.to_string()))?,
        };
        index.secrets.insert(
            digest.clone(),
            SealedFile {
                sha256: bell_bundle::sha256_hex(&sealed),
                size: sealed.len() as u64,
            },
        );
        files.push((
            bell_bundle::sealed_file_path(name, digest),
            sealed,
            was_kept,
        ));
    }
    let json = index.to_json();
    let index_sha = bell_bundle::sha256_hex(json.as_bytes());
    files.push((
        bell_bundle::sealed_index_path(name, &index_sha),
        json.into_bytes(),
        false,
    ));
    Ok(SealedHost { files, index_sha })
}

/// Each host's index in the release OUT holds now (the last build's), by host.
fn previous_indexes(out: &Path) -> HashMap<String, String> {
    fs::read(out.join("release.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Release>(&bytes).ok())
        .map(|release| {
            release
                .hosts
                .into_iter()
                .filter_map(|(name, host)| Some((name, host.secrets?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The last build's index of `host`, when OUT still holds it as written.
fn kept_index(out: &Path, host: &str, sha: &str) -> Option<SealedIndex> {
    let path = out.join(bell_bundle::sealed_index_path(host, sha));
    let bytes = bell_bundle::read_regular(&path, 16 << 20).ok()?;
    if bell_bundle::sha256_hex(&bytes) != sha {
        return None;
    }
    SealedIndex::from_json(std::str::from_utf8(&bytes).ok()?)
        .ok()
        .filter(|index| index.host == host)
}

/// A sealed file of the last build, when OUT still holds it as its index recorded it.
fn kept_file(out: &Path, host: &str, digest: &str, file: &SealedFile) -> Option<Vec<u8>> {
    let path = out.join(bell_bundle::sealed_file_path(host, digest));
    let bytes = bell_bundle::read_regular(&path, file.size.saturating_add(1)).ok()?;
    (bytes.len() as u64 == file.size && bell_bundle::sha256_hex(&bytes) == file.sha256)
        .then_some(bytes)
}

fn invalid(dir: &Path, host: &str) -> EmitError {
    invalid_data(
        dir,
        format!("host `{host}` has secrets and no usable identity"),
    )
}

fn invalid_data(dir: &Path, why: String) -> EmitError {
    EmitError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    }
}

/// Writes `bytes` at `path` unless it holds them already; says whether it wrote. Nothing here
/// is secret (a sealed file is readable only with its host's key), so it is 0644 as bundles
/// are, and a web server's unprivileged workers can serve it.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, EmitError> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && fs::read(path).is_ok_and(|have| have == bytes)
    {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        // A host's directory may have been a link left by someone else: never written through.
        if fs::symlink_metadata(parent).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(parent).map_err(io_err(parent))?;
        }
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    if fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        let _ = fs::remove_dir_all(path);
        let _ = fs::remove_file(path);
    }
    write_atomic(path, bytes)?;
    Ok(true)
}

/// Removes what neither this build (`wanted`) nor a release kept in OUT names: a rollout may
/// still serve a kept release, and its hosts then fetch that release's index and files.
fn prune(out: &Path, wanted: &BTreeSet<String>) -> Result<usize, EmitError> {
    let dir = out.join(bell_bundle::SECRETS_DIR);
    let mut present = Vec::new();
    let Ok(hosts) = fs::read_dir(&dir) else {
        return Ok(0);
    };
    for host in hosts {
        let host = host.map_err(io_err(&dir))?;
        let name = host.file_name().to_string_lossy().to_string();
        if !host.file_type().map_err(io_err(&dir))?.is_dir() {
            present.push((format!("{}/{name}", bell_bundle::SECRETS_DIR), host.path()));
            continue;
        }
        for file in fs::read_dir(host.path()).map_err(io_err(&host.path()))? {
            let file = file.map_err(io_err(&host.path()))?;
            let rel = format!(
                "{}/{name}/{}",
                bell_bundle::SECRETS_DIR,
                file.file_name().to_string_lossy()
            );
            present.push((rel, file.path()));
        }
    }
    if present.iter().all(|(rel, _)| wanted.contains(rel)) {
        return Ok(0);
    }
    let kept = kept_files(out)?;
    let mut removed = 0;
    for (rel, path) in present {
        if !wanted.contains(&rel) && !kept.contains(&rel) {
            let _ = fs::remove_dir_all(&path);
            fs::remove_file(&path)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(io_err(&path))?;
            removed += 1;
        }
    }
    // Directories of hosts that have nothing left.
    if let Ok(hosts) = fs::read_dir(&dir) {
        for host in hosts.flatten() {
            let _ = fs::remove_dir(host.path());
        }
    }
    Ok(removed)
}

/// The index and sealed files that the releases kept in OUT name.
fn kept_files(out: &Path) -> Result<BTreeSet<String>, EmitError> {
    let mut kept = BTreeSet::new();
    for release in super::releases::list(out)? {
        let bytes = fs::read(&release.path).map_err(io_err(&release.path))?;
        let Ok(release) = serde_json::from_slice::<Release>(&bytes) else {
            continue;
        };
        for (name, host) in &release.hosts {
            let Some(sha) = &host.secrets else { continue };
            let rel = bell_bundle::sealed_index_path(name, sha);
            let index = fs::read_to_string(out.join(&rel))
                .ok()
                .and_then(|text| SealedIndex::from_json(&text).ok());
            if let Some(index) = index {
                for digest in index.secrets.keys() {
                    kept.insert(bell_bundle::sealed_file_path(name, digest));
                }
            }
            kept.insert(rel);
        }
    }
    Ok(kept)
}

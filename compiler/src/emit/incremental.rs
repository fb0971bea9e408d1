//! Incremental rebuilds: `OUT/.bell-inputs.json` records what a build read (every spec and
//! inventory file with its sha256, every include glob with its matches) and the sha256 of the
//! release it wrote. When nothing of that changed, the output is already what the build would
//! write, so `bellc build` stops after hashing its inputs instead of parsing, resolving and
//! rendering the whole fleet again.
//!
//! Only builds without any diagnostic are recorded, so a warning is never hidden by a skipped
//! rebuild; a record from another version of bellc never matches.
//!
//! Paths are recorded relative to the spec's directory (a spec reads only its own tree), so OUT
//! does not depend on where the checkout lives: two checkouts build byte-identical trees, and a
//! record is checked against the files beside the spec being built now.

use crate::source::Sources;
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

pub const RECORD_FILE: &str = ".bell-inputs.json";

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    bellc: String,
    spec: PathBuf,
    inputs: Vec<(PathBuf, String)>,
    globs: Vec<(PathBuf, Vec<PathBuf>)>,
    release: String,
    /// Built with `--allow-unknown-sysctl`: a build without it must check the keys again.
    #[serde(default)]
    allow_unknown_sysctl: bool,
}

fn absolute(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The directory the spec's paths are recorded relative to.
fn spec_dir(spec: &Path) -> PathBuf {
    absolute(spec)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `path` relative to `dir`; a path outside it (which a spec cannot read) stays as it is.
fn relative(dir: &Path, path: &Path) -> PathBuf {
    let canonical = absolute(path);
    canonical
        .strip_prefix(dir)
        .or_else(|_| path.strip_prefix(dir))
        .map(Path::to_path_buf)
        .unwrap_or(canonical)
}

/// A glob pattern relative to `dir`; its wildcards keep it from being canonicalised itself, so
/// its directory is.
fn relative_pattern(dir: &Path, pattern: &Path) -> PathBuf {
    match (pattern.parent(), pattern.file_name()) {
        (Some(parent), Some(name)) if !parent.to_string_lossy().contains(['*', '?', '[']) => {
            relative(dir, parent).join(name)
        }
        _ => relative(dir, pattern),
    }
}

/// Whether OUT holds the build of `spec` as it is now: the same bellc, the same input bytes,
/// the same glob matches, the same checks (`allow_unknown_sysctl`), and release.json as that
/// build wrote it.
pub fn is_current(spec: &Path, out: &Path, allow_unknown_sysctl: bool) -> bool {
    let Ok(text) = fs::read_to_string(out.join(RECORD_FILE)) else {
        return false;
    };
    let Ok(record) = serde_json::from_str::<Record>(&text) else {
        return false;
    };
    let dir = spec_dir(spec);
    if record.bellc != env!("CARGO_PKG_VERSION")
        || record.spec != relative(&dir, spec)
        || record.allow_unknown_sysctl != allow_unknown_sysctl
    {
        return false;
    }
    let release_ok = fs::read(out.join("release.json"))
        .map(|bytes| release_digest(&bytes) == record.release)
        .unwrap_or(false);
    if !release_ok || !out.join("hosts").is_dir() {
        return false;
    }
    let inputs_ok = record.inputs.iter().all(|(path, sha)| {
        fs::read(dir.join(path))
            .map(|bytes| &bell_bundle::sha256_hex(&bytes) == sha)
            .unwrap_or(false)
    });
    inputs_ok
        && record.globs.iter().all(|(pattern, matches)| {
            let now: Vec<PathBuf> = glob::glob(&dir.join(pattern).to_string_lossy())
                .map(|paths| {
                    let mut v: Vec<PathBuf> = paths
                        .filter_map(Result::ok)
                        .map(|p| relative(&dir, &p))
                        .collect();
                    v.sort();
                    v
                })
                .unwrap_or_default();
            &now == matches
        })
}

/// The digest of release.json as the build wrote it: signing it later (which adds a sequence
/// and an expiry) leaves the build current.
fn release_digest(bytes: &[u8]) -> String {
    match serde_json::from_slice::<bell_bundle::Release>(bytes) {
        Ok(release) => bell_bundle::sha256_hex(release.unsigned().to_json().as_bytes()),
        Err(_) => bell_bundle::sha256_hex(bytes),
    }
}

/// Records the inputs of a build that just wrote `out` without any diagnostic.
pub fn record(spec_path: &Path, spec: &Spec, sources: &Sources, out: &Path) -> std::io::Result<()> {
    let release = fs::read(out.join("release.json"))?;
    let dir = spec_dir(spec_path);
    let record = Record {
        bellc: env!("CARGO_PKG_VERSION").to_string(),
        spec: relative(&dir, spec_path),
        inputs: sources
            .iter()
            .map(|f| {
                (
                    relative(&dir, &f.path),
                    bell_bundle::sha256_hex(f.text.as_bytes()),
                )
            })
            .collect(),
        globs: spec
            .globs
            .iter()
            .map(|(pattern, matches)| {
                let mut matches: Vec<PathBuf> = matches.iter().map(|m| relative(&dir, m)).collect();
                matches.sort();
                (relative_pattern(&dir, pattern), matches)
            })
            .collect(),
        release: release_digest(&release),
        allow_unknown_sysctl: spec.allow_unknown_sysctl,
    };
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    let tmp = out.join(".bell-inputs.json.tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, out.join(RECORD_FILE))
}

/// Forgets the record, before a build that may change OUT.
pub fn forget(out: &Path) {
    let _ = fs::remove_file(out.join(RECORD_FILE));
}

//! Incremental rebuilds: `OUT/.bell-inputs.json` records what a build read (every spec and
//! inventory file with its sha256, every include glob with its matches) and the sha256 of the
//! release it wrote. When nothing of that changed, the output is already what the build would
//! write, so `bellc build` stops after hashing its inputs instead of parsing, resolving and
//! rendering the whole fleet again.
//!
//! A build's warnings are recorded with it and printed again by a rebuild it skips, so a
//! warning is never hidden by a skipped rebuild (and `--deny-warnings` never skips a build that
//! had one); a record from another bellc (another version, or a build from other sources) never
//! matches.
//!
//! Paths are recorded relative to the spec's directory (a spec reads only its own tree), so OUT
//! does not depend on where the checkout lives: two checkouts build byte-identical trees, and a
//! record is checked against the files beside the spec being built now.

use super::out_dir::{FINGERPRINT_FILE, RECORD_FILE, RENDER_CACHE_FILE, VALUES_DIR};
use crate::diagnostic::{Diagnostics, Plain, PlainLabel};
use crate::source::Sources;
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

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
    /// What names the key the build sealed secrets with (a keyed digest of a constant), when
    /// it sealed any: a build with another key must seal them again.
    #[serde(default)]
    seal: Option<String>,
    /// The build had no diagnostic.
    #[serde(default)]
    clean: bool,
    /// The warnings of a build that had some (a build with an error is never recorded): a
    /// skipped rebuild prints them again. Absent from a clean build's record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<KeptWarning>,
}

/// A warning as [`crate::diagnostic::Plain`] holds it, its file relative to the spec's directory.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct KeptWarning {
    file: Option<PathBuf>,
    code: Option<String>,
    message: String,
    help: Option<String>,
    advice: bool,
    /// Each label: its text, byte offset, length, and whether it is the primary one.
    labels: Vec<(Option<String>, usize, usize, bool)>,
}

/// What a build finds in OUT against the record of the last build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The same inputs and checks, and OUT as that build left it: nothing to do.
    Current,
    /// OUT is as the last build left it, but the inputs changed: a kept bundle is right.
    Intact,
    /// No record, or OUT changed since it was written (by hand, or by a build that stopped):
    /// what is kept must be verified.
    Unknown,
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

/// What the record of the last build says of OUT now (see [`Found`]).
/// What names a seal key in the record: its keyed digest of a constant, which tells keys apart
/// and nothing of them.
fn seal_key_name(key: &bell_seal::SealKey) -> String {
    key.digest(b"bellc: the key this build sealed secrets with")
}

pub fn found(
    spec: &Path,
    out: &Path,
    allow_unknown_sysctl: bool,
    deny_warnings: bool,
    seal: &bell_seal::SealKey,
) -> Found {
    let Ok(text) = fs::read_to_string(out.join(RECORD_FILE)) else {
        return Found::Unknown;
    };
    let Ok(record) = serde_json::from_str::<Record>(&text) else {
        return Found::Unknown;
    };
    // An unsigned release.json is its own unsigned text: hashing its bytes spares parsing a
    // large fleet's release on every rebuild (0.2 s at 100,000 hosts).
    let release_ok = fs::read(out.join("release.json"))
        .map(|bytes| {
            bell_bundle::sha256_hex(&bytes) == record.release
                || release_digest(&bytes) == record.release
        })
        .unwrap_or(false);
    let recorded = fs::read_to_string(out.join(FINGERPRINT_FILE)).unwrap_or_default();
    if record.bellc != env!("CARGO_PKG_VERSION")
        || !release_ok
        || recorded.trim() != fingerprint(out)
    {
        return Found::Unknown;
    }
    let dir = spec_dir(spec);
    // A build with warnings is skipped only when they can be printed again, and never under
    // `--deny-warnings`, which must fail on them as the build did.
    let warnings_kept = !record.warnings.is_empty() && !deny_warnings;
    if !(record.clean || warnings_kept)
        || record.spec != relative(&dir, spec)
        || record.allow_unknown_sysctl != allow_unknown_sysctl
        || record
            .seal
            .as_ref()
            .is_some_and(|name| *name != seal_key_name(seal))
    {
        return Found::Intact;
    }
    let inputs_ok = record.inputs.iter().all(|(path, sha)| {
        fs::read(dir.join(path))
            .map(|bytes| &bell_bundle::sha256_hex(&bytes) == sha)
            .unwrap_or(false)
    });
    let globs_ok = record.globs.iter().all(|(pattern, matches)| {
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
    });
    if inputs_ok && globs_ok {
        Found::Current
    } else {
        Found::Intact
    }
}

/// A digest of OUT's state as the file system keeps it, cheap enough for every rebuild: the
/// size, times, inode and link count of every store file and every manifest, and the times of
/// the directories bellc writes. Bundle files are hard links into the store, so an edit of one
/// changes its store file's times, and deleting or replacing one lowers its link count;
/// removing or relinking a host changes `hosts/`. (On a file system without hard links a build
/// copies instead, and a hand-deleted bundle file is then found by `bellc build --check`.)
pub fn fingerprint(out: &Path) -> String {
    use rayon::prelude::*;
    use std::os::unix::fs::MetadataExt;
    fn stat(path: &Path) -> String {
        match fs::symlink_metadata(path) {
            Ok(m) => format!(
                "{} {} {}.{} {}.{} {} {}",
                m.mode(),
                m.len(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.ino(),
                m.nlink()
            ),
            Err(_) => "-".into(),
        }
    }
    fn listing(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
    use sha2::{Digest, Sha256};
    // Lines are hashed as they are made, a few hundred paths at a time in parallel and those
    // digests in order: at 100,000 bundles the text of every line was 100 MB held at once.
    fn digest(lines: impl Iterator<Item = String>) -> [u8; 32] {
        let mut hasher = Sha256::new();
        for line in lines {
            hasher.update(line.as_bytes());
            hasher.update(b"\n");
        }
        hasher.finalize().into()
    }
    let store = out.join(super::STORE_DIR);
    let bundles = out.join("bundles");
    let mut hasher = Sha256::new();
    // This bellc's build (`build.rs`): another build, even of the same version, renders again.
    let head = std::iter::once(format!("bellc {}", env!("BELLC_BUILD"))).chain(
        ["bundles", "hosts", "releases", super::STORE_DIR, VALUES_DIR]
            .iter()
            .map(|d| format!("{d} {}", stat(&out.join(d)))),
    );
    hasher.update(digest(head));
    let shards: Vec<[u8; 32]> = listing(&store)
        .par_iter()
        .map(|shard| {
            let files = listing(shard);
            let lines = std::iter::once(format!("{} {}", shard.display(), stat(shard)))
                .chain(files.iter().map(|f| format!("{} {}", f.display(), stat(f))));
            digest(lines)
        })
        .collect();
    let manifests: Vec<[u8; 32]> = listing(&bundles)
        .par_chunks(256)
        .map(|chunk| {
            digest(chunk.iter().map(|b| {
                let manifest = b.join(bell_bundle::MANIFEST_FILE);
                format!("{} {} {}", b.display(), stat(b), stat(&manifest))
            }))
        })
        .collect();
    for part in shards.iter().chain(&manifests) {
        hasher.update(part);
    }
    bell_wire::hex(&hasher.finalize())
}

/// The digest of release.json as the build wrote it: signing it later (which adds a sequence
/// and an expiry) leaves the build current.
fn release_digest(bytes: &[u8]) -> String {
    match serde_json::from_slice::<bell_bundle::Release>(bytes) {
        Ok(release) => bell_bundle::sha256_hex(release.unsigned_json().as_bytes()),
        Err(_) => bell_bundle::sha256_hex(bytes),
    }
}

/// Records the inputs of a build that just wrote `out` and `release` (which release.json holds,
/// maybe signed), with its diagnostics.
#[allow(clippy::too_many_arguments)]
pub fn record(
    spec_path: &Path,
    spec: &Spec,
    sources: &Sources,
    out: &Path,
    release: &bell_bundle::Release,
    sealed_with: Option<&bell_seal::SealKey>,
    diags: &Diagnostics,
) -> std::io::Result<()> {
    let dir = spec_dir(spec_path);
    let warnings = if diags.has_errors() {
        Vec::new()
    } else {
        diags
            .iter()
            .map(|d| {
                let plain = Plain::of(d);
                KeptWarning {
                    file: plain.file.map(|f| relative(&dir, &sources.get(f).path)),
                    code: plain.code,
                    message: plain.message,
                    help: plain.help,
                    advice: plain.severity == miette::Severity::Advice,
                    labels: plain
                        .labels
                        .into_iter()
                        .map(|l| (l.text, l.offset, l.len, l.primary))
                        .collect(),
                }
            })
            .collect()
    };
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
            .chain(
                sources
                    .encrypted()
                    .iter()
                    .map(|(path, sha)| (relative(&dir, path), sha.clone())),
            )
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
        release: bell_bundle::sha256_hex(release.unsigned_json().as_bytes()),
        allow_unknown_sysctl: spec.allow_unknown_sysctl,
        seal: sealed_with.map(seal_key_name),
        clean: diags.is_empty(),
        warnings,
    };
    let text = serde_json::to_string_pretty(&record).unwrap_or_default();
    let tmp = out.join(".bell-inputs.json.tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, out.join(RECORD_FILE))?;
    refresh(out)
}

/// The warnings of the build a rebuild skips ([`Found::Current`]), with the files they point
/// into read again (the record's digests say they are unchanged), to print as that build did.
pub fn kept_warnings(spec_path: &Path, out: &Path, sources: &mut Sources) -> Diagnostics {
    let mut diags = Diagnostics::new();
    let Some(record) = fs::read_to_string(out.join(RECORD_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<Record>(&text).ok())
    else {
        return diags;
    };
    // Paths as the build named them: beside the spec as it was given.
    let beside = spec_path.parent().unwrap_or(Path::new(""));
    for kept in record.warnings {
        let file = kept.file.and_then(|rel| {
            let path = beside.join(rel);
            sources.find(&path).or_else(|| {
                let text = fs::read_to_string(&path).ok()?;
                Some(sources.add(&path, text))
            })
        });
        diags.push(Plain {
            file,
            code: kept.code,
            message: kept.message,
            help: kept.help,
            severity: if kept.advice {
                miette::Severity::Advice
            } else {
                miette::Severity::Warning
            },
            labels: kept
                .labels
                .into_iter()
                .map(|(text, offset, len, primary)| PlainLabel {
                    text,
                    offset,
                    len,
                    primary,
                })
                .collect(),
        });
    }
    diags
}

/// Takes OUT as it is now into the record, after a step that changed OUT in a known way
/// (signing an up-to-date build).
pub fn refresh(out: &Path) -> std::io::Result<()> {
    let tmp = out.join(".bell-fingerprint.tmp");
    fs::write(&tmp, fingerprint(out))?;
    fs::rename(&tmp, out.join(FINGERPRINT_FILE))
}

/// Forgets the record, before a build that may change OUT.
pub fn forget(out: &Path) {
    let _ = fs::remove_file(out.join(RECORD_FILE));
    let _ = fs::remove_file(out.join(FINGERPRINT_FILE));
    let _ = fs::remove_file(out.join(RENDER_CACHE_FILE));
}

/// The last build's bundles by what they were rendered from, those still in OUT. Only for a
/// build that found OUT as the last build left it ([`Found::Intact`]): a bundle OUT holds is
/// then as it was written.
pub fn load_render_cache(out: &Path) -> std::collections::HashMap<String, String> {
    let Ok(text) = fs::read_to_string(out.join(RENDER_CACHE_FILE)) else {
        return Default::default();
    };
    let bundles = out.join("bundles");
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(digest, id)| {
            digest.len() == 64
                && super::out_dir::is_bundle_name(id)
                && fs::symlink_metadata(bundles.join(id).join(bell_bundle::MANIFEST_FILE))
                    .is_ok_and(|m| m.is_file())
        })
        .map(|(digest, id)| (digest.to_string(), id.to_string()))
        .collect()
}

/// Keeps the digests of a build that just wrote OUT, for the next.
pub fn save_render_cache(out: &Path, entries: &[(String, String)]) -> std::io::Result<()> {
    let mut text = String::with_capacity(entries.len() * 130);
    for (digest, id) in entries {
        text.push_str(digest);
        text.push(' ');
        text.push_str(id);
        text.push('\n');
    }
    let tmp = out.join(".bell-rendered.tmp");
    fs::write(&tmp, text)?;
    fs::rename(&tmp, out.join(RENDER_CACHE_FILE))
}

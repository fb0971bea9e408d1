//! The bundle format: the one contract between `bellc` (which writes bundles) and `bell-run`
//! (which applies them).
//!
//! A bundle is a directory:
//!
//! ```text
//! bundle.json          the manifest (this module's `Manifest`); the bundle id is its sha256
//! root/<path>          every managed file at its path on the host (root/etc/sysctl.d/60-bell.conf)
//! scripts/<...>        apply / revert / trigger scripts and exec user scripts
//! ```
//!
//! Everything in the directory is covered by the manifest: files and scripts carry their sha256,
//! so checking the manifest's own hash and then every listed hash verifies the whole bundle.
//! The manifest is written by `Manifest::to_json`, which is canonical (fixed field order, sorted
//! maps, two-space indentation, trailing newline) so that the same bundle always has the same id.
//!
//! This crate is deliberately small: serde types, hashing, and integrity checks. It knows nothing
//! of sysctl, units or users; that knowledge lives in the scripts that the compiler renders.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// The manifest format this crate writes and the newest one it reads.
pub const FORMAT: u32 = 1;

/// The file name of the manifest inside a bundle directory.
pub const MANIFEST_FILE: &str = "bundle.json";

/// The directory inside a bundle that holds managed files at their host paths.
pub const ROOT_DIR: &str = "root";

/// `bundle.json`: everything one host gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    /// The target profile the bundle was rendered for (`debian-12`, `ubuntu-24.04`, ...).
    pub target: String,
    /// The fleet name, so that reports can be filed under it.
    pub fleet: String,
    /// Resources in apply order (a topological order of their `after` edges).
    pub resources: Vec<Resource>,
    /// Every managed file, sorted by path.
    pub files: Vec<File>,
    /// Work to run once per apply, between the file switch and the applies, when any managed
    /// file under one of `paths` was created, changed or removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
}

/// One managed thing of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    pub kind: String,
    pub name: String,
    /// sha256 of everything about the resource (see `Resource::compute_hash`): when it changes,
    /// bell-run applies the resource again.
    pub hash: String,
    /// Host paths of the managed files this resource owns (entries of `Manifest::files`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// `KIND:NAME` of resources that must be applied before this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Brings the resource live. For `exec` resources this is the user's script itself.
    pub apply: Option<Script>,
    /// Takes the resource back, from what `apply` recorded in its state directory.
    pub revert: Option<Script>,
    /// Present on `exec` resources: how bell-run schedules the user's script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecPolicy>,
}

/// A script shipped in the bundle, by its path relative to the bundle directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub path: String,
    pub sha256: String,
}

/// A managed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Absolute, normalised path on the host; the content is at `root/<path>` in the bundle.
    pub path: String,
    pub sha256: String,
    /// Octal mode, four digits (`"0644"`).
    pub mode: String,
    pub owner: String,
    pub group: String,
}

/// How an `exec` resource's script is run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecPolicy {
    pub rerun: Rerun,
    /// Seconds between runs when `rerun` is `always`; `None` means on every apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_interval: Option<u64>,
    /// Seconds to wait before retrying a failed run; `None` means retry on every apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<u64>,
    /// Seconds before the script's whole process group is killed.
    pub timeout: u64,
    pub on_failure: OnFailure,
    #[serde(default)]
    pub background: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rerun {
    Always,
    Never,
    OnceSuccessfully,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    Continue,
    Halt,
}

/// Work that runs once per apply, such as `systemctl daemon-reload` after unit files changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    pub name: String,
    /// Host path prefixes (directories end in `/`) whose changes fire the trigger.
    pub paths: Vec<String>,
    pub script: Script,
}

/// `release.json`: one build of a whole fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    pub format: u32,
    pub fleet: String,
    /// sha256 over the host → bundle map: the fleet's desired version.
    pub version: String,
    pub hosts: BTreeMap<String, ReleaseHost>,
    /// Rollout waves, in order; every host appears in exactly one wave.
    #[serde(default)]
    pub waves: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseHost {
    pub bundle: String,
    pub address: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        use fmt::Write;
        let _ = write!(out, "{byte:02x}");
    }
    out
}

impl Manifest {
    /// The canonical bytes of the manifest; the bundle id is their sha256.
    pub fn to_json(&self) -> String {
        // Serialising plain structs, Vecs and BTreeMaps of strings cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The bundle id: the sha256 of the canonical manifest.
    pub fn id(&self) -> String {
        sha256_hex(self.to_json().as_bytes())
    }

    /// Parses a manifest, refusing formats newer than this crate knows.
    pub fn from_json(text: &str) -> Result<Manifest, FormatError> {
        #[derive(Deserialize)]
        struct Probe {
            format: Option<u32>,
        }
        let probe: Probe =
            serde_json::from_str(text).map_err(|e| FormatError::Json(e.to_string()))?;
        match probe.format {
            None => return Err(FormatError::MissingFormat),
            Some(f) if f != FORMAT => return Err(FormatError::UnknownFormat(f)),
            Some(_) => {}
        }
        serde_json::from_str(text).map_err(|e| FormatError::Json(e.to_string()))
    }

    /// The file entry for a host path.
    pub fn file(&self, path: &str) -> Option<&File> {
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }
}

impl Resource {
    /// `KIND:NAME`, the way specs and `after` edges name a resource.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.name)
    }

    /// The hash of everything about the resource: kind, name, dependencies, scripts and exec
    /// policy, and the path, content hash, mode and ownership of each of its files.
    pub fn compute_hash(&self, files: &[File]) -> String {
        let mut unhashed = self.clone();
        unhashed.hash = String::new();
        let owned: Vec<&File> = self
            .files
            .iter()
            .filter_map(|p| files.iter().find(|f| &f.path == p))
            .collect();
        let value = serde_json::json!({ "resource": unhashed, "files": owned });
        sha256_hex(value.to_string().as_bytes())
    }
}

impl Release {
    /// The release version: sha256 over the sorted `host bundle` lines, so that it changes
    /// exactly when some host's bundle changes (or hosts come and go).
    pub fn compute_version(hosts: &BTreeMap<String, ReleaseHost>) -> String {
        let mut text = String::new();
        for (name, host) in hosts {
            text.push_str(name);
            text.push(' ');
            text.push_str(&host.bundle);
            text.push('\n');
        }
        sha256_hex(text.as_bytes())
    }

    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    Json(String),
    MissingFormat,
    UnknownFormat(u32),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Json(e) => write!(f, "the manifest is not valid bundle JSON: {e}"),
            FormatError::MissingFormat => write!(f, "the manifest has no `format` field"),
            FormatError::UnknownFormat(v) => write!(
                f,
                "the manifest has format {v}, but this bell-run reads format {FORMAT} only; \
                 use a bell-run as new as the bellc that built the bundle"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Checks that a path from a manifest is a plain relative path with no `..`, no root, and no
/// empty or `.` components, so that joining it under a directory can never leave it.
pub fn is_contained_relative(path: &str) -> bool {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.contains("//") {
        return false;
    }
    Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        && !path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
}

/// Checks that a host path from a manifest is absolute and normalised (`/a/b`, no `..`, `.`,
/// `//`, or trailing slash).
pub fn is_normal_absolute(path: &str) -> bool {
    match path.strip_prefix('/') {
        Some(rest) => is_contained_relative(rest),
        None => false,
    }
}

/// Where a host path's content lives inside a bundle directory.
pub fn content_path(bundle_dir: &Path, host_path: &str) -> PathBuf {
    bundle_dir
        .join(ROOT_DIR)
        .join(host_path.trim_start_matches('/'))
}

/// A bundle that failed verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    Unreadable { path: PathBuf, error: String },
    Format(FormatError),
    IdMismatch { expected: String, actual: String },
    BadPath { path: String },
    HashMismatch { path: String },
    ResourceHash { resource: String },
    UnknownFile { resource: String, path: String },
    UnlistedFile { path: PathBuf },
    DuplicatePath { path: String },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Unreadable { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            VerifyError::Format(e) => write!(f, "{e}"),
            VerifyError::IdMismatch { expected, actual } => write!(
                f,
                "the manifest hashes to {actual}, not to the bundle id {expected}: it was edited after the build"
            ),
            VerifyError::BadPath { path } => write!(
                f,
                "the manifest names the path {path:?}, which is not a normalised path inside the bundle or the root"
            ),
            VerifyError::HashMismatch { path } => {
                write!(f, "{path} does not match the sha256 in the manifest")
            }
            VerifyError::ResourceHash { resource } => {
                write!(f, "the hash of resource {resource} does not match its content")
            }
            VerifyError::UnknownFile { resource, path } => {
                write!(f, "resource {resource} owns {path}, which the manifest does not list")
            }
            VerifyError::UnlistedFile { path } => write!(
                f,
                "{} is in the bundle but not in its manifest",
                path.display()
            ),
            VerifyError::DuplicatePath { path } => {
                write!(f, "the manifest lists {path} more than once")
            }
        }
    }
}

impl std::error::Error for VerifyError {}

//! Checking a bundle on disk against its manifest: every path contained, every file regular
//! and of the sha256 the manifest gives, nothing followed through a symlink.

use crate::*;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    Json(String),
    MissingFormat,
    UnknownFormat(u32),
    /// A field of a newer bellc: the manifest is well-formed, this reader is old.
    UnknownField(String),
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
            FormatError::UnknownField(name) => write!(
                f,
                "the manifest has a field this bell-run does not know (`{name}`): the bundle \
                 was built by a newer bellc; use a bell-run as new as the bellc that built it"
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
    /// A `reboot` window that does not parse.
    BadWindow {
        window: String,
        error: String,
    },
    Unreadable {
        path: PathBuf,
        error: String,
    },
    Format(FormatError),
    IdMismatch {
        expected: String,
        actual: String,
    },
    BadPath {
        path: String,
    },
    HashMismatch {
        path: String,
    },
    /// A sealed entry without a keyed digest, or with a size (which would tell a reader the
    /// secret's length).
    BadSealed {
        path: String,
    },
    SizeMismatch {
        path: String,
        expected: u64,
        actual: u64,
    },
    ResourceHash {
        resource: String,
    },
    UnknownFile {
        resource: String,
        path: String,
    },
    UnlistedFile {
        path: PathBuf,
    },
    DuplicatePath {
        path: String,
    },
    NotCanonical,
    Unsorted {
        path: String,
    },
    BadMode {
        path: String,
        mode: String,
    },
    BadOwner {
        path: String,
    },
    BadDependency {
        resource: String,
        after: String,
    },
    DuplicateResource {
        resource: String,
    },
    ExecWithoutScript {
        resource: String,
    },
    /// A resource names a batch the manifest does not hold, or has a check of its own too.
    BadBatch {
        resource: String,
        batch: String,
    },
    /// A resource of a batch with an apply has no apply of its own (one due alone, or one with
    /// an `after`, runs it) or an exec policy.
    BadBatchMember {
        resource: String,
        batch: String,
    },
    /// Two batches share a name, or a name is not lowercase letters, digits and `-`.
    BadBatchName {
        name: String,
    },
    NotAFile {
        path: PathBuf,
    },
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
            VerifyError::SizeMismatch {
                path,
                expected,
                actual,
            } => write!(
                f,
                "{path} holds {actual} bytes, not the {expected} the manifest lists"
            ),
            VerifyError::HashMismatch { path } => {
                write!(f, "{path} does not match the sha256 in the manifest")
            }
            VerifyError::BadSealed { path } => {
                write!(
                    f,
                    "{path} is sealed but not named by a keyed digest alone (no size may be given)"
                )
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
            VerifyError::NotCanonical => write!(
                f,
                "the manifest is not in canonical form, so its sha256 is not the bundle id: it was edited after the build"
            ),
            VerifyError::Unsorted { path } => {
                write!(f, "the manifest's files are not sorted by path at {path}")
            }
            VerifyError::BadMode { path, mode } => {
                write!(f, "{path} has mode {mode:?}; expected four octal digits such as \"0644\"")
            }
            VerifyError::BadOwner { path } => write!(f, "{path} has an empty owner or group"),
            VerifyError::BadDependency { resource, after } => write!(
                f,
                "resource {resource} comes after {after}, which is not an earlier resource of the bundle"
            ),
            VerifyError::DuplicateResource { resource } => {
                write!(f, "the manifest lists resource {resource} more than once")
            }
            VerifyError::ExecWithoutScript { resource } => {
                write!(f, "exec resource {resource} has no apply script")
            }
            VerifyError::BadBatch { resource, batch } => write!(
                f,
                "resource {resource} is checked by the batch {batch:?}, which the manifest does not hold, or has a check of its own as well"
            ),
            VerifyError::BadBatchMember { resource, batch } => write!(
                f,
                "resource {resource} is applied by the apply of batch {batch:?}, but has an exec policy or no apply of its own"
            ),
            VerifyError::BadWindow { window, error } => {
                write!(f, "the reboot window {window:?} does not parse: {error}")
            }
            VerifyError::BadBatchName { name } => write!(
                f,
                "the batch name {name:?} is taken twice or is not lowercase letters, digits and '-'"
            ),
            VerifyError::NotAFile { path } => write!(
                f,
                "{} in the bundle is not a regular file or directory (a symlink or device)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

/// The directory inside a bundle that holds every script.
pub const SCRIPTS_DIR: &str = "scripts";

/// Whether `text` looks like a bundle id: 64 lowercase hex digits.
pub fn is_bundle_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses a manifest file mode (`"0644"`): four octal digits.
pub fn parse_mode(mode: &str) -> Option<u32> {
    if mode.len() != 4 || !mode.bytes().all(|b| matches!(b, b'0'..=b'7')) {
        return None;
    }
    u32::from_str_radix(mode, 8).ok()
}

/// What the manifest says a file of the bundle directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub sha256: String,
    /// The length in bytes, when the manifest lists it.
    pub size: Option<u64>,
}

/// Every file a bundle directory holds besides its manifest, by path relative to the bundle,
/// with its sha256 and size — after checking everything about the manifest that does not need the
/// files: normalised, contained paths, sorted unique files, modes, owners, dependencies,
/// resource hashes. `bell-run pull` fetches exactly these, and [`verify_dir`] finds exactly
/// these.
pub fn expected_files(manifest: &Manifest) -> Result<BTreeMap<PathBuf, Expected>, VerifyError> {
    let mut expected: BTreeMap<PathBuf, Expected> = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for file in &manifest.files {
        if !is_normal_absolute(&file.path) {
            return Err(VerifyError::BadPath {
                path: file.path.clone(),
            });
        }
        if let Some(prev) = previous {
            if prev >= file.path.as_str() {
                return Err(if prev == file.path {
                    VerifyError::DuplicatePath {
                        path: file.path.clone(),
                    }
                } else {
                    VerifyError::Unsorted {
                        path: file.path.clone(),
                    }
                });
            }
        }
        previous = Some(&file.path);
        if parse_mode(&file.mode).is_none() {
            return Err(VerifyError::BadMode {
                path: file.path.clone(),
                mode: file.mode.clone(),
            });
        }
        if file.owner.is_empty() || file.group.is_empty() {
            return Err(VerifyError::BadOwner {
                path: file.path.clone(),
            });
        }
        if file.sealed {
            // Not in the bundle: the host's sealed index brings it.
            if !is_bundle_id(&file.sha256) || file.size.is_some() {
                return Err(VerifyError::BadSealed {
                    path: file.path.clone(),
                });
            }
            continue;
        }
        let rel = Path::new(ROOT_DIR).join(file.path.trim_start_matches('/'));
        let what = Expected {
            sha256: file.sha256.clone(),
            size: file.size,
        };
        expected.insert(rel, what);
    }

    let mut scripts: Vec<&Script> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for resource in &manifest.resources {
        let key = resource.key();
        for dep in resource.after.iter().chain(&resource.order_after) {
            if !keys.contains(dep) {
                return Err(VerifyError::BadDependency {
                    resource: key,
                    after: dep.clone(),
                });
            }
        }
        if !keys.insert(key.clone()) {
            return Err(VerifyError::DuplicateResource { resource: key });
        }
        for path in resource.files.iter().chain(&resource.lines_in) {
            if manifest.file(path).is_none() {
                return Err(VerifyError::UnknownFile {
                    resource: key,
                    path: path.clone(),
                });
            }
        }
        if resource.exec.is_some() && resource.apply.is_none() {
            return Err(VerifyError::ExecWithoutScript { resource: key });
        }
        if resource.compute_hash(&manifest.files) != resource.hash {
            return Err(VerifyError::ResourceHash { resource: key });
        }
        scripts.extend(
            resource
                .apply
                .iter()
                .chain(resource.revert.iter())
                .chain(resource.check.iter()),
        );
    }
    for trigger in &manifest.triggers {
        for prefix in &trigger.paths {
            let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
            if !(trimmed.is_empty() || is_normal_absolute(trimmed)) || !prefix.starts_with('/') {
                return Err(VerifyError::BadPath {
                    path: prefix.clone(),
                });
            }
        }
        scripts.push(&trigger.script);
    }
    let mut batches = std::collections::BTreeSet::new();
    for batch in &manifest.batches {
        if !is_batch_name(&batch.name) || !batches.insert(batch.name.as_str()) {
            return Err(VerifyError::BadBatchName {
                name: batch.name.clone(),
            });
        }
        scripts.extend(batch.scripts());
    }
    let applying: std::collections::BTreeSet<&str> = manifest
        .batches
        .iter()
        .filter(|b| b.apply.is_some())
        .map(|b| b.name.as_str())
        .collect();
    for resource in &manifest.resources {
        if let Some(batch) = &resource.batch {
            if !batches.contains(batch.as_str()) || resource.check.is_some() {
                return Err(VerifyError::BadBatch {
                    resource: resource.key(),
                    batch: batch.clone(),
                });
            }
            if applying.contains(batch.as_str())
                && (resource.apply.is_none() || resource.exec.is_some())
            {
                return Err(VerifyError::BadBatchMember {
                    resource: resource.key(),
                    batch: batch.clone(),
                });
            }
        }
    }
    if let Some(reboot) = &manifest.reboot {
        for window in &reboot.windows {
            Window::parse(window).map_err(|error| VerifyError::BadWindow {
                window: window.clone(),
                error,
            })?;
        }
        scripts.extend(reboot.hooks().map(|h| &h.script));
    }
    // A live file is written by its resource's scripts, at an absolute path: an entry without
    // that resource would be rendered and never put anywhere.
    for live in &manifest.live {
        let written = manifest
            .resources
            .iter()
            .any(|r| r.kind == crate::live::KIND && r.name == live.path && r.apply.is_some());
        if !is_normal_absolute(&live.path) || !written {
            return Err(VerifyError::BadPath {
                path: live.path.clone(),
            });
        }
    }
    let mut probes = std::collections::BTreeSet::new();
    for probe in &manifest.probes {
        if !probes.insert(probe.name.as_str()) {
            return Err(VerifyError::DuplicateResource {
                resource: format!("health:{}", probe.name),
            });
        }
        scripts.push(&probe.script);
    }
    let mut sealed_scripts = std::collections::BTreeSet::new();
    for script in scripts {
        let inside_scripts = script
            .path
            .strip_prefix(SCRIPTS_DIR)
            .is_some_and(|rest| rest.starts_with('/'));
        if !is_contained_relative(&script.path) || !inside_scripts {
            return Err(VerifyError::BadPath {
                path: script.path.clone(),
            });
        }
        let rel = PathBuf::from(&script.path);
        if script.sealed {
            if !is_bundle_id(&script.sha256) || script.size.is_some() {
                return Err(VerifyError::BadSealed {
                    path: script.path.clone(),
                });
            }
            sealed_scripts.insert(rel);
            continue;
        }
        let what = Expected {
            sha256: script.sha256.clone(),
            size: script.size,
        };
        if let Some(other) = expected.get(&rel) {
            if other != &what {
                return Err(VerifyError::HashMismatch {
                    path: script.path.clone(),
                });
            }
        }
        expected.insert(rel, what);
    }
    // One path is either in the bundle or sealed, never both.
    if let Some(both) = sealed_scripts.iter().find(|p| expected.contains_key(*p)) {
        return Err(VerifyError::HashMismatch {
            path: both.display().to_string(),
        });
    }
    Ok(expected)
}

/// The largest manifest bell-run reads: ten thousand resources are a few MiB.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// Opens a plain file for reading: no symlink is followed (a `bundle.json` that links to
/// `/dev/zero` would never end), and nothing but a regular file is accepted (a FIFO would block
/// until a writer came). Checked on the open descriptor, so what is read is what was checked.
pub fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a symlink, not a plain file",
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a plain file",
        ));
    }
    Ok((file, meta.len()))
}

/// Reads a plain file (see [`open_regular`]) of at most `max` bytes.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular(path)?;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{len} bytes, more than the {max} a bundle holds"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("more than the {max} bytes a bundle holds"),
        ));
    }
    Ok(bytes)
}

/// The sha256 of a plain file (see [`open_regular`]), read in pieces: a large file costs no
/// memory, and a FIFO or a link is an error rather than a hang.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    hash_regular(path).map(|(sha, _)| sha)
}

/// The sha256 of a plain file and its length, read in pieces.
fn hash_regular(path: &Path) -> std::io::Result<(String, u64)> {
    let (mut file, _) = open_regular(path)?;
    let mut hasher = Sha256::new();
    let n = std::io::copy(&mut file, &mut hasher)?;
    Ok((hex::encode(hasher.finalize()), n))
}

/// Verifies a bundle directory completely before anything uses it: the manifest parses and is
/// of a known format, its bytes are canonical (so its sha256 is `Manifest::id`), the directory
/// name matches the id when it is one (`bundles/<id>`, also when reached through a symlink),
/// every path is normalised, every file and script has its listed sha256, every resource hash
/// matches its content, and the directory holds nothing that the manifest does not list.
pub fn verify_dir(dir: &Path) -> Result<Manifest, VerifyError> {
    let unreadable = |path: &Path, e: std::io::Error| VerifyError::Unreadable {
        path: path.to_path_buf(),
        error: e.to_string(),
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    let bytes = read_regular(&manifest_path, MAX_MANIFEST_BYTES)
        .map_err(|e| unreadable(&manifest_path, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        VerifyError::Format(FormatError::Json("the manifest is not UTF-8".to_string()))
    })?;
    let manifest = Manifest::from_json(text).map_err(VerifyError::Format)?;
    let actual = sha256_hex(&bytes);
    if manifest.to_json().as_bytes() != bytes.as_slice() {
        return Err(VerifyError::NotCanonical);
    }
    // A bundle reached through `hosts/<name>` is a symlink to `bundles/<id>`: resolve it, so
    // that the id in the directory name is checked there too.
    let resolved = dir.canonicalize().map_err(|e| unreadable(dir, e))?;
    if let Some(name) = resolved.file_name().and_then(|n| n.to_str()) {
        if is_bundle_id(name) && name != actual {
            return Err(VerifyError::IdMismatch {
                expected: name.to_string(),
                actual,
            });
        }
    }

    let expected = expected_files(&manifest)?;
    let sealed: std::collections::BTreeSet<PathBuf> =
        manifest.sealed().into_keys().map(PathBuf::from).collect();

    // Walk the directory: every regular file must be listed with its hash, and nothing else
    // (no symlinks, no devices) may be there.
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let entries = std::fs::read_dir(&abs).map_err(|e| unreadable(&abs, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(&abs, e))?;
            let child = rel.join(entry.file_name());
            let kind = entry
                .file_type()
                .map_err(|e| unreadable(&dir.join(&child), e))?;
            if kind.is_dir() {
                stack.push(child);
            } else if kind.is_file() {
                if child.as_os_str() == MANIFEST_FILE {
                    continue;
                }
                let Some(want) = expected.get(&child) else {
                    // A sealed entry's content, opened by bell-run into its own copy: it is
                    // checked against the host's sealed index when it is opened, not here.
                    if sealed.contains(&child) {
                        continue;
                    }
                    return Err(VerifyError::UnlistedFile { path: child });
                };
                // The size first, from the directory entry: a file much larger than listed is
                // refused without being read.
                let path = dir.join(&child);
                let len = entry.metadata().map_err(|e| unreadable(&path, e))?.len();
                if let Some(size) = want.size.filter(|size| *size != len) {
                    return Err(VerifyError::SizeMismatch {
                        path: child.display().to_string(),
                        expected: size,
                        actual: len,
                    });
                }
                let (sha256, read) = hash_regular(&path).map_err(|e| unreadable(&path, e))?;
                if want.size.is_some_and(|size| size != read) || sha256 != want.sha256 {
                    return Err(VerifyError::HashMismatch {
                        path: child.display().to_string(),
                    });
                }
                found.insert(child);
            } else {
                return Err(VerifyError::NotAFile { path: child });
            }
        }
    }
    if let Some(missing) = expected.keys().find(|p| !found.contains(*p)) {
        return Err(VerifyError::Unreadable {
            path: dir.join(missing),
            error: "listed in the manifest but missing from the bundle".to_string(),
        });
    }
    Ok(manifest)
}

/// [`verify_dir`] of a bundle whose sealed entries bell-run has opened into it (its own copy,
/// `generations/<id>`): the manifest as the host sees it ([`Manifest::opened`]). A sealed
/// entry whose content is not there is an error.
pub fn verify_opened(dir: &Path) -> Result<Manifest, VerifyError> {
    opened_in(verify_dir(dir)?, dir)
}

/// `manifest` (verified already) as the host sees it, its sealed entries opened from `dir`
/// ([`Manifest::opened`]): a sealed entry whose content is not there is an error.
pub fn opened_in(manifest: Manifest, dir: &Path) -> Result<Manifest, VerifyError> {
    if manifest.sealed().is_empty() {
        return Ok(manifest);
    }
    manifest
        .opened(|rel| hash_regular(&dir.join(rel)).ok())
        .map_err(|rel| VerifyError::Unreadable {
            path: dir.join(rel),
            error: "a sealed secret that was never opened here".to_string(),
        })
}

#[cfg(test)]
mod tests;

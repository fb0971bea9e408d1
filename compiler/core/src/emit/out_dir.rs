//! Which directories a build may write into, and remove from.
//!
//! A build removes what its release no longer names (hosts that left, bundles nobody uses), so
//! `bellc build -o ~/` into a directory that holds the user's own `bundles/` must stop before
//! anything goes. OUT is written only when it is new, empty, or holds nothing but what bellc
//! writes there; and each directory bellc writes below OUT must be a real directory, since a
//! symlinked `bundles/` would make the build delete files wherever it points.

use std::fs;
use std::path::Path;

/// The values each bundle was rendered from (`emit::values`).
pub const VALUES_DIR: &str = "values";

pub const RECORD_FILE: &str = ".bell-inputs.json";

/// Where [`fingerprint`] of OUT as the last build left it is kept: beside the record, not in
/// it, since it holds inode numbers and times and so differs between two identical builds,
/// while the record is part of the byte-identical output.
pub const FINGERPRINT_FILE: &str = ".bell-fingerprint";

/// Where the last build left the digest of what each of its bundles was rendered from (see
/// `render::RenderCache`): one `DIGEST ID` line each. Beside the fingerprint, not in the
/// record: the digests name bellc's build, so two identical builds by two bellc differ here.
pub const RENDER_CACHE_FILE: &str = ".bell-rendered";

/// Whether the bundles OUT already holds are taken as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// OUT is as the last build left it (its record says so): a bundle on disk is right.
    Kept,
    /// OUT may have been changed by hand, or by a build that stopped half-way: every bundle and
    /// store file this build needs is read and compared, and rewritten when it differs.
    Verify,
}

/// Everything bellc writes at the top of OUT.
const OURS: &[&str] = &[
    "bundles",
    "hosts",
    super::STORE_DIR,
    "releases",
    bell_bundle::SECRETS_DIR,
    VALUES_DIR,
    // `bellc rollout`'s signed record (`fleet::record`); a build leaves it alone.
    "rollouts",
    "release.json",
    "release.json.minisig",
    ".release.json.tmp",
    ".release.json.minisig.tmp",
    RECORD_FILE,
    ".bell-inputs.json.tmp",
    FINGERPRINT_FILE,
    ".bell-fingerprint.tmp",
    RENDER_CACHE_FILE,
    ".bell-rendered.tmp",
];

/// The directories below OUT that a build writes into and removes from.
const DIRS: &[&str] = &[
    "bundles",
    "hosts",
    super::STORE_DIR,
    "releases",
    bell_bundle::SECRETS_DIR,
    VALUES_DIR,
];

/// Why OUT may not be written: a message for the command line, naming the entry at fault.
pub fn check_writable(out: &Path) -> Result<(), String> {
    let meta = match fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", out.display())),
    };
    // OUT itself may be a symlink to the directory it names: that is where the user sent it.
    if !(meta.is_dir() || (meta.file_type().is_symlink() && out.is_dir())) {
        return Err(format!(
            "{} is not a directory; name a new or empty directory, or an earlier build's output",
            out.display()
        ));
    }
    let entries = fs::read_dir(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", out.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // A checked-in output may carry its version control's files.
        if OURS.contains(&name.as_ref()) || name.starts_with(".git") {
            continue;
        }
        return Err(format!(
            "{} holds `{}`, which bellc did not write: a build removes what it does not \
             recognise in its output, so it writes only into a new or empty directory or an \
             earlier build's output",
            out.display(),
            name.escape_debug()
        ));
    }
    for dir in DIRS {
        let path = out.join(dir);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "{} is not a directory (a symlink or a file): a build would write and \
                     remove where it points; remove it and build again",
                    path.display()
                ))
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// Whether `name` is a bundle directory's name as bellc writes it (a sha256, or the temporary
/// name one is written under): nothing else in `bundles/` is removed.
pub fn is_bundle_name(name: &str) -> bool {
    bell_bundle::is_bundle_id(name.strip_prefix(".tmp-").unwrap_or(name))
}

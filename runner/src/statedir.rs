//! bell-run's own directory, `ROOT/var/lib/bell`, checked before anything in it is read or
//! written. bell-run runs as root, and an image root or a host may hold a link anywhere, also
//! here: a `state.json` linked to `/dev/zero`, a `lock` linked to a file outside the root, a
//! `generations` linked elsewhere. So every command opens its root through [`open_root`],
//! which walks the directory without following anything and refuses
//!
//! - a link anywhere in it, except `current` (which bell-run itself points at
//!   `generations/ID`) and saved originals under `backup/` that were links to files (they are
//!   moved back, never followed);
//! - a directory that does not belong to the user running bell-run, or that group or others
//!   may write to (also on the way from the root down to it);
//! - anything but plain files and directories, and a file with a second hard link.
//!
//! Why a walk and then plain paths is enough: once every directory from the root down belongs
//! to us and is closed to everyone else, nobody else can swap a checked directory for a link
//! while we run, and the lock keeps other bell-runs out. The files bell-run creates are also
//! opened with `O_NOFOLLOW` and `O_EXCL` (`rootfs::create_new`), so that a link made by one of our
//! own scripts is not followed either.

use crate::context::Refusal;
use crate::rootfs::Root;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Opens the target root and checks bell-run's own directory in it.
pub fn open_root(dir: &Path) -> Result<Root, Refusal> {
    let root = Root::open(dir).map_err(Refusal::new)?;
    check(&root).map_err(|problem| {
        Refusal::new(format!("bell-run's own directory is unsafe: {problem}")).help(
            "bell-run never follows links in /var/lib/bell, and it must belong to the user \
             running bell-run with no write access for group or others; remove or fix what \
             is named (bell-run recreates what it needs); nothing was changed",
        )
    })?;
    Ok(root)
}

/// Every problem is named by its path on the machine bell-run runs on.
fn check(root: &Root) -> Result<(), String> {
    let bell = root.bell_dir();
    // The way down: `var` and `var/lib` may be links that stay inside the root (the path
    // checks resolve them), but every directory they lead through must be closed to others.
    let mut deepest = root.dir.clone();
    for part in ["var", "var/lib"] {
        let path = root.dir.join(part);
        if fs::symlink_metadata(&path).is_err() {
            break;
        }
        deepest = path
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", path.display()))?;
        if !deepest.starts_with(&root.dir) {
            return Err(format!(
                "{} resolves to {}, outside the root",
                path.display(),
                deepest.display()
            ));
        }
    }
    let mut way = root.dir.clone();
    check_ancestor(&way)?;
    if let Ok(rest) = deepest.strip_prefix(&root.dir) {
        for part in rest.components() {
            way.push(part);
            check_ancestor(&way)?;
        }
    }
    let meta = match fs::symlink_metadata(&bell) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", bell.display())),
    };
    if meta.file_type().is_symlink() {
        return allowed_link(&bell, Place::Elsewhere);
    }
    check_entry(&bell, &meta, Place::Top)?;
    walk(&bell, Place::Top)
}

fn check_ancestor(dir: &Path) -> Result<(), String> {
    let meta =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let uid = crate::sys::effective_uid();
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(format!(
            "{} belongs to uid {}, not to root or uid {uid} who runs bell-run",
            dir.display(),
            meta.uid()
        ));
    }
    // A sticky directory (a tmpfs root is 1777) lets others add entries but not replace ours,
    // and what is beneath is checked in turn: a link planted there is refused, not followed.
    if meta.mode() & 0o1000 != 0 {
        return Ok(());
    }
    closed_to_others(dir, &meta)
}

fn closed_to_others(path: &Path, meta: &fs::Metadata) -> Result<(), String> {
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is writable by group or others (mode {:04o})",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Where in bell-run's directory an entry is: what may be there depends on it.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// `var/lib/bell` itself and its direct entries.
    Top,
    /// Under `backup/`: saved originals, links among them.
    Backup,
    Elsewhere,
}

fn walk(dir: &Path, place: Place) -> Result<(), String> {
    // What goes between the listing and the look (another bell-run's temporary renamed over
    // its file, a staging directory removed: they run the walk before they wait for the lock)
    // cannot be followed by anyone: it is passed over.
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let inner = match place {
            Place::Top if entry.file_name() == "backup" => Place::Backup,
            Place::Top => Place::Elsewhere,
            other => other,
        };
        if meta.file_type().is_symlink() {
            allowed_link(&path, place)?;
        } else {
            check_entry(&path, &meta, place)?;
            if meta.is_dir() {
                walk(&path, inner)?;
            }
        }
    }
    Ok(())
}

fn allowed_link(path: &Path, place: Place) -> Result<(), String> {
    let target = match fs::read_link(path) {
        Ok(target) => target,
        // Gone since the listing (another bell-run's `.current.tmp` renamed over `current`):
        // passed over, as a file that goes is.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => Default::default(),
    };
    // `.current.tmp` is `current` on its way (another bell-run switching generations while
    // this one walks before its lock): the same shape, and nothing reads through it (the
    // switch removes whatever is there first and renames the link over `current`).
    let is_current = place == Place::Top
        && path
            .file_name()
            .is_some_and(|n| n == "current" || n == ".current.tmp")
        && target.parent() == Some(Path::new("generations"))
        && target
            .file_name()
            .is_some_and(|n| !n.to_string_lossy().starts_with('.'));
    // A saved original may itself have been a link (to a file: bell manages files only). One
    // that leads to a directory would be walked through on the way to the files beneath it.
    let saved_file_link = place == Place::Backup && !fs::metadata(path).is_ok_and(|m| m.is_dir());
    if is_current || saved_file_link {
        return Ok(());
    }
    Err(format!(
        "{} is a symbolic link (to {})",
        path.display(),
        target.display()
    ))
}

fn check_entry(path: &Path, meta: &fs::Metadata, place: Place) -> Result<(), String> {
    let kind = meta.file_type();
    if kind.is_dir() {
        let uid = crate::sys::effective_uid();
        if meta.uid() != uid {
            return Err(format!(
                "{} belongs to uid {}, not to uid {uid} who runs bell-run",
                path.display(),
                meta.uid()
            ));
        }
        return closed_to_others(path, meta);
    }
    if !kind.is_file() {
        return Err(format!(
            "{} is not a plain file or directory",
            path.display()
        ));
    }
    if meta.nlink() > 1 && place != Place::Backup {
        return Err(format!(
            "{} has {} hard links; bell-run's files have one",
            path.display(),
            meta.nlink()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two bell-runs on one root: one writes its state atomically (a temporary renamed over
    /// the file) while the other walks the directory before it waits for the lock. The walk
    /// must not take a temporary that went as a problem with the directory.
    #[test]
    fn a_file_that_goes_while_the_walk_looks_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let bell = root.bell_dir();
        fs::create_dir_all(bell.join("generations")).unwrap();
        for part in ["var", "var/lib", "var/lib/bell", "var/lib/bell/generations"] {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(dir.path().join(part), fs::Permissions::from_mode(0o755));
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for name in ["state.json", "generations/x"] {
                        let file = bell.join(name);
                        let tmp = file.with_file_name(".tmp");
                        fs::write(&tmp, b"{}").unwrap();
                        fs::rename(&tmp, &file).unwrap();
                    }
                    // A switch of generations, as `apply::set_current` does it.
                    let tmp = bell.join(".current.tmp");
                    let _ = fs::remove_file(&tmp);
                    std::os::unix::fs::symlink("generations/x", &tmp).unwrap();
                    fs::rename(&tmp, bell.join("current")).unwrap();
                    let gone = bell.join("staging");
                    fs::create_dir_all(gone.join("a")).unwrap();
                    fs::remove_dir_all(&gone).unwrap();
                }
            });
            let outcome = (0..3000).find_map(|_| check(&root).err());
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(outcome, None);
        });
        // Only the shape of `current` passes: a `.current.tmp` out of the state is refused.
        let tmp = bell.join(".current.tmp");
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink("/etc", &tmp).unwrap();
        let refused = check(&root).expect_err("a link out of the state");
        assert!(
            refused.contains(".current.tmp is a symbolic link"),
            "{refused}"
        );
    }
}

//! The target root: mapping host paths under it, refusing paths that would leave it, and the
//! durable-write helpers every stage uses (write beside, fsync, rename, fsync the directory).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

pub struct Root {
    /// The root as canonicalised at start; every host path is joined under it.
    pub dir: PathBuf,
}

impl Root {
    pub fn open(dir: &Path) -> Result<Root, String> {
        let canon = dir
            .canonicalize()
            .map_err(|e| format!("cannot open the root {}: {e}", dir.display()))?;
        if !canon.is_dir() {
            return Err(format!("the root {} is not a directory", canon.display()));
        }
        Ok(Root { dir: canon })
    }

    /// The path under the root of a normalised absolute host path.
    pub fn host(&self, path: &str) -> PathBuf {
        self.dir.join(path.trim_start_matches('/'))
    }

    /// bell-run's own directory, `ROOT/var/lib/bell`.
    pub fn bell_dir(&self) -> PathBuf {
        self.host("/var/lib/bell")
    }

    /// The first link on the way from the root down to `dir` that leads out of the root, and
    /// what it says, so that a refusal names what to fix.
    fn link_out(&self, dir: &Path) -> Option<(PathBuf, PathBuf)> {
        let rest = dir.strip_prefix(&self.dir).ok()?;
        let mut at = self.dir.clone();
        for part in rest.components() {
            at.push(part);
            let is_link = fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
            if is_link && !at.canonicalize().is_ok_and(|c| c.starts_with(&self.dir)) {
                return Some((at.clone(), fs::read_link(&at).ok()?));
            }
        }
        None
    }

    /// Where a host path leads, read as the image reads it once the root is `/`: an absolute
    /// link's target is under the root, not on the machine bell-run runs on.
    fn resolve(&self, path: &Path, hops: &mut u32) -> Resolved {
        let mut at = PathBuf::from("/");
        for part in path.components() {
            match part {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
                Component::ParentDir => {
                    at.pop();
                    continue;
                }
                Component::Normal(name) => at.push(name),
            }
            let under = self.host(&at.to_string_lossy());
            let Ok(meta) = fs::symlink_metadata(&under) else {
                return Resolved::Missing;
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            let Ok(target) = fs::read_link(&under) else {
                return Resolved::Missing;
            };
            *hops += 1;
            // The kernel gives up after 40 links (ELOOP); so does this.
            if *hops > 40 {
                return Resolved::Dangling(at, target);
            }
            let mut from = at.clone();
            from.pop();
            match self.resolve(&from.join(&target), hops) {
                Resolved::Found(to) => at = to,
                Resolved::Missing => return Resolved::Dangling(at, target),
                dangling => return dangling,
            }
        }
        Resolved::Found(at)
    }

    /// The first link in the root that leads nowhere, on the way to any of the paths a failed
    /// script's output names (`useradd: cannot create directory /home`), said as the end of a
    /// sentence: a tool run against an image whose `/home` is a link to a disk the image does
    /// not have fails with a reason that names the path, never the link.
    pub fn dangling_link_in(&self, output: &str) -> Option<String> {
        let mut seen = std::collections::BTreeSet::new();
        let paths = output
            .split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '(' | ')'))
            .map(|w| w.trim_end_matches([':', ',', ';', '.']))
            .filter(|w| w.starts_with('/') && w.len() > 1)
            .map(|w| match Path::new(w).strip_prefix(&self.dir) {
                Ok(inside) => Path::new("/").join(inside),
                Err(_) => PathBuf::from(w),
            });
        for path in paths.take(64) {
            if !seen.insert(path.clone()) {
                continue;
            }
            if let Resolved::Dangling(link, target) = self.resolve(&path, &mut 0) {
                let inside = if self.dir == Path::new("/") {
                    String::new()
                } else {
                    " inside the root".to_string()
                };
                return Some(format!(
                    "{} is a link to {}, which leads nowhere{inside}",
                    link.display(),
                    target.display()
                ));
            }
        }
        None
    }

    /// Refuses a host path whose existing directories lead outside the root (a symlinked
    /// directory pointing elsewhere), or that names an existing directory. What counts is where
    /// the kernel would really write, so the deepest existing ancestor is canonicalised.
    pub fn check_contained(&self, path: &str) -> Result<(), String> {
        let target = self.host(path);
        if let Ok(meta) = fs::symlink_metadata(&target) {
            if meta.is_dir() {
                return Err(format!(
                    "`{path}` is a directory under the root; bell-run manages files only"
                ));
            }
        }
        let mut ancestor = target.parent();
        while let Some(dir) = ancestor {
            if fs::symlink_metadata(dir).is_ok() {
                let canon = dir.canonicalize().map_err(|e| {
                    format!(
                        "cannot resolve {} on the way to `{path}`: {e}",
                        dir.display()
                    )
                })?;
                if !canon.starts_with(&self.dir) {
                    return Err(match self.link_out(dir) {
                        Some((link, to)) => format!(
                            "`{path}` would be written outside the root: {} is a link to {} \
                             and resolves to {}",
                            link.display(),
                            to.display(),
                            canon.display()
                        ),
                        None => format!(
                            "`{path}` would be written outside the root: {} resolves to {}",
                            dir.display(),
                            canon.display()
                        ),
                    });
                }
                if !canon.is_dir() {
                    return Err(format!(
                        "`{path}` cannot be created: {} is not a directory",
                        dir.display()
                    ));
                }
                return Ok(());
            }
            ancestor = dir.parent();
        }
        Err(format!("`{path}` has no existing ancestor under the root"))
    }
}

/// Where [`Root::resolve`] found a path leads.
enum Resolved {
    Found(PathBuf),
    /// A directory or file on the way is not there (no link to blame).
    Missing,
    /// This link (a host path) leads nowhere: its target, as the link says it.
    Dangling(PathBuf, PathBuf),
}

/// The largest `state.json` or journal bell-run reads: far above any real one, and a bound on
/// what a hostile one can make it allocate.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

/// Reads one of bell-run's records without following a link, refusing anything but a plain
/// file and anything larger than [`MAX_RECORD_BYTES`]. `Ok(None)` when there is none.
pub fn read_record(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a plain file", path.display()));
    }
    if meta.len() > MAX_RECORD_BYTES {
        return Err(format!(
            "{} is {} bytes, more than bell-run ever writes",
            path.display(),
            meta.len()
        ));
    }
    let mut text = String::new();
    file.take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(Some(text))
}

/// The last `max` bytes of a log a script wrote, never through a link: a chatty script can
/// write more than bell-run would read whole.
pub fn read_tail(path: &Path, max: u64) -> io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(String::new());
    }
    file.seek(SeekFrom::Start(meta.len().saturating_sub(max)))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// fsyncs a directory so that renames and creations inside it survive a power cut.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Creates `path` as a new file, never through a link: whatever is there is removed first
/// (bell-run's own files are only ever replaced whole).
pub fn create_new(path: &Path, mode: u32) -> io::Result<fs::File> {
    remove_if_exists(path)?;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Replaces `path` with `bytes` atomically and durably (bell-run's own records).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut file = create_new(&tmp, 0o600)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fsync_dir(dir)
}

/// Removes a file, treating "already gone" as done, so that recovery can repeat any step.
pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Copies a verified bundle directory (regular files and directories only) into bell-run's
/// own: private whatever the bundle's modes, since a bundle may hold secrets. Durable when it
/// returns, as dpkg makes a package's files: each file's writeback is started as it is written
/// and every one is fsynced after the last is written, so the fsyncs find their data on its
/// way and the first journal commit takes in most of them (fsynced one by one as written, a
/// bundle's hundred files took 39 ms of a first apply on this machine's disk; now 12 ms).
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let mut written = Vec::new();
    copy_tree_unsynced(from, to, &mut written)?;
    sync_written(&written)
}

/// fsyncs every file and directory of `written` (files written with their writeback started,
/// [`crate::sys::start_writeback`]), in order. Each is opened again by its path, never through
/// a link and without waiting on a FIFO: what stands there now may not be what was written.
pub fn sync_written(written: &[PathBuf]) -> io::Result<()> {
    written.iter().try_for_each(|path| {
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?
            .sync_all()
    })
}

/// `copy_tree` without waiting for the disk: what it wrote goes into `written`, each
/// directory after the files in it.
fn copy_tree_unsynced(from: &Path, to: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree_unsynced(&entry.path(), &dest, written)?;
        } else if kind.is_file() {
            let mut source = fs::File::open(entry.path())?;
            let mut file = create_new(&dest, 0o600)?;
            io::copy(&mut source, &mut file)?;
            crate::sys::start_writeback(&file);
            written.push(dest);
        }
    }
    written.push(to.to_path_buf());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn the_link_that_leads_nowhere_inside_the_root_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let r = &root.dir;
        fs::create_dir_all(r.join("data/home")).unwrap();
        // Absolute links are read under the root: `/data/home` is there, `/srv/home` is not
        // (even where the machine bell-run runs on has one).
        symlink("/data/home", r.join("good")).unwrap();
        symlink("/nowhere/home", r.join("home")).unwrap();
        symlink("../data/../nowhere", r.join("data/rel")).unwrap();
        symlink("loop", r.join("loop")).unwrap();
        symlink("/home", r.join("chain")).unwrap();
        let said = |output: &str| root.dangling_link_in(output);
        assert_eq!(
            said("useradd: cannot create directory /home"),
            Some("/home is a link to /nowhere/home, which leads nowhere inside the root".into())
        );
        // The full path under the root, as a tool given `--root` may print it.
        let full = format!(
            "mkdir: cannot create '{}/home/ops': No such file",
            r.display()
        );
        assert!(
            said(&full).is_some_and(|s| s.starts_with("/home is a link")),
            "{full}"
        );
        assert_eq!(
            said("at /data/rel/x."),
            Some(
                "/data/rel is a link to ../data/../nowhere, which leads nowhere inside the root"
                    .into()
            )
        );
        assert!(said("/loop").is_some_and(|s| s.starts_with("/loop is a link to loop")));
        // The link at the end of a chain is the one to fix.
        assert!(said("'/chain/ops'").is_some_and(|s| s.starts_with("/home is a link")));
        for fine in [
            "/good/ops",
            "/data/home",
            "/etc/missing",
            "no paths here",
            "/",
            "",
        ] {
            assert_eq!(said(fine), None, "{fine}");
        }
    }

    #[test]
    fn a_copy_is_synced_without_following_what_was_put_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("bundle");
        fs::create_dir_all(from.join("scripts/sysctl")).unwrap();
        fs::write(from.join("bundle.json"), "{}").unwrap();
        fs::write(from.join("scripts/sysctl/a.apply"), "exit 0\n").unwrap();
        let to = dir.path().join("copy");
        copy_tree(&from, &to).unwrap();
        assert_eq!(
            fs::read(to.join("scripts/sysctl/a.apply")).unwrap(),
            b"exit 0\n"
        );
        // A written file swapped for a link or a FIFO before its fsync: the sync says so at
        // once, rather than syncing what the link leads to or waiting for a FIFO's writer.
        let outside = dir.path().join("outside");
        fs::write(&outside, "elsewhere").unwrap();
        let link = dir.path().join("link");
        symlink(&outside, &link).unwrap();
        assert!(sync_written(std::slice::from_ref(&link)).is_err());
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(sync_written(&[fifo]).is_ok());
        });
        assert!(finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .is_ok());
    }
}

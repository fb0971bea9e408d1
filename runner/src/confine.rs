//! Where a user's script runs when bell-run works on a root other than `/`: inside the image,
//! or on the build machine with nothing but the root writable. Never on the build machine as
//! it is: an `exec` written for the host it configures (`echo … > /etc/motd`) would configure
//! the machine that bakes the image, and record the run as done for the real host.
//!
//! Both ways start the script in a private mount namespace, set up between `fork` and `exec`
//! (so nothing of it outlives the script, and bell-run itself is never confined):
//!
//! - **inside the image**, as mkosi, debootstrap's chroot and Ansible's chroot connection run
//!   their scripts: the root bound onto itself and made `/` with `pivot_root`, the build
//!   machine's tree detached (unlike a `chroot`, a root-owned script cannot climb out of it),
//!   then `/proc` and `/sys` read-only, a `/dev` of its own with only the harmless nodes (`null`,
//!   `zero`, `full`, `random`, `urandom`, `tty`; never the build machine's disks) read-only,
//!   and a private `/tmp`;
//! - **on the build machine** (`offline="root"`): every mount read-only (`mount_setattr`,
//!   Linux 5.12), a private `/tmp`, and the root bound back writable at its own path.
//!
//! Both also get a UTS namespace of their own named as the image is (its `/etc/hostname`, else
//! `localhost`): `$(hostname)` in a baked script is the host's name, never the build machine's.
//!
//! The setup runs in the forked child, where only system calls are safe: everything it needs
//! (paths as C strings) is made before the fork. Std reports a failed step to the parent as
//! the spawn's error, and the script is then not run at all.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// The search path a script inside an image gets: the image's own programs, never the build
/// machine's `PATH`. Also a live script's when bell-run was started without one.
pub const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How a script is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confine {
    /// Not at all: the live host (or `--offline` on `/`).
    Not,
    /// Inside the image root.
    Image(PathBuf),
    /// On the build machine, only this root (and a private `/tmp`) writable.
    Host(PathBuf),
}

impl Confine {
    /// The word the background supervisor is given (`__supervise`), read back by [`Self::parse`].
    pub fn to_arg(&self) -> OsString {
        let (tag, root) = match self {
            Confine::Not => return OsString::from("-"),
            Confine::Image(root) => ("image:", root),
            Confine::Host(root) => ("host:", root),
        };
        let mut arg = OsString::from(tag);
        arg.push(root);
        arg
    }

    pub fn parse(arg: &std::ffi::OsStr) -> Option<Confine> {
        let bytes = arg.as_bytes();
        let path = |rest: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(rest));
        if bytes == b"-" {
            Some(Confine::Not)
        } else if let Some(rest) = bytes.strip_prefix(b"image:") {
            Some(Confine::Image(path(rest)))
        } else {
            bytes
                .strip_prefix(b"host:")
                .map(|rest| Confine::Host(path(rest)))
        }
    }

    /// `path` (on the build machine, under the root) as the script sees it inside the image.
    /// Unchanged unless confined to the image; `None` when the path is not under the root.
    pub fn inside(&self, path: &Path) -> Option<PathBuf> {
        match self {
            Confine::Image(root) => {
                let rest = path.strip_prefix(root).ok()?;
                Some(Path::new("/").join(rest))
            }
            _ => Some(path.to_path_buf()),
        }
    }

    /// The environment as the script sees it: inside the image, `BELL_ROOT` is `/`, bell's
    /// paths are the image's own and `PATH` is the image's.
    pub fn env(&self, env: &[(String, String)]) -> Vec<(String, String)> {
        let Confine::Image(_) = self else {
            return env.to_vec();
        };
        let mut out: Vec<(String, String)> = env
            .iter()
            .filter(|(k, _)| k != "PATH")
            .map(|(k, v)| match k.as_str() {
                "BELL_ROOT" => (k.clone(), "/".to_string()),
                "BELL_STATE" => {
                    let inside = self.inside(Path::new(v)).unwrap_or_default();
                    (k.clone(), inside.display().to_string())
                }
                _ => (k.clone(), v.clone()),
            })
            .collect();
        out.push(("PATH".to_string(), IMAGE_PATH.to_string()));
        out
    }

    /// Makes `cmd` start confined, its working directory `cwd` (a path on the build machine).
    pub fn apply(&self, cmd: &mut Command, cwd: &Path) -> Result<(), String> {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| format!("{} holds a NUL byte", p.display()))
        };
        match self {
            Confine::Not => Ok(()),
            Confine::Image(root) => {
                let inside = self
                    .inside(cwd)
                    .ok_or_else(|| format!("{} is not under the root", cwd.display()))?;
                let name = image_hostname(root);
                let root = c(root)?;
                let cwd = c(&inside)?;
                // SAFETY: the closure makes system calls only, on memory made before the fork.
                unsafe {
                    cmd.pre_exec(move || {
                        own_hostname(&name)?;
                        enter_image(&root, &cwd)
                    });
                }
                Ok(())
            }
            Confine::Host(root) => {
                let prefixes = tmp_prefixes(root)
                    .iter()
                    .map(|p| c(p))
                    .collect::<Result<Vec<_>, _>>()?;
                let name = image_hostname(root);
                let root = c(root)?;
                let cwd = c(cwd)?;
                // SAFETY: as above.
                unsafe {
                    cmd.pre_exec(move || {
                        own_hostname(&name)?;
                        read_only_host(&root, &prefixes, &cwd)
                    });
                }
                Ok(())
            }
        }
    }
}

/// Whether `path` (absolute, as the image sees it) names a file in the image `root`, its links
/// followed as they would be inside the image: an absolute link starts again at the root, and
/// no link leads out of it.
pub fn file_in_root(root: &Path, path: &str) -> bool {
    let mut todo: Vec<OsString> = components(Path::new(path));
    let mut at = PathBuf::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let Ok(meta) = fs::symlink_metadata(root.join(&next)) else {
            return false;
        };
        if meta.file_type().is_symlink() {
            links += 1;
            let Ok(target) = fs::read_link(root.join(&next)) else {
                return false;
            };
            if links > 40 {
                return false;
            }
            if target.is_absolute() {
                at = PathBuf::new();
            }
            todo.extend(components(&target));
        } else if !todo.is_empty() && !meta.is_dir() {
            return false;
        } else {
            at = next;
        }
    }
    fs::symlink_metadata(root.join(&at)).is_ok_and(|m| m.is_file())
}

/// The normal parts and `..` of `path`, last first (a stack to pop).
fn components(path: &Path) -> Vec<OsString> {
    let mut parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    parts.reverse();
    parts
}

/// The interpreter a script's `#!` line names (`/bin/sh` of `#!/bin/sh -e`), `None` for a
/// program that is not a script (an ELF binary runs as it is).
pub fn interpreter(script: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::new();
    fs::File::open(script)
        .ok()?
        .take(256)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    line.split_whitespace().next().map(str::to_string)
}

/// The directories from `/tmp` down to `root` when the root is under `/tmp`: made again in the
/// private `/tmp`, so that the root can be bound back at its own path.
fn tmp_prefixes(root: &Path) -> Vec<PathBuf> {
    let Ok(rest) = root.strip_prefix("/tmp") else {
        return Vec::new();
    };
    let mut at = PathBuf::from("/tmp");
    rest.components()
        .map(|c| {
            at.push(c);
            at.clone()
        })
        .collect()
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn mount(
    source: &CStr,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let fstype = fstype.map_or(std::ptr::null(), CStr::as_ptr);
    let data = data.map_or(std::ptr::null(), |d| d.as_ptr().cast());
    // SAFETY: every pointer is a NUL-terminated string or null, as mount(2) takes.
    check(unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype, flags, data) })
}

/// Whether `path` is a directory itself, not a link to one.
fn is_dir(path: &CStr) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: lstat writes a whole `stat` into the buffer when it returns 0.
    if unsafe { libc::lstat(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: initialised by the successful lstat above.
    let st = unsafe { st.assume_init() };
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// The name a confined script's host has: the image's `/etc/hostname` (a regular file of the
/// root, not a link; its first line, when it is a host name), else `localhost`.
fn image_hostname(root: &Path) -> Vec<u8> {
    let file = root.join("etc/hostname");
    let named = fs::symlink_metadata(root.join("etc"))
        .is_ok_and(|m| m.is_dir())
        .then(|| fs::symlink_metadata(&file).ok())
        .flatten()
        .filter(|m| m.is_file() && m.len() <= 256)
        .and_then(|_| fs::read(&file).ok())
        .and_then(|bytes| {
            let line = bytes.split(|b| *b == b'\n').next()?.trim_ascii().to_vec();
            let valid = (1..=64).contains(&line.len())
                && line
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'));
            valid.then_some(line)
        });
    named.unwrap_or_else(|| b"localhost".to_vec())
}

/// In the forked child: a UTS namespace of its own, named `name`.
fn own_hostname(name: &[u8]) -> io::Result<()> {
    // SAFETY: unshare has no memory effects; sethostname reads `name.len()` bytes of `name`.
    check(unsafe { libc::unshare(libc::CLONE_NEWUTS) })?;
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) })
}

fn private_namespace() -> io::Result<()> {
    // SAFETY: unshare has no memory effects.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // Nothing mounted from here on propagates back to the build machine.
    mount(c"none", c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
}

fn chdir(path: &CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

/// A `/tmp` of the script's own, gone with it.
fn private_tmp() -> io::Result<()> {
    mount(
        c"tmpfs",
        c"/tmp",
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(c"mode=1777"),
    )
}

const HIDDEN: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// In the forked child: makes the image root `/` of a private mount namespace.
fn enter_image(root: &CStr, cwd: &CStr) -> io::Result<()> {
    private_namespace()?;
    // pivot_root needs the new root to be a mount point.
    mount(root, root, None, libc::MS_BIND | libc::MS_REC, None)?;
    chdir(root)?;
    // SAFETY: pivot_root and umount2 take NUL-terminated paths.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) } as i32)?;
    // The build machine's tree, now stacked under `.`, is detached: nothing of it is reachable.
    check(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) })?;
    chdir(c"/")?;
    // Only where the image has the directory itself: a link would mount over what it names.
    if is_dir(c"/proc") {
        mount(
            c"proc",
            c"/proc",
            Some(c"proc"),
            HIDDEN | libc::MS_RDONLY,
            None,
        )?;
    }
    if is_dir(c"/sys") {
        mount(
            c"sysfs",
            c"/sys",
            Some(c"sysfs"),
            HIDDEN | libc::MS_RDONLY,
            None,
        )?;
    }
    if is_dir(c"/dev") {
        minimal_dev()?;
    }
    if is_dir(c"/tmp") {
        private_tmp()?;
    }
    chdir(cwd)
}

/// A `/dev` of the script's own: the nodes a script may write to without harm, read-only.
fn minimal_dev() -> io::Result<()> {
    mount(
        c"tmpfs",
        c"/dev",
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"mode=755"),
    )?;
    let nodes: [(&CStr, u32, u32); 6] = [
        (c"/dev/null", 1, 3),
        (c"/dev/zero", 1, 5),
        (c"/dev/full", 1, 7),
        (c"/dev/random", 1, 8),
        (c"/dev/urandom", 1, 9),
        (c"/dev/tty", 5, 0),
    ];
    for (path, major, minor) in nodes {
        // SAFETY: NUL-terminated paths; mknod and chmod have no memory effects.
        check(unsafe {
            libc::mknod(
                path.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            )
        })?;
        // The umask took bits off the mode.
        check(unsafe { libc::chmod(path.as_ptr(), 0o666) })?;
    }
    let links: [(&CStr, &CStr); 4] = [
        (c"/proc/self/fd", c"/dev/fd"),
        (c"/proc/self/fd/0", c"/dev/stdin"),
        (c"/proc/self/fd/1", c"/dev/stdout"),
        (c"/proc/self/fd/2", c"/dev/stderr"),
    ];
    for (to, at) in links {
        // SAFETY: NUL-terminated paths.
        check(unsafe { libc::symlink(to.as_ptr(), at.as_ptr()) })?;
    }
    mount(
        c"none",
        c"/dev",
        None,
        libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NOEXEC | libc::MS_RDONLY,
        None,
    )
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Sets (`read_only`) or clears read-only on every mount at and under `path`.
fn read_only_tree(path: &CStr, read_only: bool) -> io::Result<()> {
    let (set, clr) = if read_only {
        (MOUNT_ATTR_RDONLY, 0)
    } else {
        (0, MOUNT_ATTR_RDONLY)
    };
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a `mount_attr` of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(rc as i32)
}

/// In the forked child: every mount read-only, a private `/tmp`, the root writable again.
fn read_only_host(root: &CStr, tmp_prefixes: &[CString], cwd: &CStr) -> io::Result<()> {
    private_namespace()?;
    read_only_tree(c"/", true)?;
    // The root's directory in this namespace, held before a private /tmp may hide it.
    chdir(root)?;
    private_tmp()?;
    for dir in tmp_prefixes {
        // SAFETY: a NUL-terminated path.
        let rc = unsafe { libc::mkdir(dir.as_ptr(), 0o755) };
        if rc == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(io::Error::last_os_error());
        }
    }
    mount(c".", root, None, libc::MS_BIND | libc::MS_REC, None)?;
    read_only_tree(root, false)?;
    chdir(cwd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn files_are_found_through_links_that_stay_in_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::write(root.join("usr/bin/dash"), "").unwrap();
        symlink("usr/bin", root.join("bin")).unwrap();
        symlink("dash", root.join("usr/bin/sh")).unwrap();
        assert!(file_in_root(root, "/bin/sh"));
        // An absolute link starts again at the root, not at the build machine's `/`.
        symlink("/usr/bin/dash", root.join("usr/bin/bash")).unwrap();
        assert!(file_in_root(root, "/bin/bash"));
        // `..` stops at the root; a link out of it finds nothing there.
        symlink("../../../../../../etc/passwd", root.join("usr/bin/up")).unwrap();
        assert!(!file_in_root(root, "/usr/bin/up"));
        symlink("loop", root.join("loop")).unwrap();
        assert!(!file_in_root(root, "/loop"));
        assert!(!file_in_root(root, "/bin"));
    }

    #[test]
    fn the_supervisor_reads_back_what_it_is_given() {
        for c in [
            Confine::Not,
            Confine::Image(PathBuf::from("/tmp/a:b")),
            Confine::Host(PathBuf::from("/srv/img")),
        ] {
            assert_eq!(Confine::parse(&c.to_arg()), Some(c));
        }
        assert_eq!(Confine::parse(std::ffi::OsStr::new("other")), None);
    }

    #[test]
    fn a_root_under_tmp_is_made_again_in_the_private_tmp() {
        assert_eq!(
            tmp_prefixes(Path::new("/tmp/x/img")),
            [PathBuf::from("/tmp/x"), PathBuf::from("/tmp/x/img")]
        );
        assert!(tmp_prefixes(Path::new("/srv/img")).is_empty());
    }
}

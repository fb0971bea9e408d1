//! The few system calls std does not wrap: an advisory lock, signalling a whole process group,
//! probing a pid, waiting for a child's exit with a deadline, starting a file's writeback,
//! and killing ourselves for failpoints. Kept in one tiny module so that the rest
//! of the crate stays free of `unsafe`.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// Takes an exclusive `flock` on `file` without blocking; `Ok(false)` when another process
/// holds it. (std's `File::try_lock` needs a newer Rust than the workspace's minimum.)
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a valid, open descriptor owned by `file` has no memory effects.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Starts writing `file`'s dirty pages to disk without waiting for them
/// (`sync_file_range(2)`), so that an fsync of it after many such files finds its data
/// written or on its way. Advisory: a failure leaves the work to that fsync.
pub fn start_writeback(file: &File) {
    // SAFETY: sync_file_range on a valid, open descriptor owned by `file` has no memory
    // effects.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Sends SIGKILL to every process of process group `pgid`, so that a timed-out script's
/// children die with it.
pub fn kill_process_group(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill has no memory effects; a negative pid addresses the group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Whether a process with this pid exists (signal 0 probes without sending anything).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Dies at once by SIGKILL, exactly as an operator's `kill -9` or a power cut would stop us.
pub fn kill_self() -> ! {
    // SAFETY: signalling our own pid; SIGKILL cannot be caught, so this never returns.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    std::process::abort()
}

/// The effective user id: bell-run's own directory must belong to it.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no arguments, cannot fail and has no memory effects.
    unsafe { libc::geteuid() }
}

/// Sets the file mode creation mask, so that the directories and files bell-run creates get
/// the modes it means whatever mask it was started with.
pub fn set_umask(mask: u32) {
    // SAFETY: umask only changes the process's creation mask.
    unsafe {
        libc::umask(mask as libc::mode_t);
    }
}

/// A descriptor that becomes readable when process `pid` exits (`pidfd_open`, Linux 5.3);
/// `None` where the kernel lacks it.
pub fn pidfd_open(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just created and is owned by nothing else.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Blocks until `fd` is readable or `timeout` has passed (`None`: no limit); spurious wakes
/// (a signal) return early, and the caller looks again.
pub fn wait_readable(fd: &impl std::os::fd::AsRawFd, timeout: Option<std::time::Duration>) {
    // poll takes milliseconds as an int: a longer wait is several polls.
    let ms = timeout.map_or(-1, |t| {
        i32::try_from(t.as_millis().max(1)).unwrap_or(i32::MAX)
    });
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and its count.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

/// Makes reads of `fd` return at once when there is nothing to read (`WouldBlock`), so that a
/// wake without data (a signal) cannot block a reader that has a deadline.
pub fn set_nonblocking(fd: &impl std::os::fd::AsRawFd) {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller holds open, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

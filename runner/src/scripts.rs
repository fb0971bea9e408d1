//! Running one script: in its own process group (so a timeout kills everything it started),
//! with a fixed environment, the bundle as working directory, stdin closed and stdout+stderr
//! captured into a log file under the state directory. Also the detached supervisor that
//! carries a background exec script's timeout and result past the end of its bell-run.

use crate::confine::Confine;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Invocation {
    /// `sh` for generated scripts; the script itself for exec scripts (honouring its shebang).
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub log: PathBuf,
    /// Where it runs when the root is not `/` (paths above are the build machine's).
    pub confine: Confine,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut(u64),
    NotStarted(String),
    /// Confined to an image root or a read-only build machine, and that could not be set up:
    /// the script did not run anywhere.
    NotEntered(String),
}

impl Exit {
    pub fn ok(&self) -> bool {
        *self == Exit::Code(0)
    }

    pub fn describe(&self) -> String {
        match self {
            Exit::Code(c) => format!("exit {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut(t) => format!("timed out after {t}s; its process group was killed"),
            Exit::NotStarted(e) => format!("could not start: {e}"),
            Exit::NotEntered(e) => format!("could not start it confined: {e}"),
        }
    }
}

fn command(inv: &Invocation) -> Result<Command, String> {
    if let Some(dir) = inv.log.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Private: script output may hold what the script was given.
    let log = crate::rootfs::create_new(&inv.log, 0o600)
        .map_err(|e| format!("cannot create {}: {e}", inv.log.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("cannot share {}: {e}", inv.log.display()))?;
    refuse_unknown_format(&inv.program)?;
    // A bare name (`sh`) is looked up on the script's own PATH.
    let program = if inv.program.is_absolute() {
        inv.confine
            .inside(&inv.program)
            .ok_or_else(|| format!("{} is not under the root it runs in", inv.program.display()))?
    } else {
        inv.program.clone()
    };
    let mut cmd = Command::new(program);
    cmd.args(&inv.args)
        .current_dir(&inv.cwd)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0);
    with_default_path(&mut cmd);
    for (key, value) in inv.confine.env(&inv.env) {
        cmd.env(key, value);
    }
    inv.confine.apply(&mut cmd, &inv.cwd)?;
    Ok(cmd)
}

/// Gives `cmd` a search path when bell-run has none (a unit or cron job may start it with an
/// empty environment), so that scripts find `systemctl` and the coreutils.
pub(crate) fn with_default_path(cmd: &mut Command) {
    if std::env::var_os("PATH").is_none() {
        cmd.env("PATH", crate::confine::IMAGE_PATH);
    }
}

/// Runs to completion or timeout.
pub fn run(inv: &Invocation) -> Exit {
    let mut cmd = match command(inv) {
        Ok(cmd) => cmd,
        Err(e) => return Exit::NotStarted(e),
    };
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        // Setting up the namespace failed (or the exec inside it): either way nothing ran.
        Err(e) if inv.confine != Confine::Not => {
            return Exit::NotEntered(format!("{}: {e}", inv.program.display()))
        }
        Err(e) => return Exit::NotStarted(spawn_error(&inv.program, &e)),
    };
    // A timeout too far away to be an instant (a hostile manifest's u64::MAX seconds) is none.
    let deadline = Instant::now().checked_add(inv.timeout);
    // Woken the moment the script exits: sleeping between looks would add up to a sleep to
    // every script, which on a first apply of dozens of short scripts is most of the time.
    let exited = sys::pidfd_open(child.id());
    let mut pause = Duration::from_millis(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return match (status.code(), status.signal()) {
                    (Some(code), _) => Exit::Code(code),
                    (None, Some(sig)) => Exit::Signal(sig),
                    (None, None) => Exit::Code(-1),
                }
            }
            Ok(None) => {}
            Err(e) => return Exit::NotStarted(format!("cannot wait for the script: {e}")),
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            sys::kill_process_group(child.id());
            let _ = child.wait();
            return Exit::TimedOut(inv.timeout.as_secs());
        }
        match &exited {
            Some(fd) => sys::wait_readable(
                fd,
                deadline.map(|d| d.saturating_duration_since(Instant::now())),
            ),
            None => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// A script without a `#!` line is refused before it is started. The kernel refuses it too
/// (ENOEXEC), but glibc's `execvp`, which std uses where it cannot use `posix_spawn` (in the
/// static binary), then runs it with `/bin/sh` anyway: a bundle must not mean one thing on one
/// build of bell-run and another on the next.
fn refuse_unknown_format(program: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    if !program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(()); // a command found on PATH (`sh`), not a script of the bundle
    }
    let mut magic = [0u8; 4];
    let Ok(mut file) = fs::File::open(program) else {
        return Ok(()); // spawn says why
    };
    let mut read = 0;
    while read < magic.len() {
        match std::io::Read::read(&mut file, &mut magic[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(()),
        }
    }
    let magic = &magic[..read];
    if magic.starts_with(b"#!") || magic == b"\x7fELF" {
        return Ok(());
    }
    Err(spawn_error(
        program,
        &std::io::Error::from_raw_os_error(libc::ENOEXEC),
    ))
}

pub(crate) fn spawn_error(program: &Path, e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::ENOEXEC) {
        format!(
            "{} is not an executable format; give the script a `#!` line",
            program.display()
        )
    } else {
        format!("{}: {e}", program.display())
    }
}

/// What a background supervisor leaves for the next bell-run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BackgroundResult {
    pub exit: Exit,
    pub finished: u64,
}

/// Starts `inv` under a detached supervisor (bell-run itself, re-executed) that enforces the
/// timeout and writes the result to `result_file`. Returns the supervisor's pid.
pub fn spawn_background(inv: &Invocation, result_file: &Path) -> Result<u32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find bell-run itself: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("__supervise")
        .arg(result_file)
        .arg(&inv.log)
        .arg(inv.timeout.as_secs().to_string())
        .arg(inv.confine.to_arg())
        .arg(&inv.cwd)
        .arg(&inv.program)
        .args(&inv.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // As the script will see it: the supervisor passes its environment on.
    for (key, value) in inv.confine.env(&inv.env) {
        cmd.env(key, value);
    }
    let _ = fs::remove_file(result_file);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the background supervisor: {e}"))?;
    Ok(child.id())
}

/// The hidden `__supervise` command: `RESULT LOG TIMEOUT CONFINE CWD PROGRAM ARGS...`,
/// environment inherited as the foreground run would set it.
pub fn supervise(args: &[OsString]) -> i32 {
    if args.len() < 6 {
        return 2;
    }
    let Some(confine) = Confine::parse(&args[3]) else {
        return 2;
    };
    let result_file = PathBuf::from(&args[0]);
    let Some(timeout) = args[2].to_str().and_then(|t| t.parse().ok()) else {
        return 2;
    };
    let inv = Invocation {
        program: PathBuf::from(&args[5]),
        args: args[6..].to_vec(),
        cwd: PathBuf::from(&args[4]),
        env: Vec::new(),
        timeout: Duration::from_secs(timeout),
        log: PathBuf::from(&args[1]),
        confine,
    };
    let exit = run(&inv);
    let result = BackgroundResult {
        exit,
        finished: crate::state::now(),
    };
    let text = serde_json::to_string(&result).unwrap_or_default();
    match crate::rootfs::write_atomic(&result_file, text.as_bytes()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

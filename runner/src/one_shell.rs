//! Checks of a live host in one shell: each check script runs as it would by itself (see
//! [`crate::scripts::run`]), but in a subshell of one `sh` rather than an `sh` of its own.
//! Starting `sh` is most of what a check that reads a few files costs on an emulated host
//! (30 ms against 3 for a subshell), and a live no-op apply runs a dozen checks.

use crate::confine::Confine;
use crate::scripts::{self, Exit, Invocation};
use crate::sys;
use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs generated scripts one after the other in one `sh`, each in a subshell of its own, as
/// [`scripts::run`] would run each: `sh SCRIPT ARGS...` in its working directory, with its
/// environment exported, stdin closed, its output into its log and its own timeout. Each is a
/// subshell, so what one
/// script sets (variables, functions, options, traps, its working directory) never reaches
/// the next. Returns each one's exit and time, in the order given. A script that is not
/// `sh SCRIPT` unconfined runs by itself, in its turn.
///
/// For checks of a live host only: the logs are opened by the shell (after bell-run made them,
/// private and new), so their paths must not lead anywhere through a link a hostile root could
/// plant, which on `/` they cannot lead out of.
pub fn run_in_one_shell(invs: &[&Invocation]) -> Vec<(Exit, Duration)> {
    let mut results: Vec<Option<(Exit, Duration)>> = vec![None; invs.len()];
    let mut pending: Vec<(usize, &Invocation)> = Vec::new();
    for (i, inv) in invs.iter().enumerate() {
        if !fits_one_shell(inv) {
            run_shared(&pending, &mut results);
            pending.clear();
            let started = Instant::now();
            results[i] = Some((scripts::run(inv), started.elapsed()));
            continue;
        }
        match new_log(&inv.log) {
            Ok(()) => pending.push((i, *inv)),
            Err(e) => results[i] = Some((Exit::NotStarted(e), Duration::ZERO)),
        }
    }
    run_shared(&pending, &mut results);
    results
        .into_iter()
        .map(|r| r.unwrap_or((Exit::NotStarted("not run".to_string()), Duration::ZERO)))
        .collect()
}

/// Whether [`run_in_one_shell`] can run `inv` in its shell: a generated script run by `sh`,
/// not confined, whose environment names are names the shell can export.
fn fits_one_shell(inv: &Invocation) -> bool {
    let name = |k: &str| {
        let mut chars = k.chars();
        chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
    };
    inv.program == Path::new("sh")
        && inv.confine == Confine::Not
        && !inv.args.is_empty()
        && inv.env.iter().all(|(k, _)| name(k))
}

/// A script's log, made new and private as `scripts::run` makes it.
fn new_log(log: &Path) -> Result<(), String> {
    if let Some(dir) = log.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    crate::rootfs::create_new(log, 0o600)
        .map(drop)
        .map_err(|e| format!("cannot create {}: {e}", log.display()))
}

/// `text` as one word of `sh`: in single quotes, each `'` closed, escaped and reopened.
fn sh_word(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 2);
    out.push(b'\'');
    for &b in text {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

/// The shell program that runs `jobs`: for each, a subshell that sets itself up, says `N s`
/// on descriptor 3 (bell-run's pipe) once it has, closes that descriptor (what the script
/// starts must not hold bell-run's pipe) and sources the script; then the shell says `N e
/// STATUS`. A job that ends without its `s` could not be set up: it did not run.
fn one_shell_program(jobs: &[(usize, &Invocation)]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = b"exec 3>&1 >/dev/null 2>&1 </dev/null\n".to_vec();
    for (n, (_, inv)) in jobs.iter().enumerate() {
        out.push(b'(');
        for (key, value) in &inv.env {
            out.extend_from_slice(format!("export {key}=").as_bytes());
            out.extend(sh_word(value.as_bytes()));
            out.extend_from_slice(b"; ");
        }
        out.extend_from_slice(b"cd -- ");
        out.extend(sh_word(inv.cwd.as_os_str().as_bytes()));
        out.extend_from_slice(b" || exit; exec >>");
        out.extend(sh_word(inv.log.as_os_str().as_bytes()));
        out.extend_from_slice(
            format!(" 2>&1 || exit; echo '{n} s' >&3; exec 3>&-; set --").as_bytes(),
        );
        for arg in &inv.args[1..] {
            out.push(b' ');
            out.extend(sh_word(arg.as_bytes()));
        }
        // `.` looks a name without a slash up on PATH.
        let script = inv.args[0].as_bytes();
        out.extend_from_slice(b"; . ");
        if !script.contains(&b'/') {
            out.extend_from_slice(b"./");
        }
        out.extend(sh_word(script));
        out.extend_from_slice(format!("); echo \"{n} e $?\" >&3\n").as_bytes());
    }
    out
}

/// Runs `jobs` in one shell until they are done or one of them ends it (a timeout, or the
/// shell killed); the ones after that run in another. Fills in `results` for each.
fn run_shared(mut jobs: &[(usize, &Invocation)], results: &mut [Option<(Exit, Duration)>]) {
    while !jobs.is_empty() {
        let done = run_some_in_one_shell(jobs, results).max(1);
        jobs = &jobs[done.min(jobs.len())..];
    }
}

/// One shell for `jobs`; returns how many of them it accounted for in `results`.
fn run_some_in_one_shell(
    jobs: &[(usize, &Invocation)],
    results: &mut [Option<(Exit, Duration)>],
) -> usize {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    let program = one_shell_program(jobs);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(std::ffi::OsStr::from_bytes(&program))
        .arg("sh")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    scripts::with_default_path(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            for (i, _) in jobs {
                results[*i] = Some((
                    Exit::NotStarted(scripts::spawn_error(Path::new("sh"), &e)),
                    Duration::ZERO,
                ));
            }
            return jobs.len();
        }
    };
    let Some(mut said) = child.stdout.take() else {
        sys::kill_process_group(child.id());
        let _ = child.wait();
        return 0;
    };
    sys::set_nonblocking(&said);
    let mut buf: Vec<u8> = Vec::new();
    let mut current = 0;
    let mut set_up = false;
    let mut started = Instant::now();
    let mut chunk = [0u8; 512];
    loop {
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let mut words = line.split_whitespace();
            let (Some(n), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            if n.parse::<usize>().ok() != Some(current) {
                continue;
            }
            match what {
                "s" => set_up = true,
                "e" => {
                    let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
                    let exit = if set_up {
                        Exit::Code(code)
                    } else {
                        Exit::NotStarted(format!(
                            "its working directory {} or its log {} could not be set up",
                            jobs[current].1.cwd.display(),
                            jobs[current].1.log.display()
                        ))
                    };
                    results[jobs[current].0] = Some((exit, started.elapsed()));
                    current += 1;
                    set_up = false;
                    started = Instant::now();
                    if current == jobs.len() {
                        let _ = child.wait();
                        return current;
                    }
                }
                _ => {}
            }
        }
        let timeout = jobs[current].1.timeout;
        let deadline = started.checked_add(timeout);
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            sys::kill_process_group(child.id());
            let _ = child.wait();
            results[jobs[current].0] = Some((Exit::TimedOut(timeout.as_secs()), started.elapsed()));
            return current + 1;
        }
        sys::wait_readable(
            &said,
            deadline.map(|d| d.saturating_duration_since(Instant::now())),
        );
        match said.read(&mut chunk) {
            Ok(0) => {
                // The shell ended before the job it was on: killed, or the script made it exit.
                let exit = match child.wait() {
                    Ok(status) => match (status.code(), status.signal()) {
                        (_, Some(sig)) => Exit::Signal(sig),
                        _ => Exit::NotStarted("the shell running it ended early".to_string()),
                    },
                    Err(e) => Exit::NotStarted(format!("cannot wait for the shell: {e}")),
                };
                sys::kill_process_group(child.id());
                results[jobs[current].0] = Some((exit, started.elapsed()));
                return current + 1;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                sys::kill_process_group(child.id());
                let _ = child.wait();
                results[jobs[current].0] = Some((
                    Exit::NotStarted(format!("cannot read the shell's answers: {e}")),
                    started.elapsed(),
                ));
                return current + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::PathBuf;

    /// `sh NAME ARGS...` of a script written into `dir` with `body`, its log beside it.
    fn script(dir: &Path, name: &str, body: &str, args: &[&str]) -> Invocation {
        fs::write(dir.join(name), format!("#!/bin/sh\n{body}")).unwrap();
        Invocation {
            program: PathBuf::from("sh"),
            args: std::iter::once(name)
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect(),
            cwd: dir.to_path_buf(),
            env: vec![("BELL_RESOURCE".to_string(), format!("test:{name}"))],
            timeout: Duration::from_secs(30),
            log: dir.join("logs").join(format!("{name}.log")),
            confine: Confine::Not,
        }
    }

    fn log(inv: &Invocation) -> String {
        fs::read_to_string(&inv.log).unwrap()
    }

    #[test]
    fn each_script_runs_as_it_would_by_itself_and_leaves_nothing_to_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let first = script(
            d,
            "first.sh",
            "set -eu\nleft=1\nf() { :; }\ntrap 'echo trapped' EXIT\ncd /\n\
             echo \"$BELL_RESOURCE $# $1 $(pwd)\"\necho to-stderr >&2\nexit 2\n",
            &["one"],
        );
        let second = script(
            d,
            "second.sh",
            "echo \"$BELL_RESOURCE $# left=${left:-unset} $(command -v f || echo no-f) $-\"\n\
             pwd\ncat <&0\nfalse\n",
            &[],
        );
        let ran = run_in_one_shell(&[&first, &second]);
        assert_eq!(ran[0].0, Exit::Code(2));
        assert_eq!(ran[1].0, Exit::Code(1));
        assert_eq!(log(&first), "test:first.sh 1 one /\nto-stderr\ntrapped\n");
        let second_log = log(&second);
        let mut lines = second_log.lines();
        let said = lines.next().unwrap();
        assert!(
            said.starts_with("test:second.sh 0 left=unset no-f "),
            "{said}"
        );
        assert!(!said.rsplit(' ').next().unwrap().contains('e'), "{said}");
        assert_eq!(lines.next(), Some(d.to_str().unwrap()));
        assert_eq!(lines.next(), None, "stdin is closed");
        // Private, as a script's log is.
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&first.log).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn hostile_arguments_environment_and_paths_reach_the_script_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let place = dir.path().join("it's a \"dir\" $(touch pwned) `x`\n;&|");
        fs::create_dir_all(&place).unwrap();
        let hostile = "a'b\"c $(touch pwned) `touch pwned` ;| & \\n\nline\t'";
        let mut inv = script(
            &place,
            "say $(touch pwned).sh",
            "printf '[%s]\\n' \"$@\" \"$HOSTILE\"\n",
            &[hostile, "", "-x"],
        );
        inv.env.push(("HOSTILE".to_string(), hostile.to_string()));
        let ran = run_in_one_shell(&[&inv]);
        assert_eq!(
            ran[0].0,
            Exit::Code(0),
            "{:?}",
            fs::read_to_string(&inv.log)
        );
        assert_eq!(log(&inv), format!("[{hostile}]\n[]\n[-x]\n[{hostile}]\n"));
        assert!(!place.join("pwned").exists() && !dir.path().join("pwned").exists());
    }

    #[test]
    fn a_script_that_outlives_its_timeout_or_kills_the_shell_ends_alone() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut slow = script(d, "slow.sh", "echo started\nsleep 30\n", &[]);
        slow.timeout = Duration::from_secs(1);
        let killer = script(d, "killer.sh", "kill -KILL 0\n", &[]);
        let after = script(d, "after.sh", "echo after\n", &[]);
        let ran = run_in_one_shell(&[&slow, &killer, &after]);
        assert_eq!(ran[0].0, Exit::TimedOut(1));
        assert!(ran[0].1 < Duration::from_secs(10), "{:?}", ran[0].1);
        assert_eq!(ran[1].0, Exit::Signal(libc::SIGKILL));
        assert_eq!(ran[2].0, Exit::Code(0));
        assert_eq!(log(&after), "after\n");
    }

    #[test]
    fn a_script_that_cannot_be_set_up_does_not_run_and_the_others_do() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut no_log = script(d, "no-log.sh", "touch ran\n", &[]);
        fs::write(d.join("file"), "").unwrap();
        no_log.log = d.join("file/no-log.log");
        let mut no_dir = script(d, "no-dir.sh", "touch ran\n", &[]);
        no_dir.cwd = d.join("missing");
        let mut alone = script(d, "alone.sh", "#!/bin/sh\necho by itself\n", &[]);
        alone.program = d.join("alone.sh");
        alone.args.clear();
        let mut exe = fs::metadata(&alone.program).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut exe, 0o755);
        fs::set_permissions(&alone.program, exe).unwrap();
        let ok = script(d, "ok.sh", "echo ok\n", &[]);
        let ran = run_in_one_shell(&[&no_log, &no_dir, &alone, &ok]);
        assert!(matches!(ran[0].0, Exit::NotStarted(_)), "{:?}", ran[0]);
        assert!(matches!(ran[1].0, Exit::NotStarted(_)), "{:?}", ran[1]);
        assert!(!d.join("ran").exists() && !d.join("missing/ran").exists());
        assert_eq!(ran[2].0, Exit::Code(0));
        assert_eq!(log(&alone), "by itself\n");
        assert_eq!(ran[3].0, Exit::Code(0));
        assert_eq!(log(&ok), "ok\n");
    }
}

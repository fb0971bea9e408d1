//! What every step of an apply shares: the context scripts run in (root, offline, timeout,
//! the environment they get), the outcome of one script, and the refusal that stops an apply
//! before it changes anything. Its own module so that the steps (apply, check, revert,
//! triggers) can all use it without importing each other.

use crate::confine::{self, Confine};
use crate::plan::Change;
use crate::rootfs::Root;
use crate::scripts::{self, Exit, Invocation};
use crate::state;
use bell_bundle::{Manifest, Offline};
use bell_store::Status;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why nothing was done.
#[derive(Debug)]
pub struct Refusal {
    pub message: String,
    pub help: Option<String>,
    /// Set when the error came after changes began (reverts ran): not a clean refusal, so
    /// the exit code is 3, not 1.
    pub partial: bool,
    /// `pull`: every slot of the host's rollout group is held; it waits, nothing changed.
    pub waiting: bool,
    /// `pull`: the release was taken back on this host (not confirmed in time).
    pub reverted: bool,
}

impl Refusal {
    pub fn new(message: impl Into<String>) -> Refusal {
        Refusal {
            message: message.into(),
            help: None,
            partial: false,
            waiting: false,
            reverted: false,
        }
    }

    pub(crate) fn partial(mut self) -> Refusal {
        self.partial = true;
        self
    }

    pub(crate) fn reverted(mut self) -> Refusal {
        self.reverted = true;
        self
    }

    pub(crate) fn waiting(mut self) -> Refusal {
        self.waiting = true;
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Refusal {
        self.help = Some(help.into());
        self
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

impl Outcome {
    pub(crate) fn new(
        key: &str,
        change: Option<Change>,
        status: Status,
        detail: Option<String>,
    ) -> Outcome {
        Outcome {
            key: key.to_string(),
            change,
            status,
            detail,
            log: None,
        }
    }

    pub fn failed(&self) -> bool {
        self.status.is_failure()
    }
}

/// Where a user's script runs on this run (see [`Ctx::place`]).
pub(crate) enum Placement {
    Run(Confine),
    /// Not now: the first live apply runs it. Why, for the output line.
    Defer(String),
    /// Not on this run, and nothing owed.
    Skip(String),
}

pub(crate) struct Ctx<'a> {
    pub(crate) root: &'a Root,
    pub(crate) offline: bool,
    pub(crate) timeout: Duration,
    pub(crate) now: u64,
    /// The running kernel's boot id, read once per run (exec schedules count per boot).
    pub(crate) boot: Option<String>,
    /// Where the scripts' time goes (`bell-run apply --timings`).
    pub(crate) clock: Option<&'a crate::timings::Clock>,
    /// The fleet's store, when the run has one: what a `wait-for` reads its providers from.
    pub(crate) store: Option<&'a bell_store::Store>,
}

impl Ctx<'_> {
    pub(crate) fn env(&self, kind: &str, name: &str, generation: &str) -> Vec<(String, String)> {
        let state_dir = self.state_dir(kind, name);
        let mut env = vec![
            ("BELL_ROOT".to_string(), self.root.dir.display().to_string()),
            ("BELL_STATE".to_string(), state_dir.display().to_string()),
            (
                "BELL_OFFLINE".to_string(),
                if self.offline { "1" } else { "0" }.to_string(),
            ),
            ("BELL_RESOURCE".to_string(), format!("{kind}:{name}")),
            ("BELL_GENERATION".to_string(), generation.to_string()),
        ];
        if kind == bell_bundle::live::KIND {
            // What the apply puts in place: rendered by bell-run before the run (`live`).
            let next = state_dir.join(bell_bundle::live::NEXT_FILE);
            env.push((
                bell_bundle::live::RENDERED_ENV.to_string(),
                next.display().to_string(),
            ));
        }
        env
    }

    /// A resource's `BELL_STATE`, made when missing.
    pub(crate) fn state_dir(&self, kind: &str, name: &str) -> PathBuf {
        let state_dir = state::resource_state_dir(self.root, kind, name);
        if fs::create_dir_all(&state_dir).is_ok() {
            // Private: scripts may record secrets they need to undo themselves.
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&state_dir, fs::Permissions::from_mode(0o700));
        }
        state_dir
    }

    /// Whether this run brings the machine it runs on live: not `--offline`, and on `/` (the
    /// command line refuses a live run on any other root; checked again here as the one-shell
    /// runner opens paths without the root's confinement).
    pub(crate) fn is_live(&self) -> bool {
        !self.offline && self.root.dir == Path::new("/")
    }

    /// Whether `script` is not started: it is live only and this run is offline, where it
    /// would exit 0 before changing anything (see `Script::live_only`). It counts as having run
    /// and exited 0, without a process, a log or a state directory.
    pub(crate) fn skips(&self, script: &bell_bundle::Script) -> bool {
        self.offline && script.live_only
    }

    /// Where a user's script (an `exec` or a health probe) runs on this run, given its
    /// `offline=` mode and the interpreter its `#!` line names. A live run is not confined; on
    /// an image root the script runs inside the image, or on a read-only build machine, or
    /// not now, and never on the build machine as it is.
    pub(crate) fn place(&self, mode: Offline, interpreter: Option<&str>) -> Placement {
        if !self.offline {
            return Placement::Run(Confine::Not);
        }
        let root = &self.root.dir;
        let later = "it runs at the first live apply";
        match mode {
            Offline::Defer => Placement::Defer(format!("offline=\"defer\": {later}")),
            Offline::Skip => Placement::Skip("offline=\"skip\": not run offline".to_string()),
            // `--offline` on `/`: the root is the machine the script is for.
            _ if root == Path::new("/") => Placement::Run(Confine::Not),
            _ if crate::sys::effective_uid() != 0 => Placement::Defer(format!(
                "confining it to the root {} needs root (bell-run runs as uid {}); {later}",
                root.display(),
                crate::sys::effective_uid()
            )),
            Offline::Root => Placement::Run(Confine::Host(root.clone())),
            Offline::Image => match interpreter {
                Some(program) if !confine::file_in_root(root, program) => {
                    Placement::Defer(format!(
                        "the image has no {program} to run it inside; {later} (or give it \
                         offline=\"root\" to run it against $BELL_ROOT on this machine)"
                    ))
                }
                _ => Placement::Run(Confine::Image(root.clone())),
            },
        }
    }

    /// A log path relative to the root, as recorded in `state.json`.
    pub(crate) fn rel(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root.dir) {
            Ok(rel) => format!("/{}", rel.display()),
            Err(_) => path.display().to_string(),
        }
    }

    /// Runs a bundle's `script` with `sh`, its time counted under `kind` with `--timings`.
    pub(crate) fn run_sh(
        &self,
        bundle: &Path,
        script: &str,
        kind: &str,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> (Exit, String) {
        self.run_sh_with(bundle, script, &[], kind, env, log)
    }

    /// [`Self::run_sh`] with arguments after the script.
    pub(crate) fn run_sh_with(
        &self,
        bundle: &Path,
        script: &str,
        args: &[String],
        kind: &str,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> (Exit, String) {
        let inv = self.sh_invocation(bundle, script, args, env, log.clone());
        let exit = self.run_timed(kind, &inv);
        // Where the output really is: under the root, which need not be `/`.
        (exit, log.display().to_string())
    }

    /// How a bundle's `script` runs: `sh SCRIPT ARGS...` in the bundle, not confined.
    pub(crate) fn sh_invocation(
        &self,
        bundle: &Path,
        script: &str,
        args: &[String],
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Invocation {
        Invocation {
            program: PathBuf::from("sh"),
            args: std::iter::once(script.into())
                .chain(args.iter().map(Into::into))
                .collect(),
            cwd: bundle.to_path_buf(),
            env,
            timeout: self.timeout,
            log,
            confine: Confine::Not,
        }
    }

    /// Runs check scripts in turn, each one's time counted under its kind with `--timings`.
    /// Live they run in one shell ([`crate::one_shell`]); offline each by itself, as an image
    /// root's paths are not for a shell to open (and only a check or two runs there).
    pub(crate) fn run_check_scripts(&self, runs: &[ScriptRun]) -> Vec<Exit> {
        if !self.is_live() {
            return runs
                .iter()
                .map(|run| self.run_timed(&run.kind, &run.inv))
                .collect();
        }
        let invs: Vec<&Invocation> = runs.iter().map(|run| &run.inv).collect();
        let ran = crate::one_shell::run_in_one_shell(&invs);
        runs.iter()
            .zip(ran)
            .map(|(run, (exit, took))| {
                if let Some(clock) = self.clock {
                    clock.script(&run.kind, took);
                }
                exit
            })
            .collect()
    }

    /// Runs `inv` to completion, its time counted under `kind` with `--timings`.
    pub(crate) fn run_timed(&self, kind: &str, inv: &Invocation) -> Exit {
        let started = std::time::Instant::now();
        let exit = scripts::run(inv);
        if let Some(clock) = self.clock {
            clock.script(kind, started.elapsed());
        }
        exit
    }
}

/// A script to run and what `--timings` counts its time under.
pub(crate) struct ScriptRun {
    pub(crate) kind: String,
    pub(crate) inv: Invocation,
}

/// The one-line reason a failed script gave in `output` (the end of its log): stdlib scripts
/// end with `bell: KIND:NAME: why` on stderr, which lands in the log; shown inline so the
/// operator need not open the log.
pub(crate) fn last_reason(output: &str) -> Option<String> {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("bell: "))
        .map(|l| l.chars().take(300).collect())
}

/// What an apply that succeeded said for the operator to read: the text of its
/// [`bell_bundle::NOTE_PREFIX`] lines, joined (at most 600 characters).
pub(crate) fn notes(output: &str) -> Option<String> {
    let notes: Vec<&str> = output
        .lines()
        .filter_map(|l| l.strip_prefix(bell_bundle::NOTE_PREFIX))
        .filter(|l| !l.trim().is_empty())
        .collect();
    (!notes.is_empty()).then(|| notes.join("; ").chars().take(600).collect())
}

pub(crate) fn load_generation<'m>(
    ctx: &Ctx,
    cache: &'m mut BTreeMap<String, Option<Manifest>>,
    id: &str,
) -> Option<&'m Manifest> {
    cache
        .entry(id.to_string())
        .or_insert_with(|| bell_bundle::verify_opened(&state::generation_dir(ctx.root, id)).ok())
        .as_ref()
}

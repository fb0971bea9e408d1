//! What bell-run remembers between runs, all under `ROOT/var/lib/bell/`: the applied
//! generation and every resource's result (`state.json`), copies of the last generations'
//! bundles (so departed resources can be reverted and `rollback` works), per-resource state
//! directories for the scripts, script output, and backups of files that existed before bell.

use crate::rootfs::{write_atomic, Root};
use bell_store::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `state.json` format this bell-run writes and reads.
pub const STATE_FORMAT: u32 = 1;

/// How many generations (besides the applied one) keep their bundle copies.
pub const KEEP_GENERATIONS: usize = 5;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    pub format: u32,
    /// The bundle id last applied, if any.
    pub generation: Option<String>,
    /// The release version that bundle was applied for, when the run knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    pub applied_at: Option<u64>,
    /// `ok` or `failed` for the last apply.
    pub result: Option<String>,
    /// Every managed host path and the sha256 bell wrote there.
    pub files: BTreeMap<String, ManagedFile>,
    /// The resources of the applied generation, by `KIND:NAME`.
    pub resources: BTreeMap<String, ResourceRecord>,
    /// Departed resources whose revert has not succeeded yet, with the generation holding the
    /// revert script.
    #[serde(default)]
    pub pending_reverts: Vec<Pending>,
    /// Triggers fired by a file switch that have not run yet (a crash between the switch and
    /// the triggers must not lose a `daemon-reload`).
    #[serde(default)]
    pub pending_triggers: Vec<Pending>,
    /// Applies, newest last.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    /// A live apply that is not confirmed yet (its bundle has `confirm`): until it is, the
    /// host goes back to the generation before when its deadline passes, whoever runs next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirming: Option<Confirming>,
    /// Releases the host went back from, newest last: never applied again here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<Reverted>,
}

/// An apply waiting to be confirmed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirming {
    /// The generation applied and the release it was applied for.
    pub generation: String,
    pub release: Option<String>,
    /// Unix seconds: confirmed by then, or taken back.
    pub deadline: u64,
    /// Unix seconds: no try counts before (a third of the timeout after the apply), so that
    /// a change the system takes up a moment later (a network service restarted, a watched
    /// file read again) is in force when the host tries.
    #[serde(default)]
    pub tries_from: u64,
    /// The generation it replaced, and its release: where the host goes back to (none: the
    /// first apply on this host, which goes back to the host as it was before bell).
    pub back_to: Option<String>,
    pub back_to_release: Option<String>,
    /// The confirmation's length in seconds, for the wait in the next boot.
    #[serde(default)]
    pub timeout: u64,
    /// The boot this generation was applied in, when it needs a reboot to be in force (a
    /// kernel argument, say): once confirmed in this boot, it must be confirmed again in the
    /// next, the one that runs it in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboots_from: Option<String>,
    /// Confirmed in boot `reboots_from`, waiting for the next: the wait begins at the first
    /// run of another boot, with a deadline from then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_boot: bool,
}

impl Confirming {
    /// What the state keeps once this wait is confirmed: nothing, or the wait in the next boot.
    pub fn once_confirmed(&self) -> Option<Confirming> {
        (self.reboots_from.is_some() && !self.after_boot).then(|| Confirming {
            after_boot: true,
            ..self.clone()
        })
    }

    /// This wait timed from `now`: tries count from a third of its timeout on, until all of it.
    pub fn timed_from(self, now: u64) -> Confirming {
        Confirming {
            deadline: now + self.timeout,
            tries_from: now + self.timeout / 3,
            ..self
        }
    }

    /// The wait of the next boot, begun `now`.
    pub fn in_this_boot(&self, now: u64) -> Confirming {
        Confirming {
            reboots_from: None,
            after_boot: false,
            ..self.clone()
        }
        .timed_from(now)
    }
}

/// A release the host took back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverted {
    pub release: Option<String>,
    pub generation: String,
    /// Why it was not confirmed.
    pub reason: String,
    pub at: u64,
}

/// How many reverted releases a state remembers.
pub const KEEP_REVERTED: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedFile {
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceRecord {
    pub kind: String,
    pub name: String,
    pub hash: String,
    /// `ok`, `failed`, `skipped`, `halted` or `started` (a background exec still running).
    pub result: Status,
    pub at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Where the last script run's output is, relative to the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecRecord>,
}

/// The bookkeeping of an exec resource's schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRecord {
    /// The script's identity (`Resource::exec_identity`: name, content, policy) when it last
    /// ran: a new identity is a new script. Where the resource stands in the bundle is not part
    /// of it, so a run-once script stays run when something unrelated changes.
    pub ran_hash: Option<String>,
    pub last_start: Option<u64>,
    pub last_finish: Option<u64>,
    pub last_ok: Option<bool>,
    pub last_success: Option<u64>,
    pub runs: u64,
    /// The boot (kernel boot id) of the last run: the counts below are of that boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// Runs of the script after it had succeeded, in that boot (for `rerun_max_count`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reruns: u64,
    /// Runs of the script after it had failed, since it last succeeded, in that boot (for
    /// `retry_max_count`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u64,
    /// A background run that had not finished when its bell-run exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<Running>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub pid: u32,
    pub started: u64,
    /// Where the supervisor writes the result, relative to the root.
    pub result_file: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// `KIND:NAME` of a resource, or a trigger's name.
    pub name: String,
    pub generation: String,
    /// A trigger's: the paths that fired it, each as `created=PATH`, `changed=PATH` or
    /// `removed=PATH`, given to its script as arguments. `None` when they are not known (a
    /// state file from before bell-run recorded them, or too many to pass), and the trigger
    /// then takes everything under its paths as changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
}

/// The most a trigger is told about the paths that fired it: past this (a first apply of
/// thousands of unit files) it is told nothing and takes everything as changed, which keeps
/// its arguments far below the kernel's limit.
pub(crate) const MAX_TRIGGER_PATHS_BYTES: usize = 64 * 1024;

/// `paths` when they fit in a trigger's arguments, `None` (everything changed) when not.
pub(crate) fn capped(paths: Vec<String>) -> Option<Vec<String>> {
    let size: usize = paths.iter().map(|p| p.len() + 1).sum();
    (size <= MAX_TRIGGER_PATHS_BYTES).then_some(paths)
}

impl Pending {
    /// Adds the paths of another firing of the same trigger: a trigger still owed from an
    /// earlier run fired again. Not knowing either's paths is not knowing the union's, and
    /// a union past the cap is not passed either.
    pub(crate) fn add_paths(&mut self, more: Option<&[String]>) {
        match (&mut self.paths, more) {
            (Some(paths), Some(more)) => {
                for path in more {
                    if !paths.contains(path) {
                        paths.push(path.clone());
                    }
                }
                self.paths = capped(std::mem::take(paths));
            }
            _ => self.paths = None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub generation: String,
    pub applied_at: u64,
    pub result: String,
    /// The release the bundle was applied for, when the run knew it (a pull, `--release`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

pub fn state_file(root: &Root) -> PathBuf {
    root.bell_dir().join("state.json")
}

pub fn load(root: &Root) -> Result<State, String> {
    let path = state_file(root);
    let Some(text) = crate::rootfs::read_record(&path)? else {
        return Ok(State {
            format: STATE_FORMAT,
            ..State::default()
        });
    };
    let state: State = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bell-run state file: {e}", path.display()))?;
    if state.format != STATE_FORMAT {
        return Err(format!(
            "{} has format {}, but this bell-run reads format {STATE_FORMAT}; use a newer bell-run",
            path.display(),
            state.format
        ));
    }
    Ok(state)
}

pub fn save(root: &Root, state: &State) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(state).unwrap_or_default();
    text.push('\n');
    let path = state_file(root);
    write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A path component for a resource kind or name: anything but `[A-Za-z0-9_-.]` (and a leading
/// dot) is percent-encoded, so that `user:../../x` stays one directory.
pub fn component(text: &str) -> String {
    let mut out = String::new();
    for (i, b) in text.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

fn resource_rel(kind: &str, name: &str) -> PathBuf {
    Path::new(&component(kind)).join(component(name))
}

/// `BELL_STATE` of a resource: its scripts' private directory.
pub fn resource_state_dir(root: &Root, kind: &str, name: &str) -> PathBuf {
    root.bell_dir().join("state").join(resource_rel(kind, name))
}

/// Where bell-run keeps a resource's script output and background results.
pub fn resource_log_dir(root: &Root, kind: &str, name: &str) -> PathBuf {
    root.bell_dir().join("log").join(resource_rel(kind, name))
}

/// Resources the last `bell-run check` found drifted, one key a line: an offline apply runs no
/// check scripts of its own, so it repairs what a check reported.
pub fn drift_marks_path(root: &Root) -> PathBuf {
    root.bell_dir().join("drifted")
}

pub fn generations_dir(root: &Root) -> PathBuf {
    root.bell_dir().join("generations")
}

pub fn generation_dir(root: &Root, id: &str) -> PathBuf {
    generations_dir(root).join(id)
}

/// Where the file that was at a host path before bell first managed it is kept.
pub fn backup_path(root: &Root, host_path: &str) -> PathBuf {
    root.bell_dir()
        .join("backup")
        .join(host_path.trim_start_matches('/'))
}

/// Removes bundle copies that neither the applied generation, the last few of the history,
/// nor a pending revert or trigger needs.
pub fn prune_generations(root: &Root, state: &State) {
    let mut keep: Vec<&str> = Vec::new();
    keep.extend(state.generation.as_deref());
    for entry in state.history.iter().rev() {
        if keep.len() > KEEP_GENERATIONS {
            break;
        }
        if !keep.contains(&entry.generation.as_str()) {
            keep.push(&entry.generation);
        }
    }
    keep.extend(state.pending_reverts.iter().map(|p| p.generation.as_str()));
    keep.extend(state.pending_triggers.iter().map(|p| p.generation.as_str()));
    let Ok(entries) = std::fs::read_dir(generations_dir(root)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !keep.contains(&name.as_ref()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The running kernel's boot id, which changes at every boot; `BELL_RUN_BOOT_ID` overrides it
/// so that tests can simulate a reboot. `None` when it cannot be read.
pub fn boot_id() -> Option<String> {
    if let Ok(id) = std::env::var("BELL_RUN_BOOT_ID") {
        return Some(id);
    }
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Unix seconds now; `BELL_RUN_NOW` overrides it so that tests can move the clock across
/// rerun and retry intervals.
pub fn now() -> u64 {
    if let Some(now) = std::env::var("BELL_RUN_NOW")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return now;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

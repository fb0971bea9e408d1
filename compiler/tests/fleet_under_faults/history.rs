//! The recorded history of a run: every bell-run a host ran (when, how it ended, and what its
//! root held after it), every fault as it was injected, every step of the operator. The
//! checkers read only this and etcd's own history, after the run, as Jepsen's do.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a host's bell-run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    /// SIGKILLed, by a fault (at a crash point or from outside).
    Killed(String),
}

/// What a root holds, read between two runs of its bell-run (never during one).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// `state.json`'s generation, release and result.
    pub generation: Option<String>,
    pub release: Option<String>,
    pub result: Option<String>,
    pub applied_at: Option<u64>,
    /// Every generation the state's history names, oldest first.
    pub applied: Vec<String>,
    /// `accepted-releases.json`'s fleet `f`: the sequence and the release file's sha256.
    pub accepted: Option<(u64, String)>,
    /// Why the root is not wholly one generation: `current` leading elsewhere than the state
    /// says, or a managed file whose content is not the one the state records.
    pub mixed: Option<String>,
}

impl Seen {
    pub fn of(root: &Path) -> Seen {
        let bell = root.join("var/lib/bell");
        let mut seen = Seen::default();
        let state: serde_json::Value = match std::fs::read(bell.join("state.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
            Err(_) => return seen,
        };
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        seen.generation = text(&state["generation"]);
        seen.release = text(&state["release"]);
        seen.result = text(&state["result"]);
        seen.applied_at = state["applied_at"].as_u64();
        seen.applied = state["history"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| text(&e["generation"]))
            .collect();
        if let Ok(bytes) = std::fs::read(bell.join("accepted-releases.json")) {
            let accepted: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let f = &accepted["fleets"]["f"];
            if let (Some(sequence), Some(sha)) = (f["sequence"].as_u64(), text(&f["sha256"])) {
                seen.accepted = Some((sequence, sha));
            }
        }
        seen.mixed = mixed(root, &state, seen.generation.as_deref());
        seen
    }
}

fn mixed(root: &Path, state: &serde_json::Value, generation: Option<&str>) -> Option<String> {
    let generation = generation?;
    let current = std::fs::read_link(root.join("var/lib/bell/current")).ok();
    let points_at = current
        .as_ref()
        .and_then(|c| c.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    if points_at.as_deref() != Some(generation) {
        return Some(format!(
            "the state says generation {generation}, `current` leads to {current:?}"
        ));
    }
    let files = state["files"].as_object()?;
    for (path, file) in files {
        let want = file["sha256"].as_str().unwrap_or_default();
        let on_disk = std::fs::read(root.join(path.trim_start_matches('/')))
            .map(|b| bell_bundle::sha256_hex(&b))
            .unwrap_or_else(|e| format!("unreadable ({e})"));
        if on_disk != want {
            return Some(format!(
                "{path} holds {on_disk}, the state of generation {generation} says {want}"
            ));
        }
    }
    None
}

/// One run of a host's bell-run.
#[derive(Debug, Clone)]
pub struct Run {
    pub host: String,
    pub started: Duration,
    pub ended_at: Duration,
    pub ended: Ended,
    /// The run's last line of stderr (why it refused or failed), shortened.
    pub said: String,
    pub after: Seen,
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |s: &Option<String>| {
            s.as_deref()
                .map(|s| s.chars().take(12).collect::<String>())
                .unwrap_or_else(|| "-".into())
        };
        write!(
            f,
            "{:>7.1}s–{:>7.1}s {} {:?} → generation {} release {} result {} accepted {:?}{}{}",
            self.started.as_secs_f64(),
            self.ended_at.as_secs_f64(),
            self.host,
            self.ended,
            short(&self.after.generation),
            short(&self.after.release),
            self.after.result.as_deref().unwrap_or("-"),
            self.after.accepted.as_ref().map(|a| a.0),
            if self.said.is_empty() { "" } else { "; said: " },
            self.said
        )
    }
}

/// What the operator saw when a rollout ended: each host's generation then.
#[derive(Debug, Clone)]
pub struct Ending {
    pub at: Duration,
    /// The release rolled out (its number in the run).
    pub number: u32,
    /// `done` or `aborted`.
    pub how: String,
    /// The bundle each host should be on now: the release's (done), or the one before (aborted).
    pub want: BTreeMap<String, String>,
    pub on: BTreeMap<String, Option<String>>,
}

/// Everything recorded, in the order it happened.
pub struct Record {
    pub t0: Instant,
    pub runs: Mutex<Vec<Run>>,
    /// Faults injected and undone, and the operator's steps: time and words.
    pub events: Mutex<Vec<(Duration, String)>>,
    pub endings: Mutex<Vec<Ending>>,
}

impl Record {
    pub fn new() -> Record {
        Record {
            t0: Instant::now(),
            runs: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            endings: Mutex::new(Vec::new()),
        }
    }

    pub fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    pub fn event(&self, what: impl Into<String>) {
        let at = self.now();
        self.events.lock().unwrap().push((at, what.into()));
    }

    /// Every event and run, in time order, as lines.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<(Duration, String)> = self
            .events
            .lock()
            .unwrap()
            .iter()
            .map(|(at, what)| (*at, format!("{:>7.1}s {what}", at.as_secs_f64())))
            .collect();
        lines.extend(
            self.runs
                .lock()
                .unwrap()
                .iter()
                .map(|r| (r.started, r.to_string())),
        );
        lines.sort_by_key(|(at, _)| *at);
        lines.into_iter().map(|(_, l)| l).collect()
    }
}

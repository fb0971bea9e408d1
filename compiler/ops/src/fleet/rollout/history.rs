//! Rollout history: each rollout (and its abort) as it ended or halted, the last
//! [`KEPT`] in etcd, for `bellc rollout --history` and the status page. One entry per rollout,
//! keyed by when it started: a rollout that halts and is resumed, or aborted, updates its
//! entry rather than adding one.
//!
//! The history is a record for people, read from etcd like the progress: it decides nothing.

use super::{Phase, Progress};
use bell_store::keys::history_prefix;
use bell_store::Etcd;
use serde::{Deserialize, Serialize};

/// How many rollouts the store keeps.
pub const KEPT: usize = 50;

/// One wave of a rollout: its hosts, when they were given their bundle, when all of them were
/// up to date and healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wave {
    pub hosts: Vec<String>,
    pub started_at: Option<u64>,
    pub converged_at: Option<u64>,
}

/// When a wave was given and when it converged (unix seconds), as the progress keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaveTimes {
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_at: Option<u64>,
}

/// A halt of a rollout, and its resumption: a rollout that halted and was resumed to the end
/// is `done`, and its halts say what it went through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Halted {
    pub at: u64,
    /// The wave that halted it, counted from 1.
    pub wave: usize,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub fleet: String,
    /// The release rolled out.
    pub target: String,
    /// The release the fleet had when it began (`None`: the fleet's first).
    pub from: Option<String>,
    /// Who started it: `--by`, else the CI job, else `USER@HOST`.
    pub started_by: String,
    pub started_at: u64,
    pub ended_at: u64,
    /// `done`, `halted`, `aborted` or `aborting` (an abort that halted).
    pub outcome: String,
    pub reason: Option<String>,
    pub waves: Vec<Wave>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// Each time it halted, and when it was resumed, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halts: Vec<Halted>,
}

impl Entry {
    /// The entry for the rollout `progress` describes, as it stands now.
    pub fn of(progress: &Progress) -> Entry {
        let waves = progress
            .waves
            .iter()
            .enumerate()
            .map(|(i, hosts)| {
                let times = progress.wave_times.get(i);
                Wave {
                    hosts: hosts.clone(),
                    started_at: times.map(|t| t.started_at),
                    converged_at: times.and_then(|t| t.converged_at),
                }
            })
            .collect();
        Entry {
            fleet: progress.fleet.clone(),
            target: progress.target.clone(),
            from: progress.from.clone(),
            started_by: progress
                .started_by
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            started_at: progress.started_at,
            ended_at: progress.updated_at,
            outcome: progress.phase.as_str().to_string(),
            reason: progress.halted.as_ref().map(|h| h.reason.clone()),
            waves,
            held: progress.held.clone(),
            halts: progress.halts.clone(),
        }
    }
}

/// Files the entry of `progress` (a rollout that ended or halted), and forgets all but the
/// newest [`KEPT`].
pub fn file(etcd: &Etcd, progress: &Progress) -> Result<(), String> {
    debug_assert!(progress.phase != Phase::Running);
    let entry = Entry::of(progress);
    let key = format!(
        "{}{:012}-{}",
        history_prefix(&progress.fleet),
        entry.started_at,
        bell_bundle::short_id(&entry.target)
    );
    let text = serde_json::to_string(&entry).map_err(|e| e.to_string())?;
    etcd.put(&key, text.as_bytes())?;
    let kept = etcd.range_prefix(&history_prefix(&progress.fleet))?;
    if kept.len() > KEPT {
        for old in &kept[..kept.len() - KEPT] {
            etcd.delete(&old.key)?;
        }
    }
    Ok(())
}

/// The fleet's history, newest first; entries that cannot be read are left out.
pub fn list(etcd: &Etcd, fleet: &str) -> Result<Vec<Entry>, String> {
    Ok(entries_in(
        fleet,
        &etcd.range_prefix(&history_prefix(fleet))?,
    ))
}

/// The history among `kvs` (a read of the fleet's keys), newest first.
pub fn entries_in(fleet: &str, kvs: &[bell_wire::etcd::KeyValue]) -> Vec<Entry> {
    let prefix = history_prefix(fleet);
    let mut entries: Vec<Entry> = kvs
        .iter()
        .filter(|kv| kv.key.starts_with(&prefix))
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.started_at));
    entries
}

/// Who starts a rollout when `--by` does not say: the CI job the environment names (GitLab,
/// GitHub Actions, Jenkins), else `USER@HOST`.
pub fn started_by(by: Option<&str>, operator: impl FnOnce() -> String) -> String {
    if let Some(by) = by {
        return by.to_string();
    }
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(url) = var("CI_JOB_URL") {
        return url;
    }
    if let (Some(server), Some(repo), Some(run)) = (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        return format!("{server}/{repo}/actions/runs/{run}");
    }
    if let Some(url) = var("BUILD_URL") {
        return url;
    }
    operator()
}

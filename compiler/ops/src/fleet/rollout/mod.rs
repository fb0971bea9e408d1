//! The rollout controller: a release moves through the fleet wave by wave.
//!
//! Hosts pull the release the store names (`bell-run pull --store`), and they check that it is
//! signed and newer than the last they took. So a wave is a release of its own: the hosts of
//! the waves given so far have their new bundle in it, every other host its old one. The
//! controller signs wave k's release into OUT (the served directory keeps every release and
//! bundle), publishes it, and waits until every host of wave k reports up to date and healthy
//! on it before it gives wave k + 1. The last wave's release is the build's release itself.
//!
//! Why everything lives in etcd: the controller may die (a CI runner is recycled, a laptop
//! closes). Its progress is a key the next controller reads (`--resume`), and it holds a lease
//! while it runs, so that two controllers never move one fleet.
//!
//! ```text
//! /bell/<fleet>/rollout/progress     the rollout's progress (JSON, [`Progress`])
//! /bell/<fleet>/rollout/controller   who runs it, bound to the controller's lease
//! ```

use super::record::{self, Given, Record, Stage};
use super::status::{self, HostState};
use super::witness::Witness;
use bell_bundle::short_id;
use bell_bundle::{Release, ReleaseHost};
use bell_store::keys::{controller_key, pause_key, progress_key};
use bell_store::{Etcd, HostView, Store};
use bell_wire::etcd::Op;
use bellc_core::emit::releases;
use bellc_core::emit::signing::{self, SigningKey};
pub use remedy::{Call, Remedy};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The format of the progress key.
pub const PROGRESS_FORMAT: u32 = 1;

/// Seconds a controller's lease lives without a renewal: how long after a controller died
/// `--resume` has to wait at most.
pub const LEASE_TTL: u64 = 10;

/// How often a controller reads the fleet's reports while a wave converges: one read of
/// four ranges each time, whatever the fleet's size (about 0.15 requests per host for a
/// 1,000-host rollout: `docs/performance.md`, "The rollout controller").
pub const POLL: Duration = Duration::from_millis(250);

/// Who paused a rollout, why and since when. Read from etcd, unsigned: a forged pause only
/// keeps the next wave from being given, which is all a real one does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix seconds.
    pub since: u64,
}

impl Pause {
    /// A pause as read; one that cannot be read pauses all the same (whoever wrote it meant
    /// the rollout to stop).
    pub fn parse(raw: &[u8]) -> Pause {
        serde_json::from_slice(raw).unwrap_or_else(|e| Pause {
            by: "?".into(),
            reason: Some(format!("a pause that cannot be read ({e})")),
            since: 0,
        })
    }
}

/// Pauses the fleet's rollout: no wave is given until [`unpause`]; hosts given theirs finish.
pub fn pause(etcd: &Etcd, fleet: &str, pause: &Pause) -> Result<(), RolloutError> {
    let text = serde_json::to_string(pause).map_err(|e| RolloutError::Store(e.to_string()))?;
    etcd.put(&pause_key(fleet), text.as_bytes())
        .map_err(RolloutError::Store)
}

/// Takes the pause away, and says whether there was one.
pub fn unpause(etcd: &Etcd, fleet: &str) -> Result<bool, RolloutError> {
    let was = etcd.get(&pause_key(fleet)).map_err(RolloutError::Store)?;
    etcd.delete(&pause_key(fleet))
        .map_err(RolloutError::Store)?;
    Ok(was.is_some())
}

#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("{0}")]
    Store(String),
    #[error("a rollout controller for fleet `{fleet}` is running already ({holder})")]
    Busy { fleet: String, holder: String },
    /// The controller will not go on; the remedy says what puts it right.
    #[error("{message}")]
    Refused { message: String, remedy: Remedy },
    #[error("the controller lost its lease in etcd (etcd unreachable for {LEASE_TTL} s?); another controller may have taken over, so this one stops")]
    LostLease,
    #[error(transparent)]
    Signing(#[from] signing::SigningError),
    #[error(transparent)]
    Record(#[from] record::RecordError),
    /// The store names another release than the one the key gave the fleet last.
    #[error(
        "the store names release {} as fleet `{fleet}`'s current one, but the release the \
         signing key gave the fleet last is {ours} ({whence}): the store was written by \
         something other than this controller, or OUT is not the directory the fleet's \
         rollouts use; nothing was signed or published",
        short_id(store)
    )]
    Disagrees {
        fleet: String,
        store: String,
        ours: String,
        whence: String,
        /// The version to put back, when there is one.
        fix: Option<String>,
    },
}

impl RolloutError {
    /// What to do about it, for the line after the error.
    pub fn help(&self) -> Option<String> {
        match self {
            RolloutError::Busy { .. } => Some(format!(
                "wait for it, or follow it with `bellc rollout --status`; a controller that died \
                 lets go within {LEASE_TTL} s, then `--resume` continues its rollout"
            )),
            RolloutError::LostLease => Some("`bellc rollout OUT --resume` continues".to_string()),
            RolloutError::Refused { remedy, .. } => Some(remedy.help(&Call::placeholder())),
            RolloutError::Disagrees { fleet, fix, .. } => Some(match fix {
                Some(version) => format!(
                    "find out who wrote it (`etcdctl get /bell/{fleet}/current_version`); when \
                     OUT is the right directory, put the store back on the key's release with \
                     `etcdctl put /bell/{fleet}/current_version {version}` and run the rollout \
                     again"
                ),
                None => format!(
                    "find out who wrote it (`etcdctl get /bell/{fleet}/current_version`); when \
                     OUT is the right directory, remove it with `etcdctl del \
                     /bell/{fleet}/current_version` and run the rollout again"
                ),
            }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Giving waves (or the controller died while it did: `--resume`).
    Running,
    /// Stopped at a failure or a wave that did not converge: `--resume` or `--abort`.
    Halted,
    /// An operator paused it (`--pause`): no new wave until `--continue`.
    Paused,
    Done,
    /// Giving the moved hosts their previous bundle back.
    Aborting,
    Aborted,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Running,
        Phase::Halted,
        Phase::Paused,
        Phase::Done,
        Phase::Aborting,
        Phase::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Halted => "halted",
            Phase::Paused => "paused",
            Phase::Done => "done",
            Phase::Aborting => "aborting",
            Phase::Aborted => "aborted",
        }
    }

    /// Whether a new rollout may start over this one.
    fn finished(self) -> bool {
        matches!(self, Phase::Done | Phase::Aborted)
    }
}

/// Where a rollout stands, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub format: u32,
    pub fleet: String,
    /// The version of the release being rolled out (OUT's release.json).
    pub target: String,
    /// The release the store named when the rollout began (`None`: a fleet's first).
    pub from: Option<String>,
    /// The hosts whose bundle changes, wave by wave (hosts that keep theirs are in none).
    pub waves: Vec<Vec<String>>,
    /// Waves whose hosts were given their new bundle.
    pub given: usize,
    /// Waves whose hosts all reported up to date and healthy.
    pub converged: usize,
    /// The release this rollout last published, and when (unix seconds).
    pub published: Option<String>,
    pub published_at: u64,
    /// The etcd revision of that publication: reports written after it can be about it.
    #[serde(default)]
    pub published_revision: i64,
    pub phase: Phase,
    pub halted: Option<Halt>,
    pub started_at: u64,
    pub updated_at: u64,
    /// Hosts left out because they were held when the rollout began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// While paused: who paused it, why, since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// Who started it (`--by`, the CI job, or `USER@HOST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    /// When each wave given so far was given and converged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wave_times: Vec<history::WaveTimes>,
    /// Each halt so far and its resumption, for the history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halts: Vec<history::Halted>,
}

impl Progress {
    /// The progress of the rollout `record` holds, as far as the record tells it: its waves
    /// given, the last of them not known to have converged. How a rollout starts, and how a
    /// progress the store lost is made again.
    fn of(record: &Record) -> Progress {
        let at = now();
        Progress {
            format: PROGRESS_FORMAT,
            fleet: record.fleet.clone(),
            target: record.target.clone(),
            from: record.from.as_ref().map(|g| g.version.clone()),
            waves: record.waves.clone(),
            given: record.given_waves,
            converged: record.given_waves.saturating_sub(1),
            published: None,
            published_at: 0,
            published_revision: 0,
            phase: Phase::Running,
            halted: None,
            started_at: at,
            updated_at: at,
            held: record.held.clone(),
            paused: None,
            started_by: None,
            wave_times: Vec::new(),
            halts: Vec::new(),
        }
    }

    /// Hosts that were given their new bundle.
    pub fn moved(&self) -> BTreeSet<String> {
        self.waves
            .iter()
            .take(self.given)
            .flatten()
            .cloned()
            .collect()
    }
}

/// Why a rollout stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Halt {
    /// 1-based, as people count waves; 0 for the abort's wait.
    pub wave: usize,
    pub reason: String,
    pub hosts: Vec<Trouble>,
}

/// What to run after a halt, with the store filled in (and OUT, when the reader has it):
/// `status` and `rollout --status` say it under the halt.
pub fn next_after_halt(store: &str, out: Option<&str>) -> String {
    let store = bellc_core::escape::shell_quote(store);
    let out = out.map_or_else(|| "OUT".to_string(), bellc_core::escape::shell_quote);
    format!(
        "next: fix what stopped it, then `bellc rollout {out} --store {store} --sign-key KEY \
         --resume`; or `bellc rollout {out} --store {store} --sign-key KEY --abort` to give the \
         moved hosts their previous bundle (OUT: the directory the rollout began in)"
    )
}

/// A host that stopped a wave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trouble {
    pub host: String,
    /// `failed`, `unhealthy`, `silent` (nothing heard since the wave began, or its liveness
    /// lease lapsed), `waiting` (alive, waiting for a slot of its group), `unreadable` (its
    /// keys in the store cannot be read) or `pending` (heard from, not there yet).
    pub state: String,
    pub detail: Option<String>,
}

/// What the controller tells as it goes: a progress display, or one JSON line each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    WaveStarted {
        wave: usize,
        waves: usize,
        release: String,
        hosts: Vec<String>,
        /// The wave's release was published by an earlier controller.
        resumed: bool,
    },
    /// A host of the wave went down for a reboot bell-run ordered (or waits to): the wave
    /// waits for it to come back healthy.
    HostRebooting {
        wave: usize,
        host: String,
        /// `rebooting` or `reboot-required` (waiting for its window or a slot).
        state: String,
        detail: Option<String>,
    },
    HostConverged {
        wave: usize,
        host: String,
    },
    /// Paused before giving `wave`: the controller waits for `--continue`.
    Paused {
        wave: usize,
        by: String,
        reason: Option<String>,
        since: u64,
    },
    /// The pause was taken away: `wave` is given.
    Continued {
        wave: usize,
    },
    /// Hosts of `wave` or a later one were held since the rollout began: they are left out,
    /// on their bundle, as the hosts held when it began are.
    LeftOut {
        wave: usize,
        hosts: Vec<String>,
    },
    HostFailed {
        wave: usize,
        host: String,
        state: String,
        detail: Option<String>,
    },
    /// Not a JSON line: how the wave stands, for a progress display.
    #[serde(skip)]
    Tick {
        wave: usize,
        waves: usize,
        converged: usize,
        /// Of the others: going down for a reboot, or waiting to.
        rebooting: usize,
        hosts: usize,
        elapsed: Duration,
    },
    Halted {
        wave: usize,
        reason: String,
        hosts: Vec<Trouble>,
    },
    Done {
        release: String,
        waves: usize,
        hosts: usize,
        elapsed_ms: u64,
        /// Hosts left out because they were held: still on their bundle.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        held: Vec<String>,
    },
    AbortStarted {
        release: String,
        hosts: Vec<String>,
        /// Hosts whose bundle the rollout's release changes that the abort does not take
        /// back, each with why (held when it began, new in the release, never given it).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        kept: Vec<Kept>,
    },
    Aborted {
        release: String,
        hosts: usize,
    },
    /// The store could not be read this time; the controller keeps trying until the wave's
    /// time is up.
    StoreTrouble {
        error: String,
    },
}

/// How the controller runs.
pub struct Controller<'a> {
    pub etcd: Etcd,
    /// The build output, which the hosts' source serves: wave releases are written into it.
    pub out: PathBuf,
    pub key: Option<&'a SigningKey>,
    pub expires_in: Option<u64>,
    pub wave_timeout: Duration,
    /// How often the reports are read while a wave converges.
    pub poll: Duration,
    /// Who this controller is, for whoever finds the lease held.
    pub who: String,
    /// Who starts the rollouts it runs, for the history.
    pub by: String,
    /// The fleet as the controller follows it, from wave to wave.
    pub reading: Reading,
}

/// The controller's reading of the fleet: a watch of its own ([`crate::fleet::follow`]) and
/// the witness that judged what it read, made at the first wave it waits for.
#[derive(Default)]
pub struct Reading(std::sync::Mutex<Option<(crate::fleet::follow::Follower, Witness)>>);

impl Reading {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(crate::fleet::follow::Follower, Witness)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a run ended (errors aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done {
        release: String,
        /// Hosts left out because they were held: still on their bundle, so the release the
        /// store names is the build's but for them.
        held: Vec<String>,
    },
    Halted(Halt),
    Aborted {
        release: String,
        /// The hosts taken back to their previous bundle.
        back: Vec<String>,
        kept: Vec<Kept>,
    },
}

/// A host an abort leaves as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub host: String,
    pub why: String,
}

/// The hosts of each of `target`'s waves whose bundle is not the one `old` gives them.
pub fn changed_waves(target: &Release, old: &BTreeMap<String, String>) -> Vec<Vec<String>> {
    let changes = |host: &String| {
        target
            .hosts
            .get(host)
            .is_some_and(|entry| old.get(host) != Some(&entry.bundle))
    };
    let mut waves: Vec<Vec<String>> = target
        .waves
        .iter()
        .map(|w| w.iter().filter(|h| changes(h)).cloned().collect())
        .collect();
    // A release built without waves (or one whose waves miss a host) still moves every host.
    let listed: BTreeSet<&String> = target.waves.iter().flatten().collect();
    let unlisted: Vec<String> = target
        .hosts
        .keys()
        .filter(|h| !listed.contains(h) && changes(h))
        .cloned()
        .collect();
    if !unlisted.is_empty() {
        waves.push(unlisted);
    }
    waves
}

/// The release of wave `k` (0-based): hosts of waves up to `k` on their new bundle, the others
/// on their old one (hosts new to the fleet join in their wave). The last wave's is `target`
/// itself, and with it the hosts that left the fleet leave the release.
///
/// `held` hosts are in no wave: every release keeps them on their bundle in `from` (or out of
/// the release, when they are new to the fleet), the last one too.
pub fn wave_release(
    target: &Release,
    from: Option<&Release>,
    waves: &[Vec<String>],
    k: usize,
    held: &[String],
) -> Release {
    if k + 1 >= waves.len() {
        if held.is_empty() {
            return target.unsigned();
        }
        let mut hosts = target.hosts.clone();
        for host in held {
            match from.and_then(|f| f.hosts.get(host)) {
                Some(old) => hosts.insert(host.clone(), old.clone()),
                None => hosts.remove(host),
            };
        }
        return mixed(target, hosts);
    }
    let moved: BTreeSet<&String> = waves.iter().take(k + 1).flatten().collect();
    let mut hosts: BTreeMap<String, ReleaseHost> = BTreeMap::new();
    if let Some(from) = from {
        hosts.extend(from.hosts.iter().map(|(h, e)| (h.clone(), e.clone())));
    }
    for (host, entry) in &target.hosts {
        if moved.contains(host) || hosts.contains_key(host) && !changes_bundle(from, host, entry) {
            hosts.insert(host.clone(), entry.clone());
        }
    }
    mixed(target, hosts)
}

fn changes_bundle(from: Option<&Release>, host: &str, entry: &ReleaseHost) -> bool {
    match from.and_then(|f| f.hosts.get(host)) {
        Some(old) => old.bundle != entry.bundle,
        None => true,
    }
}

/// The abort's release: every host of `from` on its bundle there, hosts new in `target` that
/// were moved kept on theirs (there is nothing to go back to).
pub fn abort_release(target: &Release, from: &Release, moved: &BTreeSet<String>) -> Release {
    let mut hosts = from.hosts.clone();
    for host in moved {
        if let (false, Some(entry)) = (hosts.contains_key(host), target.hosts.get(host)) {
            hosts.insert(host.clone(), entry.clone());
        }
    }
    mixed(target, hosts)
}

/// The hosts whose bundle `target` changes from `from` that an abort taking `back` back leaves
/// as they are, each with why: held when the rollout began, new in the release, or never
/// given its new bundle by a wave.
pub fn kept_by_abort(
    target: &Release,
    from: &Release,
    back: &[String],
    held: &[String],
) -> Vec<Kept> {
    let back: BTreeSet<&String> = back.iter().collect();
    target
        .hosts
        .iter()
        .filter(|(h, e)| {
            !back.contains(h) && from.hosts.get(*h).is_none_or(|old| old.bundle != e.bundle)
        })
        .map(|(host, _)| Kept {
            host: host.clone(),
            why: if held.contains(host) {
                "held when the rollout began: never given its new bundle".to_string()
            } else if !from.hosts.contains_key(host) {
                "new in this release: it has no earlier bundle to go back to".to_string()
            } else {
                "no wave of this rollout gave it its new bundle".to_string()
            },
        })
        .collect()
}

/// A release of `target`'s fleet, waves and budget over another host → bundle map.
fn mixed(target: &Release, hosts: BTreeMap<String, ReleaseHost>) -> Release {
    Release {
        version: Release::compute_version(&hosts),
        hosts,
        ..target.unsigned()
    }
}

pub fn load_progress(etcd: &Etcd, fleet: &str) -> Result<Option<Progress>, RolloutError> {
    match etcd
        .get(&progress_key(fleet))
        .map_err(RolloutError::Store)?
    {
        None => Ok(None),
        Some(bytes) => parse_progress(fleet, &bytes).map(Some),
    }
}

/// The progress key's value for the controller: one that cannot be read counts as none (OUT's
/// signed record says where the rollout stands; the progress is made again from it), so that
/// a garbled key cannot wedge the fleet.
fn readable_progress(etcd: &Etcd, fleet: &str) -> Result<Option<Progress>, RolloutError> {
    match etcd
        .get(&progress_key(fleet))
        .map_err(RolloutError::Store)?
    {
        None => Ok(None),
        Some(bytes) => Ok(parse_progress(fleet, &bytes).ok()),
    }
}

/// The progress key's value, read by [`load_progress`] or in a range of the fleet's keys.
pub fn parse_progress(fleet: &str, bytes: &[u8]) -> Result<Progress, RolloutError> {
    serde_json::from_slice(bytes).map_err(|e| {
        RolloutError::Store(format!(
            "`{}` does not hold a rollout's progress: {e}",
            progress_key(fleet)
        ))
    })
}

fn save_progress(etcd: &Etcd, progress: &Progress) -> Result<(), RolloutError> {
    let json = serde_json::to_vec(progress).map_err(|e| RolloutError::Store(e.to_string()))?;
    etcd.put(&progress_key(&progress.fleet), &json)
        .map_err(RolloutError::Store)
}

/// Who holds the fleet's controller lease now, if anyone.
pub fn holder(etcd: &Etcd, fleet: &str) -> Result<Option<String>, RolloutError> {
    etcd.get(&controller_key(fleet))
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .map_err(RolloutError::Store)
}

/// The controller's lease: taken only when no other controller holds it, renewed by a thread
/// until dropped.
struct Lease {
    etcd: Etcd,
    id: i64,
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn take(etcd: &Etcd, fleet: &str, who: &str) -> Result<Lease, RolloutError> {
        bell_store::check_name("fleet", fleet)
            .map_err(|message| refused(message, Remedy::RenameFleet))?;
        let id = etcd.grant_lease(LEASE_TTL).map_err(RolloutError::Store)?;
        let key = controller_key(fleet);
        let put = [Op::PutWithLease(&key, who.as_bytes(), id)];
        let mut taken = etcd
            .put_if_version(&key, 0, &put)
            .map_err(RolloutError::Store)?;
        if !taken {
            // A controller's record is bound to its lease and goes with it; one bound to no
            // lease (written by hand, or by a host) is no controller and is taken over.
            let (version, held_by) = etcd.get_lease(&key).map_err(RolloutError::Store)?;
            if held_by == 0 {
                taken = etcd
                    .put_if_version(&key, version, &put)
                    .map_err(RolloutError::Store)?;
            }
        }
        if !taken {
            let _ = etcd.revoke_lease(id);
            return Err(RolloutError::Busy {
                fleet: fleet.to_string(),
                holder: holder(etcd, fleet)?.unwrap_or_else(|| "it just let go".to_string()),
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = {
            let (etcd, stop, lost) = (etcd.clone(), Arc::clone(&stop), Arc::clone(&lost));
            std::thread::spawn(move || {
                let every = Duration::from_secs(LEASE_TTL) / 4;
                let mut last = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if last.elapsed() < every {
                        continue;
                    }
                    last = Instant::now();
                    // An error is a member that does not answer; the next round tries again,
                    // and a lease that lapsed meanwhile says so.
                    if let Ok(false) = etcd.keep_alive(id) {
                        lost.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            })
        };
        Ok(Lease {
            etcd: etcd.clone(),
            id,
            stop,
            lost,
            renewer: Some(renewer),
        })
    }

    fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// Lets go now (dropping does the same).
    fn release(self) {}
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        let _ = self.etcd.revoke_lease(self.id);
    }
}

/// A build output's release.json.
pub fn read_target(out: &Path) -> Result<Release, RolloutError> {
    let path = out.join(bell_bundle::RELEASE_FILE);
    let bytes = std::fs::read(&path).map_err(|e| {
        refused(
            format!(
                "cannot read {} ({e}): is it a build output?",
                path.display()
            ),
            Remedy::Build,
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        refused(
            format!("{} is not a release: {e}", path.display()),
            Remedy::Build,
        )
    })
}

/// A refusal and what puts it right.
pub(super) fn refused(message: String, remedy: Remedy) -> RolloutError {
    RolloutError::Refused { message, remedy }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn now() -> u64 {
    now_ms() / 1000
}

mod controller;
mod failpoint;
pub mod history;
mod remedy;
mod trusted;
mod waiting;

pub use waiting::{judge, note_progress, Judged, Since};

#[cfg(test)]
mod tests;

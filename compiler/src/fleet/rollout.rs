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
use super::signing::{self, SigningKey};
use super::status::{self, HostState};
use super::witness::Witness;
use crate::emit::releases;
use crate::review::diff::short;
use bell_bundle::{Release, ReleaseHost};
use bell_store::etcd::Op;
use bell_store::{Etcd, HostView, Store};
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
/// 1,000-host rollout, see the README).
pub const POLL: Duration = Duration::from_millis(250);

pub fn progress_key(fleet: &str) -> String {
    format!("/bell/{fleet}/rollout/progress")
}

/// Where an operator's pause of the fleet's rollout is (`bellc rollout --pause`).
pub fn pause_key(fleet: &str) -> String {
    format!("/bell/{fleet}/rollout/paused")
}

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

pub fn controller_key(fleet: &str) -> String {
    format!("/bell/{fleet}/rollout/controller")
}

#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("{0}")]
    Store(String),
    #[error("a rollout controller for fleet `{fleet}` is running already ({holder})")]
    Busy { fleet: String, holder: String },
    #[error("{0}")]
    Refused(String),
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
        short(store)
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
    pub wave_times: Vec<super::history::WaveTimes>,
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
}

/// How a run ended (errors aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done { release: String },
    Halted(Halt),
    Aborted { release: String },
}

impl Controller<'_> {
    fn store(&self) -> Store {
        Store::Etcd(self.etcd.clone())
    }

    /// Rolls `target` (OUT's release) out, or with `resume` continues the rollout of it that
    /// OUT's record and the store hold.
    pub fn rollout(
        &self,
        target: &Release,
        resume: bool,
        watch: &mut dyn FnMut(&Event),
    ) -> Result<Outcome, RolloutError> {
        let started = Instant::now();
        let fleet = &target.fleet;
        let lease = Lease::take(&self.etcd, fleet, &self.who)?;
        let record = self.load_record(fleet)?;
        let existing = readable_progress(&self.etcd, fleet)?;
        if let (None, false, Some(p)) = (&record, resume, &existing) {
            if !p.phase.finished() {
                // A rollout this OUT never recorded (begun by an older bellc, or from another
                // directory): the store's word stops a new one, and nothing more.
                return Err(RolloutError::Refused(format!(
                    "the store holds a rollout of release {} that stands {}, which OUT does \
                     not record: finish it with the build output it was started from",
                    short(&p.target),
                    p.phase.as_str()
                )));
            }
        }
        let (mut record, mut progress) = match record {
            Some(r) if !r.stage.finished() => {
                if !resume {
                    return Err(RolloutError::Refused(format!(
                        "the rollout of release {} is {} (OUT's signed record, {}): continue \
                         it with `--resume`, or take it back with `--abort`",
                        short(&r.target),
                        r.stage.as_str(),
                        record::path(&self.out, fleet).display()
                    )));
                }
                if r.stage == Stage::Aborting {
                    return Err(RolloutError::Refused(format!(
                        "the rollout of release {} is being aborted: finish that with `--abort`",
                        short(&r.target)
                    )));
                }
                if r.target != target.version {
                    return Err(RolloutError::Refused(format!(
                        "the rollout OUT's record holds is of release {}, but OUT's release.json \
                         is release {}: resume it with the build output it was started from, or \
                         `--abort` it",
                        short(&r.target),
                        short(&target.version)
                    )));
                }
                let progress = self.agreeing_progress(&r, existing)?;
                (r, progress)
            }
            Some(r) if resume && r.target == target.version && r.stage == Stage::Done => {
                return Ok(Outcome::Done { release: r.target });
            }
            _ if resume => {
                return Err(RolloutError::Refused(format!(
                    "OUT holds no unfinished rollout of fleet `{fleet}` to resume; start one \
                     without `--resume`"
                )))
            }
            record => {
                let (record, mut progress) = self.begin(target, record.as_ref())?;
                progress.started_by = Some(self.by.clone());
                (record, progress)
            }
        };
        progress.phase = Phase::Running;
        progress.halted = None;
        save_progress(&self.etcd, &progress)?;
        let from = self.previous_release(&record)?;
        let n = progress.waves.len();
        let since_start = now();
        // Never a wave below the last one given: its release would take the later waves'
        // hosts back (the store's count of converged waves is not to be trusted for that).
        progress.converged = progress
            .converged
            .max(record.given_waves.saturating_sub(1))
            .min(n);
        while progress.converged < n {
            let k = progress.converged;
            let mut release = wave_release(target, from.as_ref(), &progress.waves, k, &record.held);
            let resumed = record.given_waves > k;
            let given = record.given.as_ref().map(|g| g.version.as_str());
            if resumed && given == Some(release.version.as_str()) {
                // Signed and recorded before the controller died: named again in the store
                // as it was signed, not signed anew.
                if progress.published.as_deref() != Some(release.version.as_str()) {
                    self.name_in_store(&mut progress, &release)?;
                }
            } else {
                self.wait_while_paused(&lease, &mut progress, k + 1, watch)?;
                if self.leave_out_held(&mut record, &mut progress, k, watch)? {
                    release = wave_release(target, from.as_ref(), &progress.waves, k, &record.held);
                }
                record.given_waves = k + 1;
                // OUT's release.json stays the build's while held hosts keep it from being
                // what the fleet runs: rolling OUT out again, once they are unheld, moves them.
                let current = k + 1 == n && record.held.is_empty();
                self.give(&mut record, &mut progress, &release, current)?;
            }
            progress.given = k + 1;
            if progress.wave_times.len() <= k {
                progress.wave_times.resize(k + 1, Default::default());
                progress.wave_times[k].started_at = now();
            }
            save_progress(&self.etcd, &progress)?;
            watch(&Event::WaveStarted {
                wave: k + 1,
                waves: n,
                release: release.version.clone(),
                hosts: progress.waves[k].clone(),
                resumed,
            });
            // A failure counts when its report was written after the wave's release was
            // published, by a pull that began after it; after a resume, by a pull that began
            // after the resume (one from before may have run before a fix).
            let since = Since {
                revision: progress.published_revision,
                started_at: if resumed {
                    progress.published_at.max(since_start + 1)
                } else {
                    progress.published_at
                },
            };
            let wave = WaveRef {
                number: k + 1,
                of: n,
                hosts: &progress.waves[k],
            };
            match self.wait(&lease, &release, &wave, &since, watch)? {
                None => {
                    progress.converged = k + 1;
                    progress.updated_at = now();
                    if let Some(times) = progress.wave_times.get_mut(k) {
                        times.converged_at = Some(progress.updated_at);
                    }
                    save_progress(&self.etcd, &progress)?;
                }
                Some(halt) => {
                    progress.phase = Phase::Halted;
                    progress.halted = Some(halt.clone());
                    progress.updated_at = now();
                    save_progress(&self.etcd, &progress)?;
                    self.file_history(&progress, watch);
                    watch(&Event::Halted {
                        wave: halt.wave,
                        reason: halt.reason.clone(),
                        hosts: halt.hosts.clone(),
                    });
                    return Ok(Outcome::Halted(halt));
                }
            }
        }
        if n == 0 {
            // Nothing changes for any host (or only held ones would): the store still names
            // the build's release (held hosts on their bundle), so that status compares
            // against it and hosts take its new sequence.
            let release = wave_release(target, from.as_ref(), &[], 0, &record.held);
            if record.given.as_ref().map(|g| g.version.as_str()) != Some(release.version.as_str()) {
                let current = record.held.is_empty();
                self.give(&mut record, &mut progress, &release, current)?;
            }
        }
        record.stage = Stage::Done;
        self.save_record(&record)?;
        progress.phase = Phase::Done;
        progress.updated_at = now();
        save_progress(&self.etcd, &progress)?;
        self.file_history(&progress, watch);
        watch(&Event::Done {
            release: target.version.clone(),
            waves: n,
            hosts: progress.waves.iter().map(Vec::len).sum(),
            elapsed_ms: started.elapsed().as_millis() as u64,
            held: record.held.clone(),
        });
        lease.release();
        Ok(Outcome::Done {
            release: target.version.clone(),
        })
    }

    /// Gives the hosts that a rollout moved their previous bundle back: a newer release with
    /// the old map, waited for as a wave. What "previous" is comes from OUT's signed record,
    /// never from the store.
    pub fn abort(
        &self,
        fleet: &str,
        watch: &mut dyn FnMut(&Event),
    ) -> Result<Outcome, RolloutError> {
        let lease = Lease::take(&self.etcd, fleet, &self.who)?;
        let Some(mut record) = self.load_record(fleet)? else {
            return Err(RolloutError::Refused(format!(
                "OUT records no rollout of fleet `{fleet}` to abort ({} does not exist): an \
                 abort goes back only to what the signing key gave before, which that record \
                 names",
                record::path(&self.out, fleet).display()
            )));
        };
        if record.stage.finished() {
            return Err(RolloutError::Refused(format!(
                "the rollout of release {} is {} already; nothing to abort",
                short(&record.target),
                record.stage.as_str()
            )));
        }
        let existing = readable_progress(&self.etcd, fleet)?;
        let mut progress = self.agreeing_progress(&record, existing)?;
        let Some(from) = self.previous_release(&record)? else {
            return Err(RolloutError::Refused(format!(
                "the rollout of release {} was the fleet's first: there is no earlier \
                 release to go back to",
                short(&record.target)
            )));
        };
        let target = self.kept_release(&record.target, None)?;
        let moved = record.moved();
        let release = abort_release(&target, &from, &moved);
        let given = record.given.as_ref().map(|g| g.version.as_str());
        if record.stage != Stage::Aborting || given != Some(release.version.as_str()) {
            record.stage = Stage::Aborting;
            self.give(&mut record, &mut progress, &release, false)?;
        } else if progress.published.as_deref() != Some(release.version.as_str()) {
            self.name_in_store(&mut progress, &release)?;
        }
        progress.phase = Phase::Aborting;
        progress.halted = None;
        progress.updated_at = now();
        save_progress(&self.etcd, &progress)?;
        let back: Vec<String> = moved
            .into_iter()
            .filter(|h| from.hosts.contains_key(h))
            .collect();
        watch(&Event::AbortStarted {
            release: release.version.clone(),
            hosts: back.clone(),
        });
        let wave = WaveRef {
            number: 0,
            of: 0,
            hosts: &back,
        };
        let since = Since {
            revision: progress.published_revision,
            started_at: progress.published_at,
        };
        if let Some(halt) = self.wait(&lease, &release, &wave, &since, watch)? {
            progress.halted = Some(halt.clone());
            progress.updated_at = now();
            save_progress(&self.etcd, &progress)?;
            self.file_history(&progress, watch);
            watch(&Event::Halted {
                wave: 0,
                reason: halt.reason.clone(),
                hosts: halt.hosts.clone(),
            });
            return Ok(Outcome::Halted(halt));
        }
        record.stage = Stage::Aborted;
        self.save_record(&record)?;
        progress.phase = Phase::Aborted;
        progress.updated_at = now();
        save_progress(&self.etcd, &progress)?;
        self.file_history(&progress, watch);
        watch(&Event::Aborted {
            release: release.version.clone(),
            hosts: back.len(),
        });
        lease.release();
        Ok(Outcome::Aborted {
            release: release.version,
        })
    }

    /// A new rollout of `target`: the waves of its hosts whose bundle changes from the
    /// release the key gave the fleet last, recorded (signed) in OUT before anything is given.
    fn begin(
        &self,
        target: &Release,
        record: Option<&Record>,
    ) -> Result<(Record, Progress), RolloutError> {
        let base = self.base(target, record)?;
        let old: BTreeMap<String, String> = base
            .as_ref()
            .map(|b| {
                b.hosts
                    .iter()
                    .map(|(h, e)| (h.clone(), e.bundle.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut waves = changed_waves(target, &old);
        // Held hosts are in no wave: every release of this rollout keeps them where they are.
        // The holds come from the store, which is not trusted; a forged one only leaves a host
        // behind.
        let held = self.take_held(&target.fleet, &mut waves)?;
        waves.retain(|w| !w.is_empty());
        let from = base.map(|b| Given {
            version: b.version,
            sequence: b.sequence,
        });
        let record = Record {
            format: record::RECORD_FORMAT,
            fleet: target.fleet.clone(),
            target: target.version.clone(),
            from: from.clone(),
            waves: waves.clone(),
            given_waves: 0,
            given: from.clone(),
            stage: Stage::Rolling,
            held,
        };
        self.save_record(&record)?;
        let progress = Progress::of(&record);
        Ok((record, progress))
    }

    /// The release a new rollout of `target` starts from: the one OUT's signed record says the
    /// key gave the fleet last (or, in an OUT without a record, the newest release OUT keeps
    /// signed by the key). The store's current release must be that one, or a newer release
    /// the key signed (published with `bellc publish`); anything else is refused, because
    /// wave releases copy the base's entries and are signed anew.
    fn base(
        &self,
        target: &Release,
        record: Option<&Record>,
    ) -> Result<Option<Release>, RolloutError> {
        let fleet = &target.fleet;
        let (floor, whence) = match record {
            Some(r) => (
                r.given
                    .as_ref()
                    .map(|g| self.kept_release(&g.version, g.sequence))
                    .transpose()?,
                format!(
                    "OUT's signed record {}",
                    record::path(&self.out, fleet).display()
                ),
            ),
            None => (
                self.newest_signed(target)?,
                "the newest release OUT keeps signed".to_string(),
            ),
        };
        let published = self.store().published(fleet).map_err(RolloutError::Store)?;
        let Some(published) = published else {
            // An empty store (a new cluster): the key's word is all there is.
            return Ok(floor);
        };
        if floor
            .as_ref()
            .is_some_and(|f| f.version == published.version)
        {
            return Ok(floor);
        }
        let newer = bell_bundle::is_bundle_id(&published.version)
            .then(|| self.kept_release(&published.version, None).ok())
            .flatten()
            .filter(|p| match &floor {
                None => true,
                Some(f) => self.key.is_some() && p.sequence > f.sequence,
            });
        if let Some(newer) = newer {
            return Ok(Some(newer));
        }
        let floor_name = floor
            .as_ref()
            .map_or("none (the fleet's first rollout)".to_string(), |f| {
                format!("release {}", short(&f.version))
            });
        Err(RolloutError::Disagrees {
            fleet: fleet.clone(),
            store: published.version.clone(),
            ours: floor_name,
            whence,
            fix: floor.map(|f| f.version),
        })
    }

    /// The newest release OUT keeps that the key signed for `target`'s fleet, `target` aside.
    fn newest_signed(&self, target: &Release) -> Result<Option<Release>, RolloutError> {
        if self.key.is_none() {
            return Ok(None);
        }
        let kept = releases::list(&self.out).map_err(|e| RolloutError::Refused(e.to_string()))?;
        for candidate in kept.iter().rev() {
            if candidate.version == target.version || !candidate.signed {
                continue;
            }
            if let Ok(release) = self.kept_release(&candidate.version, None) {
                if release.fleet == target.fleet {
                    return Ok(Some(release));
                }
            }
        }
        Ok(None)
    }

    /// The store's progress of the rollout `record` holds: it must be of the same rollout;
    /// when the store lost it, it is made again from the record.
    fn agreeing_progress(
        &self,
        record: &Record,
        progress: Option<Progress>,
    ) -> Result<Progress, RolloutError> {
        let from = record.from.as_ref().map(|g| g.version.clone());
        match progress {
            Some(p) if p.target == record.target && p.from == from && p.waves == record.waves => {
                Ok(Progress {
                    given: record.given_waves,
                    ..p
                })
            }
            Some(p) => Err(RolloutError::Refused(format!(
                "the store's rollout progress is of release {} from {}, but OUT's signed record \
                 is of release {} from {}: the store was written by something other than this \
                 controller, or OUT is not the directory the rollout began in; nothing was \
                 signed or published",
                short(&p.target),
                p.from.as_deref().map_or("nothing", short),
                short(&record.target),
                from.as_deref().map_or("nothing", short),
            ))),
            None => Ok(Progress::of(record)),
        }
    }

    fn previous_release(&self, record: &Record) -> Result<Option<Release>, RolloutError> {
        record
            .from
            .as_ref()
            .map(|g| self.kept_release(&g.version, g.sequence))
            .transpose()
    }

    fn load_record(&self, fleet: &str) -> Result<Option<Record>, RolloutError> {
        record::load(&self.out, fleet, self.key).map_err(RolloutError::from)
    }

    fn save_record(&self, record: &Record) -> Result<(), RolloutError> {
        record::save(&self.out, record, self.key).map_err(RolloutError::from)
    }

    /// A release OUT keeps under `releases/`, signed by the key when there is one (and with
    /// a sequence no older than `at_least`, when given).
    fn kept_release(&self, version: &str, at_least: Option<u64>) -> Result<Release, RolloutError> {
        if !bell_bundle::is_bundle_id(version) {
            return Err(RolloutError::Refused(format!(
                "`{version}` is named as a release, which is not a version"
            )));
        }
        let path = self
            .out
            .join(bell_bundle::RELEASES_DIR)
            .join(format!("{version}.json"));
        let bytes = std::fs::read(&path).map_err(|e| {
            RolloutError::Refused(format!(
                "release {} is not kept in {} ({e}): the served directory must keep the \
                 release the fleet runs now (copy each build output over it; `bellc releases` \
                 lists what it keeps)",
                short(version),
                self.out.display()
            ))
        })?;
        if let Some(key) = self.key {
            let signature_path = releases::signature_path(&path);
            let signature = std::fs::read_to_string(&signature_path).map_err(|e| {
                RolloutError::Refused(format!(
                    "{} has no signature ({e}): the controller builds only on releases its \
                     key signed",
                    path.display()
                ))
            })?;
            key.verify(&bytes, &signature).map_err(|reason| {
                RolloutError::Refused(format!(
                    "{} {reason}: the controller builds only on releases its key signed",
                    path.display()
                ))
            })?;
        }
        let release: Release = serde_json::from_slice(&bytes).map_err(|e| {
            RolloutError::Refused(format!("{} is not a release: {e}", path.display()))
        })?;
        if release.version != version {
            return Err(RolloutError::Refused(format!(
                "{} holds release {}, not {}",
                path.display(),
                short(&release.version),
                short(version)
            )));
        }
        if let (Some(floor), Some(key)) = (at_least, self.key) {
            if release.sequence.unwrap_or(0) < floor {
                return Err(RolloutError::Refused(format!(
                    "{} has sequence {}, older than the {floor} OUT's record says key {} gave: \
                     an older copy was put in its place",
                    path.display(),
                    release.sequence.unwrap_or(0),
                    key.key_id
                )));
            }
        }
        Ok(release)
    }

    /// Gives `release` to the fleet, in this order: signed into OUT (as release.json too,
    /// with `current`), recorded as what the key gave last, named in the store. A controller
    /// that dies between two steps finds the record ahead of the store, never behind it.
    fn give(
        &self,
        record: &mut Record,
        progress: &mut Progress,
        release: &Release,
        current: bool,
    ) -> Result<(), RolloutError> {
        record.given = Some(self.sign(release, current)?);
        self.save_record(record)?;
        self.name_in_store(progress, release)
    }

    /// Makes `release` (signed into OUT already) the store's desired release, and notes in
    /// `progress` when: reports written after that revision can be about it.
    fn name_in_store(
        &self,
        progress: &mut Progress,
        release: &Release,
    ) -> Result<(), RolloutError> {
        progress.published_revision = self.store().publish(release).map_err(RolloutError::Store)?;
        progress.published = Some(release.version.clone());
        progress.published_at = now();
        Ok(())
    }

    /// Signs `release` into OUT (as release.json too, with `current`); what was signed.
    fn sign(&self, release: &Release, current: bool) -> Result<Given, RolloutError> {
        let signed = signing::keep_release(
            &self.out,
            release,
            self.key,
            self.expires_in,
            now_ms(),
            current,
        )?;
        Ok(Given {
            version: signed.version,
            sequence: self.key.map(|_| signed.sequence),
        })
    }

    /// Waits until every host of `wave` reports up to date and healthy on `release`. `None`
    /// when they do; the halt when one fails (reported [`Since`]) or the wave's time is up.
    /// Files the rollout as it ended or halted in the history; a store that will not take it
    /// is said, and the rollout's outcome stands.
    fn file_history(&self, progress: &Progress, watch: &mut dyn FnMut(&Event)) {
        if let Err(error) = super::history::file(&self.etcd, progress) {
            watch(&Event::StoreTrouble {
                error: format!("the rollout's history was not filed: {error}"),
            });
        }
    }

    /// Before a wave is given: while the rollout is paused, waits (saying so once, and in the
    /// store's progress), keeping its lease; a store it cannot read is waited out too.
    fn wait_while_paused(
        &self,
        lease: &Lease,
        progress: &mut Progress,
        wave: usize,
        watch: &mut dyn FnMut(&Event),
    ) -> Result<(), RolloutError> {
        let mut told = false;
        loop {
            if lease.lost() {
                return Err(RolloutError::LostLease);
            }
            let paused = match self.etcd.get(&pause_key(&progress.fleet)) {
                Ok(raw) => raw.map(|raw| Pause::parse(&raw)),
                Err(error) => {
                    watch(&Event::StoreTrouble { error });
                    std::thread::sleep(self.poll);
                    continue;
                }
            };
            let Some(pause) = paused else {
                if told {
                    progress.phase = Phase::Running;
                    progress.paused = None;
                    progress.updated_at = now();
                    save_progress(&self.etcd, progress)?;
                    watch(&Event::Continued { wave });
                }
                return Ok(());
            };
            if !told {
                told = true;
                progress.phase = Phase::Paused;
                progress.paused = Some(pause.clone());
                progress.updated_at = now();
                save_progress(&self.etcd, progress)?;
                watch(&Event::Paused {
                    wave,
                    by: pause.by,
                    reason: pause.reason,
                    since: pause.since,
                });
            }
            std::thread::sleep(self.poll);
        }
    }

    /// Takes the hosts an operator holds now out of `waves`, and returns them, sorted.
    fn take_held(
        &self,
        fleet: &str,
        waves: &mut [Vec<String>],
    ) -> Result<Vec<String>, RolloutError> {
        let holds = bell_store::hold::list(&self.etcd, fleet).map_err(RolloutError::Store)?;
        let mut held = Vec::new();
        for wave in waves {
            wave.retain(|host| {
                let keep = !holds.contains_key(host);
                if !keep {
                    held.push(host.clone());
                }
                keep
            });
        }
        held.sort();
        Ok(held)
    }

    /// Leaves out of waves `k` and later the hosts held since the rollout began (a hold
    /// placed while it ran, or while it was paused: the usual moment): they join
    /// `record.held`, on their bundle in every release still to give. A wave they leave
    /// empty stays, given and converged at once, so that the last release is still the
    /// build's. Whether any host was left out.
    fn leave_out_held(
        &self,
        record: &mut Record,
        progress: &mut Progress,
        k: usize,
        watch: &mut dyn FnMut(&Event),
    ) -> Result<bool, RolloutError> {
        let left_out = self.take_held(&record.fleet, &mut record.waves[k..])?;
        if left_out.is_empty() {
            return Ok(false);
        }
        record.held.extend(left_out.iter().cloned());
        record.held.sort();
        record.held.dedup();
        progress.waves = record.waves.clone();
        progress.held = record.held.clone();
        progress.updated_at = now();
        save_progress(&self.etcd, progress)?;
        watch(&Event::LeftOut {
            wave: k + 1,
            hosts: left_out,
        });
        Ok(true)
    }

    fn wait(
        &self,
        lease: &Lease,
        release: &Release,
        wave: &WaveRef,
        since: &Since,
        watch: &mut dyn FnMut(&Event),
    ) -> Result<Option<Halt>, RolloutError> {
        let began = Instant::now();
        let mut told: BTreeSet<String> = BTreeSet::new();
        let mut told_rebooting: BTreeSet<(String, String)> = BTreeSet::new();
        // What the store said last: a poll that cannot read it judges by that again.
        let mut views: BTreeMap<String, HostView> = BTreeMap::new();
        // Each report is checked against the identity the release gives its host, and
        // against what was seen signed before (a report put back is refused).
        let identities = bell_store::identities_of(release);
        let mut witness = Witness::open(&release.fleet).map_err(RolloutError::Store)?;
        loop {
            if lease.lost() {
                return Err(RolloutError::LostLease);
            }
            match self.store().load_fleet(&release.fleet, &identities) {
                Ok(mut read) => {
                    witness.judge(release, &mut read);
                    if let Err(error) = witness.save() {
                        watch(&Event::StoreTrouble { error });
                    }
                    views = read;
                }
                Err(error) => watch(&Event::StoreTrouble { error }),
            }
            let judged = judge(release, wave.hosts, &views, since, now());
            for host in &judged.converged {
                if told.insert(host.clone()) {
                    watch(&Event::HostConverged {
                        wave: wave.number,
                        host: host.clone(),
                    });
                }
            }
            let rebooting: Vec<&Trouble> = judged
                .waiting
                .iter()
                .filter(|t| t.state == "rebooting" || t.state == "reboot-required")
                .collect();
            for t in &rebooting {
                if told_rebooting.insert((t.host.clone(), t.state.clone())) {
                    watch(&Event::HostRebooting {
                        wave: wave.number,
                        host: t.host.clone(),
                        state: t.state.clone(),
                        detail: t.detail.clone(),
                    });
                }
            }
            watch(&Event::Tick {
                wave: wave.number,
                waves: wave.of,
                converged: judged.converged.len(),
                rebooting: rebooting.len(),
                hosts: wave.hosts.len(),
                elapsed: began.elapsed(),
            });
            if !judged.failed.is_empty() {
                for t in &judged.failed {
                    watch(&Event::HostFailed {
                        wave: wave.number,
                        host: t.host.clone(),
                        state: t.state.clone(),
                        detail: t.detail.clone(),
                    });
                }
                let count = judged.failed.len();
                return Ok(Some(Halt {
                    wave: wave.number,
                    reason: format!(
                        "{count} host{} of {} failed",
                        if count == 1 { "" } else { "s" },
                        wave.name()
                    ),
                    hosts: judged.failed,
                }));
            }
            if judged.converged.len() == wave.hosts.len() {
                return Ok(None);
            }
            if began.elapsed() >= self.wave_timeout {
                return Ok(Some(Halt {
                    wave: wave.number,
                    reason: format!(
                        "{} did not converge within {} s ({} of {} hosts up to date)",
                        wave.name(),
                        self.wave_timeout.as_secs(),
                        judged.converged.len(),
                        wave.hosts.len()
                    ),
                    hosts: judged.waiting,
                }));
            }
            std::thread::sleep(self.poll);
        }
    }
}

struct WaveRef<'h> {
    /// 1-based; 0 is the abort's wait.
    number: usize,
    of: usize,
    hosts: &'h [String],
}

impl WaveRef<'_> {
    fn name(&self) -> String {
        if self.number == 0 {
            "the abort".to_string()
        } else {
            format!("wave {} of {}", self.number, self.of)
        }
    }
}

/// The hosts of a wave, sorted into converged, failed and still waiting.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Judged {
    pub converged: Vec<String>,
    /// Failed or unhealthy since the wave's release: the rollout halts.
    pub failed: Vec<Trouble>,
    /// Neither: with why, for when the wave's time is up.
    pub waiting: Vec<Trouble>,
}

/// Which reports can be about a wave's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since {
    /// Written after this etcd revision (the release's publication).
    pub revision: i64,
    /// By a run that began at or after this time (unix seconds).
    pub started_at: u64,
}

/// Where each of `hosts` stands against `release`: up to date (or deferred) on its bundle is
/// converged; a failure or failing probe reported [`Since`] the wave's release is a failure of
/// this wave. An older one (from before the host could see the release, or a run that
/// failed the same way again and so wrote nothing new) waits for the wave's time to be up.
pub fn judge(
    release: &Release,
    hosts: &[String],
    views: &BTreeMap<String, HostView>,
    since: &Since,
    now: u64,
) -> Judged {
    let rows = status::fleet_status(release, views, now, None);
    let by_host: BTreeMap<&str, &status::HostStatus> =
        rows.hosts.iter().map(|h| (h.host.as_str(), h)).collect();
    let mut judged = Judged::default();
    for host in hosts {
        let row = by_host.get(host.as_str());
        let state = row.map(|r| r.state);
        // A report that cannot be checked counts for nothing where the host has an identity
        // to check it with, or every host must have one.
        let must_sign = release.identities_required
            || release
                .hosts
                .get(host)
                .is_some_and(|h| h.identity.is_some());
        let unverified = row.filter(|r| must_sign && r.flags.contains(&status::Flag::Unverified));
        if let Some(row) = unverified {
            judged.waiting.push(Trouble {
                host: host.clone(),
                state: "unverified".to_string(),
                detail: row.unverified.clone(),
            });
            continue;
        }
        // A host that reboots itself is done when it is back from its reboot: going down
        // for one, or waiting for its window or a slot to reboot in, it is on its way.
        let reboots = release.hosts.get(host).is_some_and(|h| h.reboots);
        if let Some(row) = row.filter(|r| {
            matches!(r.state, HostState::UpToDate | HostState::Deferred)
                && (r.rebooting.is_some() || (reboots && !r.reboot_required.is_empty()))
        }) {
            judged.waiting.push(Trouble {
                host: host.clone(),
                state: if row.rebooting.is_some() {
                    "rebooting"
                } else {
                    "reboot-required"
                }
                .to_string(),
                detail: row.detail.clone(),
            });
            continue;
        }
        if matches!(state, Some(HostState::UpToDate | HostState::Deferred)) {
            judged.converged.push(host.clone());
            continue;
        }
        let view = views.get(host);
        let applied = view.and_then(|v| v.by_command.get("apply").or(v.report.as_ref()));
        let applied_at = applied.map(|r| r.finished_at);
        let written_after = match view.and_then(|v| v.revisions.get("apply")) {
            Some(revision) => *revision > since.revision,
            // A directory store keeps no revisions: the times must do.
            None => applied_at.is_some_and(|at| at >= since.started_at),
        };
        let recent = written_after && applied.is_some_and(|r| r.started_at >= since.started_at);
        let detail = row.and_then(|r| r.detail.clone());
        let trouble = |state: &str| Trouble {
            host: host.clone(),
            state: state.to_string(),
            detail: detail.clone(),
        };
        match state {
            Some(HostState::Failed) if recent => judged.failed.push(trouble("failed")),
            Some(HostState::Unhealthy) if recent => judged.failed.push(trouble("unhealthy")),
            // A host that fails the same way again files nothing new (a report that says
            // nothing new is not written), so this failure may be from before the wave or
            // the resume, or from a run since: told as such, it halts the wave at its time.
            Some(HostState::Failed) => judged.waiting.push(Trouble {
                detail: Some(format!(
                    "the same failure as before the wave began (nothing new reported since){}",
                    detail
                        .as_deref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                )),
                ..trouble("failed")
            }),
            Some(HostState::Unhealthy) => judged.waiting.push(trouble("unhealthy")),
            Some(HostState::Unreadable) => judged.waiting.push(trouble("unreadable")),
            // Its own word is not in the store: the forgery is left out, and what it last
            // said for itself stands (it waits for the host's next report, never converges).
            Some(HostState::Forged) => judged.waiting.push(trouble("forged")),
            // Alive and pulling, but its group's slots are held (by a host that is not
            // healthy yet): it writes nothing new while it waits, and is not silent.
            _ if row.is_some_and(|r| r.flags.contains(&status::Flag::Waiting))
                && view.and_then(|v| v.alive) != Some(false) =>
            {
                judged.waiting.push(trouble("waiting"))
            }
            _ if !recent || view.and_then(|v| v.alive) == Some(false) => {
                judged.waiting.push(Trouble {
                    host: host.clone(),
                    state: "silent".to_string(),
                    detail: Some(match applied_at {
                        _ if view.and_then(|v| v.alive) == Some(false) => {
                            "its liveness lease lapsed".to_string()
                        }
                        None => "never reported".to_string(),
                        Some(at) => format!(
                            "nothing reported since the wave began (last {} s before)",
                            since.started_at.saturating_sub(at)
                        ),
                    }),
                })
            }
            _ => judged.waiting.push(trouble("pending")),
        }
    }
    judged
}

/// Tells an unfinished rollout in a fleet's status (its header and JSON). Compared with the
/// store's (wave) release rather than the rollout's target, the hosts of waves not given yet
/// look up to date; they are pending on the target, waiting for their wave.
pub fn note_progress(fleet: &mut status::FleetStatus, p: &Progress) {
    if p.phase.finished() {
        return;
    }
    let note = status::RolloutNote {
        target: p.target.clone(),
        phase: p.phase.as_str().to_string(),
        wave: p.given,
        waves: p.waves.len(),
        reason: match (&p.halted, &p.paused) {
            (Some(halt), _) => Some(halt.reason.clone()),
            (None, Some(pause)) => Some(format!(
                "paused by {} since {}",
                bell_store::hold::one_line(&pause.by),
                bell_bundle::utc(pause.since)
            )),
            (None, None) => None,
        },
    };
    let later: Vec<(usize, Vec<String>)> = if fleet.version == p.target {
        // Compared with the target already: the later waves' hosts show as pending.
        Vec::new()
    } else {
        p.waves
            .iter()
            .enumerate()
            .skip(p.given)
            .map(|(i, hosts)| (i + 1, hosts.clone()))
            .collect()
    };
    fleet.mark_later_waves(note, &later);
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
        bell_store::check_name("fleet", fleet).map_err(RolloutError::Refused)?;
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
        RolloutError::Refused(format!(
            "cannot read {} ({e}): is it a build output?",
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| RolloutError::Refused(format!("{} is not a release: {e}", path.display())))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn release(hosts: &[(&str, &str)], waves: &[&[&str]]) -> Release {
        let hosts: BTreeMap<String, ReleaseHost> = hosts
            .iter()
            .map(|(h, b)| {
                (
                    h.to_string(),
                    ReleaseHost {
                        bundle: b.repeat(64),
                        address: None,
                        labels: Default::default(),
                        identity: None,
                        secrets: None,
                        snapshots: Default::default(),
                        reboots: false,
                    },
                )
            })
            .collect();
        Release {
            format: bell_bundle::FORMAT,
            fleet: "f".into(),
            version: Release::compute_version(&hosts),
            hosts,
            waves: waves
                .iter()
                .map(|w| w.iter().map(|h| h.to_string()).collect())
                .collect(),
            sequence: None,
            expires: None,
            rollout: None,
            identities_required: false,
            assignments: Vec::new(),
        }
    }

    fn view(bundle: &str, result: bell_store::State, at: u64, alive: bool) -> HostView {
        let report = bell_store::Report {
            format: bell_store::REPORT_FORMAT,
            host: String::new(),
            fleet: "f".into(),
            command: "apply".into(),
            result,
            release: None,
            bundle: Some(bundle.repeat(64)),
            started_at: at,
            finished_at: at,
            resources: Vec::new(),
            drift: Vec::new(),
            error: None,
            signature: None,
            status: BTreeMap::from([("apply".to_string(), result)]),
            health: Vec::new(),
            snapshots: Default::default(),
            reboot_required: Vec::new(),
            rebooting: None,
            since: None,
            attempts: None,
            sequence: None,
            signer: None,
            proof: None,
        };
        let report = Arc::new(report);
        HostView {
            status: report.status.clone(),
            by_command: BTreeMap::from([("apply".to_string(), Arc::clone(&report))]),
            report: Some(report),
            alive: Some(alive),
            revisions: BTreeMap::new(),
            ..HostView::default()
        }
    }

    #[test]
    fn a_host_that_reboots_itself_converges_once_it_is_back() {
        use bell_store::State::Success;
        let mut wave = release(
            &[("down", "2"), ("due", "2"), ("back", "2"), ("by-hand", "2")],
            &[],
        );
        for host in ["down", "due", "back"] {
            wave.hosts.get_mut(host).unwrap().reboots = true;
        }
        let needs = |mut v: HostView, rebooting: Option<&str>| {
            let report = Arc::make_mut(v.report.as_mut().unwrap());
            report.reboot_required = vec!["kernel-args:hp: not yet".into()];
            report.rebooting = rebooting.map(str::to_string);
            let report = v.report.clone().unwrap();
            v.by_command.insert("apply".into(), report);
            v
        };
        let views = BTreeMap::from([
            (
                "down".to_string(),
                needs(view("2", Success, 100, true), Some("reboot")),
            ),
            (
                "due".to_string(),
                needs(view("2", Success, 100, true), None),
            ),
            ("back".to_string(), view("2", Success, 100, true)),
            // Its bundle does not reboot it: the flag is for whoever reboots it by hand.
            (
                "by-hand".to_string(),
                needs(view("2", Success, 100, true), None),
            ),
        ]);
        let hosts: Vec<String> = ["down", "due", "back", "by-hand"]
            .map(String::from)
            .to_vec();
        let since = Since {
            revision: 8,
            started_at: 100,
        };
        let judged = judge(&wave, &hosts, &views, &since, 101);
        assert_eq!(judged.converged, ["back", "by-hand"]);
        assert!(judged.failed.is_empty());
        let states: Vec<(&str, &str)> = judged
            .waiting
            .iter()
            .map(|t| (t.host.as_str(), t.state.as_str()))
            .collect();
        assert_eq!(states, [("down", "rebooting"), ("due", "reboot-required")]);
        assert_eq!(
            judged.waiting[0].detail.as_deref(),
            Some("rebooting (reboot) for: kernel-args:hp: not yet")
        );
    }

    #[test]
    fn a_failure_since_the_wave_began_halts_an_older_one_waits() {
        use bell_store::State::{Failed, Success};
        let wave = release(
            &[
                ("done", "2"),
                ("new", "2"),
                ("old", "2"),
                ("quiet", "2"),
                ("gone", "2"),
                ("again", "2"),
                ("fresh", "2"),
            ],
            &[],
        );
        let views = BTreeMap::from([
            ("done".to_string(), view("2", Success, 100, true)),
            ("new".to_string(), view("1", Failed, 100, true)),
            ("old".to_string(), view("1", Failed, 99, true)),
            ("quiet".to_string(), view("1", Success, 99, true)),
            ("gone".to_string(), view("1", Success, 100, false)),
            // In etcd: written at revision 7, before the release (8), so its time is no proof.
            ("again".to_string(), {
                let mut v = view("1", Failed, 100, true);
                v.revisions.insert("apply".into(), 7);
                v
            }),
            ("fresh".to_string(), {
                let mut v = view("1", Failed, 100, true);
                v.revisions.insert("apply".into(), 9);
                v
            }),
        ]);
        let hosts: Vec<String> = [
            "done", "new", "old", "quiet", "gone", "never", "again", "fresh",
        ]
        .map(String::from)
        .to_vec();
        let since = Since {
            revision: 8,
            started_at: 100,
        };
        let judged = judge(&wave, &hosts, &views, &since, 101);
        assert_eq!(judged.converged, ["done"]);
        let gone = judged.waiting.iter().find(|t| t.host == "gone");
        assert_eq!(
            gone.and_then(|t| t.detail.as_deref()),
            Some("its liveness lease lapsed")
        );
        let states = |list: &[Trouble]| -> Vec<(String, String)> {
            list.iter()
                .map(|t| (t.host.clone(), t.state.clone()))
                .collect()
        };
        assert_eq!(
            states(&judged.failed),
            [
                ("new".into(), "failed".into()),
                ("fresh".into(), "failed".into())
            ]
        );
        assert_eq!(
            states(&judged.waiting),
            [
                ("old".into(), "failed".into()),
                ("quiet".into(), "silent".into()),
                ("gone".into(), "silent".into()),
                ("never".into(), "silent".into()),
                ("again".into(), "failed".into()),
            ]
        );
    }

    #[test]
    fn a_host_waiting_for_a_slot_is_waiting_not_silent() {
        use bell_store::State::Waiting;
        let wave = release(&[("w", "2"), ("gone", "2")], &[]);
        let waiting = |alive: bool| {
            let mut v = view("1", Waiting, 90, alive);
            let mut report = (**v.report.as_ref().unwrap()).clone();
            report.error = Some("waiting for a slot: all 1 of group `a` are held (h1)".into());
            let report = Arc::new(report);
            v.report = Some(Arc::clone(&report));
            v.by_command.insert("apply".into(), report);
            v
        };
        let views = BTreeMap::from([
            ("w".to_string(), waiting(true)),
            ("gone".to_string(), waiting(false)),
        ]);
        let hosts = vec!["w".to_string(), "gone".to_string()];
        let since = Since {
            revision: 0,
            started_at: 100,
        };
        let judged = judge(&wave, &hosts, &views, &since, 101);
        let w = judged.waiting.iter().find(|t| t.host == "w").unwrap();
        assert_eq!(w.state, "waiting");
        assert!(w.detail.as_deref().unwrap().contains("held (h1)"), "{w:?}");
        let gone = judged.waiting.iter().find(|t| t.host == "gone").unwrap();
        assert_eq!(gone.state, "silent", "its lease lapsed: {gone:?}");
    }

    #[test]
    fn only_hosts_whose_bundle_changes_are_in_a_wave() {
        let old = release(
            &[("a", "1"), ("b", "1"), ("c", "1")],
            &[&["a", "b"], &["c"]],
        );
        let new = release(
            &[("a", "2"), ("b", "1"), ("c", "1"), ("d", "2")],
            &[&["a", "b"], &["c", "d"]],
        );
        let old_map = old
            .hosts
            .iter()
            .map(|(h, e)| (h.clone(), e.bundle.clone()))
            .collect();
        assert_eq!(
            changed_waves(&new, &old_map),
            vec![vec!["a".to_string()], vec!["d".to_string()]]
        );
    }

    #[test]
    fn a_wave_release_moves_the_waves_given_and_the_last_is_the_target() {
        let old = release(&[("a", "1"), ("b", "1"), ("gone", "1")], &[]);
        let new = release(&[("a", "2"), ("b", "2"), ("new", "2")], &[]);
        let waves = vec![
            vec!["a".to_string()],
            vec!["b".to_string(), "new".to_string()],
        ];
        let first = wave_release(&new, Some(&old), &waves, 0, &[]);
        let bundle = |r: &Release, h: &str| r.hosts.get(h).map(|e| e.bundle[..1].to_string());
        assert_eq!(bundle(&first, "a").as_deref(), Some("2"));
        assert_eq!(bundle(&first, "b").as_deref(), Some("1"));
        assert_eq!(bundle(&first, "gone").as_deref(), Some("1"));
        assert_eq!(bundle(&first, "new"), None);
        assert_ne!(first.version, new.version);
        assert_eq!(first.version, Release::compute_version(&first.hosts));
        assert_eq!(
            wave_release(&new, Some(&old), &waves, 1, &[]),
            new.unsigned()
        );
        let back = abort_release(&new, &old, &BTreeSet::from(["a".to_string(), "new".into()]));
        assert_eq!(bundle(&back, "a").as_deref(), Some("1"));
        assert_eq!(bundle(&back, "new").as_deref(), Some("2"));
        assert_eq!(bundle(&back, "gone").as_deref(), Some("1"));
    }
}

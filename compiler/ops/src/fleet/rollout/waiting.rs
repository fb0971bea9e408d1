//! Waiting for a wave: held and paused hosts, the reports read until every host of the wave
//! converged, failed, or the wave's time is up, and what the controller files as it goes.

use super::*;

impl Controller<'_> {
    /// Waits until every host of `wave` reports up to date and healthy on `release`. `None`
    /// when they do; the halt when one fails (reported [`Since`]) or the wave's time is up.
    /// Files the rollout as it ended or halted in the history; a store that will not take it
    /// is said, and the rollout's outcome stands.
    pub(super) fn file_history(&self, progress: &Progress, watch: &mut dyn FnMut(&Event)) {
        if let Err(error) = super::history::file(&self.etcd, progress) {
            watch(&Event::StoreTrouble {
                error: format!("the rollout's history was not filed: {error}"),
            });
        }
    }

    /// Before a wave is given: while the rollout is paused, waits (saying so once, and in the
    /// store's progress), keeping its lease; a store it cannot read is waited out too.
    pub(super) fn wait_while_paused(
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
    pub(super) fn take_held(
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
    pub(super) fn leave_out_held(
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

    pub(super) fn wait(
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
        // Each report is checked against the identity the release gives its host, and
        // against what was seen signed before (a report put back is refused). The fleet is
        // followed through a watch kept from wave to wave: a poll reads what changed since
        // the last. A poll that cannot read the store judges by what it read last.
        let identities = bell_store::identities_of(release);
        let mut reading = self.reading.lock();
        if reading
            .as_ref()
            .is_none_or(|(follower, _)| follower.fleet() != release.fleet)
        {
            // The witness is opened while etcd reads the range (see
            // `Witness::kept_checked`).
            let follower = crate::fleet::follow::Follower::start_checking(
                self.etcd.clone(),
                &release.fleet,
                Arc::new(identities.clone()),
                Witness::kept_checked(&release.fleet),
            )
            .map_err(RolloutError::Store)?;
            let witness = Witness::open(&release.fleet).map_err(RolloutError::Store)?;
            *reading = Some((follower, witness));
        }
        let Some((follower, witness)) = reading.as_mut() else {
            return Err(RolloutError::Store("the fleet is not followed".into()));
        };
        loop {
            if lease.lost() {
                return Err(RolloutError::LostLease);
            }
            match follower.read(release, &identities, witness, now()) {
                Ok(_) => {
                    if let Err(error) = witness.save() {
                        watch(&Event::StoreTrouble { error });
                    }
                }
                Err(error) => watch(&Event::StoreTrouble { error }),
            }
            let views = follower.views();
            let judged = judge(release, wave.hosts, views, since, now());
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

pub(super) struct WaveRef<'h> {
    /// 1-based; 0 is the abort's wait.
    pub(super) number: usize,
    pub(super) of: usize,
    pub(super) hosts: &'h [String],
}

impl WaveRef<'_> {
    pub(super) fn name(&self) -> String {
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
pub fn judge<V: std::borrow::Borrow<HostView> + Sync>(
    release: &Release,
    hosts: &[String],
    views: &BTreeMap<String, V>,
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
        let view = views.get(host).map(V::borrow);
        let applied = view.and_then(|v| v.by_command.get("apply").or(v.report.as_ref()));
        let applied_at = applied.map(|r| r.finished_at);
        let written_after = match view.and_then(|v| v.revisions.get("apply")) {
            Some(revision) => *revision > since.revision,
            // A directory store keeps no revisions: the times must do.
            None => applied_at.is_some_and(|at| at >= since.started_at),
        };
        // A run that read the store just before the release was published, in the same
        // second, files its failure after it: a failed apply names the release it applied,
        // a refusal the release it refused (`release` is then the one the host still runs),
        // so one that names another is that earlier run's. A refusal from a bell-run that
        // does not name what it refused is told by its time alone.
        let tried = applied.and_then(|r| match r.error {
            None => r.release.as_deref(),
            Some(_) => r.refused_release.as_deref(),
        });
        let of_another = tried.is_some_and(|v| v != release.version);
        let recent = written_after
            && !of_another
            && applied.is_some_and(|r| r.started_at >= since.started_at);
        let detail = row.and_then(|r| r.detail.clone());
        let trouble = |state: &str| Trouble {
            host: host.clone(),
            state: state.to_string(),
            detail: detail.clone(),
        };
        match state {
            Some(HostState::Failed) if recent => judged.failed.push(trouble("failed")),
            // It took the wave's release back (not confirmed in time): a failure of the wave.
            Some(HostState::Reverted) if recent => judged.failed.push(trouble("reverted")),
            Some(HostState::Unhealthy) if recent => judged.failed.push(trouble("unhealthy")),
            // A host that fails the same way again files nothing new (a report that says
            // nothing new is not written), so this failure may be from before the wave or
            // the resume, or from a run since: told as such, it halts the wave at its time.
            Some(s @ (HostState::Failed | HostState::Reverted)) if of_another => {
                judged.waiting.push(Trouble {
                    detail: Some(format!(
                        "a failure of release {}, from a run that began before release {} was \
                     published{}",
                        tried.map_or("?", bell_bundle::short_id),
                        bell_bundle::short_id(&release.version),
                        detail
                            .as_deref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    )),
                    ..trouble(s.as_str())
                })
            }
            Some(s @ (HostState::Failed | HostState::Reverted)) => judged.waiting.push(Trouble {
                detail: Some(format!(
                    "the same failure as before the wave began (nothing new reported since){}",
                    detail
                        .as_deref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                )),
                ..trouble(s.as_str())
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

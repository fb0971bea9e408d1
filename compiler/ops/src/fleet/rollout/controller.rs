//! The controller's two commands: `rollout` (begin or resume) and `abort`.

use super::waiting::WaveRef;
use super::*;

impl Controller<'_> {
    pub(super) fn store(&self) -> Store {
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
                return Err(refused(
                    format!(
                        "the store holds a rollout of release {} that stands {}, which OUT does \
                         not record: it was begun from another build output",
                        bell_bundle::short_id(&p.target),
                        p.phase.as_str()
                    ),
                    Remedy::FromItsOwnOut,
                ));
            }
        }
        let (mut record, mut progress) = match record {
            Some(r) if !r.stage.finished() => {
                if !resume {
                    return Err(refused(
                        format!(
                            "the rollout of release {} is {} (OUT's signed record, {}): a new \
                             one waits until it is finished or taken back",
                            bell_bundle::short_id(&r.target),
                            r.stage.as_str(),
                            record::path(&self.out, fleet).display()
                        ),
                        Remedy::ResumeOrAbort,
                    ));
                }
                if r.stage == Stage::Aborting {
                    return Err(refused(
                        format!(
                            "the rollout of release {} is being aborted: only the abort can \
                             finish",
                            bell_bundle::short_id(&r.target)
                        ),
                        Remedy::Abort,
                    ));
                }
                if r.target != target.version {
                    return Err(refused(
                        format!(
                            "the rollout OUT's record holds is of release {}, but OUT's \
                             release.json is release {}: it can no longer be resumed from OUT",
                            bell_bundle::short_id(&r.target),
                            bell_bundle::short_id(&target.version)
                        ),
                        Remedy::Abort,
                    ));
                }
                let progress = self.agreeing_progress(&r, existing)?;
                (r, progress)
            }
            Some(r) if resume && r.target == target.version && r.stage == Stage::Done => {
                // A controller killed once it had finished, before it said so, leaves only
                // this resume to say it: whoever follows the events learns the rollout ended.
                let waves = existing.as_ref().map_or(&[][..], |p| &p.waves[..]);
                watch(&Event::Done {
                    release: r.target.clone(),
                    waves: waves.len(),
                    hosts: waves.iter().map(Vec::len).sum(),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    held: r.held.clone(),
                });
                return Ok(Outcome::Done {
                    release: r.target,
                    held: r.held,
                });
            }
            _ if resume => {
                return Err(refused(
                    format!("OUT holds no unfinished rollout of fleet `{fleet}` to resume"),
                    Remedy::Start,
                ))
            }
            record => {
                let (record, mut progress) = self.begin(target, record.as_ref())?;
                progress.started_by = Some(self.by.clone());
                (record, progress)
            }
        };
        if progress.phase == Phase::Halted {
            if let Some(last) = progress.halts.last_mut().filter(|h| h.resumed_at.is_none()) {
                last.resumed_at = Some(now());
                last.resumed_by = Some(self.by.clone());
            }
        }
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
                    progress.halts.push(super::history::Halted {
                        at: progress.updated_at,
                        wave: halt.wave,
                        reason: halt.reason.clone(),
                        resumed_at: None,
                        resumed_by: None,
                    });
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
            held: record.held.clone(),
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
            return Err(refused(
                format!(
                    "OUT records no rollout of fleet `{fleet}` to abort ({} does not exist): \
                     an abort goes back only to what the signing key gave before, which that \
                     record names",
                    record::path(&self.out, fleet).display()
                ),
                Remedy::RollOutEarlier,
            ));
        };
        if record.stage.finished() {
            return Err(refused(
                format!(
                    "the rollout of release {} is {} already; nothing to abort",
                    bell_bundle::short_id(&record.target),
                    record.stage.as_str()
                ),
                Remedy::RollOutEarlier,
            ));
        }
        let existing = readable_progress(&self.etcd, fleet)?;
        let mut progress = self.agreeing_progress(&record, existing)?;
        let target = self.kept_release(&record.target, None)?;
        // The fleet's first rollout had nothing before it: its abort takes no host back and
        // leaves the moved ones as they are (each named), but it ends the rollout, so that a
        // fixed release can roll out from where the fleet stands. Refusing it would leave a
        // halted first rollout that only `--resume` could end, and resuming cannot fix a
        // release.
        let from = match self.previous_release(&record)? {
            Some(from) => from,
            None => Release {
                hosts: BTreeMap::new(),
                ..target.unsigned()
            },
        };
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
            .iter()
            .filter(|h| from.hosts.contains_key(*h))
            .cloned()
            .collect();
        let kept = kept_by_abort(&target, &from, &back, &record.held);
        watch(&Event::AbortStarted {
            release: release.version.clone(),
            hosts: back.clone(),
            kept: kept.clone(),
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
            back,
            kept,
        })
    }

    /// A new rollout of `target`: the waves of its hosts whose bundle changes from the
    /// release the key gave the fleet last, recorded (signed) in OUT before anything is given.
    pub(super) fn begin(
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
        super::failpoint::hit("record-saved");
        let progress = Progress::of(&record);
        Ok((record, progress))
    }

    /// The release a new rollout of `target` starts from: the one OUT's signed record says the
    /// key gave the fleet last (or, in an OUT without a record, the newest release OUT keeps
    /// signed by the key). The store's current release must be that one, or a newer release
    /// the key signed (published with `bellc publish`); anything else is refused, because
    /// wave releases copy the base's entries and are signed anew.
    pub(super) fn base(
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
                format!("release {}", bell_bundle::short_id(&f.version))
            });
        Err(RolloutError::Disagrees {
            fleet: fleet.clone(),
            store: published.version.clone(),
            ours: floor_name,
            whence,
            fix: floor.map(|f| f.version),
        })
    }
}

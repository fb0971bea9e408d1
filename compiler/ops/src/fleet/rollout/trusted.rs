//! What the controller takes from OUT, its record and the store before it signs anything: the
//! newest signed release, the previous one, the kept releases, and the progress both agree on.

use super::*;

impl Controller<'_> {
    /// The newest release OUT keeps that the key signed for `target`'s fleet, `target` aside.
    pub(super) fn newest_signed(&self, target: &Release) -> Result<Option<Release>, RolloutError> {
        if self.key.is_none() {
            return Ok(None);
        }
        let kept = releases::list(&self.out).map_err(|e| refused(e.to_string(), Remedy::Build))?;
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
    pub(super) fn agreeing_progress(
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
            // A finished rollout's progress under the record of another: this rollout's
            // controller died once it had signed its record and before it told the store. The
            // progress is made again from the record, as when the store lost it (a writer of
            // the store could as well delete it: this trusts it with nothing more).
            Some(p) if p.phase.finished() && p.target != record.target => Ok(Progress::of(record)),
            Some(p) => Err(refused(
                format!(
                    "the store's rollout progress is of release {} from {}, but OUT's signed \
                     record is of release {} from {}: the store was written by something other \
                     than this controller, or OUT is not the directory the rollout began in; \
                     nothing was signed or published. When OUT is that directory, take the \
                     store's progress away (as etcd's root): the controller makes it anew from \
                     OUT's signed record",
                    bell_bundle::short_id(&p.target),
                    p.from.as_deref().map_or("nothing", bell_bundle::short_id),
                    bell_bundle::short_id(&record.target),
                    from.as_deref().map_or("nothing", bell_bundle::short_id),
                ),
                Remedy::Run(format!(
                    "etcdctl del {}",
                    bell_store::keys::progress_key(&record.fleet)
                )),
            )),
            None => Ok(Progress::of(record)),
        }
    }

    pub(super) fn previous_release(
        &self,
        record: &Record,
    ) -> Result<Option<Release>, RolloutError> {
        record
            .from
            .as_ref()
            .map(|g| self.kept_release(&g.version, g.sequence))
            .transpose()
    }

    pub(super) fn load_record(&self, fleet: &str) -> Result<Option<Record>, RolloutError> {
        record::load(&self.out, fleet, self.key).map_err(RolloutError::from)
    }

    pub(super) fn save_record(&self, record: &Record) -> Result<(), RolloutError> {
        record::save(&self.out, record, self.key).map_err(RolloutError::from)
    }

    /// A release OUT keeps under `releases/`, signed by the key when there is one (and with
    /// a sequence no older than `at_least`, when given).
    pub(super) fn kept_release(
        &self,
        version: &str,
        at_least: Option<u64>,
    ) -> Result<Release, RolloutError> {
        if !bell_bundle::is_bundle_id(version) {
            return Err(refused(
                format!("`{version}` is named as a release, which is not a version"),
                Remedy::Build,
            ));
        }
        let path = self
            .out
            .join(bell_bundle::RELEASES_DIR)
            .join(format!("{version}.json"));
        // Every refusal below is of a kept file gone or changed: its build wrote it whole.
        let restore = |message: String| {
            refused(
                message,
                Remedy::Restore {
                    version: version.to_string(),
                },
            )
        };
        let bytes = std::fs::read(&path).map_err(|e| {
            restore(format!(
                "release {} is not kept in {} ({e}): the served directory must keep the \
                 release the fleet runs now (copy each build output over it)",
                bell_bundle::short_id(version),
                self.out.display()
            ))
        })?;
        if let Some(key) = self.key {
            let signature_path = releases::signature_path(&path);
            let signature = std::fs::read_to_string(&signature_path).map_err(|e| {
                restore(format!(
                    "{} has no signature ({e}): the controller builds only on releases its \
                     key signed",
                    path.display()
                ))
            })?;
            key.verify(&bytes, &signature).map_err(|reason| {
                restore(format!(
                    "{} {reason}: the controller builds only on releases its key signed",
                    path.display()
                ))
            })?;
        }
        let release: Release = serde_json::from_slice(&bytes)
            .map_err(|e| restore(format!("{} is not a release: {e}", path.display())))?;
        if release.version != version {
            return Err(restore(format!(
                "{} holds release {}, not {}",
                path.display(),
                bell_bundle::short_id(&release.version),
                bell_bundle::short_id(version)
            )));
        }
        if let (Some(floor), Some(key)) = (at_least, self.key) {
            if release.sequence.unwrap_or(0) < floor {
                return Err(restore(format!(
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
    pub(super) fn give(
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
    pub(super) fn name_in_store(
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
    pub(super) fn sign(&self, release: &Release, current: bool) -> Result<Given, RolloutError> {
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
}

//! What this reader has seen each host sign: the sequence number of each command's report.
//! A signature proves who wrote a report, not when: an old, validly signed report put back
//! into the store (a replay) verifies as well as the newest. So a reader remembers the highest
//! sequence it has seen of each host and command, refuses anything lower as a replay, and
//! shows the last report it verified (while it runs: the page, the controller) in the place
//! of one it refuses or one that was deleted. TUF clients keep their last trusted metadata for
//! the same reason.
//!
//! What was seen is kept per fleet in bellc's state directory (`$BELLC_STATE_DIR`, else
//! `$XDG_STATE_HOME/bellc`, else `~/.local/state/bellc`), keyed by identity: a host given a
//! new key starts afresh. Each report is kept without the resources that went well (what a
//! status row shows of it stays): a fleet's full reports are hundreds of megabytes at 100,000
//! hosts.

use bell_bundle::Release;
use bell_store::proof::Proof;
use bell_store::{HostView, Report};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How far ahead of this reader's clock a host's report may be numbered: the clock skew a
/// reader allows between a host and itself (a day: hosts whose time is that far off have
/// worse trouble, and a number in milliseconds is a million days ahead).
pub const MAX_SEQUENCE_AHEAD: u64 = 86_400;

#[derive(Debug, Default)]
pub struct Witness {
    /// Where the record is kept; `None`: in memory only.
    path: Option<PathBuf>,
    seen: Seen,
    changed: bool,
    /// Written at most this often (the page reads the store every few seconds).
    save_every: Duration,
    saved_at: Option<Instant>,
    /// A save running on a thread of its own ([`Witness::save_behind`]).
    saving: Option<std::thread::JoinHandle<Result<(), String>>>,
}

/// By identity (`ssh-ed25519 BASE64`), by command. Hashed: identities share their first 37
/// characters, which an ordered map would compare again and again.
/// By identity, by command: a map of a few entries per host (see [`bell_store::SmallMap`]).
type Seen = HashMap<String, bell_store::SmallMap<SeenReport>>;

#[derive(Debug, Clone)]
struct SeenReport {
    sequence: u64,
    report: Option<Arc<Report>>,
    /// The digest of the report's bytes and identity (see [`bell_store::proof::Checked`]):
    /// a reader started again does not check its signature again.
    checked: Option<bell_store::proof::Checked>,
}

/// A [`SeenReport`] as the state directory keeps it.
#[derive(Serialize, Deserialize)]
struct Kept {
    sequence: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    report: Option<Report>,
    /// [`SeenReport::checked`] in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checked: Option<String>,
}

/// What a status row shows of a report: its resources that failed or were deferred, not the
/// hundreds that went well.
fn trimmed(report: &Report) -> Report {
    report.keeping_resources(|r| r.result.is_failure() || r.result == bell_store::Status::Deferred)
}

fn to_kept(seen: &Seen) -> BTreeMap<&str, BTreeMap<&str, Kept>> {
    seen.iter()
        .map(|(identity, commands)| {
            let commands = commands
                .iter()
                .map(|(command, s)| {
                    let kept = Kept {
                        sequence: s.sequence,
                        report: s.report.as_deref().map(trimmed),
                        checked: s.checked.map(|d| bell_wire::hex(&d)),
                    };
                    (command.as_str(), kept)
                })
                .collect();
            (identity.as_str(), commands)
        })
        .collect()
}

fn from_kept(kept: BTreeMap<String, BTreeMap<String, Kept>>) -> Seen {
    kept.into_iter()
        .map(|(identity, commands)| {
            let commands = commands
                .into_iter()
                .map(|(command, k)| {
                    let seen = SeenReport {
                        sequence: k.sequence,
                        report: k.report.map(Arc::new),
                        // One that does not read as a digest is not kept: the report is checked again.
                        checked: k
                            .checked
                            .as_deref()
                            .and_then(bell_wire::from_hex)
                            .and_then(|d| d.try_into().ok()),
                    };
                    (command, seen)
                })
                .collect();
            (identity, commands)
        })
        .collect()
}

/// bellc's state directory (see the module's documentation).
pub fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("BELLC_STATE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return Some(PathBuf::from(dir).join("bellc"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".local/state/bellc"))
}

impl Witness {
    /// The record of `fleet` kept in bellc's state directory (empty when there is none yet).
    /// One that cannot be read is an error: starting afresh would forget every sequence seen,
    /// which is what a replay needs.
    pub fn open(fleet: &str) -> Result<Witness, String> {
        let Some(dir) = state_dir() else {
            return Ok(Witness::default());
        };
        Witness::open_at(dir.join(format!("seen-{fleet}.json")))
    }

    /// The digests of the reports `fleet`'s record in bellc's state directory saw signed
    /// ([`Witness::checked_before`]), read alone: they are kept beside the record in a file of
    /// their own, 32 bytes each, read in milliseconds where the record takes a second or two
    /// at 100,000 hosts. A reader started again starts its reading with them and opens the
    /// record while etcd reads the range. Empty when there are none, or the file is not
    /// whole (each report is then checked, as on a first start).
    pub fn kept_checked(fleet: &str) -> std::collections::HashSet<bell_store::proof::Checked> {
        let Some(dir) = state_dir() else {
            return Default::default();
        };
        Witness::kept_checked_at(&dir.join(format!("seen-{fleet}.json")))
    }

    /// [`Witness::kept_checked`] of the record kept in `path`.
    pub fn kept_checked_at(
        path: &std::path::Path,
    ) -> std::collections::HashSet<bell_store::proof::Checked> {
        let bytes = std::fs::read(checked_path(path)).unwrap_or_default();
        if !bytes.len().is_multiple_of(32) {
            return Default::default();
        }
        bytes
            .chunks_exact(32)
            .filter_map(|d| <[u8; 32]>::try_from(d).ok())
            .collect()
    }

    /// The record kept in `path`.
    pub fn open_at(path: PathBuf) -> Result<Witness, String> {
        let seen = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(from_kept).map_err(|e| {
                format!(
                    "{} is not bellc's record of the reports it has seen ({e}); move it away \
                     to start afresh",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Seen::default(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        Ok(Witness {
            path: Some(path),
            seen,
            ..Witness::default()
        })
    }

    /// Keeps what was seen at most every `interval` (and whenever [`Witness::save`] is called
    /// after it passed).
    pub fn saving_every(mut self, interval: Duration) -> Witness {
        self.save_every = interval;
        self
    }

    /// Judges every report of `views` of a host of `release` by the identity the release gives
    /// it and by what was seen before: replays and reports that stopped being signed join the
    /// host's forged ones, the last verified report stands in for a refused or missing one,
    /// and reports that cannot be checked are marked unverified.
    pub fn judge(&mut self, release: &Release, views: &mut BTreeMap<String, HostView>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.judge_at(release, views, now);
    }

    /// Whether this reader has seen any host of the fleet sign a report: then its hosts have
    /// identities, even when the release at hand does not say so.
    /// The digests of the reports it saw signed and kept (see
    /// [`bell_store::ParsedReports::checked_before`]).
    pub fn checked_before(&self) -> std::collections::HashSet<bell_store::proof::Checked> {
        digests(&self.seen).collect()
    }

    pub fn has_seen_signatures(&self) -> bool {
        self.seen.values().any(|commands| !commands.is_empty())
    }

    /// [`Witness::judge`] at `now` (Unix seconds): a signed report numbered beyond
    /// `now + MAX_SEQUENCE_AHEAD` is refused and never remembered.
    pub fn judge_at(
        &mut self,
        release: &Release,
        views: &mut BTreeMap<String, HostView>,
        now: u64,
    ) {
        let highest = now.saturating_add(MAX_SEQUENCE_AHEAD);
        for (host, entry) in &release.hosts {
            self.judge_host(host, entry, views, highest);
        }
    }

    /// [`Witness::judge_at`] for `hosts` only, whose views `views` holds (a host with no view
    /// may be given one, with its last verified report): a reader that follows the store
    /// judges again only the hosts whose keys changed.
    pub fn judge_some_at<'h>(
        &mut self,
        release: &Release,
        views: &mut BTreeMap<String, HostView>,
        hosts: impl IntoIterator<Item = &'h str>,
        now: u64,
    ) {
        let highest = now.saturating_add(MAX_SEQUENCE_AHEAD);
        for host in hosts {
            if let Some((host, entry)) = release.hosts.get_key_value(host) {
                self.judge_host(host, entry, views, highest);
            }
        }
    }

    fn judge_host(
        &mut self,
        host: &String,
        entry: &bell_bundle::ReleaseHost,
        views: &mut BTreeMap<String, HostView>,
        highest: u64,
    ) {
        // The release's identities are as bellc wrote them (`ssh-ed25519 BASE64`): the
        // store checked each report against them; here they are only names.
        let Some(identity) = entry.identity.as_deref() else {
            if let Some(view) = views.get_mut(host).filter(|v| v.report.is_some()) {
                view.unverified = Some(format!(
                    "the release gives `{host}` no identity: what its reports say cannot be checked"
                ));
            }
            return;
        };
        if !self.seen.contains_key(identity) {
            if !views.contains_key(host) {
                return;
            }
            self.seen.insert(identity.to_string(), Default::default());
        }
        let Some(seen) = self.seen.get_mut(identity) else {
            return;
        };
        let view = views.entry(host.clone()).or_default();
        let mut refused: Vec<(String, String)> = Vec::new();
        for (command, proof) in &view.proofs {
            let why = match proof {
                // A host numbers its reports by its clock (never below the time, see
                // `bell-run`'s `next_sequence`). Remembered, a number far ahead would make
                // every honest report after it read as a replay, for good.
                Proof::Signed { sequence, .. } if *sequence > highest => Some(format!(
                    "its `{command}` report is number {sequence}, beyond the time now and \
                     the {MAX_SEQUENCE_AHEAD} s of clock skew allowed ({highest}): \
                     refused and not remembered"
                )),
                Proof::Signed { sequence, checked } => match seen.get_mut(command) {
                    Some(old) if old.sequence > *sequence => Some(format!(
                        "its `{command}` report is number {sequence}, but number {} was \
                         seen already: an old report put back (a replay)",
                        old.sequence
                    )),
                    Some(old) if old.sequence == *sequence => {
                        // Kept by a bellc from before digests, or the same report filed
                        // again by another serializer: what a restart finds next.
                        if checked.is_some() && old.checked != *checked {
                            old.checked = *checked;
                            self.changed = true;
                        }
                        None
                    }
                    _ => {
                        let report = view.by_command.get(command).map(Arc::clone);
                        let (sequence, checked) = (*sequence, *checked);
                        seen.insert(
                            command.clone(),
                            SeenReport {
                                sequence,
                                report,
                                checked,
                            },
                        );
                        self.changed = true;
                        None
                    }
                },
                Proof::Unsigned if !seen.is_empty() => Some(format!(
                    "its `{command}` report is not signed, but this host signs its reports"
                )),
                Proof::Unsigned | Proof::NoIdentity => {
                    view.unverified = Some(format!(
                        "its `{command}` report is not signed (a bell-run from before \
                         host identities, or anyone)"
                    ));
                    None
                }
                Proof::Forged(why) => Some(why.clone()),
            };
            if let Some(why) = why {
                refused.push((command.clone(), why));
            }
        }
        let mut changed = !refused.is_empty();
        for (command, why) in refused {
            view.forged.push(why);
            view.by_command.remove(&command);
            view.proofs.remove(&command);
        }
        // The last verified report in the place of a refused one, or of one deleted.
        for (command, old) in seen.iter() {
            let Some(report) = &old.report else {
                continue;
            };
            if !view.by_command.contains_key(command) {
                view.by_command.insert(command.clone(), Arc::clone(report));
                let (sequence, checked) = (old.sequence, old.checked);
                view.proofs
                    .insert(command.clone(), Proof::Signed { sequence, checked });
                changed = true;
            }
        }
        if changed {
            view.settle();
        }
    }

    /// Keeps what was seen, when anything new was (written beside and renamed over).
    pub fn save(&mut self) -> Result<(), String> {
        let Some(path) = self.due() else {
            return Ok(());
        };
        write_seen(&path, &self.seen)?;
        self.changed = false;
        self.saved_at = Some(Instant::now());
        Ok(())
    }

    /// [`Witness::save`] on a thread of its own, for a reader that must not wait for it (the
    /// page: at 100,000 hosts the record takes over a second to write): what was seen is
    /// copied (its reports shared) and written while the reader goes on. Says how the save
    /// before ended; one that failed is tried again.
    pub fn save_behind(&mut self) -> Result<(), String> {
        if self.saving.as_ref().is_some_and(|s| !s.is_finished()) {
            return Ok(());
        }
        let before = match self.saving.take().map(std::thread::JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err("writing what was seen failed".to_string()),
        };
        if before.is_err() {
            self.changed = true;
            self.saved_at = None;
        }
        if let Some(path) = self.due() {
            let seen = self.seen.clone();
            self.changed = false;
            self.saved_at = Some(Instant::now());
            self.saving = Some(std::thread::spawn(move || write_seen(&path, &seen)));
        }
        before
    }

    /// Where to save now, when a save is due.
    fn due(&self) -> Option<PathBuf> {
        let path = self.path.as_ref().filter(|_| self.changed)?;
        let waited = self
            .saved_at
            .is_none_or(|at| at.elapsed() >= self.save_every);
        waited.then(|| path.clone())
    }
}

/// Where the digests of the record at `path` are kept (see [`Witness::kept_checked`]).
fn checked_path(path: &std::path::Path) -> PathBuf {
    path.with_extension("checked")
}

/// Writes `seen` to `path`, and its digests beside it (see [`Witness::kept_checked`]): each
/// written beside and renamed over. The two need not agree: a digest says only that those
/// bytes were checked under that identity, which stays true.
fn write_seen(path: &std::path::Path, seen: &Seen) -> Result<(), String> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    replace_file(&checked_path(path), |file| {
        digests(seen).try_for_each(|d| std::io::Write::write_all(file, &d))
    })?;
    replace_file(path, |file| {
        serde_json::to_writer(file, &to_kept(seen)).map_err(std::io::Error::from)
    })
}

/// Every digest `seen` holds.
fn digests(seen: &Seen) -> impl Iterator<Item = bell_store::proof::Checked> + '_ {
    seen.values()
        .flat_map(|commands| commands.iter().filter_map(|(_, s)| s.checked))
}

/// Writes `path` with `write`, beside it (named for this process: the page and a controller
/// may save at once) and renamed over.
fn replace_file(
    path: &std::path::Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<(), String> {
    let kind = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let tmp = path.with_extension(format!("{kind}.{}.tmp", std::process::id()));
    let done = (|| -> std::io::Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut file)?;
        std::io::Write::flush(&mut file)?;
        std::fs::rename(&tmp, path)
    })();
    done.map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bell_bundle::ReleaseHost;
    use bell_store::proof::{self, SigningKey};
    use bell_store::{Identities, State, Store};

    fn report(result: State, health: State) -> Report {
        Report {
            bundle: Some("b1".into()),
            finished_at: 11,
            status: BTreeMap::from([("health".to_string(), health)]),
            ..Report::new("b", "f", "check", result, 10)
        }
    }

    fn release(identity: Option<&SigningKey>) -> Release {
        let entry = ReleaseHost {
            bundle: "b1".into(),
            address: None,
            labels: Default::default(),
            identity: identity.map(|k| k.identity().to_openssh()),
            secrets: None,
            snapshots: Default::default(),
            reboots: false,
            provides: Default::default(),
        };
        Release {
            format: bell_bundle::FORMAT,
            fleet: "f".into(),
            version: "v".into(),
            hosts: BTreeMap::from([("b".to_string(), entry)]),
            waves: Vec::new(),
            sequence: None,
            expires: None,
            rollout: None,
            identities_required: false,
            assignments: Vec::new(),
        }
    }

    /// What a reader makes of the reports in `dir` (a directory store), judged by `witness`.
    fn read(dir: &std::path::Path, release: &Release, witness: &mut Witness) -> HostView {
        let identities: Identities = bell_store::identities_of(release);
        let mut views = Store::Dir(dir.to_path_buf())
            .load_fleet("f", &identities)
            .unwrap();
        witness.judge(release, &mut views);
        views.remove("b").unwrap_or_default()
    }

    #[test]
    fn replays_and_unsigned_reports_after_signed_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_seed([6; 32]);
        let release = release(Some(&key));
        let store = Store::Dir(dir.path().to_path_buf());
        let mut witness = Witness::default();
        let file = dir.path().join("b.json");

        // Unsigned, from a host whose identity the release names but that never signed: shown,
        // unverified.
        store
            .record(&mut report(State::Success, State::Success), None)
            .unwrap();
        let unsigned = std::fs::read(&file).unwrap();
        let view = read(dir.path(), &release, &mut witness);
        assert!(
            view.forged.is_empty() && view.unverified.is_some(),
            "{view:?}"
        );

        // Signed: believed, and remembered.
        let mut next = 40;
        let mut sign = |r: &mut Report| {
            next += 1;
            let sequence = next;
            store
                .record(
                    r,
                    Some(bell_store::Signer {
                        key: &key,
                        next_sequence: &mut || Ok(sequence),
                    }),
                )
                .unwrap();
        };
        sign(&mut report(State::Success, State::Success));
        let healthy = std::fs::read(&file).unwrap();
        let view = read(dir.path(), &release, &mut witness);
        assert!(
            view.forged.is_empty() && view.unverified.is_none(),
            "{view:?}"
        );
        sign(&mut report(State::Unhealthy, State::Unhealthy));
        let view = read(dir.path(), &release, &mut witness);
        assert_eq!(view.status["health"], State::Unhealthy);

        // The healthy one put back: a replay; the unhealthy one it saw stands in.
        std::fs::write(&file, &healthy).unwrap();
        let view = read(dir.path(), &release, &mut witness);
        assert!(view.forged[0].contains("a replay"), "{view:?}");
        assert_eq!(view.status["health"], State::Unhealthy);

        // An unsigned one now: this host signs, so it is not its own.
        std::fs::write(&file, &unsigned).unwrap();
        let view = read(dir.path(), &release, &mut witness);
        assert!(view.forged[0].contains("not signed"), "{view:?}");
        assert_eq!(view.status["health"], State::Unhealthy);

        // Deleted: what it last said for itself stands.
        std::fs::remove_file(&file).unwrap();
        let view = read(dir.path(), &release, &mut witness);
        assert_eq!(view.status["health"], State::Unhealthy);

        // A release without its identity: nothing to check with, unverified.
        sign(&mut report(State::Success, State::Success));
        let view = read(dir.path(), &release_without(), &mut Witness::default());
        assert!(view.unverified.unwrap().contains("no identity"));
    }

    /// A report signed with a number far ahead of the time (milliseconds where seconds are
    /// meant) is refused and not remembered: the honest reports after it still read as the
    /// host's.
    #[test]
    fn a_number_from_the_future_is_refused_and_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_seed([7; 32]);
        let release = release(Some(&key));
        let mut witness = Witness::default();
        let file = dir.path().join("b.json");
        let now = 1_800_000_000;
        let judged = |witness: &mut Witness, sequence: u64, health: State| {
            let mut signed = report(health, health);
            proof::sign(&mut signed, &key, sequence);
            std::fs::write(&file, serde_json::to_vec(&signed).unwrap()).unwrap();
            let identities: Identities = bell_store::identities_of(&release);
            let mut views = Store::Dir(dir.path().to_path_buf())
                .load_fleet("f", &identities)
                .unwrap();
            witness.judge_at(&release, &mut views, now);
            views.remove("b").unwrap_or_default()
        };
        let view = judged(&mut witness, now - 5, State::Success);
        assert!(view.forged.is_empty(), "{view:?}");
        let view = judged(&mut witness, now * 1000, State::Success);
        assert!(view.forged[0].contains("beyond the time now"), "{view:?}");
        // Within the skew: believed.
        let view = judged(&mut witness, now + 60, State::Unhealthy);
        assert!(view.forged.is_empty(), "{view:?}");
        assert_eq!(view.status["health"], State::Unhealthy);
        let view = judged(&mut witness, now + 61, State::Success);
        assert!(view.forged.is_empty(), "{view:?}");
        assert_eq!(view.status["health"], State::Success);
    }

    fn release_without() -> Release {
        release(None)
    }

    #[test]
    fn what_was_seen_is_kept_between_runs() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_seed([6; 32]);
        let mut witness = Witness {
            path: Some(dir.path().join("seen-f.json")),
            ..Witness::default()
        };
        let mut signed = report(State::Success, State::Success);
        proof::sign(&mut signed, &key, 9);
        let raw = serde_json::to_vec(&signed).unwrap();
        let store = dir.path().join("reports");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("b.json"), &raw).unwrap();
        read(&store, &release(Some(&key)), &mut witness);
        witness.save().unwrap();
        let kept: BTreeMap<String, BTreeMap<String, Kept>> =
            serde_json::from_slice(&std::fs::read(dir.path().join("seen-f.json")).unwrap())
                .unwrap();
        assert_eq!(kept[&key.identity().to_openssh()]["check"].sequence, 9);
        // Read again by the next run: the report stands in for a deleted one.
        std::fs::remove_file(store.join("b.json")).unwrap();
        let mut next = Witness::open_at(dir.path().join("seen-f.json")).unwrap();
        // With the digest of the report it checked, in the record and beside it alone.
        let digest = proof::checked(&key.identity(), &raw);
        let digests = std::collections::HashSet::from([digest]);
        assert_eq!(next.checked_before(), digests);
        let path = dir.path().join("seen-f.json");
        assert_eq!(Witness::kept_checked_at(&path), digests);
        let view = read(&store, &release(Some(&key)), &mut next);
        assert_eq!(view.status["health"], State::Success);
        // Digests cut short are not read at all (each report is checked again).
        let side = dir.path().join("seen-f.checked");
        std::fs::write(&side, &std::fs::read(&side).unwrap()[..31]).unwrap();
        assert!(Witness::kept_checked_at(&path).is_empty());
    }

    #[test]
    fn a_save_behind_writes_on_its_own_thread_and_a_failed_one_is_said_and_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_seed([6; 32]);
        let mut signed = report(State::Success, State::Success);
        proof::sign(&mut signed, &key, 9);
        let store = dir.path().join("reports");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("b.json"), serde_json::to_vec(&signed).unwrap()).unwrap();
        // Where the record goes is a file where its directory should be: the save fails.
        let blocked = dir.path().join("state");
        std::fs::write(&blocked, "").unwrap();
        let mut witness = Witness {
            path: Some(blocked.join("seen-f.json")),
            ..Witness::default()
        };
        read(&store, &release(Some(&key)), &mut witness);
        // Nothing said yet: the save runs behind.
        witness.save_behind().unwrap();
        let failed = |w: &mut Witness| loop {
            if let Err(e) = w.save_behind() {
                return e;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(failed(&mut witness).contains("cannot create"));
        // The way cleared: a save tried again writes what was seen (the one tried again
        // while it was blocked may still say it failed).
        std::fs::remove_file(&blocked).unwrap();
        let path = blocked.join("seen-f.json");
        let started = Instant::now();
        while !path.exists() {
            assert!(started.elapsed() < Duration::from_secs(10));
            let _ = witness.save_behind();
            std::thread::sleep(Duration::from_millis(10));
        }
        let kept: BTreeMap<String, BTreeMap<String, Kept>> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(kept[&key.identity().to_openssh()]["check"].sequence, 9);
    }
}

//! After `apply` and `check`: the report filed with `--report DEST` (a directory or etcd) and
//! the metrics written with `--metrics FILE`. Both describe the same run; filing is best
//! effort in the sense that the run's own result and exit code stand whether or not the store
//! was reachable (a host that cannot report shows up as unaccounted in `bellc status`).

use crate::apply;
use crate::check::CheckReport;
use crate::context::Refusal;
use crate::health::ProbeOutcome;
use crate::identity;
use crate::metrics::{self, Metrics};
use crate::state;
use bell_bundle::Manifest;
use bell_store::Status;
use bell_store::{ProbeResult, Report, ResourceResult, State, Store, REPORT_FORMAT};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the command line asked to be written after the run.
pub struct Sinks {
    pub report: Option<String>,
    /// How to reach an `etcds://` report store.
    pub access: bell_store::Access,
    pub metrics: Option<PathBuf>,
    pub host: Option<String>,
    pub release: Option<String>,
    /// Seconds the host's liveness lease in an etcd store lasts without a run to renew it.
    pub alive_ttl: u64,
    /// What a pull's first request read of its store, which filing the report then need not
    /// read again (when the report goes to that same store).
    pub read: Option<bell_store::prefetch::Prefetched>,
    /// The host's key given with `--identity FILE`, which signs the report instead of the
    /// root's (an image baked before its host has a key of its own in it).
    pub identity: Option<PathBuf>,
    /// When filing must be over: a pull's deadline (`--fetch-timeout`), none for a command
    /// that fetches nothing (each request is still bounded on its own).
    pub until: Option<bell_wire::Deadline>,
}

/// Three runs of the default 15-minute timer.
pub const DEFAULT_ALIVE_TTL: u64 = 2700;

/// The liveness lease a host holds in an etcd store, remembered between runs.
#[derive(Serialize, Deserialize, PartialEq)]
struct Lease {
    store: String,
    fleet: String,
    host: String,
    id: i64,
    /// When it was last renewed (0: not known, as a record from an older bell-run).
    #[serde(default)]
    renewed_at: u64,
}

impl Sinks {
    pub fn wanted(&self) -> bool {
        self.report.is_some() || self.metrics.is_some()
    }
}

/// The host's name: `--host`, else `ROOT/etc/hostname`.
pub fn host_name(given: Option<&str>, root: &Path) -> Result<String, String> {
    if let Some(name) = given {
        return Ok(name.to_string());
    }
    let path = root.join("etc/hostname");
    // Read as bell-run reads its own records: never through a link, never unbounded.
    let text = crate::rootfs::read_record(&path)
        .and_then(|text| text.ok_or_else(|| format!("{} does not exist", path.display())))
        .map_err(|e| format!("cannot tell the host's name: {e}; pass `--host NAME`"))?;
    let name = text.trim();
    if name.is_empty() {
        return Err(format!("{} is empty; pass `--host NAME`", path.display()));
    }
    Ok(name.to_string())
}

/// One finished run, whatever the command.
pub struct Run<'a> {
    pub command: &'a str,
    pub root: &'a Path,
    pub started_at: u64,
    pub result: State,
    pub bundle: Option<String>,
    pub fleet: Option<String>,
    pub resources: Vec<ResourceResult>,
    pub drift: Vec<bell_store::Drift>,
    pub error: Option<String>,
    /// Categories this run sets (its own, and `check` after a clean apply).
    pub status: BTreeMap<String, State>,
    /// Out of sync after the run, when known.
    pub drifted_after: Option<usize>,
    /// How `pull` checked the release.
    pub signature: Option<String>,
    /// The health probes' results, when they ran.
    pub health: Vec<ProbeResult>,
    /// Refused: nothing changed, so the report names the bundle and release still applied.
    pub refused: bool,
    /// The release refused, when it is not the one the run was told (a confirmation that
    /// timed out takes back the release of an earlier run).
    pub refused_release: Option<String>,
    /// Why the host needs a reboot.
    pub reboot_required: Vec<String>,
    /// The reboot `pull` makes once this report is filed.
    pub rebooting: Option<String>,
    /// The live files, as the run left them.
    pub live: Vec<bell_store::LiveFile>,
}

/// The probes' results for the report, and the `health` category they set.
fn health(outcomes: &[ProbeOutcome]) -> (Vec<ProbeResult>, State) {
    let results = outcomes
        .iter()
        .map(|o| ProbeResult {
            name: o.name.clone(),
            healthy: o.healthy,
            attempts: o.attempts,
            detail: o.detail.clone(),
        })
        .collect();
    let state = if outcomes.iter().all(|o| o.healthy) {
        State::Success
    } else {
        State::Unhealthy
    };
    (results, state)
}

pub fn from_apply<'a>(root: &'a Path, started_at: u64, rep: &apply::Report) -> Run<'a> {
    let result = if rep.failed.is_empty() {
        State::Success
    } else {
        State::Failed
    };
    // Waiting for providers is not failing: the next run tries again.
    let result = match result == State::Success && rep.waiting() {
        true => State::Waiting,
        false => result,
    };
    let mut status = BTreeMap::from([("apply".to_string(), result)]);
    let (probes, healthy) = health(&rep.health);
    let mut result = result;
    if result == State::Success {
        // The apply checked every resource and put back whatever had drifted.
        status.insert("check".to_string(), State::Success);
        // Probes run only after a clean apply; a bundle without any is healthy.
        status.insert("health".to_string(), healthy);
        result = healthy;
    }
    let secret: std::collections::BTreeSet<String> = rep
        .manifest
        .resources
        .iter()
        .filter(|r| {
            r.scripts().any(|s| s.secret)
                || r.files
                    .iter()
                    .any(|f| rep.manifest.file(f).is_some_and(|f| f.is_secret()))
        })
        .map(|r| r.key())
        .collect();
    // A departed resource's revert may carry what its old bundle kept secret: its output stays
    // on the host.
    let reverts = rep.reverts.iter().map(|o| (o, false));
    let others = rep.triggers.iter().chain(&rep.resources);
    let resources = reverts
        .chain(others.map(|o| (o, !secret.contains(&o.key))))
        .map(|(o, shown)| ResourceResult {
            key: o.key.clone(),
            result: o.status.clone(),
            detail: o.detail.clone(),
            output: match (&o.status, &o.log) {
                (Status::Failed, Some(log)) if shown => last_lines(Path::new(log)),
                (Status::Failed, Some(_)) => Some(WITHHELD.to_string()),
                _ => None,
            },
        })
        .collect();
    let unrepaired = rep
        .drift
        .iter()
        .filter(|d| rep.failed.contains(&d.name))
        .count();
    Run {
        command: "apply",
        root,
        started_at,
        result,
        bundle: Some(rep.generation.clone()),
        fleet: Some(rep.manifest.fleet.clone()),
        resources,
        drift: rep.drift.clone(),
        error: None,
        status,
        drifted_after: Some(unrepaired),
        signature: None,
        health: probes,
        refused: false,
        refused_release: None,
        reboot_required: rep.reboot_required.clone(),
        rebooting: None,
        live: rep
            .live
            .iter()
            .filter(|l| l.error.is_none())
            .map(|l| bell_store::LiveFile {
                path: l.path.clone(),
                service: l.service.clone(),
                ready: l.ready.clone(),
                since: l.since,
            })
            .collect(),
    }
}

pub fn from_check<'a>(root: &'a Path, started_at: u64, rep: &CheckReport) -> Run<'a> {
    let checked = if !rep.drift.is_empty() {
        State::Drifted
    } else if !rep.errors.is_empty() {
        State::Failed
    } else {
        State::Success
    };
    let (probes, healthy) = health(&rep.health);
    let result = if checked == State::Success {
        healthy
    } else {
        checked
    };
    Run {
        command: "check",
        root,
        started_at,
        result,
        bundle: Some(rep.generation.clone()),
        fleet: Some(rep.fleet.clone()),
        resources: rep
            .resources
            .iter()
            .map(|c| ResourceResult {
                key: c.key.clone(),
                result: c.result.clone(),
                detail: c.detail.clone(),
                output: None,
            })
            .collect(),
        drift: rep.drift.clone(),
        error: None,
        status: BTreeMap::from([
            ("check".to_string(), checked),
            ("health".to_string(), healthy),
        ]),
        drifted_after: Some(rep.drift.len()),
        signature: None,
        health: probes,
        refused: false,
        refused_release: None,
        reboot_required: rep.reboot_required.clone(),
        rebooting: None,
        live: Vec::new(),
    }
}

/// What a report says of the output of a failed script that may hold a secret.
const WITHHELD: &str = "(output withheld: the resource carries a secret; see the log on the host)";

/// The last lines of a failed script's output: at most 20 lines and 2 KiB, enough for why.
fn last_lines(log: &Path) -> Option<String> {
    let tail = crate::rootfs::read_tail(log, 2048).ok()?;
    let lines: Vec<&str> = tail.lines().collect();
    // The first line may be cut in the middle when the log was longer.
    let skip = usize::from(tail.len() == 2048 && lines.len() > 1);
    let kept: Vec<&str> = lines[skip..].iter().rev().take(20).rev().copied().collect();
    let text = kept.join("\n");
    (!text.trim().is_empty()).then_some(text)
}

/// A refused run: nothing was done, so the category records a failure, filed under the
/// bundle and release the host still runs (see [`emit`]). The fleet comes from the refused
/// bundle's manifest as far as it can be read at all, for a host that never applied one.
pub fn from_refusal<'a>(
    command: &'a str,
    root: &'a Path,
    started_at: u64,
    bundle: Option<&Path>,
    refusal: &Refusal,
) -> Run<'a> {
    let fleet = bundle.and_then(|dir| {
        crate::rootfs::read_record(&dir.join(bell_bundle::MANIFEST_FILE))
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("fleet").and_then(|f| f.as_str()).map(str::to_string))
    });
    Run {
        command,
        root,
        started_at,
        result: State::Failed,
        bundle: None,
        fleet,
        resources: Vec::new(),
        drift: Vec::new(),
        error: Some(refusal.message.clone()),
        status: BTreeMap::from([(command.to_string(), State::Failed)]),
        drifted_after: None,
        signature: None,
        health: Vec::new(),
        refused: true,
        refused_release: None,
        reboot_required: Vec::new(),
        rebooting: None,
        live: Vec::new(),
    }
}

/// Files the report and writes the metrics; problems are printed, never fatal.
pub fn emit(sinks: &Sinks, run: Run) {
    if !sinks.wanted() {
        return;
    }
    let host = match host_name(sinks.host.as_deref(), run.root) {
        Ok(host) => host,
        Err(e) => {
            errln!("warning: no report or metrics written: {e}");
            return;
        }
    };
    // The applied generation as recorded, for fleet and metrics when the run itself did not
    // get that far.
    let recorded = crate::statedir::open_root(run.root)
        .ok()
        .and_then(|root| state::load(&root).ok().map(|s| (root, s)));
    let applied: Option<Manifest> = recorded.as_ref().and_then(|(root, s)| {
        let id = s.generation.as_ref()?;
        let dir = state::generation_dir(root, id);
        let text = crate::rootfs::read_record(&dir.join(bell_bundle::MANIFEST_FILE))
            .ok()
            .flatten()?;
        Manifest::from_json(&text).ok()
    });
    let fleet = run
        .fleet
        .clone()
        .or_else(|| applied.as_ref().map(|m| m.fleet.clone()));
    // The applied bundle's release, kept by the apply: a `check` or a re-apply that was not
    // told one reports it, and a refused run reports what the host still runs.
    let state = recorded.as_ref().map(|(_, s)| s);
    let still = |s: &state::State| (s.generation.clone(), s.release.clone());
    let (bundle, release) = if run.refused {
        state.map(still).unwrap_or_default()
    } else {
        let (generation, kept) = state.map(still).unwrap_or_default();
        let same = run.bundle.is_none() || run.bundle == generation;
        let release = sinks.release.clone().or(if same { kept } else { None });
        (run.bundle.clone().or(generation), release)
    };
    let finished_at = state::now();
    if let Some(dest) = &sinks.report {
        match fleet.clone() {
            None => errln!(
                "warning: no report filed: the fleet is unknown (the bundle cannot be read and nothing was applied)"
            ),
            Some(fleet) => {
                let mut report = Report {
                    format: REPORT_FORMAT,
                    host: host.clone(),
                    fleet,
                    command: run.command.to_string(),
                    result: run.result,
                    release: release.clone(),
                    bundle: bundle.clone(),
                    started_at: run.started_at,
                    finished_at,
                    resources: run.resources.clone(),
                    drift: run.drift.clone(),
                    error: run.error.clone(),
                    signature: run.signature.clone(),
                    status: run.status.clone(),
                    health: run.health.clone(),
                    reboot_required: run.reboot_required.clone(),
                    rebooting: run.rebooting.clone(),
                    refused_release: match (&run.refused_release, run.refused) {
                        (Some(release), _) => Some(release.clone()),
                        (None, true) => sinks.release.clone(),
                        (None, false) => None,
                    },
                    live: run.live.clone(),
                    snapshots: applied
                        .as_ref()
                        .filter(|_| bundle.is_some() && bundle == state.and_then(|s| s.generation.clone()))
                        .map(|m| m.snapshots.clone())
                        .unwrap_or_default(),
                    since: None,
                    attempts: None,
                    sequence: None,
                    signer: None,
                    proof: None,
                };
                let key_root = crate::rootfs::Root::open(run.root).ok();
                let given = sinks.identity.as_deref();
                let key = key_root.as_ref().and_then(|root| match identity::signing_key(root, given) {
                    Ok(key) => key,
                    Err(e) => {
                        errln!("warning: the report is filed unsigned: {e}");
                        None
                    }
                });
                let mut next_sequence = || match &key_root {
                    Some(root) => identity::next_sequence(root, finished_at),
                    None => Ok(finished_at),
                };
                let mut file = || Store::open(dest, &sinks.access)
                    .map(|store| {
                        let limits = bell_wire::etcd::Limits::HOST;
                        store.with_limits(match sinks.until {
                            Some(deadline) => limits.until(deadline),
                            None => limits,
                        })
                    })
                    .and_then(|store| {
                    let signer = key.as_ref().map(|key| bell_store::Signer {
                        key: &key.key,
                        next_sequence: &mut next_sequence,
                    });
                    store.record_with(&mut report, signer, sinks.read.as_ref())?;
                    // A provider of a service some live file follows files its health beside:
                    // what its consumers read (`bell_store::ready`).
                    let provides = applied.as_ref().is_some_and(|m| !m.provides.is_empty());
                    if let (true, Some(mut health)) = (provides, health_report(&report)) {
                        let signer = key.as_ref().map(|key| bell_store::Signer {
                            key: &key.key,
                            next_sequence: &mut next_sequence,
                        });
                        store.record_with(&mut health, signer, sinks.read.as_ref())?;
                    }
                    let root = recorded.as_ref().map(|(root, _)| root);
                    keep_alive(&store, dest, &report, root, sinks)
                });
                // A host that went back files why once its network is back, which going back
                // is for and which may take its networking a moment: tried again for a while.
                let again = Duration::from_secs(if run.result == State::Reverted { 30 } else { 0 });
                let until = bell_wire::Deadline::after(again, "").or_sooner(sinks.until);
                let mut filed = file();
                while filed.is_err() && !until.passed() {
                    std::thread::sleep(Duration::from_millis(500));
                    filed = file();
                }
                if let Err(e) = filed {
                    errln!("warning: the report was not filed: {e}");
                }
            }
        }
    }
    if let Some(path) = &sinks.metrics {
        let mut kinds = BTreeMap::new();
        for resource in applied.iter().flat_map(|m| &m.resources) {
            *kinds.entry(resource.kind.clone()).or_insert(0) += 1;
        }
        let m = Metrics {
            host,
            fleet: fleet.unwrap_or_default(),
            bundle: state.and_then(|s| s.generation.clone()),
            release,
            applied_at: state.and_then(|s| s.applied_at),
            apply_ok: state.and_then(|s| s.result.as_deref().map(|r| r == "ok")),
            drifted: run.drifted_after,
            kinds,
            runs: remember_run(
                recorded.as_ref().map(|(root, _)| root),
                run.command,
                finished_at,
                run.result == State::Success,
            ),
            probes: run
                .health
                .iter()
                .map(|p| (p.name.clone(), p.healthy))
                .collect(),
        };
        if let Err(e) = metrics::write(path, &metrics::render(&m)) {
            errln!("warning: {e}");
        }
    }
}

/// Files a provider's health as `bell-run live` found it between runs: its probes' outcomes,
/// signed like every report, under `reports/health/HOST` (see `bell_store::ready`).
pub fn file_health(
    store: &Store,
    root: &crate::rootfs::Root,
    of: &Between,
    outcomes: &[ProbeOutcome],
) -> Result<(), String> {
    let (probes, state) = health(outcomes);
    let mut report = of.report(bell_store::ready::HEALTH_COMMAND, state);
    report.status = BTreeMap::from([("health".to_string(), state)]);
    report.health = probes;
    file_signed(store, root, of.identity, report)
}

/// Files what `bell-run live` left in each live file (`reports/live/HOST`), after it put one
/// in place or failed to: the host's word about itself, between its runs' reports. `failed`:
/// why the last file it tried was not put in place.
pub fn file_live(
    store: &Store,
    root: &crate::rootfs::Root,
    of: &Between,
    live: Vec<bell_store::LiveFile>,
    failed: Option<String>,
) -> Result<(), String> {
    let state = match failed {
        Some(_) => State::Failed,
        None => State::Success,
    };
    let mut report = of.report(bell_store::keys::LIVE_COMMAND, state);
    report.live = live;
    report.error = failed;
    file_signed(store, root, of.identity, report)
}

/// What a report filed between runs is of: the host and the generation it has applied.
pub struct Between<'a> {
    pub host: &'a str,
    pub manifest: &'a Manifest,
    pub generation: &'a str,
    pub release: Option<String>,
    /// The key reports are signed with when it is not the root's (`--identity`).
    pub identity: Option<&'a Path>,
}

impl Between<'_> {
    /// A report of `command` with nothing of a run in it.
    fn report(&self, command: &str, result: State) -> Report {
        let (host, fleet) = (self.host, &self.manifest.fleet);
        Report {
            release: self.release.clone(),
            bundle: Some(self.generation.to_string()),
            snapshots: self.manifest.snapshots.clone(),
            ..Report::new(host, fleet, command, result, state::now())
        }
    }
}

/// Signs `report` with the host's key (when it has one) and files it.
fn file_signed(
    store: &Store,
    root: &crate::rootfs::Root,
    identity: Option<&Path>,
    mut report: Report,
) -> Result<(), String> {
    let key = identity::signing_key(root, identity)?;
    let at = report.finished_at;
    let mut next_sequence = || identity::next_sequence(root, at);
    let signer = key.as_ref().map(|key| bell_store::Signer {
        key: &key.key,
        next_sequence: &mut next_sequence,
    });
    store.record(&mut report, signer)
}

/// The health report a provider files after a run that says how healthy it is (an apply
/// whose probes ran, or one that failed; a check): `None` for a run that says nothing of it
/// (a refused one).
fn health_report(report: &Report) -> Option<Report> {
    if report.error.is_some() {
        return None;
    }
    let state = match report.status.get("health") {
        Some(state) => *state,
        None if report.status.get("apply") == Some(&State::Failed) => State::Failed,
        None => return None,
    };
    Some(Report {
        command: bell_store::ready::HEALTH_COMMAND.to_string(),
        result: state,
        resources: Vec::new(),
        drift: Vec::new(),
        status: BTreeMap::from([("health".to_string(), state)]),
        reboot_required: Vec::new(),
        rebooting: None,
        refused_release: None,
        live: Vec::new(),
        since: None,
        attempts: None,
        sequence: None,
        signer: None,
        proof: None,
        ..report.clone()
    })
}

/// When each command last ran and whether it succeeded, this run included: one metrics file
/// holds the series of every command, so bell-run remembers the others in its own directory.
fn remember_run(
    root: Option<&crate::rootfs::Root>,
    command: &str,
    at: u64,
    ok: bool,
) -> BTreeMap<String, metrics::LastRun> {
    // Only where bell-run keeps its state already: a refused first run leaves the root alone.
    let path = root
        .filter(|root| root.bell_dir().is_dir())
        .map(|root| root.bell_dir().join("runs.json"));
    let mut runs: BTreeMap<String, metrics::LastRun> = path
        .as_ref()
        .and_then(|p| crate::rootfs::read_record(p).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    runs.insert(command.to_string(), metrics::LastRun { at, ok });
    if let Some(path) = path {
        let text = serde_json::to_string(&runs).unwrap_or_default();
        if let Err(e) = crate::rootfs::write_atomic(&path, text.as_bytes()) {
            errln!("warning: cannot write {}: {e}", path.display());
        }
    }
    runs
}

/// Renews the host's liveness lease, and remembers a new one in bell-run's own directory.
fn keep_alive(
    store: &Store,
    dest: &str,
    report: &Report,
    root: Option<&crate::rootfs::Root>,
    sinks: &Sinks,
) -> Result<(), String> {
    let path = root.map(|root| root.bell_dir().join("lease.json"));
    let known: Option<Lease> = path
        .as_ref()
        .and_then(|p| crate::rootfs::read_record(p).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok());
    let mine = |l: &Lease| l.store == dest && l.fleet == report.fleet && l.host == report.host;
    let previous = known
        .as_ref()
        .filter(|l| mine(l))
        .map(|l| bell_store::Lease {
            id: l.id,
            renewed_at: l.renewed_at,
        });
    let Some(now) = store.keep_alive_with(
        &report.fleet,
        &report.host,
        previous,
        sinks.alive_ttl,
        state::now(),
        sinks.read.as_ref(),
    )?
    else {
        return Ok(());
    };
    if let (Some(path), true) = (path, previous != Some(now)) {
        let lease = Lease {
            store: dest.to_string(),
            fleet: report.fleet.clone(),
            host: report.host.clone(),
            id: now.id,
            renewed_at: now.renewed_at,
        };
        let text = serde_json::to_string(&lease).unwrap_or_default();
        crate::rootfs::write_atomic(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

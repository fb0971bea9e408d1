//! `bell-run pull`: one reconciliation step, meant for a timer. Find the release this host
//! should run (the newest at the source, or the one the fleet's store names), check it (trusted
//! signature, no rollback, not expired), find this host's bundle in it, fetch what the applied
//! generation does not already hold into a staging directory (every file checked against its
//! sha256 while it streams), then the normal verify and apply.
//!
//! Every refusal comes before anything under the root changes: the release is checked in
//! memory, and a download that fails is discarded whole (an interrupted one, killed with its
//! process, is resumed from the files that were complete).

use crate::apply::{self, Report};
use crate::budget::{self, Budget};
use crate::context::Refusal;
use crate::fetch::{self, FetchError, Source};
use crate::rebooting::{self, Decision};
use crate::rootfs::{self, Root};
use crate::trust::{self, TrustedKeys};
use crate::{confirm, report, state, statedir};
use bell_bundle::{Expected, Manifest, Release};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The largest signature bell-run reads (a minisign signature is about 300 bytes).
const MAX_SIGNATURE_BYTES: u64 = 16 << 10;

pub struct PullOptions {
    pub source: Source,
    pub host: Option<String>,
    pub trust: Option<PathBuf>,
    pub store: Option<String>,
    /// How to reach an `etcds://` store.
    pub access: bell_store::Access,
    pub fleet: Option<String>,
    /// Where the rollout groups' semaphores are: `/bell/<fleet>` unless given (airlock's is
    /// `com.coreos.airlock`).
    pub lock_prefix: Option<String>,
    pub apply: apply::Options,
    /// When the pull's every request must be over (`--fetch-timeout`), the source's and the
    /// store's.
    pub deadline: bell_wire::Deadline,
}

/// What the pull learnt before it applied or refused: it goes into the report either way.
#[derive(Debug, Default, Clone)]
pub struct Established {
    pub fleet: Option<String>,
    pub release: Option<String>,
    /// `verified: key ID, sequence N` or `unverified: …`.
    pub signature: Option<String>,
    /// What the store's first request read for filing the report (see `bell_store::prefetch`).
    pub read: Option<bell_store::prefetch::Prefetched>,
    /// The store's revision when the pull read what it decided on, and those keys: what a
    /// host at a gateway long-polls for (`pull --wait`).
    pub decided_on: Option<(i64, Vec<String>)>,
}

pub struct Pulled {
    /// The bundle was the applied generation already: a re-apply, nothing fetched.
    pub already_applied: bool,
    pub fetched: usize,
    pub reused: usize,
    pub report: Report,
    /// What happened to the host's slot of its rollout group, when there is a store.
    pub slot: Option<String>,
    pub reboot: Reboot,
    /// Set when the apply was not confirmed in time and the host went back to the generation
    /// before (`report` is that apply's): why.
    pub reverted: Option<String>,
    /// The release it took back then (the one this pull applied, or an earlier run's).
    pub taken_back: Option<String>,
}

/// What the pull decided about a reboot the host needs.
#[derive(Default)]
pub struct Reboot {
    /// Why it does not reboot, or that it does: for the output.
    pub note: Option<String>,
    /// The reboot to make once the report is filed.
    pub plan: Option<rebooting::Plan>,
}

pub fn pull(opts: &PullOptions, found: &mut Established) -> Result<Pulled, Refusal> {
    let root = statedir::open_root(&opts.apply.root)?;
    let host = report::host_name(opts.host.as_deref(), &root.dir).map_err(Refusal::new)?;
    finish_interrupted_switch(&root)?;
    // An apply waiting for its confirmation is settled first: confirmed, or taken back (with
    // no network at all: it is what the fleet being away calls for).
    let before = state::load(&root).map_err(Refusal::new)?;
    if let Some(confirming) = &confirm::due(&root, &before, state::boot_id().as_deref())? {
        let fleet = fleet_of(opts, &root, &before)?;
        let path = confirming.release.as_ref().map_or_else(
            || bell_bundle::RELEASE_FILE.to_string(),
            |v| format!("{}/{v}.json", bell_bundle::RELEASES_DIR),
        );
        let generation = &confirming.generation;
        let reach = |within| confirm_try(opts, &root, generation, &fleet, &host, &path, within);
        if let confirm::Ended::TimedOut(why) = confirm::wait(&root, confirming, &reach)? {
            found.fleet = Some(fleet);
            return go_back(opts, &root, confirming, &why);
        }
    }
    let state = state::load(&root).map_err(Refusal::new)?;
    let keys = trusted_keys(&root, opts.trust.as_deref())?;
    // Shared with the apply, which reads the providers of its live files from it.
    let store = match &opts.store {
        Some(dest) => Some(std::sync::Arc::new(
            bell_store::Store::open(dest, &opts.access)
                .map_err(Refusal::new)?
                .with_limits(bell_wire::etcd::Limits::HOST.until(opts.deadline)),
        )),
        None => None,
    };
    let chosen = choose(opts, &root, &host, &state, store.as_deref(), found)?;
    let checked = check_release(opts, &root, &state, keys.as_ref(), &chosen.path, found)?;
    let release = &checked.release;

    let store_names = chosen
        .store_bundle
        .as_ref()
        .map(|(version, bundle)| (version.as_str(), bundle.as_str()));
    let entry = bell_bundle::accept::host_entry(
        release,
        &host,
        store_names,
        &opts.source.describe(&chosen.path),
    )
    .map_err(|refused| {
        let refusal = Refusal::new(refused.message);
        match refused.help {
            Some(help) => refusal.help(help),
            None => refusal,
        }
    })?;
    let id = entry.bundle.clone();
    // The key this host signs with (its reports, its slot's holder record), read once.
    let host_key = crate::identity::signing_key(&root, opts.apply.identity.as_deref());
    warn_unless_reports_verify(&host_key, &host, entry, release);

    let generation = state::generation_dir(&root, &id);
    let already_applied = state.generation.as_deref() == Some(id.as_str()) && generation.is_dir();
    if let (Some(went_back), false) = (confirm::refused(&state, &release.version), already_applied)
    {
        return Err(Refusal::new(format!(
            "release {} was taken back on this host: {}; it is not applied here again",
            bell_bundle::short_id(&release.version),
            went_back.reason
        ))
        .help("a newer release is applied: publish one with the fix (or the release before)")
        .reverted());
    }
    if let (Some(hold), false) = (&chosen.hold, already_applied) {
        // Held: it stays on what it runs. A hold only ever keeps a host where it is, so one
        // forged in the store delays the host and does nothing else.
        return Err(Refusal::new(format!(
            "{}: stays on its bundle, nothing was changed",
            hold.describe()
        ))
        .help("`bellc unhold HOST` lets it take its release again")
        .waiting());
    }
    let (dir, fetched, reused, sealed) = if already_applied {
        (generation, 0, 0, None)
    } else {
        let secrets = (host.as_str(), entry.secrets.as_deref());
        let staged = stage(&root, &opts.source, release, &id, &state, secrets)?;
        (staged.dir, staged.fetched, staged.reused, staged.sealed)
    };
    // The disruption budget: a slot of the host's rollout group before anything changes.
    let budget = match store.as_deref() {
        Some(bell_store::Store::Etcd(etcd)) => {
            // The holder record is signed, so that `bellc lock status` can tell it is this
            // host's; a key that cannot be read leaves it unsigned, never the pull undone.
            let key = host_key.unwrap_or_else(|e| {
                errln!("warning: the slot's holder record is not signed: {e}");
                None
            });
            Some(Budget::of(
                etcd,
                opts.lock_prefix.as_deref(),
                release,
                entry,
                key,
                chosen.prefetched.as_ref(),
            ))
        }
        _ => None,
    };
    let mut slot = None;
    if let (Some(budget), false) = (&budget, already_applied) {
        match budget.take(&host) {
            Ok(taken) => slot = Some(taken),
            Err(refusal) => {
                // Waiting for a slot, it waits for the group's semaphore to change as well.
                if let (true, Some((_, keys))) = (refusal.waiting, &mut found.decided_on) {
                    keys.push(bell_store::keys::semaphore_key(
                        &budget.prefix,
                        &budget.group,
                    ));
                }
                return Err(refusal);
            }
        }
    }
    // The first pull after a reboot bell-run made (another boot than the one it was ordered
    // in) runs `after-boot` with the probes.
    let boot = state::boot_id();
    let back = rebooting::back_from(rebooting::load(&root), boot.as_deref());
    let applying = apply::Options {
        release: Some(release.version.clone()),
        sealed,
        after_boot: back.is_some(),
        // The fleet's store, or else the one the run reports to (as an apply's).
        live_store: store.clone().or_else(|| opts.apply.live_store.clone()),
        ..opts.apply.clone()
    };
    let result = apply::apply(&dir, &applying);
    if !already_applied {
        // bell-run applies from its own copy of the bundle, never from the staging directory.
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_dir(dir.parent().unwrap_or(&dir));
    }
    let mut report = match result {
        Ok(report) => report,
        Err(refusal) => {
            // Refused before anything changed: the host is where it was, and the slot goes back.
            if let (Some(budget), false) = (&budget, refusal.partial) {
                let _ = budget.give_back(&host);
            }
            return Err(refusal);
        }
    };
    // A new generation whose bundle asks for it is kept only once the host reaches its fleet
    // again with its probes passing.
    let (mut reverted, mut taken_back) = (None, None);
    if let (Some(confirm), false) = (report.manifest.confirm, already_applied) {
        let confirming = state::Confirming {
            generation: id.clone(),
            release: Some(release.version.clone()),
            deadline: 0,
            tries_from: 0,
            back_to: state.generation.clone(),
            back_to_release: state.release.clone(),
            timeout: confirm.timeout,
            // In force in full only after a reboot: confirmed again in the next boot.
            reboots_from: boot.clone().filter(|_| !report.reboot_required.is_empty()),
            after_boot: false,
        }
        .timed_from(state::now());
        confirm::begin(&root, confirming.clone())?;
        let fleet = release.fleet.clone();
        let reach = |within| confirm_try(opts, &root, &id, &fleet, &host, &chosen.path, within);
        if let confirm::Ended::TimedOut(why) = confirm::wait(&root, &confirming, &reach)? {
            let back = go_back(opts, &root, &confirming, &why)?;
            reverted = back.reverted;
            taken_back = back.taken_back;
            report = back.report;
        }
    }
    let after = AfterApply {
        root: &root,
        opts,
        host: &host,
        id: &id,
        budget: budget.as_ref(),
        back: back.as_ref(),
        boot,
    };
    let (healthy, reboot) = match reverted {
        // Gone back: as a failed apply, it keeps its slot and does not reboot.
        Some(_) => (false, Reboot::default()),
        None => after.settle_reboot(&mut report, &mut slot),
    };
    let slot = after.settle_slot(healthy, &reboot, slot);
    if let Some(budget) = &budget {
        budget.remember(&root);
    }
    if let Some((key, sequence)) = checked.signed_by {
        trust::save_accepted(
            &root,
            &trust::Accepted {
                fleet: release.fleet.clone(),
                version: release.version.clone(),
                sequence,
                sha256: checked.sha256,
                key,
            },
        )
        .map_err(Refusal::new)?;
    }
    Ok(Pulled {
        already_applied,
        fetched,
        reused,
        report,
        slot,
        reboot,
        reverted,
        taken_back,
    })
}

/// Every health probe of applied generation `generation`, run now (a confirmation's tries
/// each run them again: what a change breaks a moment after its apply, or in the next boot,
/// counts); why not, when one fails.
fn probes_pass(opts: &PullOptions, root: &Root, generation: &str) -> Result<(), String> {
    let dir = state::generation_dir(root, generation);
    let manifest = rootfs::read_record(&dir.join(bell_bundle::MANIFEST_FILE))
        .ok()
        .flatten()
        .and_then(|text| bell_bundle::Manifest::from_json(&text).ok())
        .ok_or_else(|| {
            format!(
                "generation {} cannot be read",
                bell_bundle::short_id(generation)
            )
        })?;
    let ctx = crate::context::Ctx {
        root,
        offline: opts.apply.offline,
        timeout: std::time::Duration::from_secs(opts.apply.script_timeout),
        now: state::now(),
        boot: state::boot_id(),
        clock: None,
        store: None,
    };
    let outcomes = crate::health::run_probes(&ctx, &manifest, &dir, generation);
    match outcomes.iter().find(|o| !o.healthy && o.not_run.is_none()) {
        Some(failing) => Err(format!("its health probe `{}` fails", failing.name)),
        None => Ok(()),
    }
}

/// One try of the confirmation of `generation`: its health probes pass (run now), and the
/// fleet is reached as the next pull would reach it, on new connections, within `within`: the
/// host's desired release read from the store (when it pulls from one), and the release file
/// `path` fetched from the mirror.
fn confirm_try(
    opts: &PullOptions,
    root: &Root,
    generation: &str,
    fleet: &str,
    host: &str,
    path: &str,
    within: std::time::Duration,
) -> Result<(), String> {
    probes_pass(opts, root, generation)?;
    let deadline = bell_wire::Deadline::after(within, "the fleet did not answer in time");
    if let Some(dest) = &opts.store {
        bell_store::Store::open(dest, &opts.access)
            .map(|s| s.with_limits(bell_wire::etcd::Limits::HOST.until(deadline)))
            .and_then(|store| store.desired(fleet, host))
            .map_err(|e| format!("cannot reach the store: {e}"))?;
    }
    opts.source
        .with_deadline(deadline)
        .get(path, rootfs::MAX_RECORD_BYTES)
        .map_err(|e| format!("cannot reach the mirror: {e}"))?;
    Ok(())
}

/// Applies the generation `confirming` replaced again, as `bell-run rollback` would, and
/// remembers the release as taken back.
fn go_back(
    opts: &PullOptions,
    root: &Root,
    confirming: &state::Confirming,
    why: &str,
) -> Result<Pulled, Refusal> {
    let short = bell_bundle::short_id(&confirming.generation);
    let Some(back_to) = &confirming.back_to else {
        // The first apply on this host: there is no generation to go back to, and giving the
        // host back (`bell-run remove`) would also forget what it refuses.
        confirm::reverted(root, confirming, why)?;
        return Err(Refusal::new(format!(
            "generation {short} was not confirmed in time ({why}), and it is the first this \
             host applied: there is no generation to go back to, so it stays"
        ))
        .help("`bell-run remove` gives the host back as it was before bell")
        .reverted());
    };
    let reason = format!(
        "generation {short} was not confirmed in time ({why}): back on {}",
        bell_bundle::short_id(back_to)
    );
    errln!("bell-run: {reason}");
    let applying = apply::Options {
        release: confirming.back_to_release.clone(),
        ..opts.apply.clone()
    };
    let report = apply::apply(&state::generation_dir(root, back_to), &applying)
        .map_err(|r| Refusal::new(format!("{reason}, but its apply failed: {}", r.message)))?;
    confirm::reverted(root, confirming, &reason)?;
    Ok(Pulled {
        already_applied: false,
        fetched: 0,
        reused: 0,
        report,
        slot: None,
        reboot: Reboot::default(),
        reverted: Some(reason),
        taken_back: confirming.release.clone(),
    })
}

/// A switch of files that a killed run left halfway is finished (or undone, before its
/// commit) first, whatever this pull then does: one refused because the mirror or the store
/// is away must not leave the host on a mix of two generations until they are back. Nothing
/// is locked or written when there is no journal, so that a refusal otherwise leaves the root
/// as it was.
fn finish_interrupted_switch(root: &Root) -> Result<(), Refusal> {
    if crate::journal::load(root).map_err(Refusal::new)?.is_none() {
        return Ok(());
    }
    let _lock = apply::lock(root)?;
    let mut state = state::load(root).map_err(Refusal::new)?;
    let done = crate::journal::recover(root, &mut state).map_err(|e| {
        Refusal::new(format!("cannot finish the interrupted switch: {e}"))
            .help("fix the cause and run `bell-run recover`")
    })?;
    if let Some(done) = done {
        outln!("bell-run: {done}");
    }
    Ok(())
}

/// The release a pull takes, before it is fetched.
struct Chosen {
    /// Its path at the source: `release.json`, or the store's `releases/VERSION.json`.
    path: String,
    /// The version and the bundle the store names for this host.
    store_bundle: Option<(String, String)>,
    /// An operator's hold of this host, read with them.
    hold: Option<bell_store::hold::Hold>,
    /// What the store's one request read besides (see `bell_store::prefetch`).
    prefetched: Option<bell_store::prefetch::Prefetched>,
}

/// Which release: the newest at the source, or the one the store names for this fleet.
fn choose(
    opts: &PullOptions,
    root: &Root,
    host: &str,
    state: &state::State,
    store: Option<&bell_store::Store>,
    found: &mut Established,
) -> Result<Chosen, Refusal> {
    let Some(store) = store else {
        return Ok(Chosen {
            path: bell_bundle::RELEASE_FILE.to_string(),
            store_bundle: None,
            hold: None,
            prefetched: None,
        });
    };
    let fleet = fleet_of(opts, root, state)?;
    // A refusal from here on is filed under it.
    found.fleet = Some(fleet.clone());
    // One request reads what the whole pull needs of the store when it changes nothing: the
    // report and liveness keys, and the semaphore of its last group.
    let slot = budget::remembered(root, &store.describe());
    let slot = slot.as_ref().map(|(p, g)| (p.as_str(), g.as_str()));
    let also = bell_store::prefetch::pull_keys(&fleet, host, slot);
    let (desired, read) = store
        .desired_with(&fleet, host, &also)
        .map_err(Refusal::new)?;
    found.read = Some(read.clone());
    found.decided_on = Some((
        desired.revision,
        bell_store::Desired::keys(&fleet, host).into(),
    ));
    let (Some(version), Some(bundle)) = (desired.version, desired.bundle) else {
        return Err(Refusal::new(format!(
            "the store has no desired release for host `{host}` of fleet `{fleet}`"
        ))
        .help("publish a release that has this host with `bellc publish --store`"));
    };
    if !bell_bundle::is_bundle_id(&version) {
        return Err(Refusal::new(format!(
            "the store names `{}` as the release, which is not a version",
            bell_bundle::one_line(&version)
        )));
    }
    Ok(Chosen {
        path: format!("{}/{version}.json", bell_bundle::RELEASES_DIR),
        store_bundle: Some((version, bundle)),
        hold: desired.hold,
        prefetched: Some(read),
    })
}

/// A release fetched and checked: signed by a trusted key (when the host trusts any), of
/// this host's fleet, and newer than the last it took.
struct Checked {
    release: Release,
    sha256: String,
    /// The key that signed it and its sequence, recorded once it is applied.
    signed_by: Option<(String, u64)>,
}

fn check_release(
    opts: &PullOptions,
    root: &Root,
    state: &state::State,
    keys: Option<&TrustedKeys>,
    path: &str,
    found: &mut Established,
) -> Result<Checked, Refusal> {
    let fetch_refusal = |what: &str, e: FetchError| {
        Refusal::new(format!("cannot fetch {what}: {e}"))
            .help("nothing was changed; the next pull tries again")
    };
    let bytes = opts
        .source
        .get(path, rootfs::MAX_RECORD_BYTES)
        .map_err(|e| fetch_refusal("the release", e))?;
    let sha256 = bell_bundle::sha256_hex(&bytes);
    // The signature is checked on the raw bytes before they are parsed: an unsigned file
    // (however large or odd) costs no more than its hash.
    let signer = match keys {
        Some(keys) => {
            let signature_path = format!("{path}{}", bell_bundle::SIGNATURE_SUFFIX);
            let signature = match opts.source.get(&signature_path, MAX_SIGNATURE_BYTES) {
                Ok(sig) => String::from_utf8_lossy(&sig).into_owned(),
                Err(FetchError::NotFound(_)) => {
                    return Err(Refusal::new(format!(
                        "the release {} is not signed, and this host applies only releases \
                         signed by a key in {}",
                        opts.source.describe(path),
                        keys.file.display()
                    ))
                    .help("sign it with `bellc publish OUT --sign-key KEY`"))
                }
                Err(e) => return Err(fetch_refusal("the release's signature", e)),
            };
            Some(keys.verify(&bytes, &signature).map_err(Refusal::new)?)
        }
        None => None,
    };
    let release: Release = serde_json::from_slice(&bytes).map_err(|e| {
        Refusal::new(format!(
            "{} is not a release: {e}",
            opts.source.describe(path)
        ))
    })?;
    found.fleet = Some(release.fleet.clone());
    found.release = Some(release.version.clone());
    let accepted = trust::load_accepted(root).map_err(Refusal::new)?;
    check_fleet(opts, root, state, &accepted, &release)?;
    let signed_by = match signer {
        Some(key) => {
            let sequence =
                trust::check_fresh(&release, &sha256, accepted.of(&release.fleet), state::now())
                    .map_err(Refusal::new)?;
            found.signature = Some(format!("verified: key {key}, sequence {sequence}"));
            Some((key, sequence))
        }
        None => {
            found.signature = Some(
                "unverified: this host trusts no key (`--trust FILE` or /etc/bell/trusted.pub)"
                    .to_string(),
            );
            None
        }
    };
    Ok(Checked {
        release,
        sha256,
        signed_by,
    })
}

/// What the pull knows once the bundle is applied, to settle a reboot and the host's slot.
struct AfterApply<'a> {
    root: &'a Root,
    opts: &'a PullOptions,
    host: &'a str,
    id: &'a str,
    budget: Option<&'a Budget<'a>>,
    /// The record of the reboot this boot is back from, if it is.
    back: Option<&'a rebooting::Record>,
    boot: Option<String>,
}

impl AfterApply<'_> {
    /// Whether the host is healthy now, and what becomes of a reboot it needs: cleared when it
    /// is back from one and the reasons are gone, not made twice for one bundle, or prepared
    /// (under the apply lock, with a slot of its group) when its window and policy allow.
    fn settle_reboot(&self, report: &mut Report, slot: &mut Option<String>) -> (bool, Reboot) {
        let mut healthy = report.failed.is_empty() && report.health.iter().all(|p| p.healthy);
        let mut reboot = Reboot::default();
        match self.back {
            Some(_) if report.reboot_required.is_empty() => {
                reboot.note = Some(if healthy {
                    rebooting::clear(self.root);
                    "back from its reboot: the reasons are gone and it is healthy".to_string()
                } else {
                    "back from its reboot, not healthy yet".to_string()
                });
            }
            // The reboot did not do what it was for: rebooting again would not either, and a
            // host that boots in a loop is worse than one that waits for someone.
            Some(record) if record.bundle == self.id => {
                healthy = false;
                report.failed.push("reboot".to_string());
                reboot.note = Some(format!(
                    "rebooted, and still needs a reboot ({}): it keeps its slot and does not \
                     reboot again for this bundle",
                    report.reboot_required.join("; ")
                ));
            }
            _ => {
                let now = state::now();
                let manifest = report.manifest.reboot.as_ref();
                let offline = self.opts.apply.offline;
                match rebooting::decide(manifest, &report.reboot_required, offline, now) {
                    Decision::None => {}
                    Decision::Waits(why) => reboot.note = Some(why),
                    Decision::Reboot if !report.failed.is_empty() => {
                        reboot.note = Some("not rebooting while its apply failed".to_string());
                    }
                    Decision::Reboot => {
                        healthy = self.prepare_reboot(report, slot, now, &mut reboot) && healthy;
                    }
                }
            }
        }
        (healthy, reboot)
    }

    /// Prepares the reboot, with the slot it took for this apply or one taken now
    /// (airlock-style); says whether the host stays healthy (it does not: it reboots, or it
    /// could not take a slot and waits).
    fn prepare_reboot(
        &self,
        report: &mut Report,
        slot: &mut Option<String>,
        now: u64,
        reboot: &mut Reboot,
    ) -> bool {
        if let (Some(budget), None) = (self.budget, &slot) {
            match budget.take(self.host) {
                Ok(took) => *slot = Some(took),
                Err(refusal) => {
                    reboot.note = Some(refusal.message);
                    return true;
                }
            }
        }
        let ctx = crate::context::Ctx {
            root: self.root,
            offline: false,
            timeout: std::time::Duration::from_secs(self.opts.apply.script_timeout),
            now,
            boot: self.boot.clone(),
            clock: None,
            store: None,
        };
        // Under the lock, as an apply: nothing changes the host meanwhile.
        let prepared = apply::lock(self.root)
            .map_err(|refusal| refusal.message)
            .and_then(|_lock| {
                rebooting::prepare(&ctx, &report.manifest, self.id, &report.reboot_required)
            });
        match prepared {
            Ok(plan) => {
                reboot.note = Some(format!("rebooting: {}", plan.describe()));
                reboot.plan = Some(plan);
            }
            Err(why) => {
                report.failed.push("reboot".to_string());
                reboot.note = Some(why);
            }
        }
        false
    }

    /// Healthy after the apply: the slot goes back (also one kept by an earlier, failed
    /// pull). A host whose apply failed or whose probes fail keeps it, so a bad release stops
    /// after the group's budget; so does one about to reboot, until it is back and healthy.
    fn settle_slot(&self, healthy: bool, reboot: &Reboot, slot: Option<String>) -> Option<String> {
        let Some(budget) = self.budget else {
            return slot;
        };
        if healthy {
            match budget.give_back(self.host) {
                Ok(true) => Some(format!("gave back its slot of group `{}`", budget.group)),
                Ok(false) => slot,
                Err(e) => Some(format!(
                    "warning: could not give back its slot of group `{}` ({e}); the next pull \
                     will",
                    budget.group
                )),
            }
        } else if reboot.plan.is_some() {
            Some(format!(
                "keeps its slot of group `{}` across its reboot",
                budget.group
            ))
        } else if slot.is_some() || self.back.is_some() {
            Some(format!(
                "keeps its slot of group `{}` until it is healthy",
                budget.group
            ))
        } else {
            slot
        }
    }
}

/// `--trust FILE`, else the root's `/etc/bell/trusted.pub` when it exists, else none.
fn trusted_keys(root: &Root, given: Option<&Path>) -> Result<Option<TrustedKeys>, Refusal> {
    let refused = |e: String| Refusal::new(e).help("fix the trust file; nothing was changed");
    if let Some(file) = given {
        return trust::load(file).map(Some).map_err(refused);
    }
    root.check_contained(trust::DEFAULT_TRUST_FILE)
        .map_err(refused)?;
    let path = root.host(trust::DEFAULT_TRUST_FILE);
    match rootfs::read_record(&path) {
        Ok(None) => Ok(None),
        Ok(Some(_)) => trust::load(&path).map(Some).map_err(refused),
        Err(e) => Err(refused(e)),
    }
}

/// A host takes only its own fleet's releases: the fleet `--fleet` names, else the one whose
/// release it accepted last, else the one of its applied bundle. One key may sign several
/// fleets, so a valid signature alone says nothing about whose release it is.
fn check_fleet(
    opts: &PullOptions,
    root: &Root,
    state: &state::State,
    accepted: &trust::AcceptedReleases,
    release: &Release,
) -> Result<(), Refusal> {
    let (fleet, why) = match (&opts.fleet, &accepted.current) {
        (Some(fleet), _) => (fleet.clone(), "`--fleet`"),
        (None, Some(fleet)) => (fleet.clone(), "the release it accepted last"),
        (None, None) => match applied_fleet(root, state) {
            Some(fleet) => (fleet, "its applied bundle"),
            None => return Ok(()),
        },
    };
    bell_bundle::accept::check_fleet(release, &fleet, why).map_err(|refused| {
        Refusal::new(refused).help(format!(
            "nothing was changed; to move this host to fleet `{}`, pull with `--fleet {0}`",
            release.fleet
        ))
    })
}

/// Says so when this host's reports will not verify against the identity the release gives
/// it: no key to sign them with (an image pulled without `--identity`, a host whose key is not
/// where bell-run looks), or another key. Its rows would read `unverified` or `forged`, and a
/// rollout would wait for it, with nothing on the host saying why.
fn warn_unless_reports_verify(
    host_key: &Result<Option<crate::identity::HostKey>, String>,
    host: &str,
    entry: &bell_bundle::ReleaseHost,
    release: &Release,
) {
    let Some(named) = entry.identity.as_deref() else {
        return;
    };
    let version = bell_bundle::short(&release.version, 16);
    match host_key {
        Ok(None) => errln!(
            "warning: release {version} gives `{host}` an identity, but this host has no key to \
             sign its reports with (neither {} nor {} in the root, and no `--identity FILE`): \
             its reports will read `unverified`, and a rollout waits for it; give the host's key \
             with `--identity FILE`, or put it at {1}",
            crate::identity::SSH_HOST_KEY,
            crate::identity::BELL_KEY
        ),
        Ok(Some(key)) => {
            let signs = key.key.identity();
            if bell_store::proof::Identity::parse(named).ok().as_ref() != Some(&signs) {
                errln!(
                    "warning: the key that signs this host's reports ({}, {}) is not the \
                     identity release {version} gives `{host}`: its reports will read `forged`; \
                     is this the right key, or `--host` the right name?",
                    key.file.display(),
                    signs.fingerprint()
                );
            }
        }
        Err(e) => errln!("warning: this host's reports will be filed unsigned: {e}"),
    }
}

/// The fleet of the bundle this host runs, if it runs one.
fn applied_fleet(root: &Root, state: &state::State) -> Option<String> {
    let id = state.generation.as_ref()?;
    let path = state::generation_dir(root, id).join(bell_bundle::MANIFEST_FILE);
    rootfs::read_record(&path)
        .ok()
        .flatten()
        .and_then(|t| Manifest::from_json(&t).ok())
        .map(|m| m.fleet)
}

fn fleet_of(opts: &PullOptions, root: &Root, state: &state::State) -> Result<String, Refusal> {
    if let Some(fleet) = &opts.fleet {
        return Ok(fleet.clone());
    }
    if state.generation.is_none() {
        return Err(
            Refusal::new("nothing is applied yet, so the fleet is unknown")
                .help("pass `--fleet NAME`"),
        );
    }
    applied_fleet(root, state).ok_or_else(|| {
        Refusal::new("cannot read the fleet from the applied bundle's manifest")
            .help("pass `--fleet NAME`")
    })
}

struct Staged {
    dir: PathBuf,
    fetched: usize,
    reused: usize,
    /// Its sealed secrets, when it has any.
    sealed: Option<crate::sealed::Sealed>,
}

/// Fetches bundle `id` into `/var/lib/bell/incoming/<id>/`: the manifest first (its sha256 must
/// be the id the release names), then every file it lists, taken from the applied generation
/// when it holds the same content, kept from an interrupted pull when complete, or fetched.
/// Then its sealed secrets, as the signed release names them for this host (`secrets`: the
/// host and its index's sha256), every hash checked before a slot is taken, so that a mirror
/// serving the wrong ones changes nothing and holds no slot.
/// A failure removes what this pull created, so that a refused pull leaves the root as it was.
fn stage(
    root: &Root,
    source: &Source,
    release: &Release,
    id: &str,
    state: &state::State,
    secrets: (&str, Option<&str>),
) -> Result<Staged, Refusal> {
    let incoming = root.bell_dir().join("incoming");
    // What exists of the way down, so that a failure can take back exactly what it made.
    let created_from = std::iter::successors(Some(incoming.as_path()), |p| p.parent())
        .take_while(|p| p.starts_with(&root.dir) && fs::symlink_metadata(p).is_err())
        .last()
        .map(Path::to_path_buf);
    let staging = incoming.join(id);
    let result = stage_into(root, source, release, id, state, &incoming, &staging).and_then(
        |(fetched, reused, manifest)| {
            let sealed = match manifest.sealed().is_empty() {
                true => None,
                false => Some(crate::sealed::fetch(
                    source, secrets.0, secrets.1, &manifest,
                )?),
            };
            Ok(((fetched, reused), sealed))
        },
    );
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
        let _ = fs::remove_dir(&incoming);
        if let Some(top) = &created_from {
            let _ = fs::remove_dir_all(top);
        }
    }
    result.map(|((fetched, reused), sealed)| Staged {
        dir: staging,
        fetched,
        reused,
        sealed,
    })
}

fn stage_into(
    root: &Root,
    source: &Source,
    release: &Release,
    id: &str,
    state: &state::State,
    incoming: &Path,
    staging: &Path,
) -> Result<(usize, usize, Manifest), Refusal> {
    let write_err = |path: &Path, e: std::io::Error| {
        Refusal::new(format!("cannot write {}: {e}", path.display()))
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(staging)
        .map_err(|e| write_err(staging, e))?;
    // Staging of another bundle is from a pull that was interrupted and is no longer wanted.
    for entry in fs::read_dir(incoming).map_err(|e| write_err(incoming, e))? {
        let entry = entry.map_err(|e| write_err(incoming, e))?;
        if entry.file_name() != id {
            let _ = fs::remove_dir_all(entry.path());
        }
    }

    let manifest_rel = format!("bundles/{id}/{}", bell_bundle::MANIFEST_FILE);
    let manifest_bytes = source
        .get(&manifest_rel, rootfs::MAX_RECORD_BYTES)
        .map_err(|e| Refusal::new(format!("cannot fetch the bundle: {e}")))?;
    let (manifest, expected) = bell_bundle::accept::check_manifest(
        release,
        id,
        &manifest_bytes,
        &source.describe(&manifest_rel),
    )
    .map_err(Refusal::new)?;

    // Leftovers of an interrupted pull: complete files with the right content stay, the rest
    // (partial downloads, anything unlisted) goes.
    tidy(staging, Path::new(""), &expected);
    let previous = previous_files(root, state);
    let (mut fetched, mut reused) = (0, 0);
    for (rel, want) in &expected {
        let dest = staging.join(rel);
        if dest.is_file() {
            continue;
        }
        if let Some(parent) = dest.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| write_err(parent, e))?;
        }
        if let Some(from) = previous.get(&want.sha256) {
            if copy_checked(from, &dest, &want.sha256).is_ok() {
                reused += 1;
                continue;
            }
        }
        let rel_text = rel.to_string_lossy();
        fetch::fetch_verified(
            source,
            &format!("bundles/{id}/{rel_text}"),
            want,
            rootfs::MAX_RECORD_BYTES,
            &dest,
        )
        .map_err(|e| {
            Refusal::new(format!("cannot fetch the bundle: {e}"))
                .help("nothing was applied; the next pull fetches it again")
        })?;
        fetched += 1;
    }
    let manifest_path = staging.join(bell_bundle::MANIFEST_FILE);
    rootfs::write_atomic(&manifest_path, &manifest_bytes)
        .map_err(|e| write_err(&manifest_path, e))?;
    Ok((fetched, reused, manifest))
}

/// Removes what does not belong in a staging directory: files that are not listed, or whose
/// content is not (yet) what the manifest says.
fn tidy(staging: &Path, rel: &Path, expected: &BTreeMap<PathBuf, Expected>) {
    let Ok(entries) = fs::read_dir(staging.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let child = rel.join(entry.file_name());
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            tidy(staging, &child, expected);
            continue;
        }
        let keep = kind.is_file()
            && expected.get(&child).is_some_and(|want| {
                let size_ok = |len: u64| want.size.unwrap_or(len) == len;
                entry.metadata().is_ok_and(|m| size_ok(m.len()))
                    && fs::read(entry.path())
                        .is_ok_and(|b| bell_bundle::sha256_hex(&b) == want.sha256)
            });
        if !keep {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Files of the applied generation by content: a new bundle mostly repeats them.
fn previous_files(root: &Root, state: &state::State) -> HashMap<String, PathBuf> {
    let Some(id) = &state.generation else {
        return HashMap::new();
    };
    let dir = state::generation_dir(root, id);
    let manifest = rootfs::read_record(&dir.join(bell_bundle::MANIFEST_FILE))
        .ok()
        .flatten()
        .and_then(|t| Manifest::from_json(&t).ok());
    let Some(files) = manifest.and_then(|m| bell_bundle::expected_files(&m).ok()) else {
        return HashMap::new();
    };
    files
        .into_iter()
        .map(|(rel, want)| (want.sha256, dir.join(rel)))
        .collect()
}

/// Copies a file of bell-run's own (never through a link) and keeps the copy only when its
/// content has `sha`.
fn copy_checked(from: &Path, to: &Path, sha: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut source = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    let mut bytes = Vec::new();
    source.read_to_end(&mut bytes)?;
    if bell_bundle::sha256_hex(&bytes) != sha {
        return Err(std::io::Error::other("changed"));
    }
    let mut file = rootfs::create_new(to, 0o600)?;
    file.write_all(&bytes)?;
    file.sync_all()
}

//! Where a fleet's state lives between bell-run on the hosts and bellc on a workstation: the
//! report every `bell-run apply` and `check` files, the per-category status of each host, and
//! the desired release that `bellc publish` sets.
//!
//! Two stores, chosen by the destination string:
//!
//! ```text
//! DIR                       DIR/<host>.json: the host's last report, with its status map
//! etcd://HOST:PORT          /bell/<fleet>/running/<host>           the host's last report
//!                           /bell/<fleet>/status/<category>/<host> success | failed | drifted
//!                           /bell/<fleet>/current_version          the published release
//!                           /bell/<fleet>/desired/<host>           its bundle id for the host
//! ```
//!
//! A category (`apply`, `check`) holds one state per host at a time: a new report replaces
//! what the host said before in that category and leaves the other categories alone.
//!
//! Shared by bell-run (which writes) and bellc (which reads and publishes), so that both agree
//! on the layout by construction. No clock here: callers pass timestamps in.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
pub mod discovery;
pub mod etcd;
pub mod hold;
pub mod http;
pub mod members;
pub mod prefetch;
pub mod proof;
pub mod resolve;
pub mod semaphore;
pub mod tls;

use bell_bundle::Release;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use etcd::Etcd;

/// The report format this crate writes.
pub const REPORT_FORMAT: u32 = 1;

/// A host's state in one status category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Success,
    Failed,
    Drifted,
    /// `pull`: a new release is there, but every slot of the host's rollout group is held;
    /// nothing was changed.
    Waiting,
    /// The configuration applied (or is in sync), but a health probe fails.
    Unhealthy,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Success => "success",
            State::Failed => "failed",
            State::Drifted => "drifted",
            State::Waiting => "waiting",
            State::Unhealthy => "unhealthy",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        match text.trim() {
            "success" => Some(State::Success),
            "failed" => Some(State::Failed),
            "drifted" => Some(State::Drifted),
            "waiting" => Some(State::Waiting),
            "unhealthy" => Some(State::Unhealthy),
            _ => None,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one `bell-run apply` or `check` found on one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub format: u32,
    pub host: String,
    pub fleet: String,
    /// `apply` or `check`: the status category this report sets.
    pub command: String,
    pub result: State,
    /// The release version the host was told it is applying (`bell-run --release`); bundles
    /// are shared between releases, so the bundle alone cannot say.
    pub release: Option<String>,
    /// The bundle the command ran against: the one applied, or the applied generation checked.
    pub bundle: Option<String>,
    /// Unix seconds.
    pub started_at: u64,
    pub finished_at: u64,
    /// Every resource's result (`ok`, `failed`, `skipped`, `unchanged`, `in-sync`, ...).
    #[serde(default)]
    pub resources: Vec<ResourceResult>,
    /// What did not match the bundle: managed files and resources whose check said so.
    #[serde(default)]
    pub drift: Vec<Drift>,
    /// Why the command did nothing at all (a refusal), if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the release was checked by `bell-run pull`: `verified: key ID, sequence N`, or
    /// `unverified: …` on a host that trusts no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The host's state in every category, this report's own and the last known of the others.
    #[serde(default)]
    pub status: BTreeMap<String, State>,
    /// Each health probe's result, when the run got as far as running them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<ProbeResult>,
    /// Why the host needs a reboot (a change that takes effect at boot, the target's own
    /// signal); empty when it does not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reboot_required: Vec<String>,
    /// Set when the host is going down for a reboot bell-run ordered (`pull` with a `reboot`
    /// policy): how (`reboot`, `kexec into …`). Its next report, from the next boot, says
    /// whether the reboot did what it was for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebooting: Option<String>,
    /// The package repository snapshots of `bundle` (its manifest's): what the host runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshots: bell_bundle::Snapshots,
    /// When the host first said what this report says: the first of the runs in a row that
    /// found the same (a failure retried keeps the time of its first failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// How many runs in a row said it, this one included (see [`Report::follow`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    /// Signed reports (see [`proof`]): the host's count of the reports it signed, which only
    /// grows, so that an old report put back is older than one a reader has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// The identity that signed it, `ssh-ed25519 BASE64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// The Ed25519 signature over the rest of the report, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
}

/// One health probe of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub name: String,
    pub healthy: bool,
    pub attempts: u32,
    /// Why its last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Report {
    /// A copy with only the resources `keep` takes, the others never copied (a reader that
    /// keeps thousands of reports keeps what went wrong, not the hundreds that went well).
    pub fn keeping_resources(&self, keep: impl Fn(&ResourceResult) -> bool) -> Report {
        Report {
            format: self.format,
            host: self.host.clone(),
            fleet: self.fleet.clone(),
            command: self.command.clone(),
            result: self.result,
            release: self.release.clone(),
            bundle: self.bundle.clone(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            resources: self.resources.iter().filter(|r| keep(r)).cloned().collect(),
            drift: self.drift.clone(),
            error: self.error.clone(),
            signature: self.signature.clone(),
            status: self.status.clone(),
            health: self.health.clone(),
            reboot_required: self.reboot_required.clone(),
            rebooting: self.rebooting.clone(),
            snapshots: self.snapshots.clone(),
            since: self.since,
            attempts: self.attempts,
            sequence: self.sequence,
            signer: self.signer.clone(),
            proof: self.proof.clone(),
        }
    }

    /// What a run found, apart from when (and the signature, which numbers each report): a
    /// report that says the same as the last need not be written again.
    pub fn same_apart_from_times(&self, other: &Report) -> bool {
        let timeless = |r: &Report| Report {
            started_at: 0,
            finished_at: 0,
            since: None,
            attempts: None,
            sequence: None,
            signer: None,
            proof: None,
            ..r.clone()
        };
        timeless(self) == timeless(other)
    }
    /// Counts this run among the runs in a row that said the same: when `previous` (the
    /// host's own last report of this command) says what this one says, this one carries its
    /// `since` and one more attempt; else this run starts the count. Whether it repeats
    /// `previous`.
    pub fn follow(&mut self, previous: Option<&Report>) -> bool {
        match previous.filter(|p| p.same_apart_from_times(self)) {
            Some(p) => {
                self.since = Some(p.since.unwrap_or(p.started_at));
                self.attempts = Some(p.attempts.unwrap_or(1).saturating_add(1));
                true
            }
            None => {
                self.since = Some(self.started_at);
                self.attempts = Some(1);
                false
            }
        }
    }

    /// Whether a run that says what the last said is written all the same: a host that is
    /// not well retries on every run, and each attempt is worth knowing ("failed since 14:08,
    /// 25 attempts, the last at 16:08"); a well host's repeats would only cost the store a
    /// revision each (its liveness is a lease).
    pub fn worth_repeating(&self) -> bool {
        self.result != State::Success
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceResult {
    pub key: String,
    pub result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The last lines a failed script wrote (bounded), so that why it failed is seen without
    /// going to the host; withheld for resources that carry a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    /// `file:/etc/...` for a managed file, `KIND:NAME` for a resource.
    pub name: String,
    pub detail: String,
}

/// Everything the store holds about one host of a fleet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostView {
    /// Shared with `by_command`: a fleet's reports are most of what a reader holds.
    pub report: Option<Arc<Report>>,
    pub status: BTreeMap<String, State>,
    /// In an etcd store: whether the host's liveness lease is held (`None` in a directory
    /// store, where the age of the report is all there is).
    pub alive: Option<bool>,
    /// The last report of each command (`apply`, `check`) the store keeps: in etcd both, so
    /// that a check after a failed apply does not hide why it failed; in a directory the last.
    pub by_command: BTreeMap<String, Arc<Report>>,
    /// In etcd: the revision at which each command's report was last written (a report that
    /// said nothing new is not written again).
    pub revisions: BTreeMap<String, i64>,
    /// A key of this host that could not be read, and why: one bad key makes its host's row
    /// unreadable, never the whole fleet's reading.
    pub unreadable: Option<String>,
    /// What the reader could tell of who wrote each report of `by_command` (see [`proof`]).
    pub proofs: BTreeMap<String, proof::Proof>,
    /// Reports filed under this host that cannot be its own (checked against the identity the
    /// reader has for it), each with its key and why: they are left out of `by_command`.
    pub forged: Vec<String>,
    /// Why what the reports say cannot be checked (no identity for the host, or a report
    /// that is not signed), when that is so.
    pub unverified: Option<String>,
}

/// The identity a reader has for each host, from the release the signing key signed.
pub type Identities = BTreeMap<String, proof::Identity>;

/// The identities `release` gives its hosts (one that does not parse is none: bellc checked
/// each when it built the release).
pub fn identities_of(release: &Release) -> Identities {
    release
        .hosts
        .iter()
        .filter_map(|(host, entry)| {
            let identity = proof::Identity::parse(entry.identity.as_deref()?).ok()?;
            Some((host.clone(), identity))
        })
        .collect()
}

impl HostView {
    /// `report` and `status` again from `by_command`, after reports were taken out or put
    /// back: the newest report of any command, and each category as its newest report says.
    pub fn settle(&mut self) {
        // Of two finished in the same second, the check's is the newer (as `load_fleet` has
        // always read them).
        let mut reports: Vec<&Arc<Report>> = self.by_command.values().collect();
        reports.sort_by_key(|r| (r.finished_at, r.command == "check"));
        // Not the `status/` keys: read apart from the report, they could say `success` for a
        // moment after an unhealthy report (or be written by anyone), and a host would be
        // counted converged that is not.
        self.status = reports
            .iter()
            .flat_map(|r| r.status.iter().map(|(c, s)| (c.clone(), *s)))
            .collect();
        self.report = reports.last().map(|r| Arc::clone(r));
    }
}

/// How a host signs the reports it files: its key, and where its next sequence number comes
/// from (taken only for a report that is written).
pub struct Signer<'a> {
    pub key: &'a proof::SigningKey,
    pub next_sequence: &'a mut dyn FnMut() -> Result<u64, String>,
}

impl Signer<'_> {
    fn sign(self, report: &mut Report) -> Result<(), String> {
        let sequence = (self.next_sequence)()?;
        proof::sign(report, self.key, sequence);
        Ok(())
    }
}

/// A report destination or source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    Dir(PathBuf),
    Etcd(Etcd),
}

/// Host and fleet names become one path component or key segment.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the {what} name `{}` cannot be filed: use letters, digits, `-`, `_` and `.` (not first)",
            name.escape_debug()
        ))
    }
}

pub fn running_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/running/{host}")
}

/// Where the last report of `command` is: an apply's (or pull's) under `running/`, the others
/// under `reports/COMMAND/`, so that a host that alternates pulls and checks compares each
/// with the last of its kind and writes nothing when neither changed.
pub fn report_key(fleet: &str, command: &str, host: &str) -> String {
    if command == "apply" {
        running_key(fleet, host)
    } else {
        format!("/bell/{fleet}/reports/{command}/{host}")
    }
}

pub fn status_key(fleet: &str, category: &str, host: &str) -> String {
    format!("/bell/{fleet}/status/{category}/{host}")
}

/// Bound to the host's lease: there while the host runs (see [`Store::keep_alive`]).
pub fn alive_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/alive/{host}")
}

pub fn desired_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/desired/{host}")
}

pub fn version_key(fleet: &str) -> String {
    format!("/bell/{fleet}/current_version")
}

/// How a client reaches the fleet's store beyond its URL: what TLS trusts and presents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub tls: tls::TlsFiles,
    /// The etcd user to log in as (`--store-user`), with its password's file.
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
}

impl Access {
    /// The options that give this, as a command line spells them (for the commands that
    /// hints and timer units print).
    pub fn flags(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (flag, file) in [
            ("--store-ca", &self.tls.ca),
            ("--store-cert", &self.tls.cert),
            ("--store-key", &self.tls.key),
        ] {
            if let Some(file) = file {
                out.push((flag, file.display().to_string()));
            }
        }
        if let (Some(user), Some(file)) = (&self.user, &self.password_file) {
            out.push(("--store-user", user.clone()));
            out.push(("--store-password-file", file.display().to_string()));
        }
        out
    }
}

impl Store {
    /// `etcd://HOST:PORT`, `etcds://HOST:PORT` (TLS with the system's CAs) or a directory.
    pub fn parse(dest: &str) -> Result<Store, String> {
        Store::open(dest, &Access::default())
    }

    /// `etcd://`, `etcds://` with what `access` names, or a directory.
    pub fn open(dest: &str, access: &Access) -> Result<Store, String> {
        Store::check(dest, access)?;
        if dest.contains("://") {
            return Etcd::open(dest, access).map(Store::Etcd);
        }
        Ok(Store::Dir(PathBuf::from(dest)))
    }

    /// Whether [`Store::open`] would take `dest` and `access`, reading no file (an image's
    /// timer names files of the image).
    pub fn check(dest: &str, access: &Access) -> Result<(), String> {
        // A directory has no use for TLS files, which a `--store` beside it may need.
        if dest.contains("://") {
            return Etcd::check(dest, access).map(|_| ());
        }
        if dest.is_empty() {
            return Err(
                "an empty report destination; give a directory or `etcd://HOST:PORT`".into(),
            );
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        match self {
            Store::Dir(dir) => dir.display().to_string(),
            Store::Etcd(etcd) => etcd.url(),
        }
    }

    /// Files a report: the host's running report, and its state in the report's categories
    /// (`report.status`, which the caller fills). In a directory the categories the report
    /// does not set are carried over from the host's previous report. With a `signer`, the
    /// report is signed as the host's next (see [`proof`]) when it is written.
    pub fn record(&self, report: &mut Report, signer: Option<Signer>) -> Result<(), String> {
        self.record_with(report, signer, None)
    }

    /// [`Store::record`], comparing with the keys `read` holds of this store (read with the
    /// pull's desired release) instead of reading them again.
    pub fn record_with(
        &self,
        report: &mut Report,
        signer: Option<Signer>,
        read: Option<&prefetch::Prefetched>,
    ) -> Result<(), String> {
        check_name("host", &report.host)?;
        check_name("fleet", &report.fleet)?;
        match self {
            Store::Dir(dir) => {
                let path = dir.join(format!("{}.json", report.host));
                let previous = read_report(&path)?
                    .map(|(_, previous)| previous)
                    .filter(|previous| previous.fleet == report.fleet);
                if let Some(previous) = &previous {
                    for (category, state) in &previous.status {
                        report.status.entry(category.clone()).or_insert(*state);
                    }
                }
                // A directory keeps one report, and every run writes it.
                report.follow(previous.as_ref());
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                if let Some(signer) = signer {
                    signer.sign(report)?;
                }
                let tmp = dir.join(format!(".{}.json.tmp", report.host));
                // Pretty for a reader of the directory, unless signed: then as signed.
                let mut text = match report.proof {
                    Some(_) => proof::to_json(report),
                    None => serde_json::to_string_pretty(report).unwrap_or_default(),
                };
                text.push('\n');
                std::fs::write(&tmp, text)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
            Store::Etcd(etcd) => {
                // Every write is a revision that etcd keeps until it is compacted: a run that
                // found what the last one found writes nothing (liveness is a lease, renewed
                // without a revision: `keep_alive`).
                let key = report_key(&report.fleet, &report.command, &report.host);
                // The category keys, for readers outside bell: written in the same
                // transaction as the report, so that no reader sees one without the other.
                // bellc itself judges a host from the report alone (see `views_from`).
                let categories: Vec<(String, &'static str)> = report
                    .status
                    .iter()
                    .map(|(category, state)| {
                        (
                            status_key(&report.fleet, category, &report.host),
                            state.as_str(),
                        )
                    })
                    .collect();
                let mut names: Vec<&str> = vec![key.as_str()];
                names.extend(categories.iter().map(|(k, _)| k.as_str()));
                let url = etcd.url();
                let known: Option<Vec<Option<Vec<u8>>>> = read.and_then(|read| {
                    names
                        .iter()
                        .map(|name| read.get(&url, name).map(|h| h.map(|h| h.value.clone())))
                        .collect()
                });
                let mut held = match known {
                    Some(known) => known,
                    None => etcd.get_all(&names)?,
                }
                .into_iter();
                let previous = held.next().flatten().and_then(|raw| {
                    let report = serde_json::from_slice::<Report>(&raw).ok()?;
                    Some((raw, report))
                });
                // Only the host's own report counts as what it said last: a copy signed by
                // another key is written over. The same report again is not written, unless
                // the host is not well (each of its attempts is then counted).
                let identity = signer.as_ref().map(|s| s.key.identity());
                let own = previous.filter(|(raw, previous)| match &identity {
                    Some(identity) => matches!(
                        proof::check(raw, previous, &report.host, Some(identity)),
                        proof::Proof::Signed { .. }
                    ),
                    None => previous.proof.is_none(),
                });
                let same = report.follow(own.as_ref().map(|(_, previous)| previous))
                    && !report.worth_repeating();
                let mut ops = Vec::new();
                let text;
                if !same {
                    if let Some(signer) = signer {
                        signer.sign(report)?;
                    }
                    text = proof::to_json(report);
                    ops.push(etcd::Op::Put(&key, text.as_bytes()));
                }
                for ((key, state), held) in categories.iter().zip(held) {
                    if held.as_deref() != Some(state.as_bytes()) {
                        ops.push(etcd::Op::Put(key, state.as_bytes()));
                    }
                }
                if !ops.is_empty() {
                    etcd.write_all(&ops)?;
                }
                Ok(())
            }
        }
    }

    /// Keeps `host` alive in the store: its key under `/bell/<fleet>/alive/` is bound to a
    /// lease of `ttl` seconds, renewed on every run (a renewal writes no revision). `lease` is
    /// the one the host was given before; a new one is granted when it expired. Returns the
    /// lease to remember (`None` for a directory store, which has no liveness of its own).
    pub fn keep_alive(
        &self,
        fleet: &str,
        host: &str,
        lease: Option<i64>,
        ttl: u64,
    ) -> Result<Option<i64>, String> {
        let known = lease.map(|id| Lease { id, renewed_at: 0 });
        let kept = self.keep_alive_with(fleet, host, known, ttl, 0, None)?;
        Ok(kept.map(|lease| lease.id))
    }

    /// [`Store::keep_alive`], renewing the lease only once half its time is spent (at `now`,
    /// seconds since the epoch): while the host's liveness key is bound to it, as `read` (the
    /// pull's first request) says, a run sooner than that sends nothing. The lease to remember.
    pub fn keep_alive_with(
        &self,
        fleet: &str,
        host: &str,
        lease: Option<Lease>,
        ttl: u64,
        now: u64,
        read: Option<&prefetch::Prefetched>,
    ) -> Result<Option<Lease>, String> {
        check_name("host", host)?;
        check_name("fleet", fleet)?;
        let Store::Etcd(etcd) = self else {
            return Ok(None);
        };
        let key = alive_key(fleet, host);
        let value = ttl.to_string();
        let url = etcd.url();
        let alive = read.and_then(|read| read.get(&url, &key));
        if let Some(lease) = lease {
            let bound = alive.map(|held| held.is_some_and(|h| h.lease == lease.id));
            if bound == Some(true) && now < lease.renewed_at.saturating_add(ttl / 2) {
                return Ok(Some(lease));
            }
            if etcd.keep_alive(lease.id)? {
                let present = match bound {
                    Some(bound) => bound,
                    None => etcd.get(&key)?.is_some(),
                };
                if !present {
                    etcd.put_with_lease(&key, value.as_bytes(), lease.id)?;
                }
                return Ok(Some(Lease {
                    id: lease.id,
                    renewed_at: now,
                }));
            }
        }
        let id = etcd.grant_lease(ttl)?;
        etcd.put_with_lease(&key, value.as_bytes(), id)?;
        Ok(Some(Lease {
            id,
            renewed_at: now,
        }))
    }

    /// Every host the store has heard from in `fleet`, each report checked against the
    /// host's identity in `identities` (see [`HostView::proofs`]).
    pub fn load_fleet(
        &self,
        fleet: &str,
        identities: &Identities,
    ) -> Result<BTreeMap<String, HostView>, String> {
        check_name("fleet", fleet)?;
        let mut hosts: BTreeMap<String, HostView> = BTreeMap::new();
        match self {
            Store::Dir(dir) => {
                let entries = std::fs::read_dir(dir)
                    .map_err(|e| format!("cannot read the reports in {}: {e}", dir.display()))?;
                for entry in entries {
                    let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
                    let name = entry.file_name().to_string_lossy().to_string();
                    if name.starts_with('.') || !name.ends_with(".json") {
                        continue;
                    }
                    let Some((raw, report)) = read_report(&entry.path())? else {
                        continue;
                    };
                    let filed_as = name.trim_end_matches(".json");
                    let identity = identities.get(filed_as);
                    if report.fleet != fleet && identity.is_none() {
                        continue;
                    }
                    let mut view = HostView::default();
                    // A file is named after its host; without an identity to check, the report
                    // is taken at its word, as it always was.
                    let host = match identity {
                        Some(_) => filed_as.to_string(),
                        None => report.host.clone(),
                    };
                    match checked(&raw, report, &host, fleet, identity) {
                        Ok((report, proof)) => {
                            view.proofs.insert(report.command.clone(), proof);
                            view.by_command
                                .insert(report.command.clone(), Arc::new(report));
                        }
                        Err(why) => view
                            .forged
                            .push(format!("{}: {why}", entry.path().display())),
                    }
                    view.settle();
                    hosts.insert(host, view);
                }
            }
            Store::Etcd(etcd) => {
                let mut kvs = Vec::new();
                for part in ["running/", "reports/check/", "alive/", "status/"] {
                    kvs.extend(etcd.range_prefix(&format!("/bell/{fleet}/{part}"))?);
                }
                hosts = views_from_parsed(fleet, &kvs, &mut ParsedReports::default(), identities)?;
            }
        }
        Ok(hosts)
    }

    /// Makes `release` the fleet's desired version: every host's bundle, hosts that left the
    /// release removed, and the version. Only the keys that change are written, in one
    /// transaction when they fit (a host reads version and bundle together, see
    /// [`Store::desired`], and so never sees one without the other); a larger change is
    /// written in parts with the version in the last. The etcd revision of the last part: a
    /// report written later was written after the host could see the release.
    pub fn publish(&self, release: &Release) -> Result<i64, String> {
        let Store::Etcd(etcd) = self else {
            return Err("`publish` needs an etcd store (`--store etcd://HOST:PORT`)".to_string());
        };
        check_name("fleet", &release.fleet)?;
        for host in release.hosts.keys() {
            check_name("host", host)?;
        }
        let prefix = format!("/bell/{}/desired/", release.fleet);
        let mut now: BTreeMap<String, Vec<u8>> = etcd
            .range_prefix(&prefix)?
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        let keys: Vec<(String, &[u8])> = release
            .hosts
            .iter()
            .map(|(host, entry)| (desired_key(&release.fleet, host), entry.bundle.as_bytes()))
            .collect();
        let mut ops: Vec<etcd::Op> = Vec::new();
        for (key, bundle) in &keys {
            if now.remove(key).as_deref() != Some(*bundle) {
                ops.push(etcd::Op::Put(key, bundle));
            }
        }
        ops.extend(now.keys().map(|key| etcd::Op::Delete(key)));
        let version = version_key(&release.fleet);
        ops.push(etcd::Op::Put(&version, release.version.as_bytes()));
        let mut revision = 0;
        for part in ops.chunks(etcd::MAX_TXN_OPS) {
            revision = etcd.write_all(part)?;
        }
        Ok(revision)
    }

    /// The fleet's published release as the store holds it (`None` when nothing is
    /// published, or the store is a directory).
    pub fn published(&self, fleet: &str) -> Result<Option<Published>, String> {
        let Store::Etcd(etcd) = self else {
            return Ok(None);
        };
        check_name("fleet", fleet)?;
        let Some(version) = etcd.get(&version_key(fleet))? else {
            return Ok(None);
        };
        let mut kvs = etcd.range_prefix(&format!("/bell/{fleet}/desired/"))?;
        kvs.push(etcd::KeyValue {
            key: version_key(fleet),
            value: version,
            mod_revision: 0,
        });
        Ok(published_from(fleet, &kvs))
    }

    /// The published version, the bundle desired for `host` and its hold, read together.
    pub fn desired(&self, fleet: &str, host: &str) -> Result<Desired, String> {
        Ok(self.desired_with(fleet, host, &[])?.0)
    }

    /// [`Store::desired`], with the keys `also` read in the same request (see
    /// [`prefetch::pull_keys`]).
    pub fn desired_with(
        &self,
        fleet: &str,
        host: &str,
        also: &[String],
    ) -> Result<(Desired, prefetch::Prefetched), String> {
        let Store::Etcd(etcd) = self else {
            return Err("`pending` needs an etcd store (`--store etcd://HOST:PORT`)".to_string());
        };
        check_name("fleet", fleet)?;
        check_name("host", host)?;
        let text =
            |v: Option<etcd::Held>| v.map(|h| String::from_utf8_lossy(&h.value).trim().to_string());
        // One request: a hold, and whatever the rest of the pull reads, cost nothing more.
        let (version, desired, hold) = (
            version_key(fleet),
            desired_key(fleet, host),
            hold::key(fleet, host),
        );
        let mut keys: Vec<&str> = vec![&version, &desired, &hold];
        keys.extend(also.iter().map(String::as_str));
        let mut all = etcd.read_all(&keys)?.into_iter();
        let wanted = Desired {
            version: text(all.next().flatten()),
            bundle: text(all.next().flatten()),
            hold: all.next().flatten().map(|held| hold::parse(&held.value)),
        };
        let read = prefetch::Prefetched::new(etcd.url(), also.iter().cloned().zip(all).collect());
        Ok((wanted, read))
    }
}

/// Every host's view from keys read out of etcd: any range of the fleet's keys that holds its
/// `running/`, `reports/check/`, `alive/` and `status/` keys (one range of `/bell/FLEET/` does,
/// for a reader that wants the whole fleet in one request). Other keys are passed over.
pub fn views_from(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    identities: &Identities,
) -> Result<BTreeMap<String, HostView>, String> {
    views_from_parsed(fleet, kvs, &mut ParsedReports::default(), identities)
}

/// Reports parsed by an earlier reading, by key and the revision each was written at: a reader
/// that reads the fleet again and again (`bellc serve`) parses only the reports that changed
/// since (hosts write a report only when it says something new).
#[derive(Debug, Default)]
pub struct ParsedReports {
    by_key: std::collections::HashMap<String, Parsed>,
}

/// One report as an earlier reading parsed and checked it.
#[derive(Debug)]
struct Parsed {
    revision: i64,
    report: Arc<Report>,
    /// Checked against this identity.
    identity: Option<proof::Identity>,
    proof: proof::Proof,
}

/// What one report key read as.
enum Reading {
    Report(Arc<Report>, proof::Proof),
    /// Not the host's (with an identity), or another host's or fleet's (without).
    Refused(String),
    /// Not a report at all.
    Unreadable(String),
}

/// Parses and checks every report not read before: on several threads when there are many
/// (checking a signature is most of a report's cost; a fleet's first reading checks them all).
fn read_all(
    reports: &mut [(&etcd::KeyValue, &str, Option<Reading>)],
    fleet: &str,
    identities: &Identities,
) {
    let mut todo: Vec<&mut (&etcd::KeyValue, &str, Option<Reading>)> =
        reports.iter_mut().filter(|r| r.2.is_none()).collect();
    let read = |slot: &mut (&etcd::KeyValue, &str, Option<Reading>)| {
        let (kv, host) = (slot.0, slot.1);
        slot.2 = Some(match serde_json::from_slice::<Report>(&kv.value) {
            Ok(report) => match checked(&kv.value, report, host, fleet, identities.get(host)) {
                Ok((report, proof)) => Reading::Report(Arc::new(report), proof),
                Err(why) => Reading::Refused(why),
            },
            Err(e) => Reading::Unreadable(e.to_string()),
        });
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if todo.len() < 1024 || threads == 1 {
        todo.into_iter().for_each(read);
        return;
    }
    let per_thread = todo.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for chunk in todo.chunks_mut(per_thread) {
            scope.spawn(move || chunk.iter_mut().for_each(|slot| read(slot)));
        }
    });
}

/// A report read under `host`'s name, checked: the report and what proves it, or why it cannot
/// be the host's (with an identity to check against) or cannot be read as its (without).
fn checked(
    raw: &[u8],
    report: Report,
    host: &str,
    fleet: &str,
    identity: Option<&proof::Identity>,
) -> Result<(Report, proof::Proof), String> {
    if identity.is_none() && (report.host != host || report.fleet != fleet) {
        return Err(format!(
            "holds a report of host `{}` of fleet `{}`",
            report.host, report.fleet
        ));
    }
    if report.fleet != fleet {
        return Err(format!(
            "a report of fleet `{}`",
            report.fleet.escape_debug()
        ));
    }
    match proof::check(raw, &report, host, identity) {
        proof::Proof::Forged(why) => Err(why),
        proof => Ok((report, proof)),
    }
}

/// [`views_from`], taking from `parsed` every report whose key and revision it holds, and
/// leaving in it the reports of this reading.
pub fn views_from_parsed(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    parsed: &mut ParsedReports,
    identities: &Identities,
) -> Result<BTreeMap<String, HostView>, String> {
    let mut now_parsed = std::collections::HashMap::with_capacity(parsed.by_key.len());
    let base = format!("/bell/{fleet}/");
    let mut hosts: BTreeMap<String, HostView> = BTreeMap::new();
    let mut living = std::collections::BTreeSet::new();
    // Reports first, an apply's before a check's: of two finished in the same second, the
    // check's is the newer (as `load_fleet` has always read them), whatever order `kvs` is in.
    // Each with what an earlier reading made of it, when its key was written at the same
    // revision and is checked against the same identity (0: not from etcd).
    let mut reports: Vec<(&etcd::KeyValue, &str, Option<Reading>)> = Vec::new();
    for part in ["running/", "reports/check/"] {
        for kv in kvs {
            let Some(host) = kv
                .key
                .strip_prefix(&base)
                .and_then(|rest| rest.strip_prefix(part))
            else {
                continue;
            };
            let identity = identities.get(host);
            let known = parsed.by_key.remove(&kv.key).filter(|p| {
                p.revision == kv.mod_revision && p.revision != 0 && p.identity.as_ref() == identity
            });
            reports.push((kv, host, known.map(|p| Reading::Report(p.report, p.proof))));
        }
    }
    read_all(&mut reports, fleet, identities);
    for (kv, host, reading) in reports {
        let identity = identities.get(host);
        let view = hosts.entry(host.to_string()).or_default();
        let (report, proof) = match reading {
            Some(Reading::Report(report, proof)) => (report, proof),
            Some(Reading::Refused(why)) => {
                let why = format!("`{}`: {why}", kv.key);
                match identity {
                    Some(_) => view.forged.push(why),
                    None => view.unreadable = Some(why),
                }
                continue;
            }
            Some(Reading::Unreadable(why)) => {
                view.unreadable = Some(format!("`{}` is not a report: {why}", kv.key));
                continue;
            }
            // `read_all` reads every one.
            None => continue,
        };
        now_parsed.insert(
            kv.key.clone(),
            Parsed {
                revision: kv.mod_revision,
                report: Arc::clone(&report),
                identity: identity.cloned(),
                proof: proof.clone(),
            },
        );
        view.proofs.insert(report.command.clone(), proof);
        view.revisions
            .insert(report.command.clone(), kv.mod_revision);
        view.by_command.insert(report.command.clone(), report);
    }
    for kv in kvs {
        if let Some(host) = kv
            .key
            .strip_prefix(&base)
            .and_then(|rest| rest.strip_prefix("alive/"))
        {
            living.insert(host);
        }
    }
    for view in hosts.values_mut() {
        view.settle();
    }
    // Liveness is told for the hosts that filed a report; a lease alone is not a host.
    for (host, view) in hosts.iter_mut().filter(|(_, v)| v.report.is_some()) {
        view.alive = Some(living.contains(host.as_str()));
    }
    parsed.by_key = now_parsed;
    Ok(hosts)
}

/// The published release from keys read out of etcd (its version key and `desired/`), as
/// [`Store::published`] reads it; `None` without a version.
pub fn published_from(fleet: &str, kvs: &[etcd::KeyValue]) -> Option<Published> {
    let version_key = version_key(fleet);
    let prefix = format!("/bell/{fleet}/desired/");
    let version = kvs.iter().find(|kv| kv.key == version_key)?;
    let hosts = kvs
        .iter()
        .filter_map(|kv| {
            let host = kv.key.strip_prefix(&prefix)?;
            let bundle = String::from_utf8_lossy(&kv.value).trim().to_string();
            Some((host.to_string(), bundle))
        })
        .collect();
    let version = String::from_utf8_lossy(&version.value).trim().to_string();
    Some(Published { version, hosts })
}

/// What `bellc publish` left in the store: the version, and every host's bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub version: String,
    pub hosts: BTreeMap<String, String>,
}

/// A liveness lease as a host remembers it: its id and when it was last renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    pub renewed_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub version: Option<String>,
    pub bundle: Option<String>,
    /// An operator's hold on the host (`bellc hold`): it applies nothing new.
    pub hold: Option<hold::Hold>,
}

fn read_report(path: &Path) -> Result<Option<(Vec<u8>, Report)>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(|report| Some((bytes, report)))
            .map_err(|e| format!("{} is not a bell report: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_second_reading_parses_only_the_reports_that_changed() {
        let kv = |key: String, value: Vec<u8>, mod_revision: i64| etcd::KeyValue {
            key,
            value,
            mod_revision,
        };
        let json = |r: &Report| serde_json::to_vec(r).unwrap();
        let (a, b) = (
            report("a", "apply", State::Success),
            report("b", "apply", State::Failed),
        );
        let mut kvs = vec![
            kv(running_key("f", "a"), json(&a), 5),
            kv(running_key("f", "b"), json(&b), 6),
            kv(alive_key("f", "a"), b"1".to_vec(), 7),
            kv(status_key("f", "apply", "b"), b"failed".to_vec(), 6),
        ];
        let mut parsed = ParsedReports::default();
        let first = views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
        assert_eq!(first, views_from("f", &kvs, &Identities::new()).unwrap());
        assert_eq!(first["a"].alive, Some(true));
        assert_eq!(first["b"].status["apply"], State::Failed);
        // b files a new report; a's is the same key at the same revision.
        let b2 = report("b", "apply", State::Success);
        kvs[1] = kv(running_key("f", "b"), json(&b2), 9);
        let second = views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
        let (a1, a2) = (first["a"].report.as_ref(), second["a"].report.as_ref());
        assert!(
            Arc::ptr_eq(a1.unwrap(), a2.unwrap()),
            "a's report was parsed again"
        );
        assert_eq!(second["b"].report.as_deref(), Some(&b2));
        assert_eq!(second, views_from("f", &kvs, &Identities::new()).unwrap());
        // A host that left is forgotten.
        kvs.remove(0);
        views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
        assert_eq!(parsed.by_key.len(), 1);
    }

    #[test]
    fn a_host_is_judged_by_its_report_not_by_a_category_key() {
        let kv = |key: String, value: &[u8]| etcd::KeyValue {
            key,
            value: value.to_vec(),
            mod_revision: 3,
        };
        let mut unhealthy = report("a", "apply", State::Unhealthy);
        unhealthy.status = BTreeMap::from([
            ("apply".to_string(), State::Success),
            ("health".to_string(), State::Unhealthy),
        ]);
        let json = serde_json::to_vec(&unhealthy).unwrap();
        // The category key still says what the host's run before said (or what someone wrote).
        let kvs = vec![
            kv(running_key("f", "a"), &json),
            kv(status_key("f", "health", "a"), b"success"),
            kv(status_key("f", "apply", "b"), b"success"),
        ];
        let views = views_from("f", &kvs, &Identities::new()).unwrap();
        assert_eq!(views["a"].status["health"], State::Unhealthy);
        assert!(!views.contains_key("b"), "a category key alone is no host");
    }

    #[test]
    fn one_unreadable_key_spoils_only_its_own_host() {
        let kv = |key: String, value: &[u8]| etcd::KeyValue {
            key,
            value: value.to_vec(),
            mod_revision: 3,
        };
        let good = serde_json::to_vec(&report("a", "apply", State::Success)).unwrap();
        let other = serde_json::to_vec(&report("a", "apply", State::Success)).unwrap();
        let mut wrong_type = serde_json::to_value(report("d", "apply", State::Success)).unwrap();
        wrong_type["finished_at"] = serde_json::json!("yesterday");
        let kvs = vec![
            kv(running_key("f", "a"), &good),
            kv(running_key("f", "b"), b"bogus"),
            kv(running_key("f", "c"), &[0xff, 0xfe, b'{']),
            kv(running_key("f", "d"), wrong_type.to_string().as_bytes()),
            // A report of host `a`, filed under host `e`'s key.
            kv(running_key("f", "e"), &other),
            kv(status_key("f", "apply", "a"), b"\xff not a state"),
        ];
        let views = views_from("f", &kvs, &Identities::new()).unwrap();
        assert_eq!(views["a"].unreadable, None);
        assert_eq!(views["a"].status["apply"], State::Success);
        for host in ["b", "c", "d", "e"] {
            let why = views[host].unreadable.as_deref().unwrap_or_default();
            assert!(why.contains(&running_key("f", host)), "{host}: {why}");
            assert!(views[host].report.is_none(), "{host}");
        }
        assert!(views["e"]
            .unreadable
            .as_deref()
            .unwrap()
            .contains("of host `a`"));
    }

    /// A report of `host` in fleet `f`, one category set: for the tests of every module.
    pub(crate) fn report(host: &str, command: &str, result: State) -> Report {
        Report {
            format: REPORT_FORMAT,
            host: host.into(),
            fleet: "f".into(),
            command: command.into(),
            result,
            release: None,
            bundle: None,
            started_at: 1,
            finished_at: 2,
            resources: Vec::new(),
            drift: Vec::new(),
            error: None,
            signature: None,
            status: BTreeMap::from([(command.to_string(), result)]),
            health: Vec::new(),
            reboot_required: Vec::new(),
            rebooting: None,
            snapshots: BTreeMap::new(),
            since: None,
            attempts: None,
            sequence: None,
            signer: None,
            proof: None,
        }
    }

    #[test]
    fn a_directory_keeps_one_state_per_category() {
        let dir = std::env::temp_dir().join(format!("bell-store-{}", std::process::id()));
        let store = Store::Dir(dir.clone());
        store
            .record(&mut report("h1", "apply", State::Success), None)
            .unwrap();
        store
            .record(&mut report("h1", "check", State::Drifted), None)
            .unwrap();
        store
            .record(&mut report("h1", "check", State::Success), None)
            .unwrap();
        let fleet = store.load_fleet("f", &Identities::new()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let view = &fleet["h1"];
        assert_eq!(
            view.status,
            BTreeMap::from([
                ("apply".to_string(), State::Success),
                ("check".to_string(), State::Success)
            ])
        );
        assert_eq!(
            view.report.as_ref().map(|r| r.command.as_str()),
            Some("check")
        );
    }

    #[test]
    fn runs_in_a_row_that_say_the_same_are_counted_from_the_first() {
        let dir = std::env::temp_dir().join(format!("bell-store-runs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::Dir(dir.clone());
        let at = |started: u64, result: State| {
            let mut r = report("h1", "apply", result);
            r.started_at = started;
            r.finished_at = started + 1;
            r
        };
        for started in [100, 200, 300] {
            store.record(&mut at(started, State::Failed), None).unwrap();
        }
        let read = |store: &Store| {
            let fleet = store.load_fleet("f", &Identities::new()).unwrap();
            let r = fleet["h1"].report.clone().unwrap();
            (r.since, r.attempts, r.finished_at)
        };
        assert_eq!(read(&store), (Some(100), Some(3), 301));
        // Something else said: the count starts again.
        store.record(&mut at(400, State::Success), None).unwrap();
        assert_eq!(read(&store), (Some(400), Some(1), 401));
        let mut failed = at(500, State::Failed);
        failed.error = Some("another failure".into());
        store.record(&mut failed, None).unwrap();
        store.record(&mut at(600, State::Failed), None).unwrap();
        assert_eq!(read(&store), (Some(600), Some(1), 601));

        // Repeats of a well host need not be written; a failing host's each are worth it.
        let mut well = at(1, State::Success);
        assert!(!well.follow(Some(&at(0, State::Success))) || !well.worth_repeating());
        let mut failing = at(1, State::Failed);
        assert!(failing.follow(Some(&at(0, State::Failed))) && failing.worth_repeating());
        assert_eq!((failing.since, failing.attempts), (Some(0), Some(2)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_that_would_escape_a_key_or_directory_are_refused() {
        for bad in ["", "..", ".h", "a/b", "a b", "h\n"] {
            assert!(check_name("host", bad).is_err(), "{bad:?}");
        }
        assert!(check_name("host", "node-001.rack_2").is_ok());
        let mut r = report("../x", "apply", State::Success);
        assert!(Store::Dir(PathBuf::from("/nonexistent"))
            .record(&mut r, None)
            .is_err());
    }

    #[test]
    fn destinations_parse() {
        assert_eq!(
            Store::parse("reports"),
            Ok(Store::Dir(PathBuf::from("reports")))
        );
        assert!(matches!(
            Store::parse("etcd://127.0.0.1:2379"),
            Ok(Store::Etcd(_))
        ));
        assert!(Store::parse("https://x:1").is_err());
    }
}

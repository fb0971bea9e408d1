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
// A byte index into a string read from a host, a store or a mirror panics on a multibyte
// character: strings are cut with `get` or at a found character boundary.
#![cfg_attr(not(test), deny(clippy::string_slice))]
pub mod discovery;
// The etcd client is the wire's; the store's transactions name its operations.
use bell_wire::etcd;
pub mod gateway;
pub mod hold;
pub mod keys;
pub mod members;
pub mod prefetch;
pub mod proof;
pub mod ready;
pub mod semaphore;
mod small_map;
pub mod status;
mod store;
mod views;

use views::{checked, read_report};
pub use views::{
    published_from, some_views_from_parsed, views_from, views_from_parsed, ParsedReports,
};

use bell_bundle::Release;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use bell_wire::etcd::Etcd;
pub use small_map::SmallMap;
pub use status::Status;

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
    /// `pull`: an apply the host could not confirm in time (it lost its store or mirror, or
    /// its probes failed) was taken back; the host runs the generation before, and refuses
    /// that release from now on.
    Reverted,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Success => "success",
            State::Failed => "failed",
            State::Drifted => "drifted",
            State::Waiting => "waiting",
            State::Unhealthy => "unhealthy",
            State::Reverted => "reverted",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        match text.trim() {
            "success" => Some(State::Success),
            "failed" => Some(State::Failed),
            "drifted" => Some(State::Drifted),
            "waiting" => Some(State::Waiting),
            "unhealthy" => Some(State::Unhealthy),
            "reverted" => Some(State::Reverted),
            _ => None,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A live file as a consumer's run left it: the providers its rendering lists and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveFile {
    pub path: String,
    pub service: String,
    pub ready: Vec<String>,
    /// When the file last changed (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
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
    /// A refused run's: the release it was told to apply and refused (`release` names the one
    /// the host still runs). A reader judging a newer release by this report can tell a run
    /// that began before that release was published from one of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_release: Option<String>,
    /// The live files of the bundle (`live` of the spec) as this run left them: the providers
    /// each lists, and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveFile>,
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
    /// A report of `command` on `host` of `fleet` with `result`, at `at` (Unix seconds), and
    /// nothing else said yet: what every writer of a report starts from and fills in.
    pub fn new(host: &str, fleet: &str, command: &str, result: State, at: u64) -> Report {
        Report {
            format: REPORT_FORMAT,
            host: host.to_string(),
            fleet: fleet.to_string(),
            command: command.to_string(),
            result,
            release: None,
            bundle: None,
            started_at: at,
            finished_at: at,
            resources: Vec::new(),
            drift: Vec::new(),
            error: None,
            signature: None,
            status: BTreeMap::new(),
            health: Vec::new(),
            reboot_required: Vec::new(),
            rebooting: None,
            refused_release: None,
            live: Vec::new(),
            snapshots: BTreeMap::new(),
            since: None,
            attempts: None,
            sequence: None,
            signer: None,
            proof: None,
        }
    }

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
            refused_release: self.refused_release.clone(),
            live: self.live.clone(),
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
    pub result: Status,
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
    pub status: SmallMap<State>,
    /// In an etcd store: whether the host's liveness lease is held (`None` in a directory
    /// store, where the age of the report is all there is).
    pub alive: Option<bool>,
    /// The last report of each command (`apply`, `check`) the store keeps: in etcd both, so
    /// that a check after a failed apply does not hide why it failed; in a directory the last.
    pub by_command: SmallMap<Arc<Report>>,
    /// In etcd: the revision at which each command's report was last written (a report that
    /// said nothing new is not written again).
    pub revisions: SmallMap<i64>,
    /// A key of this host that could not be read, and why: one bad key makes its host's row
    /// unreadable, never the whole fleet's reading.
    pub unreadable: Option<String>,
    /// What the reader could tell of who wrote each report of `by_command` (see [`proof`]).
    pub proofs: SmallMap<proof::Proof>,
    /// Reports filed under this host that cannot be its own (checked against the identity the
    /// reader has for it), each with its key and why: they are left out of `by_command`.
    pub forged: Vec<String>,
    /// Why what the reports say cannot be checked (no identity for the host, or a report
    /// that is not signed), when that is so.
    pub unverified: Option<String>,
    /// What a gateway says of a host it has refused for its rate for a while.
    pub throttled: Option<String>,
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
        // A provider's health and a consumer's live files are filed between runs: neither
        // is the host's last run, nor says how its apply or check went.
        let mut reports: Vec<&Arc<Report>> = self
            .by_command
            .iter()
            .filter(|(command, _)| crate::keys::REPORTED_COMMANDS.contains(&command.as_str()))
            .map(|(_, report)| report)
            .collect();
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

pub use keys::{alive_key, desired_key, report_key, running_key, status_key, version_key};

/// How a client reaches the fleet's store beyond its URL (the wire's word for it).
pub use bell_wire::etcd::StoreAccess as Access;

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
    /// The revision these were read at: a long-poll at the gateway waits for a change after it
    /// (of [`Desired::keys`]).
    pub revision: i64,
}

impl Desired {
    /// The keys a host's pull decides on: a write to one of them is what a host waiting at the
    /// gateway wakes for (its own reports are not among them).
    pub fn keys(fleet: &str, host: &str) -> [String; 3] {
        [
            version_key(fleet),
            desired_key(fleet, host),
            keys::hold_key(fleet, host),
        ]
    }
}

#[cfg(test)]
pub(crate) mod tests;

//! Fleet status: the release (what each host should run) against the reports hosts filed
//! (what they ran and how it went). Every host of the release gets one state; reports from
//! hosts the release does not know are listed as `unknown`. The clock is passed in, so that
//! staleness is decided by the caller and tests can fix the time.

use bell_bundle::Release;
use bell_store::{HostView, Report, State};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostState {
    /// A report filed under its name is not its own (another key, edited, another host's,
    /// an old one put back): an attack on the fleet's store, worse than any failure.
    Forged,
    Failed,
    /// It applied a release, did not reach its fleet again in the time `confirm` gives, and
    /// put itself back on the generation before; it refuses that release from then on.
    Reverted,
    /// Its configuration applied, but a health probe fails.
    Unhealthy,
    /// No report, or none recent enough: the host is not heard from.
    Unaccounted,
    /// What the store holds for it cannot be read (not UTF-8, not JSON, the wrong shape):
    /// shown with the key and why, while every other host is judged as usual.
    Unreadable,
    /// Its report reads as up to date, but no release this reader verified gives the host's
    /// identity to check the report with: anyone who can write the store could have put it.
    Unverified,
    Drifted,
    Pending,
    /// On the desired bundle, with work an image bake left for the first live apply.
    Deferred,
    /// An operator holds it (`bellc hold`): left out of rollouts and kept on its bundle, or
    /// on none when held before its first. Not on the release's bundle, or not heard from, is
    /// then what the hold asked for, not trouble; a failure of the bundle it has, a drift or a
    /// forged report is still shown as such.
    Held,
    UpToDate,
    Unknown,
    /// Registered (`bell-run register`) and not accepted into the inventory yet.
    Discovered,
}

impl HostState {
    /// Every state, most severe first: the order of the rows and of the counts.
    pub const ALL: [HostState; 14] = [
        HostState::Forged,
        HostState::Failed,
        HostState::Reverted,
        HostState::Unhealthy,
        HostState::Unaccounted,
        HostState::Unreadable,
        HostState::Unverified,
        HostState::Drifted,
        HostState::Pending,
        HostState::Deferred,
        HostState::Held,
        HostState::UpToDate,
        HostState::Unknown,
        HostState::Discovered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Forged => "forged",
            HostState::Failed => "failed",
            HostState::Reverted => "reverted",
            HostState::Unhealthy => "unhealthy",
            HostState::Unaccounted => "unaccounted",
            HostState::Unreadable => "unreadable",
            HostState::Unverified => "unverified",
            HostState::Drifted => "drifted",
            HostState::Pending => "pending",
            HostState::Deferred => "deferred",
            HostState::Held => "held",
            HostState::UpToDate => "up-to-date",
            HostState::Unknown => "unknown",
            HostState::Discovered => "discovered",
        }
    }

    pub fn parse(text: &str) -> Option<HostState> {
        HostState::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// One condition of a host; a row carries every one that holds, so none hides another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flag {
    /// A report under its name is not its own: left out, its last verified report shown.
    Forged,
    Failed,
    /// It took back a release it could not confirm (`confirm`), and refuses it.
    Reverted,
    Unhealthy,
    /// Not heard from recently: its liveness lease lapsed, or (reports in a directory) its
    /// last report is older than the threshold.
    Stale,
    Drifted,
    Pending,
    /// Pending, and waiting for a slot of its rollout group.
    Waiting,
    Deferred,
    /// A change it applied takes effect at the next boot, or the host itself says it needs
    /// one (`/run/reboot-required`): not a state of its own, since the host runs its bundle.
    RebootRequired,
    /// Going down for a reboot bell-run ordered (its last report says so); its next report,
    /// from the next boot, says how that went.
    Rebooting,
    /// What its reports say cannot be checked: the release gives it no identity, or its
    /// report is not signed. Shown as it says, never counted converged where identities
    /// are required or the host has one.
    Unverified,
    /// An operator holds it (`bellc hold`): it stays on its bundle.
    Held,
    /// The fleet's gateway has refused it for its rate for a while (a host that floods the
    /// store, or one whose timer runs far too often).
    Throttled,
}

impl Flag {
    pub const ALL: [Flag; 14] = [
        Flag::Forged,
        Flag::Failed,
        Flag::Reverted,
        Flag::Unhealthy,
        Flag::Stale,
        Flag::Drifted,
        Flag::Pending,
        Flag::Waiting,
        Flag::Deferred,
        Flag::RebootRequired,
        Flag::Rebooting,
        Flag::Unverified,
        Flag::Held,
        Flag::Throttled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Flag::Forged => "forged",
            Flag::Failed => "failed",
            Flag::Reverted => "reverted",
            Flag::Unhealthy => "unhealthy",
            Flag::Stale => "stale",
            Flag::Drifted => "drifted",
            Flag::Pending => "pending",
            Flag::Waiting => "waiting",
            Flag::Deferred => "deferred",
            Flag::RebootRequired => "reboot-required",
            Flag::Rebooting => "rebooting",
            Flag::Unverified => "unverified",
            Flag::Held => "held",
            Flag::Throttled => "throttled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostStatus {
    pub host: String,
    /// The most severe of its conditions, for the counts.
    pub state: HostState,
    /// Every condition that holds.
    pub flags: Vec<Flag>,
    /// The bundle the release wants (none for `unknown` hosts).
    pub desired: Option<String>,
    /// The bundle the host runs, as its last report says.
    pub reported: Option<String>,
    /// The release version the host is on, as far as its report tells.
    pub version: Option<String>,
    /// When the last report was filed (unix seconds), and how long ago.
    pub reported_at: Option<u64>,
    pub age_seconds: Option<u64>,
    /// The package repository snapshot of each pinned apt source of the bundle it runs: the
    /// release's for its desired bundle, its report's for another.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshots: bell_bundle::Snapshots,
    /// In an etcd store: whether its liveness lease is held.
    pub alive: Option<bool>,
    /// What failed, each with why (`exec:warm-cache (exit 1: cache dir /srv/cache missing)`).
    pub failures: Vec<String>,
    /// Failing health probes, each with why.
    pub unhealthy: Vec<String>,
    /// Drifted files and resources.
    pub drift: Vec<String>,
    /// Resources deferred to the first live apply.
    pub deferred: Vec<String>,
    /// Why it needs a reboot, as its last report says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reboot_required: Vec<String>,
    /// Resources waiting for providers (`wait-for`), each with what it waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Its live files as its last run left them: the providers each lists, since when.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<bell_store::LiveFile>,
    /// How it is rebooting, when its last report says it went down for a reboot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebooting: Option<String>,
    /// Why the summary state: the failure, the drift, the age of the report.
    pub detail: Option<String>,
    /// The release it took back (its confirmation timed out) and refuses, as its last report
    /// says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_release: Option<String>,
    /// Reports filed under its name that are not its own, each with where and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forged: Vec<String>,
    /// Why what its reports say cannot be checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// What the gateway says of its rate, when it has refused it for a while.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled: Option<String>,
    /// An operator's hold (`bellc hold`): who, why, since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<bell_store::hold::Hold>,
    /// Since when it has been in its state (unix seconds), and how long ago: the first of
    /// the runs in a row that said what decides the state (a failure retried: its first
    /// failure); for a host not heard from, its last report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<u64>,
    /// For a host that is not well: how many runs in a row said so (each is written), and
    /// when the last finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<u64>,
}

impl HostStatus {
    /// Since when, as a row's detail ends: `since 2026-11-26 14:08:20 UTC: 25 attempts, the
    /// last 2m ago`; `None` when there is nothing to say beyond the report's age.
    pub fn since_text(&self) -> Option<String> {
        let attempts = self.attempts_text()?;
        Some(format!(
            "since {}: {attempts}",
            bell_bundle::utc(self.since?)
        ))
    }

    /// Its state and since when, for the host's page: `failed since 2026-11-26 14:08:20 UTC
    /// (2h ago): 25 attempts, the last 2m ago`.
    pub fn since_line(&self) -> Option<String> {
        let since = self.since?;
        let ago = self
            .since_seconds
            .map(|s| format!(" ({} ago)", age_short(s)))
            .unwrap_or_default();
        let attempts = self
            .attempts_text()
            .map(|a| format!(": {a}"))
            .unwrap_or_default();
        Some(format!(
            "{} since {}{ago}{attempts}",
            self.state.as_str(),
            bell_bundle::utc(since)
        ))
    }

    /// `25 attempts, the last 2m ago`, when several runs in a row said the same (the last
    /// one is the report, whose age the row has).
    fn attempts_text(&self) -> Option<String> {
        let attempts = self.attempts.filter(|&n| n > 1)?;
        let last = self
            .age_seconds
            .map(|age| format!(", the last {} ago", age_short(age)))
            .unwrap_or_default();
        Some(format!("{attempts} attempts{last}"))
    }

    /// Notes since when the row's state holds, from the report that decides it (`None` for
    /// a host not heard from: since its last report).
    fn note_since(&mut self, deciding: Option<&Report>, last: Option<&Report>, now: u64) {
        let since = match deciding {
            Some(r) => {
                if r.result != State::Success {
                    self.attempts = Some(r.attempts.unwrap_or(1));
                    self.last_attempt = Some(r.finished_at);
                }
                Some(r.since.unwrap_or(r.started_at))
            }
            None => last.map(|r| r.finished_at),
        };
        self.since = since;
        self.since_seconds = since.map(|at| now.saturating_sub(at));
    }
}

/// The version of the JSON that `bellc status --json` prints.
pub const STATUS_FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetStatus {
    pub format: u32,
    pub fleet: String,
    pub version: String,
    /// Most severe first (failed, unhealthy, unaccounted, drifted, pending, deferred,
    /// up-to-date, unknown), then by name.
    pub hosts: Vec<HostStatus>,
    /// Hosts per summary state, every state present (0 included).
    pub counts: BTreeMap<String, usize>,
    /// Hosts per release version (`unknown` when a report names none and its bundle is not
    /// the release's).
    pub versions: BTreeMap<String, usize>,
    /// Hosts per repository snapshot, by apt source (`debian` → `20261120T000000Z` → 10):
    /// which hosts run which package versions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshots: BTreeMap<String, BTreeMap<String, usize>>,
    /// The fleet's rollout, while one is unfinished (running, halted, being aborted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutNote>,
    /// Each service a live file or a `wait-for` follows: who may provide it (the signed
    /// release's word) and who is ready now.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, ServiceStatus>,
}

/// One followed service, judged as its consumers judge it (`bell_store::ready`): a provider
/// is ready when its latest health report is signed by the identity the release gives it
/// (and not a replay: the witness refuses those), says it is healthy, and its liveness lease
/// is held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServiceStatus {
    /// Every host the release says provides it, by name.
    pub providers: Vec<String>,
    /// Those ready now.
    pub ready: Vec<String>,
}

/// Where an unfinished rollout stands, for the header of `status` and its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutNote {
    /// The release being rolled out.
    pub target: String,
    /// `running`, `halted` or `aborting`.
    pub phase: String,
    /// Waves given so far, of how many.
    pub wave: usize,
    pub waves: usize,
    /// Why it halted.
    pub reason: Option<String>,
}

impl FleetStatus {
    /// The hosts whose state or one of whose flags is in `states` (names of states or flags).
    pub fn hosts_in<'s>(&'s self, states: &'s [String]) -> impl Iterator<Item = &'s HostStatus> {
        self.hosts.iter().filter(move |h| {
            states
                .iter()
                .any(|s| s == h.state.as_str() || h.flags.iter().any(|f| f.as_str() == s.as_str()))
        })
    }

    /// While a rollout of another release than this one runs: the hosts of its waves not
    /// given yet are where the store's release puts them, but not where the rollout is taking
    /// the fleet. They count as pending, with the wave they wait for, not as up to date.
    pub fn mark_later_waves(&mut self, note: RolloutNote, later: &[(usize, Vec<String>)]) {
        for (wave, hosts) in later {
            for row in self.hosts.iter_mut().filter(|h| hosts.contains(&h.host)) {
                if row.state == HostState::UpToDate {
                    row.state = HostState::Pending;
                    row.flags.push(Flag::Pending);
                    row.flags.sort();
                    row.detail = Some(format!(
                        "waits for wave {wave} of {} of the rollout of release {}",
                        note.waves,
                        bell_bundle::short_id(&note.target)
                    ));
                }
            }
        }
        self.recount();
        self.rollout = Some(note);
    }

    /// Rows sorted again and counted again, after states changed.
    /// No release this reader verified is at hand (no OUT, or a URL OUT without `--trust`):
    /// the identities reports would be checked against are not known. No row is up to date
    /// on a report nothing verified: it is `unverified`, and every row says `why`.
    pub fn mark_unverified(&mut self, why: &str) {
        // Only rows that stand on a report: a silent host has nothing to verify.
        for row in self.hosts.iter_mut().filter(|r| r.age_seconds.is_some()) {
            if row.state == HostState::Discovered {
                continue;
            }
            if row.state == HostState::UpToDate {
                row.state = HostState::Unverified;
            }
            row.unverified = Some(why.to_string());
            if !row.flags.contains(&Flag::Unverified) {
                row.flags.push(Flag::Unverified);
                row.flags.sort();
            }
        }
        self.recount();
    }

    fn recount(&mut self) {
        self.hosts
            .sort_by(|a, b| a.state.cmp(&b.state).then_with(|| a.host.cmp(&b.host)));
        for count in self.counts.values_mut() {
            *count = 0;
        }
        for h in &self.hosts {
            *self.counts.entry(h.state.as_str().to_string()).or_insert(0) += 1;
        }
    }

    /// The hosts an operator holds: flagged `held`, with who, why and since when. A held host
    /// that is not on the release's bundle (pending), not heard from (unaccounted, unknown),
    /// or failing only for want of a bundle (never applied one: held before its first) is in
    /// the state `held`, and its detail says by whom and why; a held host with trouble of its
    /// own keeps that state.
    pub fn note_holds(&mut self, holds: &BTreeMap<String, bell_store::hold::Hold>) {
        for row in &mut self.hosts {
            let Some(hold) = holds.get(&row.host) else {
                continue;
            };
            row.flags.push(Flag::Held);
            row.flags.sort();
            row.flags.dedup();
            let as_held = match row.state {
                HostState::Pending | HostState::Unaccounted | HostState::Unknown => true,
                HostState::Failed => row.reported.is_none(),
                _ => false,
            };
            if as_held {
                // What the hold asked for is no flag of trouble: not on the release's bundle,
                // or no bundle to apply (the failure that says so is in the detail).
                if row.state == HostState::Failed {
                    row.failures.clear();
                    row.flags.retain(|f| *f != Flag::Failed);
                }
                row.flags.retain(|f| *f != Flag::Pending);
                row.state = HostState::Held;
            }
            if as_held || row.state == HostState::Pending {
                row.detail = Some(match &row.detail {
                    Some(detail) => format!("{}; {detail}", hold.describe()),
                    None => hold.describe(),
                });
            }
            row.held = Some(hold.clone());
        }
        self.recount();
    }

    /// Hosts that registered and were never accepted, as `discovered` rows (a host that also
    /// reports without being in the release is one of them): what is provisioned against
    /// what the fleet counts, in one list with the `unaccounted` hosts it counts and never
    /// heard from.
    pub fn note_discovered(&mut self, registered: &[super::enroll::Registered]) {
        for r in registered {
            if r.standing != super::enroll::Standing::Pending {
                continue;
            }
            let detail = format!(
                "registered as {}, not accepted (`bellc hosts accept {}`)",
                r.fingerprint.as_deref().unwrap_or("-"),
                r.host
            );
            match self.hosts.iter_mut().find(|h| h.host == r.host) {
                Some(row) if row.state == HostState::Unknown => {
                    row.state = HostState::Discovered;
                    row.detail = Some(format!("{detail}; reports without being in the release"));
                }
                Some(_) => {}
                None => self.hosts.push(HostStatus {
                    host: r.host.clone(),
                    state: HostState::Discovered,
                    flags: Vec::new(),
                    desired: None,
                    reported: None,
                    version: None,
                    reported_at: r.registered_at,
                    age_seconds: None,
                    snapshots: Default::default(),
                    alive: None,
                    failures: Vec::new(),
                    unhealthy: Vec::new(),
                    drift: Vec::new(),
                    deferred: Vec::new(),
                    reboot_required: Vec::new(),
                    waiting: Vec::new(),
                    live: Vec::new(),
                    rebooting: None,
                    detail: Some(detail),
                    refused_release: None,
                    forged: Vec::new(),
                    unverified: None,
                    throttled: None,
                    held: None,
                    since: r.registered_at,
                    since_seconds: None,
                    attempts: None,
                    last_attempt: None,
                }),
            }
        }
        self.recount();
    }

    /// The line over the rows while a rollout is unfinished.
    pub fn rollout_line(&self) -> Option<String> {
        let r = self.rollout.as_ref()?;
        let mut line = format!(
            "rollout of release {} {}: wave {} of {}",
            bell_bundle::short_id(&r.target),
            r.phase,
            r.wave,
            r.waves
        );
        if let Some(reason) = &r.reason {
            line.push_str(&format!(" ({reason})"));
        }
        Some(line)
    }

    pub fn summary(&self) -> String {
        let parts: Vec<String> = HostState::ALL
            .iter()
            .map(|s| {
                format!(
                    "{} {}",
                    self.counts.get(s.as_str()).copied().unwrap_or(0),
                    s.as_str()
                )
            })
            .collect();
        format!(
            "fleet {} release {}: {}",
            self.fleet,
            bell_bundle::short_id(&self.version),
            parts.join(", ")
        )
    }
}

/// `45s`, `12m`, `3h`, `2d`: a report's age in a column.
pub fn age_short(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// Reports in a directory carry no liveness: one older than this (three runs of the default
/// 15-minute timer, as bell-run's liveness lease) leaves its host stale unless `--stale` says
/// otherwise.
pub const DEFAULT_STALE_SECS: u64 = 2700;

/// A rollout gate: are these hosts up to date on this version?
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    pub format: u32,
    pub version: String,
    pub passed: bool,
    /// Hosts that are not there yet, with their state and why.
    pub not_ready: Vec<GateEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateEntry {
    pub host: String,
    /// Its summary state; `None` for a host the release does not have.
    pub state: Option<HostState>,
    pub reason: String,
}

/// Deferred work does not hold a gate: the host runs the bundle, and its first live apply
/// does what an image bake could not.
pub fn gate(status: &FleetStatus, hosts: &[String], version: &str) -> Gate {
    let mut not_ready = Vec::new();
    for name in hosts {
        let entry = |state: Option<HostState>, reason: String| GateEntry {
            host: name.clone(),
            state,
            reason,
        };
        match status.hosts.iter().find(|h| &h.host == name) {
            None => not_ready.push(entry(None, "not in the release".to_string())),
            Some(h) if !matches!(h.state, HostState::UpToDate | HostState::Deferred) => {
                let reason = match &h.detail {
                    Some(detail) => format!("{}: {detail}", h.state.as_str()),
                    None => h.state.as_str().to_string(),
                };
                not_ready.push(entry(Some(h.state), reason))
            }
            // A short form (as printed) names the version too.
            Some(h)
                if version.is_empty()
                    || !h.version.as_deref().is_some_and(|v| v.starts_with(version)) =>
            {
                let on = h
                    .version
                    .as_deref()
                    .map_or("unknown", bell_bundle::short_id);
                not_ready.push(entry(Some(h.state), format!("on version {on}")))
            }
            Some(_) => {}
        }
    }
    Gate {
        format: STATUS_FORMAT,
        version: version.to_string(),
        passed: not_ready.is_empty(),
        not_ready,
    }
}

mod judge;
pub use judge::fleet_status;

#[cfg(test)]
mod tests;

/// When the store's published release is `release` but for hosts an operator holds (a rollout
/// leaves a held host on its bundle, or on none, so the last release it publishes is not the
/// build's own): those hosts, sorted. `None` when the two differ in any host that is not held,
/// or not at all.
pub fn published_but_for_held(
    release: &bell_bundle::Release,
    published: &bell_store::Published,
    holds: &BTreeMap<String, bell_store::hold::Hold>,
) -> Option<Vec<String>> {
    let hosts: std::collections::BTreeSet<&String> =
        release.hosts.keys().chain(published.hosts.keys()).collect();
    let differing: Vec<String> = hosts
        .into_iter()
        .filter(|host| release.hosts.get(*host).map(|e| &e.bundle) != published.hosts.get(*host))
        .cloned()
        .collect();
    let apart = !differing.is_empty() && differing.iter().all(|h| holds.contains_key(h));
    apart.then_some(differing)
}

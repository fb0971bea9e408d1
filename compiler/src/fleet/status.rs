//! Fleet status: the release (what each host should run) against the reports hosts filed
//! (what they ran and how it went). Every host of the release gets one state; reports from
//! hosts the release does not know are listed as `unknown`. The clock is passed in, so that
//! staleness is decided by the caller and tests can fix the time.

use bell_bundle::Release;
use bell_store::{HostView, State};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostState {
    Failed,
    /// Its configuration applied, but a health probe fails.
    Unhealthy,
    Unaccounted,
    Drifted,
    Pending,
    UpToDate,
    Unknown,
}

impl HostState {
    pub fn as_str(self) -> &'static str {
        match self {
            HostState::Failed => "failed",
            HostState::Unhealthy => "unhealthy",
            HostState::Unaccounted => "unaccounted",
            HostState::Drifted => "drifted",
            HostState::Pending => "pending",
            HostState::UpToDate => "up-to-date",
            HostState::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostStatus {
    pub host: String,
    pub state: HostState,
    /// The bundle the release wants (none for `unknown` hosts).
    pub desired: Option<String>,
    /// The bundle the host last reported.
    pub reported: Option<String>,
    /// The release version the host is on, as far as its report tells.
    pub version: Option<String>,
    /// When the last report was filed (unix seconds).
    pub reported_at: Option<u64>,
    /// Why: the failure, the drift, the age of the report.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetStatus {
    pub fleet: String,
    pub version: String,
    /// Failed hosts first, then unhealthy, unaccounted, drifted, pending, up-to-date,
    /// unknown.
    pub hosts: Vec<HostStatus>,
    pub counts: BTreeMap<String, usize>,
    /// Hosts per release version (`unknown` when a report names none and its bundle is not
    /// the release's).
    pub versions: BTreeMap<String, usize>,
}

impl FleetStatus {
    /// Whether any host needs someone: failed, unhealthy, or not heard from.
    pub fn needs_attention(&self) -> bool {
        self.hosts.iter().any(|h| {
            matches!(
                h.state,
                HostState::Failed | HostState::Unhealthy | HostState::Unaccounted
            )
        })
    }

    pub fn summary(&self) -> String {
        let parts: Vec<String> = [
            HostState::UpToDate,
            HostState::Pending,
            HostState::Drifted,
            HostState::Failed,
            HostState::Unhealthy,
            HostState::Unaccounted,
            HostState::Unknown,
        ]
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
            crate::review::diff::short(&self.version),
            parts.join(", ")
        )
    }
}

/// `stale_secs`: a report older than this (against `now`) leaves its host unaccounted.
pub fn fleet_status(
    release: &Release,
    views: &BTreeMap<String, HostView>,
    now: u64,
    stale_secs: Option<u64>,
) -> FleetStatus {
    let mut hosts = Vec::new();
    for (name, entry) in &release.hosts {
        let view = views.get(name);
        let report = view.and_then(|v| v.report.as_ref());
        let status = view.map(|v| &v.status);
        let reported = report.and_then(|r| r.bundle.clone());
        let on_desired = reported.as_deref() == Some(entry.bundle.as_str());
        let version = report.and_then(|r| r.release.clone()).or_else(|| {
            // Bundles are shared between releases; a host on the desired bundle that did not
            // say which release it applied is counted with this one.
            on_desired.then(|| release.version.clone())
        });
        let category = |c: &str| status.and_then(|s| s.get(c)).copied();
        let alive = view.and_then(|v| v.alive);
        let (state, detail) = match report {
            None => (HostState::Unaccounted, Some("no report".to_string())),
            // In etcd a host renews a lease instead of writing a report that did not change:
            // liveness is the lease, and an old report is only an old change.
            Some(r) if alive == Some(false) => (
                HostState::Unaccounted,
                Some(format!(
                    "its liveness lease expired; last change reported {} minutes ago",
                    now.saturating_sub(r.finished_at) / 60
                )),
            ),
            Some(r)
                if alive.is_none()
                    && stale_secs.is_some_and(|s| now.saturating_sub(r.finished_at) > s) =>
            {
                (
                    HostState::Unaccounted,
                    Some(format!(
                        "last report {} minutes ago",
                        now.saturating_sub(r.finished_at) / 60
                    )),
                )
            }
            Some(r) if category("apply") == Some(State::Failed) => {
                (HostState::Failed, Some(failure_detail(r, "apply")))
            }
            Some(r) if category("health") == Some(State::Unhealthy) => {
                (HostState::Unhealthy, Some(unhealthy_detail(r)))
            }
            Some(r) if category("apply") == Some(State::Waiting) && !on_desired => (
                HostState::Pending,
                Some(
                    r.error
                        .clone()
                        .unwrap_or_else(|| "waiting for a slot".to_string()),
                ),
            ),
            Some(_) if !on_desired => (
                HostState::Pending,
                Some(format!(
                    "on bundle {}, the release has {}",
                    reported
                        .as_deref()
                        .map_or("none", crate::review::diff::short),
                    crate::review::diff::short(&entry.bundle)
                )),
            ),
            Some(r) if category("check") == Some(State::Drifted) => (
                HostState::Drifted,
                Some(
                    r.drift
                        .iter()
                        .map(|d| d.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                )
                .filter(|s| !s.is_empty()),
            ),
            Some(r) if category("check") == Some(State::Failed) => {
                (HostState::Failed, Some(failure_detail(r, "check")))
            }
            Some(_) => (HostState::UpToDate, None),
        };
        hosts.push(HostStatus {
            host: name.clone(),
            state,
            desired: Some(entry.bundle.clone()),
            reported,
            version,
            reported_at: report.map(|r| r.finished_at),
            detail,
        });
    }
    for (name, view) in views {
        if release.hosts.contains_key(name) {
            continue;
        }
        let report = view.report.as_ref();
        hosts.push(HostStatus {
            host: name.clone(),
            state: HostState::Unknown,
            desired: None,
            reported: report.and_then(|r| r.bundle.clone()),
            version: report.and_then(|r| r.release.clone()),
            reported_at: report.map(|r| r.finished_at),
            detail: Some("not in the release".to_string()),
        });
    }
    hosts.sort_by(|a, b| a.state.cmp(&b.state).then_with(|| a.host.cmp(&b.host)));
    let mut counts = BTreeMap::new();
    let mut versions = BTreeMap::new();
    for h in &hosts {
        *counts.entry(h.state.as_str().to_string()).or_insert(0) += 1;
        if h.state != HostState::Unknown {
            let v = h.version.clone().unwrap_or_else(|| "unknown".to_string());
            *versions.entry(v).or_insert(0) += 1;
        }
    }
    FleetStatus {
        fleet: release.fleet.clone(),
        version: release.version.clone(),
        hosts,
        counts,
        versions,
    }
}

/// `api (exit 7: connection refused)`: each failing probe of the last report that ran them.
fn unhealthy_detail(r: &bell_store::Report) -> String {
    let failing: Vec<String> = r
        .health
        .iter()
        .filter(|p| !p.healthy)
        .map(|p| match &p.detail {
            Some(d) => format!("{} ({d})", p.name),
            None => p.name.clone(),
        })
        .collect();
    if failing.is_empty() {
        "a health probe failed".to_string()
    } else {
        format!("health probe {}", failing.join(", "))
    }
}

fn failure_detail(r: &bell_store::Report, category: &str) -> String {
    if r.command != category {
        return format!("the last {category} failed");
    }
    if let Some(error) = &r.error {
        return error.clone();
    }
    let failed: Vec<String> = r
        .resources
        .iter()
        .filter(|x| matches!(x.result.as_str(), "failed" | "error" | "halted" | "skipped"))
        .map(|x| {
            // The last thing the script said is usually why (`cache dir /srv/cache missing`),
            // unless the detail already quotes it.
            let said = x
                .output
                .as_deref()
                .and_then(|o| o.lines().rev().map(str::trim).find(|l| !l.is_empty()))
                .map(|line| line.strip_prefix("bell: ").unwrap_or(line))
                .filter(|line| !x.detail.as_deref().is_some_and(|d| d.contains(line)));
            match (&x.detail, said) {
                (Some(d), Some(said)) => format!("{} ({d}: {said})", x.key),
                (Some(d), None) => format!("{} ({d})", x.key),
                (None, Some(said)) => format!("{} ({said})", x.key),
                (None, None) => x.key.clone(),
            }
        })
        .collect();
    if failed.is_empty() {
        format!("{category} failed")
    } else {
        failed.join(", ")
    }
}

/// A rollout gate: are these hosts up to date on this version?
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    pub version: String,
    pub passed: bool,
    /// Hosts that are not there yet, with why.
    pub not_ready: Vec<(String, String)>,
}

pub fn gate(status: &FleetStatus, hosts: &[String], version: &str) -> Gate {
    let mut not_ready = Vec::new();
    for name in hosts {
        match status.hosts.iter().find(|h| &h.host == name) {
            None => not_ready.push((name.clone(), "not in the release".to_string())),
            Some(h) if h.state != HostState::UpToDate => {
                not_ready.push((name.clone(), h.state.as_str().to_string()))
            }
            // A short form (as printed) names the version too.
            Some(h)
                if version.is_empty()
                    || !h.version.as_deref().is_some_and(|v| v.starts_with(version)) =>
            {
                not_ready.push((
                    name.clone(),
                    format!(
                        "on version {}",
                        h.version
                            .as_deref()
                            .map_or("unknown", crate::review::diff::short)
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Gate {
        version: version.to_string(),
        passed: not_ready.is_empty(),
        not_ready,
    }
}

#[cfg(test)]
mod tests {
    use super::failure_detail;
    use bell_store::{Report, ResourceResult, State};

    #[test]
    fn a_failure_names_what_the_script_said_last() {
        let result = |key: &str, detail: Option<&str>, output: Option<&str>| ResourceResult {
            key: key.into(),
            result: "failed".into(),
            detail: detail.map(str::to_string),
            output: output.map(str::to_string),
        };
        let report = Report {
            format: bell_store::REPORT_FORMAT,
            host: "h".into(),
            fleet: "f".into(),
            command: "apply".into(),
            result: State::Failed,
            release: None,
            bundle: None,
            started_at: 0,
            finished_at: 0,
            resources: vec![
                result(
                    "exec:warm-cache",
                    Some("exit 1"),
                    Some("warming\ncache dir /srv/cache missing\n"),
                ),
                result(
                    "sysctl:vm.x",
                    Some("exit 1: sysctl:vm.x: refused"),
                    Some("bell: sysctl:vm.x: refused"),
                ),
            ],
            drift: Vec::new(),
            error: None,
            signature: None,
            status: Default::default(),
            health: Vec::new(),
        };
        assert_eq!(
            failure_detail(&report, "apply"),
            "exec:warm-cache (exit 1: cache dir /srv/cache missing), \
             sysctl:vm.x (exit 1: sysctl:vm.x: refused)"
        );
    }
}

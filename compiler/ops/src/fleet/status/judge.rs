//! Judging each host from what the store holds of it: its reports (each checked against its
//! identity), its liveness and the release, into one row with every flag that holds.

use super::*;

/// `stale_secs`: a report older than this (against `now`) marks its host stale where the
/// store has no liveness of its own (a directory).
pub fn fleet_status<V: std::borrow::Borrow<HostView> + Sync>(
    release: &Release,
    views: &BTreeMap<String, V>,
    now: u64,
    stale_secs: Option<u64>,
) -> FleetStatus {
    let stale_secs = stale_secs.unwrap_or(DEFAULT_STALE_SECS);
    let entries: Vec<(&String, &bell_bundle::ReleaseHost)> = release.hosts.iter().collect();
    let rows = |part: &[(&String, &bell_bundle::ReleaseHost)]| -> Vec<HostStatus> {
        part.iter()
            .map(|(name, entry)| {
                let view = views.get(name.as_str()).map(V::borrow);
                host_status(name, entry, release, view, now, stale_secs)
            })
            .collect()
    };
    // Every row on every core: the page and the controller judge the whole fleet at each
    // refresh, and at 100,000 hosts one core takes a third of a second.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut hosts: Vec<HostStatus> = if entries.len() < 4096 || threads == 1 {
        rows(&entries)
    } else {
        let rows = &rows;
        std::thread::scope(|scope| {
            let parts: Vec<_> = entries
                .chunks(entries.len().div_ceil(threads))
                .map(|part| scope.spawn(move || rows(part)))
                .collect();
            parts
                .into_iter()
                .flat_map(|part| part.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    for (name, view) in views {
        if release.hosts.contains_key(name) {
            continue;
        }
        let view: &HostView = view.borrow();
        let report = view.report.as_ref();
        hosts.push(HostStatus {
            host: name.clone(),
            state: HostState::Unknown,
            flags: Vec::new(),
            desired: None,
            reported: report.and_then(|r| r.bundle.clone()),
            version: report.and_then(|r| r.release.clone()),
            reported_at: report.map(|r| r.finished_at),
            age_seconds: report.map(|r| now.saturating_sub(r.finished_at)),
            snapshots: report.map(|r| r.snapshots.clone()).unwrap_or_default(),
            alive: view.alive,
            failures: Vec::new(),
            unhealthy: Vec::new(),
            drift: Vec::new(),
            deferred: Vec::new(),
            reboot_required: report
                .map(|r| r.reboot_required.clone())
                .unwrap_or_default(),
            rebooting: report.and_then(|r| r.rebooting.clone()),
            waiting: Vec::new(),
            live: Vec::new(),
            detail: Some("not in the release".to_string()),
            refused_release: None,
            forged: view.forged.clone(),
            unverified: None,
            throttled: None,
            held: None,
            since: None,
            since_seconds: None,
            attempts: None,
            last_attempt: None,
        });
    }
    // Host names are unique: no two rows are equal, and an unstable sort orders them alike.
    hosts.sort_unstable_by(|a, b| a.state.cmp(&b.state).then_with(|| a.host.cmp(&b.host)));
    let mut counts: BTreeMap<String, usize> = HostState::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    let mut versions = BTreeMap::new();
    let mut snapshots: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for h in &hosts {
        for (source, snapshot) in &h.snapshots {
            *snapshots
                .entry(source.clone())
                .or_default()
                .entry(snapshot.clone())
                .or_insert(0) += 1;
        }
        *counts.entry(h.state.as_str().to_string()).or_insert(0) += 1;
        if !matches!(h.state, HostState::Unknown | HostState::Discovered) {
            let v = h.version.clone().unwrap_or_else(|| "unknown".to_string());
            *versions.entry(v).or_insert(0) += 1;
        }
    }
    let services = services(release, views);
    FleetStatus {
        services,
        format: STATUS_FORMAT,
        fleet: release.fleet.clone(),
        version: release.version.clone(),
        rollout: None,
        hosts,
        counts,
        versions,
        snapshots,
    }
}

/// The followed services of `release` and which of their providers are ready.
fn services<V: std::borrow::Borrow<HostView>>(
    release: &Release,
    views: &BTreeMap<String, V>,
) -> BTreeMap<String, ServiceStatus> {
    let mut services: BTreeMap<String, ServiceStatus> = BTreeMap::new();
    for (host, entry) in &release.hosts {
        if entry.provides.is_empty() {
            continue;
        }
        let view = views.get(host.as_str()).map(V::borrow);
        let health = bell_store::ready::HEALTH_COMMAND;
        let ready = view.is_some_and(|v| {
            v.alive == Some(true)
                && matches!(
                    v.proofs.get(health),
                    Some(bell_store::proof::Proof::Signed { .. })
                )
                && v.by_command
                    .get(health)
                    .is_some_and(|r| r.result == State::Success)
        });
        for service in entry.provides.iter() {
            let status = services.entry(service.clone()).or_default();
            status.providers.push(host.clone());
            if ready {
                status.ready.push(host.clone());
            }
        }
    }
    services
}

/// One host of the release: every condition its reports show, and the most severe of them.
pub(super) fn host_status(
    name: &str,
    entry: &bell_bundle::ReleaseHost,
    release: &Release,
    view: Option<&HostView>,
    now: u64,
    stale_secs: u64,
) -> HostStatus {
    let report = view.and_then(|v| v.report.as_ref());
    let category = |c: &str| view.and_then(|v| v.status.get(c)).copied();
    let reported = report.and_then(|r| r.bundle.clone());
    let on_desired = reported.as_deref() == Some(entry.bundle.as_str());
    let version = report.and_then(|r| r.release.clone()).or_else(|| {
        // Bundles are shared between releases; a host on the desired bundle that did not say
        // which release it applied is counted with this one.
        on_desired.then(|| release.version.clone())
    });
    let alive = view.and_then(|v| v.alive);
    let age = report.map(|r| now.saturating_sub(r.finished_at));
    let mut row = HostStatus {
        host: name.to_string(),
        state: HostState::UpToDate,
        flags: Vec::new(),
        desired: Some(entry.bundle.clone()),
        reported: reported.clone(),
        version,
        reported_at: report.map(|r| r.finished_at),
        age_seconds: age,
        // What the signing key signed, for the bundle it names; the host's word only for one
        // the release does not (an older bundle).
        snapshots: match (on_desired, report) {
            (true, _) => (*entry.snapshots).clone(),
            (false, Some(r)) if r.bundle.is_some() => r.snapshots.clone(),
            (false, _) => bell_bundle::Snapshots::new(),
        },
        alive,
        failures: Vec::new(),
        unhealthy: Vec::new(),
        drift: Vec::new(),
        deferred: Vec::new(),
        reboot_required: Vec::new(),
        waiting: Vec::new(),
        live: Vec::new(),
        rebooting: None,
        detail: None,
        refused_release: None,
        forged: view.map(|v| v.forged.clone()).unwrap_or_default(),
        unverified: view.and_then(|v| v.unverified.clone()),
        throttled: view.and_then(|v| v.throttled.clone()),
        held: None,
        since: None,
        since_seconds: None,
        attempts: None,
        last_attempt: None,
    };
    let mut reasons: Vec<(Flag, String)> = Vec::new();
    if !row.forged.is_empty() {
        reasons.push((Flag::Forged, format!("forged: {}", row.forged.join("; "))));
    }
    if row.throttled.is_some() {
        row.flags.push(Flag::Throttled);
    }
    if row.unverified.is_some() {
        row.flags.push(Flag::Unverified);
    }
    if let Some(why) = view.and_then(|v| v.unreadable.as_ref()) {
        row.state = HostState::Unreadable;
        row.detail = Some(why.clone());
        return settle(row, reasons);
    }
    let Some(r) = report else {
        row.state = HostState::Unaccounted;
        row.detail = Some("no report".to_string());
        return settle(row, reasons);
    };
    let minutes = age.unwrap_or(0) / 60;
    // In etcd a host renews a lease instead of writing a report that did not change:
    // liveness is the lease, and an old report is only an old change.
    let stale = match alive {
        Some(false) => Some(format!(
            "its liveness lease expired; last change reported {minutes} minutes ago"
        )),
        Some(true) => None,
        None => {
            (age.unwrap_or(0) > stale_secs).then(|| format!("last report {minutes} minutes ago"))
        }
    };
    // Each condition is told from the report of the command that found it, where the store
    // keeps one per command (a check after a failed apply does not hide why it failed).
    let of = |command: &str| view.and_then(|v| v.by_command.get(command)).unwrap_or(r);
    for c in ["apply", "check"] {
        match category(c) {
            Some(State::Failed) => {
                let why = failure_detail(of(c), c);
                row.failures.push(why.clone());
                reasons.push((Flag::Failed, why));
            }
            // A failure whose host put itself back: its own state, naming the release.
            Some(State::Reverted) => {
                let went_back = of(c);
                let why = failure_detail(went_back, c);
                row.refused_release = went_back.refused_release.clone();
                let why = match &row.refused_release {
                    Some(v) if !why.contains(bell_bundle::short_id(v)) => {
                        format!("took back release {}: {why}", bell_bundle::short_id(v))
                    }
                    _ => why,
                };
                row.failures.push(why.clone());
                reasons.push((Flag::Reverted, why));
            }
            _ => {}
        }
    }
    let probed = [r, of("apply"), of("check")]
        .into_iter()
        .find(|x| x.health.iter().any(|p| !p.healthy))
        .unwrap_or(r);
    if category("health") == Some(State::Unhealthy) {
        row.unhealthy = failing_probes(probed);
        reasons.push((Flag::Unhealthy, unhealthy_detail(probed)));
    }
    if let Some(why) = stale {
        reasons.push((Flag::Stale, why));
    }
    if category("check") == Some(State::Drifted) {
        row.drift = of("check").drift.iter().map(|d| d.name.clone()).collect();
        reasons.push((Flag::Drifted, row.drift.join(", ")));
    }
    // Resources waiting for providers (`wait-for`): on its bundle, not yet all in place.
    row.waiting = r
        .resources
        .iter()
        .filter(|x| x.result == bell_store::Status::Waiting)
        .map(|x| match &x.detail {
            Some(why) => format!("{} ({why})", x.key),
            None => x.key.clone(),
        })
        .collect();
    if on_desired && !row.waiting.is_empty() {
        reasons.push((
            Flag::Waiting,
            format!("waiting for providers: {}", row.waiting.join("; ")),
        ));
    }
    if !on_desired {
        let waiting = category("apply") == Some(State::Waiting);
        let why = match (&r.error, waiting) {
            (Some(error), true) => error.clone(),
            (None, true) => "waiting for a slot".to_string(),
            _ => format!(
                "on bundle {}, the release has {}",
                reported.as_deref().map_or("none", bell_bundle::short_id),
                bell_bundle::short_id(&entry.bundle)
            ),
        };
        reasons.push((Flag::Pending, why));
        if waiting {
            row.flags.push(Flag::Waiting);
        }
    }
    row.deferred = r
        .resources
        .iter()
        .filter(|x| x.result == bell_store::Status::Deferred)
        .map(|x| x.key.clone())
        .collect();
    // Its live files as the newer of its last run and `bell-run live` left them (that one
    // files what they list between runs), of the bundle it runs.
    let between = view
        .and_then(|v| v.by_command.get(bell_store::keys::LIVE_COMMAND))
        .filter(|l| l.bundle == r.bundle && l.finished_at >= r.finished_at);
    row.live = between.map_or(&r.live, |l| &l.live).clone();
    row.reboot_required = r.reboot_required.clone();
    if !row.reboot_required.is_empty() {
        row.flags.push(Flag::RebootRequired);
    }
    row.rebooting = r.rebooting.clone();
    if row.rebooting.is_some() {
        row.flags.push(Flag::Rebooting);
    }
    if !row.deferred.is_empty() && on_desired {
        reasons.push((
            Flag::Deferred,
            format!(
                "{} deferred to the first live apply",
                row.deferred.join(", ")
            ),
        ));
    }
    let mut row = settle(row, reasons);
    let deciding = match row.state {
        HostState::Failed | HostState::Reverted => ["apply", "check"]
            .into_iter()
            .find(|c| matches!(category(c), Some(State::Failed | State::Reverted)))
            .map(of),
        HostState::Unhealthy => Some(probed),
        HostState::Drifted => Some(of("check")),
        HostState::Unaccounted | HostState::Forged => None,
        _ => Some(r),
    };
    row.note_since(deciding.map(|r| &**r), Some(r), now);
    row
}

/// The row's flags and its state: the first reason's (the most severe), or as it was.
pub(super) fn settle(mut row: HostStatus, reasons: Vec<(Flag, String)>) -> HostStatus {
    row.flags.extend(reasons.iter().map(|(flag, _)| *flag));
    row.flags.sort();
    row.flags.dedup();
    if let Some((flag, why)) = reasons.into_iter().next() {
        row.state = match flag {
            Flag::Forged => HostState::Forged,
            Flag::Failed => HostState::Failed,
            Flag::Reverted => HostState::Reverted,
            Flag::Unhealthy => HostState::Unhealthy,
            Flag::Stale => HostState::Unaccounted,
            Flag::Drifted => HostState::Drifted,
            Flag::Pending | Flag::Waiting => HostState::Pending,
            Flag::Deferred => HostState::Deferred,
            Flag::RebootRequired
            | Flag::Rebooting
            | Flag::Unverified
            | Flag::Held
            | Flag::Throttled => row.state,
        };
        row.detail = Some(why).filter(|d| !d.is_empty());
    }
    if let (None, Some(how)) = (&row.detail, &row.rebooting) {
        row.detail = Some(format!(
            "rebooting ({how}) for: {}",
            row.reboot_required.join("; ")
        ));
    }
    if row.detail.is_none() && !row.reboot_required.is_empty() {
        row.detail = Some(format!(
            "reboot required: {}",
            row.reboot_required.join("; ")
        ));
    }
    row
}

/// Each failing probe of the last report that ran them, with why.
pub(super) fn failing_probes(r: &bell_store::Report) -> Vec<String> {
    r.health
        .iter()
        .filter(|p| !p.healthy)
        .map(|p| match &p.detail {
            Some(d) => format!("{} ({d})", p.name),
            None => p.name.clone(),
        })
        .collect()
}

/// `health probe api (exit 7: connection refused)`.
pub(super) fn unhealthy_detail(r: &bell_store::Report) -> String {
    let failing = failing_probes(r);
    if failing.is_empty() {
        "a health probe failed".to_string()
    } else {
        format!("health probe {}", failing.join(", "))
    }
}

pub(super) fn failure_detail(r: &bell_store::Report, category: &str) -> String {
    if r.command != category {
        return format!("the last {category} failed");
    }
    if let Some(error) = &r.error {
        return error.clone();
    }
    let failed: Vec<String> = r
        .resources
        .iter()
        .filter(|x| x.result.is_failure())
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

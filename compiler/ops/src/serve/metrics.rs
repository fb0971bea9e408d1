//! `/metrics`: the snapshot in Prometheus's text exposition format, for the Prometheus a site
//! already runs and its alerting rules (the README ships a set). Every family is announced
//! (`# HELP`, `# TYPE`) even when it has no sample, so that a rule's expression names a
//! metric that exists however calm the fleet is.
//!
//! Counts are the status's (`bellc status --json`'s `counts`), so the page, the JSON and the
//! alerts agree. Per-host series exist only for hosts with a problem (`bell_host_problem`), so
//! a 100,000-host fleet that is well costs Prometheus a few dozen series, not 100,000.

use super::{Board, Snapshot};
use crate::fleet::rollout::Phase;
use crate::fleet::status::{Flag, HostState};
use bell_bundle::prometheus::label_value;
use std::fmt::Write;

/// The states worth a page, each with a series of its own per host.
const PROBLEMS: [HostState; 7] = [
    HostState::Forged,
    HostState::Failed,
    HostState::Reverted,
    HostState::Unhealthy,
    HostState::Unaccounted,
    HostState::Unreadable,
    HostState::Drifted,
];

/// The exposition of `board` at `now` (unix seconds).
pub fn render(board: &Board, now: u64) -> String {
    let mut out = Exposition::default();
    let snapshot = board.snapshot();
    store(&mut out, board, snapshot.as_deref(), now);
    if let Some(s) = snapshot.as_deref() {
        hosts(&mut out, s);
        services(&mut out, s);
        rollout(&mut out, s, now);
        slots(&mut out, s, now);
    }
    out.text
}

fn store(out: &mut Exposition, board: &Board, s: Option<&Snapshot>, now: u64) {
    out.family(
        "bell_store_reachable",
        "gauge",
        "1 when the last reading of the fleet's keys succeeded, 0 when it failed or none was made.",
    );
    let reachable = board.outage().is_none() && s.is_some();
    out.sample("bell_store_reachable", &[], u64::from(reachable));
    out.family(
        "bell_store_read_timestamp_seconds",
        "gauge",
        "When the snapshot shown was read from the store (unix seconds).",
    );
    if let Some(s) = s {
        out.sample("bell_store_read_timestamp_seconds", &[], s.read_at);
    }
    out.family(
        "bell_store_read_age_seconds",
        "gauge",
        "How old the snapshot shown is: large when the store stopped answering.",
    );
    if let Some(s) = s {
        out.sample(
            "bell_store_read_age_seconds",
            &[],
            now.saturating_sub(s.read_at),
        );
    }
    out.family(
        "bell_store_read_duration_seconds",
        "gauge",
        "How long the last reading took.",
    );
    out.sample_f64(
        "bell_store_read_duration_seconds",
        &[],
        board.took().as_secs_f64(),
    );
    out.family(
        "bell_store_reads_total",
        "counter",
        "Readings of the store made, successful or not.",
    );
    out.sample("bell_store_reads_total", &[], board.refreshes());
    out.family(
        "bell_store_requests_total",
        "counter",
        "Requests sent to etcd (readings, retries, member status).",
    );
    out.sample("bell_store_requests_total", &[], board.requests());
    let members = board.members();
    out.family(
        "bell_store_member_up",
        "gauge",
        "1 when the member answers its status with a leader and no alarm, else 0.",
    );
    for m in &members {
        out.sample(
            "bell_store_member_up",
            &[("endpoint", &m.endpoint)],
            u64::from(m.up),
        );
    }
    out.family(
        "bell_store_member_leader",
        "gauge",
        "1 for the member that is the cluster's leader.",
    );
    for m in &members {
        out.sample(
            "bell_store_member_leader",
            &[("endpoint", &m.endpoint)],
            u64::from(m.leader),
        );
    }
    out.family(
        "bell_store_member_db_size_bytes",
        "gauge",
        "The size of the member's database file (what etcd's quota counts).",
    );
    for m in &members {
        if let Some(size) = m.db_size {
            out.sample(
                "bell_store_member_db_size_bytes",
                &[("endpoint", &m.endpoint)],
                size,
            );
        }
    }
}

fn hosts(out: &mut Exposition, s: &Snapshot) {
    out.family(
        "bell_release_info",
        "gauge",
        "The release the hosts are compared with (OUT's release.json): always 1.",
    );
    out.sample(
        "bell_release_info",
        &[("fleet", &s.status.fleet), ("version", &s.status.version)],
        1_u64,
    );
    out.family(
        "bell_hosts",
        "gauge",
        "Hosts in each state, as `bellc status` counts them (its most severe condition).",
    );
    for state in HostState::ALL {
        let count = s.status.counts.get(state.as_str()).copied().unwrap_or(0);
        out.sample("bell_hosts", &[("state", state.as_str())], count);
    }
    out.family(
        "bell_hosts_flagged",
        "gauge",
        "Hosts with each flag (a host has every flag that holds, among them held).",
    );
    let mut flagged = [0_usize; Flag::ALL.len()];
    for host in &s.status.hosts {
        for flag in &host.flags {
            if let Some(i) = Flag::ALL.iter().position(|f| f == flag) {
                flagged[i] += 1;
            }
        }
    }
    for (flag, count) in Flag::ALL.iter().zip(flagged) {
        out.sample("bell_hosts_flagged", &[("flag", flag.as_str())], count);
    }
    out.family(
        "bell_host_problem",
        "gauge",
        "1 for each host in a state worth a page (forged, failed, unhealthy, unaccounted, \
         unreadable, drifted); hosts without one have no series.",
    );
    for host in &s.status.hosts {
        if PROBLEMS.contains(&host.state) {
            out.sample(
                "bell_host_problem",
                &[("host", &host.host), ("state", host.state.as_str())],
                1_u64,
            );
        }
    }
}

fn services(out: &mut Exposition, s: &Snapshot) {
    out.family(
        "bell_service_ready",
        "gauge",
        "Providers of each service a live file or wait-for follows that are ready now (a \
         signed healthy report, a held lease).",
    );
    for (name, service) in &s.status.services {
        out.sample(
            "bell_service_ready",
            &[("service", name)],
            service.ready.len(),
        );
    }
    out.family(
        "bell_service_providers",
        "gauge",
        "Hosts the signed release says provide each followed service.",
    );
    for (name, service) in &s.status.services {
        out.sample(
            "bell_service_providers",
            &[("service", name)],
            service.providers.len(),
        );
    }
}

fn rollout(out: &mut Exposition, s: &Snapshot, now: u64) {
    out.family(
        "bell_rollout_phase",
        "gauge",
        "1 for the phase the fleet's last rollout is in, 0 for the others; no series before \
         a first rollout.",
    );
    let progress = s.progress.as_ref();
    if let Some(p) = progress {
        for phase in Phase::ALL {
            out.sample(
                "bell_rollout_phase",
                &[("phase", phase.as_str())],
                u64::from(p.phase == phase),
            );
        }
    }
    let numbers: [(&str, &str, RolloutNumber); 7] = [
        ("bell_rollout_waves", "Waves of the rollout.", |p, _| {
            p.waves.len() as u64
        }),
        (
            "bell_rollout_wave",
            "The wave being waited for (1-based), 0 when none is.",
            |p, _| {
                if p.given > p.converged {
                    p.converged as u64 + 1
                } else {
                    0
                }
            },
        ),
        (
            "bell_rollout_waves_given",
            "Waves whose hosts were given their new bundle.",
            |p, _| p.given as u64,
        ),
        (
            "bell_rollout_waves_converged",
            "Waves whose hosts all reported up to date and healthy.",
            |p, _| p.converged as u64,
        ),
        (
            "bell_rollout_hosts_held",
            "Hosts left out of the rollout because they were held when it began.",
            |p, _| p.held.len() as u64,
        ),
        (
            "bell_rollout_started_timestamp_seconds",
            "When the rollout began (unix seconds).",
            |p, _| p.started_at,
        ),
        (
            "bell_rollout_age_seconds",
            "How long ago the rollout began.",
            |p, now| now.saturating_sub(p.started_at),
        ),
    ];
    for (name, help, value) in numbers {
        out.family(name, "gauge", help);
        if let Some(p) = progress {
            out.sample(name, &[], value(p, now));
        }
    }
}

/// A number of a rollout's progress at a time.
type RolloutNumber = fn(&crate::fleet::rollout::Progress, u64) -> u64;

fn slots(out: &mut Exposition, s: &Snapshot, now: u64) {
    out.family(
        "bell_slots",
        "gauge",
        "Slots of each rollout group (hosts of it that may be disrupted at once).",
    );
    // A group whose semaphore cannot be read has no numbers to give; the others go on.
    let readable = || s.groups.iter().filter(|g| g.unreadable.is_none());
    for g in readable() {
        out.sample("bell_slots", &[("group", &g.group)], g.total_slots);
    }
    out.family(
        "bell_slots_held",
        "gauge",
        "Slots of each rollout group held now.",
    );
    for g in readable() {
        out.sample("bell_slots_held", &[("group", &g.group)], g.holders.len());
    }
    out.family(
        "bell_slot_held_seconds",
        "gauge",
        "How long each holder has held its slot (holders bell did not write have no series).",
    );
    for g in &s.groups {
        for holder in &g.holders {
            if let Some(since) = holder.since {
                out.sample(
                    "bell_slot_held_seconds",
                    &[("group", &g.group), ("host", &holder.host)],
                    now.saturating_sub(since),
                );
            }
        }
    }
}

/// Text in the exposition format, built line by line with every label value escaped.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // HELP text escapes only `\` and newlines.
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Whole>) {
        let value: Whole = value.into();
        self.line(name, labels, &value.0.to_string());
    }

    fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let text = if value.is_finite() {
            format!("{value}")
        } else {
            "NaN".to_string()
        };
        self.line(name, labels, &text);
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], value: &str) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", label_value(text));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// A whole number of anything bell counts.
struct Whole(u64);

impl From<u64> for Whole {
    fn from(n: u64) -> Self {
        Whole(n)
    }
}

impl From<usize> for Whole {
    fn from(n: usize) -> Self {
        Whole(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::Exposition;

    #[test]
    fn hostile_label_values_stay_inside_their_quotes() {
        let mut out = Exposition::default();
        out.family("bell_x", "gauge", "a help\nwith a newline and a \\");
        out.sample(
            "bell_x",
            &[("group", "a\"} 1\nbell_evil 1\\"), ("b", "ü")],
            2_u64,
        );
        assert_eq!(
            out.text,
            "# HELP bell_x a help\\nwith a newline and a \\\\\n\
             # TYPE bell_x gauge\n\
             bell_x{group=\"a\\\"} 1\\nbell_evil 1\\\\\",b=\"ü\"} 2\n"
        );
        assert_eq!(out.text.lines().count(), 3);
    }
}

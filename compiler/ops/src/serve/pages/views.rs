//! What each page shows, as data the templates (and `?format=json`) read: the store, the
//! release, the rollout, the rollout groups, the host list filtered and paged, one host.

use super::*;

#[derive(Serialize)]
pub(super) struct Count {
    pub(super) state: &'static str,
    pub(super) hosts: usize,
}

#[derive(Serialize)]
pub struct StoreView {
    pub url: String,
    pub reachable: bool,
    /// When the snapshot shown was read (unix seconds, and as UTC).
    pub read_at: Option<u64>,
    pub read_at_utc: Option<String>,
    /// Why the last reading failed, and since when it has.
    pub error: Option<String>,
    pub failing_since: Option<u64>,
    pub failing_since_utc: Option<String>,
    pub refreshes: u64,
    pub requests: u64,
    pub refresh_seconds: u64,
    /// How long the last reading took, in seconds.
    pub took_seconds: f64,
    /// The same for people (`0.42 s`).
    pub took: String,
    /// Each member, as it answered about itself at the last refresh.
    pub members: Vec<bell_store::members::Member>,
    /// How many of them are up, for the header.
    pub members_up: usize,
}

pub(super) fn store_view(board: &Board) -> StoreView {
    let outage = board.outage();
    let read_at = board.snapshot().map(|s| s.read_at);
    let members = board.members();
    StoreView {
        url: board.store_url(),
        reachable: outage.is_none() && read_at.is_some(),
        read_at,
        read_at_utc: read_at.map(bell_bundle::utc),
        error: outage.as_ref().map(|o| o.error.clone()),
        failing_since: outage.as_ref().map(|o| o.since),
        failing_since_utc: outage.as_ref().map(|o| bell_bundle::utc(o.since)),
        refreshes: board.refreshes(),
        requests: board.requests(),
        refresh_seconds: board.refresh_seconds(),
        took_seconds: board.took().as_secs_f64(),
        took: format!("{:.2} s", board.took().as_secs_f64()),
        members_up: members.iter().filter(|m| m.up).count(),
        members,
    }
}

#[derive(Serialize)]
pub(super) struct ReleaseView {
    version: String,
    short: String,
    hosts: usize,
    signer: Option<String>,
    /// When it was signed (its sequence is the signing time in milliseconds).
    signed_utc: Option<String>,
    expires_utc: Option<String>,
    /// The version the store names, and whether it is this one.
    published: Option<String>,
    published_is_this: bool,
    /// The held hosts the store's release differs from this one in, when only they differ.
    published_but_for_held: Vec<String>,
    budget: Option<String>,
}

pub(super) fn release_view(s: &Snapshot) -> ReleaseView {
    let r = &s.release;
    ReleaseView {
        version: r.version.clone(),
        short: bell_bundle::short_id(&r.version).to_string(),
        hosts: r.hosts.len(),
        signer: s.signer.clone(),
        signed_utc: r.sequence.map(|ms| bell_bundle::utc(ms / 1000)),
        expires_utc: r.expires.map(bell_bundle::utc),
        published: s
            .published
            .as_deref()
            .map(|v| bell_bundle::short_id(v).to_string()),
        published_is_this: s.published.as_deref() == Some(r.version.as_str()),
        published_but_for_held: s.published_but_for_held.clone().unwrap_or_default(),
        budget: r.rollout.as_ref().map(|b| match &b.batch_by {
            Some(label) => format!("{} per {label}", b.max_unavailable),
            None => format!("{} in the fleet", b.max_unavailable),
        }),
    }
}

#[derive(Serialize)]
pub(super) struct RolloutView {
    phase: &'static str,
    target: String,
    from: Option<String>,
    waves: usize,
    given: usize,
    converged: usize,
    /// 1-based: the wave being waited for, when one is.
    current: Option<usize>,
    hosts_changing: usize,
    /// Hosts of the current wave that are not up to date yet, with their state.
    waiting_for: Vec<(String, String)>,
    published_utc: Option<String>,
    halted: Option<String>,
    paused: Option<String>,
    /// What acts on a halted or paused rollout, ready to paste.
    commands: Vec<Command>,
    troubles: Vec<String>,
    controller: Option<String>,
}

pub(super) fn rollout_view(board: &Board, s: &Snapshot) -> Option<RolloutView> {
    let p = s.progress.as_ref()?;
    let current = (p.given > p.converged).then_some(p.converged + 1);
    let waiting_for = current
        .and_then(|wave| p.waves.get(wave - 1))
        .map(|hosts| {
            hosts
                .iter()
                .filter_map(|h| {
                    let state = s.host(h).map_or("unknown", |row| row.state.as_str());
                    (state != "up-to-date").then(|| (h.clone(), state.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(RolloutView {
        phase: p.phase.as_str(),
        target: bell_bundle::short_id(&p.target).to_string(),
        from: p
            .from
            .as_deref()
            .map(|v| bell_bundle::short_id(v).to_string()),
        waves: p.waves.len(),
        given: p.given,
        converged: p.converged,
        current,
        hosts_changing: p.waves.iter().map(Vec::len).sum(),
        waiting_for,
        published_utc: p
            .published
            .as_ref()
            .map(|_| bell_bundle::utc(p.published_at)),
        halted: p.halted.as_ref().map(|h| h.reason.clone()),
        paused: p.paused.as_ref().map(|pause| {
            format!(
                "paused by {} since {}{}",
                pause.by,
                bell_bundle::utc(pause.since),
                pause
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )
        }),
        troubles: p
            .halted
            .iter()
            .flat_map(|h| &h.hosts)
            .map(|t| match &t.detail {
                Some(d) => format!("{} ({}): {d}", t.host, t.state),
                None => format!("{} ({})", t.host, t.state),
            })
            .collect(),
        controller: s.controller.clone(),
        commands: match p.phase {
            Phase::Halted => {
                let out = match board.out() {
                    crate::serve::Out::Dir(dir) => dir.display().to_string(),
                    crate::serve::Out::Url(_) => "OUT".to_string(),
                };
                vec![
                    Command::new(
                        "once the hosts that stopped it are fixed, go on (with your signing key)",
                        bellc(board, &["rollout", &out, "--resume"], false),
                    ),
                    Command::new(
                        "or give the moved hosts their previous bundle back",
                        bellc(board, &["rollout", &out, "--abort"], false),
                    ),
                ]
            }
            Phase::Paused => vec![Command::new(
                "no new wave until",
                bellc(board, &["rollout", "--continue"], true),
            )],
            _ => Vec::new(),
        },
    })
}

/// One row of the history table.
#[derive(Serialize)]
pub(super) struct HistoryRow {
    started_utc: String,
    by: String,
    from: Option<String>,
    target: String,
    waves: usize,
    hosts: usize,
    outcome: String,
    took: String,
    reason: Option<String>,
    held: Vec<String>,
}

pub(super) fn history_view(s: &Snapshot) -> Vec<HistoryRow> {
    s.history
        .iter()
        .map(|e| HistoryRow {
            started_utc: bell_bundle::utc(e.started_at),
            by: e.started_by.clone(),
            from: e
                .from
                .as_deref()
                .map(|v| bell_bundle::short_id(v).to_string()),
            target: bell_bundle::short_id(&e.target).to_string(),
            waves: e.waves.len(),
            hosts: e.waves.iter().map(|w| w.hosts.len()).sum(),
            outcome: e.outcome.clone(),
            took: age(e.ended_at.saturating_sub(e.started_at)),
            reason: e.reason.clone(),
            held: e.held.clone(),
        })
        .collect()
}

#[derive(Serialize)]
pub(super) struct GroupView {
    group: String,
    total: u64,
    held: usize,
    free: u64,
    holders: Vec<HolderView>,
    /// Why its semaphore cannot be read: the row says so, and the other groups go on.
    unreadable: Option<String>,
}

#[derive(Serialize)]
pub(super) struct HolderView {
    /// `web-4 for 3m`.
    text: String,
    /// Frees its slots: for a holder that died holding one.
    release: String,
}

pub(super) fn groups_view(board: &Board, s: &Snapshot) -> Vec<GroupView> {
    s.groups
        .iter()
        .map(|g| GroupView {
            group: g.group.clone(),
            total: g.total_slots,
            held: g.holders.len(),
            free: g.total_slots.saturating_sub(g.holders.len() as u64),
            unreadable: g.unreadable.clone(),
            holders: g
                .holders
                .iter()
                .map(|h| HolderView {
                    text: match h.since {
                        Some(since) => {
                            format!("{} for {}", h.host, age(s.read_at.saturating_sub(since)))
                        }
                        None => h.host.clone(),
                    },
                    release: bellc(board, &["lock", "release", &h.host], true),
                })
                .collect(),
        })
        .collect()
}

/// A command that acts on a problem the page shows, and when to run it.
#[derive(Serialize)]
pub struct Command {
    pub why: &'static str,
    pub command: String,
}

impl Command {
    fn new(why: &'static str, command: String) -> Command {
        Command { why, command }
    }
}

/// `bellc WORDS… --store URL [--fleet F]`, every word quoted for a shell: the page's
/// commands run as they are pasted, whatever a host or group is called.
pub(super) fn bellc(board: &Board, words: &[&str], fleet: bool) -> String {
    let mut line = vec!["bellc".to_string()];
    line.extend(words.iter().map(|w| shell_quote(w)));
    line.push("--store".to_string());
    line.push(shell_quote(&board.store_url()));
    if fleet {
        line.push("--fleet".to_string());
        line.push(shell_quote(&board.fleet()));
    }
    line.join(" ")
}

/// What acts on a host's problems: its hold, the slots it holds, a failure to look at.
pub(super) fn host_commands(board: &Board, s: &Snapshot, h: &HostStatus) -> Vec<Command> {
    let mut commands = Vec::new();
    if h.held.is_some() {
        commands.push(Command::new(
            "it stays on its bundle until",
            bellc(board, &["unhold", &h.host], true),
        ));
    } else if matches!(
        h.state,
        HostState::Failed | HostState::Reverted | HostState::Unhealthy | HostState::Drifted
    ) {
        commands.push(Command::new(
            "to keep it out of rollouts while you look",
            bellc(
                board,
                &["hold", &h.host, "--reason", "looking into it"],
                true,
            ),
        ));
    }
    if s.groups
        .iter()
        .any(|g| g.holders.iter().any(|holder| holder.host == h.host))
    {
        commands.push(Command::new(
            "it holds a slot of its rollout group; if it died holding it",
            bellc(board, &["lock", "release", &h.host], true),
        ));
    }
    if h.flags.contains(&Flag::Waiting) {
        commands.push(Command::new(
            "it waits for a slot; who holds them",
            bellc(board, &["lock", "status"], true),
        ));
    }
    commands
}

/// One row of the host list.
#[derive(Serialize)]
pub struct Row {
    pub host: String,
    pub state: &'static str,
    /// The conditions besides the state itself.
    pub flags: Vec<&'static str>,
    pub detail: Option<String>,
    pub version: Option<String>,
    pub age: Option<String>,
    /// How long it has been in its state (`3h`), and for a host that is not well how many
    /// runs in a row said so.
    pub since: Option<String>,
    pub attempts: Option<u64>,
    pub reported: Option<String>,
    pub desired: Option<String>,
}

pub(super) fn row(h: &HostStatus) -> Row {
    Row {
        host: h.host.clone(),
        state: h.state.as_str(),
        flags: h
            .flags
            .iter()
            .map(|f| f.as_str())
            .filter(|f| *f != h.state.as_str())
            .collect(),
        detail: h.detail.clone(),
        version: h
            .version
            .as_deref()
            .map(|v| bell_bundle::short_id(v).to_string()),
        age: h.age_seconds.map(age),
        since: h.since_seconds.map(age),
        attempts: h.attempts.filter(|&n| n > 1),
        reported: h
            .reported
            .as_deref()
            .map(|v| bell_bundle::short_id(v).to_string()),
        desired: h
            .desired
            .as_deref()
            .map(|v| bell_bundle::short_id(v).to_string()),
    }
}

/// The hosts a request asks for (`state`, `label=KEY=VALUE` any number of times, `host` a part
/// of the name), one page of them.
#[derive(Serialize)]
pub struct HostList {
    pub state: Option<String>,
    pub labels: Vec<String>,
    pub name: Option<String>,
    pub matched: usize,
    pub page: usize,
    pub pages: usize,
    pub rows: Vec<Row>,
    /// The query string of this filter, without the page, for links.
    pub query: String,
    pub problems: Vec<String>,
}

pub(super) fn filtered(s: &Snapshot, request: &Request) -> HostList {
    let mut problems = Vec::new();
    let state = request
        .param("state")
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    let name = request
        .param("host")
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    let mut labels: Vec<(String, String)> = Vec::new();
    for text in request.params("label").filter(|v| !v.is_empty()) {
        match text.split_once('=') {
            Some((k, v)) => labels.push((k.trim().to_string(), v.trim().to_string())),
            None => problems.push(format!(
                "label filter `{text}`: write it as KEY=VALUE (rack=r1)"
            )),
        }
    }
    let page: usize = match request.param("page").filter(|v| !v.is_empty()) {
        None => 1,
        Some(text) => text.parse().unwrap_or_else(|_| {
            problems.push(format!("page `{text}` is not a number"));
            1
        }),
    };
    let matches = |h: &&HostStatus| {
        let in_state = match state.as_deref() {
            None => true,
            Some(want) => h.state.as_str() == want || h.flags.iter().any(|f| f.as_str() == want),
        };
        let named = match name.as_deref() {
            None => true,
            Some(part) => h.host.contains(part),
        };
        in_state
            && named
            && (labels.is_empty()
                || s.release.hosts.get(&h.host).is_some_and(|entry| {
                    labels
                        .iter()
                        .all(|(k, v)| entry.labels.get(k).is_some_and(|x| x == v))
                }))
    };
    // Matched once: a label filter compares every host's labels.
    let matching: Vec<&HostStatus> = s.status.hosts.iter().filter(matches).collect();
    let matched = matching.len();
    let pages = matched.div_ceil(PAGE_SIZE).max(1);
    let page = page.clamp(1, pages);
    let rows = matching
        .iter()
        .skip((page - 1) * PAGE_SIZE)
        .take(PAGE_SIZE)
        .map(|h| row(h))
        .collect();
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(st) = &state {
        query.push(("state", st.clone()));
    }
    for (k, v) in &labels {
        query.push(("label", format!("{k}={v}")));
    }
    if let Some(n) = &name {
        query.push(("host", n.clone()));
    }
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encoding::utf8_percent_encode(v, QUERY)))
        .collect::<Vec<_>>()
        .join("&");
    HostList {
        state,
        labels: labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        name,
        matched,
        page,
        pages,
        rows,
        query,
        problems,
    }
}

/// What a query value keeps as it is: letters, digits and `-._~`.
pub(super) const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Everything about one host.
#[derive(Serialize)]
pub struct HostView {
    pub status: HostStatus,
    /// What acts on its problems, ready to paste.
    pub commands: Vec<Command>,
    /// Its state since when, with the attempts of a host that is not well.
    pub since: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub address: Option<String>,
    pub alive: Option<bool>,
    /// The last report of each command (`apply`, `check`) the store keeps.
    pub reports: Vec<ReportView>,
    /// Its live files, with when each took what it lists in words.
    pub live: Vec<LiveView>,
    /// `bellc explain`, when `bellc serve` was given the spec.
    pub explain: Option<String>,
    /// Why there is none: no spec given, or the host is not in it.
    pub explain_note: Option<String>,
    /// The bundle the host runs against the one it should, as `bellc diff` shows a change;
    /// `None` when it runs the desired bundle or reported none.
    pub diff: Option<diff::BundleChange>,
    /// Why there is no diff although the bundles differ (OUT no longer keeps the old one).
    pub diff_note: Option<String>,
}

#[derive(Serialize)]
pub struct LiveView {
    pub path: String,
    pub service: String,
    pub ready: Vec<String>,
    pub since_utc: Option<String>,
}

#[derive(Serialize)]
pub struct ReportView {
    pub command: String,
    pub result: &'static str,
    pub release: Option<String>,
    pub bundle: Option<String>,
    pub finished_utc: String,
    /// When a run in a row that said the same as this one was first (with how many), if
    /// there were several.
    pub first_utc: Option<String>,
    pub attempts: Option<u64>,
    pub error: Option<String>,
    pub signature: Option<String>,
    /// Resources that did something or went wrong first, then the rest.
    pub resources: Vec<bell_store::ResourceResult>,
    pub drift: Vec<bell_store::Drift>,
    pub health: Vec<bell_store::ProbeResult>,
}

pub(super) fn host_view(board: &Board, s: &Snapshot, name: &str) -> Option<HostView> {
    let status = s.host(name)?.clone();
    let entry = s.release.hosts.get(name);
    let view = s.views.get(name);
    let reports = view
        .map(|v| {
            v.by_command
                .values()
                .map(|r| {
                    let mut resources = r.resources.clone();
                    // What went wrong first, then what changed, then the rest, each in order.
                    resources.sort_by_key(|x| match &x.result {
                        failed if failed.is_failure() => 0,
                        bell_store::Status::Unchanged | bell_store::Status::Ok => 2,
                        _ => 1,
                    });
                    ReportView {
                        command: r.command.clone(),
                        result: r.result.as_str(),
                        release: r
                            .release
                            .as_deref()
                            .map(|v| bell_bundle::short_id(v).to_string()),
                        bundle: r
                            .bundle
                            .as_deref()
                            .map(|v| bell_bundle::short_id(v).to_string()),
                        finished_utc: bell_bundle::utc(r.finished_at),
                        first_utc: r
                            .attempts
                            .filter(|&n| n > 1)
                            .and(r.since)
                            .map(bell_bundle::utc),
                        attempts: r.attempts.filter(|&n| n > 1),
                        error: r.error.clone(),
                        signature: r.signature.clone(),
                        resources,
                        drift: r.drift.clone(),
                        health: r.health.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let explain = board.explain(name);
    let (mut diff, mut diff_note) = (None, None);
    if let (Some(desired), Some(reported)) = (&status.desired, &status.reported) {
        if desired != reported {
            match board.bundle_change(&s.release, reported, desired) {
                Ok(change) => diff = Some(change),
                Err(e) => diff_note = Some(e),
            }
        }
    }
    Some(HostView {
        commands: host_commands(board, s, &status),
        since: status.since_line(),
        labels: entry.map(|e| e.labels.as_ref().clone()).unwrap_or_default(),
        address: entry.and_then(|e| e.address.clone()),
        alive: view.and_then(|v| v.alive),
        reports,
        live: status
            .live
            .iter()
            .map(|l| LiveView {
                path: l.path.clone(),
                service: l.service.clone(),
                ready: l.ready.clone(),
                since_utc: l.since.map(bell_bundle::utc),
            })
            .collect(),
        explain_note: match (&explain, board.has_spec()) {
            (Some(_), _) => None,
            (None, true) => Some(format!("{name} is not a host of the spec given")),
            (None, false) => Some(
                "start `bellc serve` with `--spec SPEC` to show where each value comes from"
                    .to_string(),
            ),
        },
        explain,
        diff,
        diff_note,
        status,
    })
}

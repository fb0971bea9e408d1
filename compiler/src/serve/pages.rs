//! The pages and the JSON of `bellc serve`, from a [`Snapshot`]: what a request asks for,
//! turned into a view (plain serializable structs) and rendered with minijinja. Templates
//! escape every value for HTML (they end in `.html`); links are built with `urlencode`.

use super::http::{Request, Response};
use super::{Board, Snapshot};
use crate::escape::shell_quote;
use crate::fleet::rollout::Phase;
use crate::fleet::status::{age_short as age, Flag, HostState, HostStatus};
use crate::review::diff::{self, short};
use minijinja::{context, Environment};
use serde::Serialize;
use std::collections::BTreeMap;

/// Hosts per page of the overview: a page of a 100,000-host fleet costs what one of a
/// 100-host fleet does.
pub const PAGE_SIZE: usize = 100;

pub struct Pages {
    env: Environment<'static>,
}

impl Pages {
    /// The templates are part of bellc: one that does not parse is a bug (the tests render
    /// every one).
    pub fn new() -> Result<Pages, String> {
        let mut env = Environment::new();
        for (name, text) in [
            ("layout.html", include_str!("templates/layout.html")),
            ("overview.html", include_str!("templates/overview.html")),
            ("host.html", include_str!("templates/host.html")),
            ("message.html", include_str!("templates/message.html")),
        ] {
            env.add_template(name, text)
                .map_err(|e| format!("the page template {name}: {e}"))?;
        }
        Ok(Pages { env })
    }

    /// Answers one request.
    pub fn answer(&self, board: &Board, request: &Request) -> Response {
        let path = request.path.as_str();
        if path == "/api/v1/status" {
            return match board.snapshot() {
                Some(s) => json(&s.status),
                None => unavailable_json(board),
            };
        }
        if path == "/metrics" {
            return Response::metrics(super::metrics::render(board, super::unix_now()));
        }
        if path == "/api/v1/store" {
            return json(&store_view(board));
        }
        if let Some(what) = path.strip_prefix("/api/v1/") {
            if matches!(what, "rollout" | "locks" | "history") {
                let Some(s) = board.snapshot() else {
                    return unavailable_json(board);
                };
                return match what {
                    // As `bellc rollout --status --json` says it.
                    "rollout" => json(&serde_json::json!({
                        "progress": s.progress,
                        "controller": s.controller,
                        "published": s.published,
                    })),
                    "locks" => json(&s.groups),
                    _ => json(&s.history),
                };
            }
        }
        if path == "/api/v1/hosts" {
            return match board.snapshot() {
                Some(s) => json(&filtered(&s, request)),
                None => unavailable_json(board),
            };
        }
        if let Some(name) = path.strip_prefix("/api/v1/hosts/") {
            return match board.snapshot() {
                None => unavailable_json(board),
                Some(s) => match host_view(board, &s, name) {
                    Some(view) => json(&view),
                    None => json(&serde_json::json!({ "error": format!("no host `{name}`") }))
                        .with_status(404),
                },
            };
        }
        if path == "/" {
            return self.overview(board, request);
        }
        if let Some(name) = path.strip_prefix("/hosts/") {
            return self.host(board, name);
        }
        self.message(board, "Not found", &format!("nothing at {path}"))
            .with_status(404)
    }

    fn render(&self, name: &str, ctx: minijinja::Value) -> Response {
        match self
            .env
            .get_template(name)
            .and_then(|template| template.render(ctx))
        {
            Ok(html) => Response::html(html),
            Err(e) => Response::html(format!("<p>bellc serve: cannot render {name}: {e}</p>"))
                .with_status(500),
        }
    }

    fn message(&self, board: &Board, title: &str, text: &str) -> Response {
        self.render(
            "message.html",
            context! { title, text, store => store_view(board), fleet => board.fleet() },
        )
    }

    fn not_read_yet(&self, board: &Board) -> Response {
        self.message(
            board,
            "Waiting for the store",
            "the store has not been read yet: nothing to show until it answers",
        )
    }

    fn overview(&self, board: &Board, request: &Request) -> Response {
        let Some(s) = board.snapshot() else {
            return self.not_read_yet(board);
        };
        let list = filtered(&s, request);
        let waiting = s
            .status
            .hosts
            .iter()
            .filter(|h| h.flags.contains(&Flag::Waiting))
            .count();
        let counts: Vec<Count> = HostState::ALL
            .iter()
            .map(|state| Count {
                state: state.as_str(),
                hosts: s.status.counts.get(state.as_str()).copied().unwrap_or(0),
            })
            .collect();
        self.render(
            "overview.html",
            context! {
                fleet => s.status.fleet,
                store => store_view(board),
                release => release_view(&s),
                rollout => rollout_view(board, &s),
                counts,
                waiting,
                total => s.status.hosts.len(),
                groups => groups_view(board, &s),
                history => history_view(&s),
                snapshots => s.status.snapshots,
                list,
                states => HostState::ALL.iter().map(|h| h.as_str()).chain(["stale", "waiting"]).collect::<Vec<_>>(),
                refresh => board.refresh_seconds(),
                warnings => s.warnings,
            },
        )
    }

    fn host(&self, board: &Board, name: &str) -> Response {
        let Some(s) = board.snapshot() else {
            return self.not_read_yet(board);
        };
        match host_view(board, &s, name) {
            Some(host) => self.render(
                "host.html",
                context! {
                    fleet => s.status.fleet,
                    store => store_view(board),
                    host,
                    refresh => board.refresh_seconds(),
                },
            ),
            None => self
                .message(
                    board,
                    "No such host",
                    &format!("fleet {} has no host `{name}`", s.status.fleet),
                )
                .with_status(404),
        }
    }
}

fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string_pretty(value) {
        Ok(text) => Response::json(text),
        Err(e) => Response::json(serde_json::json!({ "error": e.to_string() }).to_string())
            .with_status(500),
    }
}

fn unavailable_json(board: &Board) -> Response {
    json(&serde_json::json!({
        "error": "the store has not been read yet",
        "store": store_view(board),
    }))
    .with_status(503)
}

#[derive(Serialize)]
struct Count {
    state: &'static str,
    hosts: usize,
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

fn store_view(board: &Board) -> StoreView {
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
struct ReleaseView {
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
    budget: Option<String>,
}

fn release_view(s: &Snapshot) -> ReleaseView {
    let r = &s.release;
    ReleaseView {
        version: r.version.clone(),
        short: short(&r.version).to_string(),
        hosts: r.hosts.len(),
        signer: s.signer.clone(),
        signed_utc: r.sequence.map(|ms| bell_bundle::utc(ms / 1000)),
        expires_utc: r.expires.map(bell_bundle::utc),
        published: s.published.as_deref().map(|v| short(v).to_string()),
        published_is_this: s.published.as_deref() == Some(r.version.as_str()),
        budget: r.rollout.as_ref().map(|b| match &b.batch_by {
            Some(label) => format!("{} per {label}", b.max_unavailable),
            None => format!("{} in the fleet", b.max_unavailable),
        }),
    }
}

#[derive(Serialize)]
struct RolloutView {
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

fn rollout_view(board: &Board, s: &Snapshot) -> Option<RolloutView> {
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
        target: short(&p.target).to_string(),
        from: p.from.as_deref().map(|v| short(v).to_string()),
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
                    super::Out::Dir(dir) => dir.display().to_string(),
                    super::Out::Url(_) => "OUT".to_string(),
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
struct HistoryRow {
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

fn history_view(s: &Snapshot) -> Vec<HistoryRow> {
    s.history
        .iter()
        .map(|e| HistoryRow {
            started_utc: bell_bundle::utc(e.started_at),
            by: e.started_by.clone(),
            from: e.from.as_deref().map(|v| short(v).to_string()),
            target: short(&e.target).to_string(),
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
struct GroupView {
    group: String,
    total: u64,
    held: usize,
    free: u64,
    holders: Vec<HolderView>,
}

#[derive(Serialize)]
struct HolderView {
    /// `web-4 for 3m`.
    text: String,
    /// Frees its slots: for a holder that died holding one.
    release: String,
}

fn groups_view(board: &Board, s: &Snapshot) -> Vec<GroupView> {
    s.groups
        .iter()
        .map(|g| GroupView {
            group: g.group.clone(),
            total: g.total_slots,
            held: g.holders.len(),
            free: g.total_slots.saturating_sub(g.holders.len() as u64),
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
fn bellc(board: &Board, words: &[&str], fleet: bool) -> String {
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
fn host_commands(board: &Board, s: &Snapshot, h: &HostStatus) -> Vec<Command> {
    let mut commands = Vec::new();
    if h.held.is_some() {
        commands.push(Command::new(
            "it stays on its bundle until",
            bellc(board, &["unhold", &h.host], true),
        ));
    } else if matches!(
        h.state,
        HostState::Failed | HostState::Unhealthy | HostState::Drifted
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

fn row(h: &HostStatus) -> Row {
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
        version: h.version.as_deref().map(|v| short(v).to_string()),
        age: h.age_seconds.map(age),
        since: h.since_seconds.map(age),
        attempts: h.attempts.filter(|&n| n > 1),
        reported: h.reported.as_deref().map(|v| short(v).to_string()),
        desired: h.desired.as_deref().map(|v| short(v).to_string()),
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

fn filtered(s: &Snapshot, request: &Request) -> HostList {
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
const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
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

fn host_view(board: &Board, s: &Snapshot, name: &str) -> Option<HostView> {
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
                    resources.sort_by_key(|x| match x.result.as_str() {
                        "failed" | "error" | "halted" | "skipped" => 0,
                        "unchanged" | "ok" => 2,
                        _ => 1,
                    });
                    ReportView {
                        command: r.command.clone(),
                        result: r.result.as_str(),
                        release: r.release.as_deref().map(|v| short(v).to_string()),
                        bundle: r.bundle.as_deref().map(|v| short(v).to_string()),
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

#[cfg(test)]
mod tests {
    use super::super::{Board, Snapshot};
    use super::*;
    use crate::fleet::status::fleet_status;
    use bell_bundle::{Release, ReleaseHost};
    use std::sync::Arc;

    const HOSTILE: &str = "<img src=x onerror=alert(1)>\"'&";

    /// A board over a 250-host release that no host reported to, with one label value a
    /// browser would run if it were not escaped.
    fn board() -> (tempfile::TempDir, Board) {
        let hosts: BTreeMap<String, ReleaseHost> = (0..250)
            .map(|i| {
                let rack = if i % 2 == 0 { HOSTILE } else { "r2" };
                let labels = BTreeMap::from([("rack".to_string(), rack.to_string())]);
                let entry = ReleaseHost {
                    bundle: "ab".repeat(32),
                    address: None,
                    labels: Arc::new(labels),
                    identity: None,
                    secrets: None,
                    snapshots: Default::default(),
                    reboots: false,
                };
                (format!("host-{i:03}"), entry)
            })
            .collect();
        let release = Release {
            format: bell_bundle::FORMAT,
            fleet: "f".into(),
            version: Release::compute_version(&hosts),
            hosts,
            waves: Vec::new(),
            sequence: None,
            expires: None,
            rollout: None,
            identities_required: false,
            assignments: Vec::new(),
        };
        let out = tempfile::tempdir().unwrap();
        std::fs::write(
            out.path().join("release.json"),
            serde_json::to_string(&release).unwrap(),
        )
        .unwrap();
        let etcd = bell_store::Etcd::new(vec!["127.0.0.1:9".into()]);
        let board = Board::new(
            super::super::Out::Dir(out.path().to_path_buf()),
            etcd,
            std::time::Duration::from_secs(5),
            None,
        )
        .unwrap();
        let views = BTreeMap::new();
        let status = fleet_status(&release, &views, 1000, None);
        let index = super::super::index(&status);
        *board.current.write().unwrap() = Some(Arc::new(Snapshot {
            release: Arc::new(release),
            signer: None,
            status,
            index,
            views,
            groups: Vec::new(),
            progress: None,
            controller: None,
            published: None,
            history: Vec::new(),
            read_at: 1000,
            warnings: Vec::new(),
        }));
        (out, board)
    }

    fn get(board: &Board, target: &str) -> Response {
        let head = format!("GET {target} HTTP/1.1");
        let (_, request) = super::super::http::parse_head(head.as_bytes()).unwrap();
        Pages::new().unwrap().answer(board, &request)
    }

    fn rows(r: &Response) -> usize {
        String::from_utf8_lossy(&r.body)
            .matches("data-host=")
            .count()
    }

    #[test]
    fn hosts_are_paged() {
        let (_out, board) = board();
        let first = get(&board, "/");
        assert_eq!((first.status, rows(&first)), (200, PAGE_SIZE));
        let html = String::from_utf8_lossy(&first.body);
        assert!(
            html.contains("page 1 of 3") && html.contains("page=2"),
            "{html}"
        );
        let last = get(&board, "/?page=3");
        assert_eq!(rows(&last), 50);
        // Past the end: the last page; not a number: the first, and why.
        assert_eq!(rows(&get(&board, "/?page=99")), 50);
        let host = get(&board, "/hosts/host-001");
        assert_eq!(host.status, 200);
        let html = String::from_utf8_lossy(&host.body);
        assert!(
            html.contains("no report") && html.contains("--spec SPEC"),
            "{html}"
        );
        let bad = get(&board, "/?page=abc");
        assert!(String::from_utf8_lossy(&bad.body).contains("page `abc` is not a number"));
    }

    #[test]
    fn a_label_filter_matches_and_every_value_is_escaped() {
        let (_out, board) = board();
        let r2 = get(&board, "/?label=rack%3Dr2");
        assert_eq!(rows(&r2), 100);
        let html = String::from_utf8_lossy(&r2.body);
        assert!(html.contains("125 of 250 hosts"), "{html}");
        let target = format!(
            "/?label={}",
            percent_encoding::utf8_percent_encode(&format!("rack={HOSTILE}"), QUERY)
        );
        let hostile = get(&board, &target);
        let html = String::from_utf8_lossy(&hostile.body);
        assert!(html.contains("125 of 250 hosts"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        // The JSON of one host carries the label as data.
        let api = get(&board, "/api/v1/hosts/host-000");
        let value: serde_json::Value = serde_json::from_slice(&api.body).unwrap();
        assert_eq!(value["labels"]["rack"], HOSTILE);
        assert_eq!(get(&board, "/api/v1/hosts/nobody").status, 404);
        assert_eq!(get(&board, "/nothing-here").status, 404);
    }
}

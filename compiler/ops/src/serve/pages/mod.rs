//! The pages and the JSON of `bellc serve`, from a [`Snapshot`]: what a request asks for,
//! turned into a view (plain serializable structs) and rendered with minijinja. Templates
//! escape every value for HTML (they end in `.html`); links are built with `urlencode`.

use super::{Board, Snapshot};
use crate::fleet::rollout::Phase;
use crate::fleet::status::{age_short as age, Flag, HostState, HostStatus};
use bell_wire::server::{Request, Response};
use bellc_core::escape::shell_quote;
use bellc_core::review::diff;
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
            ("layout.html", include_str!("../templates/layout.html")),
            ("overview.html", include_str!("../templates/overview.html")),
            ("host.html", include_str!("../templates/host.html")),
            ("message.html", include_str!("../templates/message.html")),
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
                services => s.status.services,
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

mod views;
use views::{
    filtered, groups_view, history_view, host_view, release_view, rollout_view, store_view, Count,
};
pub use views::{Command, HostList, HostView, ReportView, Row, StoreView};

#[cfg(test)]
mod tests;

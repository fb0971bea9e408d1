//! `bellc serve`: the status page of a build output and its fleet's store, over HTTP.

use crate::args::Cli;
use crate::{frontend, read_check, Failure};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;
use std::path::Path;

/// `--store` of `publish`: only etcd holds a fleet's desired release.
/// `bellc serve`: returns only when it cannot start (or the spec has errors).
#[allow(clippy::too_many_arguments)]
pub fn serve(
    cli: &Cli,
    out: &str,
    trust: Option<&Path>,
    store: &str,
    access: &bell_store::Access,
    listen: &str,
    spec: Option<&Path>,
    refresh: u64,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    use bell_ops::serve::{pages::Pages, Board, Explain, Out};
    use bell_wire::server as http;
    use std::sync::Arc;
    let etcd = bell_store::Etcd::open(store, access)?;
    let out = Out::parse(out).map_err(Failure::Usage)?;
    let explain: Option<Explain> = match spec {
        None => None,
        Some(spec) => {
            read_check(spec)?;
            let Some(front) = frontend(cli, spec, sources, diags) else {
                return Ok(1);
            };
            if diags.has_errors() {
                return Ok(1);
            }
            let sources = std::mem::take(sources);
            Some(Box::new(move |host: &str| {
                let h = front.resolution.hosts.iter().find(|h| h.name == host)?;
                Some(bellc_core::review::explain::explain(
                    &front.spec,
                    h,
                    &sources,
                ))
            }))
        }
    };
    let trust = trust.map(bell_ops::fleet::trusted::load).transpose()?;
    let refresh_every = std::time::Duration::from_secs(refresh);
    let board = Board::trusting(out, etcd, refresh_every, explain, trust)
        .map_err(|e| format!("{e}\n  help: {}", e.help()))?;
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| listen.to_string());
    let board = Arc::new(board);
    board.refresh(bell_ops::serve::unix_now());
    if let Some(outage) = board.outage() {
        eprintln!("warning: {}: {}", board.store_url(), outage.error);
    }
    eprintln!(
        "bellc serve: fleet {} on http://{address}/ (store {}, read every {refresh} s)",
        board.fleet(),
        board.store_url()
    );
    if !listener.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
        eprintln!(
            "warning: listening beyond loopback: anyone who reaches {address} sees the fleet's \
             status (the page has no login)"
        );
    }
    Arc::clone(&board).keep_refreshing();
    let pages = Pages::new()?;
    http::serve(listener, move |request| pages.answer(&board, request));
    Ok(0)
}

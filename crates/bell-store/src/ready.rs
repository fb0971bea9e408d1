//! Which providers of a service are ready, as a consumer's live file sees them.
//!
//! The consumer's bundle names who may provide (host, address, port, identity: the signed
//! build's word). A provider is ready when its latest health report (`reports/health/HOST`,
//! filed after each of its runs) is signed by the identity the bundle gives it, is its own and
//! of this fleet, says `success`, is not older than one the consumer saw before (a report put
//! back by someone who can write the store is older than the one it replaced), and the
//! provider is alive (its key on its lease). Everything here can only take a provider out:
//! nothing read from the store names a host the bundle does not, nor an address.

use crate::keys::{alive_key, report_key};
use crate::proof::{self, Identity, Proof};
use crate::{Report, State};
use bell_bundle::live::Provider;
use std::collections::BTreeMap;

pub use crate::keys::HEALTH_COMMAND;

/// Why a provider is or is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Its report `sequence` says it is healthy.
    Ready { sequence: u64 },
    /// The bundle gives it no identity: nothing it says can be told from what the store says.
    NoIdentity,
    /// It filed no health report (yet).
    NoReport,
    /// Its liveness key is gone: it has not run for longer than its lease.
    NotAlive,
    /// Its latest report says it is not healthy: what it says.
    Unhealthy(String),
    /// What is filed as its report is not its own: why.
    Refused(String),
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready { .. })
    }

    /// In a few words, for a report and a log.
    pub fn describe(&self) -> String {
        match self {
            Readiness::Ready { sequence } => format!("ready (report {sequence})"),
            Readiness::NoIdentity => "out: the build gives it no identity".into(),
            Readiness::NoReport => "out: no health report".into(),
            Readiness::NotAlive => "out: not alive".into(),
            Readiness::Unhealthy(why) => format!("out: {why}"),
            Readiness::Refused(why) => format!("out: its report is refused: {why}"),
        }
    }
}

/// The two keys a consumer reads of each provider: its health report and its liveness key.
pub fn keys(fleet: &str, host: &str) -> [String; 2] {
    [
        report_key(fleet, HEALTH_COMMAND, host),
        alive_key(fleet, host),
    ]
}

/// Judges one provider from what its two [`keys`] hold (`report`, and whether the liveness key
/// exists). `newest` is the highest report sequence this consumer accepted of each provider; a
/// report below it is refused, and one accepted raises it.
pub fn judge(
    fleet: &str,
    provider: &Provider,
    report: Option<&[u8]>,
    alive: bool,
    newest: &mut BTreeMap<String, u64>,
) -> Readiness {
    let Some(identity) = provider.identity.as_deref() else {
        return Readiness::NoIdentity;
    };
    let identity = match Identity::parse(identity) {
        Ok(identity) => identity,
        Err(e) => return Readiness::Refused(format!("the bundle's identity of it: {e}")),
    };
    let Some(raw) = report else {
        return Readiness::NoReport;
    };
    let parsed: Report = match serde_json::from_slice(raw) {
        Ok(report) => report,
        Err(e) => return Readiness::Refused(format!("not a report: {e}")),
    };
    let sequence = match proof::check(raw, &parsed, &provider.host, Some(&identity)) {
        Proof::Signed { sequence, .. } => sequence,
        Proof::Unsigned => return Readiness::Refused("not signed".into()),
        Proof::NoIdentity => return Readiness::NoIdentity,
        Proof::Forged(why) => return Readiness::Refused(why),
    };
    if parsed.fleet != fleet || parsed.command != HEALTH_COMMAND {
        return Readiness::Refused(format!(
            "a `{}` report of fleet `{}`",
            parsed.command.escape_debug(),
            parsed.fleet.escape_debug()
        ));
    }
    let seen = newest.entry(provider.host.clone()).or_insert(0);
    if sequence < *seen {
        return Readiness::Refused(format!(
            "report {sequence} is older than report {seen}, seen before"
        ));
    }
    *seen = sequence;
    if !alive {
        return Readiness::NotAlive;
    }
    if parsed.result != State::Success {
        let failing: Vec<&str> = parsed
            .health
            .iter()
            .filter(|p| !p.healthy)
            .map(|p| p.name.as_str())
            .collect();
        return Readiness::Unhealthy(match failing.is_empty() {
            true => format!("its last run is {}", parsed.result.as_str()),
            false => format!("probe {} fails", failing.join(", ")),
        });
    }
    Readiness::Ready { sequence }
}

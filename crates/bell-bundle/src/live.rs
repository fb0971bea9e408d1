//! `live`: a file that follows which providers of a service are ready now, rendered on the
//! host by bell-run between releases (the seed notes' eventually consistent half, as
//! consul-template and confd do it).
//!
//! The bundle says who may provide: every provider the signed build resolved, with its address,
//! port and identity. The host only ever narrows that list, to the providers whose latest
//! report (signed by the identity given here) says they are healthy: nothing it reads from the
//! store can add an address, since no address comes from the store.

use serde::{Deserialize, Serialize};

/// One live file of a bundle. Its resource (`live:PATH`) holds the scripts that put a
/// rendering in place and run the reload; this holds what bell-run renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Live {
    /// The host path, which is also the name of its resource.
    pub path: String,
    /// The service whose ready providers the template lists.
    pub service: String,
    /// A minijinja template. It sees `services.SERVICE` (the ready providers, by host name,
    /// each with `host`, `address`, `port`) and `host` (`name`, `address`: this host).
    pub template: String,
    /// This host, for `host` in the template.
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The quiescence window: render once the ready set has been still this long...
    pub wait_min: u64,
    /// ...and at the latest this long after it first changed (seconds, as consul-template's
    /// `wait { min, max }`), so that a flapping provider does not reload the consumer at each
    /// flap.
    pub wait_max: u64,
    /// Who may provide, sorted by host: the only entries the file can ever list.
    pub providers: Vec<Provider>,
    /// Whether the reload runs when an image root is applied: `skip` (the default: the file
    /// is written, nothing is reloaded) or `root` (the apply runs as an `exec` with
    /// `offline="root"` does, reload included: for reloads written against `$BELL_ROOT`).
    #[serde(default = "skip", skip_serializing_if = "is_skip")]
    pub offline: crate::Offline,
}

fn skip() -> crate::Offline {
    crate::Offline::Skip
}

fn is_skip(offline: &crate::Offline) -> bool {
    *offline == crate::Offline::Skip
}

/// A provider the signed build names for a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The key its reports are signed with (`ssh-ed25519 BASE64`). A provider without one is
    /// never ready: nothing it says can be told from what the store says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// The steps (minijinja's fuel) a live template may take, at the build's check and on the host.
pub const MAX_TEMPLATE_STEPS: u64 = 1_000_000;

/// The most a rendering may hold.
pub const MAX_RENDERED: usize = 4 << 20;

/// `wait-for "SERVICE" count=N timeout=T` on a resource: apply it once `count` providers of
/// `service` are ready, waiting at most `timeout` seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitFor {
    pub service: String,
    pub count: u32,
    pub timeout: u64,
}

/// The resource kind of live files.
pub const KIND: &str = "live";

/// The environment variable that names the file bell-run rendered for a live resource's
/// apply: the apply puts that file in place.
pub const RENDERED_ENV: &str = "BELL_LIVE_RENDERED";

/// Set (to 1) for an apply on an image root whose reload runs there (`offline="root"`).
pub const RELOAD_OFFLINE_ENV: &str = "BELL_LIVE_RELOAD";

/// The name, under the resource's `BELL_STATE`, of what bell-run rendered last...
pub const NEXT_FILE: &str = "next";
/// ...and of what the apply put in place last (its reload passed).
pub const CURRENT_FILE: &str = "current";

/// The template's context: `services.SERVICE` the providers in `ready` (host names) in the
/// bundle's order, `host` this host. Built here so that the build checks a template against
/// exactly what bell-run renders it with.
pub fn context(live: &Live, ready: &[&str]) -> serde_json::Value {
    let listed: Vec<serde_json::Value> = live
        .providers
        .iter()
        .filter(|p| ready.contains(&p.host.as_str()))
        .map(|p| {
            serde_json::json!({
                "host": p.host,
                "address": p.address,
                "port": p.port,
            })
        })
        .collect();
    let mut services = serde_json::Map::new();
    services.insert(live.service.clone(), serde_json::Value::Array(listed));
    serde_json::json!({
        "services": services,
        "host": { "name": live.host, "address": live.address },
    })
}

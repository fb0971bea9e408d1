//! Holds: an operator leaves a host alone (`bellc hold`), as kubectl cordons a node or
//! Enjoliver denies a machine's rolling update. A held host keeps the bundle it runs: the
//! rollout controller leaves it out of its waves, and `bell-run pull` on it applies nothing new
//! (it still reports).
//!
//! A hold is read from etcd, which is not trusted, and is not signed: it can only keep a host
//! where it is. A forged hold delays a host; it never moves one, since what a host applies is
//! still only what the signing key gave it.

use crate::keys::hold_key;
use crate::Etcd;
use bell_wire::etcd::KeyValue;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who held a host, why, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix seconds.
    pub since: u64,
}

impl Hold {
    /// `held by NAME since TIME: REASON`, for a line of output. What the store says is
    /// printed with its control characters escaped: a hold cannot forge a line of output.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "held by {} since {}",
            one_line(&self.by),
            bell_bundle::utc(self.since)
        );
        if let Some(reason) = &self.reason {
            text.push_str(&format!(": {}", one_line(reason)));
        }
        text
    }
}

/// `text` with everything a terminal acts on escaped: what the store says, printed, cannot
/// forge a line of output (see [`bell_bundle::one_line`]).
pub fn one_line(text: &str) -> String {
    bell_bundle::one_line(text).into_owned()
}

/// A hold as read: what it says, or why it cannot be read (a hold that cannot be read still
/// holds: whoever wrote it meant the host to stay).
pub fn parse(raw: &[u8]) -> Hold {
    serde_json::from_slice(raw).unwrap_or_else(|e| Hold {
        by: "?".into(),
        reason: Some(format!("a hold that cannot be read ({e})")),
        since: 0,
    })
}

pub fn put(etcd: &Etcd, fleet: &str, host: &str, hold: &Hold) -> Result<(), String> {
    let text = serde_json::to_string(hold).map_err(|e| e.to_string())?;
    etcd.put(&hold_key(fleet, host), text.as_bytes())
}

pub fn remove(etcd: &Etcd, fleet: &str, host: &str) -> Result<(), String> {
    etcd.delete(&hold_key(fleet, host))
}

/// Every hold of `fleet`, by host.
pub fn list(etcd: &Etcd, fleet: &str) -> Result<BTreeMap<String, Hold>, String> {
    Ok(holds_in(fleet, &etcd.range_prefix(&hold_key(fleet, ""))?))
}

/// The holds among `kvs` (a read of the fleet's keys, such as `/bell/FLEET/`).
pub fn holds_in(fleet: &str, kvs: &[KeyValue]) -> BTreeMap<String, Hold> {
    let prefix = hold_key(fleet, "");
    kvs.iter()
        .filter_map(|kv| Some((kv.key.strip_prefix(&prefix)?.to_string(), parse(&kv.value))))
        .collect()
}

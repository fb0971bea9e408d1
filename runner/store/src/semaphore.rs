//! The disruption budget: one counting semaphore per fleet and rollout group in etcd, in
//! airlock's format and key shape, so that a fleet whose reboots airlock coordinates can share
//! one budget with bell's changes:
//!
//! ```text
//! PREFIX/groups/GROUP/v1/semaphore      {"total_slots":N,"holders":["a","b"]}  (holders sorted)
//! PREFIX/groups/GROUP/v1/holders/HOST   {"since":UNIX}  bell's own: when HOST took its slot
//! ```
//!
//! GROUP is escaped as Go's `url.QueryEscape` does, as airlock does. Every change is one etcd
//! transaction that compares the semaphore key's version with the one read (as locksmith and
//! airlock do): of two hosts that read the same free slot, one writes and the other reads
//! again. A holder that is already listed (a host retrying after a crash) re-enters without
//! taking a second slot; holders bell does not know (an airlock node rebooting) count like
//! any other.

use crate::etcd::{Etcd, Op};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// airlock's semaphore value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Semaphore {
    pub total_slots: u64,
    pub holders: Vec<String>,
}

/// Where a host stands after asking for a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// It held one already (since then, when bell took it).
    Held { since: Option<u64> },
    /// It took one now.
    Taken,
    /// Every slot is held, by these.
    Full { total: u64, holders: Vec<String> },
}

/// One group's semaphore as `bellc lock status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub group: String,
    pub total_slots: u64,
    pub holders: Vec<Holder>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub host: String,
    /// When bell took the slot for it; `None` for a holder that bell did not put there.
    pub since: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Since {
    since: u64,
}

/// How often a transaction that lost a race is tried again before giving up.
const ATTEMPTS: u32 = 50;

/// The default prefix: the fleet's own part of the store.
pub fn default_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}")
}

pub fn semaphore_key(prefix: &str, group: &str) -> String {
    format!("{prefix}/groups/{}/v1/semaphore", query_escape(group))
}

fn holder_key(prefix: &str, group: &str, host: &str) -> String {
    format!("{prefix}/groups/{}/v1/holders/{host}", query_escape(group))
}

/// Takes a slot of `group` for `host`, sizing the semaphore to `slots` (the release's budget).
pub fn acquire(
    etcd: &Etcd,
    prefix: &str,
    group: &str,
    host: &str,
    slots: u64,
    now: u64,
) -> Result<Slot, String> {
    let key = semaphore_key(prefix, group);
    let since_key = holder_key(prefix, group, host);
    for attempt in 0..ATTEMPTS {
        let (mut semaphore, version) = read(etcd, &key, slots)?;
        if semaphore.holders.iter().any(|h| h == host) {
            let since = etcd
                .get(&since_key)?
                .and_then(|v| serde_json::from_slice::<Since>(&v).ok())
                .map(|s| s.since);
            return Ok(Slot::Held { since });
        }
        semaphore.total_slots = slots;
        if semaphore.holders.len() as u64 >= slots {
            return Ok(Slot::Full {
                total: slots,
                holders: semaphore.holders,
            });
        }
        let at = semaphore.holders.partition_point(|h| h.as_str() < host);
        semaphore.holders.insert(at, host.to_string());
        let value = to_json(&semaphore);
        let since = to_json(&Since { since: now });
        let ops = [
            Op::Put(&key, value.as_bytes()),
            Op::Put(&since_key, since.as_bytes()),
        ];
        if etcd.put_if_version(&key, version, &ops)? {
            return Ok(Slot::Taken);
        }
        backoff(attempt, host);
    }
    Err(format!(
        "the semaphore {key} changed under every one of {ATTEMPTS} attempts"
    ))
}

/// Gives `host`'s slot of `group` back; `Ok(false)` when it held none (nothing is written).
pub fn release(etcd: &Etcd, prefix: &str, group: &str, host: &str) -> Result<bool, String> {
    let key = semaphore_key(prefix, group);
    let since_key = holder_key(prefix, group, host);
    for attempt in 0..ATTEMPTS {
        let (mut semaphore, version) = read(etcd, &key, 1)?;
        let Some(at) = semaphore.holders.iter().position(|h| h == host) else {
            return Ok(false);
        };
        semaphore.holders.remove(at);
        let value = to_json(&semaphore);
        let ops = [Op::Put(&key, value.as_bytes()), Op::Delete(&since_key)];
        if etcd.put_if_version(&key, version, &ops)? {
            return Ok(true);
        }
        backoff(attempt, host);
    }
    Err(format!(
        "the semaphore {key} changed under every one of {ATTEMPTS} attempts"
    ))
}

/// Every group's semaphore under `prefix`, by group name.
pub fn groups(etcd: &Etcd, prefix: &str) -> Result<Vec<Group>, String> {
    groups_from(&etcd.range_prefix(&format!("{prefix}/groups/"))?, prefix)
}

/// Every group's semaphore under `prefix` from keys read out of etcd (any range that holds
/// `PREFIX/groups/`); other keys are passed over.
pub fn groups_from(kvs: &[crate::etcd::KeyValue], prefix: &str) -> Result<Vec<Group>, String> {
    let base = format!("{prefix}/groups/");
    let mut groups: Vec<Group> = Vec::new();
    let mut since: Vec<(String, String, u64)> = Vec::new();
    for kv in kvs {
        let Some(rest) = kv.key.strip_prefix(&base) else {
            continue;
        };
        let Some((escaped, tail)) = rest.split_once("/v1/") else {
            continue;
        };
        let group = query_unescape(escaped);
        if tail == "semaphore" {
            let semaphore = parse(&kv.key, &kv.value)?;
            groups.push(Group {
                group,
                total_slots: semaphore.total_slots,
                holders: semaphore
                    .holders
                    .into_iter()
                    .map(|host| Holder { host, since: None })
                    .collect(),
            });
        } else if let Some(host) = tail.strip_prefix("holders/") {
            if let Ok(s) = serde_json::from_slice::<Since>(&kv.value) {
                since.push((group, host.to_string(), s.since));
            }
        }
    }
    for (group, host, at) in since {
        let holder = groups
            .iter_mut()
            .filter(|g| g.group == group)
            .flat_map(|g| g.holders.iter_mut())
            .find(|h| h.host == host);
        if let Some(holder) = holder {
            holder.since = Some(at);
        }
    }
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(groups)
}

/// The semaphore at `key` and its version; a new one of `slots` slots when there is none.
fn read(etcd: &Etcd, key: &str, slots: u64) -> Result<(Semaphore, i64), String> {
    match etcd.get_versioned(key)? {
        (None, _) => Ok((
            Semaphore {
                total_slots: slots,
                holders: Vec::new(),
            },
            0,
        )),
        (Some(value), version) => Ok((parse(key, &value)?, version)),
    }
}

fn parse(key: &str, value: &[u8]) -> Result<Semaphore, String> {
    let mut semaphore: Semaphore = serde_json::from_slice(value).map_err(|e| {
        format!(
            "{key} is not a semaphore in airlock's format \
             ({{\"total_slots\":N,\"holders\":[...]}}): {e}"
        )
    })?;
    semaphore.holders.sort();
    semaphore.holders.dedup();
    Ok(semaphore)
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A short pause that differs between hosts, so that the losers of a race do not collide again.
fn backoff(attempt: u32, host: &str) {
    let spread = host.bytes().fold(u64::from(std::process::id()), |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    let ms = 5 + (spread.wrapping_add(u64::from(attempt) * 7919) % 45) + u64::from(attempt) * 5;
    std::thread::sleep(Duration::from_millis(ms));
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes `+`, every other
/// byte `%XX`.
pub fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The inverse of [`query_escape`] (`%XX` and `+`).
pub fn query_unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = text
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_escaped_as_airlock_escapes_them() {
        assert_eq!(
            semaphore_key("com.coreos.airlock", "default"),
            "com.coreos.airlock/groups/default/v1/semaphore"
        );
        assert_eq!(query_escape("rack 1/a+b%"), "rack+1%2Fa%2Bb%25");
        for name in ["rack 1/a+b%", "r01", "ü ~x"] {
            assert_eq!(query_unescape(&query_escape(name)), name);
        }
    }

    #[test]
    fn the_value_is_airlocks_with_holders_sorted() {
        let value = br#"{"total_slots":2,"holders":["zed","abe","zed"]}"#;
        let semaphore = parse("k", value).unwrap();
        assert_eq!(semaphore.holders, ["abe", "zed"]);
        assert_eq!(
            to_json(&semaphore),
            r#"{"total_slots":2,"holders":["abe","zed"]}"#
        );
        assert!(parse("k", b"{\"semaphore\":1}").is_err());
    }
}

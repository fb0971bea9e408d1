//! The disruption budget: one counting semaphore per fleet and rollout group in etcd, in
//! airlock's format and key shape, so that a fleet whose reboots airlock coordinates can share
//! one budget with bell's changes:
//!
//! ```text
//! PREFIX/groups/GROUP/v1/semaphore      {"total_slots":N,"holders":["a","b"]}  (holders sorted)
//! PREFIX/groups/GROUP/v1/holders/HOST   {"since":UNIX,…}  bell's own: when HOST took its slot
//! ```
//!
//! A holder record is signed by the host's identity (see [`crate::proof`]) and names the
//! prefix, group and host it is about, so that `bellc lock status` can tell holders that are
//! proven bell hosts from airlock's and from a name put there by someone else.
//!
//! GROUP is escaped as Go's `url.QueryEscape` does, as airlock does. Every change is one etcd
//! transaction that compares the semaphore key's version with the one read (as locksmith and
//! airlock do): of two hosts that read the same free slot, one writes and the other reads
//! again. A holder that is already listed (a host retrying after a crash) re-enters without
//! taking a second slot; holders bell does not know (an airlock node rebooting) count like
//! any other.

use crate::proof::{self, SigningKey};
use bell_wire::etcd::{Etcd, Op};
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
    /// Why the group's semaphore cannot be read (not JSON, not of airlock's shape): a host of
    /// the group may write garbage there, and that spoils its own group's row only. No slots,
    /// no holders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub host: String,
    /// When bell took the slot for it; `None` for a holder that bell did not put there.
    pub since: Option<u64>,
    /// Its record as read, for [`vouch`].
    #[serde(skip)]
    pub record: Option<Vec<u8>>,
    /// Who put it there, once [`vouch`]ed for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standing: Option<Standing>,
    /// Why a holder that names a host of the fleet is not proven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Who a holder is, by its record and the identities of the fleet's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// A host of the release, its record signed by the identity the release gives it.
    Proven,
    /// Not a host of the release: airlock's, or another system's.
    Foreign,
    /// Names a host of the release without that host's signature: put there by someone else
    /// (or by a bell-run from before host identities).
    Claiming,
    /// A host of the release that has no identity in it: nothing to check with.
    Unverified,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Proven => "proven",
            Standing::Foreign => "foreign",
            Standing::Claiming => "claiming",
            Standing::Unverified => "unverified",
        }
    }
}

/// Says of every holder who it is: `hosts` are the release's, each with its identity.
pub fn vouch(
    groups: &mut [Group],
    prefix: &str,
    hosts: &std::collections::BTreeMap<String, Option<proof::Identity>>,
) {
    for group in groups.iter_mut() {
        for holder in &mut group.holders {
            let (standing, why) = match hosts.get(&holder.host) {
                None => (Standing::Foreign, None),
                Some(None) => (Standing::Unverified, None),
                Some(Some(identity)) => match proves(holder, &group.group, prefix, identity) {
                    Ok(()) => (Standing::Proven, None),
                    Err(why) => (Standing::Claiming, Some(why)),
                },
            };
            holder.standing = Some(standing);
            holder.why = why;
        }
    }
}

/// Whether `holder`'s record is signed by `identity` and names this very place; why not.
fn proves(
    holder: &Holder,
    group: &str,
    prefix: &str,
    identity: &proof::Identity,
) -> Result<(), String> {
    let raw = holder
        .record
        .as_ref()
        .ok_or("no holder record: bell did not put it there")?;
    let value = proof::check_object(proof::HOLDER, raw, identity)?;
    let field = |f: &str| value[f].as_str().unwrap_or("?");
    if field("host") == holder.host && field("group") == group && field("prefix") == prefix {
        return Ok(());
    }
    Err(format!(
        "its record is `{}`'s of group `{}` under `{}`, copied here",
        field("host"),
        field("group"),
        field("prefix")
    ))
}

#[derive(Serialize, Deserialize)]
struct Since {
    since: u64,
}

/// How often a transaction that lost a race is tried again before giving up.
const ATTEMPTS: u32 = 50;

pub use crate::keys::{default_prefix, holder_key, query_escape, query_unescape, semaphore_key};

/// Takes a slot of `group` for `host`, sizing the semaphore to `slots` (the release's budget).
/// The holder record is signed with `key`, the host's identity, when it has one.
pub fn acquire(
    etcd: &Etcd,
    prefix: &str,
    group: &str,
    host: &str,
    slots: u64,
    now: u64,
    signer: Option<&SigningKey>,
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
        let since = holder_record(prefix, group, host, now, signer);
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
    release_with(etcd, prefix, group, host, None)
}

/// [`release`], starting from the semaphore as `read` (the pull's first request) holds it: a
/// host that holds no slot then sends nothing, and one whose semaphore changed since is
/// refused by the version and reads it again.
pub fn release_with(
    etcd: &Etcd,
    prefix: &str,
    group: &str,
    host: &str,
    prefetched: Option<&crate::prefetch::Prefetched>,
) -> Result<bool, String> {
    let key = semaphore_key(prefix, group);
    let since_key = holder_key(prefix, group, host);
    let url = etcd.url();
    let mut known = prefetched
        .and_then(|read| read.get(&url, &key))
        .map(|held| match held {
            None => Ok((
                Semaphore {
                    total_slots: 1,
                    holders: Vec::new(),
                },
                0,
            )),
            Some(held) => parse(&key, &held.value).map(|s| (s, held.version)),
        });
    for attempt in 0..ATTEMPTS {
        let (mut semaphore, version) = match known.take() {
            Some(known) => known?,
            None => read(etcd, &key, 1)?,
        };
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
pub fn groups_from(kvs: &[bell_wire::etcd::KeyValue], prefix: &str) -> Result<Vec<Group>, String> {
    let base = format!("{prefix}/groups/");
    let mut groups: Vec<Group> = Vec::new();
    let mut since: Vec<(String, String, Option<u64>, Vec<u8>)> = Vec::new();
    for kv in kvs {
        let Some(rest) = kv.key.strip_prefix(&base) else {
            continue;
        };
        let Some((escaped, tail)) = rest.split_once("/v1/") else {
            continue;
        };
        let group = query_unescape(escaped);
        if tail == "semaphore" {
            groups.push(match parse(&kv.key, &kv.value) {
                Ok(semaphore) => Group {
                    group,
                    total_slots: semaphore.total_slots,
                    holders: semaphore
                        .holders
                        .into_iter()
                        .map(|host| Holder {
                            host,
                            since: None,
                            record: None,
                            standing: None,
                            why: None,
                        })
                        .collect(),
                    unreadable: None,
                },
                Err(why) => Group {
                    group,
                    total_slots: 0,
                    holders: Vec::new(),
                    unreadable: Some(why),
                },
            });
        } else if let Some(host) = tail.strip_prefix("holders/") {
            let at = serde_json::from_slice::<Since>(&kv.value)
                .ok()
                .map(|s| s.since);
            since.push((group, host.to_string(), at, kv.value.to_vec()));
        }
    }
    for (group, host, at, record) in since {
        let holder = groups
            .iter_mut()
            .filter(|g| g.group == group)
            .flat_map(|g| g.holders.iter_mut())
            .find(|h| h.host == host);
        if let Some(holder) = holder {
            holder.since = at;
            holder.record = Some(record);
        }
    }
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(groups)
}

/// `{"since":NOW}`, and with a key, what it is about and signed.
fn holder_record(
    prefix: &str,
    group: &str,
    host: &str,
    now: u64,
    key: Option<&SigningKey>,
) -> String {
    let mut record = serde_json::Map::new();
    record.insert("since".into(), now.into());
    if let Some(key) = key {
        record.insert("prefix".into(), prefix.into());
        record.insert("group".into(), group.into());
        record.insert("host".into(), host.into());
        proof::sign_object(proof::HOLDER, &mut record, key);
    }
    serde_json::Value::Object(record).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_record_proves_only_the_place_it_was_written_for() {
        let key = SigningKey::from_seed([2; 32]);
        let record = |group: &str| holder_record("/bell/f", group, "web-1", 100, Some(&key));
        let holder = |record: Option<String>| Holder {
            host: "web-1".into(),
            since: Some(100),
            record: record.map(String::into_bytes),
            standing: None,
            why: None,
        };
        let mut groups = vec![
            Group {
                group: "rack-a".into(),
                total_slots: 2,
                holders: vec![holder(Some(record("rack-a")))],
                unreadable: None,
            },
            Group {
                group: "rack-b".into(),
                total_slots: 2,
                holders: vec![holder(Some(record("rack-a")))],
                unreadable: None,
            },
        ];
        let hosts = std::collections::BTreeMap::from([("web-1".to_string(), Some(key.identity()))]);
        vouch(&mut groups, "/bell/f", &hosts);
        assert_eq!(groups[0].holders[0].standing, Some(Standing::Proven));
        assert_eq!(groups[1].holders[0].standing, Some(Standing::Claiming));
        let why = groups[1].holders[0].why.clone().unwrap();
        assert!(why.contains("`web-1`'s of group `rack-a`"), "{why}");
        // Unsigned (a bell-run from before identities): claiming, with why.
        let mut old = vec![Group {
            group: "rack-a".into(),
            total_slots: 1,
            holders: vec![holder(Some(r#"{"since":100}"#.into()))],
            unreadable: None,
        }];
        vouch(&mut old, "/bell/f", &hosts);
        assert_eq!(old[0].holders[0].standing, Some(Standing::Claiming));
        assert_eq!(old[0].holders[0].why.as_deref(), Some("it is not signed"));
    }

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

//! Enrollment: the registrations hosts filed (`bell-run register`) against the inventory the
//! release was built from. A registration is the host's word, signed by the identity it names;
//! it is listed for an operator to accept, never trusted beyond that identity. One under a name
//! the inventory already gives another identity is flagged, not offered.

use bell_bundle::Release;
use bell_store::discovery::{Facts, Filed, Rejection};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// Not in the inventory: an operator may accept it.
    Pending,
    /// Under a name the inventory gives another identity: someone else's claim.
    Flagged,
    /// Not a registration signed by the identity it names.
    Invalid,
    /// Registered with an identity an operator refused (`bellc hosts reject`).
    Rejected,
}

/// One registration an operator should look at.
#[derive(Debug, Clone, Serialize)]
pub struct Registered {
    pub host: String,
    pub standing: Standing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facts: Option<Facts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<u64>,
    /// Why it is flagged or invalid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The registrations of `filed` that are not hosts of `release` as they are, sorted by name:
/// new hosts, claims on a name the inventory gives another identity, and those registered
/// again with an identity an operator refused.
pub fn pending(
    release: &Release,
    filed: &[Filed],
    rejected: &BTreeMap<String, Rejection>,
) -> Vec<Registered> {
    pending_among(
        &|name| release.hosts.get(name).map(|h| h.identity.as_deref()),
        filed,
        rejected,
    )
}

/// [`pending`] against the hosts a spec declares (`known`: a host's identity, `Some(None)`
/// for a host without one, `None` for no such host), for when the spec does not build yet
/// (an `assign` waiting for hosts to accept).
pub fn pending_among<'k>(
    known: &dyn Fn(&str) -> Option<Option<&'k str>>,
    filed: &[Filed],
    rejected: &BTreeMap<String, Rejection>,
) -> Vec<Registered> {
    let mut out = Vec::new();
    for f in filed {
        let (registration, identity) = match &f.registration {
            Ok(found) => found,
            Err(why) => {
                out.push(Registered {
                    host: f.host.clone(),
                    standing: Standing::Invalid,
                    identity: None,
                    fingerprint: None,
                    facts: None,
                    registered_at: None,
                    why: Some(why.clone()),
                });
                continue;
            }
        };
        let known = known(&f.host).map(|identity| identity.map(bell_store::proof::Identity::parse));
        let refused = rejected
            .get(&f.host)
            .and_then(|r| bell_store::proof::Identity::parse(&r.identity).ok())
            .is_some_and(|refused| refused == *identity);
        let (standing, why) = match known {
            None if refused => (
                Standing::Rejected,
                Some("an operator rejected this identity (`bellc hosts accept` takes it)".into()),
            ),
            None => (Standing::Pending, None),
            Some(Some(Ok(given))) if given != *identity => (
                Standing::Flagged,
                Some(format!(
                    "registered with identity {}, but the inventory gives `{}` identity {}",
                    identity.fingerprint(),
                    f.host,
                    given.fingerprint()
                )),
            ),
            // In the inventory as it registered (or without an identity to hold it to).
            Some(_) => continue,
        };
        out.push(Registered {
            host: f.host.clone(),
            standing,
            identity: Some(identity.to_openssh()),
            fingerprint: Some(identity.fingerprint()),
            facts: Some(registration.facts.clone()),
            registered_at: Some(registration.registered_at),
            why,
        });
    }
    out
}

/// One line of facts for a table: MACs, CPUs, memory, disks, OS.
pub fn summary(facts: &Facts) -> String {
    let macs: Vec<&str> = facts
        .interfaces
        .iter()
        .filter_map(|i| i.mac.as_deref())
        .collect();
    let gib = |bytes: u64| format!("{:.0}G", bytes as f64 / f64::from(1u32 << 30));
    let disks: Vec<String> = facts
        .disks
        .iter()
        .map(|d| format!("{} {}", d.name, gib(d.size)))
        .collect();
    format!(
        "{} · {} cpu · {} · {} · {}",
        if macs.is_empty() {
            "-".to_string()
        } else {
            macs.join(",")
        },
        facts.cpus,
        gib(facts.memory),
        if disks.is_empty() {
            "-".to_string()
        } else {
            disks.join(",")
        },
        facts.os.as_deref().unwrap_or("-")
    )
}

/// A host of a JSON inventory as `bellc hosts accept` writes it: one per line, keys in this
/// order, so that a review diff of an acceptance is one line per host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryHost {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Its place in the order of acceptance (1 for the first host accepted), which `assign`
    /// follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Reads an inventory to add hosts to: a plain JSON list (kubectl's node list is another
/// tool's to write, and is refused).
pub fn read_inventory(text: &str) -> Result<Vec<InventoryHost>, String> {
    if !text.trim_start().starts_with('[') {
        return Err(
            "it is not a plain JSON list of hosts (kubectl's node list is kubectl's to write): \
             accept into a file of its own and include both"
                .into(),
        );
    }
    let entries = bellc_core::front::inventory::parse(text).map_err(|e| e.message)?;
    Ok(entries
        .into_iter()
        .map(|e| InventoryHost {
            name: e.name,
            address: e.address,
            identity: e.identity,
            accepted: e.accepted,
            labels: BTreeMap::clone(&e.labels),
        })
        .collect())
}

/// The inventory's text: sorted by name, one host per line.
pub fn inventory_text(hosts: &[InventoryHost]) -> String {
    let mut sorted: Vec<&InventoryHost> = hosts.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let lines: Vec<String> = sorted
        .iter()
        .map(|h| format!("  {}", serde_json::to_string(h).unwrap_or_default()))
        .collect();
    if lines.is_empty() {
        "[]\n".to_string()
    } else {
        format!("[\n{}\n]\n", lines.join(",\n"))
    }
}

/// A host an operator asks to accept: its name, and the fingerprint they saw in `hosts
/// pending` when they give it (`NAME=SHA256:...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub fingerprint: Option<String>,
}

impl Request {
    pub fn parse(text: &str) -> Request {
        match text.split_once('=') {
            Some((host, fingerprint)) => Request {
                host: host.to_string(),
                fingerprint: Some(fingerprint.to_string()),
            },
            None => Request {
                host: text.to_string(),
                fingerprint: None,
            },
        }
    }
}

/// What an acceptance did to one host.
#[derive(Debug, Clone, Serialize)]
pub struct Accepted {
    pub host: String,
    pub fingerprint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub accepted: u64,
    /// It was in the inventory already with this identity (its labels may have changed).
    pub already: bool,
}

/// Adds the hosts of `requests` to `inventory` with the identity each registered with, the
/// first address it reported and `labels`. All or nothing: every reason one cannot be
/// accepted is returned, and then `inventory` is as it was.
pub fn accept(
    inventory: &mut Vec<InventoryHost>,
    filed: &[Filed],
    requests: &[Request],
    labels: &BTreeMap<String, String>,
) -> Result<Vec<Accepted>, Vec<String>> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        if let Err(invalid) = bellc_core::front::validate::label(key, value) {
            errors.push(format!("label `{key}={value}`: {}", invalid.message));
        } else if key == "host" {
            errors.push("a label named `host`: `match host=...` matches the host's name".into());
        }
    }
    let mut next = inventory
        .iter()
        .filter_map(|h| h.accepted)
        .max()
        .unwrap_or(0)
        + 1;
    let mut updated = inventory.clone();
    let mut done = Vec::new();
    for request in requests {
        let name = &request.host;
        if let Err(invalid) = bellc_core::front::validate::host_name(name) {
            errors.push(format!("`{name}`: {}", invalid.message));
            continue;
        }
        let Some(found) = filed.iter().find(|f| &f.host == name) else {
            errors.push(format!(
                "`{name}` has not registered (run `bell-run register` on it)"
            ));
            continue;
        };
        let (registration, identity) = match &found.registration {
            Ok(found) => found,
            Err(why) => {
                errors.push(format!("`{name}`'s registration is invalid: {why}"));
                continue;
            }
        };
        let fingerprint = identity.fingerprint();
        if let Some(seen) = &request.fingerprint {
            if *seen != fingerprint {
                errors.push(format!(
                    "`{name}` registered with identity {fingerprint}, not {seen}: someone \
                     else's registration, or a new key; not accepted"
                ));
                continue;
            }
        }
        if done.iter().any(|d: &Accepted| &d.host == name) {
            continue;
        }
        let at = updated.iter().position(|h| &h.name == name);
        if let Some(at) = at {
            let held = updated[at]
                .identity
                .as_deref()
                .map(bell_store::proof::Identity::parse);
            match held {
                Some(Ok(held)) if held == *identity => {}
                Some(Ok(held)) => {
                    errors.push(format!(
                        "`{name}` is in the inventory with identity {}, but registered with \
                         {fingerprint}: flagged, not accepted (if the host was reinstalled, \
                         remove its line first)",
                        held.fingerprint()
                    ));
                    continue;
                }
                _ => {
                    errors.push(format!(
                        "`{name}` is in the inventory without an identity it can be held to: \
                         give it one by hand, or remove its line first"
                    ));
                    continue;
                }
            }
            let host = &mut updated[at];
            host.labels
                .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            let accepted = match host.accepted {
                Some(n) => n,
                None => {
                    host.accepted = Some(next);
                    next += 1;
                    next - 1
                }
            };
            done.push(Accepted {
                host: name.clone(),
                fingerprint,
                address: host.address.clone(),
                accepted,
                already: true,
            });
            continue;
        }
        let address = first_address(&registration.facts);
        updated.push(InventoryHost {
            name: name.clone(),
            address: address.clone(),
            identity: Some(identity.to_openssh()),
            accepted: Some(next),
            labels: labels.clone(),
        });
        done.push(Accepted {
            host: name.clone(),
            fingerprint,
            address,
            accepted: next,
            already: false,
        });
        next += 1;
    }
    if errors.is_empty() {
        *inventory = updated;
        Ok(done)
    } else {
        Err(errors)
    }
}

/// The address to reach a host at: the first its interfaces report (by interface name, IPv4
/// before IPv6), without its prefix length.
fn first_address(facts: &Facts) -> Option<String> {
    let mut interfaces: Vec<_> = facts.interfaces.iter().collect();
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    interfaces
        .iter()
        .flat_map(|i| i.addresses.iter())
        .map(|a| a.split('/').next().unwrap_or(a).to_string())
        .find(|a| bellc_core::front::validate::host_address(a).is_ok())
}

//! Enrollment: the registrations hosts filed (`bell-run register`) against the inventory the
//! release was built from. A registration is the host's word, signed by the identity it names;
//! it is listed for an operator to accept, never trusted beyond that identity. One under a name
//! the inventory already gives another identity is flagged, not offered.

use bell_bundle::Release;
use bell_store::discovery::{Facts, Filed};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// Not in the inventory: an operator may accept it.
    Pending,
    /// Under a name the inventory gives another identity: someone else's claim.
    Flagged,
    /// Not a registration signed by the identity it names.
    Invalid,
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
/// new hosts, and claims on a name the inventory gives another identity.
pub fn pending(release: &Release, filed: &[Filed]) -> Vec<Registered> {
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
        let known = release.hosts.get(&f.host).map(|h| {
            h.identity
                .as_deref()
                .map(bell_store::proof::Identity::parse)
        });
        let (standing, why) = match known {
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

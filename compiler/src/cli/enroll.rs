//! The binary's side of `bellc hosts pending|accept|reject` and `bellc hold|unhold`: reading
//! the registrations from the store, writing the inventory and the holds, printing. The logic
//! is in `bell_ops::fleet::enroll`.

use bell_ops::fleet::enroll::{self, Request};
use bell_store::discovery::{self, Rejection};
use bell_store::Etcd;
use std::collections::BTreeMap;
use std::path::Path;

/// `bellc hosts pending`: a table (or JSON) of the registrations an operator should look at.
pub fn print_pending(rows: &[enroll::Registered], json: bool) -> Result<(), String> {
    if json {
        outjson!(serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?);
        return Ok(());
    }
    if rows.is_empty() {
        outln!("no registration is waiting: every host that registered is in the inventory");
        return Ok(());
    }
    let width = rows.iter().map(|r| r.host.len()).max().unwrap_or(4).max(4);
    outln!(
        "{:width$}  {:9}  {:50}  FACTS",
        "HOST",
        "STANDING",
        "FINGERPRINT"
    );
    for r in rows {
        let standing = match r.standing {
            enroll::Standing::Pending => "pending",
            enroll::Standing::Flagged => "flagged",
            enroll::Standing::Invalid => "invalid",
            enroll::Standing::Rejected => "rejected",
        };
        let facts = match (&r.facts, &r.why) {
            (_, Some(why)) => why.clone(),
            (Some(facts), None) => enroll::summary(facts),
            (None, None) => "-".to_string(),
        };
        outln!(
            "{:width$}  {standing:9}  {:50}  {facts}",
            r.host,
            r.fingerprint.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}

/// `bellc hosts accept`: the inventory gains the hosts, or nothing changes.
pub fn accept(
    etcd: &Etcd,
    fleet: &str,
    hosts: &[String],
    inventory: &Path,
    labels: &BTreeMap<String, String>,
    json: bool,
) -> Result<u8, String> {
    let shown = inventory.display();
    let mut listed = match std::fs::read_to_string(inventory) {
        Ok(text) => enroll::read_inventory(&text).map_err(|e| format!("{shown}: {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
    };
    let filed = discovery::list(etcd, fleet)?;
    let requests: Vec<Request> = hosts.iter().map(|h| Request::parse(h)).collect();
    let accepted = match enroll::accept(&mut listed, &filed, &requests, labels) {
        Ok(accepted) => accepted,
        Err(errors) => {
            for error in &errors {
                errln!("error: {error}");
            }
            errln!("nothing accepted: {shown} is as it was");
            return Ok(1);
        }
    };
    bellc_core::emit::releases::write_atomic(inventory, enroll::inventory_text(&listed).as_bytes())
        .map_err(|e| e.to_string())?;
    for host in &accepted {
        discovery::unreject(etcd, fleet, &host.host)?;
    }
    if json {
        outjson!(serde_json::to_string_pretty(&accepted).map_err(|e| e.to_string())?);
    } else {
        for host in &accepted {
            outln!(
                "{} {} ({}{}) into {shown}",
                if host.already { "kept" } else { "accepted" },
                host.host,
                host.fingerprint,
                host.address
                    .as_deref()
                    .map(|a| format!(", {a}"))
                    .unwrap_or_default()
            );
        }
        errln!("build and roll out the spec that includes {shown} to bring them in");
    }
    Ok(0)
}

/// `bellc hosts reject`: each registration removed and its identity recorded as refused.
pub fn reject(etcd: &Etcd, fleet: &str, hosts: &[String]) -> Result<u8, String> {
    let filed = discovery::list(etcd, fleet)?;
    let mut missing = Vec::new();
    for host in hosts {
        match filed.iter().find(|f| &f.host == host) {
            None => missing.push(host.as_str()),
            Some(found) => {
                // An invalid registration names no identity worth refusing: it is removed.
                let identity = match &found.registration {
                    Ok((_, identity)) => identity.to_openssh(),
                    Err(_) => String::new(),
                };
                let rejection = Rejection {
                    identity,
                    rejected_at: super::operator::now(),
                };
                discovery::reject(etcd, fleet, host, &rejection)?;
                outln!("rejected {host}");
            }
        }
    }
    if missing.is_empty() {
        Ok(0)
    } else {
        errln!("error: no registration of {}", missing.join(", "));
        Ok(1)
    }
}

/// `bellc hold`: each host's hold written, naming who, why and since when.
pub fn hold(
    etcd: &Etcd,
    fleet: &str,
    hosts: &[String],
    reason: Option<&str>,
    by: Option<&str>,
) -> Result<u8, String> {
    bell_store::check_name("fleet", fleet)?;
    for host in hosts {
        bell_store::check_name("host", host)?;
    }
    let by = by.map_or_else(super::operator::name, str::to_string);
    let hold = bell_store::hold::Hold {
        by,
        reason: reason.map(str::to_string),
        since: super::operator::now(),
    };
    for host in hosts {
        bell_store::hold::put(etcd, fleet, host, &hold)?;
        outln!("{host}: {}", hold.describe());
    }
    Ok(0)
}

/// `bellc unhold`: the holds taken away; a host that was not held is said so.
pub fn unhold(etcd: &Etcd, fleet: &str, hosts: &[String]) -> Result<u8, String> {
    bell_store::check_name("fleet", fleet)?;
    let holds = bell_store::hold::list(etcd, fleet)?;
    for host in hosts {
        if holds.contains_key(host) {
            bell_store::hold::remove(etcd, fleet, host)?;
            outln!("{host}: no longer held");
        } else {
            outln!("{host}: was not held");
        }
    }
    Ok(0)
}

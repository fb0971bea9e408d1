//! Host identities from what operators already have: `ssh-keyscan` output or a `known_hosts`
//! file (`HOSTS KEYTYPE BASE64 [COMMENT]`, HOSTS a comma-separated list of names and
//! addresses). Each Ed25519 key becomes a JSON inventory entry, or fills the `identity` of an
//! existing inventory's entry (a plain list, or `kubectl get nodes -o json`, as the annotation
//! `bell/identity`) whose name or address it names.
//!
//! Only what can be read back is taken: hashed names (`HashKnownHosts`), wildcard patterns,
//! `@cert-authority` and `@revoked` lines and keys other than Ed25519 are passed over with why,
//! and a host listed with two different keys is left out (which one is its own cannot be told).

use bell_store::proof::Identity;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// One host's key, as a line of the file named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The host's name: the first pattern of its line that is not an address.
    pub name: Option<String>,
    pub addresses: Vec<String>,
    /// `ssh-ed25519 BASE64`.
    pub identity: String,
    pub line: usize,
}

/// Every Ed25519 key of `text` (as `what` names the file in warnings), and a warning for each
/// line or host passed over.
pub fn read(what: &str, text: &str) -> (Vec<Found>, Vec<String>) {
    let mut found: Vec<Found> = Vec::new();
    let mut warnings = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        let number = number + 1;
        let mut warn = |why: &str| warnings.push(format!("{what}:{number}: {why}"));
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('@') {
            warn("a marked line (@cert-authority, @revoked) names no host's own key");
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [hosts, kind, data, ..] = fields[..] else {
            warn("not `HOSTS KEYTYPE KEY`");
            continue;
        };
        if hosts.starts_with('|') {
            warn("hashed host names (HashKnownHosts) cannot be read back; run `ssh-keyscan -t ed25519 HOST…` instead");
            continue;
        }
        if kind != "ssh-ed25519" {
            // ssh-keyscan prints every key type a host has; only Ed25519 is an identity.
            continue;
        }
        let identity = match Identity::parse(&format!("{kind} {data}")) {
            Ok(identity) => identity.to_openssh(),
            Err(e) => {
                warn(&format!("not a key: {e}"));
                continue;
            }
        };
        let mut entry = Found {
            name: None,
            addresses: Vec::new(),
            identity,
            line: number,
        };
        for pattern in hosts.split(',') {
            // `[host]:2222` for a port other than 22.
            let host = pattern
                .strip_prefix('[')
                .and_then(|p| p.split_once("]:"))
                .map_or(pattern, |(host, _)| host);
            if host.contains(['*', '?', '!']) {
                continue;
            }
            if host.parse::<IpAddr>().is_ok() {
                entry.addresses.push(host.to_string());
            } else if entry.name.is_none() && !host.is_empty() {
                entry.name = Some(host.to_string());
            }
        }
        if entry.name.is_none() && entry.addresses.is_empty() {
            warn("names no host (only wildcard patterns)");
            continue;
        }
        found.push(entry);
    }
    // One key per host: the same key on several lines is one entry; two keys, none.
    let mut by_host: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        for key in f.name.iter().chain(&f.addresses) {
            by_host.entry(key.clone()).or_default().push(i);
        }
    }
    let mut dropped = vec![false; found.len()];
    for (host, lines) in &by_host {
        let first = &found[lines[0]].identity;
        if lines.iter().any(|&i| found[i].identity != *first) {
            let numbers: Vec<String> = lines.iter().map(|&i| found[i].line.to_string()).collect();
            warnings.push(format!(
                "{what}: `{host}` has different keys on lines {}: left out (which one is its own cannot be told)",
                numbers.join(", ")
            ));
            for &i in lines {
                dropped[i] = true;
            }
        } else {
            for &i in &lines[1..] {
                if found[i].name == found[lines[0]].name {
                    dropped[i] = true;
                }
            }
        }
    }
    let found = found
        .into_iter()
        .zip(dropped)
        .filter_map(|(f, dropped)| (!dropped).then_some(f))
        .collect();
    (found, warnings)
}

/// A JSON inventory of the hosts found: `[{"name", "address", "identity"}]`. A key known only
/// by its address has no name to give its host: it is left out with a warning.
pub fn inventory(found: &[Found], warnings: &mut Vec<String>) -> Value {
    let mut entries = Vec::new();
    for f in found {
        let Some(name) = &f.name else {
            warnings.push(format!(
                "{} is known by its address only: give ssh-keyscan the host's name, or use \
                 `--inventory` to fill an inventory that has the address",
                f.addresses.join(", ")
            ));
            continue;
        };
        let mut entry = serde_json::Map::new();
        entry.insert("name".into(), name.clone().into());
        if let Some(address) = f.addresses.first() {
            entry.insert("address".into(), address.clone().into());
        }
        entry.insert("identity".into(), f.identity.clone().into());
        entries.push(Value::Object(entry));
    }
    Value::Array(entries)
}

/// Fills the identities of `inventory` (a plain list, or kubectl's node list) from `found`,
/// by name or address; says which hosts got none. Everything else in it stays as it was.
pub fn fill(
    inventory: &mut Value,
    found: &[Found],
    warnings: &mut Vec<String>,
) -> Result<usize, String> {
    let identity_of = |name: &str, addresses: &[&str]| -> Option<&str> {
        found
            .iter()
            .find(|f| {
                f.name.as_deref() == Some(name)
                    || f.addresses.iter().any(|a| addresses.contains(&a.as_str()))
            })
            .map(|f| f.identity.as_str())
    };
    let mut filled = 0;
    let mut missing = Vec::new();
    if let Some(items) = inventory.get_mut("items").and_then(Value::as_array_mut) {
        for node in items {
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let addresses: Vec<String> = node["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["address"].as_str().map(str::to_string))
                .collect();
            let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
            match identity_of(&name, &addresses) {
                Some(identity) => {
                    let metadata = node
                        .get_mut("metadata")
                        .and_then(Value::as_object_mut)
                        .ok_or("a node without metadata")?;
                    let annotations = metadata
                        .entry("annotations")
                        .or_insert_with(|| Value::Object(Default::default()));
                    let Some(annotations) = annotations.as_object_mut() else {
                        return Err(format!("node `{name}`'s annotations are not an object"));
                    };
                    annotations.insert(
                        bellc_core::front::inventory::IDENTITY_ANNOTATION.into(),
                        identity.into(),
                    );
                    filled += 1;
                }
                None => missing.push(name),
            }
        }
    } else if let Some(entries) = inventory.as_array_mut() {
        for entry in entries {
            let Some(object) = entry.as_object_mut() else {
                return Err("an inventory entry is not an object".to_string());
            };
            let name = object
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let address = object
                .get("address")
                .and_then(Value::as_str)
                .map(str::to_string);
            let addresses: Vec<&str> = address.iter().map(String::as_str).collect();
            match identity_of(&name, &addresses) {
                Some(identity) => {
                    object.insert("identity".into(), identity.into());
                    filled += 1;
                }
                None => missing.push(name),
            }
        }
    } else {
        return Err(
            "the inventory is neither a list of hosts nor `kubectl get nodes -o json`".to_string(),
        );
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "no key found for {} host(s) of the inventory: {}",
            missing.len(),
            missing.join(", ")
        ));
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIF4wrUz7gIS4nc8+DSlfAXrlD/67nr/j8ul08JhsMgYU";
    const KEY_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIG3n1nfYAHA0S5btEkBGasLpkuFtBWhCO0MiiMe5UYdc";

    #[test]
    fn names_addresses_and_what_is_passed_over() {
        let text = format!(
            "# web-1:22 SSH-2.0-OpenSSH_9.2p1 Debian-2\n\
             web-1 ssh-rsa AAAAB3NzaC1yc2E=\n\
             web-1,10.0.0.1 ssh-ed25519 {KEY_A}\n\
             [web-2]:2222 ssh-ed25519 {KEY_B} root@web-2\n\
             10.0.0.3 ssh-ed25519 {KEY_B}\n\
             |1|abc=|def= ssh-ed25519 {KEY_A}\n\
             @revoked * ssh-ed25519 {KEY_A}\n\
             *.lab ssh-ed25519 {KEY_A}\n\
             web-1 ssh-ed25519 {KEY_A}\n"
        );
        let (found, warnings) = read("hosts", &text);
        let names: Vec<Option<&str>> = found.iter().map(|f| f.name.as_deref()).collect();
        assert_eq!(names, [Some("web-1"), Some("web-2"), None]);
        assert_eq!(found[0].addresses, ["10.0.0.1"]);
        assert_eq!(found[0].identity, format!("ssh-ed25519 {KEY_A}"));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings[0].starts_with("hosts:6: hashed host names"),
            "{warnings:?}"
        );
        let mut warnings = Vec::new();
        let inventory = inventory(&found, &mut warnings);
        assert_eq!(inventory.as_array().unwrap().len(), 2);
        assert_eq!(inventory[0]["address"], "10.0.0.1");
        assert!(warnings[0].contains("10.0.0.3 is known by its address only"));
    }

    #[test]
    fn two_keys_for_one_host_give_it_none() {
        let text = format!("db ssh-ed25519 {KEY_A}\ndb ssh-ed25519 {KEY_B}\n");
        let (found, warnings) = read("k", &text);
        assert!(found.is_empty());
        assert!(
            warnings[0].contains("different keys on lines 1, 2"),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_inventory_is_filled_by_name_or_address() {
        let (found, _) = read(
            "k",
            &format!("web-1 ssh-ed25519 {KEY_A}\n10.0.0.3 ssh-ed25519 {KEY_B}\n"),
        );
        let mut plain = serde_json::json!([
            {"name": "web-1", "labels": {"rack": "r1"}},
            {"name": "web-3", "address": "10.0.0.3"},
            {"name": "web-4"}
        ]);
        let mut warnings = Vec::new();
        assert_eq!(fill(&mut plain, &found, &mut warnings).unwrap(), 2);
        assert_eq!(plain[0]["identity"], format!("ssh-ed25519 {KEY_A}"));
        assert_eq!(plain[0]["labels"]["rack"], "r1");
        assert_eq!(plain[1]["identity"], format!("ssh-ed25519 {KEY_B}"));
        assert!(warnings[0].ends_with("web-4"), "{warnings:?}");
        let mut nodes = serde_json::json!({"items": [
            {"metadata": {"name": "n1"}, "status": {"addresses": [{"address": "10.0.0.3"}]}}
        ]});
        assert_eq!(fill(&mut nodes, &found, &mut Vec::new()).unwrap(), 1);
        assert_eq!(
            nodes["items"][0]["metadata"]["annotations"]["bell/identity"],
            format!("ssh-ed25519 {KEY_B}")
        );
    }
}

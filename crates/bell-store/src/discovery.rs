//! Discovery: a host that is not in the fleet yet files what it is (`bell-run register`) under
//! `/bell/<fleet>/discovery/<host>`, signed by its identity, for an operator to accept into
//! the inventory (`bellc hosts pending|accept`), as `puppetserver ca sign` or `salt-key -a`.
//!
//! A registration is self-signed: the signature proves only that whoever wrote it holds the
//! private half of the identity it names. That is all an operator accepts (the fingerprint
//! they saw); the facts are the host's word about itself, shown, never trusted for anything
//! else. A registration under a name the release already gives another identity is flagged.

use crate::keys::{registration_key, rejection_key};
use crate::proof::{self, Identity};
use crate::Etcd;
use bell_wire::etcd::KeyValue;
use serde::{Deserialize, Serialize};

/// Put before a registration's bytes: a signature over one is never one over anything else.
pub const REGISTRATION: &[u8] = b"bell registration v1\n";

/// The registration format this crate writes.
pub const REGISTRATION_FORMAT: u32 = 1;

/// What a host says it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    /// Network interfaces but the loopback, by name.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    pub cpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Bytes (`MemTotal`).
    pub memory: u64,
    #[serde(default)]
    pub disks: Vec<Disk>,
    /// `PRETTY_NAME` of os-release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// `ADDRESS/PREFIX`, IPv4 then IPv6.
    #[serde(default)]
    pub addresses: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub name: String,
    /// Bytes.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// A spinning disk (`queue/rotational`); `false` for an SSD or NVMe.
    #[serde(default)]
    pub rotational: bool,
}

/// A registration as filed: the host's facts, signed with `signer` and `proof` beside them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub format: u32,
    pub host: String,
    pub fleet: String,
    pub facts: Facts,
    /// Unix seconds of the filing (the first, or the last change of the facts).
    pub registered_at: u64,
}

/// The registration signed by `key`, as the JSON text that is filed.
pub fn signed(registration: &Registration, key: &proof::SigningKey) -> String {
    let mut object = match serde_json::to_value(registration) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    proof::sign_object(REGISTRATION, &mut object, key);
    serde_json::to_string_pretty(&object).unwrap_or_default()
}

/// One registration as read back.
#[derive(Debug, Clone)]
pub struct Filed {
    /// The name it is filed under.
    pub host: String,
    /// What it says, when it is a registration signed by the identity it names.
    pub registration: Result<(Registration, Identity), String>,
}

/// Checks a registration as read (`raw`) filed under `host`: signed by the identity it names,
/// and about the host it is filed under.
pub fn check(host: &str, raw: &[u8]) -> Result<(Registration, Identity), String> {
    let value: serde_json::Value =
        serde_json::from_slice(raw).map_err(|e| format!("it is not JSON: {e}"))?;
    let signer = value
        .get("signer")
        .and_then(|s| s.as_str())
        .ok_or("it is not signed")?;
    let identity = Identity::parse(signer).map_err(|e| format!("its signer is not a key: {e}"))?;
    let value = proof::check_object(REGISTRATION, raw, &identity)?;
    let mut object = match value {
        serde_json::Value::Object(object) => object,
        _ => return Err("it is not a JSON object".into()),
    };
    object.remove("signer");
    let registration: Registration = serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| format!("it is not a registration: {e}"))?;
    if registration.host != host {
        return Err(format!(
            "it names host `{}`, but is filed under `{host}`",
            registration.host
        ));
    }
    Ok((registration, identity))
}

/// Every registration of `fleet`, sorted by host name.
pub fn list(etcd: &Etcd, fleet: &str) -> Result<Vec<Filed>, String> {
    Ok(filed_in(
        fleet,
        &etcd.range_prefix(&registration_key(fleet, ""))?,
    ))
}

/// Every registration of `fleet` and every refusal, with one range request (the refusals'
/// prefix, `/bell/FLEET/discovery-rejected/`, starts with the registrations').
pub fn read(
    etcd: &Etcd,
    fleet: &str,
) -> Result<(Vec<Filed>, std::collections::BTreeMap<String, Rejection>), String> {
    let kvs = etcd.range_prefix(&crate::keys::enrollment_prefix(fleet))?;
    Ok((filed_in(fleet, &kvs), rejections_in(fleet, &kvs)))
}

/// The registrations among `kvs` (a read of the fleet's keys, such as `/bell/FLEET/`).
pub fn filed_in(fleet: &str, kvs: &[KeyValue]) -> Vec<Filed> {
    let prefix = registration_key(fleet, "");
    kvs.iter()
        .filter_map(|kv| {
            let host = kv.key.strip_prefix(&prefix)?.to_string();
            let registration = check(&host, &kv.value);
            Some(Filed { host, registration })
        })
        .collect()
}

/// An operator's refusal (`bellc hosts reject`): the identity refused, so that the host
/// registering again with it is shown as rejected rather than pending. Not signed: a forged
/// one only hides a host from the pending list, and accepting it by name still works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub identity: String,
    pub rejected_at: u64,
}

/// Removes `host`'s registration and records that its identity was refused.
pub fn reject(etcd: &Etcd, fleet: &str, host: &str, rejection: &Rejection) -> Result<(), String> {
    let text = serde_json::to_string(rejection).map_err(|e| e.to_string())?;
    etcd.put(&rejection_key(fleet, host), text.as_bytes())?;
    etcd.delete(&registration_key(fleet, host))
}

/// Forgets a refusal (the host was accepted after all).
pub fn unreject(etcd: &Etcd, fleet: &str, host: &str) -> Result<(), String> {
    etcd.delete(&rejection_key(fleet, host))
}

/// The refusals among `kvs` (a read of the fleet's keys).
pub fn rejections_in(
    fleet: &str,
    kvs: &[KeyValue],
) -> std::collections::BTreeMap<String, Rejection> {
    let prefix = rejection_key(fleet, "");
    kvs.iter()
        .filter_map(|kv| {
            let host = kv.key.strip_prefix(&prefix)?.to_string();
            let rejection = serde_json::from_slice(&kv.value).ok()?;
            Some((host, rejection))
        })
        .collect()
}

//! Reports only their host can have written. Every host has an Ed25519 identity (its SSH host
//! key, or bell's own key where there is none); the release, signed by the fleet's key, names
//! each host's identity; a host signs every report it files, and a reader believes a report
//! only when it verifies against the identity the release gives the host the report is filed
//! under. Whoever can write to the store (every host can) can then still delete or hold back a
//! report, but never make another host look converged, healthy or failed.
//!
//! What is signed is the report as JSON with its keys sorted and no white space, without its
//! `proof`, after a context line: `bell report v1\n{…}`. The report names its fleet, host,
//! release and bundle, and a sequence number that only grows on the host (a replayed old report
//! is older than one a reader has seen); fields a newer bell-run adds are signed with the rest,
//! since the reader signs what it read, not what it understood.

use crate::Report;
pub use bell_seal::identity::{put_string, Identity, SigningKey, Wire};
use bell_wire::{base64, from_base64};
use serde_json::Value;

/// Put before the report's bytes, so that a signature over a report is never one over
/// anything else the same key signs (an SSH host key signs SSH sessions).
const REPORT: &[u8] = b"bell report v1\n";

/// Put before a semaphore holder record's bytes.
pub const HOLDER: &[u8] = b"bell holder v1\n";

/// The text a report is filed as. A signed one is written as what was signed with the proof
/// put first, `{"proof":"…",` and then the signed JSON, so that a reader checks the signature
/// over the bytes it read without building the canonical form again (a report re-encoded on
/// the way, by `jq` say, is still checked the long way).
pub fn to_json(report: &Report) -> String {
    let Some(proof) = &report.proof else {
        return serde_json::to_string(report).unwrap_or_default();
    };
    let mut value = serde_json::to_value(report).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("proof");
    }
    let signed = serde_json::to_string(&sorted(&value)).unwrap_or_default();
    format!(
        "{{\"proof\":{},{}",
        Value::from(proof.as_str()),
        signed.strip_prefix('{').unwrap_or(&signed)
    )
}

/// The signed bytes of a report as [`to_json`] wrote it, and its proof: `None` for any other
/// shape.
fn as_written(raw: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let rest = raw.strip_prefix(b"{\"proof\":\"")?;
    // Base64 holds no quote: the proof ends at the first.
    let end = rest.iter().position(|b| *b == b'"')?;
    let (proof, after) = rest.split_at(end);
    let members = after.strip_prefix(b"\",")?;
    let mut signed = Vec::with_capacity(REPORT.len() + 1 + members.len());
    signed.extend_from_slice(REPORT);
    signed.push(b'{');
    signed.extend_from_slice(members);
    Some((signed, proof))
}

/// Signs `report` as its `sequence`th: names the signer, numbers it, and adds the proof.
pub fn sign(report: &mut Report, key: &SigningKey, sequence: u64) {
    report.sequence = Some(sequence);
    report.signer = Some(key.identity().to_openssh());
    report.proof = None;
    let value = serde_json::to_value(&*report).unwrap_or(Value::Null);
    report.proof = Some(base64(&key.sign(&signed_bytes(REPORT, &value))));
}

/// Signs a JSON object of another kind (`context` says which, so that no signature over one
/// kind is taken for another): adds `signer` and `proof` to it.
pub fn sign_object(context: &[u8], object: &mut serde_json::Map<String, Value>, key: &SigningKey) {
    object.remove("proof");
    object.insert("signer".into(), key.identity().to_openssh().into());
    let proof = base64(&key.sign(&signed_bytes(context, &Value::Object(object.clone()))));
    object.insert("proof".into(), proof.into());
}

/// Checks what [`sign_object`] signed, as read (`raw`), against `identity`: why not, if not.
pub fn check_object(context: &[u8], raw: &[u8], identity: &Identity) -> Result<Value, String> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(raw) else {
        return Err("it is not a JSON object".to_string());
    };
    let (Some(Value::String(signer)), Some(Value::String(proof))) =
        (object.get("signer").cloned(), object.remove("proof"))
    else {
        return Err("it is not signed".to_string());
    };
    let signer = Identity::parse(&signer).map_err(|e| format!("its signer is not a key: {e}"))?;
    if signer != *identity {
        return Err(format!(
            "signed by another key ({}), not the host's identity ({})",
            signer.fingerprint(),
            identity.fingerprint()
        ));
    }
    let value = Value::Object(object);
    let signature = from_base64(&proof).unwrap_or_default();
    if !identity.verifies(&signed_bytes(context, &value), &signature) {
        return Err(
            "its signature does not match what it says: changed after it was signed".into(),
        );
    }
    Ok(value)
}

/// What a reader can tell of who wrote a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// Signed by the identity the reader has for the host: the host's `sequence`th report,
    /// whose bytes and identity `checked` names (see [`checked`]; `None` only for a report a
    /// reader kept from before it named them).
    Signed {
        sequence: u64,
        checked: Option<Checked>,
    },
    /// Not signed at all: a bell-run from before identities, or anyone.
    Unsigned,
    /// Signed, but the reader has no identity for the host to check it with.
    NoIdentity,
    /// Cannot be the host's own: why.
    Forged(String),
}

/// A digest of one report's exact bytes and the identity its signature was checked against.
/// A reader keeps those of the reports it checked (`bellc`'s witness state), and one that
/// finds the same bytes under the same identity again (a `bellc` started again) takes them as
/// checked: a digest costs a microsecond where a signature costs twenty, and 100,000 hosts'
/// reports are two seconds of signatures on two cores.
pub type Checked = [u8; 32];

/// The [`Checked`] digest of the report `raw` under `identity`.
pub fn checked(identity: &Identity, raw: &[u8]) -> Checked {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"bell checked report v1\n");
    hash.update(identity.key_bytes());
    hash.update(raw);
    hash.finalize().into()
}

/// Checks a report as read (`raw`, and `report` parsed from it) that was filed under `host`,
/// against the identity the reader has for that host.
pub fn check(raw: &[u8], report: &Report, host: &str, identity: Option<&Identity>) -> Proof {
    match check_but_signature(raw, report, host, identity) {
        Ok(proof) => proof,
        Err(unchecked) => unchecked.check_alone(raw),
    }
}

/// What [`check_but_signature`] leaves to check: the report's signature over the bytes it was
/// written with, under the identity of its host.
pub struct Unchecked {
    pub message: Vec<u8>,
    pub signature: Vec<u8>,
    pub identity: Identity,
    pub sequence: u64,
}

impl Unchecked {
    /// Its proof, checked alone (when a batch failed: which of its reports did).
    pub fn check_alone(&self, raw: &[u8]) -> Proof {
        if self.identity.verifies(&self.message, &self.signature) {
            return Proof::Signed {
                sequence: self.sequence,
                checked: Some(checked(&self.identity, raw)),
            };
        }
        // Not as written: a report written by another serializer than bell-run's, checked
        // against its fields in order.
        as_reordered(raw, &self.signature, &self.identity, self.sequence)
    }
}

/// [`check`], but for the signature of a report as bell-run writes it, which is left to the
/// caller (`Err`): a reader with many reports checks their signatures together
/// ([`bell_seal::identity::all_verify`]), and [`Unchecked::check_alone`] those of a batch that
/// failed.
pub fn check_but_signature(
    raw: &[u8],
    report: &Report,
    host: &str,
    identity: Option<&Identity>,
) -> Result<Proof, Unchecked> {
    let Some(identity) = identity else {
        return Ok(if report.proof.is_some() {
            Proof::NoIdentity
        } else {
            Proof::Unsigned
        });
    };
    if report.host != host {
        return Ok(Proof::Forged(format!(
            "a report of host `{}` filed under `{host}`",
            report.host.escape_debug()
        )));
    }
    let (Some(proof), Some(signer), Some(_)) = (&report.proof, &report.signer, report.sequence)
    else {
        return Ok(
            if report.proof.is_none() && report.signer.is_none() && report.sequence.is_none() {
                Proof::Unsigned
            } else {
                Proof::Forged(
                    "its signature is incomplete (a proof, signer or sequence is missing)".into(),
                )
            },
        );
    };
    match Identity::parse(signer) {
        Ok(signer) if signer != *identity => {
            return Ok(Proof::Forged(format!(
                "signed by another key ({}), not `{host}`'s identity ({})",
                signer.fingerprint(),
                identity.fingerprint()
            )))
        }
        Ok(_) => {}
        Err(e) => return Ok(Proof::Forged(format!("its signer is not a key: {e}"))),
    }
    let sequence = report.sequence.unwrap_or_default();
    if let Some((message, written)) = as_written(raw) {
        if written == proof.as_bytes() {
            return Err(Unchecked {
                message,
                signature: from_base64(proof).unwrap_or_default(),
                identity: identity.clone(),
                sequence,
            });
        }
    }
    let signature = from_base64(proof).unwrap_or_default();
    Ok(as_reordered(raw, &signature, identity, sequence))
}

/// The proof of `raw` with its members in sorted order, as it was signed.
fn as_reordered(raw: &[u8], signature: &[u8], identity: &Identity, sequence: u64) -> Proof {
    let Ok(mut value) = serde_json::from_slice::<Value>(raw) else {
        return Proof::Forged("it is not JSON".to_string());
    };
    if let Value::Object(map) = &mut value {
        map.remove("proof");
    }
    if !identity.verifies(&signed_bytes(REPORT, &value), signature) {
        return Proof::Forged(
            "its signature does not match what it says: changed after it was signed".to_string(),
        );
    }
    Proof::Signed {
        sequence,
        checked: Some(checked(identity, raw)),
    }
}

/// The context line, then the JSON with sorted keys and no white space.
fn signed_bytes(context: &[u8], value: &Value) -> Vec<u8> {
    let mut bytes = context.to_vec();
    bytes.extend(serde_json::to_vec(&sorted(value)).unwrap_or_default());
    bytes
}

/// The same value with every object's keys in order, however serde_json keeps its maps.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::State;

    fn report(host: &str) -> Report {
        crate::tests::report(host, "apply", State::Success)
    }

    fn filed(report: &Report) -> Vec<u8> {
        to_json(report).into_bytes()
    }

    #[test]
    fn a_signed_report_verifies_and_nothing_else_does() {
        let key = SigningKey::from_seed([7; 32]);
        let other = SigningKey::from_seed([8; 32]);
        let identity = key.identity();
        let mut mine = report("web-1");
        sign(&mut mine, &key, 41);
        let raw = filed(&mine);
        assert_eq!(
            check(&raw, &mine, "web-1", Some(&identity)),
            Proof::Signed {
                sequence: 41,
                checked: Some(checked(&identity, &raw))
            }
        );
        // The digest names the bytes and the identity: another of either, another digest.
        assert_ne!(checked(&identity, &raw), checked(&other.identity(), &raw));
        assert_ne!(checked(&identity, &raw), checked(&identity, &raw[1..]));
        assert!(raw.starts_with(b"{\"proof\":\""));
        // Written another way (pretty, keys in the struct's order): checked the long way.
        let reordered = serde_json::to_vec_pretty(&mine).unwrap();
        assert_eq!(
            check(&reordered, &mine, "web-1", Some(&identity)),
            Proof::Signed {
                sequence: 41,
                checked: Some(checked(&identity, &reordered))
            }
        );
        // Filed under another host's name.
        assert!(matches!(
            check(&raw, &mine, "web-2", Some(&identity)),
            Proof::Forged(why) if why.contains("report of host `web-1`")
        ));
        // Edited after signing.
        let mut edited = mine.clone();
        edited.result = State::Failed;
        let raw_edited = filed(&edited);
        assert!(matches!(
            check(&raw_edited, &edited, "web-1", Some(&identity)),
            Proof::Forged(why) if why.contains("changed after")
        ));
        // Signed by another key.
        let mut theirs = report("web-1");
        sign(&mut theirs, &other, 42);
        assert!(matches!(
            check(&filed(&theirs), &theirs, "web-1", Some(&identity)),
            Proof::Forged(why) if why.contains("another key")
        ));
        // Claims the right signer, signed by another key.
        let mut lying = theirs.clone();
        lying.signer = Some(identity.to_openssh());
        assert!(matches!(
            check(&filed(&lying), &lying, "web-1", Some(&identity)),
            Proof::Forged(why) if why.contains("changed after")
        ));
        // Unsigned, and no identity to check with.
        let plain = report("web-1");
        assert_eq!(
            check(&filed(&plain), &plain, "web-1", Some(&identity)),
            Proof::Unsigned
        );
        assert_eq!(check(&raw, &mine, "web-1", None), Proof::NoIdentity);
    }

    #[test]
    fn a_field_the_reader_does_not_know_is_signed_too() {
        let key = SigningKey::from_seed([9; 32]);
        let mut signed = report("db-1");
        signed.sequence = Some(3);
        signed.signer = Some(key.identity().to_openssh());
        let mut value = serde_json::to_value(&signed).unwrap();
        value["added-later"] = Value::from("x");
        let proof = base64(&key.sign(&signed_bytes(REPORT, &value)));
        value["proof"] = Value::from(proof.clone());
        let raw = serde_json::to_vec(&value).unwrap();
        signed.proof = Some(proof);
        assert_eq!(
            check(&raw, &signed, "db-1", Some(&key.identity())),
            Proof::Signed {
                sequence: 3,
                checked: Some(checked(&key.identity(), &raw))
            }
        );
        value["added-later"] = Value::from("y");
        let raw = serde_json::to_vec(&value).unwrap();
        assert!(matches!(
            check(&raw, &signed, "db-1", Some(&key.identity())),
            Proof::Forged(_)
        ));
    }

    #[test]
    fn a_signed_object_verifies_only_in_its_own_context() {
        let key = SigningKey::from_seed([3; 32]);
        let mut object = serde_json::Map::new();
        object.insert("host".into(), "web-1".into());
        object.insert("since".into(), 5.into());
        sign_object(HOLDER, &mut object, &key);
        let raw = serde_json::to_vec(&object).unwrap();
        assert!(check_object(HOLDER, &raw, &key.identity()).is_ok());
        assert!(check_object(REPORT, &raw, &key.identity()).is_err());
        let other = SigningKey::from_seed([4; 32]);
        let err = check_object(HOLDER, &raw, &other.identity()).unwrap_err();
        assert!(err.contains("another key"), "{err}");
        object.insert("since".into(), 6.into());
        let raw = serde_json::to_vec(&object).unwrap();
        let err = check_object(HOLDER, &raw, &key.identity()).unwrap_err();
        assert!(err.contains("changed after"), "{err}");
        assert!(check_object(HOLDER, br#"{"since":5}"#, &key.identity()).is_err());
    }

    #[test]
    fn identities_read_as_openssh_writes_them() {
        let key = SigningKey::from_seed([1; 32]);
        let line = format!("{} root@web-1", key.identity().to_openssh());
        assert_eq!(Identity::parse(&line).unwrap(), key.identity());
        assert!(Identity::parse("ssh-rsa AAAAB3NzaC1yc2E=").is_err());
        assert!(Identity::parse("ssh-ed25519 !!!").is_err());
        assert!(Identity::parse("ssh-ed25519").is_err());
        assert!(key.identity().fingerprint().starts_with("SHA256:"));
    }
}

//! How a host proves who it is to the fleet's gateway (`bellc gateway`): every request is
//! signed with the host's identity, the Ed25519 key the signed release names for it, so a host
//! holds no store password and the gateway needs no secret of its own to check it.
//!
//! What is signed is a context line, the host, the time, a nonce, the request's path and its
//! body: `bell gateway request v1\nHOST\nTIME\nNONCE\nPATH\n` and the body's bytes. (The
//! fleet is in every key a request names: one signed for another fleet's gateway touches no
//! key of this one.) The time bounds how long a captured request can be played again (the gateway refuses
//! one outside [`MAX_SKEW`] of its clock) and the nonce makes each request once-only within
//! that window on a replica (a replica keeps the nonces it saw; a replay sent to another
//! replica within the window repeats a request the host itself made, never another).
//!
//! The header: `Authorization: Bell-Ed25519 HOST TIME NONCE SIGNATURE IDENTITY`, the
//! signature and the identity's 32 key bytes in base64. Host names are [`crate::check_name`]'s
//! and the nonce is hex, so no field holds a space. The gateway checks a host the release
//! names against the identity the release gives it (the one in the header must be the same);
//! the identity in the header is what a machine not in the fleet yet is known by while it
//! registers.

use crate::proof::{Identity, SigningKey};
use bell_wire::{base64, from_base64};
use std::sync::atomic::{AtomicU64, Ordering};

/// The scheme of the `Authorization` header.
pub const SCHEME: &str = "Bell-Ed25519";

/// Put before what is signed, so that a request's signature is never one over a report (or
/// anything else the key signs).
const CONTEXT: &[u8] = b"bell gateway request v1\n";

/// How far a request's time may be from the gateway's clock, in seconds, either way.
pub const MAX_SKEW: u64 = 120;

pub use bell_wire::etcd::WAIT_PATH;

/// The longest one long-poll lasts at the gateway; a host that wants longer asks again.
pub const MAX_WAIT: u64 = 300;

/// A request's signature as the header carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub host: String,
    pub time: u64,
    pub nonce: String,
    signature: Vec<u8>,
    /// The identity the request says signed it.
    pub identity: Identity,
}

/// The bytes a host signs for one request.
fn signed_bytes(host: &str, time: u64, nonce: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = CONTEXT.to_vec();
    bytes.extend_from_slice(format!("{host}\n{time}\n{nonce}\n{path}\n").as_bytes());
    bytes.extend_from_slice(body);
    bytes
}

/// The `Authorization` header of one request of `host`, at `time` (seconds since the epoch),
/// with a nonce of this process's.
pub fn authorization(host: &str, key: &SigningKey, path: &str, body: &[u8], time: u64) -> String {
    let nonce = next_nonce();
    let signature = key.sign(&signed_bytes(host, time, &nonce, path, body));
    format!(
        "{SCHEME} {host} {time} {nonce} {} {}",
        base64(&signature),
        base64(key.identity().key_bytes())
    )
}

/// A nonce no other request of this process or another has: 16 random bytes drawn once per
/// process, and a count.
fn next_nonce() -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        let mut seed = [0u8; 16];
        if bell_seal::random_bytes(&mut seed).is_err() {
            // No randomness: the time and the process id still differ from run to run.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            seed[..8].copy_from_slice(&(now as u64).to_le_bytes());
            seed[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        }
        bell_wire::hex(&seed)
    });
    format!("{prefix}{:x}", COUNT.fetch_add(1, Ordering::Relaxed))
}

impl Signed {
    /// Reads an `Authorization` header's value.
    pub fn parse(header: &str) -> Result<Signed, String> {
        let mut parts = header.split(' ');
        if parts.next() != Some(SCHEME) {
            return Err(format!("the request is not signed with `{SCHEME}`"));
        }
        let (Some(host), Some(time), Some(nonce), Some(signature), Some(identity), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(format!(
                "a `{SCHEME}` header is `HOST TIME NONCE SIGNATURE IDENTITY`"
            ));
        };
        crate::check_name("host", host)?;
        let time = time.parse().map_err(|_| {
            format!(
                "the request's time `{}` is not a number",
                time.escape_debug()
            )
        })?;
        if nonce.is_empty() || nonce.len() > 64 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("the request's nonce is not 1 to 64 hex digits".into());
        }
        let signature = from_base64(signature)
            .filter(|s| s.len() == 64)
            .ok_or("the request's signature is not 64 bytes of base64")?;
        let identity = from_base64(identity)
            .and_then(|bytes| Identity::from_bytes(&bytes).ok())
            .ok_or("the request's identity is not 32 bytes of base64")?;
        Ok(Signed {
            host: host.to_string(),
            time,
            nonce: nonce.to_string(),
            signature,
            identity,
        })
    }

    /// Whether the time is within [`MAX_SKEW`] of `now`.
    pub fn is_timely(&self, now: u64) -> bool {
        self.time.abs_diff(now) <= MAX_SKEW
    }

    /// Whether the identity the header names signed this request to `path` with `body`.
    pub fn verifies_itself(&self, path: &str, body: &[u8]) -> bool {
        self.verifies(&self.identity, path, body)
    }

    /// Whether `identity` signed this request to `path` with `body`.
    pub fn verifies(&self, identity: &Identity, path: &str, body: &[u8]) -> bool {
        let bytes = signed_bytes(&self.host, self.time, &self.nonce, path, body);
        identity.verifies(&bytes, &self.signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_seed([seed; 32])
    }

    #[test]
    fn a_signed_request_verifies_only_as_it_was_made() {
        let h1 = key(1);
        let header = authorization("h1", &h1, "/v3/kv/put", b"{}", 1000);
        let signed = Signed::parse(&header).unwrap();
        assert_eq!(signed.host, "h1");
        assert!(signed.verifies(&h1.identity(), "/v3/kv/put", b"{}"));
        // Another key, path or body.
        assert!(!signed.verifies(&key(2).identity(), "/v3/kv/put", b"{}"));
        assert!(!signed.verifies(&h1.identity(), "/v3/kv/range", b"{}"));
        assert!(!signed.verifies(&h1.identity(), "/v3/kv/put", b"{ }"));
        // Another host name in the header with h1's signature.
        let forged = header.replacen(" h1 ", " h2 ", 1);
        let forged = Signed::parse(&forged).unwrap();
        assert!(!forged.verifies(&h1.identity(), "/v3/kv/put", b"{}"));
        assert!(signed.is_timely(1000 + MAX_SKEW) && !signed.is_timely(1001 + MAX_SKEW));
        assert!(!signed.is_timely(1000 - MAX_SKEW - 1));
    }

    #[test]
    fn nonces_differ_and_bad_headers_are_refused() {
        let a = Signed::parse(&authorization("h", &key(1), "/", b"", 5)).unwrap();
        let b = Signed::parse(&authorization("h", &key(1), "/", b"", 5)).unwrap();
        assert_ne!(a.nonce, b.nonce);
        for bad in [
            "",
            "Basic aDE6cHc=",
            "Bell-Ed25519 h1 5 00",
            "Bell-Ed25519 h1 5 00 AAAA",
            "Bell-Ed25519 h1 5 00 AAAA AAAA",
            "Bell-Ed25519 ../h1 5 00 AAAA",
            "Bell-Ed25519 h1 x 00 AAAA",
            "Bell-Ed25519 h1 5 zz AAAA",
            "Bell-Ed25519 h1 5 00 AAAA extra",
        ] {
            assert!(Signed::parse(bad).is_err(), "{bad}");
        }
    }
}

//! Every exchange bell has on the network, in one crate: the HTTP/1.1 client that speaks to
//! etcd's gateway and to the web servers that serve bundles ([`client`]), the small server
//! behind `bellc serve` ([`server`]), TLS ([`tls`]), host names to addresses without the C
//! library ([`resolve`]), the [`Deadline`] every exchange runs under, and the encodings the
//! wire uses (base64 and hex, from the crates the ecosystem keeps for them).
//!
//! Both binaries use it: bell-run to fetch and to file reports, bellc to read a fleet and to
//! serve its page. Nothing here knows what is said on the wire (keys, reports, releases): that
//! is the contract crates' business.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![cfg_attr(not(test), deny(clippy::string_slice))]

pub mod client;
mod deadline;
pub mod etcd;
pub mod resolve;
pub mod server;
pub mod tls;

pub use deadline::Deadline;

use base64::Engine as _;

/// Standard base64 with padding: etcd's gateway for `bytes` fields, OpenSSH's key lines,
/// signatures in reports.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Standard base64 with padding, canonical only: one text for one value.
pub fn from_base64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// What [`hex`] wrote (either case); `None` for anything else.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    hex::decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
            assert_eq!(from_base64(coded).as_deref(), Some(plain.as_bytes()));
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(from_base64(&base64(&all)), Some(all));
        // One text for one value: no missing or extra padding, no padding inside, no bits
        // set below the last byte.
        for bad in [
            "Zm9v!", "Zg", "Zh==", "Zg=", "Z", "aGl=", "aGk", "a=Gk", "aGk=aGk=", "a===",
        ] {
            assert_eq!(from_base64(bad), None, "{bad}");
        }
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
    }
}

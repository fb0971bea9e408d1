//! A host's identity: an Ed25519 key in OpenSSH's formats (its SSH host key, or bell's own
//! key where there is none), public for readers and private for the host that signs its
//! reports and registrations. The SSH wire encoding both formats use is here too, read once.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use sha2::{Digest, Sha256};

const KEY_TYPE: &str = "ssh-ed25519";

/// A host's public identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    key: ed25519_compact::PublicKey,
}

impl Identity {
    /// One line of OpenSSH's public key format: `ssh-ed25519 BASE64 [COMMENT]`.
    pub fn parse(line: &str) -> Result<Identity, String> {
        let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
        let (Some(kind), Some(data)) = (fields.next(), fields.next()) else {
            return Err("not an OpenSSH public key (`ssh-ed25519 AAAA…`)".to_string());
        };
        if kind != KEY_TYPE {
            return Err(format!("a host identity is an Ed25519 key, not `{kind}`"));
        }
        let blob = STANDARD.decode(data).ok().ok_or("its key is not base64")?;
        let mut reader = Wire(&blob);
        let inner = reader.string().ok_or("its key is cut short")?;
        if inner != KEY_TYPE.as_bytes() {
            return Err("its key data is not an Ed25519 key".to_string());
        }
        let key = reader.string().ok_or("its key is cut short")?;
        if !reader.0.is_empty() {
            return Err("its key data runs on past the key".to_string());
        }
        Identity::from_bytes(key)
    }

    pub fn from_bytes(key: &[u8]) -> Result<Identity, String> {
        ed25519_compact::PublicKey::from_slice(key)
            .map(|key| Identity { key })
            .map_err(|_| "its key is not 32 bytes".to_string())
    }

    /// The key's 32 bytes.
    pub fn key_bytes(&self) -> &[u8] {
        self.key.as_ref()
    }

    /// The key as SSH writes it on the wire: its type and its bytes.
    pub fn blob(&self) -> Vec<u8> {
        let mut blob = Vec::with_capacity(51);
        put_string(&mut blob, KEY_TYPE.as_bytes());
        put_string(&mut blob, self.key.as_ref());
        blob
    }

    /// `ssh-ed25519 BASE64`, as `ssh-keyscan` and `known_hosts` write it (without a comment).
    pub fn to_openssh(&self) -> String {
        format!("{KEY_TYPE} {}", STANDARD.encode(self.blob()))
    }

    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.blob());
        format!("SHA256:{}", STANDARD_NO_PAD.encode(digest))
    }

    /// Whether `signature` is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        ed25519_compact::Signature::from_slice(signature)
            .is_ok_and(|s| self.key.verify(message, &s).is_ok())
    }
}

/// Whether every signature of `signed` (message, signature, identity) holds, checked together:
/// a batch costs under half of what checking each one costs (a fleet's first reading checks
/// 100,000). `false` says only that one does not: [`Identity::verifies`] tells which.
///
/// A batch accepts what [`Identity::verifies`] accepts, and more only where the key's holder
/// made the signature odd on purpose (a batch checks the cofactored equation): never a
/// message the key did not sign. A weak key (of small order, for which anyone could sign) is
/// refused here, as it is one by one.
pub fn all_verify(signed: &[(&[u8], &[u8], &Identity)]) -> bool {
    let mut messages = Vec::with_capacity(signed.len());
    let mut signatures = Vec::with_capacity(signed.len());
    let mut keys = Vec::with_capacity(signed.len());
    for (message, signature, identity) in signed {
        let Ok(signature) = ed25519_dalek::Signature::from_slice(signature) else {
            return false;
        };
        let Ok(key) = <[u8; 32]>::try_from(identity.key_bytes())
            .map_err(|_| ())
            .and_then(|bytes| ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(|_| ()))
        else {
            return false;
        };
        if key.is_weak() {
            return false;
        }
        messages.push(*message);
        signatures.push(signature);
        keys.push(key);
    }
    ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok()
}

/// A host's private key.
pub struct SigningKey {
    pair: ed25519_compact::KeyPair,
}

impl SigningKey {
    /// From the 32-byte seed (OpenSSH keeps it as the first half of its 64-byte private key).
    pub fn from_seed(seed: [u8; 32]) -> SigningKey {
        SigningKey {
            pair: ed25519_compact::KeyPair::from_seed(ed25519_compact::Seed::new(seed)),
        }
    }

    pub fn identity(&self) -> Identity {
        Identity { key: self.pair.pk }
    }

    /// The public key's 32 bytes followed by the seed's: OpenSSH's 64-byte private key is
    /// seed then public key.
    pub fn openssh_private(&self) -> Vec<u8> {
        self.pair.sk.as_ref().to_vec()
    }

    /// This key's Ed25519 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sk.sign(message, None).as_ref().to_vec()
    }
}

/// SSH's wire encoding of a string: a 32-bit big-endian length, then the bytes.
pub fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend((bytes.len() as u32).to_be_bytes());
    out.extend(bytes);
}

/// Reads SSH's wire encoding.
pub struct Wire<'a>(pub &'a [u8]);

impl<'a> Wire<'a> {
    pub fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*head))
    }

    pub fn string(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_seed([n; 32])
    }

    #[test]
    fn a_batch_holds_when_every_signature_does_and_fails_for_one_that_does_not() {
        let keys: Vec<SigningKey> = (1..=40).map(key).collect();
        let identities: Vec<Identity> = keys.iter().map(SigningKey::identity).collect();
        let messages: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        let signatures: Vec<Vec<u8>> = keys.iter().zip(&messages).map(|(k, m)| k.sign(m)).collect();
        let batch = |messages: &[Vec<u8>], signatures: &[Vec<u8>], identities: &[Identity]| {
            let signed: Vec<(&[u8], &[u8], &Identity)> = messages
                .iter()
                .zip(signatures)
                .zip(identities)
                .map(|((m, s), i)| (m.as_slice(), s.as_slice(), i))
                .collect();
            all_verify(&signed)
        };
        assert!(batch(&messages, &signatures, &identities));
        assert!(batch(&[], &[], &[]));
        // One message changed after it was signed, one signature under another key, one
        // signature cut short: each fails the whole batch, as one by one it fails alone.
        let mut changed = messages.clone();
        changed[17][3] ^= 1;
        assert!(!batch(&changed, &signatures, &identities));
        assert!(!identities[17].verifies(&changed[17], &signatures[17]));
        let mut swapped = identities.clone();
        swapped.swap(3, 4);
        assert!(!batch(&messages, &signatures, &swapped));
        let mut cut = signatures.clone();
        cut[39].pop();
        assert!(!batch(&messages, &cut, &identities));
        // A key of small order (the identity point), with which any "signature" of R = that
        // point and s = 0 would hold under the cofactored equation: refused.
        let mut weak_key = [0u8; 32];
        weak_key[0] = 1;
        let weak = Identity::from_bytes(&weak_key).unwrap();
        let mut forged = weak_key.to_vec();
        forged.extend([0u8; 32]);
        let signed: Vec<(&[u8], &[u8], &Identity)> = vec![(b"anything", &forged, &weak)];
        assert!(!all_verify(&signed));
        assert!(!weak.verifies(b"anything", &forged));
    }
}

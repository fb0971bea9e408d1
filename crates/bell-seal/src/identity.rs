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

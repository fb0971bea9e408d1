//! A host's key as OpenSSH keeps it (`/etc/ssh/ssh_host_ed25519_key`, PROTOCOL.key):
//! unencrypted, one Ed25519 key. Read here once, for bell-run (which opens sealed secrets and
//! signs reports with it) and for the tests that open what a build sealed.

use crate::identity::Wire;
use ed25519_compact::{KeyPair, Seed};

pub const MAGIC: &[u8] = b"openssh-key-v1\0";
pub const PEM_BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";
pub const PEM_END: &str = "-----END OPENSSH PRIVATE KEY-----";

/// An Ed25519 key read from OpenSSH's private key format.
pub struct Ed25519Key {
    /// The first half of OpenSSH's 64-byte private key (what [`crate::Identity::from_seed`]
    /// and signing keys are made from).
    pub seed: [u8; 32],
    pub public: [u8; 32],
}

impl std::fmt::Debug for Ed25519Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ed25519Key({}, seed withheld)", hex::encode(self.public))
    }
}

impl Ed25519Key {
    /// The key of an Ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> Ed25519Key {
        Ed25519Key {
            seed,
            public: *KeyPair::from_seed(Seed::new(seed)).pk,
        }
    }

    /// Its public half as one line of OpenSSH's format without a comment (`ssh-ed25519
    /// BASE64`), as a host's `identity=` takes it.
    pub fn public_line(&self) -> String {
        format!("ssh-ed25519 {}", crate::b64(&crate::ssh_wire(&self.public)))
    }
}

/// Reads the key in `text`; the error says what is wrong with it, in words that follow "the
/// file is not an unencrypted OpenSSH Ed25519 key: ".
pub fn read_ed25519(text: &str) -> Result<Ed25519Key, String> {
    let body: String = text
        .lines()
        .map(str::trim)
        .skip_while(|l| *l != PEM_BEGIN)
        .skip(1)
        .take_while(|l| *l != PEM_END)
        .collect();
    let bytes = crate::unb64(body.trim_end_matches('=')).ok_or("its body is not base64")?;
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("it does not begin `openssh-key-v1`")?;
    let mut wire = Wire(rest);
    let short = "it is cut short";
    let cipher = wire.string().ok_or(short)?;
    let kdf = wire.string().ok_or(short)?;
    wire.string().ok_or(short)?;
    if cipher != b"none" || kdf != b"none" {
        return Err("it is encrypted with a passphrase".to_string());
    }
    if wire.u32() != Some(1) {
        return Err("it holds more than one key".to_string());
    }
    wire.string().ok_or(short)?;
    let mut private = Wire(wire.string().ok_or(short)?);
    let (check1, check2) = (private.u32(), private.u32());
    if check1.is_none() || check1 != check2 {
        return Err("its private part is damaged".to_string());
    }
    if private.string() != Some(b"ssh-ed25519") {
        return Err("it is not an Ed25519 key".to_string());
    }
    let public = private.string().ok_or(short)?;
    let secret = private.string().ok_or(short)?;
    let seed: [u8; 32] = secret
        .get(..32)
        .and_then(|s| s.try_into().ok())
        .ok_or("its private key is not 64 bytes")?;
    let key = Ed25519Key::from_seed(seed);
    if key.public != public {
        return Err("its public and private halves do not belong together".to_string());
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(out: &mut Vec<u8>, s: &[u8]) {
        out.extend((s.len() as u32).to_be_bytes());
        out.extend(s);
    }

    /// A key file as `ssh-keygen -t ed25519` writes one, with the parts a test changes.
    fn file(seed: [u8; 32], cipher: &str, checks: (u32, u32), public: Option<[u8; 32]>) -> String {
        let pair = KeyPair::from_seed(Seed::new(seed));
        let public = public.unwrap_or(*pair.pk);
        let mut key = Vec::new();
        put(&mut key, b"ssh-ed25519");
        put(&mut key, &public);
        let mut private = Vec::new();
        private.extend(checks.0.to_be_bytes());
        private.extend(checks.1.to_be_bytes());
        put(&mut private, b"ssh-ed25519");
        put(&mut private, &public);
        put(&mut private, &[&seed[..], &pair.pk[..]].concat());
        put(&mut private, b"comment");
        let mut bytes = MAGIC.to_vec();
        put(&mut bytes, cipher.as_bytes());
        put(
            &mut bytes,
            if cipher == "none" { b"none" } else { b"bcrypt" },
        );
        put(&mut bytes, b"");
        bytes.extend(1u32.to_be_bytes());
        put(&mut bytes, &key);
        put(&mut bytes, &private);
        format!("{PEM_BEGIN}\n{}\n{PEM_END}\n", crate::b64(&bytes))
    }

    #[test]
    fn a_key_reads_back_and_every_flaw_is_named() {
        let key = read_ed25519(&file([7; 32], "none", (1, 1), None)).unwrap();
        assert_eq!(key.seed, [7; 32]);
        assert_eq!(key.public, Ed25519Key::from_seed([7; 32]).public);
        let wire = [
            &[0, 0, 0, 11][..],
            b"ssh-ed25519",
            &[0, 0, 0, 32],
            &key.public,
        ]
        .concat();
        assert_eq!(
            key.public_line(),
            format!("ssh-ed25519 {}", crate::b64(&wire))
        );
        assert!(!format!("{key:?}").contains(&hex::encode([7; 32])));
        let flaw = |text: String| read_ed25519(&text).unwrap_err();
        assert!(flaw(file([7; 32], "aes256-ctr", (1, 1), None)).contains("passphrase"));
        assert!(flaw(file([7; 32], "none", (1, 2), None)).contains("damaged"));
        assert!(flaw(file([7; 32], "none", (1, 1), Some([9; 32]))).contains("belong together"));
        assert!(flaw(format!("{PEM_BEGIN}\n!!!\n{PEM_END}\n")).contains("base64"));
        assert!(flaw(String::new()).contains("openssh-key-v1"));
    }
}

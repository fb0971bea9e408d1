//! Secrets sealed to one host.
//!
//! A secret of a host (a password hash, a debconf password, a private key) leaves the build
//! only as an [age] file whose one recipient is that host's identity, an `ssh-ed25519` key, the
//! way agenix and sops-nix seal secrets to a machine's SSH host key: `age -d -i
//! /etc/ssh/ssh_host_ed25519_key` opens what [`SealKey::seal`] writes, and [`open`] opens what
//! `age -R host.pub` writes.
//!
//! Two things differ from `age -e`, both so that the same inputs give the same bytes (a
//! rebuild rewrites nothing, and checked-in snapshots do not drift):
//!
//! - A secret is named by a keyed digest ([`SealKey::digest`], HMAC-SHA256 under a key only
//!   the build has) instead of a hash of its content: the name tells a reader whether two
//!   secrets are equal and nothing else, where an unkeyed sha256 of a short password confirms
//!   a guess.
//! - The randomness age draws (the file key, the ephemeral key, the payload nonce) is derived
//!   from that same key, the recipient and the digest. Equal secrets sealed to one host give
//!   equal files, which the digest says anyway; anything else stays as hidden as with fresh
//!   randomness, as long as the key is secret.
//!
//! The crate is small on purpose: bell-run links it to open its own secrets, and it needs
//! nothing but X25519, HKDF, HMAC and ChaCha20-Poly1305.
//!
//! [age]: https://age-encryption.org/v1

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// A byte index into a string read from a host, a store or a mirror panics on a multibyte
// character: strings are cut with `get` or at a found character boundary.
#![cfg_attr(not(test), deny(clippy::string_slice))]

pub mod at_rest;
pub mod identity;
pub mod openssh;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use ed25519_compact::x25519;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::fmt;

const INTRO: &str = "age-encryption.org/v1";
const SSH_ED25519: &str = "ssh-ed25519";
const SSH_ED25519_LABEL: &[u8] = b"age-encryption.org/v1/ssh-ed25519";
pub(crate) const FILE_KEY_BYTES: usize = 16;
const CHUNK: usize = 64 * 1024;
const TAG_BYTES: usize = 16;

/// The largest secret bell seals or opens: a key or a configuration file, not a disk image.
pub const MAX_SECRET_BYTES: usize = 16 << 20;

/// Why a sealed file could not be opened (or a key not used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// Not an age file, or one this crate does not read.
    Malformed(&'static str),
    /// No `ssh-ed25519` stanza of the file is for this key.
    NotForThisKey,
    /// A stanza for this key, a header MAC or a payload chunk did not authenticate: the file
    /// was changed, or sealed with another key under this one's tag.
    Forged(&'static str),
    /// The public key is not a valid Ed25519 point.
    BadKey,
    /// More than [`MAX_SECRET_BYTES`].
    TooLarge,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::Malformed(why) => write!(f, "not an age file bell can read: {why}"),
            SealError::NotForThisKey => write!(f, "it is not sealed to this host's identity"),
            SealError::Forged(why) => write!(f, "it does not authenticate: {why}"),
            SealError::BadKey => write!(f, "the key is not a valid ssh-ed25519 key"),
            SealError::TooLarge => {
                write!(
                    f,
                    "it is larger than the {MAX_SECRET_BYTES} bytes a secret may be"
                )
            }
        }
    }
}

impl std::error::Error for SealError {}

/// Who a secret is sealed to: a host's `ssh-ed25519` public key.
#[derive(Clone, PartialEq, Eq)]
pub struct Recipient {
    pub(crate) x25519: x25519::PublicKey,
    /// The key in SSH's wire format (`string "ssh-ed25519" string KEY`), which age hashes
    /// into the stanza's tag and the tweak.
    pub(crate) wire: Vec<u8>,
}

impl fmt::Debug for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipient({})", b64(&self.wire))
    }
}

impl Recipient {
    /// The recipient for an Ed25519 public key (the 32 bytes of an `ssh-ed25519` key).
    pub fn from_ed25519(key: [u8; 32]) -> Result<Recipient, SealError> {
        let ed = ed25519_compact::PublicKey::new(key);
        let x25519 = x25519::PublicKey::from_ed25519(&ed).map_err(|_| SealError::BadKey)?;
        Ok(Recipient {
            x25519,
            wire: ssh_wire(&key),
        })
    }
}

/// What opens a host's secrets: its Ed25519 identity (the SSH host key or bell's own).
pub struct Identity {
    x25519: x25519::SecretKey,
    pub(crate) public: x25519::PublicKey,
    pub(crate) wire: Vec<u8>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({}, secret withheld)", b64(&self.wire))
    }
}

impl Identity {
    /// The identity of an Ed25519 seed (the first half of OpenSSH's 64-byte private key).
    pub fn from_seed(seed: [u8; 32]) -> Result<Identity, SealError> {
        let pair = ed25519_compact::KeyPair::from_seed(ed25519_compact::Seed::new(seed));
        let x25519 = x25519::SecretKey::from_ed25519(&pair.sk).map_err(|_| SealError::BadKey)?;
        let public = x25519.recover_public_key().map_err(|_| SealError::BadKey)?;
        Ok(Identity {
            x25519,
            public,
            wire: ssh_wire(pair.pk.as_ref()),
        })
    }
}

/// Fills `buf` from the system's random generator (`/dev/urandom`): every key, nonce,
/// password and lease id bell makes comes from here.
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf))
}

/// The build's secret: it names secrets ([`SealKey::digest`]) and makes sealing
/// deterministic. Derived from a key only the build has (the release signing key), so that a
/// reader of what the build wrote can neither confirm a guessed secret nor tell two builds'
/// secrets apart except by equality.
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey(withheld)")
    }
}

impl SealKey {
    /// A key derived from secret material (`context` keeps keys for different uses of the same
    /// material apart).
    pub fn derive(material: &[u8], context: &str) -> SealKey {
        let hk = Hkdf::<Sha256>::new(Some(b"bell seal key v1"), material);
        let mut key = [0u8; 32];
        // 32 bytes are always within HKDF-SHA256's output limit.
        let _ = hk.expand(context.as_bytes(), &mut key);
        SealKey(key)
    }

    /// A key no one keeps, for commands that render without writing (`bellc plan`): what
    /// they compute from it is neither shown as a secret's name nor comparable to a build's.
    pub fn random() -> SealKey {
        use std::hash::{BuildHasher, Hasher};
        let mut material = [0u8; 32];
        if random_bytes(&mut material).is_err() {
            // std seeds every RandomState from the system's generator.
            for chunk in material.chunks_mut(8) {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u8(0);
                chunk.copy_from_slice(&h.finish().to_le_bytes());
            }
        }
        SealKey::derive(&material, "random")
    }

    /// The keyed digest that names a secret: HMAC-SHA256 of its content, in lowercase hex.
    pub fn digest(&self, secret: &[u8]) -> String {
        let mut mac = self.mac(b"digest");
        mac.update(secret);
        hex::encode(mac.finalize().into_bytes())
    }

    /// `secret` as an age file for `to`, the same bytes every time for the same secret,
    /// recipient and key.
    pub fn seal(&self, secret: &[u8], to: &Recipient) -> Result<Vec<u8>, SealError> {
        if secret.len() > MAX_SECRET_BYTES {
            return Err(SealError::TooLarge);
        }
        // Everything age would draw at random, from one seed bound to this secret and this
        // recipient.
        let mut seed = self.mac(b"randomness");
        seed.update(&(to.wire.len() as u64).to_be_bytes());
        seed.update(&to.wire);
        seed.update(self.digest(secret).as_bytes());
        let seed = seed.finalize().into_bytes();
        let draw = |label: &[u8], out: &mut [u8]| {
            let hk = Hkdf::<Sha256>::from_prk(&seed).map_err(|_| SealError::BadKey)?;
            hk.expand(label, out).map_err(|_| SealError::BadKey)
        };
        let mut file_key = [0u8; FILE_KEY_BYTES];
        let mut ephemeral = [0u8; 32];
        let mut nonce = [0u8; 16];
        draw(b"file key", &mut file_key)?;
        draw(b"ephemeral", &mut ephemeral)?;
        draw(b"payload nonce", &mut nonce)?;

        let esk = x25519::SecretKey::new(ephemeral);
        let epk = esk.recover_public_key().map_err(|_| SealError::BadKey)?;
        let shared = to.x25519.dh(&esk).map_err(|_| SealError::BadKey)?;
        let shared = tweaked(&to.wire, shared.as_ref())?;
        let wrap_key = stanza_key(&epk, &to.x25519, &shared, SSH_ED25519_LABEL);
        let body = aead(&wrap_key)
            .encrypt(&Nonce::default(), file_key.as_slice())
            .map_err(|_| SealError::BadKey)?;

        let stanza = Stanza {
            args: vec![
                SSH_ED25519.into(),
                b64(&ssh_tag(&to.wire)),
                b64(epk.as_ref()),
            ],
            body,
        };
        write_file(&file_key, &[stanza], &nonce, secret)
    }

    fn mac(&self, label: &[u8]) -> Hmac<Sha256> {
        // HMAC takes keys of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(label);
        mac.update(&[0]);
        mac
    }
}

/// Opens an age file sealed to `identity`: the secret, or why not.
pub fn open(file: &[u8], identity: &Identity) -> Result<Vec<u8>, SealError> {
    open_with(file, &[identity as &dyn Unwrap])
}

/// What can take a file key out of a stanza meant for it.
pub(crate) trait Unwrap {
    /// `None` when `stanza` is not for this key; the file key, or why it did not unwrap.
    fn unwrap_key(&self, stanza: &Stanza) -> Option<Result<Vec<u8>, SealError>>;
}

impl Unwrap for Identity {
    fn unwrap_key(&self, stanza: &Stanza) -> Option<Result<Vec<u8>, SealError>> {
        if stanza.args.first().map(String::as_str) != Some(SSH_ED25519) {
            return None;
        }
        let [_, stanza_tag, epk] = stanza.args.as_slice() else {
            return Some(Err(SealError::Malformed(
                "an ssh-ed25519 stanza has not two arguments",
            )));
        };
        if unb64(stanza_tag).as_deref() != Some(ssh_tag(&self.wire).as_slice()) {
            return None;
        }
        Some((|| {
            let epk = unb64(epk)
                .filter(|k| k.len() == 32)
                .ok_or(SealError::Malformed("an ephemeral key is not 32 bytes"))?;
            let epk = x25519::PublicKey::from_slice(&epk).map_err(|_| SealError::BadKey)?;
            let shared = epk
                .dh(&self.x25519)
                .map_err(|_| SealError::Forged("a low-order ephemeral key"))?;
            let shared = tweaked(&self.wire, shared.as_ref())?;
            let wrap_key = stanza_key(&epk, &self.public, &shared, SSH_ED25519_LABEL);
            unwrap_body(&wrap_key, &stanza.body)
        })())
    }
}

/// The file key of a stanza's body under `wrap_key`.
pub(crate) fn unwrap_body(wrap_key: &[u8; 32], body: &[u8]) -> Result<Vec<u8>, SealError> {
    if body.len() != FILE_KEY_BYTES + TAG_BYTES {
        return Err(SealError::Malformed("a wrapped file key is not 32 bytes"));
    }
    aead(wrap_key)
        .decrypt(&Nonce::default(), body)
        .map_err(|_| SealError::Forged("the file key does not unwrap"))
}

/// Opens an age file with the first of `keys` one of its stanzas is for.
pub(crate) fn open_with(file: &[u8], keys: &[&dyn Unwrap]) -> Result<Vec<u8>, SealError> {
    open_parts(file, keys).map(|(_, secret, _)| secret)
}

/// [`open_with`], with the file key and the header besides the secret.
pub(crate) fn open_parts(
    file: &[u8],
    keys: &[&dyn Unwrap],
) -> Result<(Vec<u8>, Vec<u8>, Header), SealError> {
    let header = Header::parse(file)?;
    let mut refused = None;
    let mut file_key = None;
    'stanzas: for stanza in &header.stanzas {
        for key in keys {
            match key.unwrap_key(stanza) {
                None => {}
                Some(Ok(unwrapped)) => {
                    file_key = Some(unwrapped);
                    break 'stanzas;
                }
                Some(Err(e)) => refused = Some(e),
            }
        }
    }
    let file_key = match (file_key, refused) {
        (Some(key), _) => key,
        (None, Some(e)) => return Err(e),
        (None, None) => return Err(SealError::NotForThisKey),
    };
    let mac = header_mac(&file_key, &file[..header.mac_from])?;
    if unb64(&header.mac).as_deref() != Some(mac.as_slice()) {
        return Err(SealError::Forged("the header's MAC does not match"));
    }

    let payload = &file[header.len..];
    let (nonce, mut rest) = payload.split_at_checked(16).ok_or(SealError::Malformed(
        "the payload is shorter than its nonce",
    ))?;
    let cipher = aead(&payload_key(&file_key, nonce));
    let mut secret = Vec::new();
    let mut counter = 0u64;
    loop {
        let take = rest.len().min(CHUNK + TAG_BYTES);
        let (chunk, after) = rest.split_at(take);
        let last = after.is_empty();
        let plain = cipher
            .decrypt(&chunk_nonce(counter, last), chunk)
            .map_err(|_| SealError::Forged("a payload chunk does not authenticate"))?;
        if plain.is_empty() && !(last && counter == 0) {
            return Err(SealError::Malformed(
                "an empty chunk that is not the only one",
            ));
        }
        secret.extend_from_slice(&plain);
        if secret.len() > MAX_SECRET_BYTES {
            return Err(SealError::TooLarge);
        }
        if last {
            return Ok((file_key, secret, header));
        }
        rest = after;
        counter += 1;
    }
}

/// An age file of `secret` under `file_key`, with `stanzas` (each a recipient's wrapping of
/// the key) and the payload nonce `nonce`.
pub(crate) fn write_file(
    file_key: &[u8; FILE_KEY_BYTES],
    stanzas: &[Stanza],
    nonce: &[u8; 16],
    secret: &[u8],
) -> Result<Vec<u8>, SealError> {
    if secret.len() > MAX_SECRET_BYTES {
        return Err(SealError::TooLarge);
    }
    let mut out = format!("{INTRO}\n").into_bytes();
    for stanza in stanzas {
        out.extend_from_slice(format!("-> {}\n", stanza.args.join(" ")).as_bytes());
        // Wrapped at 64 columns; a body whose last line is full ends with an empty one.
        let body = b64(&stanza.body);
        let mut lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        if lines.last().is_none_or(|l| l.len() == 64) {
            lines.push("");
        }
        for line in lines {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"---");
    let mac = header_mac(file_key, &out)?;
    out.extend_from_slice(format!(" {}\n", b64(&mac)).as_bytes());
    out.extend_from_slice(nonce);
    let cipher = aead(&payload_key(file_key, nonce));
    let mut chunks = secret.chunks(CHUNK).peekable();
    let mut counter = 0u64;
    if chunks.peek().is_none() {
        // An empty secret is one empty, final chunk.
        out.extend(seal_chunk(&cipher, counter, true, &[])?);
    }
    while let Some(chunk) = chunks.next() {
        out.extend(seal_chunk(
            &cipher,
            counter,
            chunks.peek().is_none(),
            chunk,
        )?);
        counter += 1;
    }
    Ok(out)
}

/// An age header, read strictly: what age writes and nothing else.
pub(crate) struct Header {
    pub(crate) stanzas: Vec<Stanza>,
    mac: String,
    /// Where the MAC's text begins: the MAC covers the header up to and including `---`.
    mac_from: usize,
    /// Where the payload begins.
    len: usize,
}

pub(crate) struct Stanza {
    pub(crate) args: Vec<String>,
    pub(crate) body: Vec<u8>,
}

impl Header {
    pub(crate) fn parse(file: &[u8]) -> Result<Header, SealError> {
        let mut at = 0;
        let mut line = || -> Result<&str, SealError> {
            let rest = &file[at..];
            let end = rest
                .iter()
                .take(4096)
                .position(|b| *b == b'\n')
                .ok_or(SealError::Malformed("the header ends too early"))?;
            let text = std::str::from_utf8(&rest[..end])
                .map_err(|_| SealError::Malformed("the header is not text"))?;
            at += end + 1;
            Ok(text)
        };
        if line()? != INTRO {
            return Err(SealError::Malformed(
                "it does not begin `age-encryption.org/v1`",
            ));
        }
        let mut stanzas = Vec::new();
        let mut pending = line()?;
        loop {
            if let Some(mac) = pending.strip_prefix("--- ") {
                let mac = mac.to_string();
                let len = at;
                let mac_from = len - 1 - mac.len() - 1;
                return Ok(Header {
                    stanzas,
                    mac,
                    mac_from,
                    len,
                });
            }
            let args = pending.strip_prefix("-> ").ok_or(SealError::Malformed(
                "a header line is neither a stanza nor the MAC",
            ))?;
            let args: Vec<String> = args.split(' ').map(str::to_string).collect();
            if args.iter().any(String::is_empty) {
                return Err(SealError::Malformed("a stanza has an empty argument"));
            }
            let mut body = Vec::new();
            loop {
                let text = line()?;
                if text.len() > 64 {
                    return Err(SealError::Malformed("a stanza body line is longer than 64"));
                }
                body.extend(
                    unb64(text).ok_or(SealError::Malformed("a stanza body is not base64"))?,
                );
                if text.len() < 64 {
                    break;
                }
            }
            stanzas.push(Stanza { args, body });
            if stanzas.len() > 64 {
                return Err(SealError::Malformed("more than 64 stanzas"));
            }
            pending = line()?;
        }
    }
}

/// age's ssh-ed25519 shared secret: the X25519 result multiplied by a tweak bound to the SSH
/// key, so that the stanza commits to the key's SSH encoding too.
pub(crate) fn tweaked(wire: &[u8], shared: &[u8]) -> Result<[u8; 32], SealError> {
    let mut tweak = [0u8; 32];
    Hkdf::<Sha256>::new(Some(wire), &[])
        .expand(SSH_ED25519_LABEL, &mut tweak)
        .map_err(|_| SealError::BadKey)?;
    let point = x25519::PublicKey::from_slice(shared).map_err(|_| SealError::BadKey)?;
    let out = point
        .dh(&x25519::SecretKey::new(tweak))
        .map_err(|_| SealError::Forged("a low-order shared secret"))?;
    Ok(*out)
}

/// The key that wraps the file key in a stanza: HKDF of the shared secret, salted with the
/// ephemeral and the recipient's X25519 keys, under the stanza type's label.
pub(crate) fn stanza_key(
    epk: &x25519::PublicKey,
    pk: &x25519::PublicKey,
    shared: &[u8; 32],
    label: &[u8],
) -> [u8; 32] {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(epk.as_ref());
    salt[32..].copy_from_slice(pk.as_ref());
    let mut key = [0u8; 32];
    let _ = Hkdf::<Sha256>::new(Some(&salt), shared).expand(label, &mut key);
    key
}

fn header_mac(file_key: &[u8], header: &[u8]) -> Result<[u8; 32], SealError> {
    let mut key = [0u8; 32];
    let _ = Hkdf::<Sha256>::new(Some(&[]), file_key).expand(b"header", &mut key);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).map_err(|_| SealError::BadKey)?;
    mac.update(header);
    Ok(mac.finalize().into_bytes().into())
}

fn payload_key(file_key: &[u8], nonce: &[u8]) -> [u8; 32] {
    let mut key = [0u8; 32];
    let _ = Hkdf::<Sha256>::new(Some(nonce), file_key).expand(b"payload", &mut key);
    key
}

pub(crate) fn aead(key: &[u8; 32]) -> ChaCha20Poly1305 {
    ChaCha20Poly1305::new(Key::from_slice(key))
}

fn chunk_nonce(counter: u64, last: bool) -> Nonce {
    let mut nonce = [0u8; 12];
    nonce[3..11].copy_from_slice(&counter.to_be_bytes());
    nonce[11] = u8::from(last);
    Nonce::from(nonce)
}

fn seal_chunk(
    cipher: &ChaCha20Poly1305,
    counter: u64,
    last: bool,
    chunk: &[u8],
) -> Result<Vec<u8>, SealError> {
    cipher
        .encrypt(&chunk_nonce(counter, last), chunk)
        .map_err(|_| SealError::TooLarge)
}

fn ssh_wire(key: &[u8]) -> Vec<u8> {
    let mut wire = Vec::with_capacity(51);
    for part in [SSH_ED25519.as_bytes(), key] {
        wire.extend_from_slice(&(part.len() as u32).to_be_bytes());
        wire.extend_from_slice(part);
    }
    wire
}

pub(crate) fn ssh_tag(wire: &[u8]) -> [u8; 4] {
    let digest = Sha256::digest(wire);
    [digest[0], digest[1], digest[2], digest[3]]
}

/// Standard base64 without padding, as age writes it.
pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
}

/// Standard base64 without padding, canonical only (age rejects any other spelling of the
/// same bytes, so that a header has one encoding).
pub(crate) fn unb64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(text)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(n: u8) -> (Identity, Recipient) {
        let seed = [n; 32];
        let pk = ed25519_compact::KeyPair::from_seed(ed25519_compact::Seed::new(seed)).pk;
        (
            Identity::from_seed(seed).unwrap(),
            Recipient::from_ed25519(*pk).unwrap(),
        )
    }

    #[test]
    fn what_is_sealed_opens_with_its_identity_only() {
        let key = SealKey::derive(b"test", "seal");
        let (a, to_a) = pair(1);
        let (b, _) = pair(2);
        for len in [
            0,
            1,
            47,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            2 * CHUNK,
            2 * CHUNK + 5,
        ] {
            let secret: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let sealed = key.seal(&secret, &to_a).unwrap();
            assert_eq!(open(&sealed, &a).unwrap(), secret, "{len} bytes");
            assert_eq!(open(&sealed, &b), Err(SealError::NotForThisKey));
        }
    }

    #[test]
    fn sealing_is_deterministic_and_depends_on_key_secret_and_recipient() {
        let key = SealKey::derive(b"test", "seal");
        let (_, to_a) = pair(1);
        let (_, to_b) = pair(2);
        let one = key.seal(b"hunter2!", &to_a).unwrap();
        assert_eq!(one, key.seal(b"hunter2!", &to_a).unwrap());
        assert_ne!(one, key.seal(b"hunter3!", &to_a).unwrap());
        assert_ne!(one, key.seal(b"hunter2!", &to_b).unwrap());
        let other = SealKey::derive(b"other", "seal");
        assert_ne!(one, other.seal(b"hunter2!", &to_a).unwrap());
        assert_ne!(key.digest(b"x"), other.digest(b"x"));
        assert_ne!(key.digest(b"x"), hex::encode(Sha256::digest(b"x")));
    }

    #[test]
    fn a_changed_byte_anywhere_is_refused() {
        let key = SealKey::derive(b"test", "seal");
        let (a, to_a) = pair(1);
        let sealed = key.seal(b"token=SUPERSECRET\n", &to_a).unwrap();
        for at in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[at] ^= 0x01;
            assert!(
                open(&bad, &a).is_err(),
                "byte {at} changed and it still opened"
            );
        }
        assert!(open(&sealed[..sealed.len() - 1], &a).is_err());
        let mut longer = sealed.clone();
        longer.push(0);
        assert!(open(&longer, &a).is_err());
    }

    #[test]
    fn base64_is_canonical() {
        for len in 0..10 {
            let bytes: Vec<u8> = (0..len).map(|i: u8| i.wrapping_mul(37)).collect();
            assert_eq!(unb64(&b64(&bytes)).unwrap(), bytes);
        }
        assert_eq!(unb64("AB"), None, "leftover bits set");
        assert_eq!(unb64("AA").unwrap(), vec![0]);
        assert_eq!(unb64("A"), None);
    }
}

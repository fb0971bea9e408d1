//! Signed releases: keys and signatures in minisign's format, so that anyone can check a
//! release with the standard tool (`minisign -V -p KEY.pub -m release.json`) and keys made by
//! `minisign -G` sign here.
//!
//! Signing gives a release what a host needs to refuse an old or frozen one: a `sequence` that
//! only grows from one signed release of a fleet to the next, and an optional `expires`. Both
//! are fields of release.json, so the signature covers them; the trusted comment repeats them
//! for whoever reads the output of `minisign -V`.

use super::releases::{self, RELEASE_FILE};
use super::EmitError;
use bell_bundle::Release;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The environment variable that holds the password of an encrypted secret key, for
/// `keygen --encrypt` and for signing. An environment variable, not a prompt: signing runs in
/// CI, where the secret store hands it over that way.
pub const PASSWORD_VAR: &str = "BELLC_KEY_PASSWORD";

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("{path} already exists; bellc never overwrites a key")]
    KeyExists { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the secret key {path}: {source}")]
    ReadKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a minisign secret key: {reason}")]
    NotAKey { path: PathBuf, reason: String },
    #[error("{path} is encrypted and {PASSWORD_VAR} is not set")]
    NeedsPassword { path: PathBuf },
    #[error("cannot decrypt {path}: {reason} (is {PASSWORD_VAR} the key's password?)")]
    Decrypt { path: PathBuf, reason: String },
    #[error("`--encrypt` needs the password in {PASSWORD_VAR}")]
    NoPassword,
    #[error("cannot read {path}: {reason}")]
    Release { path: PathBuf, reason: String },
    #[error("cannot sign: {0}")]
    Sign(String),
    #[error("{path} is signed: writing an unsigned release over it would make every host that trusts the key refuse it")]
    WouldUnsign { path: PathBuf },
    #[error(transparent)]
    Emit(#[from] EmitError),
}

/// What `keygen` wrote.
#[derive(Debug)]
pub struct KeyFiles {
    pub secret: PathBuf,
    pub public: PathBuf,
    pub key_id: String,
    pub encrypted: bool,
}

/// A secret key ready to sign, and the id minisign prints for it.
pub struct SigningKey {
    secret: minisign::SecretKey,
    public: minisign::PublicKey,
    pub key_id: String,
}

impl SigningKey {
    /// The key a signed build names and seals secrets with (`secrets="sealed"`), derived
    /// from the Ed25519 secret alone, so that the same key gives the same bundles however its
    /// file is encrypted.
    pub fn seal_key(&self) -> bell_seal::SealKey {
        // minisign's layout: algorithms (6), kdf salt (32), limits (16), key number (8), then
        // the 64-byte Ed25519 secret.
        let bytes = self.secret.to_bytes();
        let secret = bytes.get(62..126).unwrap_or(&bytes);
        bell_seal::SealKey::derive(secret, "bellc secrets, from the release signing key")
    }
}

/// minisign's key id: the key number as 16 upper-case hex digits.
fn key_id(keynum: &[u8]) -> String {
    let mut bytes = [0u8; 8];
    for (slot, byte) in bytes.iter_mut().zip(keynum) {
        *slot = *byte;
    }
    format!("{:016X}", u64::from_le_bytes(bytes))
}

/// Writes `NAME.key` (0600) and `NAME.pub`, refusing to replace either. The key is encrypted
/// with `password` when one is given (minisign's scrypt box), plain otherwise (for CI).
pub fn generate(name: &Path, password: Option<String>) -> Result<KeyFiles, SigningError> {
    let secret_path = with_suffix(name, ".key");
    let public_path = with_suffix(name, ".pub");
    for path in [&secret_path, &public_path] {
        if fs::symlink_metadata(path).is_ok() {
            return Err(SigningError::KeyExists { path: path.clone() });
        }
    }
    let encrypted = password.is_some();
    let pair = match password {
        Some(password) => minisign::KeyPair::generate_encrypted_keypair(Some(password)),
        None => minisign::KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| SigningError::Sign(e.to_string()))?;
    let id = key_id(pair.pk.keynum());
    let secret_text = pair
        .sk
        .to_box(Some(&format!("bellc secret key {id}")))
        .map_err(|e| SigningError::Sign(e.to_string()))?
        .into_string();
    let public_text = pair
        .pk
        .to_box()
        .map_err(|e| SigningError::Sign(e.to_string()))?
        .into_string();
    create_new(&secret_path, secret_text.as_bytes(), 0o600)?;
    if let Err(e) = create_new(&public_path, public_text.as_bytes(), 0o644) {
        // Half a key pair is no use; the secret half never existed anywhere else.
        let _ = fs::remove_file(&secret_path);
        return Err(e);
    }
    Ok(KeyFiles {
        secret: secret_path,
        public: public_path,
        key_id: id,
        encrypted,
    })
}

fn with_suffix(name: &Path, suffix: &str) -> PathBuf {
    let mut text = name.as_os_str().to_os_string();
    text.push(suffix);
    PathBuf::from(text)
}

/// Creates a file that must not exist yet, with its mode from the start (never a moment
/// readable by others); `O_EXCL` also refuses a link planted at its name.
fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SigningError> {
    let write_err = |source| SigningError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => SigningError::KeyExists {
                path: path.to_path_buf(),
            },
            _ => write_err(source),
        })?;
    file.write_all(bytes).map_err(write_err)?;
    file.sync_all().map_err(write_err)
}

/// Reads a minisign secret key: plain, or encrypted with the password in `password`.
pub fn load(path: &Path, password: Option<String>) -> Result<SigningKey, SigningError> {
    let text = fs::read_to_string(path).map_err(|source| SigningError::ReadKey {
        path: path.to_path_buf(),
        source,
    })?;
    let not_a_key = |reason: String| SigningError::NotAKey {
        path: path.to_path_buf(),
        reason,
    };
    if !text.starts_with("untrusted comment:") || text.lines().nth(1).is_none() {
        return Err(not_a_key(
            "expected an `untrusted comment:` line and a base64 key line".into(),
        ));
    }
    let text = with_checksum(&text).unwrap_or(text);
    let boxed = minisign::SecretKeyBox::from_string(&text).map_err(|e| not_a_key(e.to_string()))?;
    let secret = match minisign::SecretKey::from_unencrypted_box(boxed.clone()) {
        Ok(secret) => secret,
        Err(plain_error) => {
            if !plain_error.to_string().contains("encrypted") {
                return Err(not_a_key(plain_error.to_string()));
            }
            let password = password.ok_or_else(|| SigningError::NeedsPassword {
                path: path.to_path_buf(),
            })?;
            minisign::SecretKey::from_box(boxed, Some(password)).map_err(|e| {
                SigningError::Decrypt {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                }
            })?
        }
    };
    let public =
        minisign::PublicKey::from_secret_key(&secret).map_err(|e| not_a_key(e.to_string()))?;
    Ok(SigningKey {
        key_id: key_id(secret.keynum()),
        secret,
        public,
    })
}

/// The key id (as minisign prints it) of the key that made a `.minisig` signature; `None` for
/// text that is not one. Says who signed, not that the signature holds: hosts check that.
pub fn signer(minisig: &str) -> Option<String> {
    let signature = minisign::SignatureBox::from_string(minisig).ok()?;
    Some(key_id(signature.keynum()))
}

impl SigningKey {
    /// Whether `signature` (a `.minisig` text) is this key's signature of `bytes`: how the
    /// controller checks what it reads back from OUT before it builds on it.
    pub fn verify(&self, bytes: &[u8], signature: &str) -> Result<(), String> {
        let signature = minisign::SignatureBox::from_string(signature)
            .map_err(|e| format!("not a minisign signature ({e})"))?;
        let signer = key_id(signature.keynum());
        if signer != self.key_id {
            return Err(format!(
                "signed by key {signer}, not by the signing key {}",
                self.key_id
            ));
        }
        minisign::verify(
            &self.public,
            &signature,
            std::io::Cursor::new(bytes),
            true,
            false,
            false,
        )
        .map_err(|e| format!("does not match its signature by key {signer} ({e})"))
    }

    /// A minisign signature of `bytes` with `trusted` as its trusted comment.
    pub fn sign(&self, bytes: &[u8], trusted: &str) -> Result<String, SigningError> {
        let untrusted = format!("signature from bellc secret key {}", self.key_id);
        minisign::sign(
            Some(&self.public),
            &self.secret,
            bytes,
            Some(trusted),
            Some(&untrusted),
        )
        .map(|sig| sig.into_string())
        .map_err(|e| SigningError::Sign(e.to_string()))
    }
}

/// Where the parts of a decoded minisign secret key lie: algorithm ids, scrypt salt and
/// limits, then the key number, the Ed25519 key and its checksum.
const KDF_ALG: std::ops::Range<usize> = 2..4;
const KEY_BODY: std::ops::Range<usize> = 54..126;
const CHECKSUM: std::ops::Range<usize> = 126..158;

/// `minisign -G -W` (0.10 and 0.11, Debian's) writes a plain key with its checksum left at
/// zero, and checks it only for encrypted keys; the minisign crate checks it always. For such a
/// key the checksum is filled in (Blake2b-256 over the algorithm, key number and key), so the
/// key reads the same here as in minisign. Any other key is returned as it was (None).
fn with_checksum(text: &str) -> Option<String> {
    use blake2::digest::{Update, VariableOutput};
    use ct_codecs::{Base64, Decoder, Encoder};
    let mut lines = text.lines();
    let comment = lines.next()?;
    let encoded = lines.next()?.trim();
    let mut bytes = Base64::decode_to_vec(encoded, None).ok()?;
    let plain = bytes.len() == CHECKSUM.end && bytes[KDF_ALG] == [0, 0];
    if !plain || bytes[CHECKSUM].iter().any(|b| *b != 0) {
        return None;
    }
    let mut hasher = blake2::Blake2bVar::new(CHECKSUM.len()).ok()?;
    hasher.update(&bytes[..2]);
    hasher.update(&bytes[KEY_BODY]);
    hasher.finalize_variable(&mut bytes[CHECKSUM]).ok()?;
    Some(format!(
        "{comment}\n{}\n",
        Base64::encode_to_string(&bytes).ok()?
    ))
}

/// What signing did.
#[derive(Debug)]
pub struct Signed {
    pub version: String,
    pub sequence: u64,
    pub expires: Option<u64>,
}

/// Signs `OUT/release.json`: gives it the next sequence number (the signing time in
/// milliseconds, or one more than the newest release OUT keeps, whichever is larger, so that
/// CI runs from clean checkouts still count upwards, and two builds in one second differ) and
/// `expires` seconds of validity when asked; writes `release.json.minisig` and keeps both
/// under `releases/`. `now_ms` is the time in unix milliseconds.
pub fn sign_release(
    out: &Path,
    key: &SigningKey,
    expires_in: Option<u64>,
    now_ms: u64,
) -> Result<Signed, SigningError> {
    let path = out.join(RELEASE_FILE);
    let text = fs::read_to_string(&path).map_err(|e| SigningError::Release {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let release: Release = serde_json::from_str(&text).map_err(|e| SigningError::Release {
        path: path.clone(),
        reason: format!("not a release: {e}"),
    })?;
    keep_release(out, &release, Some(key), expires_in, now_ms, true)
}

/// Writes `release` into OUT as `releases/<version>.json`, signed with `key` as
/// [`sign_release`] signs (the next sequence, `expires_in` seconds of validity), or unsigned
/// without a key; with `current`, also as `release.json`, the newest. How the rollout
/// controller gives out the releases of its waves, each a newer release than the last.
pub fn keep_release(
    out: &Path,
    release: &Release,
    key: Option<&SigningKey>,
    expires_in: Option<u64>,
    now_ms: u64,
    current: bool,
) -> Result<Signed, SigningError> {
    let now = now_ms / 1000;
    let newest_kept = releases::list(out)?
        .iter()
        .filter_map(|r| r.sequence)
        .chain(release.sequence)
        .max()
        .unwrap_or(0);
    let sequence = now_ms.max(newest_kept + 1);
    let release = match key {
        Some(_) => Release {
            sequence: Some(sequence),
            expires: expires_in.map(|secs| now.saturating_add(secs)),
            ..release.unsigned()
        },
        None => release.unsigned(),
    };
    let json = release.to_json();
    let signature = match key {
        Some(key) => Some(sign_bytes(key, json.as_bytes(), &release, now)?),
        None => None,
    };
    let dir = out.join(bell_bundle::RELEASES_DIR);
    let kept = dir.join(format!("{}.json", release.version));
    let mut paths = vec![kept];
    if current {
        paths.push(out.join(RELEASE_FILE));
    }
    // A signed release is never replaced by an unsigned copy: hosts that trust the key would
    // refuse every pull of it. Checked for every path before any is written.
    if signature.is_none() {
        if let Some(path) = paths.iter().find(|p| releases::signature_path(p).exists()) {
            return Err(SigningError::WouldUnsign { path: path.clone() });
        }
    }
    fs::create_dir_all(&dir).map_err(|e| SigningError::Write {
        path: dir.clone(),
        source: e,
    })?;
    for path in paths {
        // The signature is written first: a reader that sees the new file finds its
        // signature already there (one that sees the old file with the new signature refuses
        // it and tries again on its next run).
        let signature_path = releases::signature_path(&path);
        match &signature {
            Some(sig) => releases::write_atomic(&signature_path, sig.as_bytes())?,
            None => super::files::remove_if_present(&signature_path)?,
        }
        releases::write_atomic(&path, json.as_bytes())?;
    }
    Ok(Signed {
        version: release.version,
        sequence: release.sequence.unwrap_or(0),
        expires: release.expires,
    })
}

/// Whether OUT's releases are signed: its release.json or a release it keeps.
pub fn releases_are_signed(out: &Path) -> bool {
    releases::signature_path(&out.join(RELEASE_FILE)).exists()
        || releases::list(out).is_ok_and(|kept| kept.iter().any(|r| r.signed))
}

/// A minisign signature of `bytes`, with the release's identity in the trusted comment.
fn sign_bytes(
    key: &SigningKey,
    bytes: &[u8],
    release: &Release,
    now: u64,
) -> Result<String, SigningError> {
    let mut trusted = format!(
        "timestamp:{now}\tfile:{RELEASE_FILE}\tfleet:{}\tversion:{}\tsequence:{}",
        release.fleet,
        release.version,
        release.sequence.unwrap_or(0)
    );
    if let Some(expires) = release.expires {
        trusted.push_str(&format!("\texpires:{expires}"));
    }
    key.sign(bytes, &trusted)
}

/// Parses a span for `--expires`: a number with `s`, `m`, `h` or `d` (`30d`, `12h`).
pub fn parse_span(text: &str) -> Result<u64, String> {
    let wrong = || format!("`{text}` is not a span; expected a number and s, m, h or d, as `30d`");
    let unit = text.chars().last().ok_or_else(wrong)?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return Err(wrong()),
    };
    let count: u64 = text[..text.len() - 1].parse().map_err(|_| wrong())?;
    if count == 0 {
        return Err(format!(
            "`{text}`: a release that expires at once is of no use"
        ));
    }
    count.checked_mul(scale).ok_or_else(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse() {
        assert_eq!(parse_span("30d"), Ok(30 * 86400));
        assert_eq!(parse_span("12h"), Ok(12 * 3600));
        for bad in ["", "d", "30", "3x", "-1d", "0d", "99999999999999999999d"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_ids_read_like_minisigns() {
        assert_eq!(key_id(&[1, 0, 0, 0, 0, 0, 0, 0xAB]), "AB00000000000001");
    }
}

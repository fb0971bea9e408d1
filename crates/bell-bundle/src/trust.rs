//! The public keys a release is checked with: minisign's `.pub` format, several keys one after
//! another (for rotation: trust the new key beside the old one, sign with the new, drop the
//! old). One reading for every reader of a release: `bell-run` on a host (which also refuses a
//! trust file others could write) and `bellc status|serve|lock status --trust`.

use base64::Engine as _;
use std::path::{Path, PathBuf};

pub struct TrustedKeys {
    pub file: PathBuf,
    keys: Vec<(String, minisign_verify::PublicKey)>,
}

impl TrustedKeys {
    /// The keys in `text`, the content of the trust file `file` (named in messages).
    pub fn parse(text: &str, file: &Path) -> Result<TrustedKeys, String> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("untrusted comment:") || line.starts_with('#') {
                continue;
            }
            let key = minisign_verify::PublicKey::from_base64(line).map_err(|e| {
                format!(
                    "{}:{}: not a minisign public key ({e})",
                    file.display(),
                    number + 1
                )
            })?;
            keys.push((key_id(line).unwrap_or_default(), key));
        }
        if keys.is_empty() {
            return Err(format!("the trust file {} holds no key", file.display()));
        }
        Ok(TrustedKeys {
            file: file.to_path_buf(),
            keys,
        })
    }

    /// The id of the trusted key that made `signature` (a `.minisig` text) over `bytes`.
    pub fn verify(&self, bytes: &[u8], signature: &str) -> Result<String, String> {
        let decoded = minisign_verify::Signature::decode(signature)
            .map_err(|e| format!("the release's signature is not a minisign signature: {e}"))?;
        let signer = signature
            .lines()
            .nth(1)
            .and_then(key_id)
            .unwrap_or_default();
        for (id, key) in &self.keys {
            if *id != signer {
                continue;
            }
            return match key.verify(bytes, &decoded, false) {
                Ok(()) => Ok(id.clone()),
                Err(e) => Err(format!(
                    "the release does not match its signature by key {id} ({e}): it was changed \
                     after signing"
                )),
            };
        }
        Err(format!(
            "the release is signed by key {signer}, which {} does not trust",
            self.file.display()
        ))
    }
}

/// minisign's key id from the base64 line of a key or signature: bytes 2..10, little-endian,
/// printed as 16 upper-case hex digits.
fn key_id(line: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(line.trim())
        .ok()?;
    let number = bytes.get(2..10)?;
    let mut le = [0u8; 8];
    le.copy_from_slice(number);
    Some(format!("{:016X}", u64::from_le_bytes(le)))
}

//! What a reader takes a release's word for. `status`, `serve` and `lock status` read a release
//! to know which bundle each host should run and which identity its reports are checked
//! against: a release whose owner is only the mirror that serves it (a URL OUT) could drop an
//! unhealthy host or name another identity. With `--trust KEY` (the minisign public key the
//! hosts trust), a reader takes a release only when that key signed it, as a host does (TUF:
//! every reader verifies the metadata it acts on, with the clients' keys).

use bell_bundle::Release;
use std::path::{Path, PathBuf};

/// The public keys of a trust file: minisign's `.pub` format, several one after another (a key
/// being rotated in beside the old one), as `bell-run --trust` reads them.
pub struct TrustedKeys {
    file: PathBuf,
    keys: Vec<(String, minisign::PublicKey)>,
}

impl TrustedKeys {
    pub fn load(file: &Path) -> Result<TrustedKeys, String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the trust file {}: {e}", file.display()))?;
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("untrusted comment:") || line.starts_with('#') {
                continue;
            }
            let key = minisign::PublicKey::from_base64(line).map_err(|e| {
                format!(
                    "{}:{}: not a minisign public key ({e})",
                    file.display(),
                    number + 1
                )
            })?;
            keys.push((super::signing::key_id(key.keynum()), key));
        }
        if keys.is_empty() {
            return Err(format!("the trust file {} holds no key", file.display()));
        }
        Ok(TrustedKeys {
            file: file.to_path_buf(),
            keys,
        })
    }

    /// The id of the trusted key whose signature (a `.minisig` text) `bytes` carry.
    pub fn verify(&self, bytes: &[u8], minisig: &str) -> Result<String, String> {
        let signature = minisign::SignatureBox::from_string(minisig)
            .map_err(|e| format!("its signature is not a minisign signature ({e})"))?;
        let signer = super::signing::key_id(signature.keynum());
        let Some((id, key)) = self.keys.iter().find(|(id, _)| *id == signer) else {
            return Err(format!(
                "it is signed by key {signer}, which {} does not hold",
                self.file.display()
            ));
        };
        minisign::verify(
            key,
            &signature,
            std::io::Cursor::new(bytes),
            true,
            false,
            false,
        )
        .map(|()| id.clone())
        .map_err(|_| {
            format!("it does not match its signature by key {id}: it was changed after signing")
        })
    }
}

/// The release `read` gives (`release.json` of a directory or URL OUT, named `what` in
/// messages), when `keys` verify its signature: parsed from the very bytes that were verified.
pub fn verified_release(
    read: impl Fn(&str) -> Result<Option<Vec<u8>>, String>,
    what: &str,
    keys: &TrustedKeys,
) -> Result<Release, String> {
    let refused = |why: String| format!("{what}/{}: refused: {why}", bell_bundle::RELEASE_FILE);
    let bytes = read(bell_bundle::RELEASE_FILE)?
        .ok_or_else(|| refused("there is no release there".into()))?;
    let signature = read(&format!("{}.minisig", bell_bundle::RELEASE_FILE))?.ok_or_else(|| {
        refused(format!(
            "it is not signed (no {}.minisig beside it); build with `--sign-key`, or leave \
             `--trust` out to read it unverified",
            bell_bundle::RELEASE_FILE
        ))
    })?;
    keys.verify(&bytes, &String::from_utf8_lossy(&signature))
        .map_err(refused)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| refused("it is not UTF-8".into()))?;
    serde_json::from_str(text).map_err(|e| refused(format!("it is not a release ({e})")))
}

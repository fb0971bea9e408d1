//! What a reader takes a release's word for. `status`, `serve` and `lock status` read a release
//! to know which bundle each host should run and which identity its reports are checked
//! against: a release whose owner is only the mirror that serves it (a URL OUT) could drop an
//! unhealthy host or name another identity. With `--trust KEY` (the minisign public key the
//! hosts trust), a reader takes a release only when that key signed it, as a host does (TUF:
//! every reader verifies the metadata it acts on, with the clients' keys).

use bell_bundle::Release;
use std::path::Path;

pub use bell_bundle::trust::TrustedKeys;

/// The keys of the trust file at `file`, as `bell-run --trust` reads them.
pub fn load(file: &Path) -> Result<TrustedKeys, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the trust file {}: {e}", file.display()))?;
    TrustedKeys::parse(&text, file)
}

/// The release `read` gives (`release.json` of a directory or URL OUT, named `what` in
/// messages), when `keys` verify its signature: parsed from the very bytes that were verified.
pub fn verified_release(
    read: impl Fn(&str) -> Result<Option<Vec<u8>>, String>,
    what: &str,
    keys: &TrustedKeys,
) -> Result<Release, String> {
    verified_release_file(read, what, keys, bell_bundle::RELEASE_FILE)
}

/// [`verified_release`] of the release at `file` (`releases/VERSION.json`, a wave's).
pub fn verified_release_file(
    read: impl Fn(&str) -> Result<Option<Vec<u8>>, String>,
    what: &str,
    keys: &TrustedKeys,
    file: &str,
) -> Result<Release, String> {
    let refused = |why: String| format!("{what}/{file}: refused: {why}");
    let bytes = read(file)?.ok_or_else(|| refused("there is no release there".into()))?;
    let signature = read(&format!("{file}.minisig"))?.ok_or_else(|| {
        refused(format!(
            "it is not signed (no {file}.minisig beside it); build with `--sign-key`, or leave \
             `--trust` out to read it unverified"
        ))
    })?;
    keys.verify(&bytes, &String::from_utf8_lossy(&signature))
        .map_err(refused)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| refused("it is not UTF-8".into()))?;
    serde_json::from_str(text).map_err(|e| refused(format!("it is not a release ({e})")))
}

/// Why a release read from `place` (a mirror's URL) is no verified one: what every reader
/// says of the rows it could not check, with the flag that makes it one.
pub fn read_unverified(place: &str) -> String {
    format!(
        "the release was read from {place} unverified: the identities reports are checked \
         against are that server's word (give `--trust KEY`)"
    )
}

//! A bundle's sealed secrets (`secrets="sealed"`): fetched from beside the bundles as the host's
//! signed release entry names them, opened with the host's own key, and put into bell-run's
//! copy of the bundle, the only place besides the host's own files where they are plaintext.
//!
//! The chain from the signing key: the release (signed) names the host's index by its sha256;
//! the index names each sealed file by its sha256. A mirror or a store that serves any other
//! file, even one validly encrypted to this host by someone else, is refused before anything
//! changes. A host opens only files sealed to its own key, and its index says which key that is.

use crate::context::Refusal;
use crate::fetch::Source;
use bell_bundle::{Manifest, SealedIndex};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A bundle's sealed files, as fetched: what the host's index names, by keyed digest.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub index: SealedIndex,
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Fetches the sealed files `manifest` names for `host`, through the index whose sha256 the
/// release gives (`index_sha`), checking every hash on the way.
pub fn fetch(
    source: &Source,
    host: &str,
    index_sha: Option<&str>,
    manifest: &Manifest,
) -> Result<Sealed, Refusal> {
    let refused = |what: String| {
        Refusal::new(what).help(
            "nothing was changed; rebuild and publish the release with `bellc build`, or \
             check that the mirror serves OUT/secrets/ as the build wrote it",
        )
    };
    let Some(index_sha) = index_sha.filter(|sha| bell_bundle::is_bundle_id(sha)) else {
        return Err(refused(format!(
            "the bundle holds secrets sealed to host `{host}`, and the release names no \
             sealed index for it"
        )));
    };
    let rel = bell_bundle::sealed_index_path(host, index_sha);
    let bytes = source
        .get(&rel, crate::rootfs::MAX_RECORD_BYTES)
        .map_err(|e| refused(format!("cannot fetch {}: {e}", source.describe(&rel))))?;
    if bell_bundle::sha256_hex(&bytes) != index_sha {
        return Err(refused(format!(
            "{} is not the sealed index the release names: refused",
            source.describe(&rel)
        )));
    }
    let index = std::str::from_utf8(&bytes)
        .map_err(|_| "not UTF-8".to_string())
        .and_then(|text| SealedIndex::from_json(text).map_err(|e| e.to_string()))
        .map_err(|e| {
            refused(format!(
                "{} is not a sealed index: {e}",
                source.describe(&rel)
            ))
        })?;
    if index.host != host {
        return Err(refused(format!(
            "{} is host `{}`'s sealed index, not `{host}`'s: refused",
            source.describe(&rel),
            index.host
        )));
    }
    let mut files = BTreeMap::new();
    for digest in manifest.sealed().into_values() {
        if files.contains_key(&digest) {
            continue;
        }
        let Some(want) = index.secrets.get(&digest) else {
            return Err(refused(format!(
                "host `{host}`'s sealed index lacks the secret {} its bundle needs",
                bell_bundle::short(&digest, 12)
            )));
        };
        let rel = bell_bundle::sealed_file_path(host, &digest);
        let bytes = source
            .get(&rel, want.size)
            .map_err(|e| refused(format!("cannot fetch {}: {e}", source.describe(&rel))))?;
        if bell_bundle::sha256_hex(&bytes) != want.sha256 {
            return Err(refused(format!(
                "{} is not the sealed file the release names: refused",
                source.describe(&rel)
            )));
        }
        files.insert(digest, bytes);
    }
    Ok(Sealed { index, files })
}

/// For `bell-run apply OUT/hosts/NAME`: the sealed files beside the bundle in a build output,
/// through `OUT/release.json`'s entry for NAME. `None` when the bundle is not reached that way.
pub fn beside(bundle: &Path, manifest: &Manifest) -> Result<Option<Sealed>, Refusal> {
    let Some((out, host)) = out_and_host(bundle) else {
        return Ok(None);
    };
    let release_path = out.join(bell_bundle::RELEASE_FILE);
    let release: bell_bundle::Release =
        bell_bundle::read_regular(&release_path, crate::rootfs::MAX_RECORD_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| {
                Refusal::new(format!(
                    "the bundle holds sealed secrets, and {} cannot be read to find them",
                    release_path.display()
                ))
            })?;
    let entry = release.hosts.get(&host);
    fetch(
        &Source::Dir(out),
        &host,
        entry.and_then(|e| e.secrets.as_deref()),
        manifest,
    )
    .map(Some)
}

/// `OUT` and `NAME` of a bundle path `OUT/hosts/NAME`.
fn out_and_host(bundle: &Path) -> Option<(PathBuf, String)> {
    let host = bundle.file_name()?.to_str()?.to_string();
    let hosts = bundle.parent()?;
    if hosts.file_name()? != "hosts" {
        return None;
    }
    let out = hosts.parent()?;
    let out = if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out.to_path_buf()
    };
    Some((out, host))
}

/// Opens every sealed entry of `manifest` with the host's key: the plaintext by bundle path.
pub fn open(
    manifest: &Manifest,
    sealed: &Sealed,
    key: &bell_store::proof::SigningKey,
) -> Result<BTreeMap<String, Vec<u8>>, Refusal> {
    let ours = key.identity().to_openssh();
    let theirs = bell_store::proof::Identity::parse(&sealed.index.identity)
        .map(|id| id.to_openssh())
        .unwrap_or_default();
    if theirs != ours {
        return Err(Refusal::new(format!(
            "the secrets are sealed to {}, and this host's key is {ours}: refused",
            sealed.index.identity
        ))
        .help(
            "nothing was changed; give the host's `identity=` in the spec the key `bell-run \
             identity` prints, and build again",
        ));
    }
    let seed: [u8; 32] = key.openssh_private()[..32]
        .try_into()
        .map_err(|_| Refusal::new("the host key is not an Ed25519 key"))?;
    let identity = bell_seal::Identity::from_seed(seed).map_err(|e| Refusal::new(e.to_string()))?;
    let mut opened = BTreeMap::new();
    for (rel, digest) in manifest.sealed() {
        let file = sealed
            .files
            .get(&digest)
            .ok_or_else(|| Refusal::new(format!("the sealed secret for {rel} was not fetched")))?;
        let plain = bell_seal::open(file, &identity).map_err(|e| {
            Refusal::new(format!("cannot open the sealed secret for {rel}: {e}"))
                .help("nothing was changed")
        })?;
        opened.insert(rel, plain);
    }
    Ok(opened)
}

/// Writes the opened secrets into bell-run's copy of the bundle (0600, in a directory only
/// root reads), where its scripts run from and its files are switched from.
pub fn put(copy: &Path, opened: &BTreeMap<String, Vec<u8>>) -> Result<(), Refusal> {
    for (rel, plain) in opened {
        let path = copy.join(rel);
        if bell_bundle::read_regular(&path, plain.len() as u64).is_ok_and(|have| have == *plain) {
            continue;
        }
        crate::rootfs::write_atomic(&path, plain).map_err(|e| {
            Refusal::new(format!("cannot write {}: {e}", path.display()))
                .help("free space under the root and apply again; nothing was changed")
        })?;
    }
    Ok(())
}

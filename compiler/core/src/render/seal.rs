//! `secrets="sealed"`: a rendered bundle's secrets taken out of it.
//!
//! Every secret file and script (a password hash, a debconf password, a 0600 file, a private
//! key) keeps its entry in the manifest, named by a keyed digest instead of its sha256, and
//! its content moves to [`RenderedBundle::sealed`], from which the emit stage writes it sealed
//! to each host of the bundle. The bundle stays what hosts with equal configurations share,
//! and the same inputs and key give the same id; what the bundle no longer holds, a reader of
//! the mirror no longer learns, not even a hash to test guesses against.

use super::RenderedBundle;
use bell_seal::SealKey;
use std::collections::BTreeMap;

/// `bundle` with every secret sealed: the same bundle when it holds none.
pub fn seal_bundle(mut bundle: RenderedBundle, key: &SealKey) -> RenderedBundle {
    let secret = bundle.manifest.secret_paths();
    if secret.is_empty() {
        return bundle;
    }
    // Keyed digests by bundle path, each content taken out of the bundle once (a script may
    // be named by more than one entry).
    let mut digests: BTreeMap<String, String> = BTreeMap::new();
    for rel in &secret {
        let Some(content) = bundle.contents.remove(rel) else {
            continue;
        };
        bundle.sha256.remove(rel);
        let digest = key.digest(&content);
        bundle.sealed.insert(digest.clone(), content);
        digests.insert(rel.clone(), digest);
    }
    let manifest = &mut bundle.manifest;
    for file in &mut manifest.files {
        let rel = format!("{}{}", bell_bundle::ROOT_DIR, file.path);
        if let Some(digest) = digests.get(&rel) {
            file.sha256 = digest.clone();
            file.size = None;
            file.sealed = true;
        }
    }
    for script in manifest.scripts_mut() {
        if let Some(digest) = digests.get(&script.path) {
            script.sha256 = digest.clone();
            script.size = None;
            script.sealed = true;
        }
    }
    // A resource's hash covers its files' and scripts' names: recomputed over the digests.
    for i in 0..manifest.resources.len() {
        manifest.resources[i].hash = manifest.resources[i].compute_hash(&manifest.files);
    }
    bundle.manifest_json = bundle.manifest.to_json();
    bundle.id = bell_bundle::sha256_hex(bundle.manifest_json.as_bytes());
    bundle
}

//! What reaches bell-run from elsewhere as JSON: a bundle manifest (then checked for what
//! `verify_dir` checks before it touches a file, and as `pull` checks one fetched for a
//! release: its hash, its fleet, its files), a release (then put through what `pull` checks of
//! it: its fleet, its sequence against what a host accepted, its expiry, this host's entry
//! against what the store names, its bundle ids, and the messages that quote its version),
//! and a host's report as `bellc status` reads it from etcd.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(manifest) = bell_bundle::Manifest::from_json(text) {
        // A manifest that parses prints back canonically, and parses again to the same.
        let again = bell_bundle::Manifest::from_json(&manifest.to_json())
            .expect("a canonical manifest parses");
        assert_eq!(again.to_json(), manifest.to_json());
        let _ = manifest.id();
    }
    if let Ok(release) = serde_json::from_str::<bell_bundle::Release>(text) {
        let _ = release.to_json();
        let _ = release.unsigned();
        pull_checks(&release, data);
    }
    // The input as the manifest a release names: of the seeds' fleet and of another.
    for fleet in ["lab-east", "f"] {
        let release = bell_bundle::Release {
            fleet: fleet.into(),
            ..seed_release()
        };
        let id = bell_bundle::sha256_hex(data);
        let _ = bell_bundle::accept::check_manifest(&release, &id, data, "bundle.json");
    }
    let _ = serde_json::from_str::<bell_store::Report>(text);
});

const SEED_MANIFEST: &str = include_str!("../seeds/bundle/manifest-1.json");

/// The seeds' release, which the input is checked against as a manifest.
fn seed_release() -> bell_bundle::Release {
    serde_json::from_str(include_str!("../seeds/bundle/release.json")).expect("the seed parses")
}

/// What `bell-run pull` checks of a release before it fetches anything the release names,
/// each refusal a message (a version or fleet of any bytes quoted in it), never a panic.
fn pull_checks(release: &bell_bundle::Release, raw: &[u8]) {
    use bell_bundle::accept::{check_fleet, check_fresh, Accepted};
    let sha256 = bell_bundle::sha256_hex(raw);
    let _ = check_fleet(release, "f", "`--fleet`");
    let _ = check_fleet(release, &release.fleet, "the release it accepted last");
    let sequence = release.sequence.unwrap_or(0);
    let accepted = |sequence: u64, sha256: &str| Accepted {
        fleet: release.fleet.clone(),
        version: release.version.clone(),
        sequence,
        sha256: sha256.to_string(),
        key: String::new(),
    };
    for before in [
        None,
        Some(accepted(sequence.saturating_add(1), &sha256)),
        Some(accepted(sequence, "another")),
        Some(accepted(sequence, &sha256)),
        Some(accepted(sequence.saturating_sub(1), &sha256)),
    ] {
        for now in [0, 1_800_000_000, u64::MAX] {
            let _ = check_fresh(release, &sha256, before.as_ref(), now);
        }
    }
    use bell_bundle::accept::{check_manifest, host_entry};
    for (host, entry) in &release.hosts {
        let _ = host_entry(release, host, None, "release.json");
        let _ = host_entry(release, host, Some((&release.version, &entry.bundle)), "r");
        let _ = host_entry(release, host, Some(("another", &entry.bundle)), "r");
        let _ = host_entry(release, host, Some((&release.version, "another")), "r");
        // The bundle it names, fetched as the seeds' manifest.
        let _ = check_manifest(release, &entry.bundle, SEED_MANIFEST.as_bytes(), "m");
    }
    let _ = host_entry(release, "", None, "r");
    let _ = bell_bundle::short(&release.version, 16);
}

//! What a host accepts of a verified release, as pure functions of the release, what the host
//! accepted before and the clock: its fleet, the rollback and freeze refusals, its own entry,
//! and the manifest of the bundle the entry names. Here, beside
//! the format, so that the fuzz targets drive them with hostile releases as bell-run does.

use crate::{Expected, Manifest, Release, ReleaseHost};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The newest release this host accepted of one fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub fleet: String,
    pub version: String,
    pub sequence: u64,
    pub sha256: String,
    pub key: String,
}

/// A release of another fleet than `fleet` is refused (`why` says where the host's fleet
/// came from): one key may sign several fleets, so a valid signature alone says nothing about
/// whose release it is.
pub fn check_fleet(release: &Release, fleet: &str, why: &str) -> Result<(), String> {
    if release.fleet == fleet {
        return Ok(());
    }
    Err(format!(
        "release {} is of fleet `{}`, but this host is of fleet `{fleet}` ({why}): refused",
        short(&release.version),
        release.fleet
    ))
}

/// Checks a verified release against what this host accepted before and the clock: the
/// rollback and freeze refusals.
pub fn check_fresh(
    release: &Release,
    sha256: &str,
    accepted: Option<&Accepted>,
    now: u64,
) -> Result<u64, String> {
    let sequence = release.sequence.ok_or_else(|| {
        "the release is signed but carries no sequence; sign it with `bellc build --sign-key` \
         or `bellc publish --sign-key`"
            .to_string()
    })?;
    if let Some(accepted) = accepted.filter(|a| a.fleet == release.fleet) {
        {
            if sequence < accepted.sequence {
                return Err(format!(
                    "release {} has sequence {sequence}, older than release {} (sequence {}) \
                     which this host already accepted: a rollback is refused (to go back, sign \
                     the old release again, as a newer one)",
                    short(&release.version),
                    short(&accepted.version),
                    accepted.sequence
                ));
            }
            if sequence == accepted.sequence && sha256 != accepted.sha256 {
                return Err(format!(
                    "release {} reuses sequence {sequence} of the release this host accepted, \
                     with different content",
                    short(&release.version)
                ));
            }
        }
    }
    if let Some(expires) = release.expires {
        if expires <= now {
            return Err(format!(
                "the newest release available ({}, sequence {sequence}) expired at {}: the \
                 source is stale or frozen; this host keeps its configuration until a newer \
                 signed release is published",
                short(&release.version),
                crate::utc(expires)
            ));
        }
    }
    Ok(sequence)
}

/// A refusal of what a release names for this host: what is wrong, and where to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub help: Option<&'static str>,
}

impl From<String> for Refused {
    fn from(message: String) -> Refused {
        Refused {
            message,
            help: None,
        }
    }
}

/// This host's entry of a release, checked against what the store names (`store`: the release
/// version and the bundle the store gives the host, when pulling from one; `source` says where
/// the release was read): a mirror serving
/// another release than the store names, or another bundle, is refused, and so is an entry
/// whose bundle is not a bundle id (a path, say).
pub fn host_entry<'a>(
    release: &'a Release,
    host: &str,
    store: Option<(&str, &str)>,
    source: &str,
) -> Result<&'a ReleaseHost, Refused> {
    let Some(entry) = release.hosts.get(host) else {
        return Err(Refused {
            message: format!(
                "release {} names no bundle for host `{host}`",
                short(&release.version)
            ),
            help: Some("is `--host` (or /etc/hostname) this host's name in the fleet?"),
        });
    };
    if let Some((version, bundle)) = store {
        if version != release.version {
            return Err(format!(
                "the store names release {}, but {source} holds release {}",
                short(version),
                short(&release.version)
            )
            .into());
        }
        if bundle != entry.bundle {
            return Err(format!(
                "the store names bundle {} for host `{host}`, but the release names {}: refused",
                short(bundle),
                short(&entry.bundle)
            )
            .into());
        }
    }
    if !crate::is_bundle_id(&entry.bundle) {
        return Err(format!(
            "the release names `{}` as the bundle of `{host}`, which is not a bundle id",
            entry.bundle
        )
        .into());
    }
    Ok(entry)
}

/// A bundle's manifest as fetched (`bytes`, from where `describe` says) for bundle `id` of
/// `release`: its sha256 must be the id (the release, signed, names the id), it must parse,
/// be of the release's fleet, and list files that can be verified. Its files, by path, for
/// fetching them.
pub fn check_manifest(
    release: &Release,
    id: &str,
    bytes: &[u8],
    describe: &str,
) -> Result<(Manifest, BTreeMap<PathBuf, Expected>), String> {
    let actual = crate::sha256_hex(bytes);
    if actual != id {
        return Err(format!(
            "{describe} has sha256 {actual}, not the id {id} the release names: refused"
        ));
    }
    let manifest = std::str::from_utf8(bytes)
        .map_err(|_| "not UTF-8".to_string())
        .and_then(|text| Manifest::from_json(text).map_err(|e| e.to_string()))
        .map_err(|e| format!("the bundle {id} is not a bundle: {e}"))?;
    if manifest.fleet != release.fleet {
        return Err(format!(
            "the bundle {id} is of fleet `{}`, but release {} is of fleet `{}`: refused",
            manifest.fleet,
            short(&release.version),
            release.fleet
        ));
    }
    let expected = crate::expected_files(&manifest)
        .map_err(|e| format!("the bundle {id} does not verify: {e}"))?;
    Ok((manifest, expected))
}

fn short(version: &str) -> &str {
    crate::short(version, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(text: &str) -> Release {
        serde_json::from_str(text).expect("a release")
    }

    /// A version or fleet of any bytes (a release read from a mirror before a check refuses
    /// it) is quoted in the refusal, never cut inside a character.
    #[test]
    fn refusals_quote_multibyte_versions_whole_characters() {
        let r = release(include_str!(
            "../../../fuzz/seeds/bundle/release-multibyte-version.json"
        ));
        let refused = check_fleet(&r, "other", "`--fleet`").unwrap_err();
        assert!(
            refused.contains("release aaaaaaaaaaaaaaa\u{20ac} is of fleet `f`"),
            "{refused}"
        );
        let before = Accepted {
            fleet: "f".into(),
            version: "v".into(),
            sequence: 9,
            sha256: "x".into(),
            key: String::new(),
        };
        let refused = check_fresh(&r, "y", Some(&before), 0).unwrap_err();
        assert!(refused.contains("a rollback is refused"), "{refused}");
    }

    /// The manifest a release names is taken only with the id's sha256, of the release's
    /// fleet, and listing files that can be verified; the entry only for the store's release
    /// and bundle, and only when it names a bundle id.
    #[test]
    fn a_manifest_of_another_fleet_or_hash_is_refused() {
        let r = release(include_str!("../../../fuzz/seeds/bundle/release.json"));
        let text = include_str!("../../../fuzz/seeds/bundle/manifest-1.json");
        let id = crate::sha256_hex(text.as_bytes());
        let (manifest, files) = check_manifest(&r, &id, text.as_bytes(), "m").expect("taken");
        assert_eq!(manifest.fleet, "lab-east");
        assert!(files.len() >= manifest.files.len() && !files.is_empty());
        let refused = check_manifest(&r, &"0".repeat(64), text.as_bytes(), "m").unwrap_err();
        assert!(refused.contains("m has sha256"), "{refused}");
        let other = text.replace("\"fleet\": \"lab-east\"", "\"fleet\": \"lab-west\"");
        let id = crate::sha256_hex(other.as_bytes());
        let refused = check_manifest(&r, &id, other.as_bytes(), "m").unwrap_err();
        assert!(
            refused.contains("is of fleet `lab-west`, but release"),
            "{refused}"
        );

        let (host, entry) = r.hosts.iter().next().expect("a host");
        assert!(host_entry(&r, host, None, "s").is_ok());
        assert!(host_entry(&r, host, Some((&r.version, &entry.bundle)), "s").is_ok());
        let refused = host_entry(&r, "nobody", None, "s").unwrap_err();
        assert!(refused.help.is_some(), "{refused:?}");
        let refused = host_entry(&r, host, Some(("v2", &entry.bundle)), "s").unwrap_err();
        assert!(
            refused.message.contains("but s holds release"),
            "{refused:?}"
        );
        let refused = host_entry(&r, host, Some((&r.version, "b")), "s").unwrap_err();
        assert!(
            refused.message.contains("the store names bundle b"),
            "{refused:?}"
        );
        let mut bad = r.clone();
        bad.hosts.get_mut(host).expect("the host").bundle = "../../etc".into();
        let refused = host_entry(&bad, host, None, "s").unwrap_err();
        assert!(refused.message.contains("not a bundle id"), "{refused:?}");
    }
}

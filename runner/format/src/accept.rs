//! What a host accepts of a verified release, as pure functions of the release, what the host
//! accepted before and the clock: its fleet, the rollback and freeze refusals. Here, beside
//! the format, so that the fuzz targets drive them with hostile releases as bell-run does.

use crate::Release;
use serde::{Deserialize, Serialize};

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
}

//! What happened to one resource: the one vocabulary of bell-run's output, its records on the
//! host and the reports bellc reads, with one definition of a failure for both binaries.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One resource's status in an apply, a check or bell-run's record of it. Written as its
/// kebab-case word (`ok`, `not-due`, `in-sync`, ...); a word this build does not know (a newer
/// bell-run's) is kept as [`Status::Unknown`] and read as no failure, so an older reader
/// neither refuses the report nor invents a failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Status {
    // An apply's, and bell-run's record of it.
    /// Applied, or in place already.
    Ok,
    /// Its script failed.
    Failed,
    /// Not run: a resource it comes after did not apply.
    Skipped,
    /// Not run: an `exec` before it failed with `on-failure halt`.
    Halted,
    /// A background `exec` started and still running.
    Started,
    /// An `exec` whose rerun policy says it is not due.
    NotDue,
    /// Nothing to do: its hash is the one applied.
    Unchanged,
    /// Taken back (a resource the bundle no longer has).
    Reverted,
    /// Work only a live host can do, left by an offline apply to the first live one.
    Deferred,
    /// Not run: fewer providers of a service it waits for (`wait-for`) were ready than it
    /// needs within its timeout. Not a failure; the next run tries again, and what comes after
    /// it waits too.
    Waiting,
    // A check's.
    /// What its check reads back is what the bundle says.
    InSync,
    /// Its check found it changed.
    Drifted,
    /// In place, in effect only after the next boot.
    RebootRequired,
    /// The check script itself failed.
    Error,
    /// No check of its own, but a file it owns drifted (named in the drift list).
    DriftedFiles,
    /// It has no check.
    NoCheck,
    /// A word of a newer bell-run's.
    Unknown(String),
}

impl Status {
    pub fn as_str(&self) -> &str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Halted => "halted",
            Status::Started => "started",
            Status::NotDue => "not-due",
            Status::Unchanged => "unchanged",
            Status::Reverted => "reverted",
            Status::Deferred => "deferred",
            Status::Waiting => "waiting",
            Status::InSync => "in-sync",
            Status::Drifted => "drifted",
            Status::RebootRequired => "reboot-required",
            Status::Error => "error",
            Status::DriftedFiles => "drifted-files",
            Status::NoCheck => "no-check",
            Status::Unknown(word) => word,
        }
    }

    pub fn parse(word: &str) -> Status {
        match word {
            "ok" => Status::Ok,
            "failed" => Status::Failed,
            "skipped" => Status::Skipped,
            "halted" => Status::Halted,
            "started" => Status::Started,
            "not-due" => Status::NotDue,
            "unchanged" => Status::Unchanged,
            "reverted" => Status::Reverted,
            "deferred" => Status::Deferred,
            "waiting" => Status::Waiting,
            "in-sync" => Status::InSync,
            "drifted" => Status::Drifted,
            "reboot-required" => Status::RebootRequired,
            "error" => Status::Error,
            "drifted-files" => Status::DriftedFiles,
            "no-check" => Status::NoCheck,
            other => Status::Unknown(other.to_string()),
        }
    }

    /// Whether the resource is not in place because of this run: its script failed (an
    /// apply's or a check's), or it was not run because another failed. What bell-run counts
    /// as failed, keeps dependents waiting on, and `bellc status` names as why a host failed.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Status::Failed | Status::Skipped | Status::Halted | Status::Error
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
        let word = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Status::parse(&word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself() {
        let all = [
            Status::Ok,
            Status::Failed,
            Status::Skipped,
            Status::Halted,
            Status::Started,
            Status::NotDue,
            Status::Unchanged,
            Status::Reverted,
            Status::Deferred,
            Status::Waiting,
            Status::InSync,
            Status::Drifted,
            Status::RebootRequired,
            Status::Error,
            Status::DriftedFiles,
            Status::NoCheck,
        ];
        for status in all {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
            assert_eq!(serde_json::from_str::<Status>(&json).unwrap(), status);
            assert!(!matches!(
                Status::parse(status.as_str()),
                Status::Unknown(_)
            ));
        }
        // A newer word is kept as it was written, and is no failure.
        let newer: Status = serde_json::from_str("\"paused\"").unwrap();
        assert_eq!(newer, Status::Unknown("paused".into()));
        assert_eq!(serde_json::to_string(&newer).unwrap(), "\"paused\"");
        assert!(!newer.is_failure());
    }

    #[test]
    fn one_definition_of_a_failure() {
        let failures: Vec<&str> = ["ok", "failed", "skipped", "halted", "error", "drifted"]
            .into_iter()
            .filter(|w| Status::parse(w).is_failure())
            .collect();
        assert_eq!(failures, ["failed", "skipped", "halted", "error"]);
    }
}

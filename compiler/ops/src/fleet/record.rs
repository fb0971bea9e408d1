//! The rollout record: what the signing key gave the fleet, kept signed in OUT.
//!
//! Why it exists: hosts trust only what the key signed, and the controller signs wave and
//! abort releases by copying host entries out of an earlier release. If that earlier release
//! were the one etcd names, anyone who can write etcd (every host can) could have the
//! controller sign an old release anew, and hosts would take it as the newest. So the
//! controller builds only on what it finds in OUT, CI's own directory, signed by the key it
//! holds: this record says which release the fleet was given last (the base of the next
//! rollout), which release a rollout began from (the target of its abort), and how far its
//! waves were given. etcd's `current_version` and `rollout/progress` are only compared with
//! it.
//!
//! ```text
//! OUT/rollouts/<fleet>.json   the record ([`Record`]) and its minisign signature, by the key
//!                              that signs the releases
//! ```

use bellc_core::emit::releases;
use bellc_core::emit::signing::{SigningError, SigningKey};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format of the record.
pub const RECORD_FORMAT: u32 = 1;

/// The directory of OUT that holds one record per fleet.
pub const ROLLOUTS_DIR: &str = "rollouts";

/// A release as the key gave it: its version and the sequence it was signed with (`None`
/// for a fleet whose releases are not signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Given {
    pub version: String,
    pub sequence: Option<u64>,
}

/// Where a rollout stands, as far as the key is concerned (the finer state, which wave
/// converged and why one halted, is etcd's `rollout/progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Waves are being given (or the rollout halted, or its controller died).
    Rolling,
    Done,
    Aborting,
    Aborted,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Rolling => "rolling out",
            Stage::Done => "done",
            Stage::Aborting => "being aborted",
            Stage::Aborted => "aborted",
        }
    }

    pub fn finished(self) -> bool {
        matches!(self, Stage::Done | Stage::Aborted)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub format: u32,
    pub fleet: String,
    /// The release being rolled out (the build's release.json).
    pub target: String,
    /// What the fleet was given last when the rollout began: its abort goes back to it.
    /// `None` for a fleet's first rollout.
    pub from: Option<Given>,
    /// The hosts whose bundle changes, wave by wave.
    pub waves: Vec<Vec<String>>,
    /// How many of `waves` were given their new bundle.
    pub given_waves: usize,
    /// The release the controller published last: the base of the next rollout.
    pub given: Option<Given>,
    pub stage: Stage,
    /// Hosts whose bundle would change but that an operator held (`bellc hold`) when the
    /// rollout began: in no wave, and kept on their bundle by every release it gives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

impl Record {
    /// The hosts the rollout gave their new bundle.
    pub fn moved(&self) -> std::collections::BTreeSet<String> {
        self.waves
            .iter()
            .take(self.given_waves)
            .flatten()
            .cloned()
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path} {reason}: it was not written by this signing key's controller")]
    Forged { path: PathBuf, reason: String },
    #[error("{path} is signed, and no signing key was given to check it")]
    NeedsKey { path: PathBuf },
    #[error(transparent)]
    Signing(#[from] SigningError),
}

pub fn path(out: &Path, fleet: &str) -> PathBuf {
    out.join(ROLLOUTS_DIR).join(format!("{fleet}.json"))
}

/// The file: the record and its signature together, so that one rename replaces both (a
/// controller killed between two files would leave a record its signature does not match).
/// The signature is over the record's compact JSON, which serde writes the same way each time.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Signed {
    record: Record,
    signature: Option<String>,
}

/// The fleet's record in OUT, checked against `key` (whose signature it must carry when a key
/// is given). `None` when the fleet was never rolled out from this OUT.
pub fn load(
    out: &Path,
    fleet: &str,
    key: Option<&SigningKey>,
) -> Result<Option<Record>, RecordError> {
    let path = path(out, fleet);
    let read_err = |reason: String| RecordError::Read {
        path: path.clone(),
        reason,
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e.to_string())),
    };
    let signed: Signed =
        serde_json::from_slice(&bytes).map_err(|e| read_err(format!("not a record: {e}")))?;
    let compact = serde_json::to_vec(&signed.record).map_err(|e| read_err(e.to_string()))?;
    match (key, &signed.signature) {
        (Some(key), Some(signature)) => {
            key.verify(&compact, signature)
                .map_err(|reason| RecordError::Forged {
                    path: path.clone(),
                    reason,
                })?
        }
        (Some(_), None) => {
            return Err(RecordError::Forged {
                path,
                reason: "is not signed".to_string(),
            })
        }
        (None, Some(_)) => return Err(RecordError::NeedsKey { path }),
        (None, None) => {}
    }
    if signed.record.fleet != fleet {
        return Err(RecordError::Forged {
            path,
            reason: format!("is the record of fleet `{}`", signed.record.fleet),
        });
    }
    Ok(Some(signed.record))
}

/// Whether OUT holds a signed record of `fleet`.
pub fn is_signed(out: &Path, fleet: &str) -> bool {
    std::fs::read(path(out, fleet))
        .ok()
        .and_then(|b| serde_json::from_slice::<Signed>(&b).ok())
        .is_some_and(|s| s.signature.is_some())
}

/// Writes the record, signed with `key` when one is given.
pub fn save(out: &Path, record: &Record, key: Option<&SigningKey>) -> Result<(), RecordError> {
    let path = path(out, &record.fleet);
    let io = |path: &Path, e: String| RecordError::Read {
        path: path.to_path_buf(),
        reason: e,
    };
    let dir = out.join(ROLLOUTS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e.to_string()))?;
    let compact = serde_json::to_vec(record).map_err(|e| io(&path, e.to_string()))?;
    let signature = match key {
        Some(key) => {
            let trusted = format!(
                "file:{ROLLOUTS_DIR}/{}.json\tfleet:{}\ttarget:{}\tstage:{}",
                record.fleet,
                record.fleet,
                record.target,
                record.stage.as_str()
            );
            Some(key.sign(&compact, &trusted)?)
        }
        None => None,
    };
    let signed = Signed {
        record: record.clone(),
        signature,
    };
    let mut json = serde_json::to_string_pretty(&signed).map_err(|e| io(&path, e.to_string()))?;
    json.push('\n');
    releases::write_atomic(&path, json.as_bytes()).map_err(SigningError::from)?;
    Ok(())
}

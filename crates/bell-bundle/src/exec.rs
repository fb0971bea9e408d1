//! How an `exec` resource's script is run, and where scripts run on an image root.

use crate::is_false;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an `exec` resource's script is run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecPolicy {
    pub rerun: Rerun,
    /// Seconds between runs when `rerun` is `always`; `None` means on every apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_interval: Option<u64>,
    /// Seconds to wait before retrying a failed run; `None` means retry on every apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<u64>,
    /// `false`: the first apply after a boot reruns a succeeded script whatever its rerun
    /// interval (Divingbell's `rerun_interval_persist`).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub rerun_interval_persist: bool,
    /// `false`: the first apply after a boot retries a failed script whatever its retry
    /// interval (Divingbell's `retry_interval_persist`).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub retry_interval_persist: bool,
    /// At most this many successful reruns per boot; `None` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_max_count: Option<u64>,
    /// At most this many failed retries per boot; `None` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_max_count: Option<u64>,
    /// Seconds before the script's whole process group is killed.
    pub timeout: u64,
    pub on_failure: OnFailure,
    #[serde(default)]
    pub background: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Where the script runs when bell-run applies to an image root.
    #[serde(default, skip_serializing_if = "Offline::is_image")]
    pub offline: Offline,
    /// What it does takes effect at the next boot (a firmware update): from a successful run
    /// until the host boots again, it needs a reboot.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reboot: bool,
}

/// Where an `exec` script or a health probe runs when bell-run works on a root other than `/`
/// (an image being baked). The build machine is never the place: a script written for the
/// host it configures would configure the machine that bakes the image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Offline {
    /// Inside the image: a private mount namespace whose `/` is the root, with `/proc`, `/sys`
    /// and a minimal `/dev` read-only, as image builders run their chroots.
    #[default]
    Image,
    /// Not run; the first live apply runs it. Counted as deferred, like a package.
    Defer,
    /// Not run on an image root at all.
    Skip,
    /// On the build machine with `BELL_ROOT` set, everything but the root and a private `/tmp`
    /// read-only: for scripts written against `$BELL_ROOT`.
    Root,
}

impl Offline {
    pub fn is_image(&self) -> bool {
        *self == Offline::Image
    }

    /// The word the spec writes: `offline="defer"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Offline::Image => "image",
            Offline::Defer => "defer",
            Offline::Skip => "skip",
            Offline::Root => "root",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rerun {
    Always,
    Never,
    OnceSuccessfully,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    Continue,
    Halt,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

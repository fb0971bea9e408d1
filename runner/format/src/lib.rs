//! The bundle format: the one contract between `bellc` (which writes bundles) and `bell-run`
//! (which applies them).
//!
//! A bundle is a directory:
//!
//! ```text
//! bundle.json          the manifest (this module's `Manifest`); the bundle id is its sha256
//! root/<path>          every managed file at its path on the host (root/etc/sysctl.d/60-bell.conf)
//! scripts/<...>        apply / revert / trigger scripts and exec user scripts
//! ```
//!
//! Everything in the directory is covered by the manifest: files and scripts carry their sha256,
//! so checking the manifest's own hash and then every listed hash verifies the whole bundle.
//! The manifest is written by `Manifest::to_json`, which is canonical (fixed field order, sorted
//! maps, two-space indentation, trailing newline) so that the same bundle always has the same id.
//!
//! This crate is deliberately small: serde types, hashing, and integrity checks. It knows nothing
//! of sysctl, units or users; that knowledge lives in the scripts that the compiler renders.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

pub mod prometheus;
mod reboot;
pub use reboot::{Reboot, RebootMethod, RebootPolicy, Window};

/// The manifest format this crate writes and the newest one it reads.
pub const FORMAT: u32 = 1;

/// The exit status by which an apply script says, when run offline (`BELL_OFFLINE=1`), that it
/// can only do its work on a live host (installing a package, say). bell-run records the
/// resource as `deferred`, which is not a failure, and applies it again on the next run.
pub const EXIT_DEFERRED: i32 = 75;

/// The exit status by which a check script says that what it reads back is in place but
/// takes effect only at the next boot (a kernel command line the running kernel did not boot
/// with): not drift, and nothing an apply can do; bell-run records the host as needing a
/// reboot, with what the script printed as the reason.
pub const EXIT_REBOOT_REQUIRED: i32 = 76;

/// The file by which Debian and Ubuntu packages (a kernel, libc) say the host needs a reboot,
/// written by their postinst; `.pkgs` beside it names the packages.
pub const REBOOT_REQUIRED_FILE: &str = "run/reboot-required";

/// The file name of the manifest inside a bundle directory.
pub const MANIFEST_FILE: &str = "bundle.json";

/// The directory inside a bundle that holds managed files at their host paths.
pub const ROOT_DIR: &str = "root";

/// `bundle.json`: everything one host gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    /// The target profile the bundle was rendered for (`debian-12`, `ubuntu-24.04`, ...).
    pub target: String,
    /// The fleet name, so that reports can be filed under it.
    pub fleet: String,
    /// Resources in apply order (a topological order of their `after` edges).
    pub resources: Vec<Resource>,
    /// Every managed file, sorted by path.
    pub files: Vec<File>,
    /// Work to run once per apply, between the file switch and the applies, when any managed
    /// file under one of `paths` was created, changed or removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// Health probes, by name: run after every apply and check; the host is healthy when
    /// every one passes. They change nothing, so they are not resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Probe>,
    /// Checks shared by several resources (see [`Batch`]), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<Batch>,
    /// The package repository snapshot each pinned apt source reads, by source name: what
    /// the release records per host and the host reports it runs.
    #[serde(default, skip_serializing_if = "Snapshots::is_empty")]
    pub snapshots: Snapshots,
    /// How the host reboots when a change needs it (`reboot` of the spec); absent: it only
    /// reports that it needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot: Option<Reboot>,
}

/// Package repository snapshots by apt source name (`debian` → `20261120T000000Z`).
pub type Snapshots = BTreeMap<String, String>;

/// One managed thing of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    pub kind: String,
    pub name: String,
    /// sha256 of everything about the resource (see `Resource::compute_hash`): when it changes,
    /// bell-run applies the resource again.
    pub hash: String,
    /// Host paths of the managed files this resource owns (entries of `Manifest::files`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// `KIND:NAME` of resources this one depends on: applied before it, and when one of them
    /// did not apply, this one is skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// `KIND:NAME` of resources applied before this one for order only (packages before what
    /// configures them, scripts in name order): a failure there does not hold this one back.
    /// Not part of the resource's hash: where a resource stands changes nothing it does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_after: Vec<String>,
    /// Brings the resource live. For `exec` resources this is the user's script itself.
    pub apply: Option<Script>,
    /// Takes the resource back, from what `apply` recorded in its state directory.
    pub revert: Option<Script>,
    /// Reads the live value back and compares it with the bundle: exit 0 in sync, 2 drifted
    /// (printing what differs). Absent from manifests of kinds with nothing live to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Script>,
    /// The name of the [`Batch`] whose check reads this resource back, in place of a check of
    /// its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Present on `exec` resources: how bell-run schedules the user's script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecPolicy>,
    /// It takes effect at the next boot (a kernel command line): bell-run runs its check after
    /// applying it too, to learn whether the host now needs a reboot
    /// ([`EXIT_REBOOT_REQUIRED`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub at_boot: bool,
}

/// A script shipped in the bundle, by its path relative to the bundle directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub path: String,
    pub sha256: String,
    /// Its length in bytes, which bounds a download before its hash can be checked (absent in
    /// manifests written before bellc recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// It carries a secret (a password hash, say): private wherever it is copied, and never
    /// printed (it shows as [`REDACTED`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub secret: bool,
    /// Its content is sealed to the host (see [`File::sealed`]): `sha256` is the keyed digest
    /// that names it, and the bundle does not hold it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sealed: bool,
    /// It acts on the running system only: with `BELL_OFFLINE=1` (an image root) it has
    /// nothing to do and exits 0 at once, so bell-run does not start it there and takes it as
    /// having run. Set by bellc for stdlib scripts that say so on their second line; never for
    /// a user's `exec` script.
    #[serde(default, skip_serializing_if = "is_false")]
    pub live_only: bool,
}

/// A check shared by several resources: one process reads back the live state of all of them
/// (twenty sysctl keys are one `sh` and one `head`, not twenty of each, and on a live host the
/// drift checks are most of a no-op apply). Its script prints one line per resource it checks,
/// `KIND:NAME<TAB>in-sync`, `KIND:NAME<TAB>drifted<TAB>what differs` or
/// `KIND:NAME<TAB>error<TAB>why`, and exits 0; other lines are its log. A resource of the
/// batch that it gives no line for has a failed check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// Lowercase letters, digits and `-`: it names the batch's log directory.
    pub name: String,
    pub check: Script,
}

/// Whether `name` can name a [`Batch`].
pub fn is_batch_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A managed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Absolute, normalised path on the host; the content is at `root/<path>` in the bundle.
    pub path: String,
    pub sha256: String,
    /// Its length in bytes (see [`Script::size`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Octal mode, four digits (`"0644"`).
    pub mode: String,
    pub owner: String,
    pub group: String,
    /// Its content is a secret (a private key, a debconf password answer); files whose mode
    /// keeps group or others from reading them are secret whatever this says
    /// ([`File::is_secret`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub secret: bool,
    /// Its content is sealed to the host: the bundle does not hold it, `sha256` is a keyed
    /// digest that names it (HMAC-SHA256 under a key only the build has, so that it confirms
    /// no guess), and the content comes as an age file encrypted to the host's identity, from
    /// the host's [`SealedIndex`] beside the bundles. Set by bellc on every secret of a host
    /// with an identity. bell-run puts the opened content into its own copy of the bundle.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sealed: bool,
}

impl File {
    /// Private wherever bell copies it, and never shown.
    pub fn is_secret(&self) -> bool {
        self.secret || self.sealed || parse_mode(&self.mode).is_some_and(private_mode)
    }
}

/// A mode that lets neither group nor others read (`0600`, `0400`, `0700`): what it guards is
/// a secret. (`0440` and `0640` are shared with a group on purpose, as sudoers drop-ins are.)
pub fn private_mode(mode: u32) -> bool {
    mode & 0o044 == 0
}

/// PEM private keys of every kind (`-----BEGIN OPENSSH PRIVATE KEY-----`, `RSA`, `EC`,
/// PKCS#8, PGP's `PRIVATE KEY BLOCK`): secret whatever mode the spec gave the file.
pub fn looks_like_private_key(content: &[u8]) -> bool {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const KEY: &[u8] = b"PRIVATE KEY";
    content
        .windows(BEGIN.len())
        .enumerate()
        .filter(|(_, w)| *w == BEGIN)
        .any(|(at, _)| {
            let label = &content[at + BEGIN.len()..];
            let label = &label[..label.len().min(48)];
            label.windows(KEY.len()).any(|w| w == KEY)
        })
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

/// What every command shows of a secret's content: nothing about it, not even its size or a
/// digest (an unkeyed hash of a short password confirms a guess).
pub const REDACTED: &str = "<secret>";

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

/// Work that runs once per apply, such as `systemctl daemon-reload` after unit files changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    pub name: String,
    /// Host path prefixes (directories end in `/`) whose changes fire the trigger.
    pub paths: Vec<String>,
    pub script: Script,
}

/// A health probe: a script that says whether the host does its job (exit 0: healthy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    pub name: String,
    pub script: Script,
    /// Seconds one attempt may take before it is killed and counted as failed.
    pub timeout: u64,
    /// Attempts before the probe is declared failing (Docker's `HEALTHCHECK --retries`): a
    /// service that needs a moment after a restart passes on a later one.
    pub retries: u32,
    /// Seconds between attempts.
    pub interval: u64,
    /// Where the probe runs when bell-run applies to an image root.
    #[serde(default, skip_serializing_if = "Offline::is_image")]
    pub offline: Offline,
}

/// `release.json`: one build of a whole fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    pub format: u32,
    pub fleet: String,
    /// sha256 over the host → bundle map: the fleet's desired version.
    pub version: String,
    pub hosts: BTreeMap<String, ReleaseHost>,
    /// Rollout waves, in order; every host appears in exactly one wave.
    #[serde(default)]
    pub waves: Vec<Vec<String>>,
    /// Set when the release is signed (`bellc build --sign-key`): a number that only grows
    /// from one signed release of a fleet to the next (the signing time in milliseconds), so that a host can refuse an older one
    /// (a rollback attack). Not part of `version`: the same map signed again is a newer release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Unix seconds after which a host no longer accepts this release as its newest (a frozen
    /// mirror cannot hold a fleet on it in silence). Signed with the rest of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The disruption budget: how many hosts of each rollout group may be off their old,
    /// healthy state at once. Hosts that pull take a slot of their group's semaphore in the
    /// fleet store before they change (absent in releases built before bellc wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// `fleet … identities="required"`: every host has an identity, and a report that is not
    /// signed by it counts for nothing (a rollout never counts such a host converged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identities_required: bool,
    /// Labels the build gave by count (`assign LABEL="VALUE" count=N`): the hosts each chose,
    /// in the order chosen. The hosts' labels carry them too; this says why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<Assignment>,
}

/// One counted `assign` of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub label: String,
    pub value: String,
    pub count: u32,
    pub hosts: Vec<String>,
}

/// The directory of a build output that holds each host's sealed secrets: `secrets/<host>/`.
pub const SECRETS_DIR: &str = "secrets";

/// Where a host's [`SealedIndex`] is in a build output, by the sha256 the release gives:
/// `secrets/<host>/<sha256>.json` (content-addressed, so the index of an earlier release that
/// a rollout still serves stays beside the newest).
pub fn sealed_index_path(host: &str, sha256: &str) -> String {
    format!("{SECRETS_DIR}/{host}/{sha256}.json")
}

/// Where one sealed secret of a host is: `secrets/<host>/<digest>.age`.
pub fn sealed_file_path(host: &str, digest: &str) -> String {
    format!("{SECRETS_DIR}/{host}/{digest}.age")
}

/// `secrets/<host>/<sha256>.json`: every secret sealed to one host, by the keyed digest its
/// bundle names it with. The release's host entry carries this file's sha256 (signed with the
/// release), so a host takes only the ciphertexts the signing key named for it: a mirror that
/// serves another file, even one validly sealed to the host by someone else, is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedIndex {
    pub format: u32,
    pub host: String,
    /// The identity the secrets are sealed to (`ssh-ed25519 BASE64`).
    pub identity: String,
    /// Keyed digest → the sealed file's sha256 and length.
    pub secrets: BTreeMap<String, SealedFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedFile {
    pub sha256: String,
    pub size: u64,
}

impl SealedIndex {
    /// The canonical bytes; the release names their sha256.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    pub fn from_json(text: &str) -> Result<SealedIndex, FormatError> {
        let index: SealedIndex =
            serde_json::from_str(text).map_err(|e| FormatError::Json(e.to_string()))?;
        if index.format != FORMAT {
            return Err(FormatError::UnknownFormat(index.format));
        }
        if !index.secrets.keys().all(|d| is_bundle_id(d)) {
            return Err(FormatError::Json(
                "a sealed secret's digest is not 64 lowercase hex digits".to_string(),
            ));
        }
        Ok(index)
    }
}

/// `rollout batch-by=LABEL max-unavailable=N|"P%"` of the spec, resolved for this release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollout {
    /// The host label whose value is a host's group; without one the fleet is one group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_by: Option<String>,
    /// As the spec says it (`2`, `10%`), for people.
    pub max_unavailable: String,
    /// Slots of each group: `max-unavailable`, or its share of the group's size (at least 1).
    pub slots: BTreeMap<String, u32>,
}

/// The group of hosts that have no value of the `batch-by` label, or of every host when there
/// is no `batch-by` (airlock's name for it).
pub const DEFAULT_GROUP: &str = "default";

impl Rollout {
    /// The name of the group `host` belongs to: its `batch_by` label's value.
    pub fn group_name<'a>(&self, host: &'a ReleaseHost) -> &'a str {
        self.batch_by
            .as_ref()
            .and_then(|label| host.labels.get(label))
            .map_or(DEFAULT_GROUP, String::as_str)
    }

    /// The group `host` belongs to and its number of slots.
    pub fn group_of(&self, host: &ReleaseHost) -> (String, u32) {
        let group = self.group_name(host);
        let slots = self.slots.get(group).copied().unwrap_or(1).max(1);
        (group.to_string(), slots)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseHost {
    pub bundle: String,
    pub address: Option<String>,
    pub labels: Labels,
    /// The host's identity, `ssh-ed25519 BASE64`: the key its reports are signed with, given
    /// by the release so that every verifier learns it from what the signing key signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The sha256 of the host's [`SealedIndex`] (at [`sealed_index_path`]), when its bundle
    /// holds sealed secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<String>,
    /// The package repository snapshots its bundle reads ([`Manifest::snapshots`]), signed
    /// with the release so that it names the package versions a host installs. Shared by the
    /// hosts of one resolved configuration.
    #[serde(default, skip_serializing_if = "is_empty_shared")]
    pub snapshots: std::sync::Arc<Snapshots>,
    /// Its bundle reboots it when a change needs one (`reboot policy="when-required"`): a
    /// rollout counts it converged only once it has, and is healthy after.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reboots: bool,
}

fn is_empty_shared(snapshots: &std::sync::Arc<Snapshots>) -> bool {
    snapshots.is_empty()
}

/// A host's labels. Shared: the spec, the resolution and the release hold the same map, and
/// hosts with equal labels (a rack's) hold one map between them; at a million hosts each copy
/// was half a gigabyte.
pub type Labels = std::sync::Arc<BTreeMap<String, String>>;

/// `YYYY-MM-DD HH:MM:SS UTC` from unix seconds (days-to-civil, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(digest.len() * 2);
    for byte in digest {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 15) as usize] as char);
    }
    out
}

/// Feeds serialised bytes into a sha256 without buffering them.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Manifest {
    /// Every script the manifest names: each resource's apply, revert and check, the
    /// triggers', the probes' and the batches' (a script named twice comes twice).
    pub fn scripts(&self) -> impl Iterator<Item = &Script> {
        self.resources
            .iter()
            .flat_map(Resource::scripts)
            .chain(self.triggers.iter().map(|t| &t.script))
            .chain(self.probes.iter().map(|p| &p.script))
            .chain(self.batches.iter().map(|b| &b.check))
            .chain(
                self.reboot
                    .iter()
                    .flat_map(Reboot::hooks)
                    .map(|h| &h.script),
            )
    }

    /// The bundle-relative paths (`root/...`, `scripts/...`) whose content is secret.
    pub fn secret_paths(&self) -> BTreeSet<String> {
        let files = self
            .files
            .iter()
            .filter(|f| f.is_secret())
            .map(|f| format!("{ROOT_DIR}{}", f.path));
        let scripts = self
            .scripts()
            .filter(|s| s.secret || s.sealed)
            .map(|s| s.path.clone());
        files.chain(scripts).collect()
    }

    /// Every sealed entry, by its bundle-relative path (`root/...`, `scripts/...`), with the
    /// keyed digest that names it. Their content is not in the bundle (see [`File::sealed`]).
    pub fn sealed(&self) -> BTreeMap<String, String> {
        let files = self
            .files
            .iter()
            .filter(|f| f.sealed)
            .map(|f| (format!("{ROOT_DIR}{}", f.path), f.sha256.clone()));
        let scripts = self
            .scripts()
            .filter(|s| s.sealed)
            .map(|s| (s.path.clone(), s.sha256.clone()));
        files.chain(scripts).collect()
    }

    /// The manifest as the host sees it once its sealed entries are opened: each one's
    /// `sha256` and `size` are those of its content (`content` gives them by bundle path), so
    /// that everything that compares a file on the host with the bundle works as for any
    /// other. `sealed` stays set, so the content stays secret. Not a manifest to hash: its id
    /// is the sealed one's. The path of an entry `content` cannot give is the error.
    pub fn opened(
        &self,
        content: impl Fn(&str) -> Option<(String, u64)>,
    ) -> Result<Manifest, String> {
        let mut opened = self.clone();
        let open = |rel: String, sha256: &mut String, size: &mut Option<u64>| {
            let (sha, len) = content(&rel).ok_or(rel)?;
            *sha256 = sha;
            *size = Some(len);
            Ok::<(), String>(())
        };
        for file in opened.files.iter_mut().filter(|f| f.sealed) {
            open(
                format!("{ROOT_DIR}{}", file.path),
                &mut file.sha256,
                &mut file.size,
            )?;
        }
        let scripts = opened
            .resources
            .iter_mut()
            .flat_map(|r| [&mut r.apply, &mut r.revert, &mut r.check])
            .flatten()
            .chain(opened.triggers.iter_mut().map(|t| &mut t.script))
            .chain(opened.probes.iter_mut().map(|p| &mut p.script))
            .chain(opened.batches.iter_mut().map(|b| &mut b.check))
            .chain(
                opened
                    .reboot
                    .iter_mut()
                    .flat_map(Reboot::hooks_mut)
                    .map(|h| &mut h.script),
            );
        for script in scripts.filter(|s| s.sealed) {
            open(script.path.clone(), &mut script.sha256, &mut script.size)?;
        }
        Ok(opened)
    }

    /// The manifest without what needs its sealed secrets opened, for an image baked without
    /// the host's key: every resource with a sealed script or file, every resource that
    /// depends on one of those (`after`), and the files, triggers, probes and batches only
    /// they had. What stays is as it was (the same hashes), so that the host's first apply of
    /// the whole bundle applies only what was left out. Returns it with the `KIND:NAME` of each
    /// resource left out, or `None` when nothing is sealed.
    pub fn without_sealed(&self) -> Option<(Manifest, Vec<String>)> {
        if self.sealed().is_empty() {
            return None;
        }
        let sealed_files: BTreeSet<&str> = self
            .files
            .iter()
            .filter(|f| f.sealed)
            .map(|f| f.path.as_str())
            .collect();
        let sealed_batches: BTreeSet<&str> = self
            .batches
            .iter()
            .filter(|b| b.check.sealed)
            .map(|b| b.name.as_str())
            .collect();
        let key = Resource::key;
        let mut out: BTreeSet<String> = self
            .resources
            .iter()
            .filter(|r| {
                r.scripts().any(|s| s.sealed)
                    || r.files.iter().any(|f| sealed_files.contains(f.as_str()))
                    || r.batch
                        .as_deref()
                        .is_some_and(|b| sealed_batches.contains(b))
            })
            .map(key)
            .collect();
        // What depends on a resource left out is left out too, until nothing more is.
        loop {
            let more: Vec<String> = self
                .resources
                .iter()
                .filter(|r| !out.contains(&key(r)) && r.after.iter().any(|a| out.contains(a)))
                .map(key)
                .collect();
            if more.is_empty() {
                break;
            }
            out.extend(more);
        }
        let mut kept = self.clone();
        kept.resources.retain(|r| !out.contains(&key(r)));
        let owned: BTreeSet<&str> = kept
            .resources
            .iter()
            .flat_map(|r| r.files.iter().map(String::as_str))
            .collect();
        let owned_by_none = |f: &File| !self.resources.iter().any(|r| r.files.contains(&f.path));
        kept.files
            .retain(|f| !f.sealed && (owned.contains(f.path.as_str()) || owned_by_none(f)));
        let files: BTreeSet<String> = kept.files.iter().map(|f| f.path.clone()).collect();
        for r in &mut kept.resources {
            r.order_after.retain(|o| !out.contains(o));
        }
        kept.triggers.retain_mut(|t| {
            let had = t.paths.len();
            t.paths.retain(|p| files.contains(p));
            !t.script.sealed && (had == 0 || !t.paths.is_empty())
        });
        kept.probes.retain(|p| !p.script.sealed);
        if let Some(reboot) = &mut kept.reboot {
            for hook in [&mut reboot.before_reboot, &mut reboot.after_boot] {
                if hook.as_ref().is_some_and(|h| h.script.sealed) {
                    *hook = None;
                }
            }
        }
        let batched: BTreeSet<&str> = kept
            .resources
            .iter()
            .filter_map(|r| r.batch.as_deref())
            .collect();
        let batches: Vec<Batch> = kept
            .batches
            .iter()
            .filter(|b| !b.check.sealed && batched.contains(b.name.as_str()))
            .cloned()
            .collect();
        kept.batches = batches;
        Some((kept, out.into_iter().collect()))
    }

    /// The canonical bytes of the manifest; the bundle id is their sha256.
    pub fn to_json(&self) -> String {
        // Serialising plain structs, Vecs and BTreeMaps of strings cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The bundle id: the sha256 of the canonical manifest.
    pub fn id(&self) -> String {
        sha256_hex(self.to_json().as_bytes())
    }

    /// Parses a manifest, refusing formats newer than this crate knows.
    pub fn from_json(text: &str) -> Result<Manifest, FormatError> {
        #[derive(Deserialize)]
        struct Probe {
            format: Option<u32>,
        }
        let probe: Probe =
            serde_json::from_str(text).map_err(|e| FormatError::Json(e.to_string()))?;
        match probe.format {
            None => return Err(FormatError::MissingFormat),
            Some(f) if f != FORMAT => return Err(FormatError::UnknownFormat(f)),
            Some(_) => {}
        }
        serde_json::from_str(text).map_err(|e| {
            // Fields are added within a format (`size`, `secret`, `live_only`), so a field this
            // crate does not know means a newer bellc, not a damaged bundle. serde reports it
            // only in its message: "unknown field `NAME`, expected ...".
            let message = e.to_string();
            match message
                .strip_prefix("unknown field `")
                .and_then(|rest| rest.split_once('`'))
            {
                Some((field, _)) => FormatError::UnknownField(field.to_string()),
                None => FormatError::Json(message),
            }
        })
    }

    /// The file entry for a host path.
    pub fn file(&self, path: &str) -> Option<&File> {
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }
}

impl Resource {
    /// Its apply, revert and check scripts, those it has.
    pub fn scripts(&self) -> impl Iterator<Item = &Script> {
        [&self.apply, &self.revert, &self.check]
            .into_iter()
            .flatten()
    }

    /// `KIND:NAME`, the way specs and `after` edges name a resource.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.name)
    }

    /// The identity of an `exec` resource's script, which decides whether it has run: its name,
    /// its content and its exec policy (arguments, environment, schedule), and nothing else.
    /// Divingbell hashes a script's own definition the same way, so a run-once script stays
    /// run when something unrelated on the host (a mount, a package, an edge) changes.
    pub fn exec_identity(&self) -> String {
        #[derive(Serialize)]
        struct Identity<'a> {
            name: &'a str,
            script: Option<&'a str>,
            exec: &'a Option<ExecPolicy>,
        }
        let view = Identity {
            name: &self.name,
            script: self.apply.as_ref().map(|s| s.sha256.as_str()),
            exec: &self.exec,
        };
        let mut hasher = HashWriter(Sha256::new());
        let _ = serde_json::to_writer(&mut hasher, &view);
        hex(&hasher.0.finalize())
    }

    /// The hash of everything about the resource: kind, name, dependencies, scripts and exec
    /// policy, and the path, content hash, mode and ownership of each of its files. Edges that
    /// only order (`order_after`) are left out.
    pub fn compute_hash(&self, files: &[File]) -> String {
        // A view of the resource with its hash left out, serialised straight into the hasher:
        // this runs for every resource of every bundle, so it builds no intermediate JSON.
        #[derive(Serialize)]
        struct Hashed<'a> {
            kind: &'a str,
            name: &'a str,
            files: Vec<&'a File>,
            after: &'a [String],
            apply: &'a Option<Script>,
            revert: &'a Option<Script>,
            #[serde(skip_serializing_if = "Option::is_none")]
            check: &'a Option<Script>,
            // The batch's name, not its script: the script holds every resource of the batch,
            // and one key changing must not apply the others again.
            #[serde(skip_serializing_if = "Option::is_none")]
            batch: &'a Option<String>,
            exec: &'a Option<ExecPolicy>,
            #[serde(skip_serializing_if = "is_false")]
            at_boot: &'a bool,
        }
        let owned: Vec<&File> = self
            .files
            .iter()
            .filter_map(|p| {
                files
                    .binary_search_by(|f| f.path.as_str().cmp(p))
                    .ok()
                    .map(|i| &files[i])
                    .or_else(|| files.iter().find(|f| &f.path == p))
            })
            .collect();
        let view = Hashed {
            kind: &self.kind,
            name: &self.name,
            files: owned,
            after: &self.after,
            apply: &self.apply,
            revert: &self.revert,
            check: &self.check,
            batch: &self.batch,
            exec: &self.exec,
            at_boot: &self.at_boot,
        };
        let mut hasher = HashWriter(Sha256::new());
        // Writing plain data into a hasher cannot fail.
        let _ = serde_json::to_writer(&mut hasher, &view);
        hex(&hasher.0.finalize())
    }
}

impl Release {
    /// The release version: sha256 over the sorted `host bundle` lines, so that it changes
    /// exactly when some host's bundle changes (or hosts come and go).
    pub fn compute_version(hosts: &BTreeMap<String, ReleaseHost>) -> String {
        let mut text = String::new();
        for (name, host) in hosts {
            text.push_str(name);
            text.push(' ');
            text.push_str(&host.bundle);
            text.push('\n');
        }
        sha256_hex(text.as_bytes())
    }

    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// `unsigned().to_json()` without copying the release (a million hosts' map).
    pub fn unsigned_json(&self) -> String {
        // The fields of `Release` in its order, without `sequence` and `expires`.
        #[derive(Serialize)]
        struct Unsigned<'a> {
            format: u32,
            fleet: &'a str,
            version: &'a str,
            hosts: &'a BTreeMap<String, ReleaseHost>,
            waves: &'a [Vec<String>],
            #[serde(skip_serializing_if = "Option::is_none")]
            rollout: Option<&'a Rollout>,
        }
        let view = Unsigned {
            format: self.format,
            fleet: &self.fleet,
            version: &self.version,
            hosts: &self.hosts,
            waves: &self.waves,
            rollout: self.rollout.as_ref(),
        };
        let mut text = serde_json::to_string_pretty(&view).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Whether the two are the same release but for what signing adds (`unsigned() ==
    /// other.unsigned()`, without copying either).
    pub fn same_unsigned(&self, other: &Release) -> bool {
        self.format == other.format
            && self.fleet == other.fleet
            && self.version == other.version
            && self.hosts == other.hosts
            && self.waves == other.waves
            && self.rollout == other.rollout
            && self.identities_required == other.identities_required
            && self.assignments == other.assignments
    }

    /// The release as a build writes it, without what signing adds: what a build compares.
    pub fn unsigned(&self) -> Release {
        Release {
            sequence: None,
            expires: None,
            ..self.clone()
        }
    }
}

/// A build output's newest release, at its top.
pub const RELEASE_FILE: &str = "release.json";
/// The detached minisign signature beside a release file: `release.json.minisig`.
pub const SIGNATURE_SUFFIX: &str = ".minisig";
/// Where a build output keeps every release it held, by version: `releases/<version>.json`.
pub const RELEASES_DIR: &str = "releases";

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    Json(String),
    MissingFormat,
    UnknownFormat(u32),
    /// A field of a newer bellc: the manifest is well-formed, this reader is old.
    UnknownField(String),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Json(e) => write!(f, "the manifest is not valid bundle JSON: {e}"),
            FormatError::MissingFormat => write!(f, "the manifest has no `format` field"),
            FormatError::UnknownFormat(v) => write!(
                f,
                "the manifest has format {v}, but this bell-run reads format {FORMAT} only; \
                 use a bell-run as new as the bellc that built the bundle"
            ),
            FormatError::UnknownField(name) => write!(
                f,
                "the manifest has a field this bell-run does not know (`{name}`): the bundle \
                 was built by a newer bellc; use a bell-run as new as the bellc that built it"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// Checks that a path from a manifest is a plain relative path with no `..`, no root, and no
/// empty or `.` components, so that joining it under a directory can never leave it.
pub fn is_contained_relative(path: &str) -> bool {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.contains("//") {
        return false;
    }
    Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        && !path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
}

/// Checks that a host path from a manifest is absolute and normalised (`/a/b`, no `..`, `.`,
/// `//`, or trailing slash).
pub fn is_normal_absolute(path: &str) -> bool {
    match path.strip_prefix('/') {
        Some(rest) => is_contained_relative(rest),
        None => false,
    }
}

/// Where a host path's content lives inside a bundle directory.
pub fn content_path(bundle_dir: &Path, host_path: &str) -> PathBuf {
    bundle_dir
        .join(ROOT_DIR)
        .join(host_path.trim_start_matches('/'))
}

/// A bundle that failed verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// A `reboot` window that does not parse.
    BadWindow {
        window: String,
        error: String,
    },
    Unreadable {
        path: PathBuf,
        error: String,
    },
    Format(FormatError),
    IdMismatch {
        expected: String,
        actual: String,
    },
    BadPath {
        path: String,
    },
    HashMismatch {
        path: String,
    },
    /// A sealed entry without a keyed digest, or with a size (which would tell a reader the
    /// secret's length).
    BadSealed {
        path: String,
    },
    SizeMismatch {
        path: String,
        expected: u64,
        actual: u64,
    },
    ResourceHash {
        resource: String,
    },
    UnknownFile {
        resource: String,
        path: String,
    },
    UnlistedFile {
        path: PathBuf,
    },
    DuplicatePath {
        path: String,
    },
    NotCanonical,
    Unsorted {
        path: String,
    },
    BadMode {
        path: String,
        mode: String,
    },
    BadOwner {
        path: String,
    },
    BadDependency {
        resource: String,
        after: String,
    },
    DuplicateResource {
        resource: String,
    },
    ExecWithoutScript {
        resource: String,
    },
    /// A resource names a batch the manifest does not hold, or has a check of its own too.
    BadBatch {
        resource: String,
        batch: String,
    },
    /// Two batches share a name, or a name is not lowercase letters, digits and `-`.
    BadBatchName {
        name: String,
    },
    NotAFile {
        path: PathBuf,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Unreadable { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            VerifyError::Format(e) => write!(f, "{e}"),
            VerifyError::IdMismatch { expected, actual } => write!(
                f,
                "the manifest hashes to {actual}, not to the bundle id {expected}: it was edited after the build"
            ),
            VerifyError::BadPath { path } => write!(
                f,
                "the manifest names the path {path:?}, which is not a normalised path inside the bundle or the root"
            ),
            VerifyError::SizeMismatch {
                path,
                expected,
                actual,
            } => write!(
                f,
                "{path} holds {actual} bytes, not the {expected} the manifest lists"
            ),
            VerifyError::HashMismatch { path } => {
                write!(f, "{path} does not match the sha256 in the manifest")
            }
            VerifyError::BadSealed { path } => {
                write!(
                    f,
                    "{path} is sealed but not named by a keyed digest alone (no size may be given)"
                )
            }
            VerifyError::ResourceHash { resource } => {
                write!(f, "the hash of resource {resource} does not match its content")
            }
            VerifyError::UnknownFile { resource, path } => {
                write!(f, "resource {resource} owns {path}, which the manifest does not list")
            }
            VerifyError::UnlistedFile { path } => write!(
                f,
                "{} is in the bundle but not in its manifest",
                path.display()
            ),
            VerifyError::DuplicatePath { path } => {
                write!(f, "the manifest lists {path} more than once")
            }
            VerifyError::NotCanonical => write!(
                f,
                "the manifest is not in canonical form, so its sha256 is not the bundle id: it was edited after the build"
            ),
            VerifyError::Unsorted { path } => {
                write!(f, "the manifest's files are not sorted by path at {path}")
            }
            VerifyError::BadMode { path, mode } => {
                write!(f, "{path} has mode {mode:?}; expected four octal digits such as \"0644\"")
            }
            VerifyError::BadOwner { path } => write!(f, "{path} has an empty owner or group"),
            VerifyError::BadDependency { resource, after } => write!(
                f,
                "resource {resource} comes after {after}, which is not an earlier resource of the bundle"
            ),
            VerifyError::DuplicateResource { resource } => {
                write!(f, "the manifest lists resource {resource} more than once")
            }
            VerifyError::ExecWithoutScript { resource } => {
                write!(f, "exec resource {resource} has no apply script")
            }
            VerifyError::BadBatch { resource, batch } => write!(
                f,
                "resource {resource} is checked by the batch {batch:?}, which the manifest does not hold, or has a check of its own as well"
            ),
            VerifyError::BadWindow { window, error } => {
                write!(f, "the reboot window {window:?} does not parse: {error}")
            }
            VerifyError::BadBatchName { name } => write!(
                f,
                "the batch name {name:?} is taken twice or is not lowercase letters, digits and '-'"
            ),
            VerifyError::NotAFile { path } => write!(
                f,
                "{} in the bundle is not a regular file or directory (a symlink or device)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

/// The directory inside a bundle that holds every script.
pub const SCRIPTS_DIR: &str = "scripts";

/// Whether `text` looks like a bundle id: 64 lowercase hex digits.
pub fn is_bundle_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses a manifest file mode (`"0644"`): four octal digits.
pub fn parse_mode(mode: &str) -> Option<u32> {
    if mode.len() != 4 || !mode.bytes().all(|b| matches!(b, b'0'..=b'7')) {
        return None;
    }
    u32::from_str_radix(mode, 8).ok()
}

/// What the manifest says a file of the bundle directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub sha256: String,
    /// The length in bytes, when the manifest lists it.
    pub size: Option<u64>,
}

/// Every file a bundle directory holds besides its manifest, by path relative to the bundle,
/// with its sha256 and size — after checking everything about the manifest that does not need the
/// files: normalised, contained paths, sorted unique files, modes, owners, dependencies,
/// resource hashes. `bell-run pull` fetches exactly these, and [`verify_dir`] finds exactly
/// these.
pub fn expected_files(manifest: &Manifest) -> Result<BTreeMap<PathBuf, Expected>, VerifyError> {
    let mut expected: BTreeMap<PathBuf, Expected> = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for file in &manifest.files {
        if !is_normal_absolute(&file.path) {
            return Err(VerifyError::BadPath {
                path: file.path.clone(),
            });
        }
        if let Some(prev) = previous {
            if prev >= file.path.as_str() {
                return Err(if prev == file.path {
                    VerifyError::DuplicatePath {
                        path: file.path.clone(),
                    }
                } else {
                    VerifyError::Unsorted {
                        path: file.path.clone(),
                    }
                });
            }
        }
        previous = Some(&file.path);
        if parse_mode(&file.mode).is_none() {
            return Err(VerifyError::BadMode {
                path: file.path.clone(),
                mode: file.mode.clone(),
            });
        }
        if file.owner.is_empty() || file.group.is_empty() {
            return Err(VerifyError::BadOwner {
                path: file.path.clone(),
            });
        }
        if file.sealed {
            // Not in the bundle: the host's sealed index brings it.
            if !is_bundle_id(&file.sha256) || file.size.is_some() {
                return Err(VerifyError::BadSealed {
                    path: file.path.clone(),
                });
            }
            continue;
        }
        let rel = Path::new(ROOT_DIR).join(file.path.trim_start_matches('/'));
        let what = Expected {
            sha256: file.sha256.clone(),
            size: file.size,
        };
        expected.insert(rel, what);
    }

    let mut scripts: Vec<&Script> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for resource in &manifest.resources {
        let key = resource.key();
        for dep in resource.after.iter().chain(&resource.order_after) {
            if !keys.contains(dep) {
                return Err(VerifyError::BadDependency {
                    resource: key,
                    after: dep.clone(),
                });
            }
        }
        if !keys.insert(key.clone()) {
            return Err(VerifyError::DuplicateResource { resource: key });
        }
        for path in &resource.files {
            if manifest.file(path).is_none() {
                return Err(VerifyError::UnknownFile {
                    resource: key,
                    path: path.clone(),
                });
            }
        }
        if resource.exec.is_some() && resource.apply.is_none() {
            return Err(VerifyError::ExecWithoutScript { resource: key });
        }
        if resource.compute_hash(&manifest.files) != resource.hash {
            return Err(VerifyError::ResourceHash { resource: key });
        }
        scripts.extend(
            resource
                .apply
                .iter()
                .chain(resource.revert.iter())
                .chain(resource.check.iter()),
        );
    }
    for trigger in &manifest.triggers {
        for prefix in &trigger.paths {
            let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
            if !(trimmed.is_empty() || is_normal_absolute(trimmed)) || !prefix.starts_with('/') {
                return Err(VerifyError::BadPath {
                    path: prefix.clone(),
                });
            }
        }
        scripts.push(&trigger.script);
    }
    let mut batches = std::collections::BTreeSet::new();
    for batch in &manifest.batches {
        if !is_batch_name(&batch.name) || !batches.insert(batch.name.as_str()) {
            return Err(VerifyError::BadBatchName {
                name: batch.name.clone(),
            });
        }
        scripts.push(&batch.check);
    }
    for resource in &manifest.resources {
        if let Some(batch) = &resource.batch {
            if !batches.contains(batch.as_str()) || resource.check.is_some() {
                return Err(VerifyError::BadBatch {
                    resource: resource.key(),
                    batch: batch.clone(),
                });
            }
        }
    }
    if let Some(reboot) = &manifest.reboot {
        for window in &reboot.windows {
            Window::parse(window).map_err(|error| VerifyError::BadWindow {
                window: window.clone(),
                error,
            })?;
        }
        scripts.extend(reboot.hooks().map(|h| &h.script));
    }
    let mut probes = std::collections::BTreeSet::new();
    for probe in &manifest.probes {
        if !probes.insert(probe.name.as_str()) {
            return Err(VerifyError::DuplicateResource {
                resource: format!("health:{}", probe.name),
            });
        }
        scripts.push(&probe.script);
    }
    let mut sealed_scripts = std::collections::BTreeSet::new();
    for script in scripts {
        let inside_scripts = script
            .path
            .strip_prefix(SCRIPTS_DIR)
            .is_some_and(|rest| rest.starts_with('/'));
        if !is_contained_relative(&script.path) || !inside_scripts {
            return Err(VerifyError::BadPath {
                path: script.path.clone(),
            });
        }
        let rel = PathBuf::from(&script.path);
        if script.sealed {
            if !is_bundle_id(&script.sha256) || script.size.is_some() {
                return Err(VerifyError::BadSealed {
                    path: script.path.clone(),
                });
            }
            sealed_scripts.insert(rel);
            continue;
        }
        let what = Expected {
            sha256: script.sha256.clone(),
            size: script.size,
        };
        if let Some(other) = expected.get(&rel) {
            if other != &what {
                return Err(VerifyError::HashMismatch {
                    path: script.path.clone(),
                });
            }
        }
        expected.insert(rel, what);
    }
    // One path is either in the bundle or sealed, never both.
    if let Some(both) = sealed_scripts.iter().find(|p| expected.contains_key(*p)) {
        return Err(VerifyError::HashMismatch {
            path: both.display().to_string(),
        });
    }
    Ok(expected)
}

/// The largest manifest bell-run reads: ten thousand resources are a few MiB.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// Opens a plain file for reading: no symlink is followed (a `bundle.json` that links to
/// `/dev/zero` would never end), and nothing but a regular file is accepted (a FIFO would block
/// until a writer came). Checked on the open descriptor, so what is read is what was checked.
pub fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a symlink, not a plain file",
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a plain file",
        ));
    }
    Ok((file, meta.len()))
}

/// Reads a plain file (see [`open_regular`]) of at most `max` bytes.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular(path)?;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{len} bytes, more than the {max} a bundle holds"),
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("more than the {max} bytes a bundle holds"),
        ));
    }
    Ok(bytes)
}

/// The sha256 of a plain file (see [`open_regular`]), read in pieces: a large file costs no
/// memory, and a FIFO or a link is an error rather than a hang.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    hash_regular(path).map(|(sha, _)| sha)
}

/// The sha256 of a plain file and its length, read in pieces.
fn hash_regular(path: &Path) -> std::io::Result<(String, u64)> {
    let (mut file, _) = open_regular(path)?;
    let mut hasher = Sha256::new();
    let n = std::io::copy(&mut file, &mut hasher)?;
    Ok((hex(&hasher.finalize()), n))
}

/// Verifies a bundle directory completely before anything uses it: the manifest parses and is
/// of a known format, its bytes are canonical (so its sha256 is `Manifest::id`), the directory
/// name matches the id when it is one (`bundles/<id>`, also when reached through a symlink),
/// every path is normalised, every file and script has its listed sha256, every resource hash
/// matches its content, and the directory holds nothing that the manifest does not list.
pub fn verify_dir(dir: &Path) -> Result<Manifest, VerifyError> {
    let unreadable = |path: &Path, e: std::io::Error| VerifyError::Unreadable {
        path: path.to_path_buf(),
        error: e.to_string(),
    };
    let manifest_path = dir.join(MANIFEST_FILE);
    let bytes = read_regular(&manifest_path, MAX_MANIFEST_BYTES)
        .map_err(|e| unreadable(&manifest_path, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        VerifyError::Format(FormatError::Json("the manifest is not UTF-8".to_string()))
    })?;
    let manifest = Manifest::from_json(text).map_err(VerifyError::Format)?;
    let actual = sha256_hex(&bytes);
    if manifest.to_json().as_bytes() != bytes.as_slice() {
        return Err(VerifyError::NotCanonical);
    }
    // A bundle reached through `hosts/<name>` is a symlink to `bundles/<id>`: resolve it, so
    // that the id in the directory name is checked there too.
    let resolved = dir.canonicalize().map_err(|e| unreadable(dir, e))?;
    if let Some(name) = resolved.file_name().and_then(|n| n.to_str()) {
        if is_bundle_id(name) && name != actual {
            return Err(VerifyError::IdMismatch {
                expected: name.to_string(),
                actual,
            });
        }
    }

    let expected = expected_files(&manifest)?;
    let sealed: std::collections::BTreeSet<PathBuf> =
        manifest.sealed().into_keys().map(PathBuf::from).collect();

    // Walk the directory: every regular file must be listed with its hash, and nothing else
    // (no symlinks, no devices) may be there.
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let entries = std::fs::read_dir(&abs).map_err(|e| unreadable(&abs, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(&abs, e))?;
            let child = rel.join(entry.file_name());
            let kind = entry
                .file_type()
                .map_err(|e| unreadable(&dir.join(&child), e))?;
            if kind.is_dir() {
                stack.push(child);
            } else if kind.is_file() {
                if child.as_os_str() == MANIFEST_FILE {
                    continue;
                }
                let Some(want) = expected.get(&child) else {
                    // A sealed entry's content, opened by bell-run into its own copy: it is
                    // checked against the host's sealed index when it is opened, not here.
                    if sealed.contains(&child) {
                        continue;
                    }
                    return Err(VerifyError::UnlistedFile { path: child });
                };
                // The size first, from the directory entry: a file much larger than listed is
                // refused without being read.
                let path = dir.join(&child);
                let len = entry.metadata().map_err(|e| unreadable(&path, e))?.len();
                if let Some(size) = want.size.filter(|size| *size != len) {
                    return Err(VerifyError::SizeMismatch {
                        path: child.display().to_string(),
                        expected: size,
                        actual: len,
                    });
                }
                let (sha256, read) = hash_regular(&path).map_err(|e| unreadable(&path, e))?;
                if want.size.is_some_and(|size| size != read) || sha256 != want.sha256 {
                    return Err(VerifyError::HashMismatch {
                        path: child.display().to_string(),
                    });
                }
                found.insert(child);
            } else {
                return Err(VerifyError::NotAFile { path: child });
            }
        }
    }
    if let Some(missing) = expected.keys().find(|p| !found.contains(*p)) {
        return Err(VerifyError::Unreadable {
            path: dir.join(missing),
            error: "listed in the manifest but missing from the bundle".to_string(),
        });
    }
    Ok(manifest)
}

/// [`verify_dir`] of a bundle whose sealed entries bell-run has opened into it (its own copy,
/// `generations/<id>`): the manifest as the host sees it ([`Manifest::opened`]). A sealed
/// entry whose content is not there is an error.
pub fn verify_opened(dir: &Path) -> Result<Manifest, VerifyError> {
    opened_in(verify_dir(dir)?, dir)
}

/// `manifest` (verified already) as the host sees it, its sealed entries opened from `dir`
/// ([`Manifest::opened`]): a sealed entry whose content is not there is an error.
pub fn opened_in(manifest: Manifest, dir: &Path) -> Result<Manifest, VerifyError> {
    if manifest.sealed().is_empty() {
        return Ok(manifest);
    }
    manifest
        .opened(|rel| hash_regular(&dir.join(rel)).ok())
        .map_err(|rel| VerifyError::Unreadable {
            path: dir.join(rel),
            error: "a sealed secret that was never opened here".to_string(),
        })
}

#[cfg(test)]
mod verify_tests {
    use super::*;

    #[test]
    fn bundle_ids_are_64_lowercase_hex() {
        assert!(is_bundle_id(&sha256_hex(b"x")));
        assert!(!is_bundle_id(&sha256_hex(b"x").to_uppercase()));
        assert!(!is_bundle_id("node-001"));
    }

    #[test]
    fn modes_are_four_octal_digits() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("4755"), Some(0o4755));
        assert_eq!(parse_mode("644"), None);
        assert_eq!(parse_mode("0689"), None);
        assert_eq!(parse_mode("+644"), None);
    }

    #[test]
    fn verify_dir_refuses_a_missing_manifest() {
        let dir = std::env::temp_dir().join(format!("bell-bundle-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let result = verify_dir(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(result, Err(VerifyError::Unreadable { .. })));
    }

    #[test]
    fn a_sealed_entry_is_named_by_its_digest_and_need_not_be_in_the_bundle() {
        let dir = std::env::temp_dir().join(format!("bell-bundle-sealed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sealed = |sha256: String, size: Option<u64>| File {
            path: "/etc/app/secret.conf".into(),
            sha256,
            size,
            mode: "0600".into(),
            owner: "root".into(),
            group: "root".into(),
            secret: true,
            sealed: true,
        };
        let write = |file: File| {
            let mut resource = Resource {
                kind: "file".into(),
                name: file.path.clone(),
                hash: String::new(),
                files: vec![file.path.clone()],
                after: vec![],
                order_after: vec![],
                apply: None,
                revert: None,
                check: None,
                batch: None,
                exec: None,
                at_boot: false,
            };
            resource.hash = resource.compute_hash(std::slice::from_ref(&file));
            let manifest = Manifest {
                format: FORMAT,
                target: "debian-12".into(),
                fleet: "f".into(),
                resources: vec![resource],
                files: vec![file],
                triggers: vec![],
                probes: vec![],
                batches: vec![],
                snapshots: Default::default(),
                reboot: None,
            };
            std::fs::write(dir.join(MANIFEST_FILE), manifest.to_json()).unwrap();
            manifest
        };
        let manifest = write(sealed(sha256_hex(b"keyed"), None));
        assert!(manifest.files[0].is_secret());
        assert_eq!(
            manifest.sealed().into_keys().collect::<Vec<_>>(),
            ["root/etc/app/secret.conf"]
        );
        // As the mirror serves it: without the content.
        assert_eq!(verify_dir(&dir).unwrap(), manifest);
        // As bell-run keeps it: with the opened content in its place.
        std::fs::create_dir_all(dir.join("root/etc/app")).unwrap();
        std::fs::write(dir.join("root/etc/app/secret.conf"), "token=x\n").unwrap();
        assert_eq!(verify_dir(&dir).unwrap(), manifest);
        // A size would tell the secret's length; a digest must be one.
        write(sealed(sha256_hex(b"keyed"), Some(8)));
        assert!(matches!(
            verify_dir(&dir),
            Err(VerifyError::BadSealed { .. })
        ));
        write(sealed("not-a-digest".into(), None));
        assert!(matches!(
            verify_dir(&dir),
            Err(VerifyError::BadSealed { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reboot_window_that_does_not_parse_and_a_missing_hook_do_not_verify() {
        let hook = |path: &str| Probe {
            name: "before-reboot".into(),
            script: Script {
                path: path.into(),
                sha256: sha256_hex(b"echo drain\n"),
                size: Some(11),
                secret: false,
                sealed: false,
                live_only: false,
            },
            timeout: 300,
            retries: 1,
            interval: 1,
            offline: Offline::Skip,
        };
        let reboot = |window: &str| Reboot {
            policy: RebootPolicy::WhenRequired,
            method: RebootMethod::Reboot,
            windows: vec![window.into()],
            before_reboot: Some(hook("scripts/reboot/before-reboot.sh")),
            after_boot: None,
            kernel_args: vec![],
            kernel_args_removed: vec![],
        };
        let manifest = |reboot: Reboot| Manifest {
            format: FORMAT,
            target: "debian-12".into(),
            fleet: "f".into(),
            resources: vec![],
            files: vec![],
            triggers: vec![],
            probes: vec![],
            batches: vec![],
            snapshots: Default::default(),
            reboot: Some(reboot),
        };
        let files = expected_files(&manifest(reboot("Sat 02:00-05:00"))).unwrap();
        assert!(files.contains_key(Path::new("scripts/reboot/before-reboot.sh")));
        assert!(matches!(
            expected_files(&manifest(reboot("Sat 02:00-05:00 Mars/Olympus"))),
            Err(VerifyError::BadWindow { .. })
        ));
        let mut outside = reboot("Sat 02:00-05:00");
        outside.before_reboot = Some(hook("../../etc/passwd"));
        assert!(expected_files(&manifest(outside)).is_err());
    }

    #[test]
    fn unsigned_json_is_the_unsigned_release() {
        let host = |bundle: &str, rack: &str| ReleaseHost {
            bundle: bundle.into(),
            address: Some("10.0.0.1".into()),
            labels: Labels::new(BTreeMap::from([("rack".to_string(), rack.to_string())])),
            identity: None,
            secrets: None,
            snapshots: Default::default(),
            reboots: false,
        };
        let mut release = Release {
            format: 1,
            fleet: "f".into(),
            version: "v".into(),
            hosts: BTreeMap::from([("a".into(), host("x", "r1")), ("b".into(), host("y", "r2"))]),
            waves: vec![vec!["a".into()], vec!["b".into()]],
            sequence: Some(7),
            expires: Some(9),
            rollout: None,
            identities_required: false,
            assignments: Vec::new(),
        };
        for rollout in [
            None,
            Some(Rollout {
                batch_by: Some("rack".into()),
                max_unavailable: "1".into(),
                slots: BTreeMap::from([("r1".into(), 1)]),
            }),
        ] {
            release.rollout = rollout;
            assert_eq!(release.unsigned_json(), release.unsigned().to_json());
            assert!(release.same_unsigned(&release.unsigned()));
            let mut other = release.unsigned();
            other.waves.reverse();
            assert!(!release.same_unsigned(&other));
        }
    }

    #[test]
    fn without_sealed_leaves_out_what_needs_a_secret_and_what_depends_on_it() {
        let script = |path: &str, sealed: bool| Script {
            path: path.into(),
            sha256: sha256_hex(path.as_bytes()),
            size: (!sealed).then_some(1),
            secret: sealed,
            sealed,
            live_only: false,
        };
        let file = |path: &str, sealed: bool| File {
            path: path.into(),
            sha256: sha256_hex(path.as_bytes()),
            size: (!sealed).then_some(1),
            mode: if sealed { "0600" } else { "0644" }.into(),
            owner: "root".into(),
            group: "root".into(),
            secret: sealed,
            sealed,
        };
        let resource =
            |kind: &str, name: &str, files: &[&str], after: &[&str], apply: Option<Script>| {
                Resource {
                    kind: kind.into(),
                    name: name.into(),
                    hash: String::new(),
                    files: files.iter().map(|f| f.to_string()).collect(),
                    after: after.iter().map(|a| a.to_string()).collect(),
                    order_after: vec!["user:ops".into()],
                    apply,
                    revert: None,
                    check: None,
                    batch: None,
                    exec: None,
                    at_boot: false,
                }
            };
        let files = vec![file("/etc/motd", false), file("/etc/app/token", true)];
        let mut resources = vec![
            resource(
                "user",
                "ops",
                &[],
                &[],
                Some(script("scripts/user/ops.apply", true)),
            ),
            resource("file", "/etc/app/token", &["/etc/app/token"], &[], None),
            resource(
                "exec",
                "setup.sh",
                &[],
                &["user:ops"],
                Some(script("scripts/exec/setup.sh", false)),
            ),
            resource("file", "/etc/motd", &["/etc/motd"], &[], None),
        ];
        for r in &mut resources {
            r.hash = r.compute_hash(&files);
        }
        let manifest = Manifest {
            format: FORMAT,
            target: "debian-12".into(),
            fleet: "f".into(),
            resources,
            files,
            triggers: vec![
                Trigger {
                    name: "reload".into(),
                    paths: vec!["/etc/app/token".into()],
                    script: script("scripts/trigger/reload.sh", false),
                },
                Trigger {
                    name: "motd".into(),
                    paths: vec!["/etc/motd".into(), "/etc/app/token".into()],
                    script: script("scripts/trigger/motd.sh", false),
                },
            ],
            probes: vec![],
            batches: vec![],
            snapshots: Default::default(),
            reboot: None,
        };
        let (kept, out) = manifest.without_sealed().expect("something is sealed");
        assert_eq!(out, ["exec:setup.sh", "file:/etc/app/token", "user:ops"]);
        assert_eq!(kept.resources.len(), 1);
        // What stays is as it was: the whole bundle's apply finds it unchanged.
        assert_eq!(kept.resources[0].hash, manifest.resources[3].hash);
        assert!(kept.resources[0].order_after.is_empty());
        assert_eq!(kept.files, [manifest.files[0].clone()]);
        assert!(kept.sealed().is_empty());
        assert_eq!(kept.triggers.len(), 1);
        assert_eq!(kept.triggers[0].paths, ["/etc/motd"]);
        assert_ne!(kept.id(), manifest.id());
        assert!(kept.without_sealed().is_none());
    }
}

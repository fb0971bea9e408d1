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
// A byte index into a string read from a host, a store or a mirror panics on a multibyte
// character: strings are cut with `get` or at a found character boundary.
#![cfg_attr(not(test), deny(clippy::string_slice))]
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

pub mod accept;
pub mod confirm;
mod exec;
pub mod live;
pub mod prometheus;
mod reboot;
mod release;
pub mod shown;
pub mod trust;
mod verify;
pub use confirm::Confirm;
pub use exec::{ExecPolicy, Offline, OnFailure, Rerun};
pub use reboot::{Reboot, RebootMethod, RebootPolicy, Window};
pub use release::*;
pub use shown::{is_unsafe_on_a_terminal, one_line};
pub use verify::*;

/// The manifest format this crate writes and the newest one it reads.
pub const FORMAT: u32 = 1;

/// The exit status by which an apply script says, when run offline (`BELL_OFFLINE=1`), that it
/// can only do its work on a live host (installing a package, say). bell-run records the
/// resource as `deferred`, which is not a failure, and applies it again on the next run.
pub const EXIT_DEFERRED: i32 = 75;

/// How an apply script says something the operator should read although it succeeded (what
/// the host lacks that the resource will miss, say): a line of its output beginning with this.
/// bell-run shows each such line's text on the resource's line of the apply (`ok: TEXT`) and
/// keeps it in the resource's record for `bell-run status`. A batch's apply gives its
/// resources' notes as the third field of their `KEY\tok\tNOTE` line instead.
pub const NOTE_PREFIX: &str = "bell-note: ";

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
    /// How long the host has, after a live apply of this bundle, to reach the fleet again and
    /// pass its probes before it goes back by itself (`confirm` of the spec); absent: it keeps
    /// what it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
    /// Files that follow which providers of a service are ready (`live` of the spec), by path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<live::Live>,
    /// The services this host provides: it publishes its health, signed, for their consumers'
    /// live files (`ready/HOST` in the fleet's store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<String>,
    /// Who may provide each service a resource waits for, as the live files' `providers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, Vec<live::Provider>>,
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
    /// Host paths of managed files this resource writes a line of, beside other resources'
    /// lines (each sysctl key's line of `/etc/sysctl.d/60-bell.conf`). Not part of its hash,
    /// since the others' lines change the file; when the file drifted on the host, the
    /// resource is the one marked drifted and applied again as the file is put back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines_in: Vec<String>,
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
    /// Services this resource waits for (`wait-for` of the spec): bell-run applies it once
    /// that many of each service's providers ([`Manifest::providers`]) are ready, and leaves it
    /// `waiting` when they are not within the timeout. Not part of its hash: a wait changes
    /// when it runs, not what it does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_for: Vec<live::WaitFor>,
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
/// batch that it gives no line for has a failed check. It is run with two arguments per
/// resource it is asked about, as the apply is: its `KIND:NAME` and its state directory (what
/// each resource's apply recorded there, the check may read); it need answer only for those.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    /// Lowercase letters, digits and `-`: it names the batch's log directory.
    pub name: String,
    pub check: Script,
    /// Brings several resources of the batch live in one process (a first apply sets twenty
    /// sysctl keys with one `sh`, not twenty). When two or more of its resources are due,
    /// bell-run runs it once, where the first of them stands in apply order, with two
    /// arguments per due resource, its `KIND:NAME` and its state directory (their
    /// `BELL_STATE`); it prints `KIND:NAME<TAB>ok` or `KIND:NAME<TAB>failed<TAB>why` for each
    /// and exits 0; other lines are its log. A due resource without a line has failed. One
    /// resource due alone runs its own apply, which stays what its hash is made of, so each
    /// resource of such a batch has one. Only resources without an `after` or `order_after`
    /// are run together (running them early orders nothing wrongly); one that has either runs
    /// its own apply in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply: Option<Script>,
}

impl Batch {
    /// Its check and its apply, those it has.
    pub fn scripts(&self) -> impl Iterator<Item = &Script> {
        std::iter::once(&self.check).chain(self.apply.as_ref())
    }
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

/// The first `max` characters of `text` (all of it when shorter), for naming an id or a
/// version in a message: cut at a character, never inside one, as `text` may come from a
/// mirror or a store and hold anything.
pub fn short(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => text.split_at(at).0,
        None => text,
    }
}

/// A bundle id, generation or release version as people read it: its first 12 characters.
pub fn short_id(id: &str) -> &str {
    short(id, 12)
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

/// What every command shows of a secret's content: nothing about it, not even its size or a
/// digest (an unkeyed hash of a short password confirms a guess).
pub const REDACTED: &str = "<secret>";

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
    hex::encode(Sha256::digest(bytes))
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
    /// [`Self::scripts`], to change: what seals a bundle and what opens it again must reach
    /// every script, a batch's apply as well as a resource's.
    pub fn scripts_mut(&mut self) -> impl Iterator<Item = &mut Script> {
        self.resources
            .iter_mut()
            .flat_map(|r| [&mut r.apply, &mut r.revert, &mut r.check])
            .flatten()
            .chain(self.triggers.iter_mut().map(|t| &mut t.script))
            .chain(self.probes.iter_mut().map(|p| &mut p.script))
            .chain(
                self.batches
                    .iter_mut()
                    .flat_map(|b| std::iter::once(&mut b.check).chain(b.apply.as_mut())),
            )
            .chain(
                self.reboot
                    .iter_mut()
                    .flat_map(Reboot::hooks_mut)
                    .map(|h| &mut h.script),
            )
    }

    /// Every script the manifest names: each resource's apply, revert and check, the
    /// triggers', the probes' and the batches' (a script named twice comes twice).
    pub fn scripts(&self) -> impl Iterator<Item = &Script> {
        self.resources
            .iter()
            .flat_map(Resource::scripts)
            .chain(self.triggers.iter().map(|t| &t.script))
            .chain(self.probes.iter().map(|p| &p.script))
            .chain(self.batches.iter().flat_map(Batch::scripts))
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
        for script in opened.scripts_mut().filter(|s| s.sealed) {
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
            .filter(|b| b.scripts().any(|s| s.sealed))
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
            r.lines_in.retain(|p| files.contains(p));
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
            .filter(|b| !b.scripts().any(|s| s.sealed) && batched.contains(b.name.as_str()))
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
        hex::encode(hasher.0.finalize())
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
        hex::encode(hasher.0.finalize())
    }
}

#[cfg(test)]
mod short_tests {
    #[test]
    fn short_cuts_at_a_character_never_inside_one() {
        assert_eq!(super::short("0123456789abcdef0123", 16), "0123456789abcdef");
        assert_eq!(super::short("abc", 16), "abc");
        // Fifteen bytes then a three-byte character: a byte index of 16 would split it.
        let version = "aaaaaaaaaaaaaaa\u{20ac}tail";
        assert_eq!(super::short(version, 16), "aaaaaaaaaaaaaaa\u{20ac}");
        assert_eq!(super::short("\u{1f600}\u{1f600}", 1), "\u{1f600}");
    }
}

//! `release.json`: which bundle each host of a fleet runs, and what the fleet side needs to
//! roll it out (waves, the disruption budget, identities, sealed secrets).

use crate::{is_bundle_id, is_false, sha256_hex, FormatError, Snapshots, FORMAT};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The services it provides that some live file or `wait-for` follows (its bundle's
    /// [`Manifest::provides`]): whose health the fleet's page counts as each service's ready
    /// providers. Signed with the release, so a reader never learns a provider from the store.
    #[serde(default, skip_serializing_if = "is_empty_shared_list")]
    pub provides: std::sync::Arc<Vec<String>>,
}

fn is_empty_shared_list(list: &std::sync::Arc<Vec<String>>) -> bool {
    list.is_empty()
}

fn is_empty_shared(snapshots: &std::sync::Arc<Snapshots>) -> bool {
    snapshots.is_empty()
}

/// A host's labels. Shared: the spec, the resolution and the release hold the same map, and
/// hosts with equal labels (a rack's) hold one map between them; at a million hosts each copy
/// was half a gigabyte.
pub type Labels = std::sync::Arc<BTreeMap<String, String>>;

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

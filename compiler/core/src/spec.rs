//! The typed fleet spec: what `lower` produces from KDL, before any host is considered.
//!
//! Resources are kept as *partial* declarations (a map from field name to a typed value with
//! its span), because a resource in an override only sets what it changes and inherits the rest
//! (LANGUAGE.md: "property by property"). `resolve` merges the layers a host gets and only then
//! checks that every required field is present, pointing at the declarations involved.

use crate::diagnostic::Invalid;
use crate::source::Span;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
pub struct Spec {
    pub fleet: Fleet,
    pub hosts: Vec<Host>,
    pub base: Layer,
    pub overrides: Vec<Override>,
    /// Labels the build gives hosts (`assign`), in the order written.
    pub assigns: Vec<Assign>,
    pub rollout: Option<Rollout>,
    /// Every `include` glob with the files it matched, so that an incremental rebuild can tell
    /// when a new file starts matching.
    pub globs: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)>,
    /// `--allow-unknown-sysctl`: keys the target's kernel list does not have are accepted
    /// (set by the command line, not by the spec).
    pub allow_unknown_sysctl: bool,
    /// Resources whose declaration had an error (reported, and the node dropped): a `remove`
    /// or an `after` naming one is not a second mistake, and is not reported as one.
    pub rejected: BTreeSet<(Kind, String)>,
    /// Hosts whose identity was wrong (reported): not missing one as well.
    pub rejected_identities: BTreeSet<String>,
}

#[derive(Debug, Clone)]
pub struct Fleet {
    pub name: String,
    pub target: Option<Spanned<String>>,
    pub mode: OverrideMode,
    pub span: Option<Span>,
    /// `identities="required"`: every host must have an identity (where it was said).
    pub identities_required: Option<Span>,
    /// `secrets="plaintext"`: secrets are in bundles in the clear, for a trial (where it was
    /// said). Without it every secret leaves the build only sealed to its host's identity.
    pub secrets_plaintext: Option<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideMode {
    /// Every matching override applies: label layers in declaration order, then host layers.
    Layered,
    /// Divingbell's rule: at most one override; a host override beats label overrides; among
    /// label overrides the last matching one wins.
    Exclusive,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub address: Option<String>,
    pub target: Option<Spanned<String>>,
    pub labels: bell_bundle::Labels,
    /// The host's identity, `ssh-ed25519 BASE64` (checked, without its comment).
    pub identity: Option<String>,
    /// Its place in the order hosts were accepted (`bellc hosts accept`), from the inventory.
    pub accepted: Option<u64>,
    /// The `assign` nodes (indices into `Spec::assigns`) that gave it a label.
    pub assigned: Vec<usize>,
    /// Where the host was declared: its `host` node, or its entry's `inventory` node.
    pub span: Span,
}

/// The configuration one layer contributes: the base (top level) or one override.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    pub sysctl: Vec<SysctlSetting>,
    pub resources: Vec<ResourceDecl>,
    pub removes: Vec<Removal>,
    pub services: Vec<ServiceDecl>,
    pub uses: Vec<UsesDecl>,
}

#[derive(Debug, Clone)]
pub struct SysctlSetting {
    pub key: String,
    /// `None` is `#null`: remove an inherited key.
    pub value: Option<String>,
    pub span: Span,
    pub key_span: Span,
    pub value_span: Span,
    /// `unknown=#true`: a key the target's kernel list does not have (an out-of-tree module's).
    pub unknown: bool,
}

/// One resource declaration in one layer; every field optional until resolution.
#[derive(Debug, Clone)]
pub struct ResourceDecl {
    pub kind: Kind,
    pub name: String,
    pub name_span: Span,
    pub span: Span,
    pub fields: BTreeMap<&'static str, Field>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub value: Value,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<String>),
    Map(BTreeMap<String, String>),
    Debconf(Vec<Debconf>),
    WaitFor(Vec<WaitFor>),
}

/// `wait-for "SERVICE" count=N timeout=T` on a resource (the seed notes' `service_blocker`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WaitFor {
    pub service: String,
    pub count: u32,
    /// Seconds.
    pub timeout: u64,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Debconf {
    pub question: String,
    pub kind: String,
    /// As debconf-set-selections wants it: booleans become `true`/`false`.
    pub value: String,
}

#[derive(Debug, Clone)]
pub struct Removal {
    pub kind: RefKind,
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct ServiceDecl {
    pub name: String,
    pub port: Option<u16>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct UsesDecl {
    pub name: String,
    pub count: u32,
    pub runtime: bool,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Override {
    pub name: String,
    pub span: Span,
    /// Any one match may hold; within a match every label must hold.
    pub matches: Vec<Match>,
    pub layer: Layer,
}

impl Override {
    /// A host override names hosts only (`match host="..."`); it applies after label layers.
    pub fn is_host_override(&self) -> bool {
        !self.matches.is_empty()
            && self
                .matches
                .iter()
                .all(|m| m.conditions.iter().all(|c| c.label == "host"))
    }
}

#[derive(Debug, Clone)]
pub struct Match {
    pub conditions: Vec<Condition>,
    pub span: Span,
}

impl Match {
    /// Whether every condition holds for a host of this name and labels.
    pub fn holds(&self, name: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.conditions.iter().all(|c| {
            if c.label == "host" {
                name == c.value
            } else {
                labels.get(&c.label) == Some(&c.value)
            }
        })
    }
}

/// `assign LABEL="VALUE" [count=N] { match ... }`: a label the build gives hosts. With a
/// count, the first N hosts that match (spec hosts in the order written, then accepted hosts
/// in the order accepted), so that a host added later never takes a role from one that has
/// it; without one, every host that matches and has no value for the label yet.
#[derive(Debug, Clone)]
pub struct Assign {
    pub label: String,
    pub value: String,
    pub count: Option<u32>,
    /// Any one may hold; none means every host.
    pub matches: Vec<Match>,
    pub span: Span,
    /// With a count: the hosts given the label, in the order they were chosen (filled when the
    /// spec is lowered).
    pub hosts: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Condition {
    /// A label name, or `host` for the host's name.
    pub label: String,
    pub value: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Rollout {
    pub batch_by: Option<String>,
    pub max_unavailable: MaxUnavailable,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

/// A resource kind of the language. Everything particular to a kind (its keyword, schema,
/// checks and rendering) is in its file under `kinds/`, and the registry there lists the kinds
/// and names them (`Kind::USER`, `Kind::ALL`): this is only the handle, ordered as the registry
/// lists the kinds, which is the order resources sort in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(pub(crate) u8);

/// By its keyword, which names it across releases of bellc (its number is the registry's order).
impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.keyword())
    }
}

/// Checks one string value of a field against the tool that will read it.
pub type ValueCheck = fn(&str) -> Result<(), Invalid>;

/// One field a kind's node takes: where it is written, its type, and the check of its value
/// against the tool that will read it.
#[derive(Debug, Clone, Copy)]
pub struct FieldSchema {
    pub name: &'static str,
    pub source: FieldSource,
    pub ty: FieldType,
    pub required: bool,
    /// Checks a string value where it is written (each entry of a repeated child); the error
    /// points at the value.
    pub check: Option<ValueCheck>,
}

impl FieldSchema {
    pub const fn new(
        name: &'static str,
        source: FieldSource,
        ty: FieldType,
        required: bool,
    ) -> FieldSchema {
        FieldSchema {
            name,
            source,
            ty,
            required,
            check: None,
        }
    }

    /// The same field, with its value checked by `check`.
    pub const fn checked(self, check: ValueCheck) -> FieldSchema {
        FieldSchema {
            check: Some(check),
            ..self
        }
    }

    /// `after "KIND:NAME" ...`, which every kind with an apply order takes.
    pub const AFTER: FieldSchema =
        FieldSchema::new("after", FieldSource::ChildArgs, FieldType::Strings, false);
    /// `wait-for "SERVICE" count=N timeout=T`: what a resource waits for at runtime.
    pub const WAIT_FOR: FieldSchema = FieldSchema::new(
        "wait-for",
        FieldSource::WaitForChildren,
        FieldType::WaitList,
        false,
    );
}

/// Where in a node a field is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSource {
    /// A property on the resource node: `mount "mnt" target="/mnt"`.
    Prop,
    /// A child node with one argument: `password "..."`.
    ChildArg,
    /// A child node with any number of arguments: `args "a" "b"`.
    ChildArgs,
    /// A child node that may repeat, one argument each, collected into a list: `ssh-key "..."`.
    RepeatedChildArg,
    /// A child node with properties: `env a="1" b="2"`.
    ChildProps,
    /// Every child is `NAME VALUE` (ethtool settings).
    AnyChildren,
    /// `debconf "question" type="..." value=...` children.
    DebconfChildren,
    /// `wait-for "SERVICE" count=N timeout=T` children (repeatable).
    WaitForChildren,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Bool,
    /// `#true`/`#false`, or a string that says more (`sudo="password"`).
    BoolOrStr,
    Str,
    IntOrStr,
    /// A [`FieldType::Duration`], or `"infinite"` (where LANGUAGE.md allows it, a later check
    /// says).
    DurationOrInfinite,
    /// A whole number of times; `"infinite"` means no limit.
    Count,
    /// A length of time: a whole number of seconds (`90`), or a string of a whole number and
    /// its unit, `s`, `m` or `h` (`"90s"`, `"5m"`, `"1h"`); lowered to seconds. One grammar for
    /// every duration of the language; a quoted bare number (`"90"`) is refused, as every
    /// quoted number is.
    Duration,
    /// An octal file mode written as a string: `"0640"`.
    Mode,
    Enum(&'static [&'static str]),
    Strings,
    StrMap,
    OnOffMap,
    DebconfList,
    WaitList,
}

impl FieldType {
    pub fn describe(self) -> String {
        match self {
            FieldType::Bool => "a boolean (`#true` or `#false`)".into(),
            FieldType::BoolOrStr => "`#true`, `#false` or a string".into(),
            FieldType::Str => "a string".into(),
            FieldType::IntOrStr => "a number or a string".into(),
            FieldType::DurationOrInfinite => {
                "a duration such as 90, \"90s\", \"5m\" or \"1h\", or \"infinite\"".into()
            }
            FieldType::Count => "a whole number of times".into(),
            FieldType::Duration => "a duration such as 90, \"90s\", \"5m\" or \"1h\"".into(),
            FieldType::Mode => "an octal mode of four digits in quotes, such as \"0644\"".into(),
            FieldType::Enum(values) => format!(
                "one of {}",
                values
                    .iter()
                    .map(|v| format!("\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            FieldType::Strings => "strings".into(),
            FieldType::StrMap => "string properties".into(),
            FieldType::OnOffMap => "`on` or `off`".into(),
            FieldType::DebconfList => "debconf answers".into(),
            FieldType::WaitList => "services to wait for".into(),
        }
    }
}

/// The KIND of a `KIND:NAME` reference: a resource kind, or `sysctl` for one sysctl key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefKind {
    Sysctl,
    Resource(Kind),
}

impl RefKind {
    pub fn keyword(self) -> &'static str {
        match self {
            RefKind::Sysctl => "sysctl",
            RefKind::Resource(k) => k.keyword(),
        }
    }
}

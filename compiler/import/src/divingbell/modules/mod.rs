//! One Divingbell module's values (`conf.sysctl`, `conf.mounts`, …) as bellc declarations: the
//! key names mapped (`mnt_tgt` → `target`, `user_sshkeys` → `ssh-key`, `rerun_policy` →
//! `rerun`, …), and a note for every key bellc does not know or cannot express.

use super::history::Rules;
use crate::yaml::{Node, Value};
use bellc_core::front::validate::sysctl_path;
use bellc_core::kdl_text::{block, ident, string};
use bellc_core::source::Span;
use std::collections::BTreeMap;

mod apt;
mod exec;
mod files;
mod kernel;
mod uamlite;

/// A Divingbell daemonset, by the key of its values under `conf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Module {
    Sysctl,
    Limits,
    Mounts,
    Ethtool,
    Uamlite,
    Apt,
    Exec,
    Apparmor,
    Perm,
}

impl Module {
    pub const ALL: [Module; 9] = [
        Module::Sysctl,
        Module::Limits,
        Module::Mounts,
        Module::Ethtool,
        Module::Uamlite,
        Module::Apt,
        Module::Exec,
        Module::Apparmor,
        Module::Perm,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Module::Sysctl => "sysctl",
            Module::Limits => "limits",
            Module::Mounts => "mounts",
            Module::Ethtool => "ethtool",
            Module::Uamlite => "uamlite",
            Module::Apt => "apt",
            Module::Exec => "exec",
            Module::Apparmor => "apparmor",
            Module::Perm => "perm",
        }
    }

    pub fn from_key(key: &str) -> Option<Module> {
        Module::ALL.into_iter().find(|m| m.key() == key)
    }

    /// The daemonset's key under `conf.overrides`: `divingbell_sysctl` in Divingbell's current
    /// chart, `divingbell-sysctl` in its older ones.
    pub fn from_daemonset(name: &str) -> Option<Module> {
        let module = name
            .strip_prefix("divingbell_")
            .or_else(|| name.strip_prefix("divingbell-"))?;
        Module::from_key(module)
    }
}

/// Where a declaration is written: a key inside the `sysctl { }` block, or a node of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Sysctl,
    Node,
}

/// One bellc declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    /// What a later layer refers to: `sysctl:net/ipv4/ip_forward` (the key's path), `mount:mnt`,
    /// or the kind alone for settings of which a host has one (`users`, `apt`).
    pub id: String,
    pub place: Place,
    /// `KIND:NAME` for `remove`, when the declaration can be taken away (sysctl keys are taken
    /// away with `KEY #null`; `users` and `apt` only restated).
    pub removable: bool,
    /// Field name → its KDL text, to compare two declarations of one resource field by field.
    pub fields: BTreeMap<String, String>,
    /// The KDL text at indentation 0 (several lines for a node with children).
    pub text: String,
    /// Holds a password hash or a debconf password, so the spec is kept 0600.
    pub secret: bool,
    /// What a property left out means, for the properties that have a default bellc can write:
    /// a later layer that leaves one out writes it, so that an earlier layer's value goes.
    pub defaults: BTreeMap<String, String>,
    /// Where the properties start in `text` (after `KIND "NAME"`).
    pub head_len: usize,
    /// The values it came from, where bellc's own checks of the spec point back to.
    pub span: Span,
    /// Finer: a property's or a child line's text in `text`, and the value it came from.
    pub parts: Vec<(String, Span)>,
}

/// A key bellc does not know or cannot express: a warning naming its line, and a comment in
/// the spec beside the module. A value Divingbell itself refuses (its chart stops `helm
/// install`, or its script fails on every host) is an error instead: no host ever ran it.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub span: Span,
    pub message: String,
    pub help: String,
    pub kind: NoteKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    /// Not imported, or imported otherwise than Divingbell has it: a warning and a comment.
    Kept,
    /// Divingbell itself refuses the value: no host ever ran it.
    DivingbellRefuses,
    /// Divingbell runs it, and the spec cannot say the same.
    SpecRefuses,
}

#[derive(Default)]
pub struct Mapped {
    pub decls: Vec<Decl>,
    pub notes: Vec<Note>,
}

/// The declarations of one module's values. `path` names the values in notes
/// (`conf.mounts`, or an override's `conf.mounts`).
pub fn map(module: Module, conf: &Node, path: &str, rules: Rules) -> Mapped {
    let mut m = Mapper {
        out: Mapped::default(),
        rules,
    };
    if conf.is_null() {
        return m.out;
    }
    match module {
        Module::Sysctl => m.sysctl(conf, path),
        Module::Limits => m.limits(conf, path),
        Module::Mounts => m.mounts(conf, path),
        Module::Ethtool => m.ethtool(conf, path),
        Module::Uamlite => m.uamlite(conf, path),
        Module::Apt => m.apt(conf, path),
        Module::Exec => m.exec(conf, path),
        Module::Apparmor => m.apparmor(conf, path),
        Module::Perm => m.perm(conf, path),
    }
    m.out
}

/// A node being written: `KIND "NAME" prop=value … { child … }`.
struct NodeText {
    kind: &'static str,
    /// `None` for the settings of which a host has one (`users`, `apt`).
    name: Option<String>,
    props: Vec<(&'static str, String)>,
    children: Vec<(&'static str, String)>,
    /// The value the next property or child comes from (see `from`).
    from: Option<Span>,
    parts: Vec<(String, Span)>,
}

impl NodeText {
    fn new(kind: &'static str, name: &str) -> NodeText {
        NodeText {
            kind,
            name: Some(name.to_string()),
            props: Vec::new(),
            children: Vec::new(),
            from: None,
            parts: Vec::new(),
        }
    }

    /// The next property or child line comes from the value at `span`: an error bellc finds
    /// in it points there rather than at the resource's name.
    fn from(&mut self, span: Span) {
        self.from = Some(span);
    }

    fn prop(&mut self, key: &'static str, value: String) {
        if let Some(span) = self.from.take() {
            self.parts.push((format!(" {key}={value}"), span));
        }
        self.props.push((key, value));
    }

    fn singleton(kind: &'static str) -> NodeText {
        NodeText {
            name: None,
            ..NodeText::new(kind, "")
        }
    }

    /// A child line `KEY REST` (`REST` already KDL; `KEY` empty for a line that is all `REST`).
    fn child(&mut self, key: &'static str, rest: String) {
        if let Some(span) = self.from.take() {
            let line = if key.is_empty() {
                rest.clone()
            } else {
                format!("{key} {rest}")
            };
            self.parts.push((line, span));
        }
        self.children.push((key, rest));
    }

    /// The declaration, `span` the values it came from.
    fn decl(self, span: Span) -> Decl {
        let mut text = self.kind.to_string();
        if let Some(name) = &self.name {
            text.push(' ');
            text.push_str(&string(name));
        }
        let head_len = text.len();
        let mut fields = BTreeMap::new();
        for (key, value) in &self.props {
            text.push_str(&format!(" {key}={value}"));
            fields.insert(key.to_string(), value.clone());
        }
        if !self.children.is_empty() {
            text.push_str(" {\n");
            for (key, rest) in &self.children {
                let line = if key.is_empty() {
                    rest.clone()
                } else {
                    format!("{key} {rest}")
                };
                text.push_str(&format!("    {line}\n"));
                let field = fields.entry(key.to_string()).or_default();
                field.push_str(rest);
                field.push('\n');
            }
            text.push('}');
        }
        let removable = self.name.is_some();
        let secret = self.children.iter().any(|(key, rest)| {
            *key == "password" || (*key == "debconf" && rest.contains("type=\"password\""))
        });
        let id = match &self.name {
            Some(name) => format!("{}:{name}", self.kind),
            None => self.kind.to_string(),
        };
        Decl {
            id,
            place: Place::Node,
            removable,
            fields,
            text,
            secret,
            defaults: defaults(self.kind),
            head_len,
            span,
            parts: self.parts,
        }
    }
}

/// A setting of which a host has one (`users`, `apt`), with these properties.
pub(super) fn singleton(kind: &'static str, props: &[(&'static str, String)], span: Span) -> Decl {
    let mut node = NodeText::singleton(kind);
    for (key, value) in props {
        node.prop(key, value.clone());
    }
    node.decl(span)
}

impl Decl {
    /// Sets a property of a declaration without children (a setting).
    pub(super) fn set(&mut self, key: &str, value: String) {
        let end = self.text.find(" {").unwrap_or(self.text.len());
        self.text.insert_str(end, &format!(" {key}={value}"));
        self.fields.insert(key.to_string(), value);
    }
}

/// Divingbell's defaults that bellc writes as a property: `user_sudo` is false, a script
/// reruns `always` with a timeout of 1800 s and goes on after a failure, profiles enforce,
/// `upgrade` and `purge_expired_users` are false.
fn defaults(kind: &str) -> BTreeMap<String, String> {
    let pairs: &[(&str, &str)] = match kind {
        "user" => &[("sudo", "#false")],
        "exec" => &[
            ("rerun", "\"always\""),
            ("timeout", "1800"),
            ("on-failure", "\"continue\""),
            ("background", "#false"),
        ],
        "apparmor" => &[("mode", "\"enforce\"")],
        "apt" => &[("upgrade", "#false"), ("allow-downgrade", "#false")],
        "users" => &[("purge-expired", "#false"), ("default-account", "\"auto\"")],
        _ => &[],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct Mapper {
    out: Mapped,
    rules: Rules,
}

/// YAML 1.1's booleans, as Helm reads a plain scalar; a quoted `true`/`false` as well, since
/// Divingbell's templates test the text.
pub(super) fn boolean(node: &Node) -> Option<bool> {
    match &node.value {
        Value::Scalar { text, plain: true } => match text.as_str() {
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
                Some(true)
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n"
            | "N" => Some(false),
            _ => None,
        },
        Value::Scalar { text, plain: false } => match text.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A whole number as bellc writes it bare, or the text quoted.
/// A value as a message names it: a short scalar as written, anything else by its shape.
fn what(node: &Node) -> String {
    match node.scalar() {
        Some(text) if !node.is_null() && text.chars().count() <= 40 && !text.contains('\n') => {
            format!("`{text}`")
        }
        _ => node.describe(),
    }
}

/// What Divingbell's `rerun_policy` takes.
const POLICIES: &str = "it takes always, never or once_successfully";

fn number_or_string(text: &str) -> String {
    match text.parse::<i64>() {
        Ok(n) if n.to_string() == text => text.to_string(),
        _ => string(text),
    }
}

impl Mapper {
    fn note(&mut self, span: Span, message: String, help: &str) {
        self.out.notes.push(Note {
            span,
            message,
            help: help.to_string(),
            kind: NoteKind::Kept,
        });
    }

    /// A value Divingbell refuses too; `rule` says what Divingbell takes instead.
    fn refuse(&mut self, node: &Node, path: &str, rule: &str) {
        self.out.notes.push(Note {
            span: node.span,
            message: format!("Divingbell refuses `{path}`: {}; {rule}", what(node)),
            help: "Divingbell's chart or script stops at this value, so no host runs it; fix it in the values and import again".into(),
            kind: NoteKind::DivingbellRefuses,
        });
    }

    fn unknown(&mut self, key: &Node, path: &str, known: &[&str]) {
        let name = key.scalar().unwrap_or_default();
        self.note(
            key.span,
            format!("`{path}.{name}` is not a key bellc knows; kept as a comment"),
            &format!("the keys of `{path}` are {}", known.join(", ")),
        );
    }

    fn shape(&mut self, node: &Node, path: &str, expected: &str) {
        self.note(
            node.span,
            format!(
                "`{path}` is {}, not {expected}; kept as a comment",
                what(node)
            ),
            "Divingbell's chart reads it as the documentation shows",
        );
    }

    /// The entries of a mapping, or a note.
    fn entries<'n>(&mut self, node: &'n Node, path: &str) -> &'n [(Node, Node)] {
        match node.entries() {
            Some(entries) => entries,
            None => {
                self.shape(node, path, "a mapping");
                &[]
            }
        }
    }

    fn items<'n>(&mut self, node: &'n Node, path: &str) -> &'n [Node] {
        match node.items() {
            Some(items) => items,
            None => {
                self.shape(node, path, "a list");
                &[]
            }
        }
    }

    fn text(&mut self, node: &Node, path: &str) -> Option<String> {
        match node.scalar() {
            Some(text) if !node.is_null() => Some(text.to_string()),
            _ => {
                self.shape(node, path, "a value");
                None
            }
        }
    }

    fn boolean(&mut self, node: &Node, path: &str) -> Option<bool> {
        let b = boolean(node);
        if b.is_none() {
            self.shape(node, path, "true or false");
        }
        b
    }

    /// A `rerun_interval` or `retry_interval` as the spec writes it, or `None` after an error:
    /// Divingbell's loop wakes every 60 seconds, so its chart refuses less (and anything not a
    /// number but `infinity`, which it reads as never).
    fn interval(&mut self, node: &Node, path: &str) -> Option<String> {
        match node.scalar().filter(|_| !node.is_null()) {
            Some("infinity") => Some(string("infinite")),
            Some(text) => match text.parse::<u64>() {
                Ok(seconds) if seconds >= 60 => Some(seconds.to_string()),
                _ => {
                    self.refuse(
                        node,
                        path,
                        "it takes 60 seconds or more (its loop wakes every 60), or `infinity`",
                    );
                    None
                }
            },
            None => {
                self.refuse(node, path, "it takes a number of seconds");
                None
            }
        }
    }

    /// The text values of a list (a single value counts as a list of one).
    fn words(&mut self, node: &Node, path: &str) -> Vec<String> {
        match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.text(item, &format!("{path}[{i}]")))
                .collect(),
            Value::Scalar { .. } => self.text(node, path).into_iter().collect(),
            Value::Map(_) => {
                self.shape(node, path, "a list");
                Vec::new()
            }
        }
    }
}

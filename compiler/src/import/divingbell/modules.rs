//! One Divingbell module's values (`conf.sysctl`, `conf.mounts`, …) as bellc declarations: the
//! key names mapped (`mnt_tgt` → `target`, `user_sshkeys` → `ssh-key`, `rerun_policy` →
//! `rerun`, …), and a note for every key bellc does not know or cannot express.

use super::history::Rules;
use crate::front::validate::sysctl_path;
use crate::import::yaml::{Node, Value};
use crate::kdl_text::{block, ident, string};
use crate::source::Span;
use std::collections::BTreeMap;

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

    fn sysctl(&mut self, conf: &Node, path: &str) {
        for (key, value) in self.entries(conf, path) {
            let Some(name) = key.scalar() else { continue };
            let Some(text) = self.text(value, &format!("{path}.{name}")) else {
                continue;
            };
            let rendered = number_or_string(&text);
            self.out.decls.push(Decl {
                id: format!("sysctl:{}", sysctl_path(name)),
                place: Place::Sysctl,
                removable: true,
                fields: BTreeMap::from([
                    ("key".to_string(), ident(name)),
                    ("value".to_string(), rendered.clone()),
                ]),
                text: format!("{} {rendered}", ident(name)),
                secret: false,
                defaults: BTreeMap::new(),
                head_len: 0,
                span: key.span,
                parts: Vec::new(),
            });
        }
    }

    fn limits(&mut self, conf: &Node, path: &str) {
        const FIELDS: &[(&str, &str)] = &[
            ("domain", "domain"),
            ("type", "type"),
            ("item", "item"),
            ("value", "value"),
        ];
        self.named(conf, path, "limit", FIELDS);
    }

    fn mounts(&mut self, conf: &Node, path: &str) {
        const FIELDS: &[(&str, &str)] = &[
            ("mnt_tgt", "target"),
            ("device", "device"),
            ("type", "type"),
            ("options", "options"),
            ("before", "before"),
            ("after", "after"),
        ];
        self.named(conf, path, "mount", FIELDS);
    }

    /// Entries by name whose fields are properties: each a `KIND "NAME"` node, `fields` the
    /// Divingbell key and the property it becomes. A `value` that is a whole number stays one.
    fn named(
        &mut self,
        conf: &Node,
        path: &str,
        kind: &'static str,
        fields: &[(&str, &'static str)],
    ) {
        let known: Vec<&str> = fields.iter().map(|(yaml, _)| *yaml).collect();
        for (name_key, entry) in self.entries(conf, path) {
            let Some(name) = name_key.scalar() else {
                continue;
            };
            let here = format!("{path}.{name}");
            let mut node = NodeText::new(kind, name);
            for (key, value) in self.entries(entry, &here) {
                let field = key.scalar().unwrap_or_default();
                let Some((_, prop)) = fields.iter().find(|(yaml, _)| *yaml == field) else {
                    self.unknown(key, &here, &known);
                    continue;
                };
                let Some(text) = self.text(value, &format!("{here}.{field}")) else {
                    continue;
                };
                let rendered = if *prop == "value" {
                    number_or_string(&text)
                } else {
                    string(&text)
                };
                node.from(value.span);
                node.prop(prop, rendered);
            }
            self.out.decls.push(node.decl(name_key.span));
        }
    }

    fn ethtool(&mut self, conf: &Node, path: &str) {
        for (interface_key, settings) in self.entries(conf, path) {
            let name_span = interface_key.span;
            let Some(interface) = interface_key.scalar() else {
                continue;
            };
            let here = format!("{path}.{interface}");
            let mut node = NodeText::new("ethtool", interface);
            for (feature_key, value) in self.entries(settings, &here) {
                let Some(feature) = feature_key.scalar() else {
                    continue;
                };
                let at = format!("{here}.{feature}");
                let Some(on) = boolean(value) else {
                    // Divingbell's script stops at it on every host ("Expected 'on' or 'off'").
                    self.refuse(value, &at, "it takes on or off");
                    continue;
                };
                node.from(feature_key.span);
                node.child(
                    "",
                    format!("{} {}", ident(feature), if on { "on" } else { "off" }),
                );
            }
            self.out.decls.push(node.decl(name_span));
        }
    }

    fn uamlite(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["purge_expired_users", "users"];
        const USER: &[&str] = &[
            "user_name",
            "user_crypt_passwd",
            "user_sudo",
            "user_sshkeys",
        ];
        for (key, value) in self.entries(conf, path) {
            match key.scalar().unwrap_or_default() {
                "purge_expired_users" => {
                    if let Some(purge) = self.boolean(value, &format!("{path}.purge_expired_users"))
                    {
                        let mut node = NodeText::singleton("users");
                        node.prop("purge-expired", format!("#{purge}"));
                        self.out.decls.push(node.decl(value.span));
                    }
                }
                "users" => {
                    let users_path = format!("{path}.users");
                    // Divingbell runs every entry in turn; an entry that repeats an earlier
                    // one exactly changes nothing (spyglass lists some users twice).
                    let mut seen: Vec<(&str, usize, &Node)> = Vec::new();
                    for (i, user) in self.items(value, &users_path).iter().enumerate() {
                        let here = format!("{users_path}[{i}]");
                        let Some(name) = user.get("user_name").and_then(Node::scalar) else {
                            self.shape(user, &here, "a user with a `user_name`");
                            continue;
                        };
                        if let Some((_, first, earlier)) = seen.iter().find(|(n, _, _)| *n == name)
                        {
                            if !earlier.same(user) {
                                self.out.notes.push(Note {
                                    span: user.get("user_name").map_or(user.span, |n| n.span),
                                    message: format!("`{here}` declares user `{name}` again, otherwise than `{users_path}[{first}]`: Divingbell runs both in turn, which one bellc user cannot say"),
                                    help: format!("merge the two entries of `{name}` into one"),
                                    kind: NoteKind::SpecRefuses,
                                });
                            }
                            continue;
                        }
                        seen.push((name, i, user));
                        let mut node = NodeText::new("user", name);
                        for (key, value) in self.entries(user, &here) {
                            let field = key.scalar().unwrap_or_default();
                            let at = format!("{here}.{field}");
                            node.from(value.span);
                            match field {
                                "user_name" => {}
                                "user_sudo" => {
                                    if let Some(sudo) = self.boolean(value, &at) {
                                        node.prop("sudo", format!("#{sudo}"));
                                    }
                                }
                                "user_crypt_passwd" => {
                                    if let Some(hash) = self.text(value, &at) {
                                        node.child("password", string(&hash));
                                    }
                                }
                                "user_sshkeys" => {
                                    let keys = self.words(value, &at);
                                    let empty = value.items().is_some_and(<[Node]>::is_empty);
                                    if empty && !self.rules.empty_ssh_keys_unmanaged() {
                                        self.refuse(value, &at, "charts before 4c6ac47 fail to render an empty list; write `[ Unmanaged ]`, or import with the --divingbell-version your site ran");
                                    } else if empty
                                        || keys.len() == 1
                                            && keys[0].eq_ignore_ascii_case("unmanaged")
                                    {
                                        // `[]` is unmanaged since 4c6ac47: treasuremap writes it
                                        // before Deckhand substitutes the keys.
                                        node.child("ssh-keys", string("unmanaged"));
                                    } else {
                                        let spans: Vec<Span> = match value.items() {
                                            Some(items) if items.len() == keys.len() => {
                                                items.iter().map(|i| i.span).collect()
                                            }
                                            _ => vec![value.span; keys.len()],
                                        };
                                        for (key, span) in keys.iter().zip(spans) {
                                            node.from(span);
                                            node.child("ssh-key", string(key));
                                        }
                                    }
                                }
                                _ => self.unknown(key, &here, USER),
                            }
                        }
                        self.out
                            .decls
                            .push(node.decl(user.get("user_name").map_or(user.span, |n| n.span)));
                    }
                }
                _ => self.unknown(key, path, KNOWN),
            }
        }
    }

    fn apt(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &[
            "upgrade",
            "allow_downgrade",
            "strict",
            "packages",
            "blacklistpkgs",
            "whitelistpkgs",
            "repositories",
        ];
        let mut apt = NodeText::singleton("apt");
        let mut downgrade = false;
        // Divingbell installs `packages`, then purges `blacklistpkgs`: one in both ends absent.
        let blacklisted: Vec<&str> = conf
            .get("blacklistpkgs")
            .and_then(Node::items)
            .unwrap_or_default()
            .iter()
            .filter_map(|item| item.get("name").unwrap_or(item).scalar())
            .collect();
        for (key, value) in self.entries(conf, path) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{path}.{field}");
            match field {
                "upgrade" => {
                    if let Some(upgrade) = self.boolean(value, &at) {
                        apt.prop("upgrade", format!("#{upgrade}"));
                    }
                }
                // The current chart's global form, for every package it installs.
                "allow_downgrade" => {
                    if let Some(allow) = self.boolean(value, &at) {
                        downgrade |= allow;
                    }
                }
                "strict" => {
                    if self.boolean(value, &at) == Some(true) {
                        self.note(
                            key.span,
                            format!("`{at}`: Divingbell purges every installed package `packages` does not name (but `whitelistpkgs`); bellc removes only what it installed and the spec no longer names, so the spec keeps the other packages of a host"),
                            "declare `package NAME absent=#true` for each package that must go",
                        );
                    }
                }
                // Spared by the purges of strict mode and of packages that leave the list;
                // bellc never purges a package it did not install, so there is nothing to say.
                "whitelistpkgs" => {
                    self.words(value, &at);
                }
                "packages" => {
                    // A list, or (current chart) a mapping of lists, installed in key order.
                    let packages: Vec<(String, &Node)> = match &value.value {
                        Value::Map(groups) => {
                            let mut groups: Vec<&(Node, Node)> = groups.iter().collect();
                            groups.sort_by(|a, b| a.0.scalar().cmp(&b.0.scalar()));
                            groups
                                .into_iter()
                                .flat_map(|(group, list)| {
                                    let group = group.scalar().unwrap_or_default().to_string();
                                    let at = format!("{at}.{group}");
                                    self.items(list, &at)
                                        .iter()
                                        .enumerate()
                                        .map(move |(i, p)| (format!("{at}[{i}]"), p))
                                        .collect::<Vec<_>>()
                                })
                                .collect()
                        }
                        _ => self
                            .items(value, &at)
                            .iter()
                            .enumerate()
                            .map(|(i, p)| (format!("{at}[{i}]"), p))
                            .collect(),
                    };
                    for (here, package) in packages {
                        match package.get("name").and_then(Node::scalar) {
                            Some(name) if blacklisted.contains(&name) => self.note(
                                package.span,
                                format!("`{here}` is `{name}`, which `{path}.blacklistpkgs` names too: Divingbell installs it and then removes it, so the spec keeps it absent"),
                                "take it out of one of the two lists",
                            ),
                            _ => downgrade |= self.package(package, &here),
                        }
                    }
                }
                "blacklistpkgs" => {
                    for (i, item) in self.items(value, &at).iter().enumerate() {
                        let here = format!("{at}[{i}]");
                        let name = match item.get("name") {
                            Some(name) => self.text(name, &format!("{here}.name")),
                            None => self.text(item, &here),
                        };
                        if let Some(name) = name {
                            let mut node = NodeText::new("package", &name);
                            node.prop("absent", "#true".into());
                            self.out.decls.push(node.decl(item.span));
                        }
                    }
                }
                // A mapping by name in Divingbell's current chart, a list in its older one.
                "repositories" => match &value.value {
                    Value::Map(repos) => {
                        for (name, repo) in repos {
                            let name = name.scalar().unwrap_or_default();
                            self.repository(repo, &format!("{at}.{name}"), name);
                        }
                    }
                    _ => {
                        for (i, repo) in self.items(value, &at).iter().enumerate() {
                            let name = format!("repository-{}", i + 1);
                            self.repository(repo, &format!("{at}[{i}]"), &name);
                        }
                    }
                },
                _ => self.unknown(key, path, KNOWN),
            }
        }
        if downgrade {
            apt.prop("allow-downgrade", "#true".into());
        }
        if !apt.props.is_empty() {
            self.out.decls.push(apt.decl(conf.span));
        }
    }

    /// A package; whether it allows a downgrade.
    fn package(&mut self, package: &Node, here: &str) -> bool {
        const KNOWN: &[&str] = &["name", "version", "allow_downgrade", "debconf", "repo"];
        let Some(name) = package.get("name").and_then(Node::scalar) else {
            self.shape(package, here, "a package with a `name`");
            return false;
        };
        let mut node = NodeText::new("package", name);
        let mut downgrade = false;
        for (key, value) in self.entries(package, here) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{here}.{field}");
            node.from(value.span);
            match field {
                "name" => {}
                "version" => {
                    if let Some(version) = self.text(value, &at) {
                        node.prop("version", string(&version));
                    }
                }
                "allow_downgrade" => {
                    if self.boolean(value, &at) == Some(true) {
                        downgrade = true;
                        self.note(
                            key.span,
                            format!("`{at}`: bellc allows downgrades for every package or none; the spec allows them for all (`apt allow-downgrade=#true`)"),
                            "keep it if the fleet may go back to an older version of any managed package",
                        );
                    }
                }
                "repo" => self.note(
                    key.span,
                    format!("`{at}`: bellc has no target release per package (`apt-get -t`); kept as a comment"),
                    "pin the version with `version=`, or give the release's source as an `apt-source`",
                ),
                "debconf" => {
                    for (i, answer) in self.items(value, &at).iter().enumerate() {
                        let here = format!("{at}[{i}]");
                        let get = |k: &str| answer.get(k).and_then(Node::scalar).map(str::to_string);
                        match (get("question"), get("question_type"), get("answer")) {
                            (Some(q), Some(t), Some(a)) => {
                                node.from(answer.span);
                                node.child(
                                    "debconf",
                                    format!("{} type={} value={}", string(&q), string(&t), string(&a)),
                                )
                            }
                            _ => self.shape(answer, &here, "a `question`, `question_type` and `answer`"),
                        }
                    }
                }
                _ => self.unknown(key, here, KNOWN),
            }
        }
        self.out
            .decls
            .push(node.decl(package.get("name").map_or(package.span, |n| n.span)));
        downgrade
    }

    fn repository(&mut self, repo: &Node, here: &str, name: &str) {
        const KNOWN: &[&str] = &["url", "distributions", "components", "subrepos", "gpgkey"];
        let Some(url) = repo.get("url").and_then(Node::scalar) else {
            self.shape(repo, here, "a repository with a `url`");
            return;
        };
        let mut suites = Vec::new();
        let mut components = Vec::new();
        let mut subrepos = Vec::new();
        let mut key = None;
        for (k, value) in self.entries(repo, here) {
            let field = k.scalar().unwrap_or_default();
            let at = format!("{here}.{field}");
            match field {
                "url" => {}
                "distributions" => suites = self.words(value, &at),
                "components" => components = self.words(value, &at),
                "subrepos" => subrepos = self.words(value, &at),
                "gpgkey" => key = self.text(value, &at),
                _ => self.unknown(k, here, KNOWN),
            }
        }
        // Divingbell writes `deb URL DIST COMPONENTS` and one line per `DIST-SUBREPO`.
        let mut all = suites.clone();
        for suite in &suites {
            all.extend(subrepos.iter().map(|s| format!("{suite}-{s}")));
        }
        let mut node = NodeText::new("apt-source", name);
        node.prop("url", string(url));
        node.prop("suites", string(&all.join(" ")));
        if !components.is_empty() {
            node.prop("components", string(&components.join(" ")));
        }
        if let Some(key) = key {
            node.child("key", block(&key, "    "));
        }
        self.out.decls.push(node.decl(repo.span));
    }

    fn exec(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &[
            "data",
            "args",
            "env",
            "rerun_policy",
            "timeout",
            "script_timeout",
            "rerun_interval",
            "retry_interval",
            "blocking_policy",
            "rerun_interval_persist",
            "rerun_max_count",
            "retry_interval_persist",
            "retry_max_count",
        ];
        for (name_key, script) in self.entries(conf, path) {
            let Some(name) = name_key.scalar() else {
                continue;
            };
            let name_span = name_key.span;
            let here = format!("{path}.{name}");
            let mut node = NodeText::new("exec", name);
            let mut data = None;
            for (key, value) in self.entries(script, &here) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{here}.{field}");
                node.from(value.span);
                // `timeout` in Divingbell's chart and gate, `script_timeout` in its documentation.
                let prop = match field {
                    "timeout" | "script_timeout" => Some("timeout"),
                    "rerun_max_count" => Some("rerun-max-count"),
                    "retry_max_count" => Some("retry-max-count"),
                    _ => None,
                };
                match field {
                    _ if prop.is_some() => {
                        if let (Some(prop), Some(text)) = (prop, self.text(value, &at)) {
                            node.prop(prop, number_or_string(&text));
                        }
                    }
                    "rerun_interval" | "retry_interval" => {
                        if let Some(seconds) = self.interval(value, &at) {
                            let prop = if field == "rerun_interval" {
                                "rerun-interval"
                            } else {
                                "retry-interval"
                            };
                            node.prop(prop, seconds);
                        }
                    }
                    "rerun_interval_persist" | "retry_interval_persist" => {
                        if let Some(b) = self.boolean(value, &at) {
                            let prop = if field.starts_with("rerun") {
                                "rerun-interval-persist"
                            } else {
                                "retry-interval-persist"
                            };
                            node.prop(prop, format!("#{b}"));
                        }
                    }
                    "rerun_policy" => match self.text(value, &at).as_deref() {
                        Some(policy @ ("always" | "never")) => node.prop("rerun", string(policy)),
                        Some("once_successfully") => {
                            node.prop("rerun", string("once-successfully"))
                        }
                        _ => self.refuse(value, &at, POLICIES),
                    },
                    "blocking_policy" => match self.text(value, &at).as_deref() {
                        Some("foreground") => {}
                        Some("foreground_halt_pod_on_failure") => {
                            node.prop("on-failure", string("halt"))
                        }
                        Some("background") => node.prop("background", "#true".into()),
                        _ => self.refuse(
                            value,
                            &at,
                            "it takes foreground, background or foreground_halt_pod_on_failure",
                        ),
                    },
                    "args" => {
                        let args: Vec<String> =
                            self.words(value, &at).iter().map(|a| string(a)).collect();
                        if !args.is_empty() {
                            node.child("args", args.join(" "));
                        }
                    }
                    "env" => {
                        let mut vars = Vec::new();
                        for (k, v) in self.entries(value, &at) {
                            let k = k.scalar().unwrap_or_default();
                            if let Some(v) = self.text(v, &format!("{at}.{k}")) {
                                vars.push(format!("{}={}", ident(k), string(&v)));
                            }
                        }
                        if !vars.is_empty() {
                            node.child("env", vars.join(" "));
                        }
                    }
                    "data" => data = self.text(value, &at).map(|text| (text, value.span)),
                    _ => self.unknown(key, &here, KNOWN),
                }
            }
            if let Some((data, span)) = data {
                node.from(span);
                node.child("script", block(&data, "    "));
            }
            self.out.decls.push(node.decl(name_span));
        }
    }

    fn apparmor(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["complain_mode", "profiles"];
        let mut complain = false;
        let mut profiles = Vec::new();
        for (key, value) in self.entries(conf, path) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{path}.{field}");
            match field {
                "complain_mode" => complain = self.boolean(value, &at).unwrap_or(false),
                "profiles" => {
                    for (name_key, profile) in self.entries(value, &at) {
                        let Some(name) = name_key.scalar() else {
                            continue;
                        };
                        if let Some(text) = self.text(profile, &format!("{at}.{name}")) {
                            profiles.push((name.to_string(), text, name_key.span));
                        }
                    }
                }
                _ => self.unknown(key, path, KNOWN),
            }
        }
        for (name, text, span) in profiles {
            let mut node = NodeText::new("apparmor", &name);
            if complain {
                node.prop("mode", string("complain"));
            }
            node.child("profile", block(&text, "    "));
            self.out.decls.push(node.decl(span));
        }
    }

    /// `conf.perm`: `paths` with `rerun_policy` and `rerun_interval` beside them (Divingbell's
    /// current chart), or the list of paths alone (its older one).
    fn perm(&mut self, conf: &Node, path: &str) {
        if conf.entries().is_some() {
            const KNOWN: &[&str] = &["paths", "rerun_policy", "rerun_interval"];
            let mut policy = None;
            let mut finite_interval = None;
            for (key, value) in self.entries(conf, path) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{path}.{field}");
                match field {
                    "paths" => self.perm_paths(value, &at),
                    "rerun_policy" | "rerun_interval" => {
                        let valid = if field == "rerun_policy" {
                            let known = matches!(
                                value.scalar(),
                                Some("always" | "never" | "once_successfully")
                            );
                            if known {
                                policy = value.scalar().map(|p| (p.to_string(), value));
                            } else {
                                self.refuse(value, &at, POLICIES);
                            }
                            known
                        } else {
                            let seconds = self.interval(value, &at);
                            if seconds.as_deref().is_some_and(|s| s != "\"infinite\"") {
                                finite_interval = Some(value);
                            }
                            seconds.is_some()
                        };
                        if valid {
                            self.note(
                                key.span,
                                format!("`{at}`: bellc sets permissions on every apply and its check reports drift between applies; kept as a comment"),
                                "a periodic `bell-run apply` (or `bell-run check`) replaces Divingbell's reruns",
                            );
                        }
                    }
                    _ => self.unknown(key, path, KNOWN),
                }
            }
            // Divingbell's rule for every module with reruns: a finite interval reruns always.
            if let (Some(interval), Some((policy, _))) = (finite_interval, &policy) {
                if policy != "always" {
                    self.refuse(
                        interval,
                        &format!("{path}.rerun_interval"),
                        &format!("a finite `rerun_interval` needs `rerun_policy: always`, and it is `{policy}`"),
                    );
                }
            }
        } else {
            self.perm_paths(conf, path);
        }
    }

    fn perm_paths(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["path", "owner", "group", "permissions"];
        for (i, perm) in self.items(conf, path).iter().enumerate() {
            let here = format!("{path}[{i}]");
            let Some(target) = perm.get("path").and_then(Node::scalar) else {
                self.shape(perm, &here, "an entry with a `path`");
                continue;
            };
            let mut node = NodeText::new("perm", target);
            for (key, value) in self.entries(perm, &here) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{here}.{field}");
                let prop = match field {
                    "path" => continue,
                    "owner" => "owner",
                    "group" => "group",
                    "permissions" => "mode",
                    _ => {
                        self.unknown(key, &here, KNOWN);
                        continue;
                    }
                };
                if let Some(mut text) = self.text(value, &at) {
                    // chmod reads `644` as `0644`; bell writes modes with four digits.
                    if prop == "mode"
                        && text.len() == 3
                        && text.bytes().all(|b| (b'0'..=b'7').contains(&b))
                    {
                        text.insert(0, '0');
                    }
                    node.from(value.span);
                    node.prop(prop, string(&text));
                }
            }
            self.out.decls.push(node.decl(perm.span));
        }
    }
}

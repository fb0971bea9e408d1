//! A Divingbell values file read as Divingbell's chart reads it: the modules under `conf`, the
//! per-daemonset overrides under `conf.overrides`, and the daemonsets `manifests` turns off; and
//! Divingbell's rule for what one host gets, module by module.

use super::accounts;
use super::history::Rules;
use super::modules::{map, Mapped, Module, Note, NoteKind};
use crate::yaml::{Node, Value};
use bellc_core::source::Span;
use std::collections::BTreeMap;

pub struct Values {
    /// `conf.MODULE` of every module the values hold, daemonsets turned off left out.
    pub base: BTreeMap<Module, Node>,
    pub overrides: BTreeMap<Module, ModuleOverrides>,
    /// Daemonsets `manifests.daemonset_MODULE: false` turns off.
    pub disabled: Vec<Module>,
    /// Top-level and `conf` keys that configure the chart, not hosts (`images`, `pod`, …).
    pub chart_keys: Vec<String>,
    pub notes: Vec<Note>,
    /// The chart version's behaviour (`--divingbell-version`).
    pub rules: Rules,
    /// The image's own account on the target (uamlite's `ubuntu`), which uamlite expires or
    /// leaves by its rule.
    pub account: String,
    /// `labels.MODULE.node_selector_key` and `_value`: the daemonset runs only on nodes with
    /// that label, and its values, overrides included, reach no other node.
    pub selectors: BTreeMap<Module, Selector>,
}

pub struct Selector {
    pub key: String,
    pub value: String,
    pub span: Span,
}

impl Selector {
    pub fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(&self.key) == Some(&self.value)
    }
}

#[derive(Default)]
pub struct ModuleOverrides {
    pub labels: Vec<LabelOverride>,
    pub hosts: Vec<HostOverride>,
}

pub struct LabelOverride {
    pub key: String,
    pub values: Vec<String>,
    /// The override's `conf.MODULE`.
    pub conf: Node,
    pub span: Span,
}

pub struct HostOverride {
    pub name: String,
    pub conf: Node,
    pub span: Span,
}

/// Which of a module's overrides a host gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Base,
    Label(usize),
    Host(usize),
}

/// Keys of the chart itself: how its pods run, not what they do to a host.
const CHART_KEYS: &[&str] = &[
    "images",
    "pod",
    "endpoints",
    "dependencies",
    "release_group",
    "secrets",
    "network_policy",
    "manifests",
];
const CHART_CONF_KEYS: &[&str] = &["chroot_mnt_path", "log_colors", "extra_verbose"];

pub fn read(root: &Node, rules: Rules, account: &str) -> Values {
    let mut values = Values {
        account: account.to_string(),
        base: BTreeMap::new(),
        overrides: BTreeMap::new(),
        disabled: Vec::new(),
        chart_keys: Vec::new(),
        notes: Vec::new(),
        rules,
        selectors: BTreeMap::new(),
    };
    let Some(entries) = root.entries() else {
        note(
            &mut values.notes,
            root.span,
            "the values file is not a mapping; there is nothing to import".into(),
            "a values file maps `conf:` to the modules' settings",
        );
        return values;
    };
    if let Some(manifests) = root.get("manifests").and_then(Node::entries) {
        for (key, value) in manifests {
            let module = key
                .scalar()
                .and_then(|k| k.strip_prefix("daemonset_"))
                .and_then(Module::from_key);
            let off = matches!(&value.value, Value::Scalar { text, .. } if matches!(text.as_str(), "false" | "False" | "FALSE" | "no" | "off"));
            if let (Some(module), true) = (module, off) {
                values.disabled.push(module);
            }
        }
    }
    for (key, value) in entries {
        let name = key.scalar().unwrap_or_default();
        match name {
            "conf" => read_conf(value, &mut values),
            "labels" => read_labels(value, &mut values),
            _ if CHART_KEYS.contains(&name) => values.chart_keys.push(name.to_string()),
            _ => note(
                &mut values.notes,
                key.span,
                format!("`{name}` is not a key of Divingbell's values; kept as a comment"),
                "Divingbell configures hosts under `conf:`",
            ),
        }
    }
    values
}

fn note(notes: &mut Vec<Note>, span: Span, message: String, help: &str) {
    notes.push(Note {
        span,
        message,
        help: help.to_string(),
        kind: NoteKind::Kept,
    });
}

/// `labels`: the chart's node selectors. A module's (`labels.sysctl.node_selector_key`) decides
/// which nodes its daemonset runs on; the others (`labels.job`, …) place the chart's own pods.
fn read_labels(labels: &Node, values: &mut Values) {
    let mut chart = false;
    for (key, value) in labels.entries().unwrap_or_default() {
        let name = key.scalar().unwrap_or_default();
        let Some(module) = Module::from_key(name) else {
            chart = true;
            continue;
        };
        let get = |k: &str| value.get(k).filter(|v| !v.is_null()).and_then(Node::scalar);
        match (get("node_selector_key"), get("node_selector_value")) {
            (None | Some(""), None | Some("")) => {}
            (Some(k), Some(v)) if !k.is_empty() && !v.is_empty() => {
                values.selectors.insert(
                    module,
                    Selector {
                        key: k.to_string(),
                        value: v.to_string(),
                        span: value.span,
                    },
                );
            }
            _ => note(
                &mut values.notes,
                value.span,
                format!("`labels.{name}` gives a node selector's key or value but not both; the {name} daemonset is imported for every node"),
                "give both `node_selector_key` and `node_selector_value`, or neither",
            ),
        }
    }
    if chart || labels.entries().is_none() {
        values.chart_keys.push("labels".to_string());
    }
}

fn read_conf(conf: &Node, values: &mut Values) {
    let Some(entries) = conf.entries() else {
        note(
            &mut values.notes,
            conf.span,
            "`conf` is not a mapping; kept as a comment".into(),
            "`conf:` maps each module (`sysctl`, `mounts`, …) to its settings",
        );
        return;
    };
    for (key, value) in entries {
        let name = key.scalar().unwrap_or_default();
        if name == "overrides" {
            read_overrides(value, values);
        } else if let Some(module) = Module::from_key(name) {
            if !values.disabled.contains(&module) {
                values.base.insert(module, value.clone());
            }
        } else if CHART_CONF_KEYS.contains(&name) {
            values.chart_keys.push(format!("conf.{name}"));
        } else {
            let known: Vec<&str> = Module::ALL.iter().map(|m| m.key()).collect();
            note(
                &mut values.notes,
                key.span,
                format!("`conf.{name}` is not a Divingbell module; kept as a comment"),
                &format!("the modules are {}", known.join(", ")),
            );
        }
    }
}

fn read_overrides(overrides: &Node, values: &mut Values) {
    let Some(entries) = overrides.entries() else {
        note(
            &mut values.notes,
            overrides.span,
            "`conf.overrides` is not a mapping; kept as a comment".into(),
            "it maps a daemonset (`divingbell_sysctl`, …) to its `labels` and `hosts`",
        );
        return;
    };
    for (key, value) in entries {
        let name = key.scalar().unwrap_or_default();
        let Some(module) = Module::from_daemonset(name) else {
            note(
                &mut values.notes,
                key.span,
                format!("`conf.overrides.{name}` names no Divingbell daemonset; Divingbell ignores it, and so does the spec"),
                "the daemonsets are divingbell_sysctl, divingbell_limits, divingbell_mounts, divingbell_ethtool, divingbell_uamlite, divingbell_apt, divingbell_exec, divingbell_apparmor and divingbell_perm",
            );
            continue;
        };
        if values.disabled.contains(&module) {
            continue;
        }
        let here = format!("conf.overrides.{name}");
        let mut module_overrides = ModuleOverrides::default();
        for (key, list) in value.entries().unwrap_or_default() {
            let field = key.scalar().unwrap_or_default();
            let Some(items) = list.items() else {
                note(
                    &mut values.notes,
                    list.span,
                    format!("`{here}.{field}` is not a list; kept as a comment"),
                    "`labels` and `hosts` are lists",
                );
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{here}.{field}[{i}]");
                let conf = item.get("conf").and_then(|c| c.get(module.key())).cloned();
                if let Some(other) = item.get("conf").and_then(Node::entries) {
                    for (k, _) in other
                        .iter()
                        .filter(|(k, _)| k.scalar() != Some(module.key()))
                    {
                        note(
                            &mut values.notes,
                            k.span,
                            format!("`{at}.conf.{}`: the {name} daemonset reads only `conf.{}`; Divingbell ignores it, and so does the spec", k.scalar().unwrap_or_default(), module.key()),
                            "move it to the override of its own daemonset",
                        );
                    }
                }
                let conf = conf.unwrap_or(Node {
                    value: Value::Map(Vec::new()),
                    span: item.span,
                });
                match field {
                    "labels" => {
                        let label = item.get("label");
                        let key = label.and_then(|l| l.get("key")).and_then(Node::scalar);
                        let label_values: Vec<String> = label
                            .and_then(|l| l.get("values"))
                            .and_then(Node::items)
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|v| v.scalar().map(str::to_string))
                            .collect();
                        match key {
                            Some(key) if !label_values.is_empty() => {
                                module_overrides.labels.push(LabelOverride {
                                    key: key.to_string(),
                                    values: label_values,
                                    conf,
                                    span: item.span,
                                })
                            }
                            _ => note(&mut values.notes, item.span, format!("`{at}` has no `label` with a `key` and `values`; kept as a comment"), "write `label: {key: compute_type, values: [dpdk]}`"),
                        }
                    }
                    "hosts" => match item.get("name").and_then(Node::scalar) {
                        Some(host) => module_overrides.hosts.push(HostOverride {
                            name: host.to_string(),
                            conf,
                            span: item.span,
                        }),
                        None => note(
                            &mut values.notes,
                            item.span,
                            format!("`{at}` has no `name`; kept as a comment"),
                            "write `name: HOSTNAME`",
                        ),
                    },
                    _ => note(
                        &mut values.notes,
                        key.span,
                        format!(
                            "`{here}.{field}` is neither `labels` nor `hosts`; kept as a comment"
                        ),
                        "an override targets hosts by `labels` or by `hosts`",
                    ),
                }
            }
        }
        values.overrides.insert(module, module_overrides);
    }
}

impl Values {
    /// A module's declarations for `conf` (its values as some host gets them), with what the
    /// daemonset does beyond them said outright where bellc would do otherwise.
    pub fn declarations(&self, module: Module, conf: &Node, path: &str) -> Mapped {
        let mut mapped = map(module, conf, path, self.rules);
        if module == Module::Uamlite && !conf.is_null() {
            accounts::settle(&mut mapped.decls, conf, self.rules, &self.account);
        }
        mapped
    }

    /// Whether the module's daemonset runs on a node with these labels.
    pub fn runs_on(&self, module: Module, labels: &BTreeMap<String, String>) -> bool {
        self.selectors.get(&module).is_none_or(|s| s.holds(labels))
    }

    /// Divingbell's rule for one daemonset: a host override beats label overrides, and of the
    /// label overrides the last that matches wins.
    pub fn choice(&self, module: Module, host: &str, labels: &BTreeMap<String, String>) -> Choice {
        let Some(overrides) = self.overrides.get(&module) else {
            return Choice::Base;
        };
        if let Some(i) = overrides.hosts.iter().rposition(|h| h.name == host) {
            return Choice::Host(i);
        }
        match overrides
            .labels
            .iter()
            .rposition(|l| labels.get(&l.key).is_some_and(|v| l.values.contains(v)))
        {
            Some(i) => Choice::Label(i),
            None => Choice::Base,
        }
    }

    /// What a module's daemonset reads under a choice: the override's values merged over the
    /// module's own, as Helm merges them.
    pub fn conf(&self, module: Module, choice: Choice) -> Node {
        let empty = Node {
            value: Value::Map(Vec::new()),
            span: Span::new(bellc_core::source::FileId(0), (0, 0).into()),
        };
        let base = self.base.get(&module).unwrap_or(&empty);
        let over = self.overrides.get(&module).and_then(|o| match choice {
            Choice::Base => None,
            Choice::Label(i) => o.labels.get(i).map(|l| &l.conf),
            Choice::Host(i) => o.hosts.get(i).map(|h| &h.conf),
        });
        match over {
            Some(over) => merge(base, over),
            None => base.clone(),
        }
    }
}

/// Helm's merge of values: mappings merge key by key, a `null` takes a key away, and anything
/// else (lists included) replaces what it overrides whole.
pub fn merge(base: &Node, over: &Node) -> Node {
    let (Some(base_entries), Some(over_entries)) = (base.entries(), over.entries()) else {
        return over.clone();
    };
    let mut merged: Vec<(Node, Node)> = Vec::new();
    for (key, value) in base_entries {
        match over_entries
            .iter()
            .find(|(k, _)| k.scalar() == key.scalar())
        {
            Some((_, o)) if o.is_null() => {}
            // The later file's key: what is said of the key is said where it applies.
            Some((k, o)) => merged.push((k.clone(), merge(value, o))),
            None => merged.push((key.clone(), value.clone())),
        }
    }
    for (key, value) in over_entries {
        let new = !base_entries.iter().any(|(k, _)| k.scalar() == key.scalar());
        if new && !value.is_null() {
            merged.push((key.clone(), value.clone()));
        }
    }
    Node {
        value: Value::Map(merged),
        span: over.span,
    }
}

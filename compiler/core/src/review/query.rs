//! `bellc query KIND:NAME[.FIELD]`: one value across many hosts, from the resolved model (no
//! build): for each value the hosts that get it and the layer and `file:line` that set it, and
//! the hosts that do not have it at all. What `explain` says host by host, asked across the
//! fleet ("which hosts get `vm.swappiness`, and with what?").
//!
//! What can be asked: `sysctl:KEY`, `KIND:NAME` (the whole resource), `KIND:NAME.FIELD` (one
//! field: `limit:nofile.value`, `user:ops.shell`), a setting's field (`apt.allow-downgrade`),
//! and `KIND:*` / `sysctl:*` for every resource of a kind any selected host has.

use super::select::Selector;
use crate::render::values::{dotted, field_text, field_text_from, sysctl_value};
use crate::resolve::{Origin, ResolvedHost, ResolvedResource};
use crate::source::Sources;
use crate::spec::Kind;
use crate::spec::Spec;
use serde::Serialize;

/// The value of a field a resource leaves to its default.
const DEFAULT: &str = "(default)";

/// The version of the JSON `bellc query --json` prints.
pub const QUERY_FORMAT: u32 = 1;

/// What a query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `sysctl:KEY`, or every key (`sysctl:*`).
    Sysctl(Option<String>),
    /// A resource (`None`: every one of the kind), the whole of it or one field.
    Resource {
        kind: Kind,
        name: Option<String>,
        field: Option<String>,
    },
}

impl Target {
    /// `sysctl:vm.swappiness`, `user:ops.shell`, `file:/etc/a.conf`, `apt.allow-downgrade`,
    /// `limit:*`. A resource name may hold dots (`file:/etc/app.conf`): the part after the last
    /// dot is a field only when the kind has a field of that name.
    pub fn parse(text: &str) -> Result<Target, String> {
        let kinds = || {
            let mut words: Vec<&str> = Kind::ALL.iter().map(|k| k.keyword()).collect();
            words.push("sysctl");
            words.sort();
            words.join(", ")
        };
        let (word, rest) = match text.split_once(':') {
            Some((word, rest)) => (word, Some(rest)),
            None => match text.split_once('.') {
                Some((word, _)) => (word, None),
                None => (text, None),
            },
        };
        if word == "sysctl" {
            return match rest {
                Some("*") => Ok(Target::Sysctl(None)),
                Some(key) if !key.is_empty() => Ok(Target::Sysctl(Some(key.to_string()))),
                _ => Err(format!(
                    "`{text}`: say which key, `sysctl:vm.swappiness`, or `sysctl:*` for every one"
                )),
            };
        }
        let kind = Kind::from_keyword(word)
            .ok_or_else(|| format!("`{text}`: `{word}` is not a kind (kinds: {})", kinds()))?;
        let has_field = |field: &str| kind.schema().iter().any(|f| f.name == field);
        if kind.is_setting() {
            // `apt`, `apt.allow-downgrade`: one per host, no name.
            let field = text.strip_prefix(word).and_then(|f| f.strip_prefix('.'));
            if rest.is_some_and(|r| !r.is_empty()) {
                return Err(format!(
                    "`{text}`: `{word}` takes no name (one per host): `{word}` or \
                     `{word}.FIELD`"
                ));
            }
            return match field {
                Some(f) if !has_field(f) => Err(unknown_field(text, kind, f)),
                // A setting is named by its keyword, as the spec's lowering names it.
                field => Ok(Target::Resource {
                    kind,
                    name: Some(word.to_string()),
                    field: field.map(str::to_string),
                }),
            };
        }
        let rest = rest.filter(|r| !r.is_empty()).ok_or_else(|| {
            format!("`{text}`: say which {word}, `{word}:NAME[.FIELD]`, or `{word}:*`")
        })?;
        let (name, field) = match rest.rsplit_once('.') {
            Some((name, field)) if has_field(field) && !name.is_empty() => {
                (name, Some(field.to_string()))
            }
            _ => (rest, None),
        };
        Ok(Target::Resource {
            kind,
            name: (name != "*").then(|| name.to_string()),
            field,
        })
    }
}

fn unknown_field(text: &str, kind: Kind, field: &str) -> String {
    let fields: Vec<&str> = kind.schema().iter().map(|f| f.name).collect();
    format!(
        "`{text}`: `{}` has no field `{field}` (fields: {})",
        kind.keyword(),
        fields.join(", ")
    )
}

/// The answer: one item per thing asked (several for `KIND:*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub format: u32,
    pub query: String,
    /// The selector, as a person would say it (`every host`, `db-* where rack=r01`).
    pub selected: String,
    /// How many hosts it selected.
    pub hosts: usize,
    pub items: Vec<Item>,
}

/// One value asked for, across the selected hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// `sysctl:vm.swappiness`, `user:ops.shell`, `limit:nofile`.
    pub key: String,
    /// One per value (and where it was set), in the order the hosts come in the spec.
    pub groups: Vec<Group>,
    /// Selected hosts that do not have it.
    pub without: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// As a spec writes it (`10`, `"/bin/bash"`, for a whole resource its fields
    /// `shell="/bin/bash" uid=1000`); secrets as `"<secret>"`; `(default)` for a field the
    /// resource leaves to its default (then `layer` and `at` are the resource's).
    pub value: String,
    /// `base` or the override's name.
    pub layer: String,
    /// `FILE:LINE` of the node that set it.
    pub at: String,
    pub hosts: Vec<String>,
}

/// Answers `target` for the hosts of `hosts` that `selector` selects.
pub fn query(
    spec: &Spec,
    hosts: &[ResolvedHost],
    target: &Target,
    text: &str,
    selector: &Selector,
    sources: &Sources,
) -> Answer {
    let selected: Vec<&ResolvedHost> = hosts
        .iter()
        .filter(|h| selector.selects(&h.name, &h.labels))
        .collect();
    let keys = keys_of(&selected, target);
    let items = keys
        .iter()
        .map(|key| {
            let mut groups: Vec<Group> = Vec::new();
            let mut without = Vec::new();
            for host in &selected {
                match value_of(host, target, key, sources) {
                    Some((value, origin)) => {
                        let layer = origin.layer_name(spec).to_string();
                        let at = sources.file_line(origin.span);
                        match groups
                            .iter_mut()
                            .find(|g| g.value == value && g.layer == layer && g.at == at)
                        {
                            Some(group) => group.hosts.push(host.name.clone()),
                            None => groups.push(Group {
                                value,
                                layer,
                                at,
                                hosts: vec![host.name.clone()],
                            }),
                        }
                    }
                    None => without.push(host.name.clone()),
                }
            }
            Item {
                key: item_key(target, key),
                groups,
                without,
            }
        })
        .collect();
    Answer {
        format: QUERY_FORMAT,
        query: text.to_string(),
        selected: selector.describe(),
        hosts: selected.len(),
        items,
    }
}

/// The names asked about: the one named, or every one a selected host has (for `*`), sorted.
fn keys_of(selected: &[&ResolvedHost], target: &Target) -> Vec<String> {
    let mut keys: Vec<String> = match target {
        Target::Sysctl(Some(key)) => vec![key.clone()],
        Target::Resource {
            name: Some(name), ..
        } => vec![name.clone()],
        Target::Sysctl(None) => selected
            .iter()
            .flat_map(|h| h.model.sysctl.keys().map(|path| dotted(path)))
            .collect(),
        Target::Resource {
            kind, name: None, ..
        } => selected
            .iter()
            .flat_map(|h| {
                h.model
                    .resources
                    .iter()
                    .filter(|r| r.kind == *kind)
                    .map(|r| r.name.clone())
            })
            .collect(),
    };
    keys.sort();
    keys.dedup();
    keys
}

fn item_key(target: &Target, name: &str) -> String {
    match target {
        Target::Sysctl(_) => format!("sysctl:{name}"),
        Target::Resource { kind, field, .. } => {
            let head = if kind.is_setting() {
                kind.keyword().to_string()
            } else {
                format!("{}:{name}", kind.keyword())
            };
            match field {
                Some(field) => format!("{head}.{field}"),
                None => head,
            }
        }
    }
}

/// The value `host` gets for `name` of `target`, and where it was set.
fn value_of(
    host: &ResolvedHost,
    target: &Target,
    name: &str,
    sources: &Sources,
) -> Option<(String, Origin)> {
    match target {
        Target::Sysctl(_) => {
            // Keyed by path, so that `net/ipv4/ip_forward` and `net.ipv4.ip_forward` ask the
            // same.
            host.model
                .sysctl
                .get(&crate::front::validate::sysctl_path(name))
                .map(|s| (sysctl_value(&s.value), s.origin))
        }
        Target::Resource { kind, field, .. } => {
            let r = host
                .model
                .resources
                .iter()
                .find(|r| r.kind == *kind && r.name == name)?;
            match field.as_deref().map(|f| r.fields.get(f)) {
                Some(Some((value, origin))) => Some((
                    field_text_from(
                        r,
                        field.as_deref().unwrap_or_default(),
                        value,
                        sources.secret_origin(origin.span),
                    ),
                    *origin,
                )),
                // The resource is there and leaves the field to its default: said so, where
                // the resource was declared.
                Some(None) => Some((DEFAULT.to_string(), r.origin)),
                None => Some((whole(r, sources), r.origin)),
            }
        }
    }
}

/// What one layer gave a value: for `--overridden`, the values the final one overrode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    pub value: String,
    pub layer: String,
    pub at: String,
}

/// A value of a host's configuration, as the layers name it.
pub enum Key<'a> {
    /// A sysctl, by its path (slash form).
    Sysctl(&'a str),
    Field {
        kind: Kind,
        name: &'a str,
        field: &'a str,
    },
}

/// Every value a layer gave `key` on `host` before the one it ends with, nearest first: what
/// the final value overrode (base first, then each override the host gets, in order).
/// `text` writes a field's value as explain does (secrets hidden).
pub fn overridden(
    spec: &Spec,
    host: &ResolvedHost,
    key: &Key,
    text: &dyn Fn(&crate::spec::Value) -> String,
    sources: &Sources,
) -> Vec<Setting> {
    let layers = std::iter::once((None, &spec.base)).chain(
        host.model
            .layers
            .iter()
            .map(|&i| (Some(i), &spec.overrides[i].layer)),
    );
    let mut given: Vec<(String, Origin)> = Vec::new();
    for (layer, content) in layers {
        match key {
            Key::Sysctl(path) => {
                for s in &content.sysctl {
                    if crate::front::validate::sysctl_path(&s.key) == *path {
                        let value = s
                            .value
                            .as_deref()
                            .map_or_else(|| "#null (removed)".to_string(), sysctl_value);
                        given.push((
                            value,
                            Origin {
                                layer,
                                span: s.span,
                            },
                        ));
                    }
                }
            }
            Key::Field { kind, name, field } => {
                for decl in &content.resources {
                    if decl.kind == *kind && decl.name == *name {
                        if let Some(f) = decl.fields.get(field) {
                            given.push((
                                text(&f.value),
                                Origin {
                                    layer,
                                    span: f.span,
                                },
                            ));
                        }
                    }
                }
            }
        }
    }
    // The last given is the value the host ends with.
    given.pop();
    given
        .into_iter()
        .rev()
        .map(|(value, origin)| Setting {
            value,
            layer: origin.layer_name(spec).to_string(),
            at: sources.file_line(origin.span),
        })
        .collect()
}

/// `bellc explain --json`: hosts that share a configuration, and every value of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Configuration {
    pub hosts: Vec<String>,
    pub target: String,
    /// `base`, then the overrides in the order applied.
    pub layers: Vec<String>,
    /// Every sysctl (`sysctl:KEY`), then every field of every resource
    /// (`KIND:NAME.FIELD`; `KIND:NAME` with value `(declared)` for one without fields).
    pub values: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Value {
    pub key: String,
    pub value: String,
    pub layer: String,
    pub at: String,
    /// With `--overridden`: what earlier layers gave it, nearest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<Setting>,
}

/// The configuration `group` (hosts that share one, see [`super::explain::groups`]) gets.
pub fn configuration(
    spec: &Spec,
    group: &[&ResolvedHost],
    sources: &Sources,
    with_overridden: bool,
) -> Configuration {
    let Some(&host) = group.first() else {
        return Configuration {
            hosts: Vec::new(),
            target: String::new(),
            layers: Vec::new(),
            values: Vec::new(),
        };
    };
    let value = |key: String, value: String, origin: &Origin, earlier: Vec<Setting>| Value {
        key,
        value,
        layer: origin.layer_name(spec).to_string(),
        at: sources.file_line(origin.span),
        overridden: earlier,
    };
    let mut values = Vec::new();
    for (path, s) in host.model.sysctl.iter() {
        let earlier = if with_overridden {
            overridden(spec, host, &Key::Sysctl(path), &|_| String::new(), sources)
        } else {
            Vec::new()
        };
        values.push(value(
            format!("sysctl:{}", s.key),
            sysctl_value(&s.value),
            &s.origin,
            earlier,
        ));
    }
    for r in &host.model.resources {
        let head = item_key(
            &Target::Resource {
                kind: r.kind,
                name: Some(r.name.clone()),
                field: None,
            },
            &r.name,
        );
        if r.fields.is_empty() {
            values.push(value(
                head.clone(),
                "(declared)".into(),
                &r.origin,
                Vec::new(),
            ));
        }
        for (field, (v, origin)) in &r.fields {
            let earlier = if with_overridden {
                let key = Key::Field {
                    kind: r.kind,
                    name: &r.name,
                    field,
                };
                overridden(spec, host, &key, &|v| field_text(r, field, v), sources)
            } else {
                Vec::new()
            };
            values.push(value(
                format!("{head}.{field}"),
                field_text_from(r, field, v, sources.secret_origin(origin.span)),
                origin,
                earlier,
            ));
        }
    }
    Configuration {
        hosts: group.iter().map(|h| h.name.clone()).collect(),
        target: host.target.clone(),
        layers: std::iter::once("base".to_string())
            .chain(
                host.model
                    .layers
                    .iter()
                    .map(|&i| spec.overrides[i].name.clone()),
            )
            .collect(),
        values,
    }
}

/// A whole resource on one line: its fields as properties.
fn whole(r: &ResolvedResource, sources: &Sources) -> String {
    let fields: Vec<String> = r
        .fields
        .iter()
        .map(|(field, (value, origin))| {
            let from = sources.secret_origin(origin.span);
            format!("{field}={}", field_text_from(r, field, value, from))
        })
        .collect();
    if fields.is_empty() {
        "(declared)".to_string()
    } else {
        fields.join(" ")
    }
}

/// Names as text lists them: ten, then how many more (`--json` lists every one), as
/// `bellc diff` does.
pub(crate) fn names(hosts: &[String]) -> String {
    const SHOWN: usize = 10;
    if hosts.len() <= SHOWN {
        return hosts.join(" ");
    }
    format!(
        "{} … and {} more (--json lists all)",
        hosts[..SHOWN].join(" "),
        hosts.len() - SHOWN
    )
}

/// The answer as text: each item, then its groups with their hosts, then the hosts without.
pub fn to_text(answer: &Answer) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if answer.items.is_empty() {
        let _ = writeln!(
            out,
            "{}: no selected host has one ({} host{} selected: {})",
            answer.query,
            answer.hosts,
            if answer.hosts == 1 { "" } else { "s" },
            answer.selected
        );
        return out;
    }
    for item in &answer.items {
        let _ = writeln!(out, "{}", item.key);
        for g in &item.groups {
            let _ = writeln!(
                out,
                "  {}  // {}  {}  ({} host{})",
                g.value,
                g.layer,
                g.at,
                g.hosts.len(),
                if g.hosts.len() == 1 { "" } else { "s" }
            );
            let _ = writeln!(out, "      {}", names(&g.hosts));
        }
        if !item.without.is_empty() {
            let n = item.without.len();
            let _ = writeln!(
                out,
                "  (not set)  ({n} host{})",
                if n == 1 { "" } else { "s" }
            );
            let _ = writeln!(out, "      {}", names(&item.without));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Target;
    use crate::spec::Kind;

    #[test]
    fn text_lists_ten_names_and_how_many_more() {
        let hosts: Vec<String> = (1..=12).map(|i| format!("h{i}")).collect();
        assert_eq!(
            super::names(&hosts),
            "h1 h2 h3 h4 h5 h6 h7 h8 h9 h10 … and 2 more (--json lists all)"
        );
        assert_eq!(super::names(&hosts[..2]), "h1 h2");
    }

    #[test]
    fn targets_parse_with_dotted_names_and_fields() {
        assert_eq!(
            Target::parse("sysctl:vm.swappiness").unwrap(),
            Target::Sysctl(Some("vm.swappiness".into()))
        );
        assert_eq!(Target::parse("sysctl:*").unwrap(), Target::Sysctl(None));
        let user = Kind::from_keyword("user").unwrap();
        assert_eq!(
            Target::parse("user:ops.shell").unwrap(),
            Target::Resource {
                kind: user,
                name: Some("ops".into()),
                field: Some("shell".into())
            }
        );
        let file = Kind::from_keyword("file").unwrap();
        assert_eq!(
            Target::parse("file:/etc/app.conf").unwrap(),
            Target::Resource {
                kind: file,
                name: Some("/etc/app.conf".into()),
                field: None
            }
        );
        assert_eq!(
            Target::parse("user:*").unwrap(),
            Target::Resource {
                kind: user,
                name: None,
                field: None
            }
        );
        assert!(Target::parse("nosuch:x")
            .unwrap_err()
            .contains("not a kind"));
        assert!(Target::parse("user").unwrap_err().contains("user:NAME"));
        assert!(Target::parse("sysctl").unwrap_err().contains("which key"));
    }
}

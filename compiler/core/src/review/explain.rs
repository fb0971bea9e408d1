//! `bellc explain HOST`: the resolved configuration of one host, every value with the layer
//! (base or override) and the `file:line` that set it.
//!
//! The output is a spec in the language's own syntax (KDL 2): each value written as a spec
//! writes it, each node or property on its own line with a `// layer  file:line` comment, so
//! that what explain shows can be pasted into a spec as it is and parses back to the same
//! configuration (secrets aside, which show as `"<secret>"`). What is not spec syntax (the
//! host's layers, the resources bell implies) is a comment.

use super::query::Key;
use crate::kdl_text::{block, ident, string};
use crate::render::values::{
    duration, field_text, is_secret, number_or_string, scalar, secret_text, SECRET,
};
use crate::resolve::{Origin, ResolvedHost, ResolvedResource};
use crate::source::Sources;
use crate::spec::{FieldSource, FieldType, Spec, Value};
use std::fmt::Write;

/// Why the host carries each label an `assign` gave it, as comments.
fn assigned(spec: &Spec, name: &str, sources: &Sources) -> Vec<String> {
    let Some(host) = spec.hosts.iter().find(|h| h.name == name) else {
        return Vec::new();
    };
    host.assigned
        .iter()
        .map(|&a| {
            let rule = &spec.assigns[a];
            let node = format!("assign {}={}", ident(&rule.label), string(&rule.value));
            let at = sources.file_line(rule.span);
            match rule.count {
                Some(count) => {
                    let place = rule
                        .hosts
                        .iter()
                        .position(|h| h == name)
                        .map_or(0, |p| p + 1);
                    format!(
                        "// {}={}: {node} count={count}  {at}: chosen {place} of {} \
                         (hosts written in the spec in their order, then accepted hosts in the \
                         order accepted)",
                        rule.label,
                        string(&rule.value),
                        rule.hosts.len()
                    )
                }
                None => format!(
                    "// {}={}: {node}  {at}: every host that matches and has no `{}` otherwise",
                    rule.label,
                    string(&rule.value),
                    rule.label
                ),
            }
        })
        .collect()
}

/// One line of output (or several, for a multi-line string) and the comment that goes after
/// its last line.
struct Row {
    text: String,
    comment: String,
}

pub fn explain(spec: &Spec, host: &ResolvedHost, sources: &Sources) -> String {
    explain_group(spec, &[host], sources, false)
}

/// The hosts of `hosts` grouped by configuration: hosts that share their resolved model (the
/// same layers, so the same values from the same lines) and target are one group, in the
/// order their first host comes.
pub fn groups<'a>(hosts: &[&'a ResolvedHost]) -> Vec<Vec<&'a ResolvedHost>> {
    let mut groups: Vec<Vec<&ResolvedHost>> = Vec::new();
    for &host in hosts {
        match groups.iter_mut().find(|g| {
            std::sync::Arc::ptr_eq(&g[0].model, &host.model) && g[0].target == host.target
        }) {
            Some(group) => group.push(host),
            None => groups.push(vec![host]),
        }
    }
    groups
}

/// Hosts that share a configuration (see [`groups`]), explained once: each host's own line,
/// then the configuration. With `overridden`, each value's comment also names the values
/// earlier layers gave it (`over 10  base  bell.kdl:10`), nearest first.
pub fn explain_group(
    spec: &Spec,
    hosts: &[&ResolvedHost],
    sources: &Sources,
    overridden: bool,
) -> String {
    let Some(&host) = hosts.first() else {
        return String::new();
    };
    let origin = |o: &Origin| format!("{}  {}", o.layer_name(spec), sources.file_line(o.span));
    let over = |key: &Key, text: &dyn Fn(&Value) -> String| -> String {
        if !overridden {
            return String::new();
        }
        super::query::overridden(spec, host, key, text, sources)
            .iter()
            .map(|s| format!(" · over {}  {}  {}", s.value, s.layer, s.at))
            .collect()
    };
    let mut out = String::new();
    let layers: Vec<&str> = std::iter::once("base")
        .chain(
            host.model
                .layers
                .iter()
                .map(|&i| spec.overrides[i].name.as_str()),
        )
        .collect();
    let _ = writeln!(out, "// target: {}", host.target);
    let _ = writeln!(out, "// layers: {}", layers.join(" → "));
    if hosts.len() > 1 {
        let _ = writeln!(out, "// {} hosts with this configuration", hosts.len());
    }
    for member in hosts {
        let mut host_line = format!("host {}", string(&member.name));
        if let Some(a) = &member.address {
            let _ = write!(host_line, " address={}", string(a));
        }
        if let Some(identity) = &member.identity {
            let _ = write!(host_line, " identity={}", string(identity));
        }
        for (k, v) in member.labels.iter() {
            let _ = write!(host_line, " {}={}", ident(k), string(v));
        }
        let _ = writeln!(out, "{host_line}");
        for line in assigned(spec, &member.name, sources) {
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(out);

    let mut rows: Vec<Row> = Vec::new();
    let mut row = |text: String, comment: String| rows.push(Row { text, comment });
    if !host.model.sysctl.is_empty() {
        row("sysctl {".into(), String::new());
        for (path, s) in host.model.sysctl.iter() {
            let earlier = over(&Key::Sysctl(path), &|_| String::new());
            row(
                format!("    {} {}", ident(&s.key), number_or_string(&s.value)),
                format!("{}{earlier}", origin(&s.origin)),
            );
        }
        row("}".into(), String::new());
    }
    for r in &host.model.resources {
        let earlier = |field: &str| {
            over(
                &Key::Field {
                    kind: r.kind,
                    name: &r.name,
                    field,
                },
                &|value| field_text(r, field, value),
            )
        };
        let secret = |o: &Origin| string(&secret_text(sources.secret_origin(o.span)));
        resource(r, &origin, &earlier, &secret, &mut row);
    }
    // `service` and `uses` stand only in an override: one that matches this host.
    if !host.model.services.is_empty() || !host.model.uses.is_empty() {
        row(format!("override {} {{", string(&host.name)), String::new());
        for member in hosts {
            row(
                format!("    match host={}", string(&member.name)),
                String::new(),
            );
        }
        for s in &host.model.services {
            let port = s.port.map(|p| format!(" port={p}")).unwrap_or_default();
            row(
                format!("    service {}{port}", string(&s.name)),
                origin(&s.origin),
            );
        }
        for u in &host.model.uses {
            row(
                format!(
                    "    uses {} count={} runtime=#{}",
                    string(&u.name),
                    u.count,
                    u.runtime
                ),
                origin(&u.origin),
            );
        }
        row("}".into(), String::new());
    }
    // Resources bell adds on its own are not the spec's to write: they are said as comments.
    if let Some(target) = crate::targets::get(&host.target) {
        for implied in crate::kinds::implied(&host.model, target) {
            let (kind, name) = implied.key.split_once(':').unwrap_or((&implied.key, ""));
            row(
                format!("// implied: {kind} {}", string(name)),
                format!("by {}", origin(&implied.origin)),
            );
            row(format!("//   {}", implied.why), String::new());
        }
    }
    let last_line_len = |text: &str| text.lines().last().map_or(0, |l| l.chars().count());
    let width = rows
        .iter()
        .filter(|r| !r.comment.is_empty())
        .map(|r| last_line_len(&r.text))
        .filter(|&n| n <= 60)
        .max()
        .unwrap_or(0);
    for Row { text, comment } in rows {
        if comment.is_empty() {
            let _ = writeln!(out, "{text}");
        } else {
            let pad = width.saturating_sub(last_line_len(&text));
            let _ = writeln!(out, "{text}{}  // {comment}", " ".repeat(pad));
        }
    }
    out
}

/// A resource as a node: the name, one property per line (joined by KDL's line continuation,
/// which takes a comment), then the children in a block.
fn resource(
    r: &ResolvedResource,
    origin: &dyn Fn(&Origin) -> String,
    earlier: &dyn Fn(&str) -> String,
    secret: &dyn Fn(&Origin) -> String,
    row: &mut dyn FnMut(String, String),
) {
    let origin_of = |field: &str, o: &Origin| format!("{}{}", origin(o), earlier(field));
    let schema = r.kind.schema();
    let source_of = |field: &str| {
        schema
            .iter()
            .find(|f| f.name == field)
            .map_or(FieldSource::ChildArgs, |f| f.source)
    };
    let type_of = |field: &str| schema.iter().find(|f| f.name == field).map(|f| f.ty);
    let mut props: Vec<(String, String)> = Vec::new();
    let mut children: Vec<(String, String)> = Vec::new();
    for (field, (value, o)) in &r.fields {
        let source = source_of(field);
        if source == FieldSource::Prop {
            let shown = match (value, type_of(field)) {
                (Value::Int(secs), Some(FieldType::Duration | FieldType::DurationOrInfinite)) => {
                    string(&duration(*secs))
                }
                (Value::Str(v), Some(FieldType::IntOrStr)) => number_or_string(v),
                _ => scalar(value),
            };
            let mut comment = origin_of(field, o);
            // Divingbell's meaning, which a reader of `#true` may not guess.
            if r.kind.keyword() == "user" && *field == "sudo" && *value == Value::Bool(true) {
                comment.push_str(
                    "  (NOPASSWD: root without a password; `sudo=\"password\"` asks for it)",
                );
            }
            props.push((format!("{}={shown}", ident(field)), comment));
            continue;
        }
        let child = |text: String| (format!("    {text}"), origin_of(field, o));
        match value {
            _ if is_secret(r, field) => children.push(child(format!("{field} {}", secret(o)))),
            Value::WaitFor(waits) => {
                for w in waits {
                    children.push(child(format!(
                        "wait-for {}",
                        crate::render::values::wait_for(w)
                    )));
                }
            }
            Value::Debconf(answers) => {
                for d in answers {
                    let value = if d.kind == "password" {
                        SECRET
                    } else {
                        &d.value
                    };
                    children.push(child(format!(
                        "debconf {} type={} value={}",
                        string(&d.question),
                        string(&d.kind),
                        string(value)
                    )));
                }
            }
            // `ethtool`: every feature is a child of its own, `FEATURE on|off`.
            Value::Map(m) if source == FieldSource::AnyChildren => {
                for (k, v) in m {
                    children.push(child(format!("{} {}", ident(k), ident(v))));
                }
            }
            Value::Map(m) => {
                let props: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}={}", ident(k), string(v)))
                    .collect();
                children.push(child(format!("{field} {}", props.join(" "))));
            }
            Value::List(items) if source == FieldSource::RepeatedChildArg => {
                for item in items {
                    children.push(child(format!("{field} {}", string(item))));
                }
            }
            Value::List(items) => {
                let args: Vec<String> = items.iter().map(|s| string(s)).collect();
                children.push(child(format!("{field} {}", args.join(" "))));
            }
            Value::Str(s) if s.contains('\n') => {
                children.push(child(format!("{field} {}", block(s, "    "))));
            }
            _ => children.push(child(format!("{field} {}", scalar(value)))),
        }
    }
    let mut head = r.kind.keyword().to_string();
    if !r.kind.is_setting() {
        let _ = write!(head, " {}", string(&r.name));
    }
    let open = if children.is_empty() { "" } else { " {" };
    if props.is_empty() {
        row(format!("{head}{open}"), origin(&r.origin));
    } else {
        row(format!("{head} \\"), origin(&r.origin));
        let last = props.len() - 1;
        for (i, (text, comment)) in props.into_iter().enumerate() {
            let end = if i == last { open } else { " \\" };
            row(format!("    {text}{end}"), comment);
        }
    }
    if !children.is_empty() {
        for (text, comment) in children {
            row(text, comment);
        }
        row("}".into(), String::new());
    }
}

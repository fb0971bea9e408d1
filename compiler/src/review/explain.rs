//! `bellc explain HOST`: the resolved configuration of one host, every value with the layer
//! (base or override) and the `file:line` that set it.

use crate::render::looks_like_private_key;
use crate::resolve::{Origin, ResolvedHost};
use crate::source::Sources;
use crate::spec::{FieldSource, FieldType, Spec, Value};
use std::fmt::Write;

/// What explain shows of a secret value. Not even its size or digest: a bare password's digest
/// could be guessed back from a list of common ones.
const SECRET: &str = "<secret>";

pub fn explain(spec: &Spec, host: &ResolvedHost, sources: &Sources) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    let origin = |o: &Origin| format!("{}  {}", o.layer_name(spec), sources.file_line(o.span));
    let mut out = String::new();
    let _ = writeln!(out, "host {}", host.name);
    if let Some(a) = &host.address {
        let _ = writeln!(out, "  address: {a}");
    }
    let _ = writeln!(out, "  target: {}", host.target);
    if !host.labels.is_empty() {
        let labels: Vec<String> = host
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "  labels: {}", labels.join(" "));
    }
    let layers: Vec<&str> = std::iter::once("base")
        .chain(
            host.model
                .layers
                .iter()
                .map(|&i| spec.overrides[i].name.as_str()),
        )
        .collect();
    let _ = writeln!(out, "  layers: {}", layers.join(" → "));
    let _ = writeln!(out);

    // Every value as the spec writes it: `sysctl vm.swappiness 10`, `value=65536`, `sudo=#true`.
    for s in host.model.sysctl.values() {
        rows.push((
            format!("sysctl {} {}", s.key, number_or_string(&s.value)),
            origin(&s.origin),
        ));
    }
    for r in &host.model.resources {
        rows.push((
            format!("{} {}", r.kind.keyword(), show_str(&r.name)),
            origin(&r.origin),
        ));
        // A file's content is secret when its mode keeps everyone else out or it holds a
        // private key, as the bundle marks it.
        let private_content = r.fields.get("mode").is_some_and(|(mode, _)| {
            matches!(mode, Value::Str(m) if bell_bundle::parse_mode(m).is_some_and(bell_bundle::private_mode))
        }) || r.fields.get("content").is_some_and(|(content, _)| {
            matches!(content, Value::Str(c) if looks_like_private_key(c.as_bytes()))
        });
        let schema = r.kind.schema();
        for (field, (value, o)) in &r.fields {
            let spec_field = schema.iter().find(|f| f.name == *field);
            // Secrets are never printed, only where they were set.
            let shown = match (*field, value) {
                ("password", _) => SECRET.to_string(),
                ("content", _) if private_content => SECRET.to_string(),
                (_, Value::Debconf(answers)) => {
                    for d in answers {
                        let value = if d.kind == "password" {
                            SECRET.to_string()
                        } else {
                            show_str(&d.value)
                        };
                        rows.push((
                            format!(
                                "    debconf {} type={} value={value}",
                                show_str(&d.question),
                                show_str(&d.kind)
                            ),
                            origin(o),
                        ));
                    }
                    continue;
                }
                (_, Value::Str(v)) if spec_field.is_some_and(|f| f.ty == FieldType::IntOrStr) => {
                    number_or_string(v)
                }
                (_, Value::List(items))
                    if spec_field.is_some_and(|f| f.source == FieldSource::RepeatedChildArg) =>
                {
                    // One node per item, as written.
                    for item in items {
                        rows.push((format!("    {field} {}", show_str(item)), origin(o)));
                    }
                    continue;
                }
                _ => show(value),
            };
            let line = match spec_field.map(|f| f.source) {
                Some(FieldSource::Prop) => format!("    {field}={shown}"),
                _ => format!("    {field} {shown}"),
            };
            rows.push((line, origin(o)));
        }
    }
    if let Some(target) = crate::targets::get(&host.target) {
        for implied in crate::kinds::implied(&host.model, target) {
            let (kind, name) = implied.key.split_once(':').unwrap_or((&implied.key, ""));
            rows.push((
                format!("{kind} {}", show_str(name)),
                format!("implied by {}", origin(&implied.origin)),
            ));
            rows.push((String::new(), implied.why));
        }
    }
    for s in &host.model.services {
        let port = s.port.map(|p| format!(" port={p}")).unwrap_or_default();
        rows.push((
            format!("service {}{port}", show_str(&s.name)),
            origin(&s.origin),
        ));
    }
    for u in &host.model.uses {
        rows.push((
            format!(
                "uses {} count={} runtime=#{}",
                show_str(&u.name),
                u.count,
                u.runtime
            ),
            origin(&u.origin),
        ));
    }
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    for (left, right) in rows {
        let pad = width.saturating_sub(left.chars().count());
        let _ = writeln!(out, "{left}{}  # {right}", " ".repeat(pad));
    }
    out
}

/// A string as KDL writes it: quoted, with its escapes.
fn show_str(s: &str) -> String {
    format!("{s:?}")
}

/// A value the spec may write either way (`value=65536`, `vm.swappiness 10`): bare when it is
/// a whole number, quoted otherwise.
fn number_or_string(s: &str) -> String {
    if s.parse::<i64>().is_ok() {
        s.to_string()
    } else {
        show_str(s)
    }
}

fn show(value: &Value) -> String {
    let one_line = |s: &str| {
        if s.contains('\n') {
            let first = s.lines().next().unwrap_or("");
            format!("{first:?}… ({} lines)", s.lines().count())
        } else {
            format!("{s:?}")
        }
    };
    match value {
        Value::Bool(b) => format!("#{b}"),
        Value::Int(i) => i.to_string(),
        Value::Str(s) => one_line(s),
        Value::List(l) => l.iter().map(|s| one_line(s)).collect::<Vec<_>>().join(" "),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", show_str(v)))
            .collect::<Vec<_>>()
            .join(" "),
        Value::Debconf(d) => d
            .iter()
            .map(|d| format!("{}({})={}", d.question, d.kind, d.value))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

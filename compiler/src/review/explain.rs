//! `bellc explain HOST`: the resolved configuration of one host, every value with the layer
//! (base or override) and the `file:line` that set it.
//!
//! The output is a spec in the language's own syntax (KDL 2): each value written as a spec
//! writes it, each node or property on its own line with a `// layer  file:line` comment, so
//! that what explain shows can be pasted into a spec as it is and parses back to the same
//! configuration (secrets aside, which show as `"<secret>"`). What is not spec syntax (the
//! host's layers, the resources bell implies) is a comment.

use crate::render::looks_like_private_key;
use crate::resolve::{Origin, ResolvedHost, ResolvedResource};
use crate::source::Sources;
use crate::spec::{FieldSource, FieldType, Spec, Value};
use std::fmt::Write;

/// What explain shows of a secret value. Not even its size or digest: a bare password's digest
/// could be guessed back from a list of common ones.
const SECRET: &str = "<secret>";

/// One line of output (or several, for a multi-line string) and the comment that goes after
/// its last line.
struct Row {
    text: String,
    comment: String,
}

pub fn explain(spec: &Spec, host: &ResolvedHost, sources: &Sources) -> String {
    let origin = |o: &Origin| format!("{}  {}", o.layer_name(spec), sources.file_line(o.span));
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
    let mut host_line = format!("host {}", kdl_string(&host.name));
    if let Some(a) = &host.address {
        let _ = write!(host_line, " address={}", kdl_string(a));
    }
    for (k, v) in host.labels.iter() {
        let _ = write!(host_line, " {}={}", kdl_ident(k), kdl_string(v));
    }
    let _ = writeln!(out, "{host_line}");
    let _ = writeln!(out);

    let mut rows: Vec<Row> = Vec::new();
    let mut row = |text: String, comment: String| rows.push(Row { text, comment });
    if !host.model.sysctl.is_empty() {
        row("sysctl {".into(), String::new());
        for s in host.model.sysctl.values() {
            row(
                format!("    {} {}", kdl_ident(&s.key), number_or_string(&s.value)),
                origin(&s.origin),
            );
        }
        row("}".into(), String::new());
    }
    for r in &host.model.resources {
        resource(r, &origin, &mut row);
    }
    // `service` and `uses` stand only in an override: one that matches this host.
    if !host.model.services.is_empty() || !host.model.uses.is_empty() {
        row(
            format!("override {} {{", kdl_string(&host.name)),
            String::new(),
        );
        row(
            format!("    match host={}", kdl_string(&host.name)),
            String::new(),
        );
        for s in &host.model.services {
            let port = s.port.map(|p| format!(" port={p}")).unwrap_or_default();
            row(
                format!("    service {}{port}", kdl_string(&s.name)),
                origin(&s.origin),
            );
        }
        for u in &host.model.uses {
            row(
                format!(
                    "    uses {} count={} runtime=#{}",
                    kdl_string(&u.name),
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
                format!("// implied: {kind} {}", kdl_string(name)),
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
    row: &mut dyn FnMut(String, String),
) {
    // A file's content is secret when its mode keeps everyone else out or it holds a private
    // key, as the bundle marks it.
    let private_content = r.fields.get("mode").is_some_and(|(mode, _)| {
        matches!(mode, Value::Str(m) if bell_bundle::parse_mode(m).is_some_and(bell_bundle::private_mode))
    }) || r.fields.get("content").is_some_and(|(content, _)| {
        matches!(content, Value::Str(c) if looks_like_private_key(c.as_bytes()))
    });
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
        let secret = *field == "password" || (*field == "content" && private_content);
        if source == FieldSource::Prop {
            let shown = match (value, type_of(field)) {
                (Value::Int(secs), Some(FieldType::Duration | FieldType::DurationOrInfinite)) => {
                    kdl_string(&duration(*secs))
                }
                (Value::Str(v), Some(FieldType::IntOrStr)) => number_or_string(v),
                _ => scalar(value),
            };
            props.push((format!("{}={shown}", kdl_ident(field)), origin(o)));
            continue;
        }
        let child = |text: String| (format!("    {text}"), origin(o));
        match value {
            _ if secret => children.push(child(format!("{field} {}", kdl_string(SECRET)))),
            Value::Debconf(answers) => {
                for d in answers {
                    let value = if d.kind == "password" {
                        SECRET
                    } else {
                        &d.value
                    };
                    children.push(child(format!(
                        "debconf {} type={} value={}",
                        kdl_string(&d.question),
                        kdl_string(&d.kind),
                        kdl_string(value)
                    )));
                }
            }
            // `ethtool`: every feature is a child of its own, `FEATURE on|off`.
            Value::Map(m) if source == FieldSource::AnyChildren => {
                for (k, v) in m {
                    children.push(child(format!("{} {}", kdl_ident(k), kdl_ident(v))));
                }
            }
            Value::Map(m) => {
                let props: Vec<String> = m
                    .iter()
                    .map(|(k, v)| format!("{}={}", kdl_ident(k), kdl_string(v)))
                    .collect();
                children.push(child(format!("{field} {}", props.join(" "))));
            }
            Value::List(items) if source == FieldSource::RepeatedChildArg => {
                for item in items {
                    children.push(child(format!("{field} {}", kdl_string(item))));
                }
            }
            Value::List(items) => {
                let args: Vec<String> = items.iter().map(|s| kdl_string(s)).collect();
                children.push(child(format!("{field} {}", args.join(" "))));
            }
            Value::Str(s) if s.contains('\n') => {
                children.push(child(format!("{field} {}", multi_line(s, "    "))));
            }
            _ => children.push(child(format!("{field} {}", scalar(value)))),
        }
    }
    let mut head = r.kind.keyword().to_string();
    if !r.kind.is_setting() {
        let _ = write!(head, " {}", kdl_string(&r.name));
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

/// A one-line value as a spec writes it.
fn scalar(value: &Value) -> String {
    match value {
        Value::Bool(b) => format!("#{b}"),
        Value::Int(i) => i.to_string(),
        Value::Str(s) => kdl_string(s),
        Value::List(l) => l
            .iter()
            .map(|s| kdl_string(s))
            .collect::<Vec<_>>()
            .join(" "),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| format!("{}={}", kdl_ident(k), kdl_string(v)))
            .collect::<Vec<_>>()
            .join(" "),
        Value::Debconf(_) => String::new(),
    }
}

/// Seconds in the largest unit that divides them: `"1h"`, `"5m"`, `"90s"`.
fn duration(secs: i64) -> String {
    match secs {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A value the spec may write either way (`value=65536`, `vm.swappiness 10`): bare when it is
/// a whole number that reads back the same, quoted otherwise (`"010"` stays a string).
fn number_or_string(s: &str) -> String {
    match s.parse::<i64>() {
        Ok(n) if n.to_string() == s => s.to_string(),
        _ => kdl_string(s),
    }
}

/// Whether KDL 2 forbids `c` as it is in a quoted string: control characters, the ones that
/// end a line, and the invisible ones that reorder text.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200E}' | '\u{200F}' | '\u{FEFF}'
        )
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// A string as KDL 2 writes it: quoted, with its escapes.
pub fn kdl_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_into(&mut out, c);
    }
    out.push('"');
    out
}

/// A property or node name: bare when it is a plain word (`net.ipv4.ip_forward`,
/// `tx-checksum-ip-generic`, `on`), quoted otherwise.
pub fn kdl_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '+'))
        && !matches!(s, "true" | "false" | "null" | "inf" | "nan");
    if plain {
        s.to_string()
    } else {
        kdl_string(s)
    }
}

/// A string of several lines as a KDL 2 multi-line string, its lines indented under `indent`,
/// so that a script reads as a script. Falls back to one quoted line when the multi-line form
/// would not read back the same (checked with the parser that reads specs).
fn multi_line(s: &str, indent: &str) -> String {
    let inner = format!("{indent}    ");
    let mut out = String::from("\"\"\"\n");
    for line in s.split('\n') {
        // A line of only whitespace reads back empty: its whitespace is escaped.
        let blank = !line.is_empty() && line.chars().all(char::is_whitespace);
        if !line.is_empty() {
            out.push_str(&inner);
        }
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                ' ' if blank => out.push_str("\\u{20}"),
                '\t' if !blank => out.push('\t'),
                // A quote stands as it is, unless it would begin a `"""` that ends the string.
                '"' if chars.peek() != Some(&'"') => out.push('"'),
                c => escape_into(&mut out, c),
            }
        }
        out.push('\n');
    }
    out.push_str(&inner);
    out.push_str("\"\"\"");
    let reads_back = kdl::KdlDocument::parse_v2(&format!("n {out}\n")).is_ok_and(|doc| {
        doc.nodes()
            .first()
            .and_then(|n| n.entries().first())
            .is_some_and(|e| e.value().as_string() == Some(s))
    });
    if reads_back {
        out
    } else {
        kdl_string(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads_back(literal: &str) -> Option<String> {
        let doc = kdl::KdlDocument::parse_v2(&format!("n {literal}\n")).ok()?;
        let entry = doc.nodes().first()?.entries().first()?;
        entry.value().as_string().map(str::to_string)
    }

    #[test]
    fn strings_read_back_the_same() {
        for s in [
            "",
            "plain",
            "a \"quoted\" \\ word",
            "nul\0bell\u{7}del\u{7f}nel\u{85}",
            "line\u{2028}sep\u{200e}rtl\u{202e}bom\u{feff}",
            "tab\there\r\n",
            "#!/bin/sh\necho \"hi\" > /etc/motd\n",
            "  \n\t\nend",
            "no newline at the end\nsecond",
            "\"\"\"\nquotes\n\"\"\"",
            "trailing spaces   \n  indented\n",
            "\\\n back\\slash\n",
        ] {
            assert_eq!(reads_back(&kdl_string(s)).as_deref(), Some(s), "{s:?}");
            assert_eq!(
                reads_back(&multi_line(s, "    ")).as_deref(),
                Some(s),
                "{s:?}"
            );
        }
        // Scripts and files are shown as they read, not as one escaped line.
        for s in [
            "#!/bin/sh\necho \"hi\" > /etc/motd\n",
            "[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true",
            "  \n\t\nend",
            "trailing spaces   \n  indented\n",
            "\\\n back\\slash\n",
        ] {
            assert!(multi_line(s, "    ").starts_with("\"\"\"\n"), "{s:?}");
        }
    }

    #[test]
    fn names_are_bare_only_when_kdl_reads_them_as_written() {
        for s in [
            "net.ipv4.ip_forward",
            "on",
            "env1",
            "true",
            "1abc",
            "a b",
            "a=b",
            "-1",
            "",
        ] {
            let doc = kdl::KdlDocument::parse_v2(&format!("n {}=1\n", kdl_ident(s))).unwrap();
            let name = doc.nodes()[0].entries()[0]
                .name()
                .unwrap()
                .value()
                .to_string();
            assert_eq!(name, s);
        }
    }

    #[test]
    fn durations_take_their_largest_unit() {
        assert_eq!(duration(3600), "1h");
        assert_eq!(duration(300), "5m");
        assert_eq!(duration(90), "90s");
        assert_eq!(duration(0), "0s");
    }
}

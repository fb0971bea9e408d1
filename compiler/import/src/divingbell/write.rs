//! The spec text: the modules' declarations, then the overrides.
//!
//! Divingbell picks an override per daemonset: a host may take a host override for sysctl and
//! a label override for mounts. When only one daemonset has overrides, bellc's
//! `overrides="exclusive"` (Divingbell's rule, one override per host) says the same, override
//! for override. When several have, one bellc override per host cannot, so the spec is
//! `layered`: one override per Divingbell override, each restating or taking back whatever an
//! earlier override of its daemonset may have set, so that the last one to apply leaves the
//! host exactly as Divingbell would.

use super::modules::{map, Decl, Note, NoteKind, Place};
use super::values::{Choice, Values};
use bellc_core::front::inventory::Entry;
use bellc_core::kdl_text::{ident, string};
use bellc_core::source::Span;
use std::collections::BTreeSet;

pub struct Options<'a> {
    pub fleet: &'a str,
    pub target: &'a str,
    /// The values file as the user named it, for the header.
    pub source: &'a str,
    pub hosts: &'a [Entry],
    /// Where every label of the hosts is kept when the host lines keep only those the spec
    /// uses (a JSON inventory beside the spec); `None` drops them.
    pub all_labels: Option<&'a str>,
}

/// The labels the spec's overrides match: those of label overrides and node selectors. A
/// node's other labels (kubelet's, the cloud's: hundreds of characters a host) say nothing
/// about its configuration.
pub fn used_labels(values: &Values) -> BTreeSet<&str> {
    let overrides = values
        .overrides
        .values()
        .flat_map(|o| o.labels.iter().map(|l| l.key.as_str()));
    let selectors = values.selectors.values().map(|s| s.key.as_str());
    overrides.chain(selectors).collect()
}

/// Whether the overrides can be written in Divingbell's own exclusive mode: one daemonset
/// has overrides, and none runs on some nodes only (its values are then an override too).
pub fn exclusive(values: &Values) -> bool {
    let selected = values
        .selectors
        .keys()
        .any(|m| values.base.contains_key(m) || values.overrides.contains_key(m));
    !selected && daemonsets_with_overrides(values) <= 1
}

/// How many daemonsets have label or host overrides.
fn daemonsets_with_overrides(values: &Values) -> usize {
    values
        .overrides
        .values()
        .filter(|o| !o.labels.is_empty() || !o.hosts.is_empty())
        .count()
}

pub struct Written {
    pub text: String,
    /// Where each declaration is in `text`, and the values it came from.
    pub map: SourceMap,
    /// The spec holds a password hash or a debconf password.
    pub secret: bool,
    /// With `--verify`: the hosts and resources compared (differences are diagnostics).
    pub verified: Option<(usize, usize)>,
    /// Some host lines leave labels out (the spec's overrides do not match them).
    pub labels_left_out: bool,
}

/// Writes the spec; every note (for a warning) goes to `notes`, in the order of the text.
pub fn spec(
    values: &Values,
    options: &Options,
    // Where a span is in the values: `line 12`, or `site.yaml line 12` when there are several.
    line_of: &dyn Fn(Span) -> String,
    notes: &mut Vec<Note>,
) -> Written {
    // Where the values give the first secret: where the spec says it ships in the clear.
    let mut first_secret: Option<Span> = None;
    let mut places = SourceMap::new();
    let exclusive = exclusive(values);
    let mut out = String::new();
    out.push_str(&format!(
        "// Imported by `bellc import divingbell` from {}.\n",
        comment_text(options.source)
    ));
    out.push_str("//\n// Divingbell gives each host at most one override per daemonset: a host override beats\n// label overrides, and of the label overrides the last that matches wins.\n");
    let several = daemonsets_with_overrides(values) > 1;
    if exclusive {
        out.push_str("// bellc's overrides=\"exclusive\" is that rule.\n");
    } else if !several {
        out.push_str("// A daemonset runs on some nodes only (`labels.MODULE.node_selector_*`): its values are an\n// override of their own, which a host takes beside the daemonset's other overrides, and\n// overrides=\"exclusive\" (one per host) cannot say that. The overrides below are layered,\n// each restating or taking back what an earlier override of its daemonset may have set.\n");
    } else {
        out.push_str("// More than one daemonset has overrides, so a host may take one daemonset's override and\n// another's: overrides=\"exclusive\" (one per host) cannot say that. The overrides below are\n// layered, one per Divingbell override, each restating or taking back what an earlier\n// override of its daemonset may have set.\n");
    }
    if !values.chart_keys.is_empty() {
        out.push_str(&format!(
            "//\n// Settings of the chart, not of hosts, not imported: {}.\n",
            values.chart_keys.join(", ")
        ));
    }
    if !values.disabled.is_empty() {
        let off: Vec<&str> = values.disabled.iter().map(|m| m.key()).collect();
        out.push_str(&format!(
            "// Daemonsets `manifests` turns off, not imported: {}.\n",
            off.join(", ")
        ));
    }
    if !values.notes.is_empty() {
        out.push_str("//\n");
        comment_notes(&mut out, "", &values.notes, line_of);
        notes.extend(values.notes.iter().cloned());
    }
    let mode = if exclusive { "exclusive" } else { "layered" };
    let fleet_at = out.len();
    out.push_str(&format!(
        "fleet {} target={} overrides={}",
        string(options.fleet),
        string(options.target),
        string(mode)
    ));
    let fleet_end = out.len();
    out.push('\n');
    let mut labels_left_out = false;
    if !options.hosts.is_empty() {
        let used = used_labels(values);
        let dropped = options
            .hosts
            .iter()
            .any(|h| h.labels.iter().any(|(k, _)| !used.contains(k.as_str())));
        labels_left_out = dropped;
        if dropped {
            out.push_str(&match options.all_labels {
                Some(path) => format!("\n// The hosts keep the labels the overrides match; every label of every host is in\n// {}.\n", comment_text(path)),
                None => "\n// The hosts keep the labels the overrides match; their other labels are left out.\n".to_string(),
            });
        } else {
            out.push('\n');
        }
        for host in options.hosts {
            out.push_str(&format!("host {}", string(&host.name)));
            if let Some(address) = &host.address {
                out.push_str(&format!(" address={}", string(address)));
            }
            if let Some(identity) = &host.identity {
                out.push_str(&format!(" identity={}", string(identity)));
            }
            for (key, value) in host
                .labels
                .iter()
                .filter(|(k, _)| used.contains(k.as_str()))
            {
                out.push_str(&format!(" {}={}", ident(key), string(value)));
            }
            out.push('\n');
        }
    }

    let mut names = BTreeSet::new();
    for (module, conf) in &values.base {
        let mapped = values.declarations(*module, conf, &format!("conf.{}", module.key()));
        out.push_str(&format!(
            "\n// ---- {} (conf.{}) ----\n",
            module.key(),
            module.key()
        ));
        comment_notes(&mut out, "", &mapped.notes, line_of);
        notes.extend(mapped.notes);
        first_secret = first_secret.or(mapped.decls.iter().find(|d| d.secret).map(|d| d.span));
        match values.selectors.get(module) {
            None => write_decls(&mut out, "", &mapped.decls, &[], &mut places),
            // The daemonset runs on the selected nodes only: so do its values.
            Some(selector) if !mapped.decls.is_empty() => {
                out.push_str(&format!(
                    "// labels.{} ({}): the daemonset runs only on nodes with {}={}\n",
                    module.key(),
                    line_of(selector.span),
                    comment_text(&selector.key),
                    comment_text(&selector.value)
                ));
                let name = unique_name(
                    &mut names,
                    &format!("{}-{}-{}", module.key(), selector.key, selector.value),
                );
                let start = out.len();
                out.push_str(&format!(
                    "override {} {{\n    match {}={}\n",
                    string(&name),
                    ident(&selector.key),
                    string(&selector.value)
                ));
                places.push((start..out.len(), selector.span));
                write_decls(&mut out, "    ", &mapped.decls, &[], &mut places);
                out.push_str("}\n");
            }
            Some(_) => {}
        }
    }

    if values
        .overrides
        .values()
        .any(|o| !o.labels.is_empty() || !o.hosts.is_empty())
    {
        out.push_str("\n// ---- overrides (conf.overrides) ----\n");
    }
    for (module, overrides) in &values.overrides {
        let selector = values.selectors.get(module);
        let base = values
            .declarations(*module, &values.conf(*module, Choice::Base), "")
            .decls;
        let daemonset = format!("divingbell_{}", module.key());
        let labels: Vec<Vec<Decl>> = (0..overrides.labels.len())
            .map(|i| {
                values
                    .declarations(*module, &values.conf(*module, Choice::Label(i)), "")
                    .decls
            })
            .collect();
        let choices = (0..overrides.labels.len())
            .map(Choice::Label)
            .chain((0..overrides.hosts.len()).map(Choice::Host));
        for choice in choices {
            let (matches, what, span, own, path) = match choice {
                Choice::Label(i) => {
                    let l = &overrides.labels[i];
                    let matches: Vec<String> = l
                        .values
                        .iter()
                        .filter(|v| selector.is_none_or(|s| s.key != l.key || s.value == **v))
                        .map(|v| match selector.filter(|s| s.key != l.key) {
                            Some(s) => format!(
                                "match {}={} {}={}",
                                ident(&l.key),
                                string(v),
                                ident(&s.key),
                                string(&s.value)
                            ),
                            None => format!("match {}={}", ident(&l.key), string(v)),
                        })
                        .collect();
                    let what = format!("{}-{}", l.key, l.values.join("-"));
                    let path = format!(
                        "conf.overrides.{daemonset}.labels[{i}].conf.{}",
                        module.key()
                    );
                    (matches, what, l.span, &l.conf, path)
                }
                Choice::Host(i) => {
                    let h = &overrides.hosts[i];
                    let path = format!(
                        "conf.overrides.{daemonset}.hosts[{i}].conf.{}",
                        module.key()
                    );
                    let within = selector.map_or(String::new(), |s| {
                        format!(" {}={}", ident(&s.key), string(&s.value))
                    });
                    (
                        vec![format!("match host={}{within}", string(&h.name))],
                        format!("host-{}", h.name),
                        h.span,
                        &h.conf,
                        path,
                    )
                }
                Choice::Base => continue,
            };
            if matches.is_empty() {
                // Its label contradicts the daemonset's node selector: Divingbell's affinity and
                // selector together match no node.
                let note = Note {
                    span,
                    message: format!("`{path}` applies to no node: its label asks for a value of `{}` other than the daemonset's node selector", selector.map_or("", |s| s.key.as_str())),
                    help: "take the override out, or change the selector in `labels`".into(),
                    kind: NoteKind::Kept,
                };
                comment_notes(&mut out, "", std::slice::from_ref(&note), line_of);
                notes.push(note);
                continue;
            }
            // Notes of what the override itself writes; its merge with the module's values
            // is mapped only for the declarations.
            let own_notes = map(*module, own, &path, values.rules).notes;
            let merged = values
                .declarations(*module, &values.conf(*module, choice), "")
                .decls;
            first_secret = first_secret.or(merged.iter().find(|d| d.secret).map(|d| d.span));
            // In exclusive mode a host gets the base and this override only; layered, any
            // earlier label override of the daemonset may have applied before this one.
            let earlier = match (exclusive, choice) {
                (true, _) => 0,
                (false, Choice::Label(i)) => i,
                (false, _) => labels.len(),
            };
            let against: Vec<Vec<Decl>> = std::iter::once(base.clone())
                .chain(labels[..earlier].iter().cloned())
                .collect();
            let mut unexpressed = BTreeSet::new();
            let (layer, layer_map) = layer_text(&merged, &against, &mut unexpressed);
            let name = unique_name(
                &mut names,
                &if exclusive {
                    what
                } else {
                    format!("{}-{what}", module.key())
                },
            );
            out.push_str(&format!(
                "\n// {daemonset} {} ({})\n",
                match choice {
                    Choice::Label(i) => format!("labels[{i}]"),
                    Choice::Host(i) => format!("hosts[{i}]"),
                    Choice::Base => String::new(),
                },
                line_of(span)
            ));
            comment_notes(&mut out, "", &own_notes, line_of);
            notes.extend(own_notes);
            for what in &unexpressed {
                let note = Note {
                    span,
                    message: format!("this override cannot take back {what}, which an earlier layer sets; hosts it matches keep it"),
                    help: "bellc cannot unset a single property of a resource; check `bellc explain HOST` for these hosts".into(),
                    kind: NoteKind::Kept,
                };
                comment_notes(&mut out, "", std::slice::from_ref(&note), line_of);
                notes.push(note);
            }
            // What bellc says of the override itself (it matches no host) is said at the
            // Divingbell override it came from.
            let start = out.len();
            out.push_str(&format!("override {} {{\n", string(&name)));
            for m in &matches {
                out.push_str(&format!("    {m}\n"));
            }
            places.push((start..out.len(), span));
            let offset = out.len();
            places.extend(
                layer_map
                    .into_iter()
                    .map(|(range, span)| (range.start + offset..range.end + offset, span)),
            );
            out.push_str(&layer);
            out.push_str("}\n");
        }
    }
    if let Some(secret) = first_secret {
        // Divingbell's hosts have no identities to seal their secrets to: they ship in the
        // clear, as the chart shipped them, until the spec gives each host one.
        let property = " secrets=\"plaintext\"";
        let comment = "// The values hold password hashes, which Divingbell shipped in the clear; so do these\n\
                       // hosts, which have no identities yet (a warning on every build). Give each host an\n\
                       // `identity=` (`bellc import known-hosts` reads them) and drop secrets=\"plaintext\":\n\
                       // each host's secrets are then sealed to it.\n";
        out.insert_str(fleet_end, property);
        out.insert_str(fleet_at, comment);
        for (range, _) in &mut places {
            let shift = |at: usize| {
                at + if at >= fleet_end {
                    comment.len() + property.len()
                } else if at >= fleet_at {
                    comment.len()
                } else {
                    0
                }
            };
            *range = shift(range.start)..shift(range.end);
        }
        let at = fleet_end + comment.len();
        places.push((at..at + property.len(), secret));
    }
    Written {
        text: out,
        map: places,
        secret: first_secret.is_some(),
        verified: None,
        labels_left_out,
    }
}

/// The declarations of one override: what differs from any state `against` may have left,
/// and what takes away what those states hold and this one does not.
fn layer_text(
    merged: &[Decl],
    against: &[Vec<Decl>],
    unexpressed: &mut BTreeSet<String>,
) -> (String, SourceMap) {
    let mut emit = Vec::new();
    for decl in merged {
        // Restated when any earlier state lacks it or holds it otherwise.
        let differs = against
            .iter()
            .any(|state| !state.iter().any(|d| d.id == decl.id && d.text == decl.text));
        if !differs {
            continue;
        }
        // A property an earlier state sets and this one leaves out: its default written out,
        // or a note when bellc has no way to say "unset".
        let mut decl = decl.clone();
        let mut restated = BTreeSet::new();
        for state in against {
            if let Some(before) = state.iter().find(|d| d.id == decl.id) {
                for field in before.fields.keys() {
                    if decl.fields.contains_key(field) || restated.contains(field) {
                        continue;
                    }
                    match decl.defaults.get(field) {
                        Some(default) => {
                            decl.text
                                .insert_str(decl.head_len, &format!(" {field}={default}"));
                            restated.insert(field.clone());
                        }
                        None => {
                            unexpressed.insert(format!("`{field}` of `{}`", decl.id));
                        }
                    }
                }
            }
        }
        emit.push(decl);
    }
    let mut gone: Vec<&Decl> = Vec::new();
    for state in against {
        for before in state {
            let kept = merged.iter().any(|d| d.id == before.id);
            if !kept && !gone.iter().any(|g| g.id == before.id) {
                gone.push(before);
            }
        }
    }
    let mut out = String::new();
    let mut removes = Vec::new();
    for before in &gone {
        match before.place {
            Place::Sysctl => {
                // The key as the values wrote it.
                let key = match before.fields.get("key") {
                    Some(key) => key.clone(),
                    None => ident(before.id.strip_prefix("sysctl:").unwrap_or(&before.id)),
                };
                emit.push(Decl {
                    text: format!("{key} #null"),
                    ..(*before).clone()
                });
            }
            Place::Node if before.removable => removes.push(string(&before.id)),
            // A setting of which a host has one: every property back to its default.
            Place::Node => {
                let mut text = before.id.clone();
                for field in before.fields.keys() {
                    match before.defaults.get(field) {
                        Some(default) => text.push_str(&format!(" {field}={default}")),
                        None => {
                            unexpressed.insert(format!("`{field}` of `{}`", before.id));
                        }
                    }
                }
                emit.push(Decl {
                    text,
                    ..(*before).clone()
                });
            }
        }
    }
    let mut map = SourceMap::new();
    write_decls(&mut out, "    ", &emit, &removes, &mut map);
    (out, map)
}

/// Where each declaration's text is in the spec, and the values it came from; a property or
/// child line also on its own, within its declaration's range.
pub type SourceMap = Vec<(std::ops::Range<usize>, Span)>;

/// The values that the spec text at `offset` came from: the narrowest range that holds it.
pub fn source_at(map: &SourceMap, offset: usize) -> Option<Span> {
    map.iter()
        .filter(|(range, _)| range.contains(&offset))
        .min_by_key(|(range, _)| range.len())
        .map(|(_, span)| *span)
}

pub(super) fn write_decls(
    out: &mut String,
    indent: &str,
    decls: &[Decl],
    removes: &[String],
    map: &mut SourceMap,
) {
    let sysctl: Vec<&Decl> = decls.iter().filter(|d| d.place == Place::Sysctl).collect();
    if !sysctl.is_empty() {
        out.push_str(&format!("{indent}sysctl {{\n"));
        for d in sysctl {
            let start = out.len();
            out.push_str(&format!("{indent}    {}\n", d.text));
            map.push((start..out.len(), d.span));
        }
        out.push_str(&format!("{indent}}}\n"));
    }
    for d in decls.iter().filter(|d| d.place == Place::Node) {
        let start = out.len();
        write_node(out, indent, d);
        map.push((start..out.len(), d.span));
        // Written after the whole: what points into a part finds the part first (`at`).
        let mut from = start;
        for (part, span) in &d.parts {
            if let Some(at) = out[from..].find(part.as_str()) {
                map.push((from + at..from + at + part.len(), *span));
                from += at;
            }
        }
    }
    if !removes.is_empty() {
        out.push_str(&format!("{indent}remove {}\n", removes.join(" ")));
    }
}

fn write_node(out: &mut String, indent: &str, d: &Decl) {
    {
        for line in d.text.split('\n') {
            if line.is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("{indent}{line}\n"));
            }
        }
    }
}

fn comment_notes(out: &mut String, indent: &str, notes: &[Note], line_of: &dyn Fn(Span) -> String) {
    for note in notes {
        out.push_str(&format!(
            "{indent}// divingbell (values {}): {}\n",
            line_of(note.span),
            comment_text(&note.message)
        ));
    }
}

/// Text for a `//` comment: one line, whatever it holds.
fn comment_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() || (c.is_whitespace() && c != ' ') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// An override name of letters, digits and `.-_`, not used before.
fn unique_name(names: &mut BTreeSet<String>, wanted: &str) -> String {
    let clean: String = wanted
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut name = clean.clone();
    let mut n = 2;
    while !names.insert(name.clone()) {
        name = format!("{clean}-{n}");
        n += 1;
    }
    name
}

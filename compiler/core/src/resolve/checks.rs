//! The checks that need the whole spec at once rather than one host: identities, overrides
//! that match nothing or only misspelt labels, and the did-you-mean they suggest.

use super::*;

/// Each host's identity is its own: one key named for two hosts would let either speak for
/// the other. With `identities="required"`, every host has one.
pub(super) fn identity_checks(spec: &Spec, diags: &mut Diagnostics) {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for host in &spec.hosts {
        match &host.identity {
            Some(identity) => {
                if let Some(first) = seen.get(identity.as_str()) {
                    diags.push(ResolveError::SharedIdentity {
                        host: host.name.clone(),
                        first: first.to_string(),
                        span: host.span.source_span(),
                        help: "each host has its own key; an image cloned with its SSH host key \
                               gives every copy the same one: make new host keys on first boot \
                               (`ssh-keygen -A` after removing /etc/ssh/ssh_host_*)"
                            .to_string(),
                        file: host.span.file,
                    });
                } else {
                    seen.insert(identity, &host.name);
                }
            }
            None if spec.fleet.identities_required.is_some()
                && !spec.rejected_identities.contains(&host.name) =>
            {
                diags.push(ResolveError::NoIdentity {
                    host: host.name.clone(),
                    span: host.span.source_span(),
                    file: host.span.file,
                });
            }
            None => {}
        }
    }
}

/// Checks that need the whole spec but no host's configuration.
pub(super) fn static_checks(spec: &Spec, diags: &mut Diagnostics) {
    check_removals(spec, diags);
    check_selectors(spec, diags);
    check_host_label_values(spec, diags);
}

/// Every `remove` names something a layer declares.
fn check_removals(spec: &Spec, diags: &mut Diagnostics) {
    let all_layers = std::iter::once(&spec.base).chain(spec.overrides.iter().map(|o| &o.layer));
    // What is declared is gathered only for removals to be checked against: ten thousand host
    // overrides declare a resource or two each.
    if all_layers.clone().all(|layer| layer.removes.is_empty()) {
        return;
    }
    let mut declared: BTreeSet<(RefKind, String)> = BTreeSet::new();
    for layer in all_layers.clone() {
        for s in &layer.sysctl {
            declared.insert((RefKind::Sysctl, validate::sysctl_path(&s.key)));
        }
        for r in &layer.resources {
            declared.insert((RefKind::Resource(r.kind), r.name.clone()));
        }
    }
    // A removal of a resource whose declaration was wrong is not a second mistake; the name
    // still counts for the did-you-mean of another removal.
    declared.extend(
        spec.rejected
            .iter()
            .map(|(kind, name)| (RefKind::Resource(*kind), name.clone())),
    );
    for layer in all_layers {
        for removal in &layer.removes {
            let name = match removal.kind {
                RefKind::Sysctl => validate::sysctl_path(&removal.name),
                RefKind::Resource(_) => removal.name.clone(),
            };
            if declared.contains(&(removal.kind, name)) {
                continue;
            }
            let same_kind: Vec<String> = declared
                .iter()
                .filter(|(k, _)| *k == removal.kind)
                .map(|(_, n)| n.clone())
                .collect();
            let help =
                match validate::did_you_mean(&removal.name, same_kind.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean `{}:{s}`?", removal.kind.keyword()),
                    None if same_kind.is_empty() => {
                        format!("no layer declares any `{}`", removal.kind.keyword())
                    }
                    None => format!(
                        "declared `{}` resources: {}",
                        removal.kind.keyword(),
                        same_kind.join(", ")
                    ),
                };
            diags.push(ResolveError::UnknownRemoval {
                reference: format!("{}:{}", removal.kind.keyword(), removal.name),
                span: removal.span.source_span(),
                help,
                file: removal.span.file,
            });
        }
    }
}

/// Every `match` selector names a label, a value or a host the inventory has.
fn check_selectors(spec: &Spec, diags: &mut Diagnostics) {
    // Labels every host carries, for `match` checks: each set of labels once (hosts with equal
    // labels share one map), where a million hosts' every label was a BTree insert.
    let mut labels: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut label_sets: foldhash::HashSet<*const BTreeMap<String, String>> = Default::default();
    for host in &spec.hosts {
        if label_sets.insert(std::sync::Arc::as_ptr(&host.labels)) {
            for (k, v) in host.labels.iter() {
                labels.entry(k).or_default().insert(v);
            }
        }
    }
    if spec.hosts.is_empty() {
        return;
    }
    // Host names, when a selector names a host; in order only for a did-you-mean.
    let by_host = spec
        .overrides
        .iter()
        .flat_map(|ov| &ov.matches)
        .flat_map(|m| &m.conditions)
        .any(|c| c.label == "host");
    let names: foldhash::HashSet<&str> = match by_host {
        true => spec.hosts.iter().map(|h| h.name.as_str()).collect(),
        false => Default::default(),
    };
    let sorted_names = std::cell::OnceCell::new();
    let sorted_names = || {
        sorted_names.get_or_init(|| {
            let mut all: Vec<&str> = names.iter().copied().collect();
            all.sort_unstable();
            all
        })
    };
    for ov in &spec.overrides {
        for m in &ov.matches {
            for c in &m.conditions {
                let unknown = |label: String, help: String| ResolveError::UnknownLabel {
                    label,
                    span: c.span.source_span(),
                    help,
                    file: c.span.file,
                };
                // One typo from what the inventory has is an error: the override's values
                // would silently miss every host they were written for. A selector that is
                // only renumbered (`rack="r02"`, `host="web-4"`) may be for hosts still to come.
                let misspelt =
                    |selector: String, suggestion: String| ResolveError::MisspeltSelector {
                        help: format!(
                            "did you mean `{suggestion}`? A selector that matches no host leaves \
                             this override's values off every host"
                        ),
                        selector,
                        suggestion,
                        span: c.span.source_span(),
                        file: c.span.file,
                    };
                if c.label == "host" {
                    if !names.contains(c.value.as_str()) {
                        diags.push(match typo_of(&c.value, sorted_names().iter().copied()) {
                            Some(s) => {
                                misspelt(format!("host={}", c.value), format!("host=\"{s}\""))
                            }
                            None => unknown(
                                format!("host={}", c.value),
                                "no host of the inventory has this name".into(),
                            ),
                        });
                    }
                    continue;
                }
                match labels.get(c.label.as_str()) {
                    None => {
                        diags.push(match typo_of(&c.label, labels.keys().copied()) {
                            Some(s) => misspelt(
                                format!("{}={}", c.label, c.value),
                                format!("{s}=\"{}\"", c.value),
                            ),
                            None => unknown(
                                c.label.clone(),
                                if labels.is_empty() {
                                    "no host in the inventory has a label: give hosts labels, \
                                     or match on `host=\"NAME\"`"
                                        .to_string()
                                } else {
                                    format!(
                                        "labels in the inventory: {}",
                                        labels.keys().copied().collect::<Vec<_>>().join(", ")
                                    )
                                },
                            ),
                        });
                    }
                    Some(values) if !values.contains(c.value.as_str()) => {
                        diags.push(match typo_of(&c.value, values.iter().copied()) {
                            Some(s) => misspelt(
                                format!("{}={}", c.label, c.value),
                                format!("{}=\"{s}\"", c.label),
                            ),
                            None => unknown(
                                format!("{}={}", c.label, c.value),
                                format!(
                                    "values of `{}`: {}",
                                    c.label,
                                    values.iter().copied().collect::<Vec<_>>().join(", ")
                                ),
                            ),
                        });
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// The other way round from [`check_selectors`]: a host whose label value no selector matches,
/// but which is one typo from a value a selector does match (`role="dbb"` where an override
/// matches `role="db"`), gets none of that override's values, and nothing said so. A warning,
/// once per label value (with how many hosts carry it), at the first such host: the value may be
/// meant, for hosts no override is for yet. Only renumbered values (`r02` beside `r01`) are not
/// typos.
fn check_host_label_values(spec: &Spec, diags: &mut Diagnostics) {
    // label → value → the first override whose selector matches it.
    let mut selected: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for ov in &spec.overrides {
        for c in ov.matches.iter().flat_map(|m| &m.conditions) {
            if c.label != "host" {
                selected
                    .entry(c.label.as_str())
                    .or_default()
                    .entry(c.value.as_str())
                    .or_insert(ov.name.as_str());
            }
        }
    }
    if selected.is_empty() {
        return;
    }
    // (label, value) → (the first host, how many hosts), for each value one typo from a
    // selected one; each label set once (hosts with equal labels share one map).
    let mut found: BTreeMap<(&str, &str), (&Host, usize, &str)> = BTreeMap::new();
    let mut verdicts: foldhash::HashMap<(&str, &str), Option<&str>> = Default::default();
    for host in &spec.hosts {
        for (label, value) in host.labels.iter() {
            let Some(values) = selected.get(label.as_str()) else {
                continue;
            };
            if values.contains_key(value.as_str()) {
                continue;
            }
            let near = *verdicts
                .entry((label.as_str(), value.as_str()))
                .or_insert_with(|| typo_of(value, values.keys().copied()));
            if let Some(near) = near {
                found
                    .entry((label.as_str(), value.as_str()))
                    .or_insert((host, 0, near))
                    .1 += 1;
            }
        }
    }
    for ((label, value), (host, count, near)) in found {
        let others = match count {
            1 => String::new(),
            n => format!(" (and {} more host(s) with it)", n - 1),
        };
        diags.push(ResolveError::LabelValueTypo {
            host: host.name.clone(),
            label: format!("{label}=\"{value}\""),
            near: format!("{label}=\"{near}\""),
            others,
            span: host.span.source_span(),
            help: format!(
                "did you mean `{label}=\"{near}\"`? As written, this host gets none of override \
                 `{}`'s values",
                selected[label][near]
            ),
            file: host.span.file,
        });
    }
}

/// The name among `known` that `word` is a typo of: one `did_you_mean` finds, unless the two
/// differ only in their digits (`web-4` beside `web-3` is another host, not a typo).
pub(super) fn typo_of<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let letters = |s: &str| {
        s.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    validate::did_you_mean(word, known).filter(|s| letters(s) != letters(word))
}

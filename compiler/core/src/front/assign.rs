//! `assign`: labels the build gives hosts, once every host is known. A counted one gives its
//! label to the first N hosts that match, as Enjoliver's scheduler gives the control plane to
//! the first N machines discovered, and is an error when fewer match (a cluster that needs
//! three control hosts is not built with two); one without a count gives its label to every
//! host that matches and has no value for it yet ("every other host is a node").
//!
//! The order is what keeps roles where they are: hosts written in the spec first, in the order
//! written, then hosts accepted into an inventory (`bellc hosts accept`), in the order
//! accepted. A host accepted later comes after every host before it, so accepting one never
//! takes a role from a host that has it.

use crate::diagnostic::Diagnostics;
use crate::source::{FileId, Span};
use crate::spec::{Assign, Host, Spec};
use bell_bundle::Labels;
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeMap, HashMap};
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum AssignError {
    #[error("`assign {label}=\"{value}\" count={count}` needs {count} hosts{which}; {found} {verb}: {missing} missing")]
    #[diagnostic(code(bell::assign::too_few))]
    TooFew {
        label: String,
        value: String,
        count: u32,
        which: String,
        found: usize,
        verb: &'static str,
        missing: usize,
        #[label("{missing} more needed")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{held} hosts carry `{label}=\"{value}\"` already, more than `count={count}`")]
    #[diagnostic(code(bell::assign::too_many))]
    TooMany {
        label: String,
        value: String,
        count: u32,
        held: usize,
        #[label("gives it to {count}")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl AssignError {
    fn file_id(&self) -> Option<FileId> {
        match self {
            AssignError::TooFew { file, .. } | AssignError::TooMany { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(AssignError);

/// Gives every host the labels the spec's `assign` nodes give it, records on each `assign`
/// (with a count) the hosts it chose and on each host the `assign`s that labelled it.
pub fn assign(spec: &mut Spec, diags: &mut Diagnostics) {
    if spec.assigns.is_empty() {
        return;
    }
    // Spec hosts (never accepted) first, in the order written; then the order of acceptance.
    let mut order: Vec<usize> = (0..spec.hosts.len()).collect();
    order.sort_by_key(|&i| spec.hosts[i].accepted.unwrap_or(0));
    let mut given: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(); spec.hosts.len()];
    let has = |host: &Host, given: &BTreeMap<String, String>, label: &str| {
        host.labels.contains_key(label) || given.contains_key(label)
    };
    let counted = (0..spec.assigns.len()).filter(|&a| spec.assigns[a].count.is_some());
    let rest = (0..spec.assigns.len()).filter(|&a| spec.assigns[a].count.is_none());
    for a in counted.chain(rest).collect::<Vec<_>>() {
        let rule = &spec.assigns[a];
        let holds = |host: &Host, given: &BTreeMap<String, String>| {
            if rule.matches.is_empty() {
                true
            } else if given.is_empty() {
                rule.matches
                    .iter()
                    .any(|m| m.holds(&host.name, &host.labels))
            } else {
                let mut labels = BTreeMap::clone(&host.labels);
                labels.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
                rule.matches.iter().any(|m| m.holds(&host.name, &labels))
            }
        };
        let mut chosen = Vec::new();
        match rule.count {
            Some(count) => {
                let held = spec
                    .hosts
                    .iter()
                    .filter(|h| h.labels.get(&rule.label) == Some(&rule.value))
                    .count();
                if held > count as usize {
                    diags.push(too_many(rule, count, held));
                    continue;
                }
                let need = count as usize - held;
                for &i in &order {
                    if chosen.len() == need {
                        break;
                    }
                    if !has(&spec.hosts[i], &given[i], &rule.label)
                        && holds(&spec.hosts[i], &given[i])
                    {
                        chosen.push(i);
                    }
                }
                // Those found keep the label all the same: one error, not one more for each
                // override that matches the label.
                if chosen.len() < need {
                    diags.push(too_few(rule, count, held + chosen.len()));
                }
            }
            None => {
                for &i in &order {
                    if !has(&spec.hosts[i], &given[i], &rule.label)
                        && holds(&spec.hosts[i], &given[i])
                    {
                        chosen.push(i);
                    }
                }
            }
        }
        let (label, value, counted) = (rule.label.clone(), rule.value.clone(), rule.count);
        for &i in &chosen {
            given[i].insert(label.clone(), value.clone());
            spec.hosts[i].assigned.push(a);
        }
        if counted.is_some() {
            spec.assigns[a].hosts = chosen.iter().map(|&i| spec.hosts[i].name.clone()).collect();
        }
    }
    // Hosts with equal labels before keep sharing one map after.
    type Given = BTreeMap<String, String>;
    let mut shared: HashMap<(*const Given, Given), Labels> = HashMap::new();
    for (host, given) in spec.hosts.iter_mut().zip(given) {
        if given.is_empty() {
            continue;
        }
        let key = (Labels::as_ptr(&host.labels), given);
        let labels = shared.entry(key).or_insert_with_key(|(_, given)| {
            let mut labels = BTreeMap::clone(&host.labels);
            labels.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
            Labels::new(labels)
        });
        host.labels = Labels::clone(labels);
    }
}

fn which(rule: &Assign) -> String {
    if rule.matches.is_empty() {
        return String::new();
    }
    let matches: Vec<String> = rule
        .matches
        .iter()
        .map(|m| {
            m.conditions
                .iter()
                .map(|c| format!("{}=\"{}\"", c.label, c.value))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    format!(" matching {}", matches.join(" or "))
}

fn at(span: Span) -> (SourceSpan, FileId) {
    (span.source_span(), span.file)
}

fn too_few(rule: &Assign, count: u32, found: usize) -> AssignError {
    let (span, file) = at(rule.span);
    AssignError::TooFew {
        label: rule.label.clone(),
        value: rule.value.clone(),
        count,
        which: which(rule),
        found,
        verb: if found == 1 { "does" } else { "do" },
        missing: count as usize - found,
        span,
        help: "accept more hosts that match (`bellc hosts pending`, `bellc hosts accept`), \
               or lower the count; hosts that have another value for the label already are \
               not taken"
            .into(),
        file,
    }
}

fn too_many(rule: &Assign, count: u32, held: usize) -> AssignError {
    let (span, file) = at(rule.span);
    AssignError::TooMany {
        label: rule.label.clone(),
        value: rule.value.clone(),
        count,
        held,
        span,
        help: "remove the label from the hosts that should not carry it, or raise the count".into(),
        file,
    }
}

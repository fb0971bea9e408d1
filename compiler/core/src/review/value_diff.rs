//! `bellc diff OLD NEW --values` (and `build --diff OLD --values`): what a release changes,
//! value by value. For each value that changed, old → new and the hosts it changes on (hosts
//! that share the change are one entry however many bundles they are on), and, when the new
//! spec is at hand, the layer and `file:line` that set the new value. The review a person
//! wants before the file-level diff: "`sysctl:vm.swappiness` 1 → 5 on db-1 db-2 db-3
//! (override db, bell.kdl:53)".
//!
//! Both sides are read through [`Side`]: each bundle's values are what the build kept in
//! `OUT/values/<id>.json` (a sealed secret as `"<secret KEYED-DIGEST>"`, so a changed secret is
//! a changed value, named by the build's seal key; one in the clear as `"<secret>"`, shown in
//! the file-level diff only, as "secret content changed").

use super::diff::Side;
use super::query::names;
use crate::front::validate::sysctl_path;
use crate::render::values::{self, BundleValues};
use crate::resolve::{Model, Resolution, ResolvedHost};
use crate::source::Sources;
use crate::spec::Spec;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The version of the JSON `bellc diff --values --json` prints.
pub const VALUE_DIFF_FORMAT: u32 = 1;

/// The key of a host's target among its values: a change of target is a change of value too.
const TARGET: &str = "target";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueDiff {
    pub format: u32,
    pub fleet: String,
    pub old_version: String,
    pub new_version: String,
    /// Every value that changed on some host, by key.
    pub changes: Vec<ValueChange>,
    /// Hosts whose bundle changed although none of their values did (a template of bellc's
    /// own, or a secret): the file-level diff says what.
    pub bundle_only: Vec<String>,
    /// Hosts only in the new release (every value of theirs is new: `bellc explain`).
    pub hosts_added: Vec<String>,
    /// Hosts only in the old release.
    pub hosts_removed: Vec<String>,
    /// Hosts on the same bundle in both.
    pub hosts_unchanged: usize,
}

/// One value's change and the hosts it changes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueChange {
    /// `sysctl:vm.swappiness`, `user:ops.shell`, `apt.allow-downgrade`, `target`.
    pub key: String,
    /// `None`: the hosts did not have it (a resource or key added).
    pub old: Option<String>,
    /// `None`: the hosts no longer have it.
    pub new: Option<String>,
    pub hosts: Vec<String>,
    /// With the new spec at hand: where the new value was set, hosts grouped by place.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_at: Vec<SetAt>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetAt {
    /// `base` or the override's name.
    pub layer: String,
    /// `file:line` in the new spec.
    pub at: String,
    pub hosts: Vec<String>,
}

impl ValueDiff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
            && self.bundle_only.is_empty()
            && self.hosts_added.is_empty()
            && self.hosts_removed.is_empty()
    }

    /// How many hosts some value changes on.
    pub fn changed_hosts(&self) -> usize {
        let mut hosts: Vec<&str> = self
            .changes
            .iter()
            .flat_map(|c| c.hosts.iter().map(String::as_str))
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        hosts.len()
    }
}

/// Where each host's values were set in a spec: what `explain` says, looked up per key and
/// kept per distinct model (hosts of one model share every origin).
pub struct Locator<'a> {
    spec: &'a Spec,
    sources: &'a Sources,
    hosts: HashMap<&'a str, &'a ResolvedHost>,
    /// By (model, key): the place, or `None` where the spec gives the model another value.
    found: HashMap<(crate::resolve::ModelId, String), Option<(String, String)>>,
}

impl<'a> Locator<'a> {
    pub fn new(spec: &'a Spec, resolution: &'a Resolution, sources: &'a Sources) -> Locator<'a> {
        Locator {
            spec,
            sources,
            hosts: resolution
                .hosts
                .iter()
                .map(|h| (h.name.as_str(), h))
                .collect(),
            found: HashMap::new(),
        }
    }

    /// The layer and `file:line` that give `host` the value `value` for `key`; `None` when the
    /// spec does not have the host, or gives it another value (it is not the spec NEW was
    /// built from).
    fn locate(&mut self, host: &str, key: &str, value: &str) -> Option<(String, String)> {
        let resolved = *self.hosts.get(host)?;
        let model = &resolved.model;
        let id = (resolved.model_id, key.to_string());
        if let Some(found) = self.found.get(&id) {
            return found.clone();
        }
        let found = self.find(model, key, value);
        self.found.insert(id, found.clone());
        found
    }

    fn find(&self, model: &Model, key: &str, value: &str) -> Option<(String, String)> {
        // What the model gives `key` (`None`: a resource's own key, whose value is its fields)
        // and where.
        let (given, origin) = if let Some(name) = key.strip_prefix("sysctl:") {
            let s = model.sysctl.get(&sysctl_path(name))?;
            (Some(values::sysctl_value(&s.value)), &s.origin)
        } else if let Some((head, field)) = values::split_key(key) {
            let r = model
                .resources
                .iter()
                .find(|r| values::is_resource(r, head))?;
            let (v, origin) = r.fields.get(field)?;
            (Some(values::field_text(r, field, v)), origin)
        } else {
            let r = model
                .resources
                .iter()
                .find(|r| values::is_resource(r, key))?;
            let declared = r.fields.is_empty().then(|| "(declared)".to_string());
            (declared, &r.origin)
        };
        // A sealed secret is named by a keyed digest the spec alone cannot give (nor need: the
        // review reads it without keys); where it was set is where the spec says `<secret>`.
        let sealed = |given: &str| given.contains(values::SECRET) && value.contains("<secret ");
        if given.is_some_and(|given| values::kept(given.clone()) != value && !sealed(&given)) {
            return None;
        }
        Some((
            origin.layer_name(self.spec).to_string(),
            self.sources.file_line(origin.span),
        ))
    }
}

/// Compares two releases value by value; `locator` (the new spec) says where new values were
/// set.
pub fn diff(
    old: &dyn Side,
    new: &dyn Side,
    mut locator: Option<Locator>,
) -> Result<ValueDiff, String> {
    let (or, nr) = (old.release(), new.release());
    let mut groups: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    let mut hosts_added = Vec::new();
    let mut hosts_unchanged = 0;
    for (host, entry) in &nr.hosts {
        match or.hosts.get(host) {
            None => hosts_added.push(host.clone()),
            Some(before) if before.bundle == entry.bundle => hosts_unchanged += 1,
            Some(before) => groups
                .entry((before.bundle.as_str(), entry.bundle.as_str()))
                .or_default()
                .push(host),
        }
    }
    let hosts_removed = or
        .hosts
        .keys()
        .filter(|h| !nr.hosts.contains_key(*h))
        .cloned()
        .collect();
    // A bundle is read once, however many changes name it, and bundles are read in parallel:
    // a fleet whose hosts each have a bundle of their own reads one file per host and side.
    let old_values = read_values(old, groups.keys().map(|(a, _)| *a).collect())?;
    let new_values = read_values(new, groups.keys().map(|(_, b)| *b).collect())?;
    let mut changed: BTreeMap<(String, Option<String>, Option<String>), Vec<String>> =
        BTreeMap::new();
    let mut bundle_only = Vec::new();
    for ((old_id, new_id), hosts) in groups {
        let (a, b) = (&old_values[old_id], &new_values[new_id]);
        let changes = compare(a, b);
        if changes.is_empty() {
            bundle_only.extend(hosts.iter().map(|h| h.to_string()));
        }
        for change in changes {
            changed
                .entry(change)
                .or_default()
                .extend(hosts.iter().map(|h| h.to_string()));
        }
    }
    bundle_only.sort();
    let changes = changed
        .into_iter()
        .map(|((key, old, new), mut hosts)| {
            hosts.sort();
            let set_at = match (&mut locator, &new) {
                (Some(locator), Some(value)) => set_at(locator, &key, value, &hosts),
                _ => Vec::new(),
            };
            ValueChange {
                key,
                old,
                new,
                hosts,
                set_at,
            }
        })
        .collect();
    Ok(ValueDiff {
        format: VALUE_DIFF_FORMAT,
        fleet: nr.fleet.clone(),
        old_version: or.version.clone(),
        new_version: nr.version.clone(),
        changes,
        bundle_only,
        hosts_added,
        hosts_removed,
        hosts_unchanged,
    })
}

type Change = (String, Option<String>, Option<String>);

/// The values of bundles `ids` of `side`, read in parallel.
fn read_values<'i>(
    side: &dyn Side,
    ids: BTreeSet<&'i str>,
) -> Result<HashMap<&'i str, BundleValues>, String> {
    ids.into_par_iter()
        .map(|id| side.values(id).map(|v| (id, v)))
        .collect()
}

/// The values that differ between two bundles' configurations, the target among them. A
/// resource one side lacks altogether is one change (`+ limit:nproc  domain="*" … value=4096`),
/// not one per field.
fn compare(a: &BundleValues, b: &BundleValues) -> Vec<Change> {
    let mut changes = Vec::new();
    if a.target != b.target {
        changes.push((
            TARGET.to_string(),
            Some(a.target.clone()),
            Some(b.target.clone()),
        ));
    }
    let heads = |v: &BundleValues| -> HashSet<String> {
        v.values
            .keys()
            .filter_map(|k| values::split_key(k).map(|(head, _)| head.to_string()))
            .collect()
    };
    let (heads_a, heads_b) = (heads(a), heads(b));
    // Resources only one side has, with their fields as one line.
    let mut whole: BTreeMap<(String, bool), Vec<String>> = BTreeMap::new();
    for (key, old) in &a.values {
        match b.values.get(key) {
            Some(new) if new == old => {}
            None => match values::split_key(key) {
                Some((head, field)) if !heads_b.contains(head) => whole
                    .entry((head.to_string(), false))
                    .or_default()
                    .push(format!("{field}={old}")),
                _ => changes.push((key.clone(), Some(old.clone()), None)),
            },
            new => changes.push((key.clone(), Some(old.clone()), new.cloned())),
        }
    }
    for (key, new) in &b.values {
        if a.values.contains_key(key) {
            continue;
        }
        match values::split_key(key) {
            Some((head, field)) if !heads_a.contains(head) => whole
                .entry((head.to_string(), true))
                .or_default()
                .push(format!("{field}={new}")),
            _ => changes.push((key.clone(), None, Some(new.clone()))),
        }
    }
    for ((head, added), fields) in whole {
        let line = fields.join(" ");
        changes.push(match added {
            true => (head, None, Some(line)),
            false => (head, Some(line), None),
        });
    }
    changes
}

/// The hosts of one change grouped by where the new spec sets the value; hosts it does not
/// locate (not in that spec, or given another value there) are left out.
fn set_at(locator: &mut Locator, key: &str, value: &str, hosts: &[String]) -> Vec<SetAt> {
    let mut places: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for host in hosts {
        if let Some(place) = locator.locate(host, key, value) {
            places.entry(place).or_default().push(host.clone());
        }
    }
    let mut set_at: Vec<SetAt> = places
        .into_iter()
        .map(|((layer, at), hosts)| SetAt { layer, at, hosts })
        .collect();
    // The place most hosts got it from first.
    set_at.sort_by_key(|place| std::cmp::Reverse(place.hosts.len()));
    set_at
}

/// The diff as text: a summary line, then each change with its hosts and where it was set.
pub fn to_text(d: &ValueDiff) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let short = |v: &str| bell_bundle::short_id(v).to_string();
    let _ = writeln!(
        out,
        "release {} → {}: {} value change(s) on {} host(s), {} host(s) added, {} removed, {} unchanged",
        short(&d.old_version),
        short(&d.new_version),
        d.changes.len(),
        d.changed_hosts(),
        d.hosts_added.len(),
        d.hosts_removed.len(),
        d.hosts_unchanged
    );
    let absent = "(none)";
    for c in &d.changes {
        let (symbol, what) = match (&c.old, &c.new) {
            (None, Some(new)) => ('+', new.clone()),
            (Some(old), None) => ('-', format!("{old} (removed)")),
            (Some(old), Some(new)) => ('~', format!("{old} → {new}")),
            (None, None) => ('~', absent.to_string()),
        };
        let _ = writeln!(out, "{symbol} {}  {what}", c.key);
        let _ = writeln!(out, "    on {}", names(&c.hosts));
        for place in &c.set_at {
            if place.hosts.len() == c.hosts.len() {
                let _ = writeln!(out, "    set by {}  {}", place.layer, place.at);
            } else {
                let _ = writeln!(
                    out,
                    "    set by {}  {}  on {}",
                    place.layer,
                    place.at,
                    names(&place.hosts)
                );
            }
        }
    }
    if !d.bundle_only.is_empty() {
        let _ = writeln!(
            out,
            "bundle changed, no value changed (see `bellc diff` without --values): {}",
            names(&d.bundle_only)
        );
    }
    if !d.hosts_added.is_empty() {
        let _ = writeln!(out, "hosts added: {}", names(&d.hosts_added));
    }
    if !d.hosts_removed.is_empty() {
        let _ = writeln!(out, "hosts removed: {}", names(&d.hosts_removed));
    }
    out
}

//! Rollout waves: which hosts may take a new bundle together.
//!
//! Hosts go in service layers (providers before their runtime consumers, see `services.rs`),
//! then one batch at a time (the value of the `rollout batch-by` label: one rack at a time), and
//! each batch is cut into waves of at most `max-unavailable` hosts. A percentage is taken of the
//! batch's size in the whole fleet (hosts that did not change still count, since they are the
//! ones left serving), rounded down, and is never less than one host.
//!
//! Without a `rollout` node the policy is `max-unavailable=1` with no batch label: one host at a
//! time, the safe choice for a fleet that never said how much it can lose at once.
//!
//! Planning sorts the hosts once and walks them once, so it stays fast on 100k hosts.

use crate::graph::services::ServiceLayers;
use crate::resolve::ResolvedHost;
use crate::spec::{MaxUnavailable, Rollout};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wave {
    /// The service layer of every host in the wave.
    pub layer: u32,
    /// The batch label's value shared by the wave's hosts (`None`: no batch label, or hosts
    /// without the label).
    pub batch: Option<String>,
    pub hosts: Vec<String>,
    /// Why the wave sits where it does, in words.
    pub why: String,
}

/// The rollout policy in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub batch_by: Option<String>,
    pub max_unavailable: MaxUnavailable,
}

impl Policy {
    pub fn from_spec(rollout: Option<&Rollout>) -> Policy {
        match rollout {
            Some(r) => Policy {
                batch_by: r.batch_by.clone(),
                max_unavailable: r.max_unavailable,
            },
            None => Policy {
                batch_by: None,
                max_unavailable: MaxUnavailable::Count(1),
            },
        }
    }

    /// The most hosts of a batch of `size` hosts that may be down at once.
    pub fn per_wave(&self, size: usize) -> usize {
        match self.max_unavailable {
            MaxUnavailable::Count(n) => (n as usize).max(1),
            MaxUnavailable::Percent(p) => (size.saturating_mul(p as usize) / 100).max(1),
        }
    }
}

/// Plans waves for the hosts `include` selects (all hosts for a fresh release, the changed ones
/// against an older release). `layers` is indexed like `hosts`.
pub fn plan(
    hosts: &[ResolvedHost],
    layers: &ServiceLayers,
    policy: &Policy,
    include: impl Fn(&ResolvedHost) -> bool,
) -> Vec<Wave> {
    let batch_of = |h: &ResolvedHost| -> Option<String> {
        policy
            .batch_by
            .as_ref()
            .and_then(|label| h.labels.get(label).cloned())
    };
    // Batch sizes over the whole fleet, for percentages.
    let mut batch_size: HashMap<Option<String>, usize> = HashMap::new();
    let mut batches = Vec::with_capacity(hosts.len());
    for h in hosts {
        let b = batch_of(h);
        *batch_size.entry(b.clone()).or_default() += 1;
        batches.push(b);
    }
    let layer = |i: usize| layers.host_layer.get(i).copied().unwrap_or(0);
    let mut selected: Vec<usize> = (0..hosts.len()).filter(|&i| include(&hosts[i])).collect();
    // Hosts without the batch label go after every labelled batch of their layer.
    selected.sort_by(|&a, &b| {
        (layer(a), batches[a].is_none(), &batches[a], &hosts[a].name).cmp(&(
            layer(b),
            batches[b].is_none(),
            &batches[b],
            &hosts[b].name,
        ))
    });

    let mut waves: Vec<Wave> = Vec::new();
    let mut reasons: Vec<BTreeSet<usize>> = Vec::new();
    let mut start = 0;
    while start < selected.len() {
        let first = selected[start];
        let group_end = selected[start..]
            .iter()
            .position(|&i| layer(i) != layer(first) || batches[i] != batches[first])
            .map_or(selected.len(), |p| start + p);
        let size = batch_size.get(&batches[first]).copied().unwrap_or(1);
        let per_wave = policy.per_wave(size);
        for chunk in selected[start..group_end].chunks(per_wave) {
            waves.push(Wave {
                layer: layer(first),
                batch: batches[first].clone(),
                hosts: chunk.iter().map(|&i| hosts[i].name.clone()).collect(),
                why: String::new(),
            });
            reasons.push(
                chunk
                    .iter()
                    .filter_map(|&i| layers.host_reason.get(i).copied())
                    .collect(),
            );
        }
        start = group_end;
    }
    for (wave, reasons) in waves.iter_mut().zip(reasons) {
        let mut why = format!("layer {}", wave.layer);
        let words: Vec<&str> = reasons
            .iter()
            .filter_map(|&r| layers.why.get(r).map(String::as_str))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !words.is_empty() {
            why.push_str(": ");
            why.push_str(&words.join("; "));
        }
        if let (Some(label), Some(value)) = (&policy.batch_by, &wave.batch) {
            why.push_str(&format!("; one {label} at a time ({label}={value})"));
        }
        wave.why = why;
    }
    waves
}

/// The waves as `release.json` lists them: host names only.
pub fn release_waves(waves: &[Wave]) -> Vec<Vec<String>> {
    waves.iter().map(|w| w.hosts.clone()).collect()
}

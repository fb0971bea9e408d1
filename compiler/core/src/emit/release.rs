//! The release: which bundle every host runs, in which waves the fleet takes it, and a version
//! that names exactly that (the hash of the host → bundle table).

use crate::graph::waves::{self, Policy, Wave};
use crate::resolve::ResolvedHost;
use crate::spec::{Kind, MaxUnavailable};
use bell_bundle::{Release, ReleaseHost, Rollout, Snapshots};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The release of `fleet`: every host with the bundle it was rendered into. `bundle_of` holds
/// an id for every host (the render stage fails otherwise).
pub fn release(
    fleet: &str,
    hosts: &[ResolvedHost],
    bundle_of: &BTreeMap<&str, String>,
    waves: &[Wave],
    policy: &Policy,
    followed: &BTreeSet<String>,
) -> Release {
    // Once per resolved configuration: hosts that share a model share its snapshots, whether
    // it reboots them, and the followed services it provides.
    type OfModel = (Arc<Snapshots>, bool, Arc<Vec<String>>);
    let mut of_model: HashMap<crate::resolve::ModelId, OfModel> = HashMap::new();
    let hosts: BTreeMap<String, ReleaseHost> = hosts
        .iter()
        .filter_map(|h| {
            let bundle = bundle_of.get(h.name.as_str())?;
            let (snapshots, reboots, provides) = of_model
                .entry(h.model_id)
                .or_insert_with(|| {
                    let mut described = ReleaseHost::default();
                    Kind::describe_in_release(&h.model, &mut described);
                    let provides: BTreeSet<&String> = h
                        .model
                        .services
                        .iter()
                        .map(|s| &s.name)
                        .filter(|name| followed.contains(*name))
                        .collect();
                    let provides = Arc::new(provides.into_iter().cloned().collect());
                    (described.snapshots, described.reboots, provides)
                })
                .clone();
            Some((
                h.name.clone(),
                ReleaseHost {
                    bundle: bundle.clone(),
                    address: h.address.clone(),
                    labels: h.labels.clone(),
                    identity: h.identity.clone(),
                    secrets: None,
                    snapshots,
                    reboots,
                    provides,
                },
            ))
        })
        .collect();
    let rollout = rollout(&hosts, policy);
    Release {
        format: bell_bundle::FORMAT,
        fleet: fleet.to_string(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: waves::release_waves(waves),
        sequence: None,
        expires: None,
        rollout: Some(rollout),
        identities_required: false,
        assignments: Vec::new(),
    }
}

/// The slots of every group: the same share of a group that the waves give it.
fn rollout(hosts: &BTreeMap<String, ReleaseHost>, policy: &Policy) -> Rollout {
    let mut rollout = Rollout {
        batch_by: policy.batch_by.clone(),
        max_unavailable: match policy.max_unavailable {
            MaxUnavailable::Count(n) => n.to_string(),
            MaxUnavailable::Percent(p) => format!("{p}%"),
        },
        slots: BTreeMap::new(),
    };
    let mut sizes: BTreeMap<String, usize> = BTreeMap::new();
    for host in hosts.values() {
        *sizes
            .entry(rollout.group_name(host).to_string())
            .or_default() += 1;
    }
    rollout.slots = sizes
        .into_iter()
        .map(|(group, size)| {
            let slots = u32::try_from(policy.per_wave(size)).unwrap_or(u32::MAX);
            (group, slots)
        })
        .collect();
    rollout
}

//! The release: which bundle every host runs, in which waves the fleet takes it, and a version
//! that names exactly that (the hash of the host → bundle table).

use crate::graph::waves::{self, Wave};
use crate::resolve::ResolvedHost;
use bell_bundle::{Release, ReleaseHost};
use std::collections::BTreeMap;

/// The release of `fleet`: every host with the bundle it was rendered into. `bundle_of` holds
/// an id for every host (the render stage fails otherwise).
pub fn release(
    fleet: &str,
    hosts: &[ResolvedHost],
    bundle_of: &BTreeMap<&str, String>,
    waves: &[Wave],
) -> Release {
    let hosts: BTreeMap<String, ReleaseHost> = hosts
        .iter()
        .filter_map(|h| {
            let bundle = bundle_of.get(h.name.as_str())?;
            Some((
                h.name.clone(),
                ReleaseHost {
                    bundle: bundle.clone(),
                    address: h.address.clone(),
                    labels: h.labels.clone(),
                },
            ))
        })
        .collect();
    Release {
        format: bell_bundle::FORMAT,
        fleet: fleet.to_string(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: waves::release_waves(waves),
        sequence: None,
        expires: None,
    }
}

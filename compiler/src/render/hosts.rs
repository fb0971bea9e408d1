//! Rendering a whole fleet: every distinct host configuration once, in parallel.
//!
//! Hosts that share a model and a target get the same bundle, unless a template of theirs reads
//! `host`; so the hosts are grouped first and each group is rendered once, on as many threads
//! as there are. Warnings travel with a rendered bundle, errors replace it, and a mistake that
//! many hosts share is reported once.

use super::{HostContext, RenderedBundle, Renderer, ServiceEndpoint};
use crate::diagnostic::Diagnostics;
use crate::graph::ResourceOrder;
use crate::resolve::Resolution;
use crate::source::Sources;
use crate::spec::Spec;
use crate::targets;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The rendered fleet: distinct bundles by id, and the bundle id of every host.
pub struct RenderedFleet<'h> {
    pub bundles: BTreeMap<String, RenderedBundle>,
    pub bundle_of: BTreeMap<&'h str, String>,
}

/// Renders every host of `resolution`. `None` when any host failed (the reasons are in
/// `diags`; a host without an order or a known target was reported by an earlier stage).
pub fn render_fleet<'h>(
    spec: &Spec,
    resolution: &'h Resolution,
    orders: &[Option<Arc<ResourceOrder>>],
    sources: &Sources,
    diags: &mut Diagnostics,
) -> Option<RenderedFleet<'h>> {
    let services = service_endpoints(resolution);
    let renderer = Renderer::new();
    let mut groups: BTreeMap<(usize, &str, Option<&str>), Vec<usize>> = BTreeMap::new();
    let mut uses_host: HashMap<usize, bool> = HashMap::new();
    for (i, host) in resolution.hosts.iter().enumerate() {
        let model_id = Arc::as_ptr(&host.model) as usize;
        let per_host = *uses_host
            .entry(model_id)
            .or_insert_with(|| renderer.reads_host(&host.model));
        let key = (
            model_id,
            host.target.as_str(),
            per_host.then_some(host.name.as_str()),
        );
        groups.entry(key).or_default().push(i);
    }
    let groups: Vec<Vec<usize>> = groups.into_values().collect();
    let rendered: Vec<Result<(RenderedBundle, Diagnostics), Diagnostics>> = groups
        .par_iter()
        .map(|members| {
            let first = members[0];
            let host = &resolution.hosts[first];
            let mut local = Diagnostics::new();
            let (Some(Some(order)), Some(target)) = (orders.get(first), targets::get(&host.target))
            else {
                return Err(local);
            };
            let cx = HostContext {
                host,
                target,
                fleet: &spec.fleet.name,
                services: &services,
                sources,
            };
            match renderer.render_host_ordered(&cx, order, &mut local) {
                Some(bundle) if !local.has_errors() => Ok((bundle, local)),
                _ => Err(local),
            }
        })
        .collect();
    let mut bundles = BTreeMap::new();
    let mut bundle_of: BTreeMap<&str, String> = BTreeMap::new();
    // The same mistake shows up once per host that has it: report it once, naming the hosts
    // when it is a template's (whose context is the host).
    let mut reports: Vec<(Box<dyn crate::diagnostic::SpecDiagnostic>, Vec<&str>)> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for (result, members) in rendered.into_iter().zip(&groups) {
        let reported = match result {
            Ok((bundle, warnings)) => {
                for &i in members {
                    bundle_of.insert(&resolution.hosts[i].name, bundle.id.clone());
                }
                bundles.entry(bundle.id.clone()).or_insert(bundle);
                warnings
            }
            Err(errors) => errors,
        };
        let names = members.iter().map(|&i| resolution.hosts[i].name.as_str());
        for d in reported.into_boxed() {
            match index_of.entry(d.to_string()) {
                std::collections::hash_map::Entry::Occupied(at) => {
                    reports[*at.get()].1.extend(names.clone())
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(reports.len());
                    reports.push((d, names.clone().collect()));
                }
            }
        }
    }
    for (d, mut hosts) in reports {
        let per_host = d
            .code()
            .is_some_and(|c| c.to_string() == "bell::render::template");
        if per_host {
            hosts.sort_unstable();
            diags.push(crate::diagnostic::OnHosts::new(d, &hosts));
        } else {
            diags.push_boxed(d);
        }
    }
    if diags.has_errors() || bundle_of.len() != resolution.hosts.len() {
        return None;
    }
    Some(RenderedFleet { bundles, bundle_of })
}

/// `services.NAME` for templates: every provider, sorted by host name.
pub fn service_endpoints(resolution: &Resolution) -> BTreeMap<String, Vec<ServiceEndpoint>> {
    let mut services: BTreeMap<String, Vec<ServiceEndpoint>> = BTreeMap::new();
    for host in &resolution.hosts {
        for service in &host.model.services {
            services
                .entry(service.name.clone())
                .or_default()
                .push(ServiceEndpoint {
                    host: host.name.clone(),
                    address: host.address.clone(),
                    port: service.port,
                });
        }
    }
    for list in services.values_mut() {
        list.sort_by(|a, b| a.host.cmp(&b.host));
    }
    services
}

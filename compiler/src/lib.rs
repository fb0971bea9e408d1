//! bellc: compiles a fleet spec into content-addressed per-host bundles.
//!
//! The pipeline, one module per stage, each with its own error type:
//!
//! ```text
//! lower    KDL files (includes, inventories) → typed Spec        (lower.rs, inventory.rs)
//! resolve  Spec × hosts → per-host Model with provenance          (resolve.rs)
//! graph    Model → resource apply order; services → rollout layers (graph.rs, services.rs)
//! render   Model → bundle in memory (manifest, files, scripts)    (render/)
//! plan     layers × rollout policy → waves                        (plan.rs)
//! emit     bundles → OUT/ on disk                                  (emit.rs)
//! ```
//!
//! The library never prints or exits; `main.rs` owns the terminal and exit codes.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
pub mod diagnostic;
pub mod diff;
pub mod emit;
pub mod escape;
pub mod explain;
pub mod fleetgen;
pub mod graph;
pub mod incremental;
pub mod inventory;
pub mod lower;
pub mod plan;
pub mod render;
pub mod resolve;
pub mod services;
pub mod source;
pub mod spec;
pub mod status;
pub mod targets;
pub mod validate;

use bell_bundle::{Release, ReleaseHost};
use diagnostic::Diagnostics;
use graph::ResourceOrder;
use rayon::prelude::*;
use render::{HostContext, RenderedBundle, Renderer, ServiceEndpoint};
use resolve::Resolution;
use services::ServiceLayers;
use source::Sources;
use spec::Spec;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The result of compiling a spec in memory.
pub struct Compiled {
    pub spec: Spec,
    pub resolution: Resolution,
    /// Distinct bundles by id.
    pub bundles: BTreeMap<String, RenderedBundle>,
    pub release: Release,
    /// Rollout layers of every host, for planning waves against another release.
    pub layers: ServiceLayers,
}

/// How far the pipeline got; later stages need the earlier ones' results.
pub struct Frontend {
    pub spec: Spec,
    pub resolution: Resolution,
    /// By host index: the apply order of the host's resources (`None` after a graph error).
    pub orders: Vec<Option<Arc<ResourceOrder>>>,
    /// `None` after a service error.
    pub layers: Option<ServiceLayers>,
}

/// Loads, lowers and resolves. Lowering errors do not stop resolution (so that one run reports
/// as many mistakes as possible), but they do stop the pipeline before rendering.
pub fn frontend(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Frontend> {
    let spec = lower::load(path, sources, diags)?;
    Some(analyse(spec, sources, diags))
}

/// The stages after lowering: resolution, the resource graph of every host, and the service
/// checks. For callers that lowered a spec themselves (tests that build from a string).
pub fn analyse(spec: Spec, sources: &Sources, diags: &mut Diagnostics) -> Frontend {
    let names = targets::names();
    let resolution = resolve::resolve(&spec, &names, diags);
    let orders = graph::order_hosts(&resolution.hosts, sources, diags);
    let layers = services::check(&resolution.hosts, diags);
    Frontend {
        spec,
        resolution,
        orders,
        layers,
    }
}

/// Compiles a spec into bundles in memory. `None` when there are errors (in `diags`).
pub fn compile(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Compiled> {
    let front = frontend(path, sources, diags)?;
    if diags.has_errors() {
        return None;
    }
    compile_frontend(front, sources, diags)
}

pub fn compile_frontend(
    front: Frontend,
    sources: &Sources,
    diags: &mut Diagnostics,
) -> Option<Compiled> {
    let Frontend {
        spec,
        resolution,
        orders,
        layers,
    } = front;
    // The stages before reported why an order or the layers are missing.
    let layers = layers?;
    let services = service_endpoints(&resolution);
    let renderer = Renderer::new();
    // Hosts that share a model and a target get the same bundle, unless a template of theirs
    // reads `host`: render each distinct combination once, on as many threads as there are.
    let mut groups: BTreeMap<(usize, &str, Option<&str>), Vec<usize>> = BTreeMap::new();
    let mut uses_host: std::collections::HashMap<usize, bool> = std::collections::HashMap::new();
    for (i, host) in resolution.hosts.iter().enumerate() {
        let model_id = std::sync::Arc::as_ptr(&host.model) as usize;
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
    // Warnings travel with a rendered bundle; errors replace it.
    #[allow(clippy::type_complexity)]
    let rendered: Vec<(usize, Result<(RenderedBundle, Diagnostics), Diagnostics>)> = groups
        .par_iter()
        .map(|members| {
            let first = members[0];
            let host = &resolution.hosts[first];
            let order = &orders[first];
            let mut local = Diagnostics::new();
            let Some(order) = order else {
                return (first, Err(local));
            };
            let Some(target) = targets::get(&host.target) else {
                return (first, Err(local));
            };
            let cx = HostContext {
                host,
                target,
                fleet: &spec.fleet.name,
                services: &services,
                sources,
            };
            let result = match renderer.render_host_ordered(&cx, order, &mut local) {
                Some(bundle) if !local.has_errors() => Ok((bundle, local)),
                _ => Err(local),
            };
            (first, result)
        })
        .collect();
    let mut bundles = BTreeMap::new();
    let mut host_bundle: BTreeMap<&str, String> = BTreeMap::new();
    let mut seen_messages = std::collections::BTreeSet::new();
    for ((_, result), members) in rendered.into_iter().zip(&groups) {
        match result {
            Ok((bundle, warnings)) => {
                for &i in members {
                    host_bundle.insert(&resolution.hosts[i].name, bundle.id.clone());
                }
                for d in warnings.into_boxed() {
                    if seen_messages.insert(d.to_string()) {
                        diags.push_boxed(d);
                    }
                }
                bundles.entry(bundle.id.clone()).or_insert(bundle);
            }
            Err(local) => {
                // The same mistake shows up once per host that has it; report it once.
                for d in local.into_boxed() {
                    if seen_messages.insert(d.to_string()) {
                        diags.push_boxed(d);
                    }
                }
            }
        }
    }
    if diags.has_errors() || host_bundle.len() != resolution.hosts.len() {
        return None;
    }
    let hosts: BTreeMap<String, ReleaseHost> = resolution
        .hosts
        .iter()
        .map(|h| {
            (
                h.name.clone(),
                ReleaseHost {
                    bundle: host_bundle[h.name.as_str()].clone(),
                    address: h.address.clone(),
                    labels: h.labels.clone(),
                },
            )
        })
        .collect();
    let release = Release {
        format: bell_bundle::FORMAT,
        fleet: spec.fleet.name.clone(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: Vec::new(),
    };
    let policy = plan::Policy::from_spec(spec.rollout.as_ref());
    let waves = plan::plan(&resolution.hosts, &layers, &policy, |_| true);
    let release = Release {
        waves: plan::release_waves(&waves),
        ..release
    };
    Some(Compiled {
        spec,
        resolution,
        bundles,
        release,
        layers,
    })
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

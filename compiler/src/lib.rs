//! bellc: compiles a fleet spec into content-addressed per-host bundles.
//!
//! The pipeline, one module per stage, each with its own error type:
//!
//! ```text
//! lower    KDL files (includes, inventories) → typed Spec        (lower.rs, inventory.rs)
//! resolve  Spec × hosts → per-host Model with provenance          (resolve.rs)
//! render   Model → bundle in memory (manifest, files, scripts)    (render/)
//! emit     bundles → OUT/ on disk                                  (emit.rs)
//! ```
//!
//! The library never prints or exits; `main.rs` owns the terminal and exit codes.

pub mod diagnostic;
pub mod diff;
pub mod emit;
pub mod escape;
pub mod explain;
pub mod fleetgen;
pub mod inventory;
pub mod lower;
pub mod render;
pub mod resolve;
pub mod source;
pub mod spec;
pub mod status;
pub mod targets;
pub mod validate;

use bell_bundle::{Release, ReleaseHost};
use diagnostic::Diagnostics;
use rayon::prelude::*;
use render::{HostContext, RenderedBundle, Renderer, ServiceEndpoint};
use resolve::Resolution;
use source::Sources;
use spec::Spec;
use std::collections::BTreeMap;
use std::path::Path;

/// The result of compiling a spec in memory.
pub struct Compiled {
    pub spec: Spec,
    pub resolution: Resolution,
    /// Distinct bundles by id.
    pub bundles: BTreeMap<String, RenderedBundle>,
    pub release: Release,
}

/// How far the pipeline got; later stages need the earlier ones' results.
pub struct Frontend {
    pub spec: Spec,
    pub resolution: Resolution,
}

/// Loads, lowers and resolves. Lowering errors do not stop resolution (so that one run reports
/// as many mistakes as possible), but they do stop the pipeline before rendering.
pub fn frontend(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Frontend> {
    let spec = lower::load(path, sources, diags)?;
    let names = targets::names();
    let resolution = resolve::resolve(&spec, sources, &names, diags);
    Some(Frontend { spec, resolution })
}

/// Compiles a spec into bundles in memory. `None` when there are errors (in `diags`).
pub fn compile(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Compiled> {
    let front = frontend(path, sources, diags)?;
    if diags.has_errors() {
        return None;
    }
    compile_frontend(front, diags)
}

pub fn compile_frontend(front: Frontend, diags: &mut Diagnostics) -> Option<Compiled> {
    let Frontend { spec, resolution } = front;
    let services = service_endpoints(&resolution);
    let renderer = Renderer::new();
    let rendered: Vec<(String, Result<RenderedBundle, Diagnostics>)> = resolution
        .hosts
        .par_iter()
        .map(|host| {
            let mut local = Diagnostics::new();
            let Some(target) = targets::get(&host.target) else {
                return (host.name.clone(), Err(local));
            };
            let cx = HostContext {
                host,
                target,
                fleet: &spec.fleet.name,
                services: &services,
            };
            let result = match renderer.render_host(&cx, &mut local) {
                Some(bundle) if !local.has_errors() => Ok(bundle),
                _ => Err(local),
            };
            (host.name.clone(), result)
        })
        .collect();
    let mut bundles = BTreeMap::new();
    let mut host_bundle = BTreeMap::new();
    let mut seen_messages = std::collections::BTreeSet::new();
    for (name, result) in rendered {
        match result {
            Ok(bundle) => {
                host_bundle.insert(name, bundle.id.clone());
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
    if diags.has_errors() {
        return None;
    }
    let hosts: BTreeMap<String, ReleaseHost> = resolution
        .hosts
        .iter()
        .map(|h| {
            (
                h.name.clone(),
                ReleaseHost {
                    bundle: host_bundle[&h.name].clone(),
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
    Some(Compiled {
        spec,
        resolution,
        bundles,
        release,
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

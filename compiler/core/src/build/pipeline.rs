//! The pipeline as functions, stage after stage: the front end (`frontend`, `analyse`), then
//! rendering and the release, into memory (`compile_frontend`) or a chunk at a time into a
//! sink (`compile_streamed`). The crate root re-exports them; [`super::Build`] runs them into
//! OUT.

use crate::diagnostic::Diagnostics;
use crate::graph::services::ServiceLayers;
use crate::graph::ResourceOrder;
use crate::render::RenderedBundle;
use crate::resolve::Resolution;
use crate::source::Sources;
use crate::spec::Spec;
use crate::{emit, front, graph, kinds, render, resolve, targets};
use bell_bundle::Release;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What the front end may be told to relax or tighten, as the command line's global flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checks {
    /// A sysctl key no target kernel knows is a warning, not an error.
    pub allow_unknown_sysctl: bool,
    /// Warnings fail the build (recorded, so that a skipped rebuild fails alike).
    pub deny_warnings: bool,
}

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
    frontend_checked(path, Checks::default(), sources, diags)
}

/// [`frontend`] with the checks a command line chose.
pub fn frontend_checked(
    path: &Path,
    checks: Checks,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Option<Frontend> {
    let mut spec = front::load(path, sources, diags)?;
    spec.allow_unknown_sysctl = checks.allow_unknown_sysctl;
    Some(analyse(spec, sources, diags))
}

/// Loads, lowers and resolves, no further (no graph, no bundles): where each value of each
/// host was set, for a value diff. `None` after an error.
pub fn resolved(
    path: &Path,
    checks: Checks,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Option<(Spec, Resolution)> {
    let mut spec = front::load(path, sources, diags)?;
    spec.allow_unknown_sysctl = checks.allow_unknown_sysctl;
    let resolution = resolve::resolve(&spec, &targets::names(), diags);
    if diags.has_errors() {
        return None;
    }
    Some((spec, resolution))
}

/// The stages after lowering: resolution, the resource graph of every host, and the service
/// checks. For callers that lowered a spec themselves (tests that build from a string).
pub fn analyse(spec: Spec, sources: &Sources, diags: &mut Diagnostics) -> Frontend {
    let resolution = resolve::resolve(&spec, &targets::names(), diags);
    kinds::check_hosts(&resolution.hosts, sources, diags);
    let orders = graph::order_hosts(&resolution.hosts, &spec.rejected, sources, diags);
    let layers = graph::services::check(&resolution.hosts, diags);
    Frontend {
        spec,
        resolution,
        orders,
        layers,
    }
}

/// Compiles a spec into bundles in memory. `None` when there are errors (in `diags`).
pub fn compile(path: &Path, sources: &mut Sources, diags: &mut Diagnostics) -> Option<Compiled> {
    compile_checked(path, Checks::default(), sources, diags, None)
}

/// [`compile`] with the checks a command line chose, naming and sealing secrets with `seal`
/// (see [`compile_frontend_sealed`]).
pub fn compile_checked(
    path: &Path,
    checks: Checks,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal: Option<bell_seal::SealKey>,
) -> Option<Compiled> {
    let front = frontend_checked(path, checks, sources, diags)?;
    if diags.has_errors() {
        template_errors(front, sources, diags);
        return None;
    }
    compile_frontend_sealed(front, sources, diags, seal)
}

/// For a front end that found errors: renders its hosts anyway, for their template errors
/// alone, so that a template typo is reported in the same run as the errors before it rather
/// than in the next. Nothing else rendering says is kept: a clash or a bad value there may
/// only follow from a node dropped for an earlier error. Skipped after a service error, where
/// a template's `services` would be missing for that reason alone.
pub fn template_errors(front: Frontend, sources: &Sources, diags: &mut Diagnostics) {
    if front.layers.is_none() {
        return;
    }
    let mut found = Diagnostics::new();
    let mut cache = render::RenderCache::default();
    let mut discard = |_: render::Chunk| Ok::<(), std::convert::Infallible>(());
    let _ = compile_streamed(front, sources, &mut found, &mut cache, &mut discard);
    for d in found.into_boxed() {
        if render::is_template_error(d.as_ref()) {
            diags.push_boxed(d);
        }
    }
}

/// A compiled spec whose bundles went to a sink as they were rendered (see [`compile_streamed`]).
pub struct Streamed {
    pub spec: Spec,
    pub resolution: Resolution,
    /// The ids of the distinct bundles the release names.
    pub bundle_ids: std::collections::BTreeSet<String>,
    pub release: Release,
    pub layers: ServiceLayers,
}

/// Renders the hosts of a front end without errors a chunk at a time, handing each chunk's new
/// bundles and its hosts to `sink` (which writes them and drops them, and links the hosts:
/// `bellc build` gives an [`emit::BundleWriter`]), and plans the release. However many hosts have a bundle of their
/// own, only a few chunks of bundles are in memory at once. `Ok(None)` when a host failed to
/// render (the reasons are in `diags`); what `sink` took before is the caller's to take back.
/// A group whose inputs `cache` knows is not rendered (its bundle is OUT's already).
pub fn compile_streamed<E: Send>(
    front: Frontend,
    sources: &Sources,
    diags: &mut Diagnostics,
    cache: &mut render::RenderCache,
    sink: &mut (dyn FnMut(render::Chunk) -> Result<(), E> + Send),
) -> Result<Option<Streamed>, E> {
    let Frontend {
        spec,
        resolution,
        orders,
        layers,
    } = front;
    let Some(layers) = layers else {
        return Ok(None);
    };
    let Some(bundle_of) =
        render::render_fleet_streamed(&spec, &resolution, &orders, sources, diags, cache, sink)?
    else {
        return Ok(None);
    };
    let release = plan_release(&spec, &resolution, &bundle_of, &layers);
    drop(bundle_of);
    let bundle_ids = release.hosts.values().map(|h| h.bundle.clone()).collect();
    Ok(Some(Streamed {
        spec,
        resolution,
        bundle_ids,
        release,
        layers,
    }))
}

fn plan_release(
    spec: &Spec,
    resolution: &Resolution,
    bundle_of: &BTreeMap<&str, String>,
    layers: &ServiceLayers,
) -> Release {
    let policy = graph::waves::Policy::from_spec(spec.rollout.as_ref());
    let waves = graph::waves::plan(&resolution.hosts, layers, &policy, |_| true);
    let mut release = emit::release::release(
        &spec.fleet.name,
        &resolution.hosts,
        bundle_of,
        &waves,
        &policy,
        &crate::render::followed_services(resolution),
    );
    release.identities_required = spec.fleet.identities_required.is_some();
    release.assignments = spec
        .assigns
        .iter()
        .filter_map(|a| {
            Some(bell_bundle::Assignment {
                label: a.label.clone(),
                value: a.value.clone(),
                count: a.count?,
                hosts: a.hosts.clone(),
            })
        })
        .collect();
    release
}

/// Renders the hosts of a front end without errors into memory and plans the release.
pub fn compile_frontend(
    front: Frontend,
    sources: &Sources,
    diags: &mut Diagnostics,
) -> Option<Compiled> {
    compile_frontend_sealed(front, sources, diags, None)
}

/// [`compile_frontend`], naming and sealing secrets (`secrets="sealed"`) with `seal`, a
/// build's key (without one, a key no one keeps).
pub fn compile_frontend_sealed(
    front: Frontend,
    sources: &Sources,
    diags: &mut Diagnostics,
    seal: Option<bell_seal::SealKey>,
) -> Option<Compiled> {
    let mut bundles = BTreeMap::new();
    let mut keep = |chunk: render::Chunk| {
        for bundle in chunk.bundles {
            bundles.insert(bundle.id.clone(), bundle);
        }
        Ok::<(), std::convert::Infallible>(())
    };
    let mut cache = render::RenderCache {
        seal,
        ..Default::default()
    };
    let streamed = match compile_streamed(front, sources, diags, &mut cache, &mut keep) {
        Ok(streamed) => streamed?,
        Err(never) => match never {},
    };
    Some(Compiled {
        spec: streamed.spec,
        resolution: streamed.resolution,
        bundles,
        release: streamed.release,
        layers: streamed.layers,
    })
}

//! Services across hosts: who provides what, whether every consumer finds enough providers, and
//! in which order hosts may roll out so that a consumer never restarts before its providers.
//!
//! `service "NAME"` makes a host a provider of NAME at its address; `uses "NAME" count=N` needs
//! N providers. A runtime `uses` (the default) also orders the rollout: the consumer's layer is
//! one more than its providers'. Providers of a service that also use it are peers (an etcd
//! member finding the other members) and are not ordered among themselves.
//!
//! Every check runs per distinct model, not per host pair, so that a fleet of 100k hosts checks
//! in time linear in its hosts.

use crate::diagnostic::Diagnostics;
use crate::front::validate;
use crate::resolve::{Model, ResolvedHost};
use crate::source::{FileId, Span};
use miette::{Diagnostic, LabeledSpan, SourceSpan};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum ServiceError {
    #[error("host `{host}` provides `{service}` but has no address{more}")]
    #[diagnostic(code(bell::services::no_address))]
    NoAddress {
        service: String,
        host: String,
        more: String,
        #[label("makes `{host}` a provider of `{service}`")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{service}` needs {needed} provider(s) but {found} host(s) provide it")]
    #[diagnostic(code(bell::services::unmet_count))]
    UnmetCount {
        service: String,
        needed: u32,
        found: usize,
        #[label("needed by {consumers}")]
        span: SourceSpan,
        consumers: String,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`wait-for` forms a cycle between hosts: {path}")]
    #[diagnostic(code(bell::services::wait_cycle))]
    WaitCycle {
        path: String,
        #[label(collection)]
        labels: Vec<LabeledSpan>,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("runtime `uses` form a cycle between services: {path}")]
    #[diagnostic(code(bell::services::runtime_cycle))]
    RuntimeCycle {
        path: String,
        #[label(collection)]
        labels: Vec<LabeledSpan>,
        #[help]
        help: String,
        file: FileId,
    },
}

impl ServiceError {
    fn file_id(&self) -> Option<FileId> {
        match self {
            ServiceError::NoAddress { file, .. }
            | ServiceError::UnmetCount { file, .. }
            | ServiceError::RuntimeCycle { file, .. }
            | ServiceError::WaitCycle { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(ServiceError);

/// Where each host stands in the runtime service order.
#[derive(Debug, Clone, Default)]
pub struct ServiceLayers {
    /// By host index (the order of `Resolution::hosts`): 0 for hosts that wait for no provider,
    /// otherwise one more than the highest layer among the providers they use at runtime.
    pub host_layer: Vec<u32>,
    /// By host index: an index into `why`.
    pub host_reason: Vec<usize>,
    /// Why a group of hosts sits in its layer, in words (one entry per distinct model).
    pub why: Vec<String>,
}

/// A list of names for a message: the first few, then how many more.
pub fn name_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 5;
    let mut shown = Vec::new();
    let mut more = 0usize;
    for name in names {
        if shown.len() < SHOWN {
            shown.push(format!("`{name}`"));
        } else {
            more += 1;
        }
    }
    if shown.is_empty() {
        return "none".into();
    }
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// A span as an ordered map key, so that diagnostics come out in source order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SpanKey(FileId, usize, usize);

impl SpanKey {
    fn span(self) -> Span {
        Span {
            file: self.0,
            offset: self.1,
            len: self.2,
        }
    }
}

fn key(span: Span) -> SpanKey {
    SpanKey(span.file, span.offset, span.len)
}

struct ModelInfo<'r> {
    model: &'r Model,
    hosts: Vec<usize>,
}

/// Checks providers and consumers and computes the rollout layers. `None` when a diagnostic
/// makes the order meaningless (an unmet count, a cycle).
pub fn check(hosts: &[ResolvedHost], diags: &mut Diagnostics) -> Option<ServiceLayers> {
    // Distinct models, in order of first host.
    let mut model_index: HashMap<crate::resolve::ModelId, usize> = HashMap::new();
    let mut models: Vec<ModelInfo> = Vec::new();
    let mut host_model = Vec::with_capacity(hosts.len());
    for (h, host) in hosts.iter().enumerate() {
        let m = *model_index.entry(host.model_id).or_insert_with(|| {
            models.push(ModelInfo {
                model: &host.model,
                hosts: Vec::new(),
            });
            models.len() - 1
        });
        models[m].hosts.push(h);
        host_model.push(m);
    }

    let before = diags.error_count();
    // Providers by service, in host order (hosts are sorted by name).
    let mut providers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut no_address: BTreeMap<(SpanKey, &str), Vec<usize>> = BTreeMap::new();
    for info in &models {
        for service in &info.model.services {
            let list = providers.entry(service.name.as_str()).or_default();
            for &h in &info.hosts {
                list.push(h);
                if hosts[h].address.is_none() {
                    no_address
                        .entry((key(service.origin.span), service.name.as_str()))
                        .or_default()
                        .push(h);
                }
            }
        }
    }
    for list in providers.values_mut() {
        list.sort_unstable();
    }
    for ((span, service), missing) in &no_address {
        let span = span.span();
        let more = match missing.len() {
            1 => String::new(),
            2 => " (1 more provider has none)".to_string(),
            n => format!(" ({} more providers have none)", n - 1),
        };
        diags.push(ServiceError::NoAddress {
            service: service.to_string(),
            host: hosts[missing[0]].name.clone(),
            more,
            span: span.source_span(),
            help: format!(
                "give the host an address (`host \"{}\" address=\"...\"` or `address` in the \
                 inventory), or do not match it with this `service`",
                hosts[missing[0]].name
            ),
            file: span.file,
        });
    }

    // Counts, once per `uses` declaration (many models may inherit the same one).
    let mut consumers: BTreeMap<(SpanKey, &str, u32), Vec<usize>> = BTreeMap::new();
    for info in &models {
        for uses in &info.model.uses {
            consumers
                .entry((key(uses.origin.span), uses.name.as_str(), uses.count))
                .or_default()
                .extend(info.hosts.iter().copied());
        }
        // A wait for N providers needs N hosts to provide.
        for res in &info.model.resources {
            for wait in res.wait_for() {
                consumers
                    .entry((key(wait.span), wait.service.as_str(), wait.count))
                    .or_default()
                    .extend(info.hosts.iter().copied());
            }
        }
        // A live file lists the ready providers of its service: one must exist to be ready.
        for live in info.model.of_kind(crate::spec::Kind::LIVE) {
            if let Some(service) = live.str("service") {
                consumers
                    .entry((key(live.span_of("service")), service, 1))
                    .or_default()
                    .extend(info.hosts.iter().copied());
            }
        }
    }
    for ((span, service, needed), users) in &mut consumers {
        let span = span.span();
        let found = providers.get(service).map_or(&[][..], Vec::as_slice);
        if found.len() >= *needed as usize {
            continue;
        }
        users.sort_unstable();
        let provider_names = name_list(found.iter().map(|&h| hosts[h].name.as_str()));
        let mut help = format!("providers found: {provider_names}");
        if found.is_empty() {
            if let Some(s) = validate::did_you_mean(service, providers.keys().copied()) {
                help.push_str(&format!("; did you mean `{s}`?"));
            }
        }
        help.push_str(&format!(
            "; match more hosts with a `service \"{service}\"`, or lower `count`"
        ));
        diags.push(ServiceError::UnmetCount {
            service: service.to_string(),
            needed: *needed,
            found: found.len(),
            span: span.source_span(),
            consumers: name_list(users.iter().map(|&h| hosts[h].name.as_str())),
            help,
            file: span.file,
        });
    }

    wait_cycles(&models, &providers, hosts, diags);

    // The runtime graph between services: S → T when a provider of T uses S at runtime, so
    // T's providers roll out after S's.
    let mut graph: DiGraph<&str, (Span, usize)> = DiGraph::new();
    let mut node: HashMap<&str, NodeIndex> = HashMap::new();
    for &name in providers.keys() {
        node.insert(name, graph.add_node(name));
    }
    let mut seen_edges = HashSet::new();
    for (m, info) in models.iter().enumerate() {
        for service in &info.model.services {
            for uses in info.model.uses.iter().filter(|u| u.runtime) {
                if uses.name == service.name {
                    continue;
                }
                let (Some(&s), Some(&t)) = (
                    node.get(uses.name.as_str()),
                    node.get(service.name.as_str()),
                ) else {
                    continue;
                };
                if seen_edges.insert((s, t)) {
                    graph.add_edge(s, t, (uses.origin.span, m));
                }
            }
        }
    }
    let topo = match petgraph::algo::toposort(&graph, None) {
        Ok(order) => order,
        Err(_) => {
            report_cycles(&graph, &models, hosts, diags);
            return None;
        }
    };
    if diags.error_count() > before {
        return None;
    }

    // Layers: a model sits one above the highest provider layer it uses at runtime.
    let mut service_layer: HashMap<&str, u32> = HashMap::new();
    let mut model_layer: Vec<Option<u32>> = vec![None; models.len()];
    let layer_of = |m: usize, service_layer: &HashMap<&str, u32>| -> u32 {
        let model = models[m].model;
        model
            .uses
            .iter()
            .filter(|u| u.runtime && !model.services.iter().any(|s| s.name == u.name))
            .filter_map(|u| service_layer.get(u.name.as_str()))
            .map(|l| l + 1)
            .max()
            .unwrap_or(0)
    };
    let mut providing: HashMap<&str, Vec<usize>> = HashMap::new();
    for (m, info) in models.iter().enumerate() {
        for s in &info.model.services {
            providing.entry(s.name.as_str()).or_default().push(m);
        }
    }
    for n in topo {
        let name = graph[n];
        let mut layer = 0;
        for &m in providing.get(name).map_or(&[][..], Vec::as_slice) {
            let l = *model_layer[m].get_or_insert_with(|| layer_of(m, &service_layer));
            layer = layer.max(l);
        }
        service_layer.insert(name, layer);
    }
    for (m, layer) in model_layer.iter_mut().enumerate() {
        if layer.is_none() {
            *layer = Some(layer_of(m, &service_layer));
        }
    }

    let why: Vec<String> = models
        .iter()
        .map(|info| reason(info.model, &service_layer))
        .collect();
    Some(ServiceLayers {
        host_layer: host_model
            .iter()
            .map(|&m| model_layer[m].unwrap_or(0))
            .collect(),
        host_reason: host_model,
        why,
    })
}

fn reason(model: &Model, service_layer: &HashMap<&str, u32>) -> String {
    let mut parts = Vec::new();
    let waits: BTreeSet<&str> = model
        .uses
        .iter()
        .filter(|u| u.runtime && !model.services.iter().any(|s| s.name == u.name))
        .filter(|u| service_layer.contains_key(u.name.as_str()))
        .map(|u| u.name.as_str())
        .collect();
    if !waits.is_empty() {
        parts.push(format!(
            "after providers of {}",
            waits.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let provides: BTreeSet<&str> = model.services.iter().map(|s| s.name.as_str()).collect();
    if !provides.is_empty() {
        parts.push(format!(
            "provides {}",
            provides.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if parts.is_empty() {
        "waits for no service".into()
    } else {
        parts.join("; ")
    }
}

/// A wait that can never end: the providers of one service wait (a `wait-for` on one of their
/// resources) for another service whose providers wait, in turn, for the first (or for their own
/// service). On a fleet's first boot every host waits and none becomes ready: the deadlock the
/// seed notes describe, refused at build time. S → T when a provider of S waits for T.
fn wait_cycles(
    models: &[ModelInfo],
    providers: &BTreeMap<&str, Vec<usize>>,
    hosts: &[ResolvedHost],
    diags: &mut Diagnostics,
) {
    let mut graph: DiGraph<&str, (Span, usize)> = DiGraph::new();
    let mut node: HashMap<&str, NodeIndex> = HashMap::new();
    for &name in providers.keys() {
        node.insert(name, graph.add_node(name));
    }
    let mut seen = HashSet::new();
    for (m, info) in models.iter().enumerate() {
        for service in &info.model.services {
            for res in &info.model.resources {
                for wait in res.wait_for() {
                    let (Some(&s), Some(&t)) = (
                        node.get(service.name.as_str()),
                        node.get(wait.service.as_str()),
                    ) else {
                        continue;
                    };
                    if seen.insert((s, t)) {
                        graph.add_edge(s, t, (wait.span, m));
                    }
                }
            }
        }
    }
    for (_, edges) in cycles(&graph) {
        let Some(file) = edges.first().map(|e| e.weight().0.file) else {
            continue;
        };
        let mut words = Vec::new();
        let mut labels = Vec::new();
        for e in &edges {
            let (span, m) = *e.weight();
            let (provided, waited) = (graph[e.source()], graph[e.target()]);
            let example = models[m]
                .hosts
                .first()
                .map_or("", |&h| hosts[h].name.as_str());
            words.push(format!(
                "`{example}` (providing `{provided}`) waits for `{waited}`"
            ));
            if span.file == file {
                labels.push(LabeledSpan::new_with_span(
                    Some(format!("providers of `{provided}` wait for `{waited}`")),
                    span.source_span(),
                ));
            }
        }
        let path = words.join(", ");
        diags.push(ServiceError::WaitCycle {
            path,
            labels,
            help: "on a first boot every one of them would wait for the others and none would \
                   become ready: wait in a host that does not provide what it waits for, or drop \
                   one `wait-for` (a provider is ready when its own health probes pass)"
                .into(),
            file,
        });
    }
}

/// The strongly connected components of `graph` that hold a cycle (two services or more, or
/// one with an edge to itself), each walked from its first service until one repeats: the
/// services of the cycle, in order, and the edges between them.
#[allow(clippy::type_complexity)]
fn cycles<'g>(
    graph: &'g DiGraph<&str, (Span, usize)>,
) -> Vec<(
    Vec<NodeIndex>,
    Vec<petgraph::graph::EdgeReference<'g, (Span, usize)>>,
)> {
    let mut components = petgraph::algo::tarjan_scc(graph);
    for c in &mut components {
        c.sort();
    }
    components.sort();
    let mut out = Vec::new();
    for component in components {
        let looped = component.len() == 1 && graph.contains_edge(component[0], component[0]);
        if component.len() < 2 && !looped {
            continue;
        }
        let members: HashSet<NodeIndex> = component.iter().copied().collect();
        let mut path = vec![component[0]];
        let mut edges = Vec::new();
        let mut position: HashMap<NodeIndex, usize> = HashMap::from([(component[0], 0)]);
        let start = loop {
            let Some(&at) = path.last() else { break 0 };
            let Some(e) = graph
                .edges(at)
                .filter(|e| members.contains(&e.target()))
                .min_by_key(|e| e.target())
            else {
                break 0;
            };
            edges.push(e);
            if let Some(&p) = position.get(&e.target()) {
                break p;
            }
            position.insert(e.target(), path.len());
            path.push(e.target());
        };
        out.push((path.split_off(start), edges.split_off(start)));
    }
    out
}

fn report_cycles(
    graph: &DiGraph<&str, (Span, usize)>,
    models: &[ModelInfo],
    hosts: &[ResolvedHost],
    diags: &mut Diagnostics,
) {
    // A service that uses itself is a peer, never an edge: every cycle here has two or more.
    for (path, edges) in cycles(graph) {
        let mut names: Vec<String> = path.iter().map(|&n| format!("`{}`", graph[n])).collect();
        names.push(format!("`{}`", graph[path[0]]));
        let file = edges.first().map(|e| e.weight().0.file);
        let Some(file) = file else { continue };
        let mut words = Vec::new();
        let mut labels = Vec::new();
        for e in &edges {
            let (span, m) = *e.weight();
            let (used, provided) = (graph[e.source()], graph[e.target()]);
            let example = models[m]
                .hosts
                .first()
                .map_or("", |&h| hosts[h].name.as_str());
            words.push(format!(
                "hosts providing `{provided}` (such as `{example}`) use `{used}` at runtime, so \
                 they roll out after the providers of `{used}`"
            ));
            if span.file == file {
                labels.push(LabeledSpan::new_with_span(
                    Some(format!("providers of `{provided}` wait for `{used}`")),
                    span.source_span(),
                ));
            }
        }
        let Some(last) = edges.last() else { continue };
        let suggestion = graph[last.source()];
        diags.push(ServiceError::RuntimeCycle {
            path: names.join(" → "),
            labels,
            help: format!(
                "{}; no order satisfies both: make one side data only, such as \
                 `uses \"{suggestion}\" runtime=#false`",
                words.join("; ")
            ),
            file,
        });
    }
}

//! The resource graph of one host configuration: which resource must be applied before which.
//!
//! bell-run applies resources in manifest order and skips the dependents of a resource that
//! failed, so the manifest needs both a topological order and, per resource, the resources it
//! waits for. Edges come from `after "KIND:NAME"` in the spec and from the orderings a careful
//! operator would write anyway (a package before the files and units that configure it, a mount
//! before the mounts nested under it, ...), so that specs do not have to spell them out.
//!
//! The graph depends only on a `Model`, which many hosts share, so it is built once per model.

use crate::diagnostic::Diagnostics;
use crate::front::lower::parse_ref;
use crate::front::validate;
use crate::resolve::{Model, ResolvedHost};
use crate::source::{FileId, Sources, Span};
use crate::spec::{Kind, RefKind};
use miette::{Diagnostic, LabeledSpan, SourceSpan};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use thiserror::Error;

mod cycles;
use cycles::report_cycles;

#[derive(Debug, Error, Diagnostic)]
pub enum GraphError {
    #[error("`after` names `{reference}`, which host `{host}` does not have")]
    #[diagnostic(code(bell::graph::unknown_after))]
    UnknownAfter {
        reference: String,
        host: String,
        #[label("no such resource on `{host}`")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("resources wait for each other in a cycle: {path}")]
    #[diagnostic(code(bell::graph::cycle))]
    Cycle {
        path: String,
        #[label(collection)]
        labels: Vec<LabeledSpan>,
        #[help]
        help: String,
        file: FileId,
    },
}

impl GraphError {
    fn file_id(&self) -> Option<FileId> {
        match self {
            GraphError::UnknownAfter { file, .. } | GraphError::Cycle { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(GraphError);

/// Why one resource comes before another; explicit edges keep the span of their `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    After(Span),
    /// A dependency a kind implies between two of its resources' values (a file owned by a
    /// user, a mount under another), in the kind's words: a sentence in which `{before}` and
    /// `{after}` stand for the two resources. The kinds say it, so that this stage names none.
    Needs(&'static str),
    /// A blanket rule a kind states (`Implied::AfterEvery`), in words: "packages are installed
    /// before the files, units, profiles and scripts of their host". The kind that comes first
    /// says it.
    Rule(&'static str),
    /// An ordering only among a kind's own resources (`Implied::InNameOrder`), a sentence like
    /// those of [`Reason::Needs`].
    Sequence(&'static str),
}

impl Reason {
    /// Whether the later resource needs the earlier one to have applied (so bell-run skips it
    /// when that one failed), or only comes after it. `after` in a spec, a mount nested under
    /// another, a file owned by a user and a unit naming a file are dependencies: the later
    /// one cannot do its work without the earlier. The blanket rules (packages before what
    /// configures them, apt sources before packages, users and mounts before scripts, scripts
    /// in name order) only order: one failed package must not hold back every file of the
    /// host, and a failed script does not stop the next, as in Divingbell.
    pub fn is_dependency(&self) -> bool {
        match self {
            Reason::After(_) | Reason::Needs(_) => true,
            Reason::Rule(_) | Reason::Sequence(_) => false,
        }
    }

    /// The rule behind an edge `before → after`, in words.
    fn explain(&self, before: &str, after: &str, sources: Option<&Sources>) -> String {
        match self {
            Reason::After(span) => match sources {
                Some(sources) => format!(
                    "`{after}` has `after \"{before}\"` at {}",
                    sources.location(*span)
                ),
                None => format!("`{after}` has `after \"{before}\"`"),
            },
            Reason::Rule(rule) => format!("{rule}, so `{before}` comes before `{after}`"),
            Reason::Needs(sentence) | Reason::Sequence(sentence) => sentence
                .replace("{before}", &format!("`{before}`"))
                .replace("{after}", &format!("`{after}`")),
        }
    }
}

/// An ordering a kind implies for its resources, so that specs need not spell out what a
/// careful operator would write anyway. Each kind lists its own in its file under `kinds/`.
#[derive(Debug, Clone)]
pub enum Implied {
    /// Every resource of the kind comes after every resource of another kind, for the reason
    /// given (apt sources before packages, packages before what configures them).
    AfterEvery(Kind, Reason),
    /// After the resource of `kind` that the value of `field` names (a file after its `owner`).
    /// `why` is the sentence that explains the edge (see [`Reason::Needs`]), here and below.
    AfterNamedBy {
        field: &'static str,
        kind: Kind,
        why: &'static str,
    },
    /// After the resource of the same kind whose `field`, a path, is the nearest above this
    /// one's (a mount after the mount it is nested under).
    AfterEnclosing {
        field: &'static str,
        why: &'static str,
    },
    /// After every resource of `kind` whose name, a path, the text of `field` names (a unit
    /// after the files its content refers to).
    AfterPathsIn {
        field: &'static str,
        kind: Kind,
        why: &'static str,
    },
    /// The resources of the kind one after another, in name order (scripts); an ordering
    /// only (see [`Reason::Sequence`]).
    InNameOrder { why: &'static str },
}

/// The apply order of one model's resources and, per resource, what it waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceOrder {
    /// `KIND:NAME` keys in apply order.
    pub keys: Vec<String>,
    position: HashMap<String, usize>,
    /// By position: the positions of the resources this one comes after, ascending, each with
    /// whether it is a dependency (`true`: skipped when that one did not apply) or an ordering
    /// only (see [`Reason::is_dependency`]).
    deps: Vec<Vec<(usize, bool)>>,
}

/// What one resource waits for in a bundle: its dependencies and its ordering-only edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waits {
    pub needs: Vec<String>,
    pub order_only: Vec<String>,
}

impl ResourceOrder {
    /// Everything the order says, for a digest of what a bundle is rendered from.
    pub fn describe(&self, out: &mut dyn std::fmt::Write) -> std::fmt::Result {
        write!(out, "{:?} {:?}", self.keys, self.deps)
    }

    /// Where a key is applied, if the model has it.
    pub fn position(&self, key: &str) -> Option<usize> {
        self.position.get(key).copied()
    }

    /// The keys a resource comes after directly, in apply order, dependencies and orderings.
    pub fn after(&self, key: &str) -> Vec<&str> {
        match self.position(key) {
            Some(p) => self.deps[p]
                .iter()
                .map(|&(d, _)| self.keys[d].as_str())
                .collect(),
            None => Vec::new(),
        }
    }

    /// The keys a resource depends on directly (a failure there skips it), in apply order.
    pub fn needs(&self, key: &str) -> Vec<&str> {
        match self.position(key) {
            Some(p) => self.deps[p]
                .iter()
                .filter(|&&(_, dependency)| dependency)
                .map(|&(d, _)| self.keys[d].as_str())
                .collect(),
            None => Vec::new(),
        }
    }

    /// What `key` waits for among the keys `present` says exist, looking through absent ones
    /// (a setting that renders no resource) to what they wait for, so that no ordering is lost
    /// when a node of the graph has no resource in the bundle. A resource reached through an
    /// ordering edge is an ordering only.
    pub fn after_present(&self, key: &str, present: impl Fn(&str) -> bool) -> Waits {
        let Some(start) = self.position(key) else {
            return Waits::default();
        };
        // Position → dependency; a dependency path wins over an ordering path.
        let mut found: HashMap<usize, bool> = HashMap::new();
        let mut seen: HashMap<usize, bool> = HashMap::new();
        let mut stack: Vec<(usize, bool)> = self.deps[start].clone();
        while let Some((p, dependency)) = stack.pop() {
            match seen.get(&p) {
                Some(&was) if was || !dependency => continue,
                _ => {}
            }
            seen.insert(p, dependency);
            if present(&self.keys[p]) {
                let entry = found.entry(p).or_insert(dependency);
                *entry |= dependency;
            } else {
                stack.extend(self.deps[p].iter().map(|&(d, dep)| (d, dep && dependency)));
            }
        }
        let mut found: Vec<(usize, bool)> = found.into_iter().collect();
        found.sort_unstable();
        let mut waits = Waits::default();
        for (p, dependency) in found {
            if dependency {
                waits.needs.push(self.keys[p].clone());
            } else {
                waits.order_only.push(self.keys[p].clone());
            }
        }
        waits
    }
}

struct Node {
    key: String,
    kind: RefKind,
    name: String,
    span: Span,
}

/// Orders every distinct model of a resolution once. Returns one order per host, by index into
/// `hosts`; `None` for hosts whose model has a diagnostic (reported once per span, not per host).
/// `rejected`: resources whose declaration had an error (already reported); an `after` naming
/// one waits for nothing and is not reported again.
pub fn order_hosts(
    hosts: &[ResolvedHost],
    rejected: &std::collections::BTreeSet<(crate::spec::Kind, String)>,
    sources: &Sources,
    diags: &mut Diagnostics,
) -> Vec<Option<Arc<ResourceOrder>>> {
    // Looked up once per host (a million): foldhash rather than SipHash.
    let mut by_model: foldhash::HashMap<crate::resolve::ModelId, Option<Arc<ResourceOrder>>> =
        Default::default();
    let mut reported = HashSet::new();
    // What some host has: an `after` naming one of these is not a typo on a host that lacks
    // it (an override removed it there, or only other hosts get it); there is nothing to wait for.
    let mut declared: HashSet<(RefKind, String)> = rejected
        .iter()
        .map(|(kind, name)| (RefKind::Resource(*kind), name.clone()))
        .collect();
    let mut seen: foldhash::HashSet<crate::resolve::ModelId> = Default::default();
    let mut distinct: HashMap<u64, Vec<Arc<ResourceOrder>>> = HashMap::new();
    for host in hosts {
        if seen.insert(host.model_id) {
            declared.extend(
                host.model
                    .sysctl
                    .keys()
                    .map(|k| (RefKind::Sysctl, k.clone())),
            );
            declared.extend(
                host.model
                    .resources
                    .iter()
                    .map(|r| (RefKind::Resource(r.kind), r.name.clone())),
            );
        }
    }
    hosts
        .iter()
        .map(|host| {
            by_model
                .entry(host.model_id)
                .or_insert_with(|| {
                    let mut local = Diagnostics::new();
                    let order = order_with(
                        &host.model,
                        &host.name,
                        Some(sources),
                        Some(&declared),
                        &mut local,
                    );
                    for d in local.into_boxed() {
                        let at = d
                            .labels()
                            .and_then(|mut l| l.next())
                            .map(|l| (l.offset(), l.len()));
                        let key = (d.code().map(|c| c.to_string()), d.file(), at);
                        if reported.insert(key) {
                            diags.push_boxed(d);
                        }
                    }
                    // Models that differ only in what their resources say (hosts with an
                    // override each) have the same order: it is kept once.
                    let order = order?;
                    let mut hasher = std::collections::hash_map::DefaultHasher::new();
                    std::hash::Hash::hash(&(&order.keys, &order.deps), &mut hasher);
                    let same = distinct
                        .entry(std::hash::Hasher::finish(&hasher))
                        .or_default();
                    match same.iter().find(|known| ***known == order) {
                        Some(known) => Some(known.clone()),
                        None => {
                            let order = Arc::new(order);
                            same.push(order.clone());
                            Some(order)
                        }
                    }
                })
                .clone()
        })
        .collect()
}

/// Builds and sorts the graph of one model; `host` names a host that has it, for messages.
/// `sources`, when given, lets a cycle report name the file and line of `after` edges that its
/// labels cannot show (those in another file than the first).
pub fn order(
    model: &Model,
    host: &str,
    sources: Option<&Sources>,
    diags: &mut Diagnostics,
) -> Option<ResourceOrder> {
    order_with(model, host, sources, None, diags)
}

/// `order`, where an `after` naming something in `elsewhere` (declared for other hosts) but
/// missing here is satisfied rather than an error.
fn order_with(
    model: &Model,
    host: &str,
    sources: Option<&Sources>,
    elsewhere: Option<&HashSet<(RefKind, String)>>,
    diags: &mut Diagnostics,
) -> Option<ResourceOrder> {
    let nodes = Nodes::of(model);
    let mut edges = Edges::new(nodes.nodes.len());
    // Explicit edges first, so that a cycle report shows the user's own `after` lines.
    let ok = add_explicit(model, &nodes, &mut edges, host, elsewhere, diags);
    add_implied(model, &nodes, &mut edges);
    if !ok {
        return None;
    }
    let Some(sorted) = topological(&edges.graph) else {
        report_cycles(&edges.graph, &nodes.nodes, sources, diags);
        return None;
    };
    Some(into_order(&edges.graph, &nodes.nodes, &sorted))
}

/// A model's resources and sysctls as nodes of its graph.
struct Nodes {
    /// In tie-break order: sysctl keys (by path), then resources by kind, then name.
    nodes: Vec<Node>,
    /// The model's resources (indexes into `model.resources`) by kind, then name.
    resources: Vec<usize>,
    /// Model index → node index.
    node_of: Vec<usize>,
    /// A reference's kind and name → node index.
    lookup: HashMap<(RefKind, String), usize>,
}

impl Nodes {
    fn of(model: &Model) -> Nodes {
        // Nodes in tie-break order: sysctl keys (by path), then resources by kind, then name.
        let mut nodes: Vec<Node> = model
            .sysctl
            .values()
            .map(|s| Node {
                key: format!("sysctl:{}", s.key),
                kind: RefKind::Sysctl,
                name: s.key.clone(),
                span: s.origin.span,
            })
            .collect();
        let first_resource = nodes.len();
        let mut resources: Vec<usize> = (0..model.resources.len()).collect();
        resources.sort_by(|&a, &b| {
            let (a, b) = (&model.resources[a], &model.resources[b]);
            (a.kind, &a.name).cmp(&(b.kind, &b.name))
        });
        for &i in &resources {
            let r = &model.resources[i];
            nodes.push(Node {
                key: r.key(),
                kind: RefKind::Resource(r.kind),
                name: r.name.clone(),
                span: r.origin.span,
            });
        }
        // Model index → node index.
        let mut node_of = vec![0; model.resources.len()];
        for (n, &i) in resources.iter().enumerate() {
            node_of[i] = first_resource + n;
        }

        let mut lookup: HashMap<(RefKind, String), usize> = HashMap::new();
        for (n, node) in nodes.iter().enumerate() {
            let name = match node.kind {
                RefKind::Sysctl => validate::sysctl_path(&node.name),
                RefKind::Resource(_) => node.name.clone(),
            };
            lookup.insert((node.kind, name), n);
        }

        Nodes {
            nodes,
            resources,
            node_of,
            lookup,
        }
    }

    /// The model's resources of `kind`, by name.
    fn of_kind(&self, model: &Model, kind: Kind) -> Vec<usize> {
        self.resources
            .iter()
            .filter(|&&i| model.resources[i].kind == kind)
            .copied()
            .collect()
    }
}

/// The graph under construction: one edge per pair; a dependency replaces an ordering found
/// for the same pair.
struct Edges {
    graph: DiGraph<(), Reason>,
    index: HashMap<(usize, usize), petgraph::graph::EdgeIndex>,
}

impl Edges {
    fn new(nodes: usize) -> Edges {
        let mut graph: DiGraph<(), Reason> = DiGraph::with_capacity(nodes, nodes);
        for _ in 0..nodes {
            graph.add_node(());
        }
        Edges {
            graph,
            index: HashMap::new(),
        }
    }

    fn add(&mut self, before: usize, after: usize, why: Reason) {
        match self.index.get(&(before, after)) {
            Some(&e) => {
                if why.is_dependency() && !self.graph[e].is_dependency() {
                    self.graph[e] = why;
                }
            }
            None => {
                let e = self
                    .graph
                    .add_edge(NodeIndex::new(before), NodeIndex::new(after), why);
                self.index.insert((before, after), e);
            }
        }
    }
}

/// The edges of the spec's `after` lines; false when one names nothing (reported).
fn add_explicit(
    model: &Model,
    nodes: &Nodes,
    edges: &mut Edges,
    host: &str,
    elsewhere: Option<&HashSet<(RefKind, String)>>,
    diags: &mut Diagnostics,
) -> bool {
    let Nodes {
        nodes,
        node_of,
        lookup,
        ..
    } = nodes;
    let mut ok = true;
    for (i, r) in model.resources.iter().enumerate() {
        let refs = r.list("after");
        if refs.is_empty() {
            continue;
        }
        let span = r.span_of("after");
        for reference in refs {
            // `lower` already rejected malformed references.
            let Ok((kind, name)) = parse_ref(reference) else {
                continue;
            };
            let name = match kind {
                RefKind::Sysctl => validate::sysctl_path(name),
                RefKind::Resource(_) => name.to_string(),
            };
            match lookup.get(&(kind, name.clone())) {
                Some(&before) => edges.add(before, node_of[i], Reason::After(span)),
                None if elsewhere.is_some_and(|e| e.contains(&(kind, name.clone()))) => {}
                None => {
                    ok = false;
                    diags.push(GraphError::UnknownAfter {
                        reference: reference.clone(),
                        host: host.to_string(),
                        span: span.source_span(),
                        help: unknown_help(kind, &name, nodes, host),
                        file: span.file,
                    });
                }
            }
        }
    }

    ok
}

/// The orderings each kind implies (see `Implied`), kind by kind.
fn add_implied(model: &Model, nodes: &Nodes, edges: &mut Edges) {
    let node_of = &nodes.node_of;
    let of_kind = |kind: Kind| nodes.of_kind(model, kind);
    for &kind in Kind::ALL {
        let implied = kind.implied_order();
        if implied.is_empty() {
            continue;
        }
        let these = of_kind(kind);
        if these.is_empty() {
            continue;
        }
        for rule in implied {
            match rule {
                Implied::AfterEvery(before_kind, why) => {
                    for b in of_kind(*before_kind) {
                        for &r in &these {
                            edges.add(node_of[b], node_of[r], why.clone());
                        }
                    }
                }
                Implied::AfterNamedBy {
                    field,
                    kind: named,
                    why,
                } => {
                    let by_name: HashMap<&str, usize> = of_kind(*named)
                        .into_iter()
                        .map(|u| (model.resources[u].name.as_str(), u))
                        .collect();
                    for &r in &these {
                        if let Some(&u) = model.resources[r].str(field).and_then(|o| by_name.get(o))
                        {
                            edges.add(node_of[u], node_of[r], Reason::Needs(why));
                        }
                    }
                }
                Implied::AfterEnclosing { field, why } => {
                    // The nearest resource of the kind whose path is above this one's.
                    let by_path: HashMap<String, usize> = these
                        .iter()
                        .filter_map(|&i| {
                            model.resources[i]
                                .str(field)
                                .map(|t| (normalize_path(t), i))
                        })
                        .collect();
                    for &i in &these {
                        let Some(target) = model.resources[i].str(field) else {
                            continue;
                        };
                        let mut path = normalize_path(target);
                        while let Some(parent) = parent_path(&path) {
                            if let Some(&above) = by_path.get(&parent) {
                                edges.add(node_of[above], node_of[i], Reason::Needs(why));
                                break;
                            }
                            path = parent;
                        }
                    }
                }
                Implied::AfterPathsIn {
                    field,
                    kind: named,
                    why,
                } => {
                    let named = of_kind(*named);
                    for &r in &these {
                        let Some(text) = model.resources[r].str(field) else {
                            continue;
                        };
                        for &f in &named {
                            if names_path(text, &model.resources[f].name) {
                                edges.add(node_of[f], node_of[r], Reason::Needs(why));
                            }
                        }
                    }
                }
                Implied::InNameOrder { why } => {
                    // `these` is sorted by name already (resources are sorted by kind, then name).
                    for pair in these.windows(2) {
                        edges.add(node_of[pair[0]], node_of[pair[1]], Reason::Sequence(why));
                    }
                }
            }
        }
    }
}

/// Kahn's algorithm; among ready nodes the smallest index (kind, then name) goes first.
/// `None` when the graph has a cycle.
fn topological(graph: &DiGraph<(), Reason>) -> Option<Vec<usize>> {
    let n = graph.node_count();
    let mut indegree = vec![0usize; n];
    for e in graph.edge_references() {
        indegree[e.target().index()] += 1;
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut sorted = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        sorted.push(i);
        for next in graph.neighbors(NodeIndex::new(i)) {
            let j = next.index();
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    (sorted.len() == n).then_some(sorted)
}

/// The order of the sorted graph: each resource's key by position, and what it waits for.
fn into_order(graph: &DiGraph<(), Reason>, nodes: &[Node], sorted: &[usize]) -> ResourceOrder {
    let n = nodes.len();
    let mut position_of = vec![0; n];
    for (p, &i) in sorted.iter().enumerate() {
        position_of[i] = p;
    }
    let mut deps: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
    for e in graph.edge_references() {
        deps[position_of[e.target().index()]]
            .push((position_of[e.source().index()], e.weight().is_dependency()));
    }
    for d in &mut deps {
        d.sort_unstable();
    }
    let keys: Vec<String> = sorted.iter().map(|&i| nodes[i].key.clone()).collect();
    let position = keys
        .iter()
        .enumerate()
        .map(|(p, k)| (k.clone(), p))
        .collect();
    ResourceOrder {
        keys,
        position,
        deps,
    }
}

fn unknown_help(kind: RefKind, name: &str, nodes: &[Node], host: &str) -> String {
    let same_kind: Vec<&str> = nodes
        .iter()
        .filter(|n| n.kind == kind)
        .map(|n| n.name.as_str())
        .collect();
    let shown = match kind {
        RefKind::Sysctl => name.replace('/', "."),
        RefKind::Resource(_) => name.to_string(),
    };
    match validate::did_you_mean(&shown, same_kind.iter().copied()) {
        Some(s) => format!("did you mean `{}:{s}`?", kind.keyword()),
        None if same_kind.is_empty() => format!(
            "`{host}` has no `{}` resource; declare it, or drop the `after`",
            kind.keyword()
        ),
        None => format!(
            "`{}` resources of `{host}`: {}",
            kind.keyword(),
            same_kind.join(", ")
        ),
    }
}

/// `/srv/data/` and `/srv//data` are the same mount point as `/srv/data`.
fn normalize_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    format!("/{}", parts.join("/"))
}

fn parent_path(path: &str) -> Option<String> {
    if path == "/" {
        return None;
    }
    let cut = path.rfind('/')?;
    Some(if cut == 0 {
        "/".to_string()
    } else {
        path[..cut].to_string()
    })
}

/// Whether `text` mentions `path` as a whole path (not as the prefix of a longer one).
fn names_path(text: &str, path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    text.match_indices(path).any(|(at, _)| {
        let next = text[at + path.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
    })
}

#[cfg(test)]
mod tests;

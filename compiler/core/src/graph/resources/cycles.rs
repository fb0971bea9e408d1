//! A cycle in the resource graph, reported as the shortest path a reader can follow: each
//! edge of it with why it is there, the `after` edges labelled where the spec wrote them.

use super::{GraphError, Node, Reason};
use crate::diagnostic::Diagnostics;
use crate::source::{Sources, Span};
use miette::LabeledSpan;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::{HashMap, HashSet, VecDeque};

/// One cycle per strongly connected component, as the shortest cycle through its first node.
pub(super) fn report_cycles(
    graph: &DiGraph<(), Reason>,
    nodes: &[Node],
    sources: Option<&Sources>,
    diags: &mut Diagnostics,
) {
    let mut components = petgraph::algo::tarjan_scc(graph);
    for c in &mut components {
        c.sort();
    }
    components.sort();
    for component in components {
        let start = component[0];
        let cyclic = component.len() > 1 || graph.find_edge(start, start).is_some();
        if !cyclic {
            continue;
        }
        let members: HashSet<NodeIndex> = component.iter().copied().collect();
        let Some(cycle) = shortest_cycle(graph, start, &members) else {
            continue;
        };
        // `cycle` is a list of edges (before, after, reason) that returns to `start`.
        let mut path: Vec<&str> = cycle
            .iter()
            .map(|(b, _, _)| nodes[b.index()].key.as_str())
            .collect();
        path.push(nodes[start.index()].key.as_str());
        let path = path
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(" → ");
        let explicit: Vec<(Span, &str, &str)> = cycle
            .iter()
            .filter_map(|(b, a, r)| match r {
                Reason::After(span) => Some((
                    *span,
                    nodes[b.index()].key.as_str(),
                    nodes[a.index()].key.as_str(),
                )),
                _ => None,
            })
            .collect();
        let file = explicit
            .first()
            .map_or(nodes[start.index()].span.file, |(s, _, _)| s.file);
        let mut labels: Vec<LabeledSpan> = explicit
            .iter()
            .filter(|(s, _, _)| s.file == file)
            .map(|(s, b, a)| {
                LabeledSpan::new_with_span(Some(format!("`{a}` after `{b}`")), s.source_span())
            })
            .collect();
        if labels.is_empty() {
            let span = nodes[start.index()].span;
            labels.push(LabeledSpan::new_with_span(
                Some("in this cycle".into()),
                span.source_span(),
            ));
        }
        let words: Vec<String> = cycle
            .iter()
            .map(|(b, a, r)| r.explain(&nodes[b.index()].key, &nodes[a.index()].key, sources))
            .collect();
        diags.push(GraphError::Cycle {
            path,
            labels,
            help: format!(
                "{}; remove or change one of these `after` edges",
                words.join("; ")
            ),
            file,
        });
    }
}

type CycleEdge<'g> = (NodeIndex, NodeIndex, &'g Reason);

fn shortest_cycle<'g>(
    graph: &'g DiGraph<(), Reason>,
    start: NodeIndex,
    members: &HashSet<NodeIndex>,
) -> Option<Vec<CycleEdge<'g>>> {
    let mut parent: HashMap<NodeIndex, CycleEdge<'g>> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut seen = HashSet::from([start]);
    while let Some(u) = queue.pop_front() {
        let mut out: Vec<_> = graph.edges(u).collect();
        out.sort_by_key(|e| e.target());
        for e in out {
            let v = e.target();
            if !members.contains(&v) {
                continue;
            }
            if v == start {
                let mut cycle = vec![(u, v, e.weight())];
                let mut at = u;
                while at != start {
                    let step = parent.get(&at)?;
                    cycle.push(*step);
                    at = step.0;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if seen.insert(v) {
                parent.insert(v, (u, v, e.weight()));
                queue.push_back(v);
            }
        }
    }
    None
}

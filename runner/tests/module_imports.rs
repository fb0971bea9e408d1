//! bell-run's modules form a DAG: a module that two steps need (the shared context, the
//! refusal) lives in a module of its own, so no two modules import each other, directly or
//! around a cycle. A cycle is where a module boundary stops meaning anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `crate` a source text names, in `crate::x` paths and `use crate::{x, y}`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (at, m) in code.match_indices("crate::") {
            let rest = &code[at + m.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        found.insert(name.to_string());
                    }
                }
            } else {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if end > 0 {
                    found.insert(rest[..end].to_string());
                }
            }
        }
    }
    found
}

/// A cycle in the graph, as a path `a → b → … → a`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

fn graph_of(files: &[(&str, String)]) -> BTreeMap<String, BTreeSet<String>> {
    files
        .iter()
        .map(|(name, text)| {
            let mut deps = imports(text);
            deps.remove(*name);
            (name.to_string(), deps)
        })
        .collect()
}

#[test]
fn no_two_runner_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // A module's text is its file and every file under its directory (`cli.rs` and `cli/*.rs`):
    // a submodule's imports are its module's.
    fn read_all(path: &Path, into: &mut String) {
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .expect("read dir")
                .map(|e| e.expect("entry").path())
                .collect();
            entries.sort();
            for entry in entries {
                read_all(&entry, into);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push_str(&std::fs::read_to_string(path).expect("read"));
            into.push('\n');
        }
    }
    let mut modules: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("read src") {
        let path = entry.expect("entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        // `main.rs` declares the modules and calls the command line; it is the root.
        if name != "main" && (path.is_dir() || path.extension().is_some_and(|e| e == "rs")) {
            read_all(&path, modules.entry(name.to_string()).or_default());
        }
    }
    assert!(
        modules["cli"].contains("fn cmd_pull"),
        "cli/ is read with cli.rs"
    );
    let files: Vec<(&str, String)> = modules
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let graph = graph_of(&files);
    assert!(graph.contains_key("apply") && graph.contains_key("check"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("runner modules import each other: {}", cycle.join(" → "));
    }
}

#[test]
fn a_cycle_is_found() {
    let files = [
        (
            "apply",
            "use crate::check::mark;\nuse crate::{state, rootfs::Root};".to_string(),
        ),
        ("check", "use crate::apply::Ctx;".to_string()),
        ("state", "// crate::apply is only a comment".to_string()),
    ];
    let graph = graph_of(&files);
    assert_eq!(
        graph["apply"],
        ["check", "rootfs", "state"].map(String::from).into()
    );
    assert_eq!(
        find_cycle(&graph),
        Some(["apply", "check", "apply"].map(String::from).to_vec())
    );
    let acyclic = graph_of(&files[..1]);
    assert_eq!(find_cycle(&acyclic), None);
}

//! The compiler's folders are pipeline stages, and a stage uses only the stages before it and
//! the shared modules beside `lib.rs`. This test reads every source file and fails on a path
//! into a later stage, so that the tree keeps showing the pipeline as it grows.
//!
//! The pipeline is `bellc-core` (`compiler/core/src/`); what comes after a build is in crates
//! that depend on it (`bell-ops`, `bell-import`), which cargo keeps from being used by it. Within
//! `bell-ops` the same rule orders its two folders: the page reads the fleet, never back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `bellc-core`'s stages in pipeline order. Shared modules come first: they may use only each
/// other.
const ORDER: &[(&str, &[&str])] = &[
    // `spec_diagnostic!` is `diagnostic.rs`'s macro, exported at the crate root.
    (
        "shared",
        &[
            "diagnostic",
            "escape",
            "kdl_text",
            "source",
            "spec",
            "spec_diagnostic",
            "targets",
        ],
    ),
    ("front", &["front"]),
    ("resolve", &["resolve"]),
    ("graph", &["graph"]),
    ("render", &["render"]),
    // A kind file holds everything particular to its kind, so it uses the stages it plugs into
    // (front's value checks, render's builder); the stages reach a kind only through the
    // methods of `spec::Kind`, never by importing `kinds`.
    ("kinds", &["kinds"]),
    ("emit", &["emit"]),
    ("review", &["review"]),
    // The session that runs the pipeline into OUT (`bellc build`): every stage, in order.
    ("build", &["build"]),
];

/// `bell-ops`'s folders in order: the watch cache of the store (which the fleet's readers and
/// the gateway follow it with), the fleet, then the status page over fleet status (and
/// `bellc-core`'s review: diff and explain, as pages and JSON), then the gateway (which reads
/// OUT as the page does).
const OPS_ORDER: &[(&str, &[&str])] = &[
    ("watch", &["watch"]),
    ("fleet", &["fleet"]),
    ("serve", &["serve"]),
    ("gateway", &["gateway"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src")
}

fn ops_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ops/src")
}

/// The rank of a top-level module name (a file `x.rs` or a folder `x/` under `src/`).
fn rank(order: &[(&str, &[&str])], module: &str) -> Option<usize> {
    order.iter().position(|(_, names)| names.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The leading identifier of `text`.
fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !is_ident(c)).unwrap_or(text.len());
    &text[..end]
}

/// The top-level names of a group `{a, b::c, d::{e, f}}` that `text` begins with (after its
/// `{`), each with its offset in `text`.
fn group_names(text: &str) -> Vec<(usize, &str)> {
    let mut names = Vec::new();
    let (mut depth, mut item_start) = (0usize, Some(1usize));
    for (at, c) in text.char_indices().skip(1) {
        if let Some(start) = item_start {
            if c.is_whitespace() {
                item_start = Some(at + c.len_utf8());
                continue;
            }
            names.push((start, ident(&text[start..])));
            item_start = None;
        }
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = Some(at + 1),
            _ => {}
        }
    }
    names.into_iter().filter(|(_, n)| !n.is_empty()).collect()
}

/// The byte ranges of the bodies of the inline modules (`mod NAME { … }`) of `code`.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &code[at + 4..];
        let name = ident(rest.trim_start());
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        for (offset, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        ranges.push((open, open + offset));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    ranges
}

/// Every top-level module the code of a file names, with its line: `crate::NAME`, each name
/// of a group `crate::{a, b}` (also across lines), and `super::…::NAME` that climbs to the
/// crate root from a file `depth` modules deep (`a/b.rs` is 2, `a/mod.rs` 1). Comments are
/// skipped: a doc link may point anywhere.
fn crate_paths(text: &str, depth: usize) -> Vec<(usize, &str)> {
    let code = blank_comments(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    // Inline modules (`mod tests { … }`): a `super::` inside one climbs out of it first.
    let inline = inline_modules(&code);
    let depth_at = |at: usize| depth + inline.iter().filter(|(a, b)| *a < at && at < *b).count();
    let mut found = Vec::new();
    // Names are taken from `text`, at the offsets where `code` has them.
    let mut names_at = |at: usize| {
        let rest = &code[at..];
        let names = match rest.starts_with('{') {
            true => group_names(rest),
            false => vec![(0, ident(rest))],
        };
        for (offset, name) in names.into_iter().filter(|(_, n)| !n.is_empty()) {
            let from = at + offset;
            found.push((line_of(from), &text[from..from + name.len()]));
        }
    };
    let mut at = 0;
    while let Some(found_at) = code[at..].find(['c', 's']) {
        let start = at + found_at;
        at = start + 1;
        // A path begins here only where no identifier or `::` ends just before.
        let before = code[..start].chars().next_back();
        if before.is_some_and(is_ident) || code[..start].ends_with("::") {
            continue;
        }
        let rest = &code[start..];
        if let Some(path) = rest.strip_prefix("crate::") {
            names_at(code.len() - path.len());
        } else if rest.starts_with("super::") {
            let mut path = rest;
            let mut supers = 0;
            while let Some(after) = path.strip_prefix("super::") {
                supers += 1;
                path = after;
            }
            if supers == depth_at(start) {
                names_at(code.len() - path.len());
            }
        }
    }
    found
}

/// `text` with every comment blanked byte for byte, so that offsets still give lines.
fn blank_comments(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let cut = match line.trim_start().starts_with("//") {
            true => 0,
            false => line.find(" //").unwrap_or(line.len()),
        };
        code.push_str(&line[..cut]);
        // Blanked byte for byte: a comment's `→` keeps its three bytes.
        for c in line[cut..].chars() {
            match c {
                '\n' => code.push('\n'),
                c => code.extend(std::iter::repeat_n(' ', c.len_utf8())),
            }
        }
    }
    code
}

/// The violations in the source tree at `root`: `file:line: stage → later module`.
fn violations(root: &Path, order: &[(&str, &[&str])]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).expect("under src");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("utf-8 path");
        let top = top.strip_suffix(".rs").unwrap_or(top);
        // The crate root wires the stages together; the binary uses the library from outside.
        if top == "lib" || top == "cli" {
            continue;
        }
        let Some(own) = rank(order, top) else {
            found.push(format!(
                "{}: `{top}` is in no stage; add it to ORDER in this test",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("read source");
        let dirs = relative.components().count() - 1;
        let depth = match relative.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs") => dirs,
            _ => dirs + 1,
        };
        for (line, name) in crate_paths(&text, depth) {
            match rank(order, name) {
                Some(r) if r > own => found.push(format!(
                    "{}:{line}: {} uses `crate::{name}`, a later stage ({})",
                    relative.display(),
                    order[own].0,
                    order[r].0
                )),
                Some(_) => {}
                None => found.push(format!(
                    "{}:{line}: `crate::{name}` is in no stage",
                    relative.display(),
                )),
            }
        }
    }
    found
}

#[test]
fn no_stage_imports_a_later_stage() {
    let mut found = violations(&src(), ORDER);
    found.extend(violations(&ops_src(), OPS_ORDER));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn every_top_level_module_is_in_a_stage() {
    let mut unranked = Vec::new();
    for (src, order) in [(src(), ORDER), (ops_src(), OPS_ORDER)] {
        for entry in std::fs::read_dir(&src).expect("read src") {
            let path = entry.expect("entry").path();
            let name = path.file_stem().and_then(|s| s.to_str()).expect("name");
            if name != "lib" && rank(order, name).is_none() {
                unranked.push(format!("{}/{name}", src.display()));
            }
        }
    }
    assert!(unranked.is_empty(), "not in ORDER: {unranked:?}");
}

/// The check itself: a render module that reaches into `emit` is caught, one that uses
/// `resolve` is not.
#[test]
fn a_backward_import_is_caught() {
    let dir = tempfile::tempdir().expect("tempdir");
    let render = dir.path().join("render");
    std::fs::create_dir(&render).expect("mkdir");
    std::fs::write(
        render.join("mod.rs"),
        "use crate::resolve::Model;\n// see crate::emit for where it goes\nuse crate::emit::write;\n",
    )
    .expect("write");
    // A grouped import across lines, and a `super::` path that climbs to the crate root.
    std::fs::write(
        render.join("hosts.rs"),
        "use super::Thing;\nuse crate::{\n    resolve::Model,\n    emit::{write, Out},\n};\nfn f() { super::super::review::go(); super::render_it(); }\nmod tests {\n    use super::super::Thing;\n    use super::super::super::kinds::x;\n}\n",
    )
    .expect("write");
    let found = violations(dir.path(), ORDER);
    assert_eq!(
        found,
        [
            "render/hosts.rs:4: render uses `crate::emit`, a later stage (emit)",
            "render/hosts.rs:6: render uses `crate::review`, a later stage (review)",
            "render/hosts.rs:9: render uses `crate::kinds`, a later stage (kinds)",
            "render/mod.rs:3: render uses `crate::emit`, a later stage (emit)",
        ]
    );
}

/// The files of one crate (under `src`, its root file `root`), each with its module path:
/// `a/b.rs` and `a/b/mod.rs` are `["a", "b"]`, the root file `[]`.
fn crate_files(src: &Path, root: &str) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = path.pop().expect("a file name");
        match last.as_str() {
            name if name == root && path.is_empty() => {}
            "mod.rs" => {}
            name => path.push(name.trim_end_matches(".rs").to_string()),
        }
        modules.insert(path, relative.to_path_buf());
    }
    modules
}

/// Every path that begins in `code` (comments blanked), as its segments (`crate`, `super`,
/// `self` and identifiers), with the offset where it begins; a group `a::{b, c::d}` is
/// spread into `a::b` and `a::c::d`.
fn paths_in(code: &str) -> Vec<(usize, Vec<&str>)> {
    fn chains<'c>(text: &'c str, prefix: &[&'c str], out: &mut Vec<Vec<&'c str>>) {
        let mut segments = prefix.to_vec();
        let mut rest = text;
        loop {
            let name = ident(rest);
            if name.is_empty() {
                if rest.starts_with('{') {
                    for (offset, _) in group_names(rest) {
                        chains(&rest[offset..], &segments, out);
                    }
                    return;
                }
                break;
            }
            segments.push(name);
            rest = &rest[name.len()..];
            match rest.trim_start().strip_prefix("::") {
                Some(after) => rest = after.trim_start(),
                None => break,
            }
        }
        out.push(segments);
    }
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let name = ident(rest);
        let starts = !name.is_empty()
            && !code[..at].chars().next_back().is_some_and(is_ident)
            && !code[..at].trim_end().ends_with("::")
            && rest[name.len()..].starts_with("::");
        if starts {
            let mut spread = Vec::new();
            chains(rest, &[], &mut spread);
            found.extend(spread.into_iter().map(|p| (at, p)));
        }
        at += name
            .len()
            .max(rest.chars().next().map_or(1, char::len_utf8));
    }
    found
}

/// Which files of a crate use which: an edge for every path that reaches into another file's
/// module (its items, or a module below it), through `crate::`, `super::`, `self::` or a
/// child module's name; none to the file's own parent modules.
fn import_graph(
    modules: &BTreeMap<Vec<String>, PathBuf>,
    src: &Path,
) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut graph = BTreeMap::new();
    for (module, file) in modules {
        let text = std::fs::read_to_string(src.join(file)).expect("read source");
        let code = blank_comments(&text);
        let inline = inline_modules(&code);
        let mut uses = BTreeSet::new();
        for (at, segments) in paths_in(&code) {
            let inside = inline.iter().filter(|(a, b)| *a < at && at < *b).count();
            let (mut base, rest): (Vec<String>, &[&str]) = match segments[0] {
                "crate" => (Vec::new(), &segments[1..]),
                "self" => (module.clone(), &segments[1..]),
                "super" => {
                    let supers = segments.iter().take_while(|s| **s == "super").count();
                    // Out of the inline modules first, then out of this file's module.
                    let up = supers.saturating_sub(inside);
                    let Some(keep) = module.len().checked_sub(up) else {
                        continue;
                    };
                    (module[..keep].to_vec(), &segments[supers..])
                }
                first => {
                    let mut child = module.clone();
                    child.push(first.to_string());
                    if !modules.contains_key(&child) {
                        continue;
                    }
                    (module.clone(), &segments[..])
                }
            };
            for segment in rest {
                base.push(segment.to_string());
                if !modules.contains_key(&base) {
                    base.pop();
                    break;
                }
            }
            // A module's own parents are where it is declared: what it takes from them (its
            // `use super::*`) is nesting, not an import that can close a circle.
            if module.starts_with(&base) {
                continue;
            }
            if let Some(target) = modules.get(&base) {
                uses.insert(target.clone());
            }
        }
        graph.insert(file.clone(), uses);
    }
    graph
}

/// The import circles of a graph: each set of files that reach each other (Tarjan's strongly
/// connected components of more than one file), as `a ↔ b ↔ c`.
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    struct Walk<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<String>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, file: &'g PathBuf) {
            let n = self.index.len();
            self.index.insert(file, n);
            self.low.insert(file, n);
            self.stack.push(file);
            self.on_stack.insert(file);
            for next in self.graph.get(file).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[file].min(self.low[next]);
                    self.low.insert(file, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[file].min(self.index[next]);
                    self.low.insert(file, low);
                }
            }
            if self.low[file] == self.index[file] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.display().to_string());
                    if top == file {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component.join(" ↔ "));
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for file in graph.keys() {
        if !walk.index.contains_key(file) {
            walk.visit(file);
        }
    }
    walk.found.sort();
    walk.found
}

/// Every crate of the workspace: its name, its `src` and its root file.
fn workspace_crates() -> Vec<(String, PathBuf, &'static str)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates = vec![
        ("bellc-core".to_string(), src(), "lib.rs"),
        ("bell-ops".to_string(), ops_src(), "lib.rs"),
        (
            "bell-import".to_string(),
            repo.join("compiler/import/src"),
            "lib.rs",
        ),
        (
            "bellc".to_string(),
            repo.join("compiler/src/cli"),
            "main.rs",
        ),
        ("bell-run".to_string(), repo.join("runner/src"), "main.rs"),
        (
            "bell-fleetgen".to_string(),
            repo.join("compiler/fleetgen/src"),
            "lib.rs",
        ),
        (
            "bell-testkit".to_string(),
            repo.join("testkit/src"),
            "lib.rs",
        ),
    ];
    for entry in std::fs::read_dir(repo.join("crates")).expect("read crates/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        crates.push((name, path.join("src"), "lib.rs"));
    }
    crates.sort();
    crates
}

/// Files that import each other, directly or around a circle, are one module in two files:
/// neither can be read, tested or moved without the other. What both need goes into a file
/// of its own (or their parent).
#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let mut found = Vec::new();
    for (name, src, root) in workspace_crates() {
        let graph = import_graph(&crate_files(&src, root), &src);
        found.extend(circles(&graph).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(
        found.is_empty(),
        "files that import each other:\n{found:#?}"
    );
}

/// The check itself: a circle around three files is found, through a grouped `crate::`
/// import, a `super::` path and a child's name; a child's `use super::*` is not an import.
#[test]
fn an_import_circle_is_caught() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub struct Root;\n");
    write(
        "a/mod.rs",
        "mod inner;\nuse inner::Thing;\n// crate::c::Never, in a comment\n",
    );
    write(
        "a/inner.rs",
        "use super::*;\nuse crate::{Root, b::{B, Other}};\npub struct Thing;\n",
    );
    write("b.rs", "fn f() { super::c::go(); }\npub struct B;\n");
    write("c.rs", "use crate::a::inner::Thing;\npub fn go() {}\n");
    let graph = import_graph(&crate_files(src, "lib.rs"), src);
    assert_eq!(circles(&graph), ["a/inner.rs ↔ b.rs ↔ c.rs"]);
    // Without the `super::c` path there is none (and `a/mod.rs` → `a/inner.rs` is one way).
    write("b.rs", "pub struct B;\n");
    let graph = import_graph(&crate_files(src, "lib.rs"), src);
    assert!(circles(&graph).is_empty(), "{:?}", circles(&graph));
}

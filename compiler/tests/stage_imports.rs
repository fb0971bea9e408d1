//! The compiler's folders are pipeline stages, and a stage uses only the stages before it and
//! the shared modules beside `lib.rs`. This test reads every source file and fails on a path
//! into a later stage, so that the tree keeps showing the pipeline as it grows.

use std::path::{Path, PathBuf};

/// The stages in pipeline order. Shared modules come first: they may use only each other.
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
    ("fleet", &["fleet"]),
    // Another tool's configuration written as a spec; `--verify` lowers and resolves it.
    ("import", &["import"]),
    // The status page: fleet status and review's diff and explain, as pages and JSON.
    ("serve", &["serve"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The rank of a top-level module name (a file `x.rs` or a folder `x/` under `src/`).
fn rank(module: &str) -> Option<usize> {
    ORDER.iter().position(|(_, names)| names.contains(&module))
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
    // The code with every comment blanked, so that offsets still give lines.
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

/// The violations in the source tree at `root`: `file:line: stage → later module`.
fn violations(root: &Path) -> Vec<String> {
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
        let Some(own) = rank(top) else {
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
            match rank(name) {
                Some(r) if r > own => found.push(format!(
                    "{}:{line}: {} uses `crate::{name}`, a later stage ({})",
                    relative.display(),
                    ORDER[own].0,
                    ORDER[r].0
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
    let found = violations(&src());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn every_top_level_module_is_in_a_stage() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(src()).expect("read src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("name");
        if name != "lib" && name != "cli" {
            names.push(name.to_string());
        }
    }
    names.sort();
    let unranked: Vec<_> = names.iter().filter(|n| rank(n).is_none()).collect();
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
        "use super::Thing;\nuse crate::{\n    resolve::Model,\n    emit::{write, Out},\n};\nfn f() { super::super::fleet::go(); super::render_it(); }\nmod tests {\n    use super::super::Thing;\n    use super::super::super::serve::x;\n}\n",
    )
    .expect("write");
    let found = violations(dir.path());
    assert_eq!(
        found,
        [
            "render/hosts.rs:4: render uses `crate::emit`, a later stage (emit)",
            "render/hosts.rs:6: render uses `crate::fleet`, a later stage (fleet)",
            "render/hosts.rs:9: render uses `crate::serve`, a later stage (serve)",
            "render/mod.rs:3: render uses `crate::emit`, a later stage (emit)",
        ]
    );
}

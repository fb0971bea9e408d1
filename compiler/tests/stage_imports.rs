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

/// Every `crate::NAME` a line of code names (comments are skipped: a doc link may point
/// anywhere).
fn crate_paths(line: &str) -> Vec<&str> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let code = code.split(" //").next().unwrap_or(code);
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // `bellc::crate::` cannot occur; reject identifiers that merely end in "crate".
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, m)| {
            let rest = &code[at + m.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| !name.is_empty())
        .collect()
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
        for (n, line) in text.lines().enumerate() {
            for name in crate_paths(line) {
                match rank(name) {
                    Some(r) if r > own => found.push(format!(
                        "{}:{}: {} uses `crate::{name}`, a later stage ({})",
                        relative.display(),
                        n + 1,
                        ORDER[own].0,
                        ORDER[r].0
                    )),
                    Some(_) => {}
                    None => found.push(format!(
                        "{}:{}: `crate::{name}` is in no stage",
                        relative.display(),
                        n + 1
                    )),
                }
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
    let found = violations(dir.path());
    assert_eq!(
        found,
        ["render/mod.rs:3: render uses `crate::emit`, a later stage (emit)"]
    );
}

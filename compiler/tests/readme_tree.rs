//! The architecture chapter's tree (`docs/architecture.md`) is how a newcomer finds their way:
//! it must name exactly the stage folders of `bellc-core` (`compiler/core/src/`) and
//! `bell-ops` (`compiler/ops/src/`), and the shared modules beside core's `lib.rs`.

use std::collections::BTreeSet;
use std::path::Path;

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    std::fs::read_to_string(path).expect("docs/architecture.md")
}

fn readme_tree() -> String {
    let text = readme();
    let arch = text
        .split("## Architecture")
        .nth(1)
        .expect("an Architecture section");
    arch.split("```text")
        .map(|block| block.split("```").next().unwrap_or(""))
        .find(|block| block.contains("\ncompiler/"))
        .expect("a tree of compiler/ in the Architecture section")
        .to_string()
}

#[test]
fn readme_tree_names_every_stage_folder() {
    let tree = readme_tree();
    // `src/X/` lines under `  core/` or `  ops/` (the binary's `src/cli/` is under neither).
    let mut listed: BTreeSet<String> = BTreeSet::new();
    let mut under = "";
    for line in tree.lines() {
        if let Some(name) = line
            .strip_prefix("  ")
            .and_then(|l| l.split_whitespace().next())
        {
            if !line.starts_with("   ") {
                under = name;
            }
        }
        let entry = line.trim_start().strip_prefix("src/");
        let folder = entry
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|entry| entry.strip_suffix('/'));
        if let (Some(folder), "core/" | "ops/") = (folder, under) {
            listed.insert(format!("{under}{folder}"));
        }
    }
    let compiler = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut folders = BTreeSet::new();
    for krate in ["core", "ops"] {
        for entry in std::fs::read_dir(compiler.join(krate).join("src")).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                let name = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                folders.insert(format!("{krate}/{name}"));
            }
        }
    }
    assert_eq!(
        listed, folders,
        "the architecture chapter's tree and compiler/{{core,ops}}/src/ differ"
    );
    let src = compiler.join("core/src");

    let shared_line = tree
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("src/{"))
        .expect("a `src/{...}.rs` line for the shared modules");
    let listed: BTreeSet<String> = shared_line
        .split('}')
        .next()
        .unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .filter(|name| name != "lib")
        .collect();
    assert_eq!(
        listed, files,
        "the architecture chapter's shared modules and compiler/core/src/*.rs differ"
    );
}

/// The rows of the markdown table that follows `heading` in the language reference
/// (`docs/language.md`), first cell only.
fn first_cells(heading: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/language.md");
    let text = std::fs::read_to_string(path).expect("docs/language.md");
    let section = text
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{heading}` in docs/language.md"));
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|l| l.split('|').nth(1))
        .map(|cell| cell.trim().to_string())
        .collect()
}

/// A new kind is documented where users look: the language reference and what it puts on a
/// host.
#[test]
fn every_kind_is_in_the_language_references_tables() {
    let language = first_cells("### Resources");
    let on_host = first_cells("### What each kind puts on a host");
    for kind in bellc_core::spec::Kind::ALL {
        let keyword = kind.keyword();
        assert!(
            language.iter().any(|c| c == &format!("`{keyword}`")),
            "the language reference's Resources table has no row for `{keyword}`"
        );
        assert!(
            on_host
                .iter()
                .any(|c| c.split(',').any(|k| k.trim() == keyword)),
            "the language reference's \"What each kind puts on a host\" table has no row for `{keyword}`"
        );
    }
}

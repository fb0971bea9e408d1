//! The architecture chapter's tree (`docs/architecture.md`) is how a newcomer finds their way:
//! it must name exactly the folders of `compiler/src/` and the shared modules beside `lib.rs`.

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
    let listed: BTreeSet<String> = tree
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("src/"))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter_map(|entry| entry.strip_suffix('/'))
        .map(str::to_string)
        .collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folders: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        listed, folders,
        "the architecture chapter's tree and compiler/src/ differ"
    );

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
        "the architecture chapter's shared modules and compiler/src/*.rs differ"
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
    for kind in bellc::spec::Kind::ALL {
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

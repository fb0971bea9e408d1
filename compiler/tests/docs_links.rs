//! The guide holds together: every link of the README, `runner/README.md` and the chapters of
//! `docs/` reaches a file that exists and, with `#anchor`, a heading of it (as GitHub makes
//! anchors of headings); every chapter is in the README's map; and the README stays short (what
//! the project is, the two commands, a tour and the map), the rest being in the chapters.

use crate::common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The Markdown files of the guide, relative to the repository.
fn documents() -> Vec<PathBuf> {
    let root = common::repo_root();
    let mut files = vec![
        PathBuf::from("README.md"),
        PathBuf::from("runner/README.md"),
    ];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(&root).expect("under the root").to_path_buf())
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as
/// `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|l| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            (1..=6)
                .contains(&hashes)
                .then(|| l[hashes..].strip_prefix(' '))
                .flatten()
        })
        .map(slug)
        .collect()
}

/// Every `](target)` of the prose, inline code taken out.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    found
}

#[test]
fn every_link_of_the_guide_reaches_its_file_and_heading() {
    let root = common::repo_root();
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(root.join(&doc)).expect("a document");
        let dir = doc.parent().unwrap_or(Path::new(""));
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (file, anchor) = match link.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                doc.clone()
            } else {
                dir.join(file)
            };
            let path = root.join(&target);
            if !path.exists() {
                broken.push(format!(
                    "{}: `{link}`: no {}",
                    doc.display(),
                    target.display()
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!(
                        "{}: `{link}`: {} has no heading `#{anchor}`",
                        doc.display(),
                        target.display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_short_and_maps_every_chapter() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 400,
        "the README has {lines} lines: what the project is, the two commands, a tour and the \
         map of docs/; the rest goes into a chapter"
    );
    let linked: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|l| l.split('#').next().unwrap_or("").to_string())
        .collect();
    for doc in documents() {
        let name = doc.display().to_string();
        if name.starts_with("docs/") {
            assert!(linked.contains(&name), "the README's map lacks {name}");
        }
    }
}

#[test]
fn the_link_reader_finds_what_it_must() {
    let text = "# One `two`: three\n```sh\n# not a heading\n[x](#nope)\n```\nsee [a](b.md#c) and `[d](e)`\n";
    assert_eq!(links(text), ["b.md#c"]);
    assert_eq!(
        anchors(text).into_iter().collect::<Vec<_>>(),
        ["one-two-three"]
    );
    assert_eq!(
        slug("What a change does to values: `bellc diff --values`"),
        "what-a-change-does-to-values-bellc-diff---values"
    );
}

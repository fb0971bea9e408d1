//! `bellc query`: the command line's side of [`bellc::review::query`].

use bellc::review::query::{self, Target};
use bellc::review::select::Selector;
use bellc::source::Sources;
use std::path::{Path, PathBuf};

/// The spec among the words after the query (one ending in `.kdl`, or a file that exists),
/// and the host names or globs; `bell.kdl` when no spec is named.
pub fn spec_and_patterns(words: &[String]) -> (PathBuf, Vec<String>) {
    let is_spec = |w: &String| w.ends_with(".kdl") || Path::new(w).is_file();
    let spec = words
        .iter()
        .find(|w| is_spec(w))
        .map_or_else(|| PathBuf::from("bell.kdl"), PathBuf::from);
    let patterns = words.iter().filter(|w| !is_spec(w)).cloned().collect();
    (spec, patterns)
}

/// Prints the answer; an error when the selector selects no host.
pub fn print(
    front: &bellc::Frontend,
    sources: &Sources,
    what: &str,
    target: &Target,
    selector: &Selector,
    json: bool,
) -> Result<(), String> {
    let answer = query::query(
        &front.spec,
        &front.resolution.hosts,
        target,
        what,
        selector,
        sources,
    );
    if answer.hosts == 0 {
        return Err(format!(
            "no host of the spec is selected by {}",
            selector.describe()
        ));
    }
    if json {
        let text = serde_json::to_string_pretty(&answer).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", query::to_text(&answer));
    }
    Ok(())
}

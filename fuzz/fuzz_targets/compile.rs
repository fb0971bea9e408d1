//! The whole compile pipeline from source text: parse, lower, resolve, graph, render, plan.
//! Any input must end in bundles or diagnostics, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = bellc_core::source::Sources::new();
    // No directory: an `include` or `inventory` resolves against the working directory, which
    // `fuzz/run` makes an empty temporary one.
    let file = sources.add(Path::new("bell.kdl"), text.to_string());
    let mut diags = bellc_core::diagnostic::Diagnostics::new();
    let spec = bellc_core::front::lower::lower_root(file, &mut sources, &mut diags);
    let front = bellc_core::analyse(spec, &sources, &mut diags);
    // Rendering is fuzzed for every input but one whose templates could build large values (a
    // loop, or `~`, `*`, `+` or a filter that grows a string inside `{{ }}`). Such a template
    // is bounded in `bellc` by the memory budget its allocator keeps, which ends the process:
    // that is tested with the binary (`compiler/tests/hostile_specs.rs`), and here it would
    // read as an out-of-memory crash. A `*` outside a template (a perm glob) is rendered.
    if !template_can_grow(text) {
        if diags.has_errors() {
            // A spec with errors still renders, for its template errors (`bellc check`).
            bellc_core::template_errors(front, &sources, &mut diags);
        } else {
            let built = bellc_core::compile_frontend(front, &sources, &mut diags);
            // A spec that does not build must say why.
            assert!(
                built.is_some() || diags.has_errors(),
                "refused without an error"
            );
        }
    }
    // Printing the diagnostics walks every span: one out of range would panic here.
    let _ = diags.to_short(&sources);
});

/// Whether a template in `text` could grow a value: a `{% %}` block anywhere, or a growing
/// operator or filter inside a `{{ }}` expression.
fn template_can_grow(text: &str) -> bool {
    const GROWING: &[&str] = &[
        "~", "*", "+", "join", "replace", "indent", "center", "format", "repeat", "range",
    ];
    if text.contains("{%") {
        return true;
    }
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let inner = &rest[start + 2..];
        let end = inner.find("}}").unwrap_or(inner.len());
        if GROWING.iter().any(|g| inner[..end].contains(g)) {
            return true;
        }
        rest = &inner[end..];
    }
    false
}

//! The whole compile pipeline from source text: parse, lower, resolve, graph, render, plan.
//! Any input must end in bundles or diagnostics, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut sources = bellc::source::Sources::new();
    // No directory: an `include` or `inventory` resolves against the working directory, which
    // `fuzz/run` makes an empty temporary one.
    let file = sources.add(Path::new("bell.kdl"), text.to_string());
    let mut diags = bellc::diagnostic::Diagnostics::new();
    let spec = bellc::front::lower::lower_root(file, &mut sources, &mut diags);
    let front = bellc::analyse(spec, &sources, &mut diags);
    // Rendering is fuzzed for templates that cannot build large values. One that can (a
    // loop, `~`, `*`, `+`, a filter that grows a string) is bounded in `bellc` by the memory
    // budget its allocator keeps, which ends the process: that is tested with the binary
    // (`compiler/tests/hostile_specs.rs`), and here it would read as an out-of-memory crash.
    const GROWING: &[&str] = &[
        "{%", "~", "*", "+", "join", "replace", "indent", "center", "format", "repeat", "range",
    ];
    if !diags.has_errors() && !GROWING.iter().any(|g| text.contains(g)) {
        let _ = bellc::compile_frontend(front, &sources, &mut diags);
    }
    // Printing the diagnostics walks every span: one out of range would panic here.
    let _ = diags.to_short(&sources);
});

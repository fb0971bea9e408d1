//! Truncated and mutated versions of the examples never make bellc panic: every outcome is
//! either a build or diagnostics.
use crate::common::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Deterministic mutations, so a failure reproduces.
use bell_fleetgen::SplitMix64 as Rng;

const TOKENS: &[&str] = &[
    "{",
    "}",
    "\"",
    "#",
    "=",
    ";",
    "\n",
    "\\",
    "#null",
    "#true",
    "-1",
    "0x",
    "r#\"",
    "\"\"\"",
    "/*",
    "//",
    "override \"x\" { match host=\"superhost\" }",
    "remove \"sysctl:x\"",
    "after \"mount:mnt\"",
    "ü",
    "\u{feff}",
    "include \"*.kdl\"",
    "inventory \"bell.kdl\"",
    "9999999999999999999999",
    "1.5e308",
    "..",
    "$(reboot)",
];

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len());
        match rng.below(4) {
            0 => bytes.truncate(at),
            1 => {
                let end = (at + rng.below(40)).min(bytes.len());
                bytes.drain(at..end);
            }
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
            _ => {
                let end = (at + rng.below(60)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                let to = rng.below(bytes.len());
                bytes.splice(to..to, copy);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn compile_in_process(dir: &std::path::Path) {
    let spec = dir.join("bell.kdl");
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut sources = bellc_core::source::Sources::new();
        sources.open_secrets_with(example_secrets_identities());
        let mut diags = bellc_core::diagnostic::Diagnostics::new();
        let compiled = bellc_core::compile(&spec, &mut sources, &mut diags);
        // Rendering diagnostics to text exercises every span against its source.
        let lines = diags.to_short_lines(&sources);
        let errors = diags.has_errors();
        for report in diags.into_reports(&sources) {
            let _ = format!("{report:?}");
        }
        (compiled.is_some(), errors, lines)
    }));
    let text = || std::fs::read_to_string(&spec).unwrap_or_default();
    let Ok((built, errors, lines)) = result else {
        panic!("bellc panicked on this spec:\n{}", text());
    };
    // A spec that does not build must say why: a refusal without an error is a silent one.
    assert!(
        built || errors,
        "bellc refused this spec without an error ({lines:?}):\n{}",
        text()
    );
    assert!(
        !(built && errors),
        "bellc built this spec despite errors ({lines:?}):\n{}",
        text()
    );
}

fn fuzz_example(relative: &str, inventory: Option<(&str, &str)>, rounds: usize, seed: u64) {
    let original = std::fs::read_to_string(repo_root().join(relative)).unwrap();
    let mut fx = Fixture::new();
    // An example's encrypted secrets are there, so that what it reads past them is reached.
    if let Some(example) = relative.strip_prefix("examples/") {
        copy_example(fx.path(), example.trim_end_matches(".kdl"), "bell.kdl");
    }
    if let Some((path, from)) = inventory {
        fx = fx.file(
            path,
            &std::fs::read_to_string(repo_root().join(from)).unwrap(),
        );
    }
    let mut rng = Rng(seed);
    // Every truncation point of a stride, then random mutations.
    let stride = (original.len() / 150).max(1);
    let mut variants: Vec<String> = (0..original.len())
        .step_by(stride)
        .filter(|i| original.is_char_boundary(*i))
        .map(|i| original[..i].to_string())
        .collect();
    for _ in 0..rounds {
        variants.push(mutate(&original, &mut rng));
    }
    for variant in variants {
        std::fs::write(fx.path().join("bell.kdl"), &variant).unwrap();
        compile_in_process(fx.path());
    }
}

#[test]
fn the_divingbell_example_mangled() {
    fuzz_example("examples/divingbell.kdl", None, 250, 1);
}

#[test]
fn the_three_role_example_mangled() {
    fuzz_example(
        "examples/three-role.kdl",
        Some((
            "inventory/three-role.json",
            "examples/inventory/three-role.json",
        )),
        250,
        2,
    );
}

#[test]
fn the_language_contract_mangled() {
    fuzz_example(
        "compiler/tests/fixtures/language/bell.kdl",
        Some((
            "inventory/nodes.json",
            "compiler/tests/fixtures/language/inventory/nodes.json",
        )),
        250,
        3,
    );
}

#[test]
fn mangled_inventories() {
    let original =
        std::fs::read_to_string(repo_root().join("examples/inventory/three-role.json")).unwrap();
    let fx = Fixture::example("three-role", "bell.kdl");
    let mut rng = Rng(4);
    for _ in 0..300 {
        std::fs::create_dir_all(fx.path().join("inventory")).unwrap();
        std::fs::write(
            fx.path().join("inventory/three-role.json"),
            mutate(&original, &mut rng),
        )
        .unwrap();
        compile_in_process(fx.path());
    }
}

//! A bundle rendered a part at a time, with the parts it shares with other bundles taken from
//! the memo (`render/parts.rs`), is byte for byte the bundle rendered whole: every example and
//! every shape of the fleet generator, built both ways (`BELLC_PART_MEMO=off` renders every
//! part of every bundle).
use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use bell_fleetgen::{FleetGen, Inventory, Shape};

/// Builds `spec` in `dir` into `out`, with or without the memo; returns how many parts it
/// reused.
fn build(dir: &Path, spec: &str, out: &str, memo: bool) -> u64 {
    let seal = repo_root().join("examples/keys/seal.key");
    let mut command = Command::new(env!("CARGO_BIN_EXE_bellc"));
    command
        .args(["build", spec, "-o", out, "--timings", "--seal-key"])
        .arg(&seal)
        .arg("--secrets-key")
        .arg(example_secrets_key())
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("BELLC_STATE_DIR", dir.join("bellc-state"))
        .env_remove("CI");
    if !memo {
        command.env("BELLC_PART_MEMO", "off");
    }
    let run = Run::from(command.output().expect("run bellc"));
    run.timings()["parts_reused"]
        .as_u64()
        .expect("parts_reused is a count")
}

/// Builds both ways and compares; the memo must have been used, or the comparison says nothing.
fn same_both_ways(dir: &Path, spec: &str, what: &str) {
    let reused = build(dir, spec, "with-memo", true);
    assert_eq!(
        build(dir, spec, "whole", false),
        0,
        "{what}: the memo is off"
    );
    assert!(reused > 0, "{what}: no part was taken from the memo");
    let with_memo: BTreeMap<String, Vec<u8>> = tree(&dir.join("with-memo")).into_iter().collect();
    let whole: BTreeMap<String, Vec<u8>> = tree(&dir.join("whole")).into_iter().collect();
    assert!(!whole.is_empty(), "{what}: nothing built");
    let differing: Vec<&String> = with_memo
        .keys()
        .chain(whole.keys())
        .filter(|path| with_memo.get(*path) != whole.get(*path))
        .take(5)
        .collect();
    assert!(
        differing.is_empty(),
        "{what}: the bundles differ ({} against {} files; first differing: {differing:?})",
        with_memo.len(),
        whole.len()
    );
}

#[test]
fn every_example_builds_the_same_with_and_without_the_memo() {
    let root = repo_root();
    for example in ["three-role", "divingbell"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = Command::new("cp")
            .args(["-a", "examples/.", &dir.path().to_string_lossy()])
            .current_dir(&root)
            .status()
            .expect("cp");
        assert!(copy.success());
        same_both_ways(dir.path(), &format!("{example}.kdl"), example);
    }
}

#[test]
fn every_generator_shape_builds_the_same_with_and_without_the_memo() {
    for shape in [
        Shape::Shared,
        Shape::Unique,
        Shape::Overridden,
        Shape::Templated,
        Shape::Sealed,
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = FleetGen {
            hosts: 100,
            seed: 7,
            shape,
            inventory: Inventory::Json,
        }
        .generate();
        for (path, text) in &files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        }
        same_both_ways(dir.path(), "bell.kdl", &format!("{shape:?}"));
    }
}

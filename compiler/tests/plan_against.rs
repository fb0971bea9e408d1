//! `bellc plan --against OLD_OUT` plans only the hosts whose bundle changed since the release
//! in OLD_OUT.

use crate::common::spec_dir::bellc;
use crate::common::EXAMPLE_KEY;
use std::path::Path;

fn copy_example(dir: &Path) {
    crate::common::copy_example(dir, "three-role", "three-role.kdl");
}

fn run(dir: &Path, args: &[&str]) -> (String, String) {
    let out = bellc()
        .current_dir(dir)
        .args(args)
        .args(EXAMPLE_KEY)
        .output()
        .expect("bellc runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "bellc {args:?}:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn one_changed_host_is_the_whole_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_example(dir.path());
    run(dir.path(), &["build", "three-role.kdl", "-o", "old"]);

    let (same, _) = run(dir.path(), &["plan", "three-role.kdl", "--against", "old"]);
    assert_eq!(same, "nothing to roll out: no host's bundle changed\n");

    let spec = dir.path().join("three-role.kdl");
    let mut text = std::fs::read_to_string(&spec).expect("spec");
    text.push_str(
        "override \"tuned\" {\n    match host=\"cmp-02\"\n    sysctl { vm.swappiness 5 }\n}\n",
    );
    std::fs::write(&spec, text).expect("spec");

    let (json, stderr) = run(
        dir.path(),
        &["plan", "three-role.kdl", "--against", "old", "--json"],
    );
    let waves: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(
        waves,
        serde_json::json!([{
            "layer": 1,
            "batch": "r02",
            "hosts": ["cmp-02"],
            "why": "layer 1: after providers of etcd; one rack at a time (rack=r02)"
        }])
    );
    assert!(stderr.contains("1 of 12 hosts in 1 waves"), "{stderr}");

    let (table, _) = run(dir.path(), &["plan", "three-role.kdl", "--against", "old"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("WAVE  LAYER  RACK  HOSTS"), "{table}");
    assert!(lines[1].starts_with("1     1      r02   cmp-02"), "{table}");

    // Without --against every host is planned, as release.json lists them.
    let (all, _) = run(dir.path(), &["plan", "three-role.kdl", "--json"]);
    let all: Vec<serde_json::Value> = serde_json::from_str(&all).expect("json");
    let planned: usize = all
        .iter()
        .map(|w| w["hosts"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(planned, 12);
    let release: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("old/release.json")).expect("release"),
    )
    .expect("json");
    assert_eq!(release["waves"].as_array().map(Vec::len), Some(12));
}

#[test]
fn a_missing_old_release_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_example(dir.path());
    let out = bellc()
        .current_dir(dir.path())
        .args(["plan", "three-role.kdl", "--against", "nowhere"])
        .args(EXAMPLE_KEY)
        .output()
        .expect("bellc runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read nowhere/release.json"),
        "{stderr}"
    );
}

//! Divingbell runs `exec` scripts in name order, and a failed script does not stop the next
//! (only `on-failure="halt"` does); a run-once script is identified by its own definition, so
//! it stays run when something unrelated on the host changes. Built by the real `bellc` and
//! applied by the real `bell-run` into a temporary root.

use crate::common::fleet::{apply_into, bell_run, text};
use crate::common::in_memory::bundle;
use crate::common::Fixture;
use std::path::Path;

/// `count` scripts in name order, each appending its name to `$BELL_ROOT/ran`; `failing`
/// exits 1 after doing so.
fn chain(count: usize, failing: usize, extra: &str) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\nhost \"h\"\n");
    for i in 1..=count {
        let exit = if i == failing { "exit 1" } else { "exit 0" };
        spec.push_str(&format!(
            "exec \"00{i}.sh\" rerun=\"always\" offline=\"root\" {{\n    script \"#!/bin/sh\\necho 00{i} >>\\\"$BELL_ROOT/ran\\\"\\n{exit}\\n\"\n}}\n"
        ));
    }
    spec.push_str(extra);
    spec
}

fn ran(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("ran"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn image_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    for db in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(db), root.path().join("etc").join(db)).unwrap();
    }
    root
}

#[test]
fn name_order_is_an_ordering_not_a_dependency() {
    let b = bundle(&chain(5, 4, "package \"htop\"\nuser \"ops\"\n"), "h");
    let exec = |name: &str| {
        b.manifest
            .resources
            .iter()
            .find(|r| r.kind == "exec" && r.name == name)
            .unwrap()
    };
    let fifth = exec("005.sh");
    assert!(fifth.after.is_empty(), "{:?}", fifth.after);
    assert!(
        fifth.order_after.contains(&"exec:004.sh".to_string()),
        "{:?}",
        fifth.order_after
    );
    // The blanket rules order only; a file owned by a user depends on it.
    let first = exec("001.sh");
    assert!(first.after.is_empty(), "{:?}", first.after);
    for key in ["package:htop", "user:ops"] {
        assert!(first.order_after.contains(&key.to_string()), "{key}");
    }
}

#[test]
fn a_failed_script_does_not_stop_the_next_on_any_apply() {
    let f = Fixture::spec(&chain(5, 4, ""));
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bin = bell_run();
    let root = image_root();
    let bundle = f.path().join("out/hosts/h");
    for round in 1..=2 {
        let out = apply_into(&bin, &bundle, root.path());
        let shown = text(&out);
        assert_ne!(out.status.code(), Some(0), "{shown}");
        assert!(!shown.contains("skipped"), "round {round}: {shown}");
        assert!(shown.contains("exec:004.sh"), "{shown}");
        let expected: Vec<String> = (0..round)
            .flat_map(|_| (1..=5).map(|i| format!("00{i}")))
            .collect();
        assert_eq!(ran(root.path()), expected, "round {round}: {shown}");
    }
}

#[test]
fn halt_still_stops_the_later_scripts() {
    let spec = chain(5, 4, "").replace(
        "exec \"004.sh\" rerun=\"always\" offline=\"root\"",
        "exec \"004.sh\" rerun=\"always\" offline=\"root\" on-failure=\"halt\"",
    );
    let f = Fixture::spec(&spec);
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let root = image_root();
    let bundle = f.path().join("out/hosts/h");
    let out = apply_into(&bell_run(), &bundle, root.path());
    assert!(text(&out).contains("halted"), "{}", text(&out));
    assert_eq!(ran(root.path()), ["001", "002", "003", "004"]);
}

/// A `once-successfully` script beside other resources; each version changes something the
/// script does not depend on, or the script itself.
fn run_once(version: u8) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\nhost \"h\"\n");
    spec.push_str("user \"ops\"\n");
    if version >= 2 {
        // An unrelated account: a new ordering edge to every script.
        spec.push_str("user \"dev\"\n");
    }
    let after = if version >= 3 {
        "    after \"user:ops\"\n"
    } else {
        ""
    };
    let body = if version >= 4 { "echo v4" } else { "true" };
    spec.push_str(&format!(
        "exec \"init-motd\" rerun=\"once-successfully\" offline=\"root\" {{\n{after}    script \"#!/bin/sh\\necho once >>\\\"$BELL_ROOT/ran\\\"\\n{body}\\n\"\n}}\n"
    ));
    spec
}

#[test]
fn a_run_once_script_stays_run_after_unrelated_changes() {
    let f = Fixture::new();
    for v in 1..=4 {
        std::fs::write(f.path().join(format!("v{v}.kdl")), run_once(v)).unwrap();
        let out = format!("out{v}");
        let run = f.bellc(&["build", &format!("v{v}.kdl"), "-o", &out]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    // The review says it before any host does.
    let diff = |a: &str, b: &str| {
        let run = f.bellc(&["diff", a, b]);
        format!("{}{}", run.stdout, run.stderr)
    };
    let unrelated = diff("out1", "out2");
    assert!(unrelated.contains("user:dev"), "{unrelated}");
    assert!(!unrelated.contains("exec:init-motd"), "{unrelated}");
    let edge = diff("out2", "out3");
    assert!(
        edge.contains("does not run again: its own definition is unchanged"),
        "{edge}"
    );
    let content = diff("out3", "out4");
    assert!(
        content.contains("runs again on every host that ran it"),
        "{content}"
    );
    let plan = f.bellc(&["plan", "v4.kdl", "--against", "out3"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stderr.contains("exec:init-motd runs again on h:"),
        "{}",
        plan.stderr
    );
    let plan = f.bellc(&["plan", "v3.kdl", "--against", "out2"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stderr.contains("1 of 1 hosts"),
        "no host changes: {}",
        plan.stderr
    );
    assert!(!plan.stderr.contains("runs again"), "{}", plan.stderr);

    let bin = bell_run();
    let root = image_root();
    let apply = |v: u8| {
        let out = apply_into(&bin, &f.path().join(format!("out{v}/hosts/h")), root.path());
        assert_eq!(out.status.code(), Some(0), "v{v}: {}", text(&out));
        ran(root.path()).len()
    };
    assert_eq!(apply(1), 1);
    // Another user (a new ordering edge), then an explicit `after`: not the script's own
    // definition, so it stays run.
    assert_eq!(apply(2), 1);
    assert_eq!(apply(3), 1);
    // Its content changed: a new script, run once more.
    assert_eq!(apply(4), 2);
    assert_eq!(apply(4), 2);
}

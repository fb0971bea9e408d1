//! SIGKILL at every step of an apply (failpoints via `BELL_RUN_FAILPOINT`), then `bell-run
//! recover`: the root holds exactly the old generation or exactly the new one, never a mix,
//! and the next apply converges.
use crate::common::*;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;

/// In the order an apply reaches them, with the generation recovery must land on.
const POINTS: &[(&str, u8)] = &[
    ("before-revert", 1),
    ("after-revert", 1),
    ("staging-journal", 1),
    ("mid-stage", 1),
    ("staged", 1),
    ("committed", 2),
    ("mid-switch", 2),
    ("switched", 2),
    ("switch-recorded", 2),
    ("before-apply", 2),
    ("after-apply", 2),
];

fn prepare(w: &World) {
    let root = w.root();
    std::fs::write(root.join("etc/orig1"), "before bell 1\n").unwrap();
    std::fs::write(root.join("etc/orig2"), "before bell 2\n").unwrap();
}

fn gen1(w: &World) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/a", "a one\n", "0644")
        .file("/etc/only1", "bell only\n", "0644")
        .file("/etc/orig1", "bell's orig1\n", "0600")
        .file("/etc/same", "same\n", "0644")
        .resource(
            ResourceSpec::new("f", "one")
                .files(&["/etc/a", "/etc/only1", "/etc/orig1", "/etc/same"])
                .apply(&w.event("apply one"))
                .revert(&w.event("revert one")),
        )
}

fn gen2(w: &World) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/a", "a two\n", "0600")
        .file("/etc/new.d/x", "new\n", "0644")
        .file("/etc/orig2", "bell's orig2\n", "0644")
        .file("/etc/same", "same\n", "0644")
        .resource(
            ResourceSpec::new("f", "two")
                .files(&["/etc/a", "/etc/new.d/x", "/etc/orig2", "/etc/same"])
                .apply(&w.event("apply two")),
        )
        .trigger("reload", &["/etc/new.d/"], &w.event("trigger reload"))
}

fn files(w: &World) -> BTreeMap<String, Entry> {
    snapshot(&w.root(), &["var/lib/bell"], false, false)
}

#[test]
fn a_crash_at_any_step_leaves_all_old_or_all_new() {
    // Reference trees from a clean run.
    let reference = World::new();
    prepare(&reference);
    let before_bell = files(&reference);
    expect_code(
        &reference.apply(&reference.build(&gen1(&reference)), &[]),
        0,
    );
    let old = files(&reference);
    expect_code(
        &reference.apply(&reference.build(&gen2(&reference)), &[]),
        0,
    );
    let new = files(&reference);
    assert_ne!(old, new);

    for (point, expected) in POINTS {
        let w = World::new();
        prepare(&w);
        let b1 = w.build(&gen1(&w));
        let b2 = w.build(&gen2(&w));
        expect_code(&w.apply(&b1, &[]), 0);
        assert_eq!(files(&w), old);

        let out = w.apply_env(&b2, &[], &[("BELL_RUN_FAILPOINT", point)]);
        assert_eq!(out.status.signal(), Some(9), "{point}: {}", stderr(&out));
        if *point == "mid-switch" {
            let torn = files(&w);
            assert!(
                torn != old && torn != new,
                "the failpoint must stop a switch halfway"
            );
        }

        // What the crashed run did, kept apart from what comes after it.
        let crashed = w.events();
        w.clear_events();
        let rec = w.run(&["recover", "--root", w.root().to_str().unwrap()]);
        expect_code(&rec, 0);
        let after = files(&w);
        let want = if *expected == 1 { &old } else { &new };
        assert_eq!(&after, want, "after a crash at {point}: {}", stdout(&rec));

        // The next apply converges and runs what the crashed one did not: everything, when
        // the crash was rolled back to the old generation.
        let out = w.apply(&b2, &[]);
        expect_code(&out, 0);
        assert_eq!(files(&w), new, "{point}");
        let later = w.events();
        for event in ["trigger reload", "apply two", "revert one"] {
            let event = event.to_string();
            let done = later.contains(&event) || (*expected == 2 && crashed.contains(&event));
            assert!(
                done,
                "{point}: `{event}` never ran: {crashed:?} then {later:?}"
            );
        }
        let out = w.apply(&b2, &[]);
        assert!(
            stdout(&out).contains("result: 0 changed"),
            "{point}: {}",
            stdout(&out)
        );

        // Going back restores the pre-bell orig2 and takes orig1 over again.
        expect_code(&w.apply(&b1, &[]), 0);
        assert_eq!(files(&w), old, "{point}");
        expect_code(&w.apply(&w.build(&BundleSpec::new()), &[]), 0);
        let mut gone = files(&w);
        gone.retain(|_, e| e.kind == "file");
        assert_eq!(
            gone, before_bell,
            "{point}: nothing of bell left, the originals back"
        );
    }
}

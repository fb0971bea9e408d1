//! A batch: one check script reads back every resource that names it (twenty sysctl keys in one
//! process), printing `KEY<TAB>in-sync|drifted|error<TAB>detail` per resource. `bell-run
//! check` and `apply` run it once for all of them and take each resource's line as that
//! resource's check; a resource without a line, or a batch that fails, is an error for the
//! resources it did not answer for; a live-only batch is not started offline; and a manifest
//! whose resource names a batch it does not hold is refused before anything changes. A batch may
//! also have an apply: two or more of its resources due are brought live by one run of it (each
//! taking its line as its outcome), one due alone by its own apply.
use crate::common::*;

const KEYS: [&str; 3] = ["a", "b", "c"];

/// Three "live" values, each in a file of its own under the test's directory, read back by
/// one batch check (`answer` says which keys it gives a line for, `tail` ends the script).
fn bundle(w: &World, answer: &[&str], tail: &str) -> BundleSpec {
    let live = w.tmp.path().join("live");
    std::fs::create_dir_all(&live).unwrap();
    let live = live.display();
    let mut check = format!("#!/bin/sh\n{}", w.event("batch"));
    for key in answer {
        check += &format!(
            "v=$(cat '{live}/{key}')\nif [ \"$v\" = 1 ]; then printf 'live:{key}\\tin-sync\\n'; else printf 'live:{key}\\tdrifted\\t{key} is %s\\n' \"$v\"; fi\n"
        );
    }
    check += tail;
    let mut spec = BundleSpec::new().batch("live", &check);
    for key in KEYS {
        spec = spec.resource(
            ResourceSpec::new("live", key)
                .in_batch("live")
                .apply(&format!(
                    "echo 1 > '{live}/{key}'\n{}",
                    w.event(&format!("apply {key}"))
                )),
        );
    }
    spec
}

fn check(w: &World) -> (i32, serde_json::Value) {
    let root = w.root();
    let out = w.run(&["check", "--root", root.to_str().unwrap(), "--json"]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.code().unwrap_or(-1), report)
}

/// `check` after a first apply of `bundle(answer, tail)` on a new root.
fn applied_then_checked(answer: &[&str], tail: &str) -> (i32, serde_json::Value) {
    let w = World::new();
    let b = w.build(&bundle(&w, answer, tail));
    expect_code(&w.apply(&b, &[]), 0);
    check(&w)
}

/// `KEY result detail` of each resource in a check report.
fn results(report: &serde_json::Value) -> Vec<String> {
    lines(report, "result")
}

/// `KEY FIELD detail` of each resource in a report.
fn lines(report: &serde_json::Value, field: &str) -> Vec<String> {
    report["resources"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["key"].as_str().unwrap_or(""),
                r[field].as_str().unwrap_or(""),
                r["detail"].as_str().unwrap_or("")
            )
            .trim_end()
            .to_string()
        })
        .collect()
}

#[test]
fn one_run_checks_every_resource_of_the_batch_and_apply_repairs_the_drifted_one() {
    let w = World::new();
    let b = w.build(&bundle(&w, &KEYS, ""));
    expect_code(&w.apply(&b, &[]), 0);
    // A first apply runs every apply and no check.
    assert_eq!(w.events(), ["apply a", "apply b", "apply c"]);
    w.clear_events();

    let (code, report) = check(&w);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        results(&report),
        ["live:a in-sync", "live:b in-sync", "live:c in-sync"]
    );
    assert_eq!(w.events(), ["batch"], "one process for the three checks");
    w.clear_events();

    std::fs::write(w.tmp.path().join("live/b"), "7\n").unwrap();
    let (code, report) = check(&w);
    assert_eq!(code, 2, "{report}");
    assert_eq!(
        results(&report),
        ["live:a in-sync", "live:b drifted b is 7", "live:c in-sync"]
    );
    assert_eq!(report["drift"][0]["name"], "live:b");
    w.clear_events();

    // The apply checks what `check` marked, once, and applies only the drifted resource again.
    let out = w.apply(&b, &["--json"]);
    expect_code(&out, 0);
    assert_eq!(w.events(), ["batch", "apply b"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["drift"][0]["name"], "live:b", "{report}");
    assert_eq!(
        std::fs::read_to_string(w.tmp.path().join("live/b")).unwrap(),
        "1\n"
    );
}

#[test]
fn a_resource_without_an_answer_or_a_failed_batch_is_an_error_not_drift() {
    // No line for c; a line for a key outside the batch and one of text are not answers.
    let tail = "printf 'live:zz\\tdrifted\\tnot ours\\n'\necho 'some progress'\n";
    let (code, report) = applied_then_checked(&["a", "b"], tail);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        results(&report),
        [
            "live:a in-sync",
            "live:b in-sync",
            "live:c error the check of batch live gave no answer for it"
        ]
    );
    assert_eq!(report["errors"], serde_json::json!(["live:c"]));

    // A batch that fails: what it answered stands, the rest is an error saying how it failed.
    let (code, report) = applied_then_checked(&["a"], "echo 'cannot read c' >&2\nexit 3\n");
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        results(&report),
        [
            "live:a in-sync",
            "live:b error check of batch live exit 3: cannot read c",
            "live:c error check of batch live exit 3: cannot read c"
        ]
    );
}

#[test]
fn a_live_only_batch_is_not_started_offline() {
    let w = World::new();
    let mut spec = bundle(&w, &KEYS, "");
    spec.batches[0].1 = format!("{LIVE_ONLY}{}", spec.batches[0].1);
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    w.clear_events();
    let (code, report) = check(&w);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        results(&report),
        ["live:a in-sync", "live:b in-sync", "live:c in-sync"]
    );
    assert!(w.events().is_empty(), "started: {:?}", w.events());
}

/// Applies `spec` (which does not verify): refused naming `needle`, with the root unchanged and
/// nothing run.
fn assert_refused(w: &World, spec: &BundleSpec, needle: &str) {
    let before = snapshot(&w.root(), &[], true, true);
    let out = w.apply(&w.build_unverified(spec), &[]);
    expect_code(&out, 1);
    assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    assert_eq!(snapshot(&w.root(), &[], true, true), before);
    assert!(w.events().is_empty());
}

#[test]
fn a_resource_naming_a_batch_the_manifest_lacks_is_refused_before_anything_changes() {
    let w = World::new();
    let mut spec = bundle(&w, &KEYS, "");
    spec.batches.clear();
    assert_refused(
        &w,
        &spec,
        "resource live:a is checked by the batch \"live\"",
    );

    // A resource with a check of its own as well as a batch: checked one way only.
    let mut spec = bundle(&w, &KEYS, "");
    spec.resources[1].check = Some("exit 0\n".to_string());
    assert_refused(&w, &spec, "resource live:b");

    // A batch name that is not lowercase letters, digits and `-` (it names a directory).
    let mut spec = bundle(&w, &KEYS, "");
    spec.batches[0].0 = "Bad Name".to_string();
    for r in &mut spec.resources {
        r.batch = Some("Bad Name".to_string());
    }
    assert_refused(&w, &spec, "the batch name \"Bad Name\"");
}

/// `bundle` with an apply for the batch: it sets each due key to 1, leaves a mark in the state
/// directory it was given, and answers `ok`, except for the keys in `refuse` (`failed`) and
/// `silent` (no line); `tail` ends the script.
fn applying_bundle(w: &World, refuse: &[&str], silent: &[&str], tail: &str) -> BundleSpec {
    let live = w.tmp.path().join("live");
    let live = live.display();
    let events = w.events_path();
    let mut apply = format!(
        "#!/bin/sh\nkeys=''\nfor a in \"$@\"; do case $a in live:*) keys=\"$keys $a\" ;; esac; done\necho \"batch apply$keys\" >> '{}'\n",
        events.display()
    );
    apply += "while [ $# -gt 0 ]; do\n    key=$1; state=$2; shift 2\n    name=${key#live:}\n    case $name in\n";
    for key in refuse {
        apply += &format!(
            "        {key}) printf '%s\\tfailed\\t%s refused\\n' \"$key\" {key}; continue ;;\n"
        );
    }
    for key in silent {
        apply += &format!("        {key}) continue ;;\n");
    }
    apply += &format!(
        "    esac\n    echo 1 > '{live}/'\"$name\"\n    echo \"$key\" > \"$state/seen\"\n    printf '%s\\tok\\n' \"$key\"\ndone\n{tail}"
    );
    bundle(w, &KEYS, "").batch_apply("live", &apply)
}

/// `KEY status detail` of each resource in an apply report.
fn statuses(out: &std::process::Output) -> Vec<String> {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    lines(&report, "status")
}

#[test]
fn a_batch_apply_brings_every_due_resource_live_in_one_run_and_one_due_alone_runs_its_own() {
    let w = World::new();
    let spec = applying_bundle(&w, &[], &[], "");
    let out = w.apply(&w.build(&spec), &["--json"]);
    expect_code(&out, 0);
    assert_eq!(w.events(), ["batch apply live:a live:b live:c"]);
    assert_eq!(statuses(&out), ["live:a ok", "live:b ok", "live:c ok"]);
    // Each resource's own state directory, made private before the script ran.
    for key in KEYS {
        let state = w.root().join("var/lib/bell/state/live").join(key);
        assert_eq!(
            std::fs::read_to_string(state.join("seen")).unwrap(),
            format!("live:{key}\n")
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", state.display());
    }
    w.clear_events();

    // Nothing due: nothing runs.
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    assert!(w.events().is_empty(), "{:?}", w.events());

    // One resource changed: it alone is due, and its own apply runs.
    let mut changed = spec.clone();
    let own = changed.resources[1].apply.clone().unwrap();
    changed.resources[1].apply = Some(format!("# changed\n{own}"));
    expect_code(&w.apply(&w.build(&changed), &[]), 0);
    assert_eq!(w.events(), ["apply b"]);

    // Two drifted: put back together, by one run of the batch's apply.
    for key in ["a", "c"] {
        std::fs::write(w.tmp.path().join("live").join(key), "0\n").unwrap();
    }
    assert_eq!(check(&w).0, 2);
    w.clear_events();
    let out = w.apply(&w.build(&changed), &["--json"]);
    expect_code(&out, 0);
    assert_eq!(w.events(), ["batch", "batch apply live:a live:c"]);
    assert_eq!(
        statuses(&out),
        [
            "live:a ok drifted → put back",
            "live:b unchanged",
            "live:c ok drifted → put back"
        ]
    );
}

#[test]
fn a_resource_the_batch_apply_refuses_or_leaves_unanswered_has_failed() {
    let w = World::new();
    let spec = applying_bundle(&w, &["b"], &["c"], "");
    let out = w.apply(&w.build(&spec), &["--json"]);
    expect_code(&out, 3);
    assert_eq!(
        statuses(&out),
        [
            "live:a ok",
            "live:b failed b refused",
            "live:c failed the apply of batch live gave no answer for it"
        ]
    );

    // A batch apply that fails: what it answered stands, the rest failed, saying how.
    let w = World::new();
    let tail = "echo 'bell: batch:live: the kernel said no' >&2\nexit 3\n";
    let spec = applying_bundle(&w, &[], &["b", "c"], tail);
    let out = w.apply(&w.build(&spec), &["--json"]);
    expect_code(&out, 3);
    assert_eq!(
        statuses(&out),
        [
            "live:a ok",
            "live:b failed apply of batch live exit 3: batch:live: the kernel said no",
            "live:c failed apply of batch live exit 3: batch:live: the kernel said no"
        ]
    );
    // Failed resources are due again: the next apply runs the batch for them.
    w.clear_events();
    expect_code(&w.apply(&w.build(&spec), &[]), 3);
    assert_eq!(w.events(), ["batch apply live:b live:c"]);
}

#[test]
fn a_resource_of_an_applying_batch_ordered_after_another_runs_its_own_apply_in_its_place() {
    let w = World::new();
    let mut spec = applying_bundle(&w, &[], &[], "");
    spec.resources[2].after = vec!["live:a".to_string()];
    let out = w.apply(&w.build(&spec), &["--json"]);
    expect_code(&out, 0);
    assert_eq!(w.events(), ["batch apply live:a live:b", "apply c"]);
    assert_eq!(statuses(&out), ["live:a ok", "live:b ok", "live:c ok"]);

    // Ordered after one of the batch: the first due resource runs alone, the other two as well.
    let w = World::new();
    let mut spec = applying_bundle(&w, &[], &[], "");
    spec.resources[1].after = vec!["live:a".to_string()];
    spec.resources[2].after = vec!["live:b".to_string()];
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    assert_eq!(w.events(), ["apply a", "apply b", "apply c"]);
}

#[test]
fn a_resource_of_an_applying_batch_without_an_apply_is_refused() {
    let w = World::new();
    let mut spec = applying_bundle(&w, &[], &[], "");
    spec.resources[0].apply = None;
    assert_refused(&w, &spec, "resource live:a is applied by the apply");
}

#[test]
fn timings_count_a_batchs_check_and_apply_under_the_batchs_name() {
    let w = World::new();
    let b = w.build(&applying_bundle(&w, &[], &[], ""));
    expect_code(&w.apply(&b, &[]), 0);
    // Drifted behind bell's back and found by `check`: the next apply runs the batch's check
    // again, then its apply.
    for key in KEYS {
        std::fs::write(w.tmp.path().join("live").join(key), "0\n").unwrap();
    }
    assert_eq!(check(&w).0, 2);
    let out = w.apply(&b, &["--timings", "--json"]);
    expect_code(&out, 0);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let kinds: Vec<(String, u64)> = report["timings"]["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|k| {
            let name = k["kind"].as_str().unwrap_or_default().to_string();
            (name, k["scripts"].as_u64().unwrap_or_default())
        })
        .collect();
    assert_eq!(kinds, [("batch:live".to_string(), 2)], "{kinds:?}");
}

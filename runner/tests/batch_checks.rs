//! A batch: one check script reads back every resource that names it (twenty sysctl keys in one
//! process), printing `KEY<TAB>in-sync|drifted|error<TAB>detail` per resource. `bell-run
//! check` and `apply` run it once for all of them and take each resource's line as that
//! resource's check; a resource without a line, or a batch that fails, is an error for the
//! resources it did not answer for; a live-only batch is not started offline; and a manifest
//! whose resource names a batch it does not hold is refused before anything changes.
mod common;
use common::*;

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
    report["resources"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["key"].as_str().unwrap_or(""),
                r["result"].as_str().unwrap_or(""),
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

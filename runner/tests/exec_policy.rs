//! exec resources: run counts per rerun policy, rerun and retry intervals on an injected clock
//! (`BELL_RUN_NOW`), a timeout that kills the script's children, halting on failure,
//! background runs, and args and env with hostile strings passed exactly.
use crate::common::*;
use bell_bundle::{OnFailure, Rerun};
use std::path::Path;
use std::time::{Duration, Instant};

/// A script that counts its runs in `name.count` and succeeds from run `ok_from` on.
fn counting(w: &World, name: &str, ok_from: u32) -> String {
    let count = w.root().join(format!("{name}.count"));
    format!(
        "#!/bin/sh\necho run >> '{c}'\nn=$(wc -l < '{c}')\n[ \"$n\" -ge {ok_from} ]\n",
        c = count.display()
    )
}

fn runs(w: &World, name: &str) -> usize {
    std::fs::read_to_string(w.root().join(format!("{name}.count")))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn run_counts_follow_the_rerun_policy() {
    let w = World::new();
    let spec = BundleSpec::new()
        .resource(
            ResourceSpec::new("exec", "always")
                .exec(&counting(&w, "always", 1), exec_policy(Rerun::Always)),
        )
        .resource(
            ResourceSpec::new("exec", "never")
                .exec(&counting(&w, "never", 1), exec_policy(Rerun::Never)),
        )
        .resource(ResourceSpec::new("exec", "never-failing").exec(
            &counting(&w, "never-failing", 99),
            exec_policy(Rerun::Never),
        ))
        .resource(ResourceSpec::new("exec", "once").exec(
            &counting(&w, "once", 3),
            exec_policy(Rerun::OnceSuccessfully),
        ));
    let bundle = w.build(&spec);
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(w.apply(&bundle, &[]).status.code().unwrap());
    }
    assert_eq!(runs(&w, "always"), 5);
    assert_eq!(runs(&w, "never"), 1);
    assert_eq!(runs(&w, "never-failing"), 1);
    assert_eq!(runs(&w, "once"), 3);
    // Runs 1 and 2 had failures (never-failing, once); from run 3 on nothing due fails.
    assert_eq!(codes, vec![3, 3, 0, 0, 0]);
}

#[test]
fn a_changed_script_is_a_new_script() {
    let w = World::new();
    let one = BundleSpec::new().resource(
        ResourceSpec::new("exec", "x").exec(&counting(&w, "x", 1), exec_policy(Rerun::Never)),
    );
    let two = BundleSpec::new().resource(ResourceSpec::new("exec", "x").exec(
        &format!("{}# v2\n", counting(&w, "x", 1)),
        exec_policy(Rerun::Never),
    ));
    expect_code(&w.apply(&w.build(&one), &[]), 0);
    expect_code(&w.apply(&w.build(&one), &[]), 0);
    expect_code(&w.apply(&w.build(&two), &[]), 0);
    expect_code(&w.apply(&w.build(&two), &[]), 0);
    assert_eq!(runs(&w, "x"), 2);
}

#[test]
fn rerun_and_retry_intervals_follow_the_clock() {
    let w = World::new();
    let mut every = exec_policy(Rerun::Always);
    every.rerun_interval = Some(100);
    let mut retry = exec_policy(Rerun::OnceSuccessfully);
    retry.retry_interval = Some(30);
    let spec = BundleSpec::new()
        .resource(ResourceSpec::new("exec", "every").exec(&counting(&w, "every", 1), every))
        .resource(ResourceSpec::new("exec", "retry").exec(&counting(&w, "retry", 2), retry));
    let bundle = w.build(&spec);
    let at = |t: &str| w.apply_env(&bundle, &[], &[("BELL_RUN_NOW", t)]);
    at("1000");
    assert_eq!((runs(&w, "every"), runs(&w, "retry")), (1, 1));
    let out = at("1010");
    assert_eq!((runs(&w, "every"), runs(&w, "retry")), (1, 1));
    assert!(stdout(&out).contains("retry at 1030"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("next run at 1100"),
        "{}",
        stdout(&out)
    );
    at("1030");
    assert_eq!((runs(&w, "every"), runs(&w, "retry")), (1, 2));
    at("1099");
    assert_eq!((runs(&w, "every"), runs(&w, "retry")), (1, 2));
    at("1100");
    assert_eq!((runs(&w, "every"), runs(&w, "retry")), (2, 2));
    at("5000");
    assert_eq!(
        (runs(&w, "every"), runs(&w, "retry")),
        (3, 2),
        "retry succeeded once: done"
    );
}

#[test]
fn a_timeout_kills_the_script_and_its_children() {
    let w = World::new();
    let marker = w.root().join("marker");
    let mut policy = exec_policy(Rerun::Always);
    policy.timeout = 1;
    let script = format!(
        "#!/bin/sh\n(sleep 2; touch '{m}') &\nsh -c \"sleep 3; touch '{m}'\" &\nsleep 30\n",
        m = marker.display()
    );
    let spec = BundleSpec::new().resource(ResourceSpec::new("exec", "slow").exec(&script, policy));
    let started = Instant::now();
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 3);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        stdout(&out).contains("timed out after 1s"),
        "{}",
        stdout(&out)
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(!marker.exists(), "a child of the timed-out script survived");
}

#[test]
fn on_failure_halt_stops_the_exec_scripts_after_it() {
    let w = World::new();
    let mut halt = exec_policy(Rerun::Always);
    halt.on_failure = OnFailure::Halt;
    let spec = BundleSpec::new()
        .resource(
            ResourceSpec::new("exec", "first")
                .exec(&counting(&w, "first", 1), exec_policy(Rerun::Always)),
        )
        .resource(ResourceSpec::new("exec", "breaks").exec(&counting(&w, "breaks", 99), halt))
        .resource(ResourceSpec::new("sysctl", "plain").apply(&w.event("plain")))
        .resource(
            ResourceSpec::new("exec", "later")
                .exec(&counting(&w, "later", 1), exec_policy(Rerun::Always)),
        );
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 3);
    assert_eq!(
        (runs(&w, "first"), runs(&w, "breaks"), runs(&w, "later")),
        (1, 1, 0)
    );
    assert_eq!(w.events(), vec!["plain"], "non-exec resources go on");
    assert!(
        stdout(&out).contains("halted: `exec:breaks` failed with on-failure halt"),
        "{}",
        stdout(&out)
    );
}

fn wait_for(path: &Path, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn background_scripts_do_not_block_and_their_result_is_collected_next_time() {
    let w = World::new();
    let marker = w.root().join("bg-done");
    let mut policy = exec_policy(Rerun::OnceSuccessfully);
    policy.background = true;
    // It runs until the test lets it go (or a minute passes): an apply that waited for it
    // would take that minute, whatever the machine's load.
    let go = w.root().join("go");
    let script = format!(
        "#!/bin/sh\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done\necho run >> '{}'\n",
        go.display(),
        marker.display()
    );
    let spec = BundleSpec::new()
        .resource(ResourceSpec::new("exec", "bg").exec(&script, policy))
        .resource(ResourceSpec::new("sysctl", "after-bg").apply(&w.event("after")));
    let bundle = w.build(&spec);
    let started = Instant::now();
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "apply waited for the background run"
    );
    assert!(!marker.exists());
    assert!(stdout(&out).contains("exec:bg"), "{}", stdout(&out));
    assert!(stdout(&out).contains("started"), "{}", stdout(&out));
    assert_eq!(w.events(), vec!["after"]);

    // While it runs, it is not started again.
    let out = w.apply(&bundle, &[]);
    assert!(
        stdout(&out).contains("still running in the background"),
        "{}",
        stdout(&out)
    );

    std::fs::write(&go, "").unwrap();
    assert!(wait_for(&marker, 10));
    let result = w.root().join("var/lib/bell/log/exec/bg/background.json");
    assert!(wait_for(&result, 10));
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(stdout(&out).contains("succeeded once"), "{}", stdout(&out));
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.root().join("var/lib/bell/state.json")).unwrap())
            .unwrap();
    assert_eq!(state["resources"]["exec:bg"]["result"], "ok");
    assert_eq!(state["resources"]["exec:bg"]["exec"]["runs"], 1);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "run\n");
}

#[test]
fn a_background_script_that_times_out_is_killed_and_recorded_failed() {
    let w = World::new();
    let marker = w.root().join("never");
    let mut policy = exec_policy(Rerun::OnceSuccessfully);
    policy.background = true;
    policy.timeout = 1;
    let script = format!(
        "#!/bin/sh\n(sleep 3; touch '{m}') &\nsleep 3\ntouch '{m}'\n",
        m = marker.display()
    );
    let spec = BundleSpec::new().resource(ResourceSpec::new("exec", "bg").exec(&script, policy));
    let bundle = w.build(&spec);
    expect_code(&w.apply(&bundle, &[]), 0);
    assert!(wait_for(
        &w.root().join("var/lib/bell/log/exec/bg/background.json"),
        10
    ));
    std::thread::sleep(Duration::from_secs(3));
    assert!(!marker.exists());
    // Collected as a failure and, with no retry interval, run again.
    let out = w.apply(&bundle, &[]);
    assert!(
        stdout(&out).contains("retrying after a failure"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn args_and_env_reach_the_script_exactly() {
    let w = World::new();
    let out_args = w.root().join("args");
    let out_env = w.root().join("env");
    let hostile = [
        "$(touch /tmp/bell-pwned)",
        "a b  c",
        "'\"`;|&<>*?",
        "",
        "-n",
        "line\nbreak",
        "\\x41 %s %n",
        "ünïcode",
    ];
    let mut policy = exec_policy(Rerun::Always);
    policy.args = hostile.iter().map(|s| s.to_string()).collect();
    policy
        .env
        .insert("HOSTILE".into(), "$(id) `id` ; rm -rf / \n\t'\"".into());
    policy.env.insert("EMPTY".into(), String::new());
    // bash, not sh: the shebang is honoured.
    let script = format!(
        "#!/usr/bin/env bash\n[[ -n \"$BASH_VERSION\" ]] || exit 9\nprintf '%s\\0' \"$#\" \"$@\" > '{}'\nprintf '%s\\0' \"$HOSTILE\" \"${{EMPTY-unset}}\" \"$BELL_OFFLINE\" \"$BELL_ROOT\" \"$BELL_STATE\" \"$PWD\" > '{}'\n",
        out_args.display(),
        out_env.display()
    );
    let spec =
        BundleSpec::new().resource(ResourceSpec::new("exec", "quoted").exec(&script, policy));
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 0);
    let args = std::fs::read(&out_args).unwrap();
    let mut want = format!("{}\0", hostile.len()).into_bytes();
    for h in hostile {
        want.extend_from_slice(h.as_bytes());
        want.push(0);
    }
    assert_eq!(
        String::from_utf8_lossy(&args),
        String::from_utf8_lossy(&want)
    );
    let env = std::fs::read_to_string(&out_env).unwrap();
    let fields: Vec<&str> = env.split('\0').collect();
    assert_eq!(fields[0], "$(id) `id` ; rm -rf / \n\t'\"");
    assert_eq!(fields[1], "", "an empty value is set, not dropped");
    assert_eq!(fields[2], "1", "offline, since the root is not /");
    assert_eq!(fields[3], w.root().to_str().unwrap());
    assert!(fields[4].starts_with(
        w.root()
            .join("var/lib/bell/state/exec/quoted")
            .to_str()
            .unwrap()
    ));
    assert!(
        fields[5].starts_with(w.root().join("var/lib/bell/generations").to_str().unwrap()),
        "cwd is the bundle"
    );
    assert!(!Path::new("/tmp/bell-pwned").exists());
    assert_eq!(
        mode_of(Path::new(fields[4])),
        0o700,
        "BELL_STATE is private"
    );
}

#[test]
fn a_script_without_a_shebang_fails_clearly() {
    let w = World::new();
    let spec = BundleSpec::new()
        .resource(ResourceSpec::new("exec", "bare").exec("echo hi\n", exec_policy(Rerun::Always)));
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 3);
    assert!(
        stdout(&out).contains("give the script a `#!` line"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_exec_env_cannot_override_bell_runs_own_variables() {
    // A hand-made bundle (bellc refuses these names) telling the script it runs live, on `/`,
    // while an image root is baked offline.
    let w = World::new();
    let mut policy = exec_policy(Rerun::Always);
    policy.env.insert("BELL_OFFLINE".into(), "0".into());
    policy.env.insert("BELL_ROOT".into(), "/".into());
    policy.env.insert("MINE".into(), "kept".into());
    let seen = w.root().join("seen");
    let script = format!(
        "#!/bin/sh\necho \"$BELL_OFFLINE $BELL_ROOT $MINE\" > '{}'\n",
        seen.display()
    );
    let bundle = w.build(
        &BundleSpec::new().resource(ResourceSpec::new("exec", "bake").exec(&script, policy)),
    );
    expect_code(&w.apply(&bundle, &[]), 0);
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        format!("1 {} kept\n", w.root().display())
    );
}

/// Divingbell's four unimplemented options, on the injected clock and a simulated boot (a
/// changed `BELL_RUN_BOOT_ID`).
#[test]
fn interval_persistence_and_max_counts_follow_the_boot() {
    let w = World::new();
    let mut boot_rerun = exec_policy(Rerun::Always);
    boot_rerun.rerun_interval = Some(100);
    boot_rerun.rerun_interval_persist = false;
    let mut kept_rerun = exec_policy(Rerun::Always);
    kept_rerun.rerun_interval = Some(100);
    let mut boot_retry = exec_policy(Rerun::OnceSuccessfully);
    boot_retry.retry_interval = Some(100);
    boot_retry.retry_interval_persist = false;
    let mut max_reruns = exec_policy(Rerun::Always);
    max_reruns.rerun_max_count = Some(2);
    let mut max_retries = exec_policy(Rerun::Always);
    max_retries.retry_max_count = Some(2);
    let spec = BundleSpec::new()
        .resource(
            ResourceSpec::new("exec", "boot-rerun")
                .exec(&counting(&w, "boot-rerun", 1), boot_rerun),
        )
        .resource(
            ResourceSpec::new("exec", "kept-rerun")
                .exec(&counting(&w, "kept-rerun", 1), kept_rerun),
        )
        .resource(
            ResourceSpec::new("exec", "boot-retry")
                .exec(&counting(&w, "boot-retry", 3), boot_retry),
        )
        .resource(
            ResourceSpec::new("exec", "max-reruns")
                .exec(&counting(&w, "max-reruns", 1), max_reruns),
        )
        .resource(
            ResourceSpec::new("exec", "max-retries")
                .exec(&counting(&w, "max-retries", 99), max_retries),
        );
    let bundle = w.build(&spec);
    let names = [
        "boot-rerun",
        "kept-rerun",
        "boot-retry",
        "max-reruns",
        "max-retries",
    ];
    let at = |t: &str, boot: &str| {
        let out = w.apply_env(
            &bundle,
            &[],
            &[("BELL_RUN_NOW", t), ("BELL_RUN_BOOT_ID", boot)],
        );
        let counts: Vec<usize> = names.iter().map(|n| runs(&w, n)).collect();
        (counts, stdout(&out))
    };
    // Boot A: the first runs, then reruns and retries until the counts stop them.
    assert_eq!(at("1000", "A").0, [1, 1, 1, 1, 1]);
    assert_eq!(at("1010", "A").0, [1, 1, 1, 2, 2]);
    assert_eq!(at("1020", "A").0, [1, 1, 1, 3, 3]);
    let (counts, out) = at("1030", "A");
    assert_eq!(counts, [1, 1, 1, 3, 3]);
    assert!(out.contains("rerun-max-count 2"), "{out}");
    assert!(out.contains("retry-max-count 2"), "{out}");
    // Boot B: the first apply ignores the intervals that do not persist, and the counts start
    // again; an interval that persists still waits.
    let (counts, out) = at("1040", "B");
    assert_eq!(counts, [2, 1, 2, 4, 4]);
    assert!(out.contains("rerun-interval-persist is false"), "{out}");
    assert!(out.contains("next run at 1100"), "{out}");
    // Still boot B: the intervals hold again.
    assert_eq!(at("1050", "B").0, [2, 1, 2, 5, 5]);
    assert_eq!(at("1060", "B").0, [2, 1, 2, 5, 5]);
    // The interval passes: the reruns run, and the retry succeeds (its third run): done.
    assert_eq!(at("1200", "B").0, [3, 2, 3, 5, 5]);
    assert_eq!(at("5000", "C").0, [4, 3, 3, 6, 6]);
}

#[test]
fn a_script_that_failed_before_is_not_a_first_run() {
    let w = World::new();
    let spec = BundleSpec::new().resource(ResourceSpec::new("exec", "flaky").exec(
        &counting(&w, "flaky", 2),
        exec_policy(Rerun::OnceSuccessfully),
    ));
    let bundle = w.build(&spec);
    let first = w.apply(&bundle, &[]);
    expect_code(&first, 3);
    let second = w.apply(&bundle, &[]);
    expect_code(&second, 0);
    let text = stdout(&second);
    assert!(!text.contains("first run"), "{text}");
    assert!(text.contains("retrying after a failure"), "{text}");
    // A fixed script is a changed script, not a first run.
    let spec = BundleSpec::new().resource(
        ResourceSpec::new("exec", "flaky")
            .exec("#!/bin/sh\nexit 1\n", exec_policy(Rerun::OnceSuccessfully)),
    );
    w.apply(&w.build(&spec), &[]);
    let spec = BundleSpec::new().resource(
        ResourceSpec::new("exec", "flaky")
            .exec("#!/bin/sh\nexit 0\n", exec_policy(Rerun::OnceSuccessfully)),
    );
    let fixed = w.apply(&w.build(&spec), &[]);
    expect_code(&fixed, 0);
    let text = stdout(&fixed);
    assert!(
        text.contains("the script changed since its last run, which failed"),
        "{text}"
    );
}

#[test]
fn a_timeout_too_long_to_be_an_instant_is_no_timeout_not_a_panic() {
    // bellc refuses more than a week; a manifest from elsewhere may say anything.
    let w = World::new();
    let mut policy = exec_policy(Rerun::Always);
    policy.timeout = u64::MAX;
    let bundle =
        w.build(&BundleSpec::new().resource(
            ResourceSpec::new("exec", "forever").exec(&counting(&w, "forever", 1), policy),
        ));
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_eq!(runs(&w, "forever"), 1);
}

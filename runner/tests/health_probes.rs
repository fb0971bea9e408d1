//! Health probes run after a clean apply and after a check, offline too, each until it passes
//! or has failed its attempts; the host is healthy when every one passes. A failing probe
//! makes the run exit 4 (the configuration stands), is named with its output, and is filed in
//! the report apart from failures.
use crate::common::*;

/// Counts its attempts in its state directory and passes from the `pass_at`-th on.
fn passes_at(pass_at: u32) -> String {
    format!(
        "n=$(($(cat \"$BELL_STATE/n\" 2>/dev/null || echo 0) + 1)); echo $n > \"$BELL_STATE/n\"\n\
         [ $n -ge {pass_at} ] || {{ echo \"attempt $n: not yet\"; exit 1; }}\n"
    )
}

fn bundle(api: &str) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/motd", "hi\n", "0644")
        .resource(ResourceSpec::new("file", "/etc/motd").files(&["/etc/motd"]))
        .probe(
            "env",
            // Written under the root: an offline probe can write nothing else.
            "echo ran >> \"$BELL_ROOT/probe-env-ran\"\ntest -f \"$BELL_ROOT/etc/motd\" && test \"$BELL_OFFLINE\" = 1 && test \"$BELL_RESOURCE\" = health:env && test -f bundle.json\n",
            1,
            1,
        )
        .probe("slow-start", &passes_at(3), 3, 1)
        .probe("api", api, 2, 1)
}

fn report(w: &World) -> serde_json::Value {
    let text = std::fs::read_to_string(w.tmp.path().join("reports/h1.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn probes_run_after_the_apply_and_a_failing_one_exits_4_with_its_output() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let sinks = [
        "--offline",
        "--host",
        "h1",
        "--report",
        reports.to_str().unwrap(),
    ];
    let metrics = w.tmp.path().join("bell.prom");
    let dir = w.build(&bundle("echo 'connection refused' >&2\nexit 7\n"));
    let mut first = sinks.to_vec();
    first.extend(["--metrics", metrics.to_str().unwrap()]);
    let out = w.apply(&dir, &first);
    expect_code(&out, 4);
    let scraped = std::fs::read_to_string(&metrics).unwrap();
    for line in [
        "bell_health_probe_success{probe=\"api\"} 0",
        "bell_health_probe_success{probe=\"env\"} 1",
        "bell_last_run_success{command=\"apply\"} 0",
        "bell_last_apply_success 1",
    ] {
        assert!(
            scraped.lines().any(|l| l == line),
            "no `{line}` in\n{scraped}"
        );
    }
    let text = stdout(&out);
    assert!(text.contains("+ file:/etc/motd  ok"), "{text}");
    assert!(
        text.contains(
            "health api         unhealthy after 2 attempts: exit 7: connection refused (output in "
        ),
        "{text}"
    );
    assert!(
        text.contains("health slow-start  healthy (3 attempts)"),
        "{text}"
    );
    assert!(
        text.contains("health: unhealthy, 1 of 3 probes fail: api"),
        "{text}"
    );
    // The probe saw the root, offline, its own name, and ran from the bundle.
    assert_eq!(
        std::fs::read_to_string(w.root().join("probe-env-ran")).unwrap(),
        "ran\n"
    );

    // The report keeps configuration and health apart.
    let rep = report(&w);
    assert_eq!(rep["result"], "unhealthy");
    assert_eq!(rep["status"]["apply"], "success");
    assert_eq!(rep["status"]["health"], "unhealthy");
    // In the bundle's order (bellc sorts them by name).
    assert_eq!(rep["health"][2]["name"], "api");
    assert_eq!(rep["health"][2]["healthy"], false);
    assert_eq!(rep["health"][2]["attempts"], 2);
    assert_eq!(rep["health"][2]["detail"], "exit 7: connection refused");
    assert_eq!(rep["health"][1]["attempts"], 3);

    // A check runs them again after its own scripts: still unhealthy.
    let out = w.run(&[
        "check",
        "--root",
        w.root().to_str().unwrap(),
        "--offline",
        "--json",
    ]);
    expect_code(&out, 4);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["result"], "unhealthy");
    assert_eq!(json["health"][1]["healthy"], true);

    // The service comes up: the next apply is healthy, and so is the report.
    let dir = w.build(&bundle("exit 0\n"));
    let mut args = sinks.to_vec();
    args.push("--json");
    let out = w.apply(&dir, &args);
    expect_code(&out, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["result"], "ok");
    assert_eq!(report(&w)["status"]["health"], "success");
    assert_eq!(report(&w)["result"], "success");
}

#[test]
fn a_probe_that_hangs_is_killed_at_its_timeout() {
    let w = World::new();
    // The probe's child (in the background, as a daemon a probe started would be) writes its
    // pid: the whole process group must die, not only the shell.
    let pid_file = w.root().join("sleeper.pid");
    let probe = format!(
        "echo waiting\nsleep 30 &\necho $! > '{}'\nwait\n",
        pid_file.display()
    );
    let spec = BundleSpec::new().probe_timeout("hang", &probe, 1, 1, 1);
    let dir = w.build(&spec);
    let started = std::time::Instant::now();
    let out = w.apply(&dir, &["--offline"]);
    expect_code(&out, 4);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let pid = std::fs::read_to_string(&pid_file).expect("the probe started its child");
    let proc = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
    // Killed, it is gone once reaped; a zombie waiting for that is dead too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let alive = || {
        std::fs::read_to_string(proc.join("stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !alive(),
        "the probe's child {} outlived its timeout",
        pid.trim()
    );
    assert!(
        stdout(&out).contains(
            "unhealthy after 1 attempt: timed out after 1s; its process group was killed: waiting"
        ),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_failed_apply_runs_no_probes() {
    let w = World::new();
    let spec = BundleSpec::new()
        .resource(ResourceSpec::new("exec", "broken").apply("exit 1\n"))
        .probe("p", &w.event("probe"), 1, 1);
    let out = w.apply(&w.build(&spec), &["--offline", "--json"]);
    expect_code(&out, 3);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["result"], "failed");
    assert!(json.get("health").is_none(), "{json}");
    assert!(w.events().is_empty());
}

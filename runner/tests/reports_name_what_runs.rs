//! A report names the bundle and release the host runs: the release an apply was given is kept
//! in bell-run's state, so a `check` or a re-apply that is not told one still reports it, and
//! a refused apply reports the bundle and release still applied, and the release it refused
//! apart (`refused_release`).
use crate::common::*;

fn report(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("h1.json")).unwrap()).unwrap()
}

#[test]
fn check_and_refused_runs_report_what_is_still_applied() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let root = w.root();
    let sinks = ["--host", "h1", "--report", reports.to_str().unwrap()];
    let a = w.build(&BundleSpec::new().file("/etc/motd", "one\n", "0644"));
    let a_id = a.file_name().unwrap().to_str().unwrap().to_string();
    let mut args = sinks.to_vec();
    args.extend(["--release", "r1"]);
    expect_code(&w.apply(&a, &args), 0);
    assert_eq!(report(&reports)["release"], "r1");

    // A check is not told the release: it reports the one applied.
    let mut check = vec!["check", "--root", root.to_str().unwrap()];
    check.extend(sinks);
    expect_code(&w.run(&check), 0);
    let rep = report(&reports);
    assert_eq!(rep["command"], "check");
    assert_eq!(rep["release"], "r1", "{rep}");
    assert_eq!(rep["bundle"], a_id.as_str());
    // So does the timer's re-apply of the current generation.
    expect_code(&w.apply(&a, &sinks), 0);
    assert_eq!(report(&reports)["release"], "r1");

    // Release r2's bundle was tampered with: refused, and the host still runs r1's bundle.
    let b = w.build(&BundleSpec::new().file("/etc/motd", "two\n", "0644"));
    std::fs::write(b.join("root/etc/motd"), "tampered\n").unwrap();
    let mut args = sinks.to_vec();
    args.extend(["--release", "r2"]);
    expect_code(&w.apply(&b, &args), 1);
    let rep = report(&reports);
    assert_eq!(rep["result"], "failed");
    assert!(rep["error"].as_str().unwrap().contains("etc/motd"), "{rep}");
    assert_eq!(rep["bundle"], a_id.as_str(), "{rep}");
    assert_eq!(rep["release"], "r1", "{rep}");
    // And names what it refused, so a rollout of a later release can tell it is not its own.
    assert_eq!(rep["refused_release"], "r2", "{rep}");

    // A bundle applied without a release is not filed under the old one.
    let c = w.build(&BundleSpec::new().file("/etc/motd", "three\n", "0644"));
    expect_code(&w.apply(&c, &sinks), 0);
    assert!(report(&reports)["refused_release"].is_null());
    assert!(
        report(&reports)["release"].is_null(),
        "{}",
        report(&reports)
    );
}

#[test]
fn why_a_script_failed_reaches_the_report_unless_it_carries_a_secret() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let noisy: String = (1..=30).map(|i| format!("echo 'line {i}'\n")).collect();
    let spec = BundleSpec::new()
        .file("/etc/app.key", "PRIVATE\n", "0600")
        .resource(ResourceSpec::new("exec", "warm-cache").apply(&format!(
            "{noisy}echo 'cache dir /srv/cache missing' >&2\nexit 1\n"
        )))
        .resource(
            ResourceSpec::new("file", "/etc/app.key")
                .files(&["/etc/app.key"])
                .apply("echo 'the key is PRIVATE'\nexit 1\n"),
        );
    let out = w.apply(
        &w.build(&spec),
        &["--host", "h1", "--report", reports.to_str().unwrap()],
    );
    expect_code(&out, 3);
    let rep = report(&reports);
    let result = |key: &str| {
        rep["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap()
            .clone()
    };
    let warm = result("exec:warm-cache");
    let output = warm["output"].as_str().unwrap();
    assert!(
        output.ends_with("line 30\ncache dir /srv/cache missing"),
        "{output}"
    );
    assert_eq!(output.lines().count(), 20, "bounded: {output}");
    let key = result("file:/etc/app.key");
    let output = key["output"].as_str().unwrap();
    assert!(!output.contains("PRIVATE"), "{output}");
    assert!(output.contains("withheld"), "{output}");
}

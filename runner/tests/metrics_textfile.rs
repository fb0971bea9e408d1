//! `--metrics FILE`: the textfile-collector file parses as Prometheus text format and carries
//! the generation info, the last apply's time and result, the drifted count and the resource
//! counts per kind; it is written beside and renamed, never left half-written.
use crate::common::*;
use prometheus_parse::{Scrape, Value};

fn scrape(path: &std::path::Path) -> Scrape {
    let text = std::fs::read_to_string(path).unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

fn gauge(s: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no {name} {label:?}"));
    match sample.value {
        Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{name} is {other:?}"),
    }
}

#[test]
fn metrics_parse_and_follow_apply_and_check() {
    let w = World::new();
    let live = w.tmp.path().join("live");
    let b = w.build(
        &BundleSpec::new()
            .file("/etc/a.conf", "a\n", "0644")
            .resource(ResourceSpec::new("conf", "a").files(&["/etc/a.conf"]))
            .resource(ResourceSpec::new("sysctl", "x").apply("exit 0\n"))
            .resource(ResourceSpec::new("sysctl", "y").apply("exit 0\n"))
            .resource(
                ResourceSpec::new("live", "v")
                    .apply(&format!("echo 1 > '{}'\n", live.display()))
                    .check(&format!(
                        "[ \"$(cat '{}')\" = 1 ] || exit 2\n",
                        live.display()
                    )),
            ),
    );
    let metrics = w.tmp.path().join("bell.prom");
    let m = metrics.to_str().unwrap();
    // A host name with the characters the format must escape.
    let host = "odd\"host\\name";
    let out = w.apply_env(
        &b,
        &["--metrics", m, "--host", host, "--release", "v7"],
        &[("BELL_RUN_NOW", "1700000000")],
    );
    expect_code(&out, 0);
    assert!(!w.tmp.path().join("bell.prom.tmp").exists());
    let s = scrape(&metrics);
    let id = b.file_name().unwrap().to_str().unwrap();
    assert_eq!(gauge(&s, "bell_generation_info", Some(("bundle", id))), 1.0);
    let info = s
        .samples
        .iter()
        .find(|x| x.metric == "bell_generation_info")
        .unwrap();
    assert_eq!(info.labels.get("release"), Some("v7"));
    assert_eq!(info.labels.get("fleet"), Some("test"));
    // prometheus-parse hands label values back as written, escapes included.
    assert_eq!(info.labels.get("host"), Some(r#"odd\"host\\name"#));
    assert_eq!(
        gauge(&s, "bell_last_apply_timestamp_seconds", None),
        1_700_000_000.0
    );
    assert_eq!(gauge(&s, "bell_last_apply_success", None), 1.0);
    assert_eq!(gauge(&s, "bell_drifted_resources", None), 0.0);
    assert_eq!(gauge(&s, "bell_resources", Some(("kind", "sysctl"))), 2.0);
    assert_eq!(gauge(&s, "bell_resources", Some(("kind", "conf"))), 1.0);
    assert_eq!(gauge(&s, "bell_resources", Some(("kind", "live"))), 1.0);
    assert_eq!(
        gauge(&s, "bell_last_run_success", Some(("command", "apply"))),
        1.0
    );

    // Drift on the file and the live value: the check's metrics count both and keep the
    // last apply's time and result.
    std::fs::write(w.root().join("etc/a.conf"), "changed\n").unwrap();
    std::fs::write(&live, "0\n").unwrap();
    let root = w.root();
    let out = w.run(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--metrics",
        m,
        "--host",
        "h",
    ]);
    expect_code(&out, 2);
    let s = scrape(&metrics);
    assert_eq!(gauge(&s, "bell_drifted_resources", None), 2.0);
    assert_eq!(
        gauge(&s, "bell_last_run_success", Some(("command", "check"))),
        0.0
    );
    assert_eq!(
        gauge(&s, "bell_last_apply_timestamp_seconds", None),
        1_700_000_000.0
    );
    assert_eq!(gauge(&s, "bell_last_apply_success", None), 1.0);
    // One file holds every command's series: the apply's are still there, and so is the
    // release the apply was given (the check was not told it).
    assert_eq!(
        gauge(&s, "bell_last_run_success", Some(("command", "apply"))),
        1.0
    );
    assert_eq!(
        gauge(
            &s,
            "bell_last_run_timestamp_seconds",
            Some(("command", "apply"))
        ),
        1_700_000_000.0
    );
    let info = s
        .samples
        .iter()
        .find(|x| x.metric == "bell_generation_info")
        .unwrap();
    assert_eq!(info.labels.get("release"), Some("v7"));
    // Prometheus' own linter reads the file the way the node exporter's textfile collector does.
    if bell_testkit::tool("promtool") {
        let out = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::fs::File::open(&metrics).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

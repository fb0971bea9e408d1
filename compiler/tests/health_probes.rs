//! `health` probes in the spec: placed at the top, per label or per host like any resource,
//! rendered into the manifest's `probes` (each a script, in name order), checked at build
//! time with every mistake pointing at its value, and run by the real bell-run after an apply;
//! `bellc status` shows a host whose configuration applied but whose probe fails as
//! `unhealthy`, apart from `failed`.
use crate::common::fleet::*;
use crate::common::*;

const SPEC: &str = r#"fleet "lab" target="debian-12"
host "web-1" role="web"
host "web-2" role="web"
host "db-1" role="db"
file "/etc/motd" {
    content "hi\n"
}
health "motd" offline="root" {
    run "test -f \"$BELL_ROOT/etc/motd\""
}
override "web" {
    match role="web"
    health "api" timeout="5s" retries=2 interval="1s" offline="root" {
        run "test -e \"$BELL_ROOT/run/api.ok\" || { echo 'api: connection refused' >&2; exit 7; }"
    }
}
override "slow" {
    match host="web-2"
    health "api" retries=4
}
"#;

fn probes(f: &Fixture, host: &str) -> Vec<bell_bundle::Probe> {
    let dir = f.path().join("out/hosts").join(host);
    bell_bundle::verify_dir(&dir).unwrap().probes
}

#[test]
fn probes_render_per_host_in_name_order_with_their_policy() {
    let f = Fixture::spec(SPEC);
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = |host| {
        probes(&f, host)
            .into_iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names("db-1"), ["motd"]);
    assert_eq!(names("web-1"), ["api", "motd"]);
    let web1 = probes(&f, "web-1");
    assert_eq!(
        (web1[0].timeout, web1[0].retries, web1[0].interval),
        (5, 2, 1)
    );
    assert_eq!(
        (web1[1].timeout, web1[1].retries, web1[1].interval),
        (10, 3, 2)
    );
    // The host override changes what it names and keeps the rest.
    let web2 = probes(&f, "web-2");
    assert_eq!(
        (web2[0].timeout, web2[0].retries, web2[0].interval),
        (5, 4, 1)
    );

    // The script is the user's line under a header that says how it is run.
    let script =
        std::fs::read_to_string(f.path().join("out/hosts/web-1").join(&web1[0].script.path))
            .unwrap();
    assert!(script.starts_with("# health probe `api`"), "{script}");
    assert!(script.ends_with("exit 7; }\n"), "{script}");
    if have("shellcheck") {
        let path = f.path().join("out/hosts/web-1").join(&web1[0].script.path);
        let out = std::process::Command::new("shellcheck")
            .args(["-s", "sh"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn every_mistake_in_a_probe_is_reported_in_one_run() {
    let f = Fixture::spec(
        r##"fleet "lab" target="debian-12"
host "h"
health "a" timeout="1.5s" {
    run "true"
}
health "b" retries=0 interval="2h" {
    run "true"
}
health "c" {
    run "  "
}
health "d" timeout="infinite" {
    run "true"
}
health "no spaces" {
    run "true"
}
exec "x.sh" {
    script "#!/bin/sh\ntrue\n"
    after "health:ok"
}
health "ok" {
    run "true"
}
"##,
    );
    let run = f.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    let has = |at: &str, text: &str| {
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with(&format!("bell.kdl:{at}:")) && d.contains(text)),
            "no `{text}` at {at}:\n{}",
            diags.join("\n")
        )
    };
    has("3:12", "expects a duration such as 90, \"90s\"");
    has("6:12", "`retries` must be between 1 and 3600");
    has("6:22", "`interval` must be between 1s and 1h");
    has("10:9", "`health:c` runs nothing");
    has("12:12", "found the string \"infinite\"");
    has("15:8", "no spaces");
    has("20:5", "`exec:x.sh` waits for `health:ok`, a health probe");
    assert_eq!(diags.len(), 7, "{}", diags.join("\n"));
}

#[test]
fn a_host_whose_probe_fails_is_unhealthy_not_failed() {
    let bin = bell_run();
    let f = Fixture::spec(SPEC);
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let reports = f.path().join("reports");
    let roots = tempfile::tempdir().unwrap();
    let apply = |host: &str| {
        let root = roots.path().join(host);
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
        if host == "web-1" {
            std::fs::create_dir_all(root.join("run")).unwrap();
            std::fs::write(root.join("run/api.ok"), "").unwrap();
        }
        let bundle = f.path().join("out/hosts").join(host);
        let args = [
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
            "--offline",
            "--report",
            reports.to_str().unwrap(),
            "--host",
            host,
        ];
        run_bin(&bin, &args, &[])
    };
    for host in ["web-1", "db-1"] {
        let out = apply(host);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
    }
    let out = apply("web-2");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));

    let status = f.bellc(&["status", "out", "--store", reports.to_str().unwrap()]);
    assert_eq!(
        status.code, 3,
        "an unhealthy host needs someone: {}",
        status.stdout
    );
    // Under the header, the unhealthy host first.
    let first = status.stdout.lines().nth(1).unwrap();
    assert!(first.starts_with("web-2"), "{}", status.stdout);
    assert!(
        first.contains("unhealthy")
            && first.contains("health probe api (exit 7: api: connection refused)"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.trim_end().ends_with(
            "0 failed, 0 reverted, 1 unhealthy, 0 unaccounted, 0 unreadable, 0 unverified, 0 drifted, 0 pending, 0 deferred, 0 held, 2 up-to-date, 0 unknown, 0 discovered"
        ),
        "{}",
        status.stdout
    );
    let json = f.bellc(&[
        "status",
        "out",
        "--store",
        reports.to_str().unwrap(),
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["hosts"][0]["state"], "unhealthy", "{json}");
    assert_eq!(json["counts"]["unhealthy"], 1, "{json}");
}

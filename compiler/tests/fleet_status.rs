//! `bellc status`: bundles applied with the real bell-run to several temporary roots, reports
//! filed to a real etcd (and, the same scenario, to a directory). One host fails on purpose,
//! one never reports, one reported too long ago, one is still on the previous release, one
//! drifted, and one host outside the release reports: every host gets the right state, the
//! failed host comes first, and the exit code says that someone must look.
use crate::common;
use crate::common::fleet::*;
use crate::common::*;
use std::path::Path;

fn spec(swappiness: u32) -> String {
    format!(
        r#"fleet "lab" target="debian-12"
host "ok-1" address="10.0.0.1" role="web"
host "ok-2" address="10.0.0.2" role="web"
host "broken" address="10.0.0.3" role="web"
host "silent" address="10.0.0.4" role="web"
host "old" address="10.0.0.5" role="web"
host "behind" address="10.0.0.6" role="web"
host "drifty" address="10.0.0.7" role="web"
sysctl {{
    vm.swappiness {swappiness}
}}
limit "nofile" domain="*" type="soft" item="nofile" value=4096
apt-source "debian" url="http://snapshot.example/debian/{{snapshot}}" snapshot="s{swappiness}" suites="./"
"#
    )
}

fn build(f: &Fixture, out: &str) -> bell_bundle::Release {
    let run = f.bellc(&["build", "bell.kdl", "-o", out]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&std::fs::read_to_string(f.path().join(out).join("release.json")).unwrap())
        .unwrap()
}

/// Runs the fleet through its day and returns `bellc status --json` for `source`.
fn scenario(dest: &str) -> (serde_json::Value, i32, Fixture, String) {
    let bin = bell_run();
    let f = Fixture::spec(&spec(10));
    let v1 = build(&f, "v1");
    std::fs::write(f.path().join("bell.kdl"), spec(20)).unwrap();
    let v2 = build(&f, "v2");
    assert_ne!(v1.version, v2.version);
    let roots = tempfile::tempdir().unwrap();
    let apply = |host: &str, out: &str, version: &str, env: &[(&str, &str)]| {
        let root = roots.path().join(host);
        std::fs::create_dir_all(&root).unwrap();
        let bundle = f.path().join(out).join("hosts").join(host);
        run_bin(
            &bin,
            &[
                "apply",
                bundle.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
                "--report",
                dest,
                "--host",
                host,
                "--release",
                version,
            ],
            env,
        )
    };
    for host in ["ok-1", "ok-2", "drifty"] {
        let out = apply(host, "v2", &v2.version, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    // The previous release only.
    let out = apply("behind", "v1", &v1.version, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Reported, but three hours ago.
    let long_ago = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3 * 3600)
        .to_string();
    let out = apply("old", "v2", &v2.version, &[("BELL_RUN_NOW", &long_ago)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // In etcd, liveness is the host's lease, not its report's age: this host went silent, and
    // its lease ended (revoked here rather than waited for).
    if let Ok(store) = bell_store::Etcd::parse(dest) {
        let lease = std::fs::read_to_string(roots.path().join("old/var/lib/bell/lease.json"))
            .expect("an etcd report leaves a lease");
        let lease: serde_json::Value = serde_json::from_str(&lease).unwrap();
        store.revoke_lease(lease["id"].as_i64().unwrap()).unwrap();
    }
    // A root where the limits directory is a file: the file switch cannot happen.
    let broken = roots.path().join("broken");
    std::fs::create_dir_all(broken.join("etc/security")).unwrap();
    std::fs::write(broken.join("etc/security/limits.d"), "not a directory\n").unwrap();
    let out = apply("broken", "v2", &v2.version, &[]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    // A host the release does not know, applying some bundle (by its id: through
    // `hosts/ok-1` it would be refused as ok-1's).
    let stranger = roots.path().join("stranger");
    std::fs::create_dir_all(&stranger).unwrap();
    let bundle = std::fs::canonicalize(f.path().join("v2/hosts/ok-1")).unwrap();
    let out = run_bin(
        &bin,
        &[
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            stranger.to_str().unwrap(),
            "--report",
            dest,
            "--host",
            "stranger",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Drift behind bell's back on one host, found by a check.
    let drifty = roots.path().join("drifty");
    std::fs::write(
        drifty.join("etc/sysctl.d/60-bell.conf"),
        "vm.swappiness = 99\n",
    )
    .unwrap();
    let out = run_bin(
        &bin,
        &[
            "check",
            "--root",
            drifty.to_str().unwrap(),
            "--report",
            dest,
            "--host",
            "drifty",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    let source = if dest.starts_with("etcd://") {
        "--store"
    } else {
        "--reports"
    };
    let status = f.bellc(&["status", "v2", source, dest, "--stale", "60", "--json"]);
    assert!(status.stderr.is_empty(), "{}", status.stderr);
    let value: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    (value, status.code, f, v2.version)
}

fn check_status(dest: &str) -> Fixture {
    let (value, code, f, version) = scenario(dest);
    assert_eq!(code, 3, "failed and unaccounted hosts need someone: exit 3");
    let states: Vec<(String, String)> = value["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                h["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("broken", "failed"),
        ("old", "unaccounted"),
        ("silent", "unaccounted"),
        ("drifty", "drifted"),
        ("behind", "pending"),
        ("ok-1", "up-to-date"),
        ("ok-2", "up-to-date"),
        ("stranger", "unknown"),
    ]
    .iter()
    .map(|(h, s)| (h.to_string(), s.to_string()))
    .collect();
    assert_eq!(states, expected, "failed hosts first");
    let host = |name: &str| common::row(&value, name);
    assert!(
        host("broken")["detail"]
            .as_str()
            .unwrap()
            .contains("limits.d/60-bell.conf` cannot be created"),
        "{value:#}"
    );
    let silence = if dest.starts_with("etcd://") {
        "its liveness lease expired; last change reported 180 minutes ago"
    } else {
        "last report 180 minutes ago"
    };
    assert!(
        host("old")["detail"].as_str().unwrap().starts_with(silence),
        "{value:#}"
    );
    assert_eq!(host("silent")["detail"], "no report");
    assert_eq!(host("drifty")["detail"], "file:/etc/sysctl.d/60-bell.conf");
    assert_eq!(value["counts"]["up-to-date"], 2);
    assert_eq!(value["counts"]["unaccounted"], 2);
    assert_eq!(value["counts"]["failed"], 1);
    assert_eq!(
        value["versions"][&version], 4,
        "ok-1, ok-2, drifty and old said v2: {value:#}"
    );
    // Which package snapshot each host runs: the release's for its bundle, the host's own
    // report for the previous release's (and for a host the release does not know).
    let snapshot = |name: &str| host(name)["snapshots"]["debian"].clone();
    assert_eq!(snapshot("ok-1"), "s20", "{value:#}");
    assert_eq!(snapshot("drifty"), "s20", "{value:#}");
    assert_eq!(snapshot("behind"), "s10", "{value:#}");
    assert_eq!(snapshot("stranger"), "s20", "{value:#}");
    assert!(host("silent").get("snapshots").is_none(), "{value:#}");
    assert!(host("broken").get("snapshots").is_none(), "{value:#}");
    assert_eq!(
        value["snapshots"],
        serde_json::json!({ "debian": { "s10": 1, "s20": 5 } }),
        "ok-1, ok-2, drifty, old and stranger run s20: {value:#}"
    );
    // broken's apply was refused before anything changed: it runs nothing, and its report
    // says so rather than naming the bundle and release it refused.
    assert!(host("broken")["reported"].is_null(), "{value:#}");
    assert!(host("broken")["version"].is_null(), "{value:#}");

    // As a rollout gate.
    let source = if dest.starts_with("etcd://") {
        "--store"
    } else {
        "--reports"
    };
    let gate = |hosts: &str| {
        f.bellc(&[
            "status",
            "v2",
            source,
            dest,
            "--hosts",
            hosts,
            "--version",
            &version[..12],
        ])
    };
    let run = gate("ok-1,ok-2");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let run = gate("ok-1,behind,silent");
    assert_eq!(run.code, 3);
    assert!(run.stdout.contains("behind: pending"), "{}", run.stdout);
    assert!(run.stdout.contains("silent: unaccounted"), "{}", run.stdout);

    // The text form: a header, failures first, then the summary line.
    let run = f.bellc(&["status", "v2", source, dest, "--stale", "60"]);
    assert_eq!(run.code, 3);
    let mut lines = run.stdout.lines();
    assert!(lines.next().unwrap().starts_with("HOST "), "{}", run.stdout);
    assert!(
        lines.next().unwrap().starts_with("broken "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\nsnapshots of apt-source debian: s10 1, s20 5\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.trim_end().ends_with(
            "1 failed, 0 reverted, 0 unhealthy, 2 unaccounted, 0 unreadable, 0 unverified, 1 drifted, 1 pending, 0 deferred, 0 held, 2 up-to-date, 1 unknown, 0 discovered"
        ),
        "{}",
        run.stdout
    );
    f
}

#[test]
fn status_from_a_real_etcd() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let f = check_status(&etcd.url);

    // Keys that are not what bell-run writes, put with etcdctl by anyone: each spoils only its
    // own host's row, and `status` still answers for the fleet.
    let etcdctl = |key: &str, value: &str| {
        let out = std::process::Command::new("etcdctl")
            .args([
                &format!("--endpoints=http://{}", etcd.endpoint),
                "put",
                key,
                value,
            ])
            .env("ETCDCTL_API", "3")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    etcdctl("/bell/lab/running/ok-2", "bogus");
    etcdctl("/bell/lab/status/apply/zz", "bogus");
    etcdctl("/bell/lab/status/apply/ok-1", "failed");
    etcd.client()
        .put("/bell/lab/reports/check/behind", &[0xff, 0xfe, b'{'])
        .unwrap();
    let run = f.bellc(&["status", "v2", "--store", &etcd.url, "--json"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let row = |name: &str| common::row(&value, name);
    assert_eq!(row("ok-2")["state"], "unreadable", "{value:#}");
    let why = row("ok-2")["detail"].as_str().unwrap().to_string();
    assert!(
        why.contains("`/bell/lab/running/ok-2` is not a report"),
        "{why}"
    );
    assert_eq!(row("behind")["state"], "unreadable", "{value:#}");
    // A category key says nothing over the host's own report.
    assert_eq!(row("ok-1")["state"], "up-to-date", "{value:#}");
    assert_eq!(row("broken")["state"], "failed", "{value:#}");
    let head = f.bellc(&["status", "v2", "--store", &etcd.url]);
    assert!(head.stdout.contains(", 2 unreadable,"), "{}", head.stdout);

    // One state per category: the keys hold plain states.
    let client = etcd.client();
    assert_eq!(
        client.get("/bell/lab/status/apply/broken").unwrap(),
        Some(b"failed".to_vec())
    );
    assert_eq!(
        client.get("/bell/lab/status/check/drifty").unwrap(),
        Some(b"drifted".to_vec())
    );
    assert_eq!(
        client.get("/bell/lab/status/apply/drifty").unwrap(),
        Some(b"success".to_vec())
    );
    assert!(client.get("/bell/lab/running/silent").unwrap().is_none());
}

#[test]
fn status_from_a_report_directory() {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("reports");
    check_status(reports.to_str().unwrap());
    assert!(Path::new(&reports).join("broken.json").is_file());
}

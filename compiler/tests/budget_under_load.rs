//! The disruption budget under load, with health probes: a real three-member etcd cluster and
//! twelve image-root hosts in three racks (`max-unavailable=2`), all running `bell-run pull`
//! concurrently in loops toward a release in which one host's health probe fails. Each host's
//! change is timed by the release itself (an `exec` marks when the new bundle went live, the
//! probe when it is healthy, in nanoseconds): at no moment are more than two hosts of a rack
//! between the two, and never more than the free slots where airlock holds one. A watcher
//! reads the semaphores throughout. One member is killed midway; the failing host keeps its
//! slot, its rack's other hosts still finish, `bellc status` says `unhealthy`, and
//! `bellc lock release` frees it.

use crate::common::fleet::{bell_run, text, EtcdCluster};
use crate::common::pulling::racked_hosts as hosts;
use crate::common::pulling::*;
use crate::common::Fixture;
use bell_store::semaphore;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const FAILING: &str = "h02";

/// Release 1 sets the motd; release 2 changes it, marks when it went live and probes.
fn spec(release: u32) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for (host, rack) in hosts() {
        spec.push_str(&format!("host \"{host}\" rack=\"{rack}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"release {release}\\n\"\n}}\n\
         rollout batch-by=\"rack\" max-unavailable=2\n"
    ));
    if release == 2 {
        // Each host marks in its own root: an offline script can write nothing else.
        spec.push_str(&format!(
            "exec \"mark.sh\" offline=\"root\" rerun=\"once-successfully\" {{\n    \
                 script \"#!/bin/sh\\necho \\\"live $BELL_ROOT $(date +%s%N)\\\" >> \\\"$BELL_ROOT/timeline\\\"\\n\"\n}}\n\
             health \"api\" retries=1 offline=\"root\" {{\n    \
                 run \"sleep 0.3; echo \\\"healthy $BELL_ROOT $(date +%s%N)\\\" >> \\\"$BELL_ROOT/timeline\\\"\"\n}}\n\
             override \"broken\" {{\n    match host=\"{FAILING}\"\n    \
                 health \"api\" retries=2 interval=\"1s\" {{\n        \
                     run \"echo 'api: 503 Service Unavailable' >&2; exit 1\"\n    }}\n}}\n"
        ));
    }
    spec
}

/// Per root: when its new bundle went live and when it was first healthy after (ns).
fn intervals(roots: &[PathBuf]) -> BTreeMap<PathBuf, (u128, Option<u128>)> {
    let text: String = roots
        .iter()
        .map(|r| std::fs::read_to_string(r.join("timeline")).unwrap_or_default())
        .collect();
    let mut out: BTreeMap<PathBuf, (u128, Option<u128>)> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split(' ');
        let (what, root, at) = (words.next(), words.next(), words.next());
        let (Some(what), Some(root), Some(at)) = (what, root, at) else {
            panic!("a torn timeline line: {line:?}");
        };
        let at: u128 = at.parse().unwrap();
        let root = PathBuf::from(root);
        match what {
            "live" => assert!(
                out.insert(root, (at, None)).is_none(),
                "a host went live twice"
            ),
            "healthy" => {
                let entry = out.get_mut(&root).expect("healthy before it went live");
                entry.1.get_or_insert(at);
            }
            other => panic!("unknown mark {other}"),
        }
    }
    out
}

#[test]
fn a_release_with_a_failing_probe_never_takes_more_than_the_budget() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(mut etcd) = EtcdCluster::start() else {
        return;
    };
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for release in [1, 2] {
        std::fs::write(fx.path().join("bell.kdl"), spec(release)).unwrap();
        let out = format!("out{release}");
        let run = fx.bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        copy_over(&fx.path().join(&out), &fx.path().join("served"));
    }
    let served = fx.path().join("served");
    let source = served.to_str().unwrap().to_string();
    let trust = fx.path().join("ci.pub").to_str().unwrap().to_string();
    let url = etcd.url.clone();
    let args = [
        "--trust",
        &trust,
        "--store",
        &url,
        "--report",
        &url,
        "--fleet",
        "f",
        "--offline",
    ];
    let hosts = hosts();
    let roots: Vec<tempfile::TempDir> = hosts.iter().map(|_| image_root()).collect();
    let timeline: Vec<PathBuf> = roots.iter().map(|r| r.path().to_path_buf()).collect();
    let host_of: BTreeMap<PathBuf, (&str, &str)> = hosts
        .iter()
        .zip(&roots)
        .map(|((h, rack), r)| (r.path().to_path_buf(), (h.as_str(), *rack)))
        .collect();
    let publish = |out: &str| {
        let run = fx.bellc(&["publish", out, "--store", &url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    // Every host pulls in a loop until it is done: a waiting host (exit 10) tries again.
    let pull_until_done = |host: &str, root: &Path, motd_wanted: &str| -> i32 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let out = pull(&bin, &source, root, host, &args);
            match out.status.code() {
                Some(0) => {
                    assert_eq!(motd(root), motd_wanted, "{host}");
                    return 0;
                }
                Some(4) if host == FAILING => return 4,
                Some(10) => assert!(Instant::now() < deadline, "{host} waited too long"),
                _ => panic!("{host}: {}", text(&out)),
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    };

    publish("out1");
    std::thread::scope(|scope| {
        for ((host, _), root) in hosts.iter().zip(&roots) {
            scope.spawn(move || pull_until_done(host, root.path(), "release 1\n"));
        }
    });
    let client = etcd.client();
    let prefix = semaphore::default_prefix("f");
    let holders = |client: &bell_store::Etcd| -> BTreeMap<String, Vec<String>> {
        semaphore::groups(client, &prefix)
            .unwrap()
            .into_iter()
            .map(|g| (g.group, g.holders.into_iter().map(|h| h.host).collect()))
            .collect()
    };
    assert!(
        holders(&client).values().all(Vec::is_empty),
        "{:?}",
        holders(&client)
    );

    // airlock holds one of rack c's slots for a rebooting node that is not a bell host.
    let key = semaphore::semaphore_key(&prefix, "c");
    client
        .put(&key, br#"{"total_slots":2,"holders":["zincati-node"]}"#)
        .unwrap();

    publish("out2");
    let done = AtomicBool::new(false);
    let seen: Mutex<Vec<BTreeMap<String, Vec<String>>>> = Mutex::new(Vec::new());
    let codes: BTreeMap<String, i32> = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let client = etcd_client(&url);
            while !done.load(Ordering::Relaxed) {
                seen.lock().unwrap().push(holders(&client));
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let loops: Vec<_> = hosts
            .iter()
            .zip(&roots)
            .map(|((host, _), root)| {
                scope.spawn(move || {
                    (
                        host.clone(),
                        pull_until_done(host, root.path(), "release 2\n"),
                    )
                })
            })
            .collect();
        // Midway (three hosts healthy), the member every process starts with dies.
        let deadline = Instant::now() + Duration::from_secs(60);
        while intervals(&timeline)
            .values()
            .filter(|s| s.1.is_some())
            .count()
            < 3
        {
            assert!(Instant::now() < deadline, "no host became healthy");
            std::thread::sleep(Duration::from_millis(20));
        }
        etcd.kill(0);
        let codes = loops.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        watcher.join().unwrap();
        codes
    });

    // Every host but the failing one finished; it applied and is unhealthy.
    for (host, code) in &codes {
        let want = if host == FAILING { 4 } else { 0 };
        assert_eq!(*code, want, "{host}");
    }
    // The watcher never saw more holders than slots, in any rack.
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() > 10, "the watcher hardly ran");
    for snapshot in &seen {
        for (group, held) in snapshot {
            assert!(held.len() <= 2, "group {group} held by {held:?}");
        }
    }
    // From the marks the release itself wrote: at most two hosts of a rack between going
    // live and healthy, one in rack c where airlock holds a slot; the failing host never
    // became healthy and counts to the end.
    let spans = intervals(&timeline);
    assert_eq!(spans.len(), 12, "every host went live once: {spans:?}");
    let mut per_rack: BTreeMap<&str, Vec<(u128, Option<u128>)>> = BTreeMap::new();
    for (root, span) in &spans {
        let (host, rack) = host_of[root];
        assert_eq!(span.1.is_none(), host == FAILING, "{host}: {span:?}");
        per_rack.entry(rack).or_default().push(*span);
    }
    assert!(
        most_at_once(&per_rack["a"]) <= 2,
        "rack a: {:?}",
        per_rack["a"]
    );
    assert!(
        most_at_once(&per_rack["b"]) <= 2,
        "rack b: {:?}",
        per_rack["b"]
    );
    assert!(
        most_at_once(&per_rack["c"]) <= 1,
        "rack c: {:?}",
        per_rack["c"]
    );
    // The loops really ran at once: some rack had two hosts changing together.
    assert!(
        per_rack.values().any(|s| most_at_once(s) == 2),
        "no two hosts ever changed at once: {per_rack:?}"
    );

    // The failing host keeps its slot; airlock's holder is still there.
    let client = etcd_client(&url);
    let held = holders(&client);
    assert_eq!(held["a"], [FAILING]);
    assert!(held["b"].is_empty());
    assert_eq!(held["c"], ["zincati-node"]);

    // bellc status, through the surviving members: the failing host is unhealthy, not failed.
    let status = fx.bellc(&["status", "out2", "--store", &url, "--json"]);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["counts"]["up-to-date"], 11, "{json}");
    assert_eq!(json["counts"]["unhealthy"], 1, "{json}");
    assert_eq!(json["counts"]["failed"], 0, "{json}");
    assert_eq!(json["hosts"][0]["host"], FAILING);
    assert!(
        json["hosts"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("api (exit 1: api: 503 Service Unavailable)"),
        "{json}"
    );

    // The operator lets it go.
    let freed = fx.bellc(&["lock", "release", FAILING, "--store", &url, "--fleet", "f"]);
    assert_eq!(freed.code, 0, "{}", freed.stderr);
    assert!(holders(&client)["a"].is_empty());
}

fn etcd_client(url: &str) -> bell_store::Etcd {
    bell_store::Etcd::parse(url).unwrap()
}

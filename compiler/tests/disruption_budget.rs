//! The disruption budget: one semaphore per rollout group in a real etcd, in airlock's format.
//! Hosts that pull take a slot before they change and give it back when they are healthy; a
//! host whose apply fails keeps its slot, so a bad release stops after `max-unavailable` hosts
//! of a group; a holder that is not a bell host (an airlock node rebooting) counts; a waiting
//! host is left untouched and says so; `bellc lock status` and `bellc lock release` show and
//! free the slots.

use crate::common;
use crate::common::fleet::{bell_run, text, Etcd};
use crate::common::pulling::*;
use crate::common::Fixture;
use bell_store::semaphore::{self, Slot};
use std::path::Path;

/// Four hosts in two racks, one slot per rack; in `broken` releases h2's apply fails.
fn spec(motd: &str, broken: bool) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for (host, rack) in [("h1", "a"), ("h2", "a"), ("h3", "b"), ("h4", "b")] {
        spec.push_str(&format!("host \"{host}\" rack=\"{rack}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\nrollout batch-by=\"rack\" max-unavailable=1\n"
    ));
    if broken {
        spec.push_str(
            "override \"broken\" {\n    match host=\"h2\"\n    exec \"break.sh\" offline=\"root\" {\n        script \"#!/bin/sh\\nexit 1\\n\"\n    }\n}\n",
        );
    }
    spec
}

fn build_signed(fx: &Fixture, motd: &str, broken: bool, out: &str) {
    std::fs::write(fx.path().join("bell.kdl"), spec(motd, broken)).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", out, "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn concurrent_hosts_never_take_more_slots_than_the_group_has() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let prefix = "com.coreos.airlock";
    // airlock left a rebooting node in the semaphore: it counts against the slots.
    let key = semaphore::semaphore_key(prefix, "rack a");
    client
        .put(&key, br#"{"total_slots":3,"holders":["zincati-node"]}"#)
        .unwrap();
    let hosts: Vec<String> = (0..12).map(|i| format!("host-{i:02}")).collect();
    let results: Vec<(String, Slot)> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|host| {
                let client = client.clone();
                scope.spawn(move || {
                    let slot =
                        semaphore::acquire(&client, prefix, "rack a", host, 3, 1000, None).unwrap();
                    (host.clone(), slot)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let taken: Vec<&String> = results
        .iter()
        .filter(|(_, slot)| *slot == Slot::Taken)
        .map(|(host, _)| host)
        .collect();
    assert_eq!(taken.len(), 2, "{results:?}");
    let value: semaphore::Semaphore =
        serde_json::from_slice(&client.get(&key).unwrap().unwrap()).unwrap();
    let mut want: Vec<String> = taken.iter().map(|h| h.to_string()).collect();
    want.push("zincati-node".into());
    want.sort();
    assert_eq!(value.holders, want, "holders are kept sorted");
    assert_eq!(value.total_slots, 3);

    // A holder that asks again (after a crash) re-enters without a second slot.
    let again = semaphore::acquire(&client, prefix, "rack a", taken[0], 3, 2000, None).unwrap();
    assert_eq!(again, Slot::Held { since: Some(1000) });
    // Giving back frees exactly one.
    assert!(semaphore::release(&client, prefix, "rack a", taken[0]).unwrap());
    assert!(!semaphore::release(&client, prefix, "rack a", taken[0]).unwrap());
    let groups = semaphore::groups(&client, prefix).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].group, "rack a");
    assert_eq!(groups[0].holders.len(), 2);
}

#[test]
fn a_bad_release_stops_at_the_budget_and_lock_release_lets_it_go_on() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    build_signed(&fx, "release 1", false, "out1");
    build_signed(&fx, "release 2", true, "out2");
    let served = fx.path().join("served");
    copy_over(&fx.path().join("out1"), &served);
    copy_over(&fx.path().join("out2"), &served);
    let source = served.to_str().unwrap();
    let trust = fx.path().join("ci.pub");
    let url = etcd.url.as_str();
    let args = [
        "--trust",
        trust.to_str().unwrap(),
        "--store",
        url,
        "--report",
        url,
        "--fleet",
        "f",
        "--json",
    ];
    let publish = |out: &str| {
        let run = fx.bellc(&["publish", out, "--store", url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let root = |host: &str| roots[HOSTS.iter().position(|h| *h == host).unwrap()].path();
    let pull_as = |host: &str| pull(&bin, source, root(host), host, &args);
    let lock = |extra: &[&str]| {
        let mut all = vec!["lock"];
        all.extend_from_slice(extra);
        all.extend_from_slice(&["--store", url, "--fleet", "f"]);
        fx.bellc(&all)
    };
    let holders = || -> Vec<String> {
        semaphore::groups(&etcd.client(), "/bell/f")
            .unwrap()
            .into_iter()
            .flat_map(|g| g.holders.into_iter().map(|h| h.host))
            .collect()
    };

    // Release 1: every host takes its rack's one slot in turn and gives it back.
    publish("out1");
    for host in HOSTS {
        let out = pull_as(host);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        assert_eq!(motd(root(host)), "release 1\n");
    }
    assert!(holders().is_empty(), "{:?}", holders());

    // Release 2 breaks h2: it applies, fails, and keeps rack a's slot.
    publish("out2");
    let out = pull_as("h2");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["slot"].as_str().unwrap().contains("keeps its slot"),
        "{report}"
    );
    assert_eq!(holders(), ["h2"]);
    // h1, in the same rack, waits: nothing under its root changes but the bundle it fetched
    // into bell-run's staging directory (fetching takes no slot), and it says why.
    let applied_state = |root: &Path| {
        let mut all = fingerprint(root);
        all.retain(|path, _| !path.starts_with("var/lib/bell/incoming"));
        all
    };
    let before = applied_state(root("h1"));
    let out = pull_as("h1");
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    // `--json`: the one answer is on stdout.
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("waiting for a slot: all 1 of group `a` are held (h2)"),
        "{}",
        text(&out)
    );
    assert_eq!(applied_state(root("h1")), before, "a waiting host changed");
    assert!(root("h1").join("var/lib/bell/incoming").is_dir());
    // Rack b goes on.
    for host in ["h3", "h4"] {
        let out = pull_as(host);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        assert_eq!(motd(root(host)), "release 2\n");
    }
    // bellc status: h2 failed, h1 pending with the reason, rack b up to date.
    let status = fx.bellc(&["status", "out2", "--store", url, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let state_of = |host: &str| common::row(&status, host);
    assert_eq!(state_of("h2")["state"], "failed", "{status}");
    assert_eq!(state_of("h1")["state"], "pending", "{status}");
    assert!(
        state_of("h1")["detail"]
            .as_str()
            .unwrap()
            .contains("waiting for a slot"),
        "{status}"
    );
    assert_eq!(state_of("h3")["state"], "up-to-date", "{status}");

    // The operator sees who holds what, and lets h2's slot go.
    let shown = lock(&["status"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("group a: 1 of 1 slots held, 0 free"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("group b: 0 of 1 slots held, 1 free"));
    assert!(shown.stdout.contains("  h2 for "), "{}", shown.stdout);
    let json = lock(&["status", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(json["groups"][0]["holders"][0]["host"], "h2", "{json}");
    let freed = lock(&["release", "h2"]);
    assert_eq!(freed.code, 0, "{}", freed.stderr);
    assert!(freed
        .stdout
        .contains("released the slot h2 held in group a"));
    let again = lock(&["release", "h2"]);
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("h2 holds no slot"),
        "{}",
        again.stderr
    );

    // h1 now takes the slot, applies release 2 (it is healthy) and gives it back.
    let out = pull_as("h1");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(root("h1")), "release 2\n");
    assert!(holders().is_empty(), "{:?}", holders());
}

//! Each checker shown to catch the break it is for, so that a run that passes says something:
//! a small fleet of real parts (etcd, nginx, four image-root hosts running the real bell-run),
//! no faults, and one part broken at a time as a faulty build would break it. Every checker
//! first finds nothing, then finds its break, from the same recorded history the fault run
//! keeps.

use super::checks::{self, Finding};
use super::history::{Ending, Record, Run, Seen};
use super::{bundles, semaphores, settle, spec_of, Served, Settle};
use crate::common::fleet::{bell_run, Etcd};
use crate::common::pulling::{copy_over, image_root, Mirrored};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

fn hosts() -> Vec<(String, &'static str)> {
    ["d1", "d2", "d3", "d4"]
        .iter()
        .map(|h| (h.to_string(), "a"))
        .collect()
}

/// The checks named, each once: what the findings say was broken.
fn checks_of(findings: &[Finding]) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = findings.iter().map(|f| f.check).collect();
    names.dedup();
    names
}

#[test]
fn each_checker_catches_the_break_it_is_for() {
    let bin = bell_run();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let Some(site) = Mirrored::start() else {
        return;
    };
    let (fx, served, nginx) = (&site.fx, &site.served, &site.nginx);
    for n in 1..=3 {
        site.build(
            &spec_of(&hosts(), n, None, &BTreeMap::new()),
            &format!("out{n}"),
        );
    }
    let names: Vec<String> = hosts().into_iter().map(|(h, _)| h).collect();
    let roots: BTreeMap<String, tempfile::TempDir> =
        names.iter().map(|h| (h.clone(), image_root())).collect();
    let record = Record::new();
    let archive = Served::default();
    let trust = fx.path().join("ci.pub");
    let pull = |host: &str, extra: &[&str]| {
        archive.look(served);
        let root = roots[host].path();
        let started = record.now();
        let out = super::pull_command(Command::new(&bin), &nginx.url, root, host, &trust)
            .args(extra)
            .output()
            .expect("bell-run pull");
        let run = Run {
            host: host.to_string(),
            started,
            ended_at: record.now(),
            ended: super::history::Ended::Exited(out.status.code().unwrap_or(-1)),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            after: Seen::of(root),
        };
        record.runs.lock().unwrap().push(run);
    };
    let report = ["--report", etcd.url.as_str()];
    let through_the_store = ["--store", etcd.url.as_str(), "--report", etcd.url.as_str()];
    let publish = |n: u32| {
        copy_over(&fx.path().join(format!("out{n}")), served);
        let run = fx.bellc(&["publish", "served", "--store", &etcd.url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    let last = || -> BTreeMap<String, Seen> {
        roots
            .iter()
            .map(|(h, r)| (h.clone(), Seen::of(r.path())))
            .collect()
    };
    let stored = || -> BTreeMap<String, Option<Vec<u8>>> {
        let client = etcd.client();
        names
            .iter()
            .map(|h| {
                (
                    h.clone(),
                    client.get(&format!("/bell/f/running/{h}")).unwrap(),
                )
            })
            .collect()
    };
    let unsigned = BTreeMap::new();
    let releases = || {
        let runs = record.runs.lock().unwrap().clone();
        checks::releases(&runs, &archive.signed(&trust))
    };
    let how = Settle {
        fx,
        served,
        url: &etcd.url,
        flags: Vec::new(),
        bound: Duration::from_secs(3),
    };

    // Releases 1 and 2 reach every host, reporting: nothing is broken, and nothing is found.
    for n in 1..=2 {
        publish(n);
        for host in &names {
            pull(host, &through_the_store);
        }
    }
    let runs = record.runs.lock().unwrap().clone();
    assert!(
        runs.iter()
            .all(|r| r.ended == super::history::Ended::Exited(0)),
        "{runs:#?}"
    );
    for found in [
        releases(),
        checks::generations(&runs, &last()),
        checks::reports(&last(), &stored(), &unsigned),
        settle(&record, &how, &names),
    ] {
        assert!(found.is_empty(), "{found:#?}");
    }
    // The budget: d1 gives its slot back as a build that skips the compare-and-swap would,
    // writing the semaphore it read without itself over what d2 has taken since.
    let client = etcd.client();
    let key = bell_store::semaphore::semaphore_key("/bell/f", "a");
    let take = |host: &str| {
        let slot = bell_store::semaphore::acquire(&client, "/bell/f", "a", host, 2, 0, None);
        assert_eq!(slot, Ok(bell_store::semaphore::Slot::Taken));
    };
    take("d1");
    // The hosts' own slots, taken and given back with each pull, were all by the rules.
    assert_eq!(
        checks_of(&checks::budget(
            &semaphores(std::slice::from_ref(&etcd.endpoint), None),
            2
        )),
        Vec::<&str>::new()
    );
    let read: bell_store::semaphore::Semaphore =
        serde_json::from_slice(&client.get(&key).unwrap().unwrap()).unwrap();
    take("d2");
    let without_d1 = bell_store::semaphore::Semaphore {
        holders: read.holders.into_iter().filter(|h| h != "d1").collect(),
        ..read
    };
    client
        .put(&key, &serde_json::to_vec(&without_d1).unwrap())
        .unwrap();
    let found = checks::budget(&semaphores(std::slice::from_ref(&etcd.endpoint), None), 2);
    assert_eq!(checks_of(&found), ["budget"], "{found:#?}");
    assert!(found[0].what.contains("changed 2 holders"), "{found:#?}");

    // A lost report: d4 applies release 3 and its report never reaches the store.
    publish(3);
    pull("d4", &[]);
    let found = checks::reports(&last(), &stored(), &unsigned);
    assert_eq!(checks_of(&found), ["reports"], "{found:#?}");
    assert!(found[0].what.starts_with("d4's last report"), "{found:#?}");
    pull("d4", &through_the_store);
    assert_eq!(
        checks_of(&checks::reports(&last(), &stored(), &unsigned)),
        Vec::<&str>::new()
    );

    // A report garbled in the store and left so (a pull that takes what the store holds for
    // its own last report without reading it): d3's is junk.
    let report_key = "/bell/f/running/d3";
    let filed = client.get(report_key).unwrap().unwrap();
    client.put(report_key, &filed[..filed.len() / 2]).unwrap();
    let found = checks::reports(&last(), &stored(), &unsigned);
    assert_eq!(checks_of(&found), ["reports"], "{found:#?}");
    assert!(found[0].what.contains("is not one"), "{found:#?}");
    pull("d3", &through_the_store);
    assert_eq!(
        checks_of(&checks::reports(&last(), &stored(), &unsigned)),
        Vec::<&str>::new()
    );
    // A report that is not its host's: d3's unsigned one, where the fleet gives d3 a key.
    let key = bell_store::proof::SigningKey::from_seed([7; 32]);
    let given = BTreeMap::from([("d3".to_string(), key.identity().to_openssh())]);
    let found = checks::reports(&last(), &stored(), &given);
    assert_eq!(checks_of(&found), ["reports"], "{found:#?}");
    assert!(
        found[0].what.contains("not its own: Unsigned"),
        "{found:#?}"
    );

    // Hosts that do not come to the release the fleet serves: not up-to-date in time.
    let found = settle(&record, &how, &names);
    assert_eq!(checks_of(&found), ["up-to-date"], "{found:#?}");
    assert!(
        found[0].history.iter().any(|l| l.starts_with("d1: ")),
        "{found:#?}"
    );

    // A rollout that said done with hosts elsewhere: release 3 is not on d1.
    let ending = Ending {
        at: record.now(),
        number: 3,
        how: "done".into(),
        want: bundles(&fx.path().join("out3/release.json")),
        on: last().into_iter().map(|(h, s)| (h, s.generation)).collect(),
    };
    let found = checks::rollouts(&[ending], 3);
    assert_eq!(checks_of(&found), ["rollouts"], "{found:#?}");

    // An older release taken: d2 pulls with no memory of the sequence it accepted (what a
    // pull that does not compare sequences amounts to) from a mirror rolled back to release 1.
    copy_over(&fx.path().join("out1"), served);
    std::fs::remove_file(
        roots["d2"]
            .path()
            .join("var/lib/bell/accepted-releases.json"),
    )
    .unwrap();
    pull("d2", &report);
    let found = releases();
    assert_eq!(checks_of(&found), ["releases"], "{found:#?}");
    assert!(
        found[0]
            .what
            .starts_with("d2 went back from release sequence"),
        "{found:#?}"
    );

    // A switch left halfway: d3's motd is another generation's while its state says done.
    let motd = roots["d3"].path().join("etc/motd");
    std::fs::write(&motd, "release 1\n").unwrap();
    let found = checks::generations(&[], &last());
    assert_eq!(checks_of(&found), ["generations"], "{found:#?}");
    assert!(found[0].what.contains("/etc/motd holds"), "{found:#?}");
}

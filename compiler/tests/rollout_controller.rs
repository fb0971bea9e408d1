//! `bellc rollout` end to end: a real three-member etcd cluster, a real nginx serving the
//! build outputs copied one over another, and twelve image-root hosts in three racks, each
//! running `bell-run pull` every half second as its timer would. Each release marks when a
//! host's new bundle went live (an `exec`) and when it was healthy (its probe), in nanoseconds.
//!
//! Release 1 rolls out to all. Release 2 fails on one host (a file owned by a group its root
//! lacks): the rollout halts in that host's wave, later waves stay on release 1, an etcd member
//! dies meanwhile; the host is fixed and `--resume` finishes. Release 3's controller is killed
//! in a wave and `--resume` goes on without giving anything twice; it then halts on another
//! failing host, and `--abort` takes the moved hosts back to release 2.

use crate::common;
use crate::common::fleet::{bell_run, EtcdCluster, Nginx};
use crate::common::pulling::{
    copy_over, image_root, keep_pulling, marks, most_at_once, motd, racked_hosts as hosts, MARKS,
};
use crate::common::Fixture;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const BROKEN_IN_2: &str = "h06";
const BROKEN_IN_3: &str = "h10";

/// Control hosts provide `api`, compute hosts use it (later waves), storage hosts neither.
fn spec(release: u32) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for (i, (host, rack)) in hosts().iter().enumerate() {
        let role = ["control", "compute", "compute", "storage"][i % 4];
        spec.push_str(&format!(
            "host \"{host}\" address=\"10.0.0.{}\" rack=\"{rack}\" role=\"{role}\"\n",
            i + 1
        ));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"release {release}\\n\"\n}}\n\
         exec \"mark-{release}.sh\" offline=\"root\" rerun=\"once-successfully\" {{\n    \
             script \"#!/bin/sh\\necho \\\"live $BELL_ROOT {release} $(date +%s%N)\\\" >> {MARKS}\\n\"\n}}\n\
         health \"up\" retries=1 offline=\"root\" {{\n    \
             run \"echo \\\"healthy $BELL_ROOT {release} $(date +%s%N)\\\" >> {MARKS}\"\n}}\n\
         rollout batch-by=\"rack\" max-unavailable=2\n\
         override \"control\" {{\n    match role=\"control\"\n    service \"api\" port=8080\n}}\n\
         override \"compute\" {{\n    match role=\"compute\"\n    uses \"api\" count=3\n    \
             file \"/etc/app/api.conf\" {{\n        \
                 content \"endpoints={{{{ services.api | map(attribute='address') | join(',') }}}}\\n\"\n    }}\n}}\n"
    ));
    let broken = match release {
        2 => Some(BROKEN_IN_2),
        3 => Some(BROKEN_IN_3),
        _ => None,
    };
    if let Some(host) = broken {
        spec.push_str(&format!(
            "override \"broken\" {{\n    match host=\"{host}\"\n    \
                 file \"/etc/app/owned.conf\" group=\"bellapp\" {{\n        content \"x\\n\"\n    }}\n}}\n"
        ));
    }
    spec
}

/// Per release and root: each time its bundle went live, and when it was first healthy after
/// (ns). An abort that gives a host a release back makes a second span of that release.
type Spans = BTreeMap<(u32, PathBuf), Vec<(u128, Option<u128>)>>;

fn spans(roots: &[PathBuf]) -> Spans {
    let text = marks(roots);
    let mut out = Spans::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let [what, root, release, at] = words[..] else {
            panic!("a torn timeline line: {line:?}");
        };
        let key = (release.parse().unwrap(), PathBuf::from(root));
        let at: u128 = at.parse().unwrap();
        match what {
            "live" => out.entry(key).or_default().push((at, None)),
            "healthy" => {
                if let Some(span) = out.get_mut(&key).and_then(|s| s.last_mut()) {
                    span.1.get_or_insert(at);
                }
            }
            other => panic!("unknown mark {other}"),
        }
    }
    out
}

struct Rollout {
    code: i32,
    events: Vec<serde_json::Value>,
    stderr: String,
}

fn rollout(dir: &Path, args: &[&str]) -> Rollout {
    let out = Command::new(env!("CARGO_BIN_EXE_bellc"))
        .arg("rollout")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    Rollout {
        code: out.status.code().unwrap_or(-1),
        events: events(&String::from_utf8_lossy(&out.stdout)),
        stderr,
    }
}

fn events(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn of_kind<'e>(events: &'e [serde_json::Value], kind: &str) -> Vec<&'e serde_json::Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

#[test]
fn a_release_moves_wave_by_wave_halts_resumes_and_aborts() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(mut etcd) = EtcdCluster::start() else {
        return;
    };
    let served = fx.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let Some(nginx) = Nginx::serve(&served) else {
        return;
    };
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for release in [1, 2, 3] {
        std::fs::write(fx.path().join("bell.kdl"), spec(release)).unwrap();
        let out = format!("out{release}");
        let run = fx.bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let url = etcd.url.clone();
    let trust = fx.path().join("ci.pub").to_str().unwrap().to_string();
    let roots: Vec<tempfile::TempDir> = hosts().iter().map(|_| image_root()).collect();
    let timeline: Vec<PathBuf> = roots.iter().map(|r| r.path().to_path_buf()).collect();
    let root_of: BTreeMap<String, &Path> = hosts()
        .iter()
        .zip(&roots)
        .map(|((h, _), r)| (h.clone(), r.path()))
        .collect();
    let rack_of: BTreeMap<PathBuf, &str> = hosts()
        .iter()
        .zip(&roots)
        .map(|((_, rack), r)| (r.path().to_path_buf(), *rack))
        .collect();
    let motds = || -> BTreeMap<String, String> {
        root_of
            .iter()
            .map(|(h, r)| (h.clone(), motd(r).trim().to_string()))
            .collect()
    };
    let base = ["--store", &url, "--sign-key", "ci.key", "--json"];
    let with = |more: &[&'static str]| -> Vec<String> {
        let mut args = vec!["served".to_string()];
        args.extend(base.iter().map(|s| s.to_string()));
        args.extend(more.iter().map(|s| s.to_string()));
        args
    };
    let run = |more: &[&'static str]| {
        let args = with(more);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rollout(fx.path(), &args)
    };

    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Every host's timer: a pull every half second, whatever the last one said.
        let timer = (
            bin.as_path(),
            nginx.url.as_str(),
            url.as_str(),
            trust.as_str(),
        );
        keep_pulling(
            scope,
            timer,
            root_of.iter().map(|(h, r)| (h.as_str(), *r)),
            &stop,
        );
        let finish = |what: &str| {
            stop.store(true, Ordering::Relaxed);
            what.to_string()
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // A key that is not UTF-8 under the fleet's reports (etcd's root could put one):
            // it spoils a row of its own, and the rollout reads past it.
            common::fleet::etcdctl_put_bytes(&etcd.endpoints[0], b"/bell/f/running/\xff\xfe", "{}");
            // Release 1: the fleet's first, every host in its wave.
            copy_over(&fx.path().join("out1"), &served);
            let first = run(&["--wave-timeout", "60s"]);
            assert_eq!(first.code, 0, "{}", first.stderr);
            assert_eq!(of_kind(&first.events, "wave-started").len(), 6);
            assert_eq!(of_kind(&first.events, "host-converged").len(), 12);
            assert_eq!(of_kind(&first.events, "done").len(), 1);
            assert!(motds().values().all(|m| m == "release 1"), "{:?}", motds());

            // Release 2 halts in h06's wave (5 of 6); an etcd member dies on the way.
            copy_over(&fx.path().join("out2"), &served);
            let second = std::thread::scope(|inner| {
                let controller = inner.spawn(|| run(&["--wave-timeout", "60s"]));
                let deadline = Instant::now() + Duration::from_secs(60);
                while !motds().values().any(|m| m == "release 2") {
                    assert!(Instant::now() < deadline, "release 2 never went live");
                    std::thread::sleep(Duration::from_millis(50));
                }
                etcd.kill(0);
                controller.join().unwrap()
            });
            assert_eq!(second.code, 1, "{}", second.stderr);
            let halted = of_kind(&second.events, "halted");
            assert_eq!(halted.len(), 1, "{:?}", second.events);
            assert_eq!(halted[0]["wave"], 5, "{}", halted[0]);
            // At the failure, not at the wave's timeout.
            assert_eq!(
                halted[0]["reason"], "1 host of wave 5 of 6 failed",
                "{}",
                halted[0]
            );
            assert_eq!(halted[0]["hosts"][0]["host"], BROKEN_IN_2, "{}", halted[0]);
            assert_eq!(halted[0]["hosts"][0]["state"], "failed", "{}", halted[0]);
            let on = motds();
            for host in ["h10", "h11"] {
                assert_eq!(on[host], "release 1", "a later wave moved: {on:?}");
            }
            for host in ["h01", "h04", "h05", "h08", "h09", "h12", "h02", "h03"] {
                assert_eq!(on[host], "release 2", "{on:?}");
            }
            let status = fx.bellc(&["rollout", "--status", "--store", &url, "--fleet", "f"]);
            assert!(status.stdout.contains("halted"), "{}", status.stdout);
            assert_eq!(status.code, 3, "halted: someone is needed");
            // Both readers of a halt say what to run next, with the store filled in.
            let next = format!(
                "next: fix what stopped it, then `bellc rollout OUT --store {url} --sign-key KEY \
                 --resume`; or `bellc rollout OUT --store {url} --sign-key KEY --abort`"
            );
            assert!(status.stdout.contains(&next), "{}", status.stdout);
            // `status` against the store's (wave) release says the rollout stands halted, and
            // the later wave's hosts are pending on its target, not up to date.
            let fleet = fx.bellc(&["status", "--store", &url, "--fleet", "f", "--json"]);
            let fleet: serde_json::Value = serde_json::from_str(&fleet.stdout).unwrap();
            assert_eq!(fleet["rollout"]["phase"], "halted", "{fleet:#}");
            assert_eq!(fleet["rollout"]["wave"], 5, "{fleet:#}");
            let row = |h: &str| common::row(&fleet, h);
            for host in ["h10", "h11"] {
                assert_eq!(row(host)["state"], "pending", "{fleet:#}");
                assert!(
                    row(host)["detail"]
                        .as_str()
                        .unwrap()
                        .starts_with("waits for wave 6 of 6"),
                    "{fleet:#}"
                );
            }
            let text = fx.bellc(&["status", "--store", &url, "--fleet", "f"]);
            assert!(
                text.stdout.starts_with("rollout of release "),
                "{}",
                text.stdout
            );
            assert!(text
                .stdout
                .lines()
                .next()
                .unwrap()
                .contains("halted: wave 5 of 6"));
            assert!(text.stdout.contains(&next), "{}", text.stdout);
            assert!(status.stdout.contains(BROKEN_IN_2), "{}", status.stdout);

            // A plain publish would change the map under the halted rollout: refused.
            let publish = fx.bellc(&["publish", "served", "--store", &url]);
            assert_eq!(publish.code, 2, "{}", publish.stderr);
            assert!(
                publish.stderr.contains("stands halted"),
                "{}",
                publish.stderr
            );
            let resume = format!("`bellc rollout served --store {url} --sign-key KEY --resume`");
            assert!(publish.stderr.contains(&resume), "{}", publish.stderr);

            // Without `--resume` a second start is refused; the host is fixed and it resumes.
            let again = run(&[]);
            assert_eq!(again.code, 2, "{}", again.stderr);
            assert!(again.stderr.contains("--resume"), "{}", again.stderr);
            let group = root_of[BROKEN_IN_2].join("etc/group");
            let mut groups = std::fs::read_to_string(&group).unwrap();
            groups.push_str("bellapp:x:4242:\n");
            std::fs::write(&group, groups).unwrap();
            let resumed = run(&["--resume", "--wave-timeout", "60s"]);
            assert_eq!(resumed.code, 0, "{:?}", resumed.events);
            let started = of_kind(&resumed.events, "wave-started");
            assert_eq!(started[0]["wave"], 5, "{}", started[0]);
            assert_eq!(started[0]["resumed"], true);
            assert_eq!(started.len(), 2);
            assert!(motds().values().all(|m| m == "release 2"), "{:?}", motds());
            // Resumed again once done (as after a controller killed when it had finished but
            // not said so yet, which the fault run met): it says it is done, and does nothing.
            let again = run(&["--resume"]);
            assert_eq!(again.code, 0, "{}", again.stderr);
            assert_eq!(
                of_kind(&again.events, "done").len(),
                1,
                "{:?}",
                again.events
            );
            assert!(of_kind(&again.events, "wave-started").is_empty());
            // Its history says it halted and was resumed, not only that it is done.
            let history = fx.bellc(&["rollout", "--history", "--store", &url, "--fleet", "f"]);
            let halt_line = history
                .stdout
                .lines()
                .find(|l| l.trim_start().starts_with("halted "))
                .unwrap_or_else(|| panic!("no halt in the history: {}", history.stdout));
            assert!(
                halt_line.contains(" at wave 5: 1 host of wave 5 of 6 failed; resumed "),
                "{}",
                history.stdout
            );

            // Release 3: the first controller dies once it has signed its record, before the
            // store heard of the rollout (its progress there still release 2's, done: the
            // fault run met it); `--resume` begins it, dies in wave 2, and a third goes on
            // from there.
            copy_over(&fx.path().join("out3"), &served);
            let puts_before = etcd_puts(&url, "/bell/f/current_version");
            let died = Command::new(env!("CARGO_BIN_EXE_bellc"))
                .arg("rollout")
                .args(with(&["--wave-timeout", "60s"]))
                .env("BELL_ROLLOUT_FAILPOINT", "record-saved")
                .current_dir(fx.path())
                .output()
                .unwrap();
            assert_eq!(died.status.code(), None, "it did not die: {died:?}");
            assert!(etcd_get(&url, "/bell/f/rollout/progress").contains("\"done\""));
            // Its lease lapses within ten seconds.
            let store = bell_store::Etcd::parse(&url).unwrap();
            let lease_deadline = Instant::now() + Duration::from_secs(30);
            while store
                .get(&bell_store::keys::controller_key("f"))
                .unwrap()
                .is_some()
                && Instant::now() < lease_deadline
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            let args = with(&["--resume", "--wave-timeout", "60s"]);
            let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
                .arg("rollout")
                .args(&args)
                .current_dir(fx.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut dead_events = Vec::new();
            loop {
                let line = lines.next().expect("the controller ended early").unwrap();
                let event: serde_json::Value = serde_json::from_str(&line).unwrap();
                dead_events.push(event.clone());
                // Killed once wave 2 is given: signed, recorded and named in the store.
                if event["event"] == "wave-started" && event["wave"] == 2 {
                    break;
                }
            }
            child.kill().unwrap();
            child.wait().unwrap();
            // What it wrote before it died (a wave it had just started) is read too.
            dead_events.extend(lines.map_while(Result::ok).map(|l| {
                serde_json::from_str::<serde_json::Value>(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
            }));
            let published = etcd_get(&url, "/bell/f/current_version");
            let refused = run(&["--resume"]);
            assert_eq!(
                refused.code, 2,
                "the dead controller's lease: {}",
                refused.stderr
            );
            assert!(
                refused.stderr.contains("running already"),
                "{}",
                refused.stderr
            );
            // Its lease lapses within ten seconds; then it resumes, and halts on h10 (wave 6).
            let deadline = Instant::now() + Duration::from_secs(30);
            let third = loop {
                let r = run(&["--resume", "--wave-timeout", "60s"]);
                if r.code != 2 || Instant::now() > deadline {
                    break r;
                }
                std::thread::sleep(Duration::from_millis(500));
            };
            assert_eq!(third.code, 1, "{} {:?}", third.stderr, third.events);
            // It goes on with the wave the dead one gave last, as that same release: no
            // earlier wave again, and that one not given anew.
            let dead_started = of_kind(&dead_events, "wave-started");
            let last = dead_started
                .last()
                .expect("the dead controller started waves");
            assert_eq!(last["wave"], 2, "{dead_events:?}");
            assert_eq!(last["release"].as_str(), Some(published.as_str()), "{last}");
            let started = of_kind(&third.events, "wave-started");
            assert_eq!(started[0]["wave"], 2, "{}", started[0]);
            assert_eq!(started[0]["resumed"], true, "{}", started[0]);
            assert_eq!(
                started[0]["release"].as_str(),
                Some(published.as_str()),
                "the wave was given again as another release"
            );
            // The store was told each wave's release once: waves 1 to 6, six puts of the
            // current version (a wave given again would be one more).
            let puts = etcd_puts(&url, "/bell/f/current_version") - puts_before;
            assert_eq!(
                puts, 6,
                "release 3's waves were named in the store {puts} times"
            );
            let halted = of_kind(&third.events, "halted");
            assert_eq!(halted[0]["wave"], 6, "{}", halted[0]);
            assert_eq!(halted[0]["hosts"][0]["host"], BROKEN_IN_3);
            assert_eq!(halted[0]["reason"], "1 host of wave 6 of 6 failed");
            // The halt comes at the first failure; the wave's other host may still be applying.
            let deadline = Instant::now() + Duration::from_secs(20);
            while motds()["h11"] != "release 3" && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let on = motds();
            assert_eq!(on["h11"], "release 3", "wave 6's other host moved: {on:?}");
            assert_eq!(on[BROKEN_IN_3], "release 2", "{on:?}");

            // The abort takes every moved host back to release 2.
            let aborted = run(&["--abort", "--wave-timeout", "60s"]);
            assert_eq!(aborted.code, 0, "{} {:?}", aborted.stderr, aborted.events);
            assert_eq!(of_kind(&aborted.events, "aborted").len(), 1);
            assert!(motds().values().all(|m| m == "release 2"), "{:?}", motds());
            let status = fx.bellc(&["rollout", "--status", "--store", &url, "--fleet", "f"]);
            assert!(status.stdout.contains("aborted"), "{}", status.stdout);
            assert_eq!(status.code, 0, "aborted: nothing left to do");
        }));
        finish("hosts stopped");
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    });

    // Never more than two hosts of a rack between going live and healthy, in any release;
    // every host went live on release 3 at most once (the resumed controller took no host
    // back through an earlier release).
    let spans = spans(&timeline);
    for release in [1, 2, 3] {
        let mut per_rack: BTreeMap<&str, Vec<(u128, Option<u128>)>> = BTreeMap::new();
        for ((r, root), s) in &spans {
            if *r == release {
                per_rack.entry(rack_of[root]).or_default().extend(s);
            }
        }
        for (rack, s) in &per_rack {
            assert!(
                most_at_once(s) <= 2,
                "release {release}, rack {rack}: {s:?}"
            );
        }
    }
    let on = |release: u32| spans.keys().filter(|(r, _)| *r == release).count();
    assert_eq!(on(1), 12, "every host went live on release 1");
    assert_eq!(on(2), 12, "every host went live on release 2");
    for ((release, root), s) in &spans {
        if *release == 3 {
            assert_eq!(s.len(), 1, "{root:?} went live on release 3 twice");
        }
    }
}

/// How many times `key` was written since it was made (etcd's per-key version).
fn etcd_puts(url: &str, key: &str) -> i64 {
    let client = bell_store::Etcd::parse(url).unwrap();
    client.get_versioned(key).unwrap().1
}

fn etcd_get(url: &str, key: &str) -> String {
    let client = bell_store::Etcd::parse(url).unwrap();
    String::from_utf8(client.get(key).unwrap().unwrap()).unwrap()
}

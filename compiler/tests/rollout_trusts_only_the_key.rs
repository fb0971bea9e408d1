//! Only the signing key decides what a host runs, tried as an attacker with the etcd write
//! access every host has: a real etcd, a real nginx serving the build outputs copied one over
//! another, four image-root hosts pulling every half second as their timers would.
//!
//! Releases 1 to 3 roll out. Then `/bell/f/current_version` is set back to release 1 with
//! `etcdctl`: the rollout of release 4 is refused (it would have signed release 1's bundles
//! anew), and goes on once the store is put back as the refusal says. Release 4 halts on a
//! broken host; the rollout's progress in etcd is rewritten to say it began from release 1:
//! `--abort` is refused, then, with the progress put back, takes the moved hosts back to release
//! 3. An abort without the key is refused before it touches OUT. No host ever goes live on
//! release 1 again, and every host's accepted record only grows. On the way, a kept release
//! that lost its signature is refused (and its build output's copy, as older) until copied
//! back from a backup as the refusal says, a controller
//! record without a lease, a garbled progress and keys that are not reports stop nothing; an
//! unsigned build into the served directory is refused; and release 5, whose probe fails on
//! one host, halts there with that host unhealthy, never counted converged.

use crate::common::fleet::{bell_run, etcdctl, Etcd, Nginx};
use crate::common::pulling::{
    copy_over, fingerprint, image_root, keep_pulling, marks, motd, release_of, HOSTS, MARKS,
};
use crate::common::{Fixture, Run};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const BROKEN: &str = "h4";
const SICK: &str = "h2";

fn spec(release: u32) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for host in HOSTS {
        spec.push_str(&format!("host \"{host}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"release {release}\\n\"\n}}\n\
         exec \"mark-{release}.sh\" offline=\"root\" rerun=\"once-successfully\" {{\n    \
             script \"#!/bin/sh\\necho \\\"live $BELL_ROOT {release} $(date +%s%N)\\\" >> {MARKS}\\n\"\n}}\n"
    ));
    if release == 5 {
        // A probe that always fails: the host applies, then is unhealthy, and a wave that
        // holds it must never count it converged.
        spec.push_str(&format!(
            "override \"sick\" {{\n    match host=\"{SICK}\"\n    \
                 health \"up\" retries=1 offline=\"root\" {{\n        run \"exit 1\"\n    }}\n}}\n"
        ));
    }
    if release == 4 {
        spec.push_str(&format!(
            "override \"broken\" {{\n    match host=\"{BROKEN}\"\n    \
                 file \"/etc/app/owned.conf\" group=\"bellapp\" {{\n        content \"x\\n\"\n    }}\n}}\n"
        ));
    }
    spec
}

/// `(root, release)` for every time a release went live on a host, in order.
fn went_live(roots: &[PathBuf]) -> Vec<(String, u32)> {
    let text = marks(roots);
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let [_, root, release, _at] = words[..] else {
                panic!("a torn timeline line: {line:?}");
            };
            (root.to_string(), release.parse().unwrap())
        })
        .collect()
}

fn accepted_sequence(root: &Path) -> Option<(String, u64)> {
    let path = root.join("var/lib/bell/accepted-releases.json");
    let all: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let f = &all["fleets"]["f"];
    Some((f["version"].as_str()?.to_string(), f["sequence"].as_u64()?))
}

/// `run` must be refused with `code`, saying `wanted`, and leave OUT exactly as it was; its
/// stderr.
fn refused_unchanged(out: &Path, code: i32, wanted: &str, run: impl FnOnce() -> Run) -> String {
    let before = fingerprint(out);
    let run = run();
    assert_eq!(run.code, code, "{}", run.stderr);
    assert!(
        run.stderr.contains(wanted),
        "wanted `{wanted}`: {}",
        run.stderr
    );
    assert_eq!(fingerprint(out), before, "a refused command changed OUT");
    run.stderr
}

#[test]
fn etcd_cannot_steer_a_rollout_backwards() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let served = fx.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let Some(nginx) = Nginx::serve(&served) else {
        return;
    };
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for release in 1..=4 {
        std::fs::write(fx.path().join("bell.kdl"), spec(release)).unwrap();
        let out = format!("out{release}");
        let run = fx.bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let version = |n: u32| release_of(&fx.path().join(format!("out{n}"))).version;
    let url = etcd.url.clone();
    let trust = fx.path().join("ci.pub").to_str().unwrap().to_string();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let timeline: Vec<PathBuf> = roots.iter().map(|r| r.path().to_path_buf()).collect();
    let root_of: BTreeMap<&str, &Path> = HOSTS
        .iter()
        .copied()
        .zip(roots.iter().map(|r| r.path()))
        .collect();
    let motds = || -> BTreeMap<&str, String> {
        root_of
            .iter()
            .map(|(h, r)| (*h, motd(r).trim().to_string()))
            .collect()
    };
    let rollout = |more: &[&str]| {
        let mut args = vec![
            "rollout",
            "served",
            "--store",
            &url,
            "--json",
            "--wave-timeout",
            "60s",
        ];
        args.extend_from_slice(more);
        let run = fx.bellc(&args);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        run
    };
    let signed = ["--sign-key", "ci.key"];

    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let timer = (
            bin.as_path(),
            nginx.url.as_str(),
            url.as_str(),
            trust.as_str(),
        );
        keep_pulling(scope, timer, root_of.iter().map(|(h, r)| (*h, *r)), &stop);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for release in 1..=3 {
                // Keys anyone could write: a controller record bound to no lease (no controller
                // at all), a garbled progress, reports that are not reports. None stops a
                // rollout.
                let (key, value) = match release {
                    1 => ("/bell/f/rollout/controller", "forged, and never let go"),
                    2 => ("/bell/f/rollout/progress", "{not json"),
                    _ => ("/bell/f/running/zz", "bogus"),
                };
                etcdctl(&etcd.endpoint, &["put", key, value]);
                etcdctl(&etcd.endpoint, &["put", "/bell/f/status/apply/h1", "bogus"]);
                copy_over(&fx.path().join(format!("out{release}")), &served);
                let run = rollout(&signed);
                assert_eq!(
                    run.code, 0,
                    "release {release}: {}{}",
                    run.stdout, run.stderr
                );
            }
            assert!(motds().values().all(|m| m == "release 3"), "{:?}", motds());
            let before_attack = went_live(&timeline).len();
            // A pull records the release it accepted last, after it applied and reported it:
            // a host can show release 3 a moment before its record says so.
            let read_accepted = || -> BTreeMap<&str, (String, u64)> {
                root_of
                    .iter()
                    .map(|(h, r)| (*h, accepted_sequence(r).expect("an accepted record")))
                    .collect()
            };
            let recorded = std::time::Instant::now() + Duration::from_secs(15);
            let mut accepted = read_accepted();
            while !accepted.values().all(|(v, _)| *v == version(3))
                && std::time::Instant::now() < recorded
            {
                std::thread::sleep(Duration::from_millis(100));
                accepted = read_accepted();
            }
            assert!(
                accepted.values().all(|(v, _)| *v == version(3)),
                "{accepted:?}"
            );

            // The served directory lost the signature of the release the key gave last: the
            // next rollout is refused, and the advice (copy it back from a backup of OUT; the
            // build output's copy would be refused as older) puts it right.
            copy_over(&fx.path().join("out4"), &served);
            let backup = fx.path().join("backup");
            copy_over(&served, &backup);
            let signature = format!("releases/{}.json.minisig", version(3));
            std::fs::remove_file(served.join(&signature)).unwrap();
            let restore = format!(
                "`cp -p BACKUP/releases/{0}.json BACKUP/releases/{0}.json.minisig \
                 served/releases/`",
                version(3)
            );
            refused_unchanged(&served, 2, &restore, || rollout(&signed));
            let file = format!("releases/{}.json", version(3));
            for name in [&file, &signature] {
                std::fs::copy(fx.path().join("out3").join(name), served.join(name)).unwrap();
            }
            refused_unchanged(&served, 2, "an older copy", || rollout(&signed));
            let copy = std::process::Command::new("cp")
                .arg("-p")
                .arg(backup.join(&file))
                .arg(backup.join(&signature))
                .arg(served.join("releases"))
                .status()
                .unwrap();
            assert!(copy.success());

            // The attack: the store says the fleet runs release 1 (still kept, validly signed).
            etcdctl(
                &etcd.endpoint,
                &["put", "/bell/f/current_version", &version(1)],
            );
            copy_over(&fx.path().join("out4"), &served);
            let fix = format!("etcdctl put /bell/f/current_version {}", version(3));
            let refused = refused_unchanged(&served, 2, &fix, || rollout(&signed));
            let named = format!("the store names release {}", &version(1)[..12]);
            assert!(refused.contains(&named), "{refused}");
            std::thread::sleep(Duration::from_secs(2));
            assert!(motds().values().all(|m| m == "release 3"), "{:?}", motds());

            // Put back as the refusal says, release 4 rolls out and halts at the broken host.
            etcdctl(
                &etcd.endpoint,
                &["put", "/bell/f/current_version", &version(3)],
            );
            let halted = rollout(&signed);
            assert_eq!(halted.code, 1, "{}", halted.stderr);
            assert!(halted.stdout.contains(BROKEN), "{}", halted.stdout);

            // The abort without the key: refused before anything changes, hosts still pulling.
            // Its hint is a complete command.
            let complete = format!("bellc rollout served --store {url} --sign-key KEY --abort");
            refused_unchanged(&served, 64, &complete, || rollout(&["--abort"]));

            // The progress in etcd rewritten to say the rollout began from release 1.
            let key = "/bell/f/rollout/progress";
            let honest = etcdctl(&etcd.endpoint, &["get", key, "--print-value-only"]);
            let honest = honest.trim_end().to_string();
            let mut forged: serde_json::Value = serde_json::from_str(&honest).unwrap();
            forged["from"] = serde_json::Value::String(version(1));
            etcdctl(&etcd.endpoint, &["put", key, &forged.to_string()]);
            let abort = || rollout(&["--abort", "--sign-key", "ci.key"]);
            let said = refused_unchanged(&served, 2, "OUT's signed record", abort);
            // The refusal says what puts it right.
            assert!(said.contains(&format!("`etcdctl del {key}`")), "{said}");

            // A forged record in OUT (the signature no longer matches) is refused too.
            let record = served.join("rollouts/f.json");
            let honest_record = std::fs::read(&record).unwrap();
            let tampered = String::from_utf8(honest_record.clone())
                .unwrap()
                .replace(&version(3), &version(1));
            std::fs::write(&record, tampered).unwrap();
            refused_unchanged(&served, 2, "does not match its signature", abort);
            std::fs::write(&record, honest_record).unwrap();

            // As the refusal said: the progress taken away, the controller makes it anew from
            // the record, and the abort takes the moved hosts to release 3.
            etcdctl(&etcd.endpoint, &["del", key]);
            let aborted = rollout(&["--abort", "--sign-key", "ci.key"]);
            // (Its halt says why on stdout, as JSON: a flake here in CI once halted the abort.)
            assert_eq!(
                aborted.code, 0,
                "stderr: {}\nstdout: {}",
                aborted.stderr, aborted.stdout
            );
            assert!(motds().values().all(|m| m == "release 3"), "{:?}", motds());

            // A build into the served directory without the key would put an unsigned
            // release over signed ones: refused before it writes anything.
            std::fs::write(fx.path().join("bell.kdl"), spec(5)).unwrap();
            let build = || fx.bellc(&["build", "bell.kdl", "-o", "served"]);
            refused_unchanged(&served, 64, "give `--sign-key KEY`", build);
            // A build into the served directory leaves the record be (and is not refused for it).
            let rebuilt = fx.bellc(&["build", "bell.kdl", "-o", "served", "--sign-key", "ci.key"]);
            assert_eq!(rebuilt.code, 0, "{}", rebuilt.stderr);
            assert!(served.join("rollouts/f.json").is_file());

            // Release 5's probe fails on h2: the rollout halts there, unhealthy, and never
            // tells h2 converged (its report and its health are one write, and the controller
            // judges the report, not a category key written apart from it).
            let sick = rollout(&signed);
            assert_eq!(sick.code, 1, "{}", sick.stderr);
            let events: Vec<serde_json::Value> = sick
                .stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let converged_sick = events
                .iter()
                .any(|e| e["event"] == "host-converged" && e["host"] == SICK);
            assert!(!converged_sick, "{}", sick.stdout);
            let halted = events.iter().find(|e| e["event"] == "halted").unwrap();
            assert_eq!(halted["hosts"][0]["host"], SICK, "{halted}");
            assert_eq!(halted["hosts"][0]["state"], "unhealthy", "{halted}");

            // Never release 1 again; every host's accepted sequence only grew.
            let live = went_live(&timeline);
            let after: Vec<_> = live[before_attack..]
                .iter()
                .filter(|(_, r)| *r < 3)
                .collect();
            assert!(after.is_empty(), "a host went back: {after:?}");
            for (host, root) in &root_of {
                let (_, sequence) = accepted_sequence(root).unwrap();
                assert!(
                    sequence >= accepted[host].1,
                    "{host} accepted an older release"
                );
            }
        }));
        stop.store(true, Ordering::Relaxed);
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    });
}

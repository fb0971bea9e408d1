//! The fleet under faults, as Jepsen and etcd's functional tester test a system: a real
//! three-member etcd cluster behind TLS, nginx behind a proxy that can stop or trickle, the
//! rollout controller, and twelve image-root hosts in three racks, each running `bell-run pull`
//! on its own short timer with a health probe, while an operator rolls out a sequence of
//! signed releases (some broken on one host: the rollout halts there, and the operator fixes
//! the host and resumes, or aborts). Meanwhile a schedule drawn from a seed injects faults in
//! overlapping windows: an etcd member (also the leader) killed and started again, or paused
//! with SIGSTOP; the controller SIGKILLed wherever it is; the mirror down or trickling; a
//! host's bell-run killed at one of its crash points or from outside; a host's clock ahead or
//! behind; a host's root (a small file system of its own) filled to the last byte; a host's
//! report in the store garbled or forged (the hosts sign theirs, and only those count).
//!
//! Everything is recorded (each run of each host and what its root held after it, each fault,
//! each rollout's end), and after the faults stop and the fleet has settled, the checkers read
//! the record and etcd's own history: the budget never exceeded, no host on an older or
//! unsigned release, no host left on a mix of generations, every rollout ended where it should,
//! every host up to date within a bound, no report lost. A failure prints the seed, the
//! schedule and the part of the history that breaks the guarantee, and writes the whole
//! history beside the test's build (`BELL_FAULTS_SEED=N` runs that schedule again).
//!
//! The short run is in the test command; the long one is on demand:
//! `BELL_FAULTS_SEED=N BELL_FAULTS_MINUTES=30 cargo test -p bellc --test it a_long_run --
//! --ignored --nocapture` (the README's "Faults" gives the figures of seed 2026).

mod broken;
mod checks;
mod disk;
mod history;
pub(crate) mod mirror;
mod schedule;

use crate::common::fleet::{bell_run, EtcdCluster, Pki};
use crate::common::pulling::{copy_over, image_root_of, racked_hosts, Mirrored, MARKS};
use crate::common::Fixture;
use checks::{Finding, SemaphoreVersion, Signed};
use disk::Disks;
use history::{Ended, Ending, Record, Run, Seen};
use mirror::{Mirror, Mode};
use schedule::{Fault, Garble, KillAt, Member, Rng, Window};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `max-unavailable=2` per rack.
const SLOTS: u64 = 2;

/// How long the fleet may take, once the faults stop and the last rollout ended, until every
/// host says `up-to-date`: two pulls of every host, and a liveness lease's lapse.
const SETTLE: Duration = Duration::from_secs(60);

/// The seed of the short run, unless `BELL_FAULTS_SEED` gives one.
const SHORT_SEED: u64 = 96;

#[test]
fn a_short_run_keeps_every_guarantee() {
    run(seed(SHORT_SEED), Duration::from_secs(45), 3);
}

#[test]
#[ignore = "a long run: BELL_FAULTS_MINUTES (30) of faults, on demand"]
fn a_long_run_keeps_every_guarantee() {
    let minutes = std::env::var("BELL_FAULTS_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(30);
    run(seed(1), Duration::from_secs(60 * minutes), 3);
}

fn seed(default: u64) -> u64 {
    std::env::var("BELL_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Release `n` sets the motd, marks when it went live and when its probe passed; `broken`
/// names a host whose bundle has a file owned by a group its root lacks (its apply fails
/// until the operator adds the group).
fn spec(n: u32, broken: Option<&str>, identities: &BTreeMap<String, String>) -> String {
    spec_of(&racked_hosts(), n, broken, identities)
}

/// [`spec`] of other hosts (name, rack). Where `identities` gives the hosts theirs, only
/// reports signed by them are believed (`identities="required"`).
fn spec_of(
    hosts: &[(String, &str)],
    n: u32,
    broken: Option<&str>,
    identities: &BTreeMap<String, String>,
) -> String {
    let required = if identities.is_empty() {
        ""
    } else {
        " identities=\"required\""
    };
    let mut spec = format!("fleet \"f\" target=\"debian-12\"{required}\n");
    for (host, rack) in hosts {
        let identity = identities
            .get(host)
            .map(|i| format!(" identity=\"{i}\""))
            .unwrap_or_default();
        spec.push_str(&format!("host \"{host}\" rack=\"{rack}\"{identity}\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"release {n}\\n\"\n}}\n\
         exec \"mark-{n}.sh\" offline=\"root\" rerun=\"once-successfully\" {{\n    \
             script \"#!/bin/sh\\necho \\\"live $BELL_ROOT {n} $(date +%s%N)\\\" >> {MARKS}\\n\"\n}}\n\
         health \"up\" retries=1 offline=\"root\" {{\n    \
             run \"echo \\\"healthy $BELL_ROOT {n} $(date +%s%N)\\\" >> {MARKS}\"\n}}\n\
         rollout batch-by=\"rack\" max-unavailable={SLOTS}\n"
    ));
    if let Some(host) = broken {
        spec.push_str(&format!(
            "override \"broken\" {{\n    match host=\"{host}\"\n    \
                 file \"/etc/app/owned-{n}.conf\" group=\"bellapp{n}\" {{\n        content \"x\\n\"\n    }}\n}}\n"
        ));
    }
    spec
}

/// What a fault does to a host's next runs.
#[derive(Default)]
struct HostFaults {
    kill: Option<KillAt>,
    clock: Option<i64>,
    /// How many windows want the host's root full (two may overlap).
    full: u32,
}

/// The fleet's parts a fault reaches.
struct Fleet<'a> {
    etcd: Mutex<EtcdCluster>,
    pki: &'a Pki,
    mirror: Mirror,
    /// The running controller's pid.
    controller: Mutex<Option<u32>>,
    hosts: Vec<Mutex<HostFaults>>,
    /// The hosts' roots, each on a file system of its own.
    roots: Vec<PathBuf>,
    disks: Disks,
    /// Each host's identity (`bell-run identity --init`), which signs its reports.
    identities: BTreeMap<String, String>,
    /// The directory the mirror serves.
    served: PathBuf,
    record: Record,
}

fn run(seed: u64, span: Duration, min_releases: u32) {
    let bin = bell_run();
    let Some(pki) = Pki::new() else {
        return;
    };
    let Some(etcd) = EtcdCluster::start_tls(&pki) else {
        return;
    };
    let Some(site) = Mirrored::start() else {
        return;
    };
    let (fx, served, nginx) = (&site.fx, &site.served, &site.nginx);
    let url = etcd.url.clone();
    let hosts: Vec<String> = racked_hosts().into_iter().map(|(h, _)| h).collect();
    let dirs: Vec<tempfile::TempDir> = hosts.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let roots: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
    let Some(disks) = Disks::mount(&roots.iter().map(PathBuf::as_path).collect::<Vec<_>>()) else {
        return;
    };
    let identities: BTreeMap<String, String> = hosts
        .iter()
        .zip(&roots)
        .map(|(host, root)| {
            image_root_of(&disks.view(root));
            let out = disks
                .enter(&bin)
                .args(["identity", "--host", host, "--init", "--root"])
                .arg(root)
                .output()
                .expect("bell-run identity");
            assert!(out.status.success(), "{out:?}");
            let identity = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (host.clone(), identity)
        })
        .collect();
    let schedule = schedule::draw(seed, span, hosts.len());
    let fleet = Fleet {
        etcd: Mutex::new(etcd),
        pki: &pki,
        mirror: Mirror::front(&nginx.url),
        controller: Mutex::new(None),
        hosts: hosts.iter().map(|_| Mutex::default()).collect(),
        roots,
        disks,
        identities,
        served: served.clone(),
        record: Record::new(),
    };
    let stop = AtomicBool::new(false);
    let archive = Served::default();
    let faults_over = AtomicBool::new(false);
    let mut findings: Vec<Finding> = Vec::new();
    let mut released = 0;
    std::thread::scope(|scope| {
        for (i, host) in hosts.iter().enumerate() {
            let (fleet, bin, stop, fx) = (&fleet, &bin, &stop, &fx);
            scope.spawn(move || keep_pulling(fleet, i, host, bin, fx.path(), stop));
        }
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                archive.look(served);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let injector = scope.spawn(|| {
            inject(&fleet, &schedule);
            faults_over.store(true, Ordering::Relaxed);
        });
        let operator = Operator {
            fleet: &fleet,
            fx,
            served,
            url: &url,
            roots: hosts
                .iter()
                .zip(&fleet.roots)
                .map(|(h, r)| (h.clone(), fleet.disks.view(r)))
                .collect(),
            rng: Rng::new(seed ^ 0x6f70),
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut operator = operator;
            let deadline = Instant::now() + span + Duration::from_secs(300);
            while released < min_releases || !faults_over.load(Ordering::Relaxed) {
                released += 1;
                if !operator.roll_out(released, deadline) {
                    break;
                }
            }
            injector.join().expect("the injector");
            fleet
                .record
                .event("faults over, last rollout ended: the fleet settles");
            let how = Settle {
                fx,
                served,
                url: &url,
                flags: pki.flags(),
                bound: SETTLE,
            };
            settle(&fleet.record, &how, &hosts)
        }));
        stop.store(true, Ordering::Relaxed);
        match result {
            Ok(found) => findings.extend(found),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let last: BTreeMap<String, Seen> = hosts
        .iter()
        .zip(&fleet.roots)
        .map(|(h, r)| (h.clone(), Seen::of(&fleet.disks.view(r))))
        .collect();
    let runs = fleet.record.runs.lock().unwrap().clone();
    let endings = fleet.record.endings.lock().unwrap().clone();
    let etcd = fleet.etcd.lock().unwrap();
    let versions = semaphores(&etcd.endpoints, Some(&pki));
    assert!(
        !versions.is_empty(),
        "etcd's history holds no semaphore version"
    );
    findings.extend(checks::budget(&versions, SLOTS));
    archive.look(served);
    let signed = archive.signed(&fx.path().join("ci.pub"));
    findings.extend(checks::releases(&runs, &signed));
    findings.extend(checks::generations(&runs, &last));
    findings.extend(checks::rollouts(&endings, released));
    let client = etcd.client_tls(&pki);
    let stored = hosts
        .iter()
        .map(|h| {
            let report = client.get(&format!("/bell/f/running/{h}")).ok().flatten();
            (h.clone(), report)
        })
        .collect();
    findings.extend(checks::reports(&last, &stored, &fleet.identities));
    let summary = summary(seed, span, &schedule, &runs, &endings);
    eprintln!("{summary}");
    let file =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fleet-under-faults-{seed}.txt"));
    let _ = std::fs::write(
        &file,
        format!("{summary}\nhistory:\n{}\n", fleet.record.lines().join("\n")),
    );
    if !findings.is_empty() {
        fail(seed, &schedule, &fleet.record, &findings);
    }
}

/// What was injected and what the fleet did meanwhile, for the README's figures.
fn summary(
    seed: u64,
    span: Duration,
    schedule: &[Window],
    runs: &[Run],
    endings: &[Ending],
) -> String {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for window in schedule {
        let kind = format!("{:?}", window.fault);
        let kind = kind.split('(').next().unwrap_or_default().to_string();
        *kinds.entry(kind).or_default() += 1;
    }
    let killed = runs
        .iter()
        .filter(|r| matches!(r.ended, Ended::Killed(_)))
        .count();
    // An apply: a run after which the host's generation or release is not what it was.
    let mut last: BTreeMap<&str, (Option<&String>, Option<&String>)> = BTreeMap::new();
    let mut applies = 0;
    for run in runs {
        let now = (run.after.generation.as_ref(), run.after.release.as_ref());
        if last
            .insert(&run.host, now)
            .is_some_and(|before| before != now)
        {
            applies += 1;
        }
    }
    let ended = |how: &str| endings.iter().filter(|e| e.how == how).count();
    format!(
        "fleet under faults: seed {seed}, {:.0} s of faults: {} windows ({}); {} rollouts \
         ({} done, {} aborted); {} runs of bell-run, {applies} of them changing a host, \
         {killed} killed",
        span.as_secs_f64(),
        schedule.len(),
        kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        endings.len(),
        ended("done"),
        ended("aborted"),
        runs.len(),
    )
}

/// Panics with the seed, the schedule and what broke, and writes the whole history to a file.
fn fail(seed: u64, schedule: &[Window], record: &Record, findings: &[Finding]) -> ! {
    let mut text = format!(
        "the fleet broke a guarantee under faults (seed {seed}; run it again with \
         BELL_FAULTS_SEED={seed})\n\nschedule:\n"
    );
    for window in schedule {
        text.push_str(&format!("  {window}\n"));
    }
    for finding in findings {
        text.push_str(&format!("\n[{}] {}\n", finding.check, finding.what));
        for line in &finding.history {
            text.push_str(&format!("    {line}\n"));
        }
    }
    // CI keeps only what the test prints: the faults' and the operator's last steps (each with
    // the last line the controller said) are the story of most failures.
    let events = record.events.lock().unwrap().clone();
    text.push_str("\nthe last faults and operator steps:\n");
    for (at, what) in &events[events.len().saturating_sub(40)..] {
        text.push_str(&format!("  {:7.1}s {what}\n", at.as_secs_f64()));
    }
    let file =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fleet-under-faults-{seed}.txt"));
    let whole = format!("{text}\nhistory:\n{}\n", record.lines().join("\n"));
    match std::fs::write(&file, whole) {
        Ok(()) => text.push_str(&format!("\nthe whole history: {}\n", file.display())),
        Err(e) => text.push_str(&format!("\n(the history could not be written: {e})\n")),
    }
    panic!("{text}");
}

/// A host's timer: a pull every 300 to 700 ms, whatever the last one said, each under the
/// faults the host has at that moment.
fn keep_pulling(fleet: &Fleet, i: usize, host: &str, bin: &Path, dir: &Path, stop: &AtomicBool) {
    let root = &fleet.roots[i];
    let logs = root.with_extension("logs");
    let _ = std::fs::create_dir_all(&logs);
    let mut rng = Rng::new(i as u64);
    while !stop.load(Ordering::Relaxed) {
        let (kill, clock) = {
            let faults = fleet.hosts[i].lock().unwrap();
            (faults.kill, faults.clock)
        };
        let program = fleet.disks.enter(bin);
        let trust = dir.join("ci.pub");
        let mut command = pull_command(program, &fleet.mirror.url, root, host, &trust);
        let url = fleet.etcd.lock().unwrap().url.clone();
        command.args(["--store", &url, "--report", &url]);
        command.args(fleet.pki.flags());
        if let Some(offset) = clock {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            command.env("BELL_RUN_NOW", (now + offset).to_string());
        }
        if let Some(KillAt::Failpoint(point)) = kill {
            command.env("BELL_RUN_FAILPOINT", point);
        }
        let stderr = logs.join("stderr");
        command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("a log"));
        let started = fleet.record.now();
        let mut child = command.spawn().expect("run bell-run");
        let mut killed_from_outside = false;
        if let Some(KillAt::After(after)) = kill {
            let until = Instant::now() + after;
            while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(5));
            }
            killed_from_outside = child.kill().is_ok();
        }
        let status = child.wait().expect("wait for bell-run");
        let ended = match status.signal() {
            Some(9) if killed_from_outside => Ended::Killed(format!("SIGKILL after {kill:?}")),
            Some(9) => Ended::Killed(format!("at {kill:?}")),
            Some(signal) => Ended::Killed(format!("signal {signal}")),
            None => Ended::Exited(status.code().unwrap_or(-1)),
        };
        let said = std::fs::read_to_string(&stderr)
            .unwrap_or_default()
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .map(|l| l.chars().take(160).collect())
            .unwrap_or_default();
        let run = Run {
            host: host.to_string(),
            started,
            ended_at: fleet.record.now(),
            ended,
            said,
            after: Seen::of(&fleet.disks.view(root)),
        };
        fleet.record.runs.lock().unwrap().push(run);
        std::thread::sleep(rng.millis(300, 700));
    }
}

/// `bell-run pull` (`program`, perhaps entered into the roots' namespace) of fleet `f` from
/// `source` into an image root, trusting `trust`.
fn pull_command(
    mut command: Command,
    source: &str,
    root: &Path,
    host: &str,
    trust: &Path,
) -> Command {
    command
        .args(["pull", "--source", source, "--root"])
        .arg(root)
        .args(["--host", host, "--trust"])
        .arg(trust)
        .args(["--fleet", "f", "--offline"])
        .env("NO_COLOR", "1");
    command
}

/// Applies the schedule: each window's fault at its start, undone at its end; then everything
/// undone that is still in force.
fn inject(fleet: &Fleet, schedule: &[Window]) {
    let mut edges: Vec<(Duration, bool, usize)> = Vec::new();
    for (i, window) in schedule.iter().enumerate() {
        edges.push((window.start, true, i));
        edges.push((window.start + window.length, false, i));
    }
    edges.sort();
    // The member each etcd fault took (the leader is resolved when it starts).
    let mut took: BTreeMap<usize, usize> = BTreeMap::new();
    for (at, starts, i) in edges {
        if let Some(wait) = at.checked_sub(fleet.record.now()) {
            std::thread::sleep(wait);
        }
        let fault = schedule[i].fault;
        let what = match (fault, starts) {
            (Fault::EtcdKill(member), true) => {
                let m = resolve(fleet, member);
                took.insert(i, m);
                fleet.etcd.lock().unwrap().kill(m);
                format!("etcd member m{m} killed ({member:?})")
            }
            (Fault::EtcdKill(_), false) => {
                let m = took[&i];
                fleet.etcd.lock().unwrap().restart(m);
                format!("etcd member m{m} started again")
            }
            (Fault::EtcdPause(member), true) => {
                let m = resolve(fleet, member);
                took.insert(i, m);
                signal(fleet.etcd.lock().unwrap().pid(m), "STOP");
                format!("etcd member m{m} paused ({member:?})")
            }
            (Fault::EtcdPause(_), false) => {
                let m = took[&i];
                signal(fleet.etcd.lock().unwrap().pid(m), "CONT");
                format!("etcd member m{m} continued")
            }
            (Fault::ControllerKill, true) => match *fleet.controller.lock().unwrap() {
                Some(pid) => {
                    signal(pid, "KILL");
                    format!("controller {pid} killed")
                }
                None => "no controller running to kill".to_string(),
            },
            (Fault::ControllerKill, false) => continue,
            (Fault::MirrorDown, true) => {
                fleet.mirror.set(Mode::Down);
                "mirror down".to_string()
            }
            (Fault::MirrorTrickle, true) => {
                fleet.mirror.set(Mode::Trickle);
                "mirror trickles".to_string()
            }
            (Fault::MirrorDown | Fault::MirrorTrickle, false) => {
                fleet.mirror.set(Mode::Serving);
                "mirror serves again".to_string()
            }
            (Fault::HostKill(h, at), true) => {
                fleet.hosts[h].lock().unwrap().kill = Some(at);
                format!("h{:02}'s bell-runs die {at:?}", h + 1)
            }
            (Fault::HostKill(h, at), false) => {
                let mut faults = fleet.hosts[h].lock().unwrap();
                // Another window of the same host may have set its own since.
                if faults.kill == Some(at) {
                    faults.kill = None;
                }
                format!("h{:02}'s bell-runs live again", h + 1)
            }
            (Fault::HostClock(h, offset), true) => {
                fleet.hosts[h].lock().unwrap().clock = Some(offset);
                format!("h{:02}'s clock off by {offset} s", h + 1)
            }
            (Fault::HostClock(h, offset), false) => {
                let mut faults = fleet.hosts[h].lock().unwrap();
                if faults.clock == Some(offset) {
                    faults.clock = None;
                }
                format!("h{:02}'s clock right again", h + 1)
            }
            (Fault::DiskFull(h), true) => {
                fleet.hosts[h].lock().unwrap().full += 1;
                let bytes = fleet.disks.fill(&fleet.roots[h]);
                format!("h{:02}'s root full ({bytes} bytes more to fill it)", h + 1)
            }
            (Fault::DiskFull(h), false) => {
                let mut faults = fleet.hosts[h].lock().unwrap();
                faults.full -= 1;
                if faults.full > 0 {
                    continue;
                }
                fleet.disks.empty(&fleet.roots[h]);
                format!("h{:02}'s root has room again", h + 1)
            }
            (Fault::ReportGarbled(h, how), true) => garble(fleet, h, how),
            (Fault::ReportGarbled(..), false) => continue,
        };
        fleet.record.event(format!("fault: {what}"));
    }
    let mut etcd = fleet.etcd.lock().unwrap();
    for m in 0..3 {
        etcd.restart(m);
        signal(etcd.pid(m), "CONT");
    }
    fleet.mirror.set(Mode::Serving);
    for (host, root) in fleet.hosts.iter().zip(&fleet.roots) {
        *host.lock().unwrap() = HostFaults::default();
        fleet.disks.empty(root);
    }
    drop(etcd);
    fleet.record.event("faults stopped");
}

/// Writes over host `h`'s report in the store: with half of it (junk to any reader), or with
/// a forgery that says the host runs the release the mirror serves, healthy, under the
/// host's own signature of another report. Neither may count as the host's word (the fleet's
/// readers believe only reports the host's identity signed), and the host's next run must
/// write its own over it (the reports checker reads each host's last report at the end).
fn garble(fleet: &Fleet, h: usize, how: Garble) -> String {
    let host = format!("h{:02}", h + 1);
    let key = format!("/bell/f/running/{host}");
    let client = fleet.etcd.lock().unwrap().client_tls(fleet.pki);
    let filed = match client.get(&key) {
        Ok(Some(filed)) => filed,
        Ok(None) => return format!("{host} has no report to garble yet"),
        Err(e) => return format!("{host}'s report not garbled: {e}"),
    };
    let garbled = match how {
        Garble::Junk => filed[..filed.len() / 2].to_vec(),
        Garble::Forged => {
            let mut report: serde_json::Value = serde_json::from_slice(&filed).unwrap_or_default();
            let release: serde_json::Value =
                serde_json::from_slice(&std::fs::read(fleet.served.join("release.json")).unwrap())
                    .unwrap_or_default();
            report["release"] = release["version"].clone();
            report["bundle"] = release["hosts"][&host]["bundle"].clone();
            report["result"] = "success".into();
            report["error"] = serde_json::Value::Null;
            report["refused_release"] = serde_json::Value::Null;
            serde_json::to_vec(&report).unwrap()
        }
    };
    match client.put(&key, &garbled) {
        Ok(()) => format!("{host}'s report garbled ({how:?})"),
        Err(e) => format!("{host}'s report not garbled: {e}"),
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// The member a fault takes: the leader as the members say (the first when none answers).
fn resolve(fleet: &Fleet, member: Member) -> usize {
    let Member::Leader = member else {
        let Member::Index(i) = member else {
            unreachable!()
        };
        return i;
    };
    let endpoints = fleet.etcd.lock().unwrap().endpoints.clone();
    let out = etcdctl(&endpoints, Some(fleet.pki))
        .args(["--dial-timeout=2s", "--command-timeout=3s"])
        .args(["endpoint", "status", "-w", "json"])
        .output()
        .expect("etcdctl")
        .stdout;
    let statuses: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap_or_default();
    statuses
        .iter()
        .find(|s| s["Status"]["leader"] == s["Status"]["header"]["member_id"])
        .and_then(|s| s["Endpoint"].as_str())
        .and_then(|e| endpoints.iter().position(|p| e.ends_with(p.as_str())))
        .unwrap_or(0)
}

/// `etcdctl` against every member, with the client certificate of `tls` when the cluster
/// speaks TLS.
fn etcdctl(endpoints: &[String], tls: Option<&Pki>) -> Command {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let endpoints: Vec<String> = endpoints
        .iter()
        .map(|e| format!("{scheme}://{e}"))
        .collect();
    let mut command = Command::new("etcdctl");
    command
        .arg(format!("--endpoints={}", endpoints.join(",")))
        .env("ETCDCTL_API", "3");
    if let Some(pki) = tls {
        command
            .arg(format!("--cacert={}", pki.path("ca.pem").display()))
            .arg(format!("--cert={}", pki.path("client.pem").display()))
            .arg(format!("--key={}", pki.path("client.key").display()));
    }
    command
}

/// The operator: builds each release, rolls it out, and answers each halt and refusal as a
/// person would (fix the broken host and resume, or abort; resume after a timeout or a
/// controller that died).
struct Operator<'a> {
    fleet: &'a Fleet<'a>,
    fx: &'a Fixture,
    served: &'a Path,
    url: &'a str,
    roots: BTreeMap<String, PathBuf>,
    rng: Rng,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Start,
    Resume,
    Abort,
}

impl Operator<'_> {
    /// Rolls release `n` out until it is done or aborted; false when the deadline passed first.
    fn roll_out(&mut self, n: u32, deadline: Instant) -> bool {
        let hosts: Vec<String> = self.roots.keys().cloned().collect();
        let broken = (n > 1 && self.rng.chance(60))
            .then(|| hosts[self.rng.below(hosts.len() as u64) as usize].clone());
        let spec = spec(n, broken.as_deref(), &self.fleet.identities);
        std::fs::write(self.fx.path().join("bell.kdl"), spec).unwrap();
        let out = format!("out{n}");
        let build = self
            .fx
            .bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(build.code, 0, "{}", build.stderr);
        let target = bundles(&self.fx.path().join(&out).join("release.json"));
        let before: BTreeMap<String, String> = self
            .fleet
            .record
            .endings
            .lock()
            .unwrap()
            .last()
            .map(|e| e.want.clone())
            .unwrap_or_default();
        copy_over(&self.fx.path().join(&out), self.served);
        self.fleet.record.event(format!(
            "operator: rolls out release {n} (broken on {broken:?})"
        ));
        let mut step = Step::Start;
        while Instant::now() < deadline {
            let (code, events, stderr) = self.controller(step);
            let ended = events.iter().rev().find_map(|e| match e["event"].as_str() {
                Some(how @ ("done" | "aborted")) => Some(how.to_string()),
                _ => None,
            });
            // An abort that a killed controller had finished before it said so is refused as
            // one with nothing left to abort.
            let (code, ended) = match (code, ended) {
                (Some(_), None) if stderr.contains("is aborted already") => {
                    (Some(0), Some("aborted".to_string()))
                }
                other => other,
            };
            let halted: Vec<String> = events
                .iter()
                .filter(|e| e["event"] == "halted")
                .flat_map(|e| e["hosts"].as_array().cloned().unwrap_or_default())
                .filter_map(|h| h["host"].as_str().map(str::to_string))
                .collect();
            self.fleet.record.event(format!(
                "operator: controller {step:?} ended {code:?}{}: {}",
                if halted.is_empty() {
                    String::new()
                } else {
                    format!(", halted on {halted:?}")
                },
                stderr.lines().last().unwrap_or_default()
            ));
            match (code, ended) {
                (Some(0), Some(how)) => {
                    let want = if how == "aborted" {
                        before.clone()
                    } else {
                        target.clone()
                    };
                    let on = self
                        .roots
                        .iter()
                        .map(|(h, r)| (h.clone(), Seen::of(r).generation))
                        .collect();
                    self.fleet.record.endings.lock().unwrap().push(Ending {
                        at: self.fleet.record.now(),
                        number: n,
                        how,
                        want,
                        on,
                    });
                    return true;
                }
                (Some(1), _) => {
                    let only_broken =
                        !halted.is_empty() && halted.iter().all(|h| Some(h) == broken.as_ref());
                    step = if only_broken && step != Step::Abort && self.rng.chance(50) {
                        Step::Abort
                    } else {
                        if only_broken {
                            self.fix(n, broken.as_deref().unwrap_or_default());
                        }
                        if step == Step::Abort {
                            Step::Abort
                        } else {
                            Step::Resume
                        }
                    };
                }
                (None, _) => {
                    if step == Step::Start {
                        step = Step::Resume;
                    }
                }
                _ => {
                    if step == Step::Start && stderr.contains("--resume") {
                        step = Step::Resume;
                    } else if step == Step::Resume && stderr.contains("start one") {
                        step = Step::Start;
                    }
                    std::thread::sleep(Duration::from_millis(1000));
                }
            }
        }
        self.fleet
            .record
            .event(format!("operator: release {n} did not end by the deadline"));
        false
    }

    /// Adds the group the broken host's file needs to its root.
    fn fix(&self, n: u32, host: &str) {
        let group = self.roots[host].join("etc/group");
        let mut groups = std::fs::read_to_string(&group).unwrap();
        let line = format!("bellapp{n}:x:{}:\n", 4000 + n);
        if !groups.contains(&line) {
            groups.push_str(&line);
            std::fs::write(&group, groups).unwrap();
            self.fleet
                .record
                .event(format!("operator: fixed {host} (group bellapp{n})"));
        }
    }

    /// One run of `bellc rollout`: its exit code (none when killed), events and stderr.
    fn controller(&self, step: Step) -> (Option<i32>, Vec<serde_json::Value>, String) {
        let mut args = vec![
            "rollout".to_string(),
            "served".into(),
            "--store".into(),
            self.url.to_string(),
            "--sign-key".into(),
            "ci.key".into(),
            "--json".into(),
            "--wave-timeout".into(),
            "30s".into(),
        ];
        args.extend(self.fleet.pki.flags());
        match step {
            Step::Start => {}
            Step::Resume => args.push("--resume".into()),
            Step::Abort => args.push("--abort".into()),
        }
        let child = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args(&args)
            .current_dir(self.fx.path())
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bellc rollout");
        *self.fleet.controller.lock().unwrap() = Some(child.id());
        let out = child.wait_with_output().expect("wait for bellc rollout");
        *self.fleet.controller.lock().unwrap() = None;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{stderr}");
        let events = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (out.status.code(), events, stderr)
    }
}

/// The bundle of each host in a release file.
fn bundles(release: &Path) -> BTreeMap<String, String> {
    let release: bell_bundle::Release =
        serde_json::from_slice(&std::fs::read(release).unwrap()).unwrap();
    release
        .hosts
        .into_iter()
        .map(|(h, r)| (h, r.bundle))
        .collect()
}

/// Where `bellc status` asks, and how long the fleet has to settle.
struct Settle<'a> {
    fx: &'a Fixture,
    served: &'a Path,
    url: &'a str,
    /// The store's TLS options.
    flags: Vec<String>,
    bound: Duration,
}

/// Waits (at most the bound) until `bellc status` says every host is `up-to-date`.
fn settle(record: &Record, how: &Settle, hosts: &[String]) -> Vec<Finding> {
    let Settle {
        fx,
        served,
        url,
        flags,
        bound,
    } = how;
    let started = Instant::now();
    let mut args = vec![
        "status", "--store", url, "--fleet", "f", "--json", "--trust", "ci.pub", "--source",
    ];
    let served = served.to_str().unwrap();
    args.push(served);
    args.extend(flags.iter().map(String::as_str));
    let mut behind: Vec<String>;
    loop {
        let run = fx.bellc(&args);
        let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_default();
        behind = hosts
            .iter()
            .filter_map(|h| {
                let row = status["hosts"]
                    .as_array()
                    .and_then(|rows| rows.iter().find(|r| r["host"] == h.as_str()));
                match row {
                    None => Some(format!("{h}: no row")),
                    Some(row) => (row["state"] != "up-to-date")
                        .then(|| format!("{h}: {} {}", row["state"], row["detail"])),
                }
            })
            .collect();
        if status["hosts"].as_array().is_none() {
            behind = vec![format!("no status: {}", run.stderr)];
        }
        if behind.is_empty() {
            record.event(format!(
                "every host up-to-date {:.1} s after the faults",
                started.elapsed().as_secs_f64()
            ));
            return Vec::new();
        }
        if started.elapsed() > *bound {
            return vec![Finding {
                check: "up-to-date",
                what: format!(
                    "hosts not up-to-date {} s after the faults stopped",
                    bound.as_secs()
                ),
                history: behind,
            }];
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every version of every group's semaphore, from etcd's history (`etcdctl watch --rev=1`).
fn semaphores(endpoints: &[String], tls: Option<&Pki>) -> Vec<SemaphoreVersion> {
    use base64::Engine as _;
    let mut child = etcdctl(endpoints, tls)
        .args([
            "watch",
            "--rev=1",
            "--prefix",
            "/bell/f/groups/",
            "-w",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcdctl watch");
    let (send, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    // The history comes at once; the watch then waits for what is new.
    let mut versions = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(3)) {
        let response: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        for event in response["Events"].as_array().into_iter().flatten() {
            let decode = |v: &serde_json::Value| {
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap_or_default())
                    .unwrap_or_default()
            };
            let key = String::from_utf8_lossy(&decode(&event["kv"]["key"])).into_owned();
            let Some(group) = key
                .strip_prefix("/bell/f/groups/")
                .and_then(|k| k.strip_suffix("/v1/semaphore"))
            else {
                continue;
            };
            let value: Option<serde_json::Value> = (event["type"] != 1)
                .then(|| serde_json::from_slice(&decode(&event["kv"]["value"])).ok())
                .flatten();
            versions.push(SemaphoreVersion {
                revision: event["kv"]["mod_revision"].as_i64().unwrap_or(0),
                group: group.to_string(),
                holders: value.as_ref().map(|v| {
                    v["holders"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|h| h.as_str().map(str::to_string))
                        .collect()
                }),
                total_slots: value.as_ref().and_then(|v| v["total_slots"].as_u64()),
            });
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    versions
}

/// Every release file the served directory held with its signature, as the run went: the
/// controller signs an abort's release under the version an earlier release had (the same map
/// of bundles), over that file, so the directory at the end does not hold every release a host
/// took.
#[derive(Default)]
struct Served {
    /// The release file and its signature, by the file's sha256.
    files: Mutex<BTreeMap<String, (Vec<u8>, String)>>,
}

impl Served {
    /// Takes in what `dir` holds now (a file and a signature read apart that do not match are
    /// taken in at the next look).
    fn look(&self, dir: &Path) {
        let mut paths = vec![dir.join("release.json")];
        if let Ok(entries) = std::fs::read_dir(dir.join(bell_bundle::RELEASES_DIR)) {
            paths.extend(
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "json")),
            );
        }
        for path in paths {
            let signature = format!("{}{}", path.display(), bell_bundle::SIGNATURE_SUFFIX);
            if let (Ok(bytes), Ok(signature)) =
                (std::fs::read(&path), std::fs::read_to_string(signature))
            {
                let sha = bell_bundle::sha256_hex(&bytes);
                self.files
                    .lock()
                    .unwrap()
                    .entry(sha)
                    .or_insert((bytes, signature));
            }
        }
    }

    /// Those whose signature the key verifies.
    fn signed(&self, public: &Path) -> Signed {
        let keys = bell_bundle::trust::TrustedKeys::parse(
            &std::fs::read_to_string(public).unwrap(),
            public,
        )
        .unwrap();
        let mut releases = BTreeMap::new();
        for (sha, (bytes, signature)) in self.files.lock().unwrap().iter() {
            if keys.verify(bytes, signature).is_err() {
                continue;
            }
            let release: bell_bundle::Release = serde_json::from_slice(bytes).unwrap();
            releases.insert(
                sha.clone(),
                (
                    release.sequence.unwrap_or(0),
                    release
                        .hosts
                        .into_iter()
                        .map(|(h, r)| (h, r.bundle))
                        .collect(),
                ),
            );
        }
        Signed { releases }
    }
}

//! `cargo bench -p bellc --bench rollout`: the rollout controller's own cost, the figure the
//! README quotes.
//!
//! A real etcd and `BELL_ROLLOUT_HOSTS` simulated hosts (default 1000) in waves of
//! `BELL_ROLLOUT_WAVE` (default 100). The release gives every host a new bundle whose apply
//! changes nothing: a simulator plays the hosts, reading the store as `bell-run pull` would
//! and filing each host's report (through the same crate bell-run uses) as soon as its desired
//! bundle changed, so that what is measured is the controller: signing and publishing each
//! wave, and reading the fleet's reports until the wave converged. Printed: the controller's
//! wall time, the time per wave, and the etcd requests the controller made per host.
//! It asserts only that the rollout finished; `compiler/tests/benchmarks_run.rs` runs it on a
//! small fleet, so that the command behind the README's figure cannot rot unnoticed.

#[path = "support/mod.rs"]
mod support;

use bell_bundle::{Release, ReleaseHost};
use bell_ops::fleet::rollout::{Controller, Event, Outcome};
use bell_store::{Etcd, Report, State, Store};
use bellc_core::emit::signing;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{env_number, now, LocalEtcd};

const FLEET: &str = "bench";
const THREADS: usize = 16;

fn release(names: &[String], bundle: char, wave: usize) -> Release {
    let hosts: BTreeMap<String, ReleaseHost> = names
        .iter()
        .map(|h| {
            let entry = ReleaseHost {
                bundle: bundle.to_string().repeat(64),
                address: None,
                labels: Default::default(),
                identity: None,
                secrets: None,
                snapshots: Default::default(),
                reboots: false,
                provides: Default::default(),
            };
            (h.clone(), entry)
        })
        .collect();
    Release {
        format: bell_bundle::FORMAT,
        fleet: FLEET.to_string(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: names.chunks(wave).map(<[String]>::to_vec).collect(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    }
}

/// What a host that applied `bundle` of `version` and changed nothing reports.
fn report(host: &str, version: &str, bundle: &str) -> Report {
    let at = now();
    Report {
        release: Some(version.to_string()),
        bundle: Some(bundle.to_string()),
        status: BTreeMap::from([
            ("apply".to_string(), State::Success),
            ("check".to_string(), State::Success),
            ("health".to_string(), State::Success),
        ]),
        ..Report::new(host, FLEET, "apply", State::Success, at)
    }
}

/// Files the reports of `hosts` on `version` from `THREADS` threads.
fn file_reports(store: &Store, hosts: &[(String, String)], version: &str) {
    if hosts.is_empty() {
        return;
    }
    std::thread::scope(|scope| {
        for chunk in hosts.chunks(hosts.len().div_ceil(THREADS)) {
            scope.spawn(move || {
                for (host, bundle) in chunk {
                    store
                        .record(&mut report(host, version, bundle), None)
                        .expect("report");
                }
            });
        }
    });
}

/// The hosts: whenever the store names a new release, every host whose bundle changed
/// reports it applied.
fn simulate(etcd: &Etcd, stop: &AtomicBool, busy: &AtomicU64) {
    let store = Store::Etcd(etcd.clone());
    let mut on: BTreeMap<String, String> = BTreeMap::new();
    let mut seen = String::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(Some(published)) = store.published(FLEET) {
            if published.version != seen {
                let changed: Vec<(String, String)> = published
                    .hosts
                    .iter()
                    .filter(|(h, b)| on.get(*h) != Some(b))
                    .map(|(h, b)| (h.clone(), b.clone()))
                    .collect();
                let filing = Instant::now();
                file_reports(&store, &changed, &published.version);
                busy.fetch_add(filing.elapsed().as_millis() as u64, Ordering::Relaxed);
                on.extend(changed);
                seen = published.version;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn main() {
    let hosts = env_number("BELL_ROLLOUT_HOSTS", 1000) as usize;
    let wave = env_number("BELL_ROLLOUT_WAVE", 100).max(1) as usize;
    let local = LocalEtcd::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("releases")).expect("out");
    let names: Vec<String> = (0..hosts).map(|i| format!("host-{i:05}")).collect();

    // Where the fleet is: release 1 signed by the key into OUT (as CI's build of it was) and
    // published, every host up to date and alive on it. The controller builds only on a
    // release the key signed, never on what the store alone says.
    let key_path = dir.path().join("ci");
    signing::generate(&key_path, None).expect("keygen");
    let key = signing::load(&dir.path().join("ci.key"), None).expect("key");
    let old = release(&names, 'a', wave);
    let new = release(&names, 'c', wave);
    let now_ms = now() * 1000;
    let signed =
        signing::keep_release(&out, &old, Some(&key), None, now_ms, false).expect("sign release 1");
    let kept = out
        .join("releases")
        .join(format!("{}.json", signed.version));
    let old: Release =
        serde_json::from_str(&std::fs::read_to_string(kept).expect("kept")).expect("release 1");
    std::fs::write(out.join("release.json"), new.to_json()).expect("write");
    let setup = local.client();
    let store = Store::Etcd(setup.clone());
    store.publish(&old).expect("publish");
    let lease = setup.grant_lease(600).expect("lease");
    for host in &names {
        setup
            .put_with_lease(&bell_store::alive_key(FLEET, host), b"1", lease)
            .expect("alive");
    }
    let on_old: Vec<(String, String)> = old
        .hosts
        .iter()
        .map(|(h, e)| (h.clone(), e.bundle.clone()))
        .collect();
    file_reports(&store, &on_old, &old.version);

    let controller = Controller {
        etcd: local.client(),
        out: out.clone(),
        key: Some(&key),
        expires_in: None,
        wave_timeout: Duration::from_secs(300),
        poll: Duration::from_millis(env_number("BELL_ROLLOUT_POLL_MS", 250)),
        who: "bench".to_string(),
        by: "bench".to_string(),
        reading: Default::default(),
    };
    let stop = AtomicBool::new(false);
    let busy = AtomicU64::new(0);
    let simulator = local.client();
    let (outcome, elapsed, waves) = std::thread::scope(|scope| {
        scope.spawn(|| simulate(&simulator, &stop, &busy));
        let mut waves: Vec<Duration> = Vec::new();
        let mut wave_began = Instant::now();
        let began = Instant::now();
        let outcome = controller.rollout(&new, false, &mut |event| match event {
            Event::WaveStarted { .. } => wave_began = Instant::now(),
            Event::Tick {
                converged, hosts, ..
            } if converged == hosts => waves.push(wave_began.elapsed()),
            _ => {}
        });
        let elapsed = began.elapsed();
        stop.store(true, Ordering::Relaxed);
        (outcome, elapsed, waves)
    });
    assert!(
        matches!(outcome, Ok(Outcome::Done { .. })),
        "the rollout did not finish: {outcome:?}"
    );
    let requests = controller.etcd.requests();
    let mean = waves.iter().sum::<Duration>() / waves.len().max(1) as u32;
    println!(
        "rollout of {hosts} hosts in {} waves: controller wall time {:.2} s (a wave {:.2} s on \
         average, from its release published to its last host seen converged)",
        waves.len(),
        elapsed.as_secs_f64(),
        mean.as_secs_f64()
    );
    let hosts_ms = busy.load(Ordering::Relaxed);
    println!(
        "of which the simulated hosts filing their reports: {:.2} s; the controller's own \
         time (signing, publishing, reading reports, polling every {} ms): {:.2} s",
        hosts_ms as f64 / 1000.0,
        controller.poll.as_millis(),
        elapsed.as_secs_f64() - hosts_ms as f64 / 1000.0
    );
    println!(
        "etcd requests by the controller: {requests} ({:.3} per host)",
        requests as f64 / hosts.max(1) as f64
    );
}

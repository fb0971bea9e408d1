//! `cargo bench -p bellc --bench store_load`: the etcd load of a fleet whose hosts pull on a
//! timer and change nothing, the figure the README quotes.
//!
//! A real etcd (Debian's `etcd-server`, on a free loopback port, a temporary data directory)
//! and `BELL_LOAD_HOSTS` simulated hosts (default 1000). A simulated host makes exactly the
//! store calls of `bell-run pull --store … --report …` through the same crate bell-run uses:
//! read the fleet's desired bundle for it, file its report, renew its liveness lease, and give
//! back a slot it does not hold. First every host files its first report (the writes of a real
//! first pull); then every host pulls once a second for `BELL_LOAD_SECONDS` (default 60), 32
//! threads sharing the hosts. Printed: the pulls done, etcd revisions per no-op pull (the goal
//! is 0) and the growth of etcd's database. Nothing asserts: the figures go into the README.

#[path = "support/mod.rs"]
mod support;

use bell_store::{prefetch, semaphore, Etcd, Lease, Report, State, Store};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{env_number, now, LocalEtcd};

const FLEET: &str = "bench";
const THREADS: usize = 32;
/// The liveness lease's time, bell-run's default: renewed by a pull once half of it is spent.
const TTL: u64 = 2700;
/// bell-run's default timer, in seconds.
const TIMER: u64 = 900;

/// What a host that applied its bundle and changed nothing reports.
fn report(host: &str, at: u64) -> Report {
    Report {
        release: Some("a".repeat(64)),
        bundle: Some("b".repeat(64)),
        resources: (0..30)
            .map(|i| bell_store::ResourceResult {
                key: format!("sysctl:net.core.key{i}"),
                result: bell_store::Status::Unchanged,
                detail: None,
                output: None,
            })
            .collect(),
        signature: Some("verified: key 0123456789ABCDEF, sequence 1".to_string()),
        status: BTreeMap::from([
            ("apply".to_string(), State::Success),
            ("check".to_string(), State::Success),
            ("health".to_string(), State::Success),
        ]),
        ..Report::new(host, FLEET, "apply", State::Success, at)
    }
}

/// The store calls of one `bell-run pull` of a host that is up to date: the first request
/// reads what the others need (`bell_store::prefetch`), as bell-run's does.
fn pull(
    store: &Store,
    etcd: &Etcd,
    host: &str,
    lease: Option<Lease>,
    at: u64,
) -> Result<Option<Lease>, String> {
    let prefix = semaphore::default_prefix(FLEET);
    let also = prefetch::pull_keys(FLEET, host, Some((&prefix, "default")));
    let (_, read) = store.desired_with(FLEET, host, &also)?;
    store.record_with(&mut report(host, at), None, Some(&read))?;
    let lease = store.keep_alive_with(FLEET, host, lease, TTL, at, Some(&read))?;
    semaphore::release_with(etcd, &prefix, "default", host, Some(&read))?;
    Ok(lease)
}

pub fn main() {
    let hosts = env_number("BELL_LOAD_HOSTS", 1000) as usize;
    let seconds = env_number("BELL_LOAD_SECONDS", 60);
    let local = LocalEtcd::start();
    let etcd = local.client();
    let store = Store::Etcd(etcd.clone());
    let names: Vec<String> = (0..hosts).map(|i| format!("host-{i:05}")).collect();
    etcd.put(&bell_store::version_key(FLEET), "a".repeat(64).as_bytes())
        .expect("publish");
    for name in &names {
        etcd.put(
            &bell_store::desired_key(FLEET, name),
            "b".repeat(64).as_bytes(),
        )
        .expect("publish");
    }

    // Every host's first pull: its first report and its lease.
    let first = Instant::now();
    let leases: Vec<Option<Lease>> = std::thread::scope(|scope| {
        let chunks: Vec<_> = names
            .chunks(names.len().div_ceil(THREADS).max(1))
            .map(|chunk| {
                let (store, etcd) = (&store, &etcd);
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|host| pull(store, etcd, host, None, now()).expect("first pull"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        chunks
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect()
    });
    println!(
        "first pulls: {hosts} hosts in {:.1} s",
        first.elapsed().as_secs_f64()
    );

    let revision_before = etcd.revision().expect("revision");
    let requests_before = etcd.requests();
    let size_before = etcd.db_size().expect("db size");
    let done = AtomicU64::new(0);
    let late = AtomicU64::new(0);
    let start = Instant::now();
    let epoch = now();
    let mut leases = leases;
    std::thread::scope(|scope| {
        let per = names.len().div_ceil(THREADS).max(1);
        for (chunk, leases) in names.chunks(per).zip(leases.chunks_mut(per)) {
            let (store, etcd, done, late) = (&store, &etcd, &done, &late);
            scope.spawn(move || {
                for second in 0..seconds {
                    let tick = start + Duration::from_secs(second);
                    if let Some(wait) = tick.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    } else {
                        late.fetch_add(1, Ordering::Relaxed);
                    }
                    // Each second stands for one run of the default 15-minute timer, so that
                    // leases are renewed as often as on a real host: every other run.
                    let at = epoch + (second + 1) * TIMER;
                    for (host, lease) in chunk.iter().zip(leases.iter_mut()) {
                        *lease = pull(store, etcd, host, *lease, at).expect("pull");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let pulls = done.load(Ordering::Relaxed);
    let requests = etcd.requests() - requests_before;
    let revisions = etcd.revision().expect("revision") - revision_before;
    let size_after = etcd.db_size().expect("db size");
    println!(
        "no-op pulls: {pulls} by {hosts} hosts in {elapsed:.1} s ({:.0} pulls/s; {} of {} thread ticks started late)",
        pulls as f64 / elapsed,
        late.load(Ordering::Relaxed),
        THREADS as u64 * seconds
    );
    println!(
        "etcd requests: {:.2} per no-op pull (each second one {TIMER}-s timer run; a lease is renewed once {} s of its {TTL} s are spent)",
        requests as f64 / pulls.max(1) as f64,
        TTL / 2
    );
    println!(
        "etcd revisions: {revisions} ({:.4} per no-op pull); database {} KiB → {} KiB",
        revisions as f64 / pulls.max(1) as f64,
        size_before / 1024,
        size_after / 1024
    );
    drop(local);
}

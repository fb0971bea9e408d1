//! A reader that follows the fleet through a watch (the page, the controller) against a real
//! etcd: each reading takes only what changed and ends where a whole reading of the store
//! would (the same views, judged by the same witness, the same other keys); a watch that broke
//! resumes where it was, and one that cannot resume (etcd compacted past it) reads everything
//! again; while etcd cannot say its revision, a reading fails rather than show what may be old;
//! another fleet's writes (which move etcd's revision with no event of this fleet's) do not
//! stall it.

use crate::common::fleet::Etcd;
use bell_bundle::{Release, ReleaseHost};
use bell_ops::fleet::follow::Follower;
use bell_ops::fleet::witness::Witness;
use bell_store::keys::{self, Key};
use bell_store::proof::SigningKey;
use bell_store::{HostView, Identities, Report, State};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NOW: u64 = 1_800_000_000;

fn key(i: u8) -> SigningKey {
    SigningKey::from_seed([i; 32])
}

fn release() -> Release {
    let hosts: BTreeMap<String, ReleaseHost> = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let entry = ReleaseHost {
                bundle: "ab".repeat(32),
                address: None,
                labels: Default::default(),
                // `d` has none: what it files is unverified.
                identity: (*name != "d").then(|| key(i as u8 + 1).identity().to_openssh()),
                secrets: None,
                snapshots: Default::default(),
                reboots: false,
                provides: Default::default(),
            };
            (name.to_string(), entry)
        })
        .collect();
    Release {
        format: bell_bundle::FORMAT,
        fleet: "f".into(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: Vec::new(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    }
}

/// A report of `host`, signed by `signer` with `sequence` when there is one.
fn report(host: &str, result: State, signer: Option<&SigningKey>, sequence: u64) -> Vec<u8> {
    let mut report = Report {
        bundle: Some("ab".repeat(32)),
        status: BTreeMap::from([("apply".to_string(), result)]),
        ..Report::new(host, "f", "apply", result, sequence)
    };
    if let Some(signer) = signer {
        bell_store::proof::sign(&mut report, signer, sequence);
    }
    bell_store::proof::to_json(&report).into_bytes()
}

/// What a whole reading of the store makes of it now: every view judged by `witness`, and
/// the keys that are no host's view's.
fn whole(
    etcd: &bell_store::Etcd,
    release: &Release,
    identities: &Identities,
    witness: &mut Witness,
) -> (BTreeMap<String, HostView>, Vec<String>) {
    let kvs = etcd.range_prefix("/bell/f/").unwrap();
    let mut views = bell_store::views_from("f", &kvs, identities).unwrap();
    witness.judge_at(release, &mut views, NOW);
    let others = kvs
        .iter()
        .filter(|kv| {
            !matches!(
                Key::parse("f", &kv.key),
                Some(
                    Key::Report { .. }
                        | Key::Alive { .. }
                        | Key::Throttled { .. }
                        | Key::Status { .. }
                        | Key::Sync
                )
            )
        })
        .map(|kv| format!("{}={}", kv.key, String::from_utf8_lossy(&kv.value)))
        .collect();
    (views, others)
}

/// What a fleet's first reading finds in both tests: a's report (signed, succeeded), b's
/// (signed, failed), d's (unsigned: the release gives d no identity), a's liveness.
fn file_first_reports(client: &bell_store::Etcd) {
    let put = |k: String, v: &[u8]| client.put(&k, v).unwrap();
    put(
        keys::running_key("f", "a"),
        &report("a", State::Success, Some(&key(1)), NOW - 50),
    );
    put(
        keys::running_key("f", "b"),
        &report("b", State::Failed, Some(&key(2)), NOW - 40),
    );
    put(
        keys::running_key("f", "d"),
        &report("d", State::Success, None, NOW - 40),
    );
    put(keys::alive_key("f", "a"), b"1");
}

fn followed(follower: &Follower) -> (BTreeMap<String, HostView>, Vec<String>) {
    let views = follower
        .views()
        .iter()
        .map(|(h, v)| (h.clone(), HostView::clone(v)))
        .collect();
    let others = follower
        .others()
        .iter()
        .map(|kv| format!("{}={}", kv.key, String::from_utf8_lossy(&kv.value)))
        .collect();
    (views, others)
}

#[test]
fn a_follower_reads_only_what_changed_and_ends_where_a_whole_reading_does() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let release = release();
    let identities = bell_store::identities_of(&release);
    let put = |k: String, v: &[u8]| client.put(&k, v).unwrap();
    file_first_reports(&client);
    put(keys::alive_key("f", "b"), b"1");
    put(keys::status_key("f", "apply", "a"), b"success");
    put(keys::version_key("f"), b"v1");
    put(keys::desired_key("f", "a"), "ab".repeat(32).as_bytes());
    put(
        keys::hold_key("f", "c"),
        br#"{"by":"ops","reason":"disk","since":1}"#,
    );

    let mut follower = Follower::start(client.clone(), "f").unwrap();
    let (mut seen_by_follower, mut seen_whole) = (Witness::default(), Witness::default());
    let taken = follower
        .read(&release, &identities, &mut seen_by_follower, NOW)
        .unwrap();
    assert!(taken.everything, "{taken:?}");
    assert_eq!(
        followed(&follower),
        whole(&client, &release, &identities, &mut seen_whole)
    );
    assert!(follower.views()["b"].forged.is_empty());
    // The hosts' `status/` keys (for readers outside bell) are neither read nor kept.
    let stored = client.range_prefix("/bell/f/").unwrap();
    let status = keys::status_prefix("f");
    assert!(stored.iter().any(|kv| kv.key.starts_with(&status)));
    assert_eq!(
        taken.keys,
        stored
            .iter()
            .filter(|kv| !kv.key.starts_with(&status))
            .count(),
        "{taken:?}"
    );

    // Nothing written since: nothing is read again.
    let taken = follower
        .read(&release, &identities, &mut seen_by_follower, NOW)
        .unwrap();
    assert_eq!((taken.everything, taken.hosts, taken.keys), (false, 0, 0));

    // b files again, a's report is deleted (its last verified one stands in), c's report is
    // signed by another key (forged), d gets a liveness key, b a gateway's throttle; the
    // hold goes, the published version moves.
    put(
        keys::running_key("f", "b"),
        &report("b", State::Success, Some(&key(2)), NOW - 10),
    );
    client.delete(&keys::running_key("f", "a")).unwrap();
    put(
        keys::running_key("f", "c"),
        &report("c", State::Success, Some(&key(9)), NOW - 10),
    );
    put(keys::alive_key("f", "d"), b"1");
    put(keys::throttled_key("f", "b"), b"since 1");
    put(keys::status_key("f", "apply", "b"), b"success");
    client.delete(&keys::hold_key("f", "c")).unwrap();
    put(keys::version_key("f"), b"v2");
    let taken = follower
        .read(&release, &identities, &mut seen_by_follower, NOW)
        .unwrap();
    assert!(!taken.everything, "{taken:?}");
    assert_eq!(taken.hosts, 4, "a, b, c and d: {taken:?}");
    assert_eq!(
        followed(&follower),
        whole(&client, &release, &identities, &mut seen_whole)
    );
    let views = follower.views();
    assert!(
        views["a"].report.is_some(),
        "the last verified report stands in"
    );
    assert!(views["b"].throttled.is_some());
    assert_eq!(views["b"].report.as_ref().unwrap().result, State::Success);
    assert_eq!(views["c"].forged.len(), 1, "{:?}", views["c"]);
    assert!(views["d"].unverified.is_some());
    assert!(follower.others().iter().any(|kv| kv.value == b"v2"[..]));
    assert!(!follower.others().iter().any(|kv| kv.key.contains("hold")));

    // b's older report put back (a replay) is refused by the follower's witness as by the
    // whole reading's; its newer one stands.
    put(
        keys::running_key("f", "b"),
        &report("b", State::Failed, Some(&key(2)), NOW - 40),
    );
    follower
        .read(&release, &identities, &mut seen_by_follower, NOW)
        .unwrap();
    assert_eq!(
        followed(&follower),
        whole(&client, &release, &identities, &mut seen_whole)
    );
    assert!(follower.views()["b"].forged[0].contains("replay"));

    // Let go, the follower's threads end: the learner at once, the watch at its next event.
    let threads = || std::fs::read_dir("/proc/self/task").unwrap().count();
    let with_follower = threads();
    drop(follower);
    put(keys::alive_key("f", "c"), b"1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while threads() > with_follower - 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} threads still",
            threads()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn reports_checked_ahead_count_only_for_the_identities_they_were_checked_against() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let release = release();
    let identities = bell_store::identities_of(&release);
    // What a reader started with: an older release that gave c the key 9 (a key since
    // replaced), with which c's report is signed.
    let mut stale = identities.clone();
    stale.insert("c".into(), key(9).identity());
    let put = |k: String, v: &[u8]| client.put(&k, v).unwrap();
    file_first_reports(&client);
    put(
        keys::running_key("f", "c"),
        &report("c", State::Success, Some(&key(9)), NOW - 40),
    );
    // One that is not a report at all.
    put(keys::running_key("f", "e"), b"{not json");

    let mut follower =
        Follower::start_checking(client.clone(), "f", Arc::new(stale), Default::default()).unwrap();
    let (mut seen_by_follower, mut seen_whole) = (Witness::default(), Witness::default());
    follower
        .read(&release, &identities, &mut seen_by_follower, NOW)
        .unwrap();
    assert_eq!(follower.checked_ahead(), 4, "a, b, c and d read as reports");
    // The reading is the release's: c's report, good by the key it was checked against
    // ahead, is forged by the one the release gives c now.
    assert_eq!(
        followed(&follower),
        whole(&client, &release, &identities, &mut seen_whole)
    );
    let views = follower.views();
    assert_eq!(views["c"].forged.len(), 1, "{:?}", views["c"]);
    assert!(views["c"].report.is_none());
    assert!(views["a"].forged.is_empty() && views["a"].report.is_some());
    assert!(views["e"].unreadable.is_some());
}

/// A reader started again (`bellc serve` restarted, the next `bellc rollout`) takes the
/// reports its witness saw signed by their digests, kept in its state: the same reading, and
/// the digests are of the bytes in etcd under each host's identity.
#[test]
fn a_reader_started_again_reads_as_before_with_what_it_checked_kept() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let release = release();
    let identities = bell_store::identities_of(&release);
    file_first_reports(&client);
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("f.json");
    let read_once = |witness: &mut Witness| {
        let mut follower = Follower::start_checking(
            client.clone(),
            "f",
            Arc::new(identities.clone()),
            witness.checked_before(),
        )
        .unwrap();
        follower.read(&release, &identities, witness, NOW).unwrap();
        witness.save().unwrap();
        followed(&follower)
    };
    let mut first = Witness::open_at(path.clone()).unwrap();
    assert!(first.checked_before().is_empty());
    let before = read_once(&mut first);
    let mut again = Witness::open_at(path.clone()).unwrap();
    let kept = again.checked_before();
    // Also kept alone, for a reader to start its reading with before the record is open.
    assert_eq!(Witness::kept_checked_at(&path), kept);
    let signed: std::collections::HashSet<_> = ["a", "b"]
        .iter()
        .map(|host| {
            let raw = client.get(&keys::running_key("f", host)).unwrap().unwrap();
            bell_store::proof::checked(&identities[*host], &raw)
        })
        .collect();
    assert_eq!(kept, signed, "a's and b's reports, signed; d's is not");
    assert_eq!(read_once(&mut again), before);
}

#[test]
fn writes_outside_the_fleet_do_not_stall_a_follower() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let release = release();
    let identities = bell_store::identities_of(&release);
    client
        .put(
            &keys::running_key("f", "a"),
            &report("a", State::Success, Some(&key(1)), NOW - 50),
        )
        .unwrap();
    let mut follower = Follower::start(client.clone(), "f").unwrap();
    let mut witness = Witness::default();
    assert!(
        follower
            .read(&release, &identities, &mut witness, NOW)
            .unwrap()
            .everything
    );
    // Another fleet's writes move etcd's revision, and no event of this fleet's watch says
    // so: a reading still ends, within a second, with nothing new.
    for i in 0..5 {
        client.put(&format!("/bell/g/k{i}"), b"v").unwrap();
        let started = Instant::now();
        let taken = follower
            .read(&release, &identities, &mut witness, NOW)
            .unwrap();
        assert_eq!((taken.everything, taken.keys), (false, 0));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    // And its own writes are still seen.
    client.put(&keys::alive_key("f", "a"), b"1").unwrap();
    let taken = follower
        .read(&release, &identities, &mut witness, NOW)
        .unwrap();
    assert_eq!((taken.hosts, taken.keys), (1, 1));
}

/// A TCP relay to etcd that a test can cut (every connection closed, new ones refused) and
/// mend: the follower's watch breaks as it would when the network does.
struct Relay {
    address: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn to(target: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (target, is_cut, kept) = (target.to_string(), Arc::clone(&cut), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if is_cut.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16384];
                        while let Ok(n @ 1..) = from.read(&mut buffer) {
                            if to.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                };
                let mut kept = kept.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Relay { address, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

#[test]
fn a_broken_watch_resumes_and_one_compacted_past_reads_everything_again() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    let release = release();
    let identities = bell_store::identities_of(&release);
    let put = |k: String, v: &[u8]| client.put(&k, v).unwrap();
    put(
        keys::running_key("f", "a"),
        &report("a", State::Success, Some(&key(1)), NOW - 50),
    );
    let relay = Relay::to(&etcd.endpoint);
    let mut follower =
        Follower::start(bell_store::Etcd::new(vec![relay.address.clone()]), "f").unwrap();
    let (mut seen_by_follower, mut seen_whole) = (Witness::default(), Witness::default());
    let mut read =
        |follower: &mut Follower| follower.read(&release, &identities, &mut seen_by_follower, NOW);
    assert!(read(&mut follower).unwrap().everything);
    assert_eq!(follower.listed_over_grpc(), 1);
    let mut agrees = |follower: &Follower| {
        assert_eq!(
            followed(follower),
            whole(&client, &release, &identities, &mut seen_whole)
        );
    };
    agrees(&follower);

    // Cut off: a reading fails at once (etcd's revision cannot be learned), it does not
    // answer from what it holds.
    relay.cut();
    let started = Instant::now();
    let error = read(&mut follower).unwrap_err();
    assert!(error.contains("revision could not be learned"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // What was written meanwhile is read once the watch resumes, and only that.
    put(
        keys::running_key("f", "b"),
        &report("b", State::Success, Some(&key(2)), NOW - 10),
    );
    relay.mend();
    let taken = retry(|| read(&mut follower));
    assert!(!taken.everything && taken.hosts == 1, "{taken:?}");
    agrees(&follower);

    // Cut off while etcd compacts past the watch: it cannot resume, and the range is read
    // again whole (a deletion meanwhile is seen, as everything else).
    relay.cut();
    client.delete(&keys::running_key("f", "a")).unwrap();
    put(
        keys::running_key("f", "c"),
        &report("c", State::Success, Some(&key(3)), NOW - 5),
    );
    let revision = client.revision().unwrap();
    crate::common::fleet::etcdctl(&etcd.endpoint, &["compact", &revision.to_string()]);
    relay.mend();
    let taken = retry(|| read(&mut follower));
    assert!(taken.everything, "{taken:?}");
    assert_eq!(follower.listed_over_grpc(), 2, "read again over gRPC");
    agrees(&follower);
    assert!(follower.views().contains_key("c"));
    assert!(
        follower.views()["a"].report.is_some(),
        "its last verified report stands in"
    );
}

/// What `attempt` gives once it succeeds (within 20 s).
fn retry<T>(mut attempt: impl FnMut() -> Result<T, String>) -> T {
    let started = Instant::now();
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(e) => assert!(started.elapsed() < Duration::from_secs(20), "{e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

//! `cargo bench -p bellc --bench serve`: what `bellc serve` costs with a large fleet in etcd,
//! the figures the README quotes.
//!
//! A real etcd (Debian's `etcd-server`, a free loopback port, a temporary data directory)
//! holds the reports of `BELL_SERVE_HOSTS` hosts (default 100,000): each an apply report of 30
//! resources as bell-run files it, its apply state and its liveness key, with a few hosts
//! failed, pending and silent, and a disruption-budget semaphore per rack. Printed: how long one
//! refresh takes (the first: the board's watch reads every key and every report is parsed;
//! then one with nothing new, and one after 1,000 hosts filed a new report), then how long each
//! page takes to render from the snapshot, over HTTP on loopback as a
//! browser asks for it (the median of 20). Nothing asserts: the figures go into the README.
//! `BELL_SERVE_PROFILE=1` also splits a refresh: etcd's answer alone, the client's parse,
//! the hosts' views, the statuses. `BELL_SERVE_SIGNED=1` gives every host an identity in the
//! release and signs its report with it, as bell-run does: the first refresh then checks every
//! signature.

#[path = "support/mod.rs"]
mod support;

use bell_bundle::{Release, ReleaseHost};
use bell_ops::serve::{pages::Pages, Board, Out};
use bell_store::{Report, ResourceResult, State};
use bell_wire::etcd::Op;
use bell_wire::server as http;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{env_number, now, LocalEtcd};

/// The allocator `bellc serve` runs with (the CLI's), so that the figures are its.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: bellc_core::render::budget::Budgeted = bellc_core::render::budget::Budgeted;

const FLEET: &str = "bench";
const RACKS: usize = 100;
/// Reports that change between two refreshes, for the refresh's figure.
const CHANGED: usize = 1000;

fn bundle(i: usize) -> String {
    format!("{:064x}", i % 7)
}

/// What host `i` files: most are up to date; every 100th failed, every 50th on an older bundle.
fn report(host: &str, i: usize, release: &str, at: u64) -> Report {
    let failed = i % 100 == 1;
    let behind = i % 50 == 2;
    let result = if failed {
        State::Failed
    } else {
        State::Success
    };
    Report {
        release: Some(release.to_string()),
        bundle: Some(if behind { "f".repeat(64) } else { bundle(i) }),
        resources: (0..30)
            .map(|r| ResourceResult {
                key: format!("sysctl:net.core.key{r}"),
                result: if failed && r == 29 {
                    bell_store::Status::Failed
                } else {
                    bell_store::Status::Unchanged
                },
                detail: (failed && r == 29).then(|| "exit 1".to_string()),
                output: None,
            })
            .collect(),
        signature: Some("verified: key 0123456789ABCDEF, sequence 1".to_string()),
        status: BTreeMap::from([("apply".to_string(), result)]),
        ..Report::new(host, FLEET, "apply", result, at)
    }
}

fn get(address: &str, path: &str) -> usize {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read");
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{path}");
    answer.len()
}

pub fn main() {
    if let Ok(of) = std::env::var(RESTART) {
        return restart(&of);
    }
    let hosts = env_number("BELL_SERVE_HOSTS", 100_000) as usize;
    let local = LocalEtcd::start();
    let etcd = local.client();
    let names: Vec<String> = (0..hosts).map(|i| format!("host-{i:06}")).collect();
    let signed = std::env::var_os("BELL_SERVE_SIGNED").is_some();
    let keys: Vec<bell_store::proof::SigningKey> = if signed {
        (0..hosts)
            .map(|i| {
                let mut seed = [7u8; 32];
                seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
                bell_store::proof::SigningKey::from_seed(seed)
            })
            .collect()
    } else {
        Vec::new()
    };
    // What the page remembers of the reports it checked stays with the bench.
    let state = tempfile::tempdir().expect("tempdir");
    std::env::set_var("BELLC_STATE_DIR", state.path());
    let entries: BTreeMap<String, ReleaseHost> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let labels = BTreeMap::from([("rack".to_string(), format!("r{:02}", i % RACKS))]);
            let entry = ReleaseHost {
                bundle: bundle(i),
                address: Some(format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255)),
                labels: Arc::new(labels),
                identity: keys.get(i).map(|k| k.identity().to_openssh()),
                secrets: None,
                snapshots: Default::default(),
                reboots: false,
                provides: Default::default(),
            };
            (name.clone(), entry)
        })
        .collect();
    let release = Release {
        format: bell_bundle::FORMAT,
        fleet: FLEET.to_string(),
        version: Release::compute_version(&entries),
        hosts: entries,
        waves: Vec::new(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    };
    let out = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        out.path().join("release.json"),
        serde_json::to_vec(&release).expect("json"),
    )
    .expect("release.json");

    // Filed as bell-run files them, many hosts per transaction to fill the store quickly.
    let filled = Instant::now();
    let at = now();
    let numbered: Vec<(usize, &String)> = names.iter().enumerate().collect();
    std::thread::scope(|scope| {
        for part in numbered.chunks(hosts.div_ceil(8).max(1)) {
            let (etcd, release, signers) = (&etcd, &release, &keys);
            scope.spawn(move || {
                for batch in part.chunks(40) {
                    let mut keys = Vec::new();
                    for (i, host) in batch {
                        if i % 100 == 3 {
                            continue; // silent: never reported
                        }
                        let mut r = report(host, *i, &release.version, at);
                        if let Some(key) = signers.get(*i) {
                            bell_store::proof::sign(&mut r, key, at);
                        }
                        let state = r.result.as_str().to_string();
                        keys.push((
                            bell_store::running_key(FLEET, host),
                            bell_store::proof::to_json(&r).into_bytes(),
                        ));
                        keys.push((
                            bell_store::status_key(FLEET, "apply", host),
                            state.into_bytes(),
                        ));
                        keys.push((bell_store::alive_key(FLEET, host), b"1".to_vec()));
                    }
                    let ops: Vec<Op> = keys.iter().map(|(k, v)| Op::Put(k, v)).collect();
                    etcd.write_all(&ops).expect("fill etcd");
                }
            });
        }
    });
    let prefix = bell_store::semaphore::default_prefix(FLEET);
    for (rack, host) in names.iter().take(RACKS).enumerate() {
        let group = format!("r{rack:02}");
        bell_store::semaphore::acquire(&etcd, &prefix, &group, host, 2, at, None)
            .expect("semaphore");
    }
    eprintln!(
        "filled etcd with {hosts} hosts' reports in {:.1} s (database {} MiB)",
        filled.elapsed().as_secs_f64(),
        etcd.db_size().unwrap_or(0) >> 20
    );

    if std::env::var_os("BELL_SERVE_PROFILE").is_some() {
        let t = Instant::now();
        // `/bell/bench/` to `/bell/bench0`, base64, as the client asks for them.
        let body = r#"{"key":"L2JlbGwvYmVuY2gv","range_end":"L2JlbGwvYmVuY2gw"}"#;
        let mut stream = std::net::TcpStream::connect(&local.endpoint).expect("connect");
        write!(
            stream,
            "POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read");
        let got = t.elapsed().as_secs_f64();
        eprintln!(
            "profile: etcd answers the range in {got:.2} s ({} MiB of JSON)",
            raw.len() >> 20
        );
        let t = Instant::now();
        let kvs = etcd
            .range_prefix(&format!("/bell/{FLEET}/"))
            .expect("range");
        let fetched = t.elapsed().as_secs_f64();
        let identities = bell_store::identities_of(&release);
        let mut views = bell_store::views_from(FLEET, &kvs, &identities).expect("views");
        let parsed = t.elapsed().as_secs_f64();
        let mut witness = bell_ops::fleet::witness::Witness::open(FLEET).expect("witness");
        witness.judge(&release, &mut views);
        let judged = t.elapsed().as_secs_f64();
        witness.save().expect("save");
        eprintln!(
            "profile: the witness judges in {:.2} s and saves in {:.2} s",
            judged - parsed,
            t.elapsed().as_secs_f64() - judged
        );
        let parsed = t.elapsed().as_secs_f64();
        let status = bell_ops::fleet::status::fleet_status(&release, &views, now(), None);
        eprintln!(
            "profile: the client's range {fetched:.2} s ({} keys), views {:.2} s, status {:.2} s ({} rows)",
            kvs.len(),
            parsed - fetched,
            t.elapsed().as_secs_f64() - parsed,
            status.hosts.len()
        );
    }
    let board = Arc::new(
        Board::new(
            Out::Dir(out.path().to_path_buf()),
            local.client(),
            Duration::from_secs(3600),
            None,
        )
        .expect("board"),
    );
    // The first reading: the board's watch reads every key over gRPC in pages, and every
    // report is parsed (and checked, signed) while etcd reads the next page; later ones take
    // only what changed.
    let t = Instant::now();
    let cpu_before = cpu_seconds();
    board.refresh(now());
    let first = t.elapsed().as_secs_f64();
    let first_cpu = cpu_seconds() - cpu_before;
    eprintln!("the first reading took {first_cpu:.2} s of CPU");
    assert!(board.outage().is_none(), "{:?}", board.outage());
    let listing = board.last_listing().unwrap_or_default().as_secs_f64();
    let median = |mut times: Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    let mut idle = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        board.refresh(now());
        idle.push(t.elapsed().as_secs_f64());
    }
    // 1,000 hosts file a new report (a later sequence, the other result) between refreshes.
    let changed = CHANGED.min(hosts);
    let mut after_changes = Vec::new();
    for round in 0..3u64 {
        let at = now() + 1 + round;
        let ops: Vec<(String, Vec<u8>)> = (0..changed)
            .map(|k| {
                let i = (k * hosts / changed + round as usize) % hosts;
                let mut r = report(&names[i], i + 1, &release.version, at);
                if let Some(key) = keys.get(i) {
                    bell_store::proof::sign(&mut r, key, at);
                }
                (
                    bell_store::running_key(FLEET, &names[i]),
                    bell_store::proof::to_json(&r).into_bytes(),
                )
            })
            .collect();
        for batch in ops.chunks(40) {
            let batch: Vec<Op> = batch.iter().map(|(k, v)| Op::Put(k, v)).collect();
            etcd.write_all(&batch).expect("write the changed reports");
        }
        let t = Instant::now();
        board.refresh(now());
        after_changes.push(t.elapsed().as_secs_f64());
        assert!(board.outage().is_none(), "{:?}", board.outage());
    }
    let requests = board.requests();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let pages = Pages::new().expect("templates");
    let served = Arc::clone(&board);
    std::thread::spawn(move || http::serve(listener, move |r| pages.answer(&served, r)));

    println!(
        "bellc serve, {hosts} hosts in etcd (cargo bench -p bellc --bench serve; BELL_SERVE_HOSTS={hosts})"
    );
    println!(
        "first reading (the watch reads the range over gRPC in pages, each page's reports parsed{} meanwhile: \
         {listing:.2} s; all of it: {first:.2} s); a refresh \
         with nothing new: median {:.3} s; a refresh after {changed} reports changed: median \
         {:.3} s ({requests} requests to etcd in all)",
        if signed {
            " and checked"
        } else {
            ""
        },
        median(idle),
        median(after_changes),
    );
    if signed {
        let snapshot = board.snapshot().expect("a snapshot");
        let forged = snapshot.status.counts.get("forged").copied().unwrap_or(0);
        assert_eq!(forged, 0, "a signed report was not believed");
    }
    println!("| page | median of 20 | bytes |");
    println!("|---|---|---|");
    for path in [
        "/",
        "/?state=failed",
        "/?label=rack%3Dr42&page=5",
        "/?page=1000",
        "/hosts/host-000001",
        "/api/v1/hosts/host-000001",
        "/api/v1/status",
    ] {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..20 {
            let t = Instant::now();
            bytes = get(&address, path);
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!("| `{path}` | {:.1} ms | {bytes} |", times[10] * 1000.0);
    }
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    println!("peak RSS of the serving process: {peak}");
    if signed {
        // The page started again, as a process of its own (fresh memory, as a restart has):
        // its witness kept a digest of each report it checked, and it takes those reports by
        // it instead of checking their signatures again (the 3,000 that changed since the
        // first reading's save are checked).
        let kept = state.path().join(format!("seen-{FLEET}.json"));
        let waited = Instant::now();
        while !kept.exists() && waited.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for (what, keep) in [("without the digests", false), ("with them", true)] {
            let checked = kept.with_extension("checked");
            let digests = std::fs::read(&checked).expect("the witness's digests");
            if !keep {
                std::fs::remove_file(&checked).expect("set the digests aside");
            }
            let run = std::process::Command::new(std::env::current_exe().expect("this bench"))
                .args(RESTART_ARGS)
                .env(
                    RESTART,
                    format!("{}\n{}", local.endpoint, out.path().display()),
                )
                .output()
                .expect("the bench started again");
            std::fs::write(&checked, digests).expect("the digests put back");
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            let said = String::from_utf8_lossy(&run.stdout);
            let figures = said
                .lines()
                .find_map(|l| l.strip_prefix(RESTART))
                .expect("the figures of the bench started again");
            println!(
                "a page started again, its witness's record kept ({} MiB), {what}:{figures}",
                std::fs::metadata(&kept).map_or(0, |m| m.len()) >> 20,
            );
        }
    }
}

/// Set for the bench run again as a page started again: etcd's endpoint and OUT. Its figures
/// come back on the line it starts.
const RESTART: &str = "BELL_SERVE_BENCH_RESTART";

/// What the bench is started again with: nothing as a benchmark; as a test (`tests/
/// benchmarks_run.rs`), the name of the one test that runs it.
#[cfg(not(test))]
const RESTART_ARGS: &[&str] = &[];
#[cfg(test)]
const RESTART_ARGS: &[&str] = &[
    "the_page_benchmark_runs_on_a_small_signed_fleet",
    "--exact",
    "--nocapture",
];

/// The first reading of a new board over the fleet the bench filled, in this process.
fn restart(of: &str) {
    let (endpoint, out) = of.split_once('\n').expect("endpoint and OUT");
    let board = Board::new(
        Out::Dir(out.into()),
        bell_store::Etcd::new(vec![endpoint.to_string()]),
        Duration::from_secs(3600),
        None,
    )
    .expect("board");
    let t = Instant::now();
    board.refresh(now());
    assert!(board.outage().is_none(), "{:?}", board.outage());
    println!(
        "{RESTART} listing {:.2} s, all of it {:.2} s, {:.2} s of CPU",
        board.last_listing().unwrap_or_default().as_secs_f64(),
        t.elapsed().as_secs_f64(),
        cpu_seconds()
    );
}

/// The CPU time this process has used, user and system, in seconds (`/proc/self/stat`, in
/// the kernel's clock ticks of 1/100 s as it gives them to user space).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

//! `cargo bench -p bellc --bench gateway`: what the fleet gateway serves, the figures the
//! README quotes.
//!
//! A real etcd (Debian's `etcd-server`, a free loopback port, a temporary data directory)
//! holds the keys of `BELL_GATEWAY_HOSTS` hosts (default 100,000): each host's desired
//! bundle, its signed apply report of 30 resources, its apply state and its liveness key, and
//! the published version. A release signed with a fresh fleet key names every host with an
//! identity of its own. Two `bellc gateway` replicas (child processes, TLS with a CA made by
//! `openssl`) serve it. The load generator is not 100,000 processes: `BELL_GATEWAY_CLIENTS`
//! threads (default 512) each keep one TLS connection to a replica (half to each) and make,
//! host after host, the one request of a no-op `bell-run pull --gateway` (the transaction that
//! reads the version, the host's desired bundle, hold, reports, liveness and semaphore),
//! signed with that host's identity as bell-run signs it, for `BELL_GATEWAY_SECONDS`
//! (default 20). Printed: no-op pulls a second, the requests the replicas sent etcd meanwhile,
//! and each replica's memory. Nothing asserts but that every pull was answered 200: the
//! figures go into the README.

#[path = "support/mod.rs"]
mod support;

use bell_bundle::{Release, ReleaseHost};
use bell_store::proof::SigningKey;
use bell_wire::etcd::Op;
use bell_wire::tls::{Tls, TlsFiles, TlsStream};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{env_number, now, LocalEtcd};

const FLEET: &str = "bench";

fn host_key(i: usize) -> SigningKey {
    let mut seed = [9u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
    SigningKey::from_seed(seed)
}

/// `openssl ARGS` in `dir`.
fn openssl(dir: &Path, args: &str) {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("openssl (apt install openssl)");
    assert!(out.status.success(), "openssl {args}");
}

/// A CA (`ca.pem`) and a certificate for 127.0.0.1 signed by it (`server.pem`, `server.key`).
fn pki(dir: &Path) {
    openssl(
        dir,
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
         -subj /CN=bench-CA -keyout ca.key -out ca.pem",
    );
    openssl(
        dir,
        "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
         -keyout server.key -out server.csr",
    );
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
    openssl(
        dir,
        "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
         -extfile server.ext -out server.pem",
    );
}

/// A `bellc gateway` replica on a free port, killed on drop.
struct Replica {
    child: Child,
    address: String,
}

impl Replica {
    fn start(dir: &Path, endpoint: &str) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args(["gateway", "out", "--trust", "fleet.pub"])
            .arg("--store")
            .arg(format!("etcd://{endpoint}"))
            .args(["--listen", "127.0.0.1:0", "--refresh", "3600"])
            .args(["--tls-cert", "server.pem", "--tls-key", "server.key"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bellc gateway");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let address = loop {
            let line = lines
                .next()
                .expect("where the gateway listens")
                .expect("stderr");
            if let Some(rest) = line.split("on https://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_string();
            }
        };
        std::thread::spawn(move || lines.for_each(|line| eprintln!("gateway: {line:?}")));
        Replica { child, address }
    }

    /// The replica's resident memory now, in KiB.
    fn resident_kib(&self) -> u64 {
        self.memory_kib().0
    }

    /// The replica's resident memory now and at its peak, in MiB.
    fn memory(&self) -> (u64, u64) {
        let (now, peak) = self.memory_kib();
        (now >> 10, peak >> 10)
    }

    fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One keep-alive HTTPS connection, as a load balancer in front of the replicas would hold.
struct Connection {
    stream: BufReader<TlsStream>,
}

impl Connection {
    fn open(tls: &Tls, address: &str) -> Connection {
        let tcp = std::net::TcpStream::connect(address).expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let stream = tls.connect(tcp, "127.0.0.1").expect("TLS");
        Connection {
            stream: BufReader::new(stream),
        }
    }

    /// POSTs `body` to `path` with `authorization`; the status and the body.
    fn post(&mut self, path: &str, authorization: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.send(path, authorization, body);
        let mut status = 0;
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).expect("answer");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(rest) = line.strip_prefix("HTTP/1.1 ") {
                status = rest.get(..3).and_then(|s| s.parse().ok()).unwrap_or(0);
            } else if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut answer = vec![0; length];
        self.stream.read_exact(&mut answer).expect("answer");
        (status, answer)
    }

    /// POSTs `body` to `path` with `authorization`, leaving the answer unread.
    fn send(&mut self, path: &str, authorization: &str, body: &[u8]) {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {authorization}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let writer = self.stream.get_mut();
        writer.write_all(head.as_bytes()).expect("send");
        writer.write_all(body).expect("send");
        writer.flush().expect("send");
    }
}

/// A counter of a replica's `/metrics`.
fn metric(tls: &Tls, address: &str, name: &str) -> u64 {
    let tcp = std::net::TcpStream::connect(address).expect("connect");
    let mut stream = tls.connect(tcp, "127.0.0.1").expect("TLS");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// The body of a no-op pull's one request for `host`, as bell-run sends it.
fn pull_request(host: &str) -> Vec<u8> {
    let prefix = bell_store::semaphore::default_prefix(FLEET);
    let mut keys: Vec<String> = bell_store::Desired::keys(FLEET, host).into();
    keys.extend(bell_store::prefetch::pull_keys(
        FLEET,
        host,
        Some((&prefix, "default")),
    ));
    let ops: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| serde_json::json!({ "request_range": { "key": bell_wire::base64(k.as_bytes()) } }))
        .collect();
    serde_json::json!({ "success": ops })
        .to_string()
        .into_bytes()
}

/// What host `i` files once it applied its bundle and changed nothing: 30 resources.
fn report(host: &str, release: &str, i: usize, at: u64) -> bell_store::Report {
    use bell_store::{ResourceResult, State, Status};
    bell_store::Report {
        release: Some(release.to_string()),
        bundle: Some(format!("{:064x}", i % 7)),
        resources: (0..30)
            .map(|r| ResourceResult {
                key: format!("sysctl:net.core.key{r}"),
                result: Status::Unchanged,
                detail: None,
                output: None,
            })
            .collect(),
        signature: Some("verified: key 0123456789ABCDEF, sequence 1".to_string()),
        status: BTreeMap::from([("apply".to_string(), State::Success)]),
        ..bell_store::Report::new(host, FLEET, "apply", State::Success, at)
    }
}

/// The fleet in etcd: what a fleet whose hosts all applied their bundle holds.
fn fill(etcd: &bell_store::Etcd, names: &[String], keys: &[SigningKey], version: &str) {
    let at = now();
    let numbered: Vec<(usize, &String)> = names.iter().enumerate().collect();
    std::thread::scope(|scope| {
        for part in numbered.chunks(names.len().div_ceil(8).max(1)) {
            scope.spawn(move || {
                for batch in part.chunks(30) {
                    let mut kvs = Vec::new();
                    for (i, host) in batch {
                        let mut report = report(host, version, *i, at);
                        bell_store::proof::sign(&mut report, &keys[*i], at);
                        kvs.push((
                            bell_store::running_key(FLEET, host),
                            bell_store::proof::to_json(&report).into_bytes(),
                        ));
                        kvs.push((
                            bell_store::status_key(FLEET, "apply", host),
                            b"success".to_vec(),
                        ));
                        kvs.push((bell_store::alive_key(FLEET, host), b"1".to_vec()));
                        kvs.push((
                            bell_store::desired_key(FLEET, host),
                            format!("{:064x}", i % 7).into_bytes(),
                        ));
                    }
                    let ops: Vec<Op> = kvs.iter().map(|(k, v)| Op::Put(k, v)).collect();
                    etcd.write_all(&ops).expect("fill etcd");
                }
            });
        }
    });
    etcd.put(&bell_store::version_key(FLEET), version.as_bytes())
        .expect("version");
}

pub fn main() {
    let hosts = env_number("BELL_GATEWAY_HOSTS", 100_000) as usize;
    let seconds = env_number("BELL_GATEWAY_SECONDS", 20);
    let clients = env_number("BELL_GATEWAY_CLIENTS", 512).max(2) as usize;
    let local = LocalEtcd::start();
    let etcd = local.client();
    let dir = tempfile::tempdir().expect("tempdir");
    pki(dir.path());

    let names: Vec<String> = (0..hosts).map(|i| format!("host-{i:06}")).collect();
    let keys: Vec<SigningKey> = (0..hosts).map(host_key).collect();
    let entries: BTreeMap<String, ReleaseHost> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let entry = ReleaseHost {
                bundle: format!("{:064x}", i % 7),
                address: None,
                labels: Default::default(),
                identity: Some(keys[i].identity().to_openssh()),
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
        identities_required: true,
        assignments: Vec::new(),
    };
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("out");
    std::fs::write(
        out.join("release.json"),
        serde_json::to_vec(&release).expect("json"),
    )
    .expect("release.json");
    let files =
        bellc_core::emit::signing::generate(&dir.path().join("fleet"), None).expect("a fleet key");
    let fleet_key = bellc_core::emit::signing::load(&files.secret, None).expect("the fleet key");
    bellc_core::emit::signing::sign_release(&out, &fleet_key, None, now() * 1000).expect("signed");

    let filled = Instant::now();
    fill(&etcd, &names, &keys, &release.version);
    eprintln!(
        "filled etcd with {hosts} hosts in {:.1} s (database {} MiB)",
        filled.elapsed().as_secs_f64(),
        etcd.db_size().unwrap_or(0) >> 20
    );

    let started = Instant::now();
    let replicas = [
        Replica::start(dir.path(), &local.endpoint),
        Replica::start(dir.path(), &local.endpoint),
    ];
    let tls = Tls::load(
        &TlsFiles {
            ca: Some(dir.path().join("ca.pem")),
            cert: None,
            key: None,
        },
        ["--store-ca", "--store-cert", "--store-key"],
    )
    .expect("the CA");
    // Ready when each answers a pull from its cache.
    let probe = pull_request(&names[0]);
    for replica in &replicas {
        let mut connection = Connection::open(&tls, &replica.address);
        loop {
            let path = "/v3/kv/txn";
            let auth = bell_store::gateway::authorization(&names[0], &keys[0], path, &probe, now());
            let (status, _) = connection.post(path, &auth, &probe);
            if status == 200 {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(600), "{status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let ready = started.elapsed().as_secs_f64();
    let memory_ready: Vec<(u64, u64)> = replicas.iter().map(Replica::memory).collect();

    let etcd_requests = |replicas: &[Replica]| -> u64 {
        replicas
            .iter()
            .map(|r| metric(&tls, &r.address, "bell_gateway_etcd_requests_total"))
            .sum()
    };
    let before = etcd_requests(&replicas);
    let pulls = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    std::thread::scope(|scope| {
        for client in 0..clients {
            let (tls, names, keys) = (&tls, &names, &keys);
            let (pulls, failed, stop) = (&pulls, &failed, &stop);
            let address = replicas[client % 2].address.clone();
            scope.spawn(move || {
                let mut connection = Connection::open(tls, &address);
                let path = "/v3/kv/txn";
                let mut i = client;
                while !stop.load(Ordering::Relaxed) {
                    let host = i % names.len();
                    let body = pull_request(&names[host]);
                    let auth = bell_store::gateway::authorization(
                        &names[host],
                        &keys[host],
                        path,
                        &body,
                        now(),
                    );
                    let (status, _) = connection.post(path, &auth, &body);
                    if status == 200 {
                        pulls.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    i += clients;
                }
            });
        }
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = began.elapsed().as_secs_f64();
    let sent = etcd_requests(&replicas) - before;
    let pulls = pulls.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    assert_eq!(failed, 0, "pulls refused by the gateways");
    let memory: Vec<(u64, u64)> = replicas.iter().map(Replica::memory).collect();

    // Hosts that long-poll (`pull --wait`) and hear nothing: each holds a connection and a
    // waiting task at its replica until its wait is up.
    let waiters = env_number("BELL_GATEWAY_WAITERS", 10_000).min(hosts as u64) as usize;
    let revision = etcd.revision().expect("etcd's revision");
    let idle: Vec<u64> = replicas.iter().map(Replica::resident_kib).collect();
    let mut waiting = Vec::with_capacity(waiters);
    for (host, name) in names.iter().enumerate().take(waiters) {
        let key = bell_wire::base64(bell_store::desired_key(FLEET, name).as_bytes());
        let body = serde_json::json!({
            "keys": [key],
            "revision": revision.to_string(),
            "timeout": bell_store::gateway::MAX_WAIT.to_string(),
        })
        .to_string();
        let path = bell_wire::etcd::WAIT_PATH;
        let auth =
            bell_store::gateway::authorization(name, &keys[host], path, body.as_bytes(), now());
        let mut connection = Connection::open(&tls, &replicas[host % 2].address);
        connection.send(path, &auth, body.as_bytes());
        waiting.push(connection);
    }
    std::thread::sleep(Duration::from_secs(3));
    let per_waiter: Vec<f64> = replicas
        .iter()
        .zip(&idle)
        .map(|(r, before)| {
            r.resident_kib().saturating_sub(*before) as f64 * 1024.0 / (waiters as f64 / 2.0)
        })
        .collect();
    let still = replicas
        .iter()
        .map(|r| metric(&tls, &r.address, "bell_gateway_waiting"))
        .sum::<u64>();
    drop(waiting);

    println!(
        "bellc gateway, {hosts} hosts, two replicas (cargo bench -p bellc --bench gateway; \
         BELL_GATEWAY_HOSTS={hosts})"
    );
    println!(
        "both replicas serving from their caches {ready:.1} s after they started; each then \
         held {} MiB and {} MiB",
        memory_ready[0].0, memory_ready[1].0
    );
    println!(
        "no-op pulls (one signed transaction each, {clients} keep-alive connections): {:.0} a \
         second over {elapsed:.0} s ({pulls} pulls, every one answered)",
        pulls as f64 / elapsed
    );
    println!(
        "requests the replicas sent etcd meanwhile: {sent} ({:.1} a second, {:.4} a pull)",
        sent as f64 / elapsed,
        sent as f64 / pulls.max(1) as f64
    );
    println!(
        "replica memory after: {} MiB and {} MiB resident (peaks {} MiB and {} MiB)",
        memory[0].0, memory[1].0, memory[0].1, memory[1].1
    );
    println!(
        "{waiters} idle long-polls ({still} waiting by the replicas' count): {:.1} KiB and \
         {:.1} KiB more per waiting host at each replica",
        per_waiter[0] / 1024.0,
        per_waiter[1] / 1024.0
    );
}

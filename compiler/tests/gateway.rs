//! The fleet gateway, from outside: a real three-member etcd serving TLS with etcd's users on
//! (the roles `bellc store roles --apply` makes), two `bellc gateway` replicas in front of it
//! as the `gateway` user, and three image-root hosts whose identities `bell-run identity
//! --init` made and the spec lists. The hosts pull, report, take their rollout slots and keep
//! their liveness only through the gateways, with no store user or password; a rollout
//! converges while one replica is killed. Then the attacker's side: a request signed with
//! another host's key, played again, from a host the release does not name, unsigned, or at a
//! key that is not the host's own is refused; and host `a` flooding its own status key is
//! answered 429 while `b` and `c` pull as before, etcd's database barely grows, and `bellc
//! status` flags `a` (and only `a`) `throttled`.

use crate::common;
use crate::common::fleet::{bell_run, run_bin, text, EtcdCluster, Pki};
use crate::common::pulling::{copy_over, image_root, motd};
use crate::common::Fixture;
use bell_wire::etcd::RequestSigner;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["a", "b", "c"];

/// How long host `a` floods its own key, at full speed.
const FLOOD: Duration = Duration::from_secs(60);

fn spec(motd: &str, identities: &[String]) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\" identities=\"required\"\n");
    spec.push_str("rollout max-unavailable=\"100%\"\n");
    for (n, (host, identity)) in HOSTS.iter().zip(identities).enumerate() {
        let role = if *host == "c" { "lb" } else { "web" };
        spec.push_str(&format!(
            "host \"{host}\" address=\"10.0.0.{}\" role=\"{role}\" identity=\"{identity}\"\n",
            n + 1
        ));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n"
    ));
    // a and b serve `web`, each checked by a probe; c's live file lists those ready.
    spec.push_str(crate::common::WEB_PROVIDERS);
    spec.push_str(
        r##"override "lb" {
    match role="lb"
    live "/etc/backends" service="web" offline="root" {
        template "{% for s in services.web %}{{ s.host }}\n{% endfor %}"
        reload "echo reloaded >>\"$BELL_ROOT/reloads\""
    }
}
"##,
    );
    spec
}

/// A `bellc gateway` replica on a free port, killed on drop.
struct Gateway(Child, String);

impl Gateway {
    fn start(fx: &Fixture, url: &str, user: &[String]) -> Gateway {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args(["gateway", "served", "--trust", "ci.pub", "--store", url])
            .args(user)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--refresh",
                "1",
                "--throttled-after",
                "2",
            ])
            .arg("--tls-cert")
            .arg(user_pki_file(user, "server.pem"))
            .arg("--tls-key")
            .arg(user_pki_file(user, "server.key"))
            .current_dir(fx.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bellc gateway");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("where the gateway listens").unwrap();
            if let Some(rest) = line.split("on https://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Gateway(child, address)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client of the gateways that signs each request with `sign`.
fn signing_client(
    pki: &Pki,
    endpoints: &str,
    sign: impl Fn(&str, &[u8]) -> String + Send + Sync + 'static,
) -> bell_store::Etcd {
    bell_store::Etcd::open(
        &format!("etcds://{endpoints}"),
        &bell_store::Access {
            signer: Some(RequestSigner(Arc::new(sign))),
            ..pki.server_access()
        },
    )
    .unwrap()
    // A host that does not wait when the gateway asks it to (bell-run does: `Limits::HOST`).
    .with_limits(bell_wire::etcd::Limits {
        throttled_waits: Duration::ZERO,
        ..bell_wire::etcd::Limits::HOST
    })
}

/// A file beside the CA that `--store-ca` in `user` names.
fn user_pki_file(user: &[String], name: &str) -> std::path::PathBuf {
    let at = user.iter().position(|a| a == "--store-ca").unwrap();
    Path::new(&user[at + 1]).with_file_name(name)
}

/// A client of etcd itself, as etcd's root.
fn direct_client(url: &str, pki: &Pki, root_password: &Path) -> bell_store::Etcd {
    bell_store::Etcd::open(
        url,
        &bell_store::Access {
            user: Some("root".into()),
            password_file: Some(root_password.to_path_buf()),
            ..pki.server_access()
        },
    )
    .unwrap()
}

/// A counter of the replica at `endpoint`'s `/metrics`.
fn metric(pki: &Pki, endpoint: &str, name: &str) -> u64 {
    let tls = bell_wire::tls::Tls::load(
        &bell_wire::tls::TlsFiles {
            ca: Some(pki.path("ca.pem")),
            ..Default::default()
        },
        ["--store-ca", "--store-cert", "--store-key"],
    )
    .unwrap();
    let (host, port) = bell_wire::client::host_port(endpoint).unwrap();
    let bounds = bell_wire::etcd::Limits::HOST.bounds("the gateway did not answer");
    let mut body =
        bell_wire::client::get_stream(host, port, Some(&tls), "/metrics", "test", &bounds).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut body, &mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .parse()
        .unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn host_key(root: &Path) -> bell_store::proof::SigningKey {
    // bell's own key, as `identity --init` wrote it: an unencrypted OpenSSH key.
    let text = std::fs::read_to_string(root.join("etc/bell/identity.key")).unwrap();
    bell_store::proof::SigningKey::from_seed(bell_seal::openssh::read_ed25519(&text).unwrap().seed)
}

#[test]
fn hosts_reach_the_store_only_through_the_gateway_and_one_host_cannot_stop_it() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(pki) = Pki::new() else {
        return;
    };
    let Some(mut etcd) = EtcdCluster::start_tls_for_users(&pki) else {
        return;
    };
    let url = etcd.url.clone();
    let ca = pki.path("ca.pem").display().to_string();
    // etcd's root, then users on.
    let root_password = fx.path().join("root.password");
    std::fs::write(&root_password, "r00t-Secret\n").unwrap();
    std::fs::set_permissions(&root_password, std::fs::Permissions::from_mode(0o600)).unwrap();
    for args in [
        &["user", "add", "root:r00t-Secret"][..],
        &["auth", "enable"],
    ] {
        let out = pki.etcdctl(&etcd.endpoints[2], args);
        assert!(out.status.success(), "etcdctl {args:?}: {}", text(&out));
    }
    let passwords = fx.path().join("passwords");
    let as_user = |user: &str, file: &str| -> Vec<String> {
        [
            "--store-ca",
            &ca,
            "--store-user",
            user,
            "--store-password-file",
            passwords.join(file).to_str().unwrap(),
        ]
        .map(str::to_string)
        .to_vec()
    };
    let controller = as_user("controller/f", "controller");
    let flags: Vec<&str> = controller.iter().map(String::as_str).collect();
    let serve = as_user("serve/f", "serve");
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let identities: Vec<String> = HOSTS
        .iter()
        .zip(&roots)
        .map(|(host, root)| {
            let args = [
                "identity",
                "--root",
                root.path().to_str().unwrap(),
                "--host",
                host,
                "--init",
            ];
            let out = run_bin(&bin, &args, &[]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for (n, motd) in [(1, "one"), (2, "two"), (3, "three")] {
        std::fs::write(fx.path().join("bell.kdl"), spec(motd, &identities)).unwrap();
        let out = format!("out{n}");
        let run = fx.bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let mut roles = vec!["store", "roles", "out1", "--apply", "--store", &url];
    let root_user = [
        "--store-ca",
        &ca,
        "--store-user",
        "root",
        "--store-password-file",
        root_password.to_str().unwrap(),
        "--passwords",
        passwords.to_str().unwrap(),
    ];
    roles.extend(root_user);
    let run = fx.bellc(&roles);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("gateway/f: role created"),
        "{}",
        run.stdout
    );
    let mut publish = vec!["publish", "out1", "--store", &url];
    publish.extend(&flags);
    let run = fx.bellc(&publish);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The mirror holds both builds; the store says release 1.
    let served = fx.path().join("served");
    copy_over(&fx.path().join("out1"), &served);
    copy_over(&fx.path().join("out2"), &served);

    let gateway_user = as_user("gateway/f", "gateway");
    let mut first = Gateway::start(&fx, &url, &gateway_user);
    let second = Gateway::start(&fx, &url, &gateway_user);
    let both = format!("{},{}", first.1, second.1);
    let gateway_url = format!("https://{both}");
    let trust = fx.path().join("ci.pub").display().to_string();
    let source = served.display().to_string();
    let pull = |host: &str, root: &Path| {
        let args = [
            "pull",
            "--source",
            &source,
            "--root",
            root.to_str().unwrap(),
            "--host",
            host,
            "--trust",
            &trust,
            "--fleet",
            "f",
            "--gateway",
            &gateway_url,
            "--report",
            &gateway_url,
            "--store-ca",
            &ca,
        ];
        run_bin(&bin, &args, &[])
    };
    for (host, root) in HOSTS.iter().zip(&roots) {
        let out = pull(host, root.path());
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        assert_eq!(motd(root.path()), "one\n", "{host}");
        // The image holds the host's identity, and no password of any store.
        let etc = root.path().join("etc/bell");
        let names: Vec<String> = std::fs::read_dir(&etc)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("password")), "{names:?}");
    }
    // On a host whose timer pulls through the gateway, `pending` asks the gateway the same
    // way, with nothing given but the root.
    let a_root = roots[0].path().to_str().unwrap();
    let timer = [
        "install-timer",
        "--root",
        a_root,
        "--source",
        &source,
        "--trust",
        &trust,
        "--fleet",
        "f",
        "--host",
        "a",
        "--gateway",
        &gateway_url,
        "--store-ca",
        &ca,
    ];
    let out = run_bin(&bin, &timer, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run_bin(&bin, &["pending", "--root", a_root], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("a is up to date"), "{}", text(&out));
    let status = |out: &str| -> serde_json::Value {
        let mut args = vec!["status", out, "--store", &url, "--json"];
        args.extend(&serve);
        let run = common::bellc_in(fx.path(), &args);
        assert!(matches!(run.code, 0 | 3), "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    };
    // Reported through the gateway, signed, and read as each host's own.
    let fleet = status("out1");
    for host in HOSTS {
        let row = common::row(&fleet, host);
        assert_eq!(row["state"], "up-to-date", "{row:#}");
    }

    // The page's follower, as `bellc serve` runs it with its user: the fleet's range over
    // etcd's gRPC interface (TLS, the user's token), the reports `bellc status` read.
    let as_serve = bell_store::Etcd::open(
        &url,
        &bell_store::Access {
            user: Some("serve/f".into()),
            password_file: Some(passwords.join("serve")),
            ..pki.server_access()
        },
    )
    .unwrap();
    let mut follower = bell_ops::fleet::follow::Follower::start(as_serve, "f").unwrap();
    let release: bell_bundle::Release =
        serde_json::from_slice(&std::fs::read(fx.path().join("out1/release.json")).unwrap())
            .unwrap();
    let identities = bell_store::identities_of(&release);
    let mut witness = bell_ops::fleet::witness::Witness::default();
    follower
        .read(&release, &identities, &mut witness, now())
        .unwrap();
    assert_eq!(follower.listed_over_grpc(), 1);
    for host in HOSTS {
        let report = follower.views()[host].report.as_ref();
        assert_eq!(report.map(|r| r.host.as_str()), Some(host));
    }
    drop(follower);

    // A rollout of release 2 while the hosts pull as their timers would; one replica dies.
    let stop = AtomicBool::new(false);
    let key = fx.path().join("ci.key").display().to_string();
    let mut rollout = vec![
        "rollout",
        "served",
        "--sign-key",
        &key,
        "--wave-timeout",
        "120s",
        "--json",
        "--store",
        &url,
    ];
    rollout.extend(&flags);
    let run = std::thread::scope(|scope| {
        for (host, root) in HOSTS.iter().zip(&roots) {
            let (stop, pull) = (&stop, &pull);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    pull(host, root.path());
                    std::thread::sleep(Duration::from_millis(300));
                }
            });
        }
        let killer = scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            first.kill();
        });
        let run = fx.bellc(&rollout);
        stop.store(true, Ordering::Relaxed);
        killer.join().unwrap();
        run
    });
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let fleet = status("served");
    for (host, root) in HOSTS.iter().zip(&roots) {
        assert_eq!(motd(root.path()), "two\n", "{host}");
        let row = common::row(&fleet, host);
        assert_eq!(row["state"], "up-to-date", "{row:#}");
    }
    // Killed for good: everything goes through the second from now on.
    let endpoint = second.1.clone();

    // The live layer through the gateway: a and b file their health as their probes find it,
    // and c's `bell-run live` long-polls the replica for their keys. a's probe fails: c's file
    // drops it within seconds, with no pull and no rollout; a recovers and is back.
    let backends = || std::fs::read_to_string(roots[2].path().join("etc/backends")).unwrap();
    assert_eq!(backends(), "a\nb\n");
    let replica = format!("https://{endpoint}");
    let logs = tempfile::tempdir().unwrap();
    let mut live: Vec<Child> = HOSTS
        .iter()
        .zip(&roots)
        .map(|(host, root)| {
            let log = std::fs::File::create(logs.path().join(host)).unwrap();
            Command::new(&bin)
                .args([
                    "live",
                    "--gateway",
                    &replica,
                    "--store-ca",
                    &ca,
                    "--every",
                    "1",
                ])
                .args(["--root", root.path().to_str().unwrap(), "--host", host])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap()
        })
        .collect();
    let said = |host: &str| std::fs::read_to_string(logs.path().join(host)).unwrap_or_default();
    let until = |what: &str, want: &str| -> Duration {
        let start = Instant::now();
        while backends() != want {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what}: not within 30 s\na: {}\nc: {}",
                said("a"),
                said("c")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        start.elapsed()
    };
    std::fs::write(roots[0].path().join("sick"), "").unwrap();
    let dropped = until("a dropped", "b\n");
    std::fs::remove_file(roots[0].path().join("sick")).unwrap();
    let back = until("a back", "a\nb\n");
    eprintln!(
        "through the gateway: a failing probe out of c's file in {dropped:?}, back in {back:?}"
    );
    assert!(dropped < Duration::from_secs(10), "{dropped:?}");
    assert!(back < Duration::from_secs(10), "{back:?}");
    assert!(!said("c").contains("cannot wait"), "{}", said("c"));
    // What c's file lists, filed through the gateway as c's own.
    let row = common::row(&status("served"), "c");
    assert_eq!(
        row["live"][0]["ready"],
        serde_json::json!(["a", "b"]),
        "{row:#}"
    );
    for child in &mut live {
        let _ = child.kill();
        let _ = child.wait();
    }

    // Pulls that change nothing read from the replica's watch cache.
    let etcd_before = metric(&pki, &endpoint, "bell_gateway_etcd_requests_total");
    let cached_before = metric(&pki, &endpoint, "bell_gateway_cache_reads_total");
    std::thread::scope(|scope| {
        for (host, root) in HOSTS.iter().zip(&roots) {
            for _ in 0..2 {
                let pull = &pull;
                scope.spawn(move || {
                    for _ in 0..3 {
                        let out = pull(host, root.path());
                        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
                    }
                });
            }
        }
    });
    let cached = metric(&pki, &endpoint, "bell_gateway_cache_reads_total") - cached_before;
    let sent = metric(&pki, &endpoint, "bell_gateway_etcd_requests_total") - etcd_before;
    // What they cost etcd (revision checks shared by the reads of a moment) is the
    // benchmark's to measure; here, that the reads were answered from memory.
    assert!(
        cached >= 18,
        "{cached} reads from the cache ({sent} requests to etcd)"
    );

    // A host that waits at the gateway (`pull --wait`) pulls again as soon as the store
    // changes what it decided on, not a timer period later: when it is held, and again when
    // it is let go.
    let log = fx.path().join("c-waits.jsonl");
    let c_root = roots[2].path().to_str().unwrap();
    let mut waiter = Command::new(&bin)
        .args(["pull", "--source", &source, "--root", c_root, "--host", "c"])
        .args(["--trust", &trust, "--fleet", "f", "--gateway", &gateway_url])
        .args([
            "--report",
            &gateway_url,
            "--store-ca",
            &ca,
            "--json",
            "--wait",
            "300",
        ])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // One JSON answer per pull, each whole once the next begins or the waiter waits.
    let pulls = || -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        serde_json::Deserializer::from_str(&text)
            .into_iter()
            .map_while(Result::ok)
            .collect()
    };
    let until_pulled = |count: usize| {
        let start = Instant::now();
        while pulls().len() < count {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "pull {count} did not come: {:?}",
                pulls()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        start.elapsed()
    };
    until_pulled(1);
    // Nothing changed: it waits, and pulls no more.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(pulls().len(), 1, "{:?}", pulls());
    let mut hold = vec![
        "hold", "c", "--store", &url, "--fleet", "f", "--by", "alice",
    ];
    hold.extend(&flags);
    let run = fx.bellc(&hold);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Seconds at most (a loaded machine), where the wait was five minutes.
    let took = until_pulled(2);
    assert!(took < Duration::from_secs(30), "{took:?}");
    // At its bundle already, a held host re-applies it as ever.
    let while_held = &pulls()[1];
    assert_eq!(while_held["result"], "ok", "{while_held:#}");
    hold[0] = "unhold";
    hold.splice(6..8, []);
    let run = fx.bellc(&hold);
    assert_eq!(run.code, 0, "{}", run.stderr);
    until_pulled(3);
    let third = &pulls()[2];
    assert_eq!(third["result"], "ok", "{third:#}");
    waiter.kill().unwrap();
    waiter.wait().unwrap();

    // The attacker's side. Host a's key, as a itself, at b's keys: refused for the key.
    let a_key = Arc::new(host_key(roots[0].path()));
    let as_a = {
        let key = Arc::clone(&a_key);
        signing_client(&pki, &endpoint, move |path, body| {
            bell_store::gateway::authorization("a", &key, path, body, now())
        })
    };
    let refused = |result: Result<(), String>, why: &str| {
        let e = result.expect_err(why);
        assert!(e.contains(why), "wanted `{why}`: {e}");
    };
    refused(
        as_a.put("/bell/f/running/b", b"{}"),
        "permission denied: host `a` may not write `/bell/f/running/b`",
    );
    refused(
        as_a.put("/bell/f/desired/a", b"another bundle"),
        "may not write `/bell/f/desired/a`",
    );
    refused(as_a.get("/bell/f/running/b").map(|_| ()), "may not read");
    // Its own keys are its own.
    assert!(as_a.get("/bell/f/desired/a").unwrap().is_some());
    // On an etcd another fleet shares: its writes move etcd's revision with no event of this
    // fleet's, and the replica's reads are answered all the same, fresh (within a second, where
    // they waited for a revision the watch would never bring and were refused).
    let other_fleet = direct_client(&url, &pki, &root_password);
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let writing = Arc::clone(&writing);
        std::thread::spawn(move || {
            let mut i = 0u64;
            while writing.load(Ordering::SeqCst) {
                other_fleet
                    .put("/bell/g/running/x", &i.to_be_bytes())
                    .unwrap();
                i += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..10 {
        let started = Instant::now();
        assert!(as_a.get("/bell/f/desired/a").unwrap().is_some());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    // By writing the fleet's sync key, which the replica's watch brings back.
    assert!(metric(&pki, &endpoint, "bell_gateway_cache_marks_total") > 0);
    // a's key, saying it is b.
    let a_as_b = {
        let key = Arc::clone(&a_key);
        signing_client(&pki, &endpoint, move |path, body| {
            bell_store::gateway::authorization("b", &key, path, body, now())
        })
    };
    refused(
        a_as_b.put("/bell/f/running/b", b"{}"),
        "is not signed by host `b`'s identity",
    );
    // A machine the release does not name, with a key of its own: it may only register.
    let stranger = {
        let key = bell_store::proof::SigningKey::from_seed([7; 32]);
        signing_client(&pki, &endpoint, move |path, body| {
            bell_store::gateway::authorization("z", &key, path, body, now())
        })
    };
    refused(
        stranger.put("/bell/f/discovery/z", b"{}"),
        "files only its registration as `z`",
    );
    refused(
        stranger.get("/bell/f/desired/a").map(|_| ()),
        "may not read",
    );
    refused(
        stranger.grant_lease(60).map(|_| ()),
        "host `z` is not in release",
    );
    // Unsigned, as an etcd client would ask.
    let unsigned = bell_store::Etcd::open(&format!("etcds://{endpoint}"), &pki.server_access())
        .unwrap()
        .with_limits(bell_wire::etcd::Limits::HOST);
    refused(
        unsigned.get("/bell/f/desired/a").map(|_| ()),
        "only requests a host signs",
    );
    // One request of a's, captured and played again.
    let body = serde_json::json!({ "key": bell_wire::base64(b"/bell/f/desired/a") }).to_string();
    let captured =
        bell_store::gateway::authorization("a", &a_key, "/v3/kv/range", body.as_bytes(), now());
    let replayer = signing_client(&pki, &endpoint, move |_, _| captured.clone());
    assert!(replayer.get("/bell/f/desired/a").unwrap().is_some());
    refused(replayer.get("/bell/f/desired/a").map(|_| ()), "a replay");
    // Signed ten minutes ago.
    let stale = {
        let key = Arc::clone(&a_key);
        signing_client(&pki, &endpoint, move |path, body| {
            bell_store::gateway::authorization("a", &key, path, body, now() - 600)
        })
    };
    refused(stale.get("/bell/f/desired/a").map(|_| ()), "clock");

    // A new machine registers through the gateway with the identity it makes, no password.
    let fresh = image_root();
    let args = [
        "register",
        "--gateway",
        &gateway_url,
        "--store-ca",
        &ca,
        "--fleet",
        "f",
        "--host",
        "new-1",
        "--root",
        fresh.path().to_str().unwrap(),
    ];
    let out = run_bin(&bin, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let filed = direct_client(&url, &pki, &root_password)
        .get("/bell/f/discovery/new-1")
        .unwrap()
        .unwrap();
    let (registration, by) = bell_store::discovery::check("new-1", &filed).unwrap();
    assert_eq!(registration.fleet, "f");
    assert_eq!(
        by.key_bytes(),
        host_key(fresh.path()).identity().key_bytes()
    );
    // ... and can do nothing else: not even pull as the host it will be.
    let out = pull("new-1", fresh.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("may only register"), "{}", text(&out));

    // a floods its own status key with large values at full speed for a minute while the
    // controller rolls release 3 out and b and c pull as their timers would, filing every
    // report: 429s for a alone. a is held first, as on call would hold a host gone wrong (its
    // own pulls share its limit: it would keep the wave waiting).
    let mut hold = vec![
        "hold", "a", "--store", &url, "--fleet", "f", "--by", "alice",
    ];
    hold.extend(&flags);
    let run = fx.bellc(&hold);
    assert_eq!(run.code, 0, "{}", run.stderr);
    copy_over(&fx.path().join("out3"), &served);
    let direct = direct_client(&url, &pki, &root_password);
    let size_before = direct.db_size().unwrap();
    let flooding = AtomicBool::new(true);
    let (throttled, written, took, rolled) = std::thread::scope(|scope| {
        let flood = scope.spawn(|| {
            let big = vec![b'x'; 200 * 1024];
            let (mut throttled, mut written) = (0, 0);
            let started = Instant::now();
            while started.elapsed() < FLOOD {
                match as_a.put("/bell/f/status/health/a", &big) {
                    Ok(()) => written += 1,
                    Err(e) if e.contains("HTTP 429") => throttled += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            flooding.store(false, Ordering::Relaxed);
            (throttled, written, started.elapsed())
        });
        let pullers: Vec<_> = HOSTS
            .iter()
            .zip(&roots)
            .skip(1)
            .map(|(host, root)| {
                let (flooding, pull) = (&flooding, &pull);
                scope.spawn(move || {
                    let mut pulls = 0;
                    while flooding.load(Ordering::Relaxed) {
                        // 10: the wave's slots were all taken, nothing changed.
                        let out = pull(host, root.path());
                        let said = text(&out);
                        assert!(matches!(out.status.code(), Some(0 | 10)), "{host}: {said}");
                        assert!(!said.contains("not filed"), "{host}: {said}");
                        pulls += 1;
                        std::thread::sleep(Duration::from_millis(300));
                    }
                    pulls
                })
            })
            .collect();
        let rolled = fx.bellc(&rollout);
        // The controller finished while a still flooded.
        assert!(
            flooding.load(Ordering::Relaxed),
            "the rollout outlasted the flood"
        );
        for puller in pullers {
            assert!(puller.join().unwrap() >= 10);
        }
        let (throttled, written, took) = flood.join().unwrap();
        (throttled, written, took, rolled)
    });
    assert_eq!(rolled.code, 0, "{}\n{}", rolled.stdout, rolled.stderr);
    for (root, motd_now) in roots.iter().zip(["two\n", "three\n", "three\n"]) {
        assert_eq!(motd(root.path()), motd_now);
    }
    let fleet = status("served");
    for host in ["b", "c"] {
        let row = common::row(&fleet, host);
        assert_eq!(row["state"], "up-to-date", "{row:#}");
    }
    // The burst (1 MiB: five values) and 64 KiB a second after it: a few values, never the
    // thousands it sent.
    let allowed = 6 + (took.as_secs_f64() * 64.0 / 200.0).ceil() as u64;
    assert!(
        written <= allowed && throttled >= 1000,
        "{throttled} refused, {written} written in {took:?} (at most {allowed})"
    );
    // Refused for longer than `--throttled-after`: `bellc status` flags a, and only a.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let fleet = status("served");
        let flags = |host: &str| common::row(&fleet, host)["flags"].to_string();
        if flags("a").contains("throttled") {
            assert!(!flags("b").contains("throttled") && !flags("c").contains("throttled"));
            let said = common::row(&fleet, "a")["throttled"].to_string();
            assert!(said.contains("429"), "{said}");
            break;
        }
        assert!(Instant::now() < deadline, "a is not flagged: {fleet:#}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // etcd's database stays well under its quota, and no member raised an alarm.
    let size = direct.db_size().unwrap();
    let grown = size.saturating_sub(size_before);
    assert!(
        grown < 16 << 20 && size < common::fleet::QUOTA / 2,
        "etcd's database grew by {grown} bytes to {size}"
    );
    let alarms = pki.etcdctl(
        &etcd.endpoints[1],
        &["--user", "root:r00t-Secret", "alarm", "list"],
    );
    let listed = String::from_utf8_lossy(&alarms.stdout);
    assert!(
        alarms.status.success() && listed.trim().is_empty(),
        "{}",
        text(&alarms)
    );
    drop(second);
    etcd.kill(2);
}

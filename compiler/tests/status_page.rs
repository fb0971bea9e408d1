//! `bellc serve`, the status page: a 12-host fleet reports to a real etcd through the real
//! bell-run (hosts up to date, pending, failed, unhealthy, drifted and silent), `bellc serve`
//! shows it, and a real browser (Debian's chromium, headless) loads the pages. The counts on
//! the page are `bellc status --json`'s, `/api/v1/status` is that JSON, a failed host's page
//! names its failing resource and why, a pending host's page shows its bundle change without
//! the secret in it, a secret of the spec appears on no page, the store is read with one
//! request per refresh, and the page keeps answering when etcd is gone. The overview's
//! screenshot is written to `target/status-page/overview.png` (the README's picture).

use crate::common;
use crate::common::fleet::*;
use crate::common::pulling::{image_root, release_of};
use crate::common::serving::Server;
use crate::common::{repo_root, Fixture};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const UP: [&str; 5] = ["web-1", "web-2", "web-3", "db-1", "db-2"];
const BEHIND: [&str; 2] = ["web-4", "db-3"];
const SILENT: [&str; 2] = ["web-5", "db-4"];
const HOSTS: [&str; 12] = [
    "web-1", "web-2", "web-3", "db-1", "db-2", "web-4", "db-3", "broken", "sick", "drifty",
    "web-5", "db-4",
];

fn spec(v: &str) -> String {
    // Its hosts have no identities: a trial's fleet, secrets in the clear.
    let mut spec = String::from("fleet \"lab\" target=\"debian-12\" secrets=\"plaintext\"\n");
    for (i, host) in HOSTS.iter().enumerate() {
        let rack = if i % 2 == 0 { "r1" } else { "r2" };
        spec.push_str(&format!("host \"{host}\" rack=\"{rack}\"\n"));
    }
    spec.push_str(&format!(
        r##"rollout batch-by="rack" max-unavailable=1
file "/etc/motd" {{
    content "release {v}\n"
}}
file "/etc/app/token" mode="0600" {{
    content "TOPSECRET-{v}\n"
}}
override "cache" {{
    match host="broken"
    exec "warm-cache.sh" offline="root" {{
        script "#!/bin/sh\necho warming\necho 'cache dir /srv/cache missing' >&2\nexit 1\n"
    }}
}}
override "api" {{
    match host="sick"
    health "api" retries=1 offline="root" {{
        run "echo 'api: connection refused' >&2; exit 7"
    }}
}}
apt-source "debian" url="http://snapshot.example/debian/{{snapshot}}" snapshot="snap-{v}" suites="./"
"##
    ));
    spec
}

/// chromium, headless, with a profile of its own: the DOM after loading `url`. A browser that
/// dies without a word (seen under the full suite's load on two cores, never alone) gets two
/// more tries; what it loads is asserted on by the caller either way.
fn browse(profile: &std::path::Path, args: &[&str], url: &str) -> String {
    let mut failures = Vec::new();
    for _ in 0..3 {
        let out = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .arg(url)
            .output()
            .expect("chromium");
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        failures.push(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    panic!("chromium {args:?} {url}: {}", failures.join("\n---\n"));
}

/// The number shown for `state` in the overview's counts (`data-state="failed"><b>1</b>`).
fn count_on_page(dom: &str, state: &str) -> usize {
    let at = dom
        .find(&format!("data-state=\"{state}\""))
        .unwrap_or_else(|| panic!("no count for {state}"));
    let rest = &dom[at..];
    let start = rest.find("<b>").unwrap() + 3;
    let end = rest.find("</b>").unwrap();
    rest[start..end].trim().parse().unwrap()
}

/// etcd's own count of range requests it answered.
fn ranges_served(endpoint: &str) -> u64 {
    let mut stream = std::net::TcpStream::connect(endpoint).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {endpoint}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("grpc_server_handled_total{") && l.contains("grpc_method=\"Range\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn without_ages(mut status: serde_json::Value) -> serde_json::Value {
    for host in status["hosts"].as_array_mut().unwrap() {
        host.as_object_mut().unwrap().remove("age_seconds");
        host.as_object_mut().unwrap().remove("since_seconds");
    }
    status
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_twelve_host_fleet_in_a_browser() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    if !require("chromium") {
        return;
    }
    let bin = bell_run();
    let fx = Fixture::new();
    // Two builds into one OUT, as CI makes them: OUT keeps the bundles of the release it
    // replaced, so a host still on one can be shown what changes for it.
    let keygen = fx.bellc(&["keygen", "lab"]);
    assert_eq!(keygen.code, 0, "{}", keygen.stderr);
    let pubkey = std::fs::read_to_string(fx.path().join("lab.pub")).unwrap();
    let key_id = pubkey
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let build = |v: &str| {
        std::fs::write(fx.path().join("bell.kdl"), spec(v)).unwrap();
        let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "lab.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        release_of(&fx.path().join("out")).version
    };
    let url = etcd.url.as_str();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let root = |host: &str| roots[HOSTS.iter().position(|h| *h == host).unwrap()].path();
    let run = |host: &str, args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--root", root(host).to_str().unwrap(), "--host", host]);
        all.extend(["--report", url]);
        run_bin(&bin, &all, &[])
    };
    let apply = |host: &str, release: &str| {
        let bundle = fx.path().join("out/hosts").join(host);
        run(
            host,
            &["apply", bundle.to_str().unwrap(), "--release", release],
        )
    };
    let v1 = build("one");
    for host in BEHIND {
        let out = apply(host, &v1);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
    }
    let v2 = build("two");
    for host in UP.iter().chain(["drifty", "sick"].iter()) {
        let out = apply(host, &v2);
        // sick's configuration applies; its health probe fails after (exit 4).
        let want = if *host == "sick" { 4 } else { 0 };
        assert_eq!(out.status.code(), Some(want), "{host}: {}", text(&out));
    }
    let out = apply("broken", &v2);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    std::fs::write(root("drifty").join("etc/motd"), "changed by hand\n").unwrap();
    let out = run("drifty", &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let published = fx.bellc(&["publish", "out", "--store", url]);
    assert_eq!(published.code, 0, "{}", published.stderr);
    // web-4 takes a slot of its rack's budget, as a pulling host does before it changes.
    let client = etcd.client();
    let prefix = bell_store::semaphore::default_prefix("lab");
    let five_minutes_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 300;
    bell_store::semaphore::acquire(&client, &prefix, "r2", "web-4", 1, five_minutes_ago, None)
        .unwrap();

    let status = fx.bellc(&["status", "out", "--store", url, "--json"]);
    assert_eq!(status.code, 3, "{}", status.stderr);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let counts = status["counts"].clone();
    for (state, n) in [
        ("up-to-date", 5),
        ("pending", 2),
        ("failed", 1),
        ("unhealthy", 1),
        ("drifted", 1),
        ("unaccounted", 2),
    ] {
        assert_eq!(counts[state], n, "{state}: {counts}");
    }

    for host in SILENT {
        let row = common::row(&status, host);
        assert_eq!(row["state"], "unaccounted", "{row}");
    }
    // A rollout that halted in its second wave, as the controller leaves it in the store.
    let progress = bell_ops::fleet::rollout::Progress {
        format: bell_ops::fleet::rollout::PROGRESS_FORMAT,
        fleet: "lab".into(),
        target: v2.clone(),
        from: Some(v1.clone()),
        waves: vec![
            vec!["web-1".into(), "web-2".into()],
            vec!["web-4".into(), "db-3".into()],
            vec!["broken".into()],
        ],
        given: 2,
        converged: 1,
        published: Some(v2.clone()),
        published_at: five_minutes_ago,
        published_revision: 0,
        phase: bell_ops::fleet::rollout::Phase::Halted,
        halted: Some(bell_ops::fleet::rollout::Halt {
            wave: 2,
            reason: "wave 2 did not converge within 30m".into(),
            hosts: vec![bell_ops::fleet::rollout::Trouble {
                host: "web-4".into(),
                state: "pending".into(),
                detail: Some("waiting for a slot".into()),
            }],
        }),
        started_at: five_minutes_ago,
        updated_at: five_minutes_ago,
        held: Vec::new(),
        paused: None,
        started_by: None,
        wave_times: Vec::new(),
        halts: Vec::new(),
    };
    client
        .put(
            &bell_store::keys::progress_key("lab"),
            &serde_json::to_vec(&progress).unwrap(),
        )
        .unwrap();
    // With the rollout halted, `bellc status` says so, and the page's JSON is the same.
    let status = fx.bellc(&["status", "out", "--store", url, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["rollout"]["phase"], "halted", "{status:#}");

    let server = Server::start(&fx, &["out", "--store", url, "--spec", "bell.kdl"]);
    assert_eq!(server.store()["reachable"], true, "{}", server.store());
    // The JSON is `bellc status --json`'s (the ages move with the clock).
    let (code, api) = server.get("/api/v1/status");
    assert_eq!(code, 200);
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(without_ages(api), without_ages(status.clone()));

    // One range request per refresh, whatever the fleet's size.
    let (r0, m0) = (
        server.store()["refreshes"].as_u64().unwrap(),
        ranges_served(&etcd.endpoint),
    );
    // Two refreshes at least, waited for rather than slept through.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while server.store()["refreshes"].as_u64().unwrap() < r0 + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the page stopped refreshing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (m1, r1) = (
        ranges_served(&etcd.endpoint),
        server.store()["refreshes"].as_u64().unwrap(),
    );
    assert!(r1 - r0 >= 2, "{r0} → {r1} refreshes");
    assert!(
        (m1 - m0) <= (r1 - r0) + 1 && (m1 - m0) + 1 >= (r1 - r0),
        "{} ranges for {} refreshes",
        m1 - m0,
        r1 - r0
    );

    let browser = tempfile::tempdir().unwrap();
    let dom = browse(browser.path(), &["--dump-dom"], &server.url("/"));
    for state in [
        "up-to-date",
        "pending",
        "failed",
        "unhealthy",
        "drifted",
        "unaccounted",
        "deferred",
        "unknown",
    ] {
        assert_eq!(
            count_on_page(&dom, state) as u64,
            counts[state].as_u64().unwrap(),
            "{state}"
        );
    }
    assert!(dom.contains("web-4 for 5m"), "the budget's holder is shown");
    assert!(dom.contains("wave 2 of 3"), "the rollout's wave is shown");
    assert!(dom.contains("Halted: wave 2 did not converge within 30m"));
    // Beside each problem, the command that acts on it, store and fleet filled in.
    let fleet = status["fleet"].as_str().unwrap();
    for command in [
        format!("bellc rollout out --resume --store {url}"),
        format!("bellc rollout out --abort --store {url}"),
        format!("bellc lock release web-4 --store {url} --fleet {fleet}"),
    ] {
        assert!(dom.contains(&command), "{command}: {dom}");
    }
    let waiting = &dom[dom
        .find("Waiting for:")
        .expect("the hosts the rollout waits for")..];
    assert!(waiting.contains("web-4") && waiting.contains("db-3"));
    assert!(dom.contains(&key_id), "the signing key {key_id} is shown");
    for host in HOSTS {
        assert!(
            dom.contains(&format!("data-host=\"{host}\"")),
            "{host} is listed"
        );
    }
    // Filtered by state and by label.
    let failed = browse(
        browser.path(),
        &["--dump-dom"],
        &server.url("/?state=failed"),
    );
    assert!(failed.contains("data-host=\"broken\"") && !failed.contains("data-host=\"web-1\""));
    let rack = browse(
        browser.path(),
        &["--dump-dom"],
        &server.url("/?label=rack%3Dr2"),
    );
    assert!(rack.contains("data-host=\"web-2\"") && !rack.contains("data-host=\"web-1\""));

    let broken = browse(
        browser.path(),
        &["--dump-dom"],
        &server.url("/hosts/broken"),
    );
    assert!(broken.contains("exec:warm-cache.sh"), "{broken}");
    assert!(broken.contains("cache dir /srv/cache missing"), "{broken}");
    assert!(
        broken.contains(&format!(
            "bellc hold broken --reason 'looking into it' --store {url} --fleet {fleet}"
        )),
        "{broken}"
    );
    assert!(broken.contains("failed since "), "{broken}");
    let behind = browse(browser.path(), &["--dump-dom"], &server.url("/hosts/web-4"));
    assert!(
        behind.contains(&format!(
            "bellc lock release web-4 --store {url} --fleet {fleet}"
        )),
        "{behind}"
    );
    assert!(
        behind.contains("/etc/motd") && behind.contains("+release two"),
        "{behind}"
    );
    assert!(
        behind.contains("/etc/app/token"),
        "the secret file's change is named"
    );
    assert!(
        behind.contains("// base  bell.kdl:16"),
        "explain is shown: {behind}"
    );
    // Which package snapshot a host runs, and how many hosts run each.
    assert!(
        behind.contains("package snapshots") && behind.contains("snap-one"),
        "{behind}"
    );
    let (_, up) = server.get("/hosts/web-1");
    assert!(up.contains("snap-two") && !up.contains("snap-one"), "{up}");
    let snapshots = dom
        .split("id=\"snapshots\"")
        .nth(1)
        .expect("the overview has a snapshots section");
    assert!(
        snapshots.contains("snap-one") && snapshots.contains("snap-two"),
        "{snapshots}"
    );

    // A secret of the spec appears on no page and in no JSON.
    let mut everything = vec![dom, failed, rack, broken, behind];
    for host in HOSTS {
        everything.push(server.get(&format!("/hosts/{host}")).1);
        everything.push(server.get(&format!("/api/v1/hosts/{host}")).1);
    }
    everything.push(server.get("/api/v1/status").1);
    for page in &everything {
        assert!(!page.contains("TOPSECRET"), "a secret shown: {page}");
    }
    // Read-only and hostile requests.
    assert_eq!(server.get("/hosts/nobody").0, 404);
    assert_eq!(server.get("/hosts/%3Cscript%3E").0, 404);
    assert!(!server.get("/hosts/%3Cscript%3E").1.contains("<script>"));

    let shots = repo_root().join("target/status-page");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("overview.png");
    let _ = std::fs::remove_file(&png);
    browse(
        browser.path(),
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,1100",
        ],
        &server.url("/"),
    );
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "a screenshot"
    );

    // OUT read from the web server that serves it to hosts, verified with the key the hosts
    // trust: the same page.
    if let Some(nginx) = Nginx::serve(fx.path()) {
        let served = Server::start(
            &fx,
            &[
                &format!("{}out/", nginx.url),
                "--store",
                url,
                "--trust",
                "lab.pub",
            ],
        );
        let (code, api) = served.get("/api/v1/status");
        assert_eq!(code, 200, "{api}");
        let api: serde_json::Value = serde_json::from_str(&api).unwrap();
        assert_eq!(without_ages(api), without_ages(status.clone()));
        let by_url = fx.bellc(&[
            "status",
            &format!("{}out", nginx.url),
            "--store",
            url,
            "--trust",
            "lab.pub",
            "--json",
        ]);
        assert_eq!(by_url.code, 3, "{}", by_url.stderr);
        let by_url: serde_json::Value = serde_json::from_str(&by_url.stdout).unwrap();
        assert_eq!(without_ages(by_url), without_ages(status.clone()));
        let (_, page) = served.get("/");
        assert!(
            page.contains(&key_id),
            "the signature is read over HTTP too"
        );
        let (_, behind) = served.get("/hosts/web-4");
        assert!(
            behind.contains("+release two") && !behind.contains("TOPSECRET"),
            "{behind}"
        );
        assert!(nginx.requests().iter().all(|r| r.starts_with("GET /out/")));
    }

    // Keys that are not what bell-run writes, put by anyone: the page goes on reading the
    // store (no frozen snapshot), and only that host's row says it cannot be read.
    client.put("/bell/lab/running/web-1", b"bogus").unwrap();
    client
        .put("/bell/lab/status/apply/zz", &[0xff, 0xfe])
        .unwrap();
    wait_for("the bogus report to show", || {
        let (_, api) = server.get("/api/v1/status");
        api.contains("\"unreadable\": 1") || api.contains("\"unreadable\":1")
    });
    assert_eq!(server.store()["reachable"], true, "{}", server.store());
    let (code, api) = server.get("/api/v1/status");
    assert_eq!(code, 200);
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let web_1 = common::row(&api, "web-1");
    assert_eq!(web_1["state"], "unreadable", "{api:#}");
    assert_eq!(api["counts"]["failed"], 1, "the other rows stand: {api:#}");
    let (code, page) = server.get("/");
    assert_eq!(code, 200);
    assert!(!page.contains("The store does not answer"), "{page}");

    // etcd goes away: the page answers from what it last read, and says so.
    drop(etcd);
    wait_for("the outage to be noticed", || {
        server.store()["reachable"] == false
    });
    let (code, page) = server.get("/");
    assert_eq!(code, 200);
    assert!(page.contains("The store does not answer"), "{page}");
    assert!(page.contains("data-host=\"broken\""));
    let (code, api) = server.get("/api/v1/status");
    assert_eq!(code, 200);
    assert!(api.contains("\"broken\""));
}

#[test]
fn serve_says_why_it_cannot_start() {
    let fx = Fixture::spec("fleet \"lab\" target=\"debian-12\"\nhost \"a\"\n");
    let store = ["--store", "etcd://127.0.0.1:9", "--listen", "127.0.0.1:0"];
    // Not a build output: nothing to show, and what to give instead.
    let run = fx.bellc(&[&["serve", "nowhere"][..], &store[..]].concat());
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("there is no release.json"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the http:// URL that serves it"),
        "{}",
        run.stderr
    );
    // https is not spoken; a store that is not etcd is a usage error.
    let run = fx.bellc(&[&["serve", "https://mirror/lab"][..], &store[..]].concat());
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(run.stderr.contains("local proxy"), "{}", run.stderr);
    let run = fx.bellc(&["serve", "out", "--store", "reports/"]);
    assert_eq!(run.code, 64, "{}", run.stderr);
    // An address that cannot be listened on.
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let run = fx.bellc(&[
        "serve",
        "out",
        "--store",
        "etcd://127.0.0.1:9",
        "--listen",
        "256.0.0.1:1",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot listen on 256.0.0.1:1"),
        "{}",
        run.stderr
    );
    // A spec with an error is reported as a build would report it.
    std::fs::write(
        fx.path().join("bad.kdl"),
        "fleet \"lab\" target=\"debian-12\"\nhost \"a\" \"b\"\n",
    )
    .unwrap();
    let run = fx.bellc(&[&["serve", "out", "--spec", "bad.kdl"][..], &store[..]].concat());
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("bad.kdl:2"), "{}", run.stderr);
}

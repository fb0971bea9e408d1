//! `bell-run pull --source http://…`: four image roots pull two signed releases from a real
//! nginx (Debian's nginx-light, on a free loopback port, stopped after), fetching only the
//! files their applied generation does not hold; a tampered, truncated or cut download, a
//! foreign key, an unsigned, rolled-back or expired release are refused with the root
//! unchanged; with the fleet store (a real etcd), a host takes the bundle the fleet's map names
//! and refuses one that the signed release does not name for it, which `bellc status` shows; a
//! pull killed mid-download is never applied and the next one fetches only what was missing.

use crate::common;
use crate::common::fleet::{bell_run, text, Etcd, Nginx};
use crate::common::pulling::*;
use crate::common::Fixture;
use bell_store::semaphore::query_unescape;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How the test server misbehaves on the file whose path ends with its `target`.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The connection closes after half of the promised bytes, every time.
    Cut,
    /// The first time, half of the bytes and then nothing, the connection held open (a
    /// transfer in progress when the host loses power); afterwards the whole file.
    Stall,
}

/// A server that serves `dir` like nginx but for `fault` on the file `target`. Returns its URL,
/// the number of requests for files under `bundles/` so far, and a channel that receives one
/// message when a transfer stalled.
fn faulty_server(
    dir: PathBuf,
    target: String,
    fault: Fault,
) -> (String, Arc<AtomicUsize>, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let (stalled, stall_seen) = mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).to_string();
            // bell-run escapes every byte but unreserved ones and `/` (never a bare `+`), so a
            // query unescape gives back the file name (`%2F` in a script's name is part of it).
            let path = query_unescape(head.split_whitespace().nth(1).unwrap_or("/"));
            if path.contains("/bundles/") {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            let Ok(body) = std::fs::read(dir.join(path.trim_start_matches('/'))) else {
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                continue;
            };
            let header = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = stream.write_all(header.as_bytes());
            let faulty = path.ends_with(&target) && (fault == Fault::Cut || held.is_empty());
            if !faulty {
                let _ = stream.write_all(&body);
                continue;
            }
            let _ = stream.write_all(&body[..body.len() / 2]);
            if fault == Fault::Stall {
                let _ = stream.flush();
                held.push(stream);
                let _ = stalled.send(());
            }
        }
    });
    (url, requests, stall_seen)
}

fn bundle_requests(nginx: &Nginx) -> usize {
    nginx
        .requests()
        .iter()
        .filter(|r| r.contains("/bundles/"))
        .count()
}

#[test]
fn hosts_pull_two_releases_from_nginx_and_refuse_what_they_must() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let (fx, served) = (&setup.fx, setup.served.clone());
    let dir = |name: &str| setup.dir(name);
    let trust = ["--trust", setup.trust.as_str()];
    let Some(nginx) = Nginx::serve(&served) else {
        return;
    };
    // By name: bell-run's own resolver (no getaddrinfo in the static binary) gives localhost
    // as 127.0.0.1 and ::1; nginx listens on the first.
    let url = nginx.url.replace("127.0.0.1", "localhost");
    let url = url.as_str();

    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    for (host, root) in HOSTS.iter().zip(&roots) {
        let out = pull(&bin, url, root.path(), host, &trust);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(motd(root.path()), "release 1\n");
    }

    copy_over(&dir("out2"), &served);
    let h2 = roots[1].path();
    let motd_file = served_motd(&served, "h2");
    let good = std::fs::read(&motd_file).unwrap();
    // Tampered on the server (longer than the manifest lists: refused before it is read; the
    // same length: by its sha256), then truncated: refused, root unchanged.
    std::fs::write(&motd_file, "release 2, and a backdoor\n").unwrap();
    refused(
        &bin,
        url,
        h2,
        "h2",
        &trust,
        "more than the 10 bytes expected",
    );
    std::fs::write(&motd_file, "release X\n").unwrap();
    refused(&bin, url, h2, "h2", &trust, "sha256");
    std::fs::write(&motd_file, &good[..3]).unwrap();
    refused(&bin, url, h2, "h2", &trust, "sha256");
    std::fs::write(&motd_file, &good).unwrap();
    // The server stops halfway through a file: never applied.
    let relative = motd_file.strip_prefix(&served).unwrap().to_string_lossy();
    let (cutting, _, _) = faulty_server(served.clone(), relative.to_string(), Fault::Cut);
    refused(&bin, &cutting, h2, "h2", &trust, "cut short");

    // Every host now completes release 2, fetching only what its applied generation lacks.
    for (host, root) in HOSTS.iter().zip(&roots) {
        let before = bundle_requests(&nginx);
        let out = pull(
            &bin,
            url,
            root.path(),
            host,
            &["--json", trust[0], trust[1]],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(motd(root.path()), "release 2\n");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let fetched = report["fetched"].as_u64().unwrap() as usize;
        // h1's own file did not change: it comes from the applied generation, not the server.
        if *host == "h1" {
            assert!(report["reused"].as_u64().unwrap() > 0, "{report}");
        }
        assert_eq!(report["drift"], serde_json::json!([]), "{host}: {report}");
        // The manifest and each fetched file: one request each, nothing else.
        assert_eq!(bundle_requests(&nginx) - before, fetched + 1, "{report}");
        assert!(report["signature"]
            .as_str()
            .unwrap()
            .starts_with("verified"));
    }

    // Release 1 served again as the newest: a rollback, refused.
    let first = release_of(&dir("out1"));
    for name in ["release.json", "release.json.minisig"] {
        std::fs::copy(dir("out1").join(name), served.join(name)).unwrap();
    }
    assert_eq!(release_of(&served).version, first.version);
    refused(&bin, url, h2, "h2", &trust, "rollback");
    // Release 2 signed by a key the hosts do not trust, then unsigned.
    copy_over(&dir("out2"), &served);
    assert_eq!(
        fx.bellc(&["publish", "served", "--sign-key", "other.key"])
            .code,
        0
    );
    refused(&bin, url, h2, "h2", &trust, "does not trust");
    std::fs::remove_file(served.join("release.json.minisig")).unwrap();
    refused(&bin, url, h2, "h2", &trust, "is not signed");
    // An expired release.
    build(fx, "release 3", "out3", "ci.key", &["--expires", "1s"]);
    copy_over(&dir("out3"), &served);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    refused(&bin, url, h2, "h2", &trust, "expired");
}

#[test]
fn with_the_store_a_host_takes_the_bundle_the_fleet_map_names() {
    let bin = bell_run();
    let Some(etcd) = Etcd::start() else { return };
    let fx = Fixture::new();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    build(&fx, "release 1", "out1", "ci.key", &[]);
    build(&fx, "release 2", "out2", "ci.key", &[]);
    let served = fx.path().join("served");
    copy_over(&fx.path().join("out1"), &served);
    copy_over(&fx.path().join("out2"), &served);
    let Some(nginx) = Nginx::serve(&served) else {
        return;
    };
    let trust_file = fx.path().join("ci.pub");
    let with_store = [
        "--trust",
        trust_file.to_str().unwrap(),
        "--store",
        etcd.url.as_str(),
        "--fleet",
        "f",
        "--report",
        etcd.url.as_str(),
    ];
    let publish = |out: &str| {
        let run = fx.bellc(&["publish", out, "--store", &etcd.url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    // The source's newest is release 2, but the fleet's map names release 1: that is applied.
    publish("out1");
    let root = image_root();
    let out = pull(&bin, &nginx.url, root.path(), "h2", &with_store);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(root.path()), "release 1\n");
    publish("out2");
    let out = pull(&bin, &nginx.url, root.path(), "h2", &with_store);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(root.path()), "release 2\n");

    // Whoever writes to the store gives h2 the bundle of h1: the signed release disagrees.
    let second = release_of(&served);
    let h1_bundle = &second.hosts["h1"].bundle;
    etcd.client()
        .put(&bell_store::desired_key("f", "h2"), h1_bundle.as_bytes())
        .unwrap();
    let refused_with =
        |reason: &str| refused(&bin, &nginx.url, root.path(), "h2", &with_store, reason);
    refused_with("but the release names");
    // The refusal and its reason are in h2's report, for `bellc status`.
    let status = fx.bellc(&["status", "served", "--store", &etcd.url, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let h2 = common::row(&status, "h2");
    assert_eq!(h2["state"], "failed", "{h2}");
    assert!(
        h2["detail"]
            .as_str()
            .unwrap()
            .contains("but the release names"),
        "{h2}"
    );
    // A store that names a release the source does not have is refused too.
    etcd.client()
        .put(&bell_store::version_key("f"), "0".repeat(64).as_bytes())
        .unwrap();
    refused_with("not found");
}

#[test]
fn a_pull_killed_mid_download_is_never_applied_and_the_next_one_resumes_it() {
    let bin = bell_run();
    let fx = Fixture::new();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    build(&fx, "release 1", "out", "ci.key", &[]);
    let served = fx.path().join("out");
    let trust_file = fx.path().join("ci.pub");
    // h1's bundle, and the last of its files in the order bell-run fetches them: everything
    // before it is complete when the transfer stalls.
    let id = release_of(&served).hosts["h1"].bundle.clone();
    let bundle_dir = served.join("bundles").join(&id);
    let manifest = std::fs::read_to_string(bundle_dir.join("bundle.json")).unwrap();
    let manifest = bell_bundle::Manifest::from_json(&manifest).unwrap();
    let files = bell_bundle::expected_files(&manifest).unwrap();
    assert!(files.len() >= 3, "{files:?}");
    let last = files.keys().last().unwrap().to_string_lossy().to_string();
    let (url, requests, stalled) = faulty_server(served.clone(), last.clone(), Fault::Stall);

    let root = image_root();
    let mut child = std::process::Command::new(&bin)
        .args(["pull", "--source", &url, "--host", "h1", "--trust"])
        .arg(&trust_file)
        .arg("--root")
        .arg(root.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    stalled
        .recv_timeout(Duration::from_secs(60))
        .expect("the pull never reached the stalling file");
    // Once the half that was sent is on disk, the power goes.
    let staging = root.path().join("var/lib/bell/incoming").join(&id);
    let part_name = format!(
        ".{}.part",
        Path::new(&last).file_name().unwrap().to_string_lossy()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let partial = || {
        walkdir::WalkDir::new(&staging)
            .into_iter()
            .filter_map(Result::ok)
            .any(|e| {
                e.file_name().to_string_lossy() == part_name
                    && e.metadata().is_ok_and(|m| m.len() > 0)
            })
    };
    while !partial() {
        assert!(
            std::time::Instant::now() < deadline,
            "no part of the stalled file reached the disk"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let left: Vec<String> = walkdir::WalkDir::new(&staging)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        left.iter().any(|name| name.ends_with(".part")),
        "no partial download was left to resume: {left:?}"
    );
    assert_eq!(motd(root.path()), "", "a killed download was applied");
    assert!(!root.path().join("var/lib/bell/current").exists());

    // The next pull fetches the manifest and the one file that was not complete.
    let before = requests.load(Ordering::SeqCst);
    let out = pull(
        &bin,
        &url,
        root.path(),
        "h1",
        &["--json", "--trust", trust_file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["fetched"], 1, "{report}");
    assert_eq!(requests.load(Ordering::SeqCst) - before, 2, "{report}");
    assert_eq!(motd(root.path()), "release 1\n");
    assert!(
        !staging.exists(),
        "the staging directory was kept after the apply"
    );
}

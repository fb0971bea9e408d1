//! The fleet store as a cluster: every `etcd://` address takes several endpoints, and bellc and
//! bell-run fail over between them. A real three-member etcd cluster on loopback: releases are
//! published, pulled and reported through it; one member is killed midway (the first in the
//! list, where every new process starts), and publishing, pulling, reporting and `bellc status`
//! go on through the others.

mod common;
use common::fleet::{bell_run, text, EtcdCluster};
use common::pulling::*;

#[test]
fn publish_pull_and_status_go_on_when_a_member_dies() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let Some(mut etcd) = EtcdCluster::start() else {
        return;
    };
    copy_over(&setup.dir("out2"), &setup.served);
    let url = etcd.url.clone();
    let source = setup.served.to_str().unwrap();
    let store = [
        "--trust",
        setup.trust.as_str(),
        "--store",
        url.as_str(),
        "--report",
        url.as_str(),
        "--fleet",
        "f",
    ];
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let publish = |out: &str| {
        let run = fx.bellc(&["publish", out, "--store", &url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    let all_pull = |motd_wanted: &str| {
        for (host, root) in HOSTS.iter().zip(&roots) {
            let out = pull(&bin, source, root.path(), host, &store);
            assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
            assert_eq!(motd(root.path()), motd_wanted, "{host}");
        }
    };
    let all_up_to_date = |out: &str| {
        let status = fx.bellc(&["status", out, "--store", &url, "--json"]);
        assert_eq!(status.code, 0, "{}\n{}", status.stdout, status.stderr);
        let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
        let counts = status["counts"].as_object().unwrap();
        for (state, count) in counts {
            let want = if state == "up-to-date" {
                HOSTS.len()
            } else {
                0
            };
            assert_eq!(count, want, "{status}");
        }
    };

    publish("out1");
    all_pull("release 1\n");
    all_up_to_date("out1");

    // The first endpoint dies: every process starts there and must move on.
    etcd.kill(0);
    publish("out2");
    all_pull("release 2\n");
    all_up_to_date("out2");
    let desired = etcd.client().get(&bell_store::version_key("f")).unwrap();
    assert_eq!(
        desired.as_deref(),
        Some(release_of(&setup.dir("out2")).version.as_bytes())
    );
}

#[test]
fn an_unreachable_store_is_named_with_every_endpoint_it_tried() {
    let bin = bell_run();
    let root = image_root();
    // Two loopback ports nobody listens on.
    let dead: Vec<String> = (0..2)
        .map(|_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        })
        .collect();
    let url = format!("etcd://{}", dead.join(","));
    let out = common::fleet::run_bin(
        &bin,
        &[
            "pending",
            "--store",
            &url,
            "--host",
            "h1",
            "--fleet",
            "f",
            "--root",
            root.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no etcd endpoint answered"), "{stderr}");
    for endpoint in &dead {
        assert!(
            stderr.contains(&format!("{endpoint}: cannot connect")),
            "{stderr}"
        );
    }
}

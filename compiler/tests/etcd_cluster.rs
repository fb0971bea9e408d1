//! The fleet store as a cluster: every `etcd://` address takes several endpoints, and bellc and
//! bell-run fail over between them. A real three-member etcd cluster on loopback, serving TLS
//! (`etcds://`) with certificates `openssl` makes at test time and asking every client for a
//! certificate of its CA; the bundles come from nginx over https. Releases are published,
//! pulled and reported through it; one member is killed midway (the first in the list, where
//! every new process starts), and publishing, pulling, reporting and `bellc status` go on
//! through the others. A client trusting another CA, one without a certificate, a key others
//! may read, a mirror whose certificate is not trusted or expired and a plain `etcd://` are
//! each refused, with what and why, and the root unchanged.

use crate::common;
use crate::common::fleet::{bell_run, text, EtcdCluster, Nginx, Pki};
use crate::common::pulling::*;

#[test]
fn publish_pull_and_status_go_on_over_tls_when_a_member_dies() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let (Some(pki), Some(other)) = (Pki::new(), Pki::new()) else {
        return;
    };
    let Some(mut etcd) = EtcdCluster::start_tls(&pki) else {
        return;
    };
    copy_over(&setup.dir("out2"), &setup.served);
    let Some(mirror) = Nginx::serve_tls(&setup.served, &pki) else {
        return;
    };
    let url = etcd.url.clone();
    let tls = pki.flags();
    let ca = pki.path("ca.pem").display().to_string();
    let source = mirror.url.as_str();
    let mut store = vec![
        "--source-ca",
        ca.as_str(),
        "--trust",
        setup.trust.as_str(),
        "--store",
        url.as_str(),
        "--report",
        url.as_str(),
        "--fleet",
        "f",
    ];
    store.extend(tls.iter().map(String::as_str));
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let bellc = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--store", url.as_str()]);
        args.extend(tls.iter().map(String::as_str));
        fx.bellc(&args)
    };
    let publish = |out: &str| {
        let run = bellc(&["publish", out]);
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
        let status = bellc(&["status", out, "--json"]);
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

    // Refused, each with its reason, the root as it was.
    let root = roots[0].path();
    let without = |drop: &[&str]| -> Vec<&str> {
        let mut out = Vec::new();
        let mut skip = false;
        for word in &store {
            if skip {
                skip = false;
            } else if drop.contains(word) {
                skip = true;
            } else {
                out.push(*word);
            }
        }
        out
    };
    let other_ca = other.path("ca.pem").display().to_string();
    let mut trusting_another = without(&["--store-ca"]);
    trusting_another.extend(["--store-ca", other_ca.as_str()]);
    refused(
        &bin,
        source,
        root,
        "h1",
        &trusting_another,
        "TLS: the server's certificate is not trusted",
    );
    refused(
        &bin,
        source,
        root,
        "h1",
        &trusting_another,
        &format!("the CA in {other_ca}"),
    );
    refused(
        &bin,
        source,
        root,
        "h1",
        &without(&["--store-cert", "--store-key"]),
        "TLS: the server refused the connection",
    );
    let mut mirror_another = without(&["--source-ca"]);
    mirror_another.extend(["--source-ca", other_ca.as_str()]);
    refused(
        &bin,
        source,
        root,
        "h1",
        &mirror_another,
        "https://127.0.0.1:",
    );
    refused(&bin, source, root, "h1", &mirror_another, "not trusted");
    // A mirror whose certificate expired.
    let Some(expired) = Nginx::serve_tls_as(&setup.served, &pki, "expired") else {
        return;
    };
    refused(
        &bin,
        &expired.url,
        root,
        "h1",
        &store,
        "not trusted (Expired",
    );
    drop(expired);
    let plain = url.replace("etcds://", "etcd://");
    let mut plain_store = without(&["--store", "--store-ca", "--store-cert", "--store-key"]);
    plain_store.extend(["--store", plain.as_str()]);
    refused(
        &bin,
        source,
        root,
        "h1",
        &plain_store,
        "speaks TLS does so to plain HTTP: write `etcds://`",
    );
    // A client key others may read is a key others may have.
    let open_key = fx.path().join("open.key");
    std::fs::copy(pki.path("client.key"), &open_key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open_key = open_key.display().to_string();
    let mut readable_key = without(&["--store-key"]);
    readable_key.extend(["--store-key", open_key.as_str()]);
    refused(
        &bin,
        source,
        root,
        "h1",
        &readable_key,
        "may be read by others (mode 644)",
    );
    let run = fx.bellc(&["status", "out1", "--store", &url, "--store-ca", &other_ca]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("no etcd endpoint answered (127.0.0.1:"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("not trusted"), "{}", run.stderr);

    // The first endpoint dies: every process starts there and must move on.
    etcd.kill(0);
    publish("out2");
    all_pull("release 2\n");
    all_up_to_date("out2");
    let desired = etcd
        .client_tls(&pki)
        .get(&bell_store::version_key("f"))
        .unwrap();
    assert_eq!(
        desired.as_deref(),
        Some(release_of(&setup.dir("out2")).version.as_bytes())
    );
}

#[test]
fn an_unreachable_store_is_named_with_every_endpoint_it_tried() {
    let bin = bell_run();
    let root = image_root();
    // Two ports nobody answers on, held for the whole test: each is bound on 127.0.0.1, so no
    // other test's server can take it, and dialled on 127.0.0.2, where nothing listens and the
    // kernel refuses. (A port freed after a probe was once taken by another test's server,
    // which answered in its own protocol.)
    let held: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let dead: Vec<String> = held
        .iter()
        .map(|listener| format!("127.0.0.2:{}", listener.local_addr().unwrap().port()))
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

//! etcd load that does not grow with time: a pull or check that finds what the last one found
//! writes nothing (measured in etcd revisions), and a host's liveness is a key bound to a lease
//! that each run renews without a revision. `bellc status` takes liveness from the lease: a
//! host whose lease ended is unaccounted however recent its last change, and the next run
//! brings it back. A host that is not well is the exception: each run that finds it so is
//! written, so that its row says since when and after how many attempts. Real etcd, real
//! bellc and bell-run.

use crate::common;
use crate::common::fleet::{bell_run, run_bin, text, Etcd};
use crate::common::pulling::*;

#[test]
fn a_run_that_changes_nothing_writes_nothing_and_liveness_is_a_lease() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url.as_str();
    let source = setup.served.to_str().unwrap();
    let args = [
        "--trust",
        setup.trust.as_str(),
        "--store",
        url,
        "--report",
        url,
        "--fleet",
        "f",
    ];
    let run = fx.bellc(&["publish", "out1", "--store", url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let root = image_root();
    let client = etcd.client();
    let out = pull(&bin, source, root.path(), "h1", &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // Five more pulls of the same release and five checks, alternating: not one revision.
    let check = || {
        run_bin(
            &bin,
            &[
                "check",
                "--root",
                root.path().to_str().unwrap(),
                "--host",
                "h1",
                "--report",
                url,
            ],
            &[],
        )
    };
    // The first re-apply reports `unchanged` where the apply said `ok`: a new report, once.
    let out = pull(&bin, source, root.path(), "h1", &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let first_check = check();
    assert_eq!(first_check.status.code(), Some(0), "{}", text(&first_check));
    let before = client.revision().unwrap();
    for _ in 0..5 {
        // A pull that changes nothing is one request as etcd counts them: the desired
        // release with everything else it reads (its lease is not half spent yet).
        let served = etcd.requests_served();
        let out = pull(&bin, source, root.path(), "h1", &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(
            etcd.requests_served() - served,
            1,
            "requests of a no-op pull"
        );
        let out = check();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    assert_eq!(
        client.revision().unwrap(),
        before,
        "no-op pulls and checks wrote to etcd"
    );

    // Once half its lease is spent, a pull renews it: two requests, still no revision.
    let lease_file = root.path().join("var/lib/bell/lease.json");
    let mut lease: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lease_file).unwrap()).unwrap();
    let renewed = lease["renewed_at"].as_u64().unwrap();
    lease["renewed_at"] = (renewed - 1400).into();
    std::fs::write(&lease_file, lease.to_string()).unwrap();
    let served = etcd.requests_served();
    let out = pull(&bin, source, root.path(), "h1", &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        etcd.requests_served() - served,
        2,
        "a pull that renews its lease"
    );
    let lease: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lease_file).unwrap()).unwrap();
    assert!(lease["renewed_at"].as_u64().unwrap() >= renewed, "{lease}");
    assert_eq!(client.revision().unwrap(), before);

    let status = |want: &str| {
        let run = fx.bellc(&["status", "out1", "--store", url, "--json"]);
        let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let h1 = common::row(&value, "h1");
        assert_eq!(h1["state"], want, "{value}");
        h1
    };
    status("up-to-date");
    assert!(client
        .get(&bell_store::alive_key("f", "h1"))
        .unwrap()
        .is_some());

    // The host goes silent: its lease ends (revoked here rather than waited for).
    let lease: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("var/lib/bell/lease.json")).unwrap(),
    )
    .unwrap();
    client.revoke_lease(lease["id"].as_i64().unwrap()).unwrap();
    let h1 = status("unaccounted");
    assert!(
        h1["detail"]
            .as_str()
            .unwrap()
            .contains("liveness lease expired"),
        "{h1}"
    );
    // Its next run takes a new lease, and it is back.
    let out = pull(&bin, source, root.path(), "h1", &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let h1 = status("up-to-date");
    assert!(h1.get("attempts").is_none(), "{h1}");

    // Changed behind bell's back: a host that is not well writes every run that finds so
    // (three checks, three revisions), and its row says since the first and how many.
    std::fs::write(root.path().join("etc/motd"), "changed by hand\n").unwrap();
    let before = client.revision().unwrap();
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        let out = check();
        assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    }
    assert_eq!(client.revision().unwrap(), before + 3);
    let h1 = status("drifted");
    assert_eq!(h1["attempts"], 3, "{h1}");
    let (since, last) = (
        h1["since"].as_u64().unwrap(),
        h1["last_attempt"].as_u64().unwrap(),
    );
    assert!(since + 2 <= last, "{h1}");
    let run = fx.bellc(&["status", "out1", "--store", url]);
    let row = run.stdout.lines().find(|l| l.starts_with("h1 ")).unwrap();
    assert!(
        row.contains(&format!(
            "since {}: 3 attempts, the last ",
            bell_bundle::utc(since)
        )),
        "{}",
        run.stdout
    );
}

//! etcd load that does not grow with time: a pull or check that finds what the last one found
//! writes nothing (measured in etcd revisions), and a host's liveness is a key bound to a lease
//! that each run renews without a revision. `bellc status` takes liveness from the lease: a
//! host whose lease ended is unaccounted however recent its last change, and the next run
//! brings it back. Real etcd, real bellc and bell-run.

mod common;
use common::fleet::{bell_run, run_bin, text, Etcd};
use common::pulling::*;

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
        let out = pull(&bin, source, root.path(), "h1", &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let out = check();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    assert_eq!(
        client.revision().unwrap(),
        before,
        "no-op pulls and checks wrote to etcd"
    );

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
    status("up-to-date");
}

//! `bellc publish OUT --store etcd://…` makes a build the fleet's desired release in a real
//! etcd, and `bell-run pending` tells a host whether its applied bundle is the desired one
//! (exit 0 up to date, 10 update pending).
use crate::common::fleet::*;
use crate::common::*;

fn spec(hosts: &[&str], value: u32) -> String {
    let mut s = String::from("fleet \"lab\" target=\"debian-12\"\n");
    for (i, h) in hosts.iter().enumerate() {
        s.push_str(&format!("host \"{h}\" address=\"10.0.0.{}\"\n", i + 1));
    }
    s.push_str(&format!("sysctl {{\n    vm.swappiness {value}\n}}\n"));
    s
}

fn release(f: &Fixture, out: &str) -> bell_bundle::Release {
    serde_json::from_str(&std::fs::read_to_string(f.path().join(out).join("release.json")).unwrap())
        .unwrap()
}

#[test]
fn publish_sets_the_desired_release_and_pending_compares_with_it() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let bin = bell_run();
    let client = etcd.client();
    let f = Fixture::spec(&spec(&["a", "b"], 10));
    assert_eq!(f.bellc(&["build", "bell.kdl", "-o", "v1"]).code, 0);
    let published = f.bellc(&["publish", "v1", "--store", &etcd.url]);
    assert_eq!(published.code, 0, "{}", published.stderr);
    let v1 = release(&f, "v1");
    assert_eq!(
        client.get("/bell/lab/current_version").unwrap(),
        Some(v1.version.clone().into_bytes())
    );
    assert_eq!(
        client.get("/bell/lab/desired/a").unwrap(),
        Some(v1.hosts["a"].bundle.clone().into_bytes())
    );

    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    let pending = |extra: &[&str]| {
        let mut args = vec!["pending", "--store", &etcd.url, "--host", "a", "--root", r];
        args.extend_from_slice(extra);
        run_bin(&bin, &args, &[])
    };
    // Nothing applied: the fleet must be named, and an update is pending.
    let out = pending(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--fleet NAME"), "{}", text(&out));
    let out = pending(&["--fleet", "lab"]);
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));

    let bundle = f.path().join("v1/hosts/a");
    let out = run_bin(&bin, &["apply", bundle.to_str().unwrap(), "--root", r], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = pending(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("a is up to date"),
        "{}",
        text(&out)
    );

    // A new release that changes the host and drops `b`.
    std::fs::write(f.path().join("bell.kdl"), spec(&["a"], 30)).unwrap();
    assert_eq!(f.bellc(&["build", "bell.kdl", "-o", "v2"]).code, 0);
    assert_eq!(f.bellc(&["publish", "v2", "--store", &etcd.url]).code, 0);
    let v2 = release(&f, "v2");
    assert!(
        client.get("/bell/lab/desired/b").unwrap().is_none(),
        "a host that left is not desired"
    );
    let out = pending(&["--json"]);
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["pending"], true);
    assert_eq!(value["desired"], v2.hosts["a"].bundle.as_str());
    assert_eq!(value["applied"], v1.hosts["a"].bundle.as_str());
    assert_eq!(value["version"], v2.version.as_str());

    // A host the release does not have.
    let out = run_bin(
        &bin,
        &["pending", "--store", &etcd.url, "--host", "b", "--root", r],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no desired bundle for host `b`"),
        "{}",
        text(&out)
    );
}

#[test]
fn publish_needs_etcd() {
    let f = Fixture::spec(&spec(&["a"], 1));
    assert_eq!(f.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    let run = f.bellc(&["publish", "out", "--store", "somedir"]);
    assert_eq!(run.code, 64, "a usage error");
    assert!(run.stderr.contains("needs an etcd store"), "{}", run.stderr);
    // An etcd that is not there: a clear error, not a hang.
    let run = f.bellc(&["publish", "out", "--store", "etcd://127.0.0.1:1"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("cannot connect"), "{}", run.stderr);
}

/// On a host that never applied anything, `pending` answers from what the pulling timer was
/// told (store, fleet, host), and a wrong `--fleet` is named in the answer.
#[test]
fn pending_takes_the_store_fleet_and_host_the_pulling_timer_was_given() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let bin = bell_run();
    let f = Fixture::spec(&spec(&["a", "b"], 10));
    assert_eq!(f.bellc(&["build", "bell.kdl", "-o", "v1"]).code, 0);
    assert_eq!(f.bellc(&["publish", "v1", "--store", &etcd.url]).code, 0);
    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    let installed = run_bin(
        &bin,
        &[
            "install-timer",
            "--root",
            r,
            "--source",
            "/srv/bell",
            "--store",
            &etcd.url,
            "--fleet",
            "lab",
            "--host",
            "a",
        ],
        &[],
    );
    assert_eq!(installed.status.code(), Some(0), "{}", text(&installed));

    let out = run_bin(&bin, &["pending", "--root", r, "--json"], &[]);
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["host"], "a");
    assert_eq!(value["pending"], true);
    assert!(value["applied"].is_null());

    let out = run_bin(
        &bin,
        &["pending", "--root", r, "--fleet", "nope", "--json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .contains("host `a` of fleet `nope`"),
        "{value}"
    );
    assert!(out.stderr.is_empty(), "{}", text(&out));

    // A host with the Debian package and no install-timer: the options its units run with, in
    // /etc/default/bell-run, are the ones `pending` asks with.
    let packaged = tempfile::tempdir().unwrap();
    let p = packaged.path().to_str().unwrap();
    std::fs::create_dir_all(packaged.path().join("etc/default")).unwrap();
    std::fs::write(
        packaged.path().join("etc/default/bell-run"),
        format!(
            "# the host's pull\nBELL_RUN_PULL=\"--source /srv/bell --store {} --fleet lab --host b\"\n",
            etcd.url
        ),
    )
    .unwrap();
    let out = run_bin(&bin, &["pending", "--root", p, "--json"], &[]);
    assert_eq!(out.status.code(), Some(10), "{}", text(&out));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["host"], "b");
    assert_eq!(value["pending"], true);
}

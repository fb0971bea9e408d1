//! Without a release it verified, a reader cannot check a host's report against the host's
//! identity: `bellc status --store S --fleet F` (no OUT) shows no such host `up-to-date`, says
//! why truly, and exits 3 by default when the fleet's hosts sign their reports. With the
//! mirror's release verified (`--source URL --trust KEY`) the reports are judged as with OUT,
//! and an unsigned "success" report put by etcd's root over a host's own is never up to date.
//! The store's version picks which of the mirror's `releases/VERSION.json` is read: a version
//! that is a path, a release there signed by another key, or a signed one under another
//! version's name is refused.
use crate::common;
use crate::common::fleet::{bell_run, etcdctl, run_bin, text, Etcd};
use crate::common::pulling::image_root;
use crate::common::{row, Fixture};

#[test]
fn a_report_nothing_verified_is_not_up_to_date() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url.clone();
    let root = image_root();
    let out = run_bin(
        &bin,
        &[
            "identity",
            "--root",
            root.path().to_str().unwrap(),
            "--host",
            "a",
            "--init",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let identity = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::write(
        fx.path().join("bell.kdl"),
        format!(
            "fleet \"f\" target=\"debian-12\"\nhost \"a\" identity=\"{identity}\"\nfile \"/etc/motd\" {{\n    content \"hi\\n\"\n}}\n"
        ),
    )
    .unwrap();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = fx.bellc(&["publish", "out", "--store", &url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let release = common::pulling::release_of(&fx.path().join("out"));
    let bundle = fx
        .path()
        .join("out/bundles")
        .join(&release.hosts["a"].bundle);
    let out = run_bin(
        &bin,
        &[
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.path().to_str().unwrap(),
            "--host",
            "a",
            "--release",
            &release.version,
            "--report",
            &url,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--store", url.as_str(), "--fleet", "f", "--json"];
        args.extend_from_slice(extra);
        let run = fx.bellc(&args);
        let value: serde_json::Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
        (run.code, value)
    };

    // No OUT: nothing verified a's report.
    let (code, value) = status(&[]);
    let a = row(&value, "a");
    assert_eq!(a["state"], "unverified", "{value:#}");
    assert_eq!(
        code, 3,
        "the hosts sign their reports: a problem by default"
    );
    let why = a["unverified"].as_str().unwrap();
    assert!(why.contains("no release was verified"), "{why}");
    assert!(!why.contains("gives `a` no identity"), "{why}");

    // The mirror's release, verified: a's signed report reads as a's.
    let source = fx.path().join("out").display().to_string();
    let trust = fx.path().join("ci.pub").display().to_string();
    let (code, value) = status(&["--source", &source, "--trust", &trust]);
    assert_eq!(row(&value, "a")["state"], "up-to-date", "{value:#}");
    assert_eq!(code, 0);

    // etcd's root puts an unsigned "success" report over a's: never up to date, from either
    // door.
    let key = "/bell/f/running/a";
    let mut report: serde_json::Value = serde_json::from_str(&etcdctl(
        &etcd.endpoint,
        &["get", key, "--print-value-only"],
    ))
    .unwrap();
    for field in ["signer", "proof", "sequence"] {
        report.as_object_mut().unwrap().remove(field);
    }
    etcdctl(&etcd.endpoint, &["put", key, &report.to_string()]);
    let (code, value) = status(&[]);
    assert_ne!(row(&value, "a")["state"], "up-to-date", "{value:#}");
    assert_eq!(code, 3);
    let (code, value) = status(&["--source", &source, "--trust", &trust]);
    assert_ne!(row(&value, "a")["state"], "up-to-date", "{value:#}");
    assert_eq!(code, 3, "{value:#}");

    // A mirror that serves another release than the store names, and not the store's among
    // its kept releases/, is refused.
    std::fs::write(
        fx.path().join("bell.kdl"),
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\n",
    )
    .unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "other", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let other = fx.path().join("other").display().to_string();
    let run = fx.bellc(&[
        "status", "--store", &url, "--fleet", "f", "--source", &other, "--trust", &trust,
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("but the store names release"),
        "{}",
        run.stderr
    );

    // The store's word picks which of the mirror's releases/ is read; each way etcd's root or
    // the mirror's owner can bend that is refused.
    let refused = |version: &str, wants: &str| {
        etcdctl(&etcd.endpoint, &["put", "/bell/f/current_version", version]);
        let run = fx.bellc(&[
            "status", "--store", &url, "--fleet", "f", "--source", &source, "--trust", &trust,
        ]);
        assert_eq!(run.code, 2, "{version}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(wants), "{version}: {}", run.stderr);
        assert!(!run.stdout.contains("up-to-date"), "{}", run.stdout);
    };
    // A version that is a path: `releases/../release.json` is the mirror's own signed release,
    // but no name of the store's becomes a path unless it is hex.
    refused("../release", "but the store names release");
    std::fs::write(fx.path().join("outside.json"), "{}").unwrap();
    refused("../../outside", "but the store names release");
    // The mirror serves, as the store's release, one signed by a key the hosts do not trust.
    assert_eq!(fx.bellc(&["keygen", "rogue"]).code, 0);
    let run = fx.bellc(&[
        "build",
        "bell.kdl",
        "-o",
        "rogue",
        "--sign-key",
        "rogue.key",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rogue = common::pulling::release_of(&fx.path().join("rogue"));
    let releases = fx.path().join("out/releases");
    std::fs::create_dir_all(&releases).unwrap();
    let wave = releases.join(format!("{}.json", rogue.version));
    std::fs::copy(fx.path().join("rogue/release.json"), &wave).unwrap();
    std::fs::copy(
        fx.path().join("rogue/release.json.minisig"),
        releases.join(format!("{}.json.minisig", rogue.version)),
    )
    .unwrap();
    refused(
        &rogue.version,
        &format!("releases/{}.json: refused", rogue.version),
    );
    // A release the hosts' key did sign, swapped in under the name of another version.
    let theirs = common::pulling::release_of(&fx.path().join("other"));
    let swapped = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_ne!(theirs.version, swapped);
    std::fs::copy(
        fx.path().join("other/release.json"),
        releases.join(format!("{swapped}.json")),
    )
    .unwrap();
    std::fs::copy(
        fx.path().join("other/release.json.minisig"),
        releases.join(format!("{swapped}.json.minisig")),
    )
    .unwrap();
    refused(swapped, "but the store names release");
}

//! Fleet status you can trust: six image-root hosts report to a real etcd — up to date, failed
//! with its script's output, silent, drifted (and behind), pending, deferred — and `bellc
//! status` gives one complete row each: a summary state by severity, every condition as a flag
//! (a failed host whose lease lapsed stays failed, flagged stale), the report's age, release,
//! applied and desired bundle. Text (`--all`) and JSON agree, `--fail-on` decides the exit
//! code, OUT may be left out (the store's release is used) and an old OUT is warned about,
//! and one metrics file holds both the apply and the check.

use crate::common;
use crate::common::fleet::*;
use crate::common::pulling::{image_root, release_of};
use crate::common::Fixture;

const HOSTS: [&str; 6] = ["ok", "broken", "silent", "drifty", "behind", "baked"];

fn spec(motd: &str) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for host in HOSTS {
        spec.push_str(&format!("host \"{host}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n\
         override \"cache\" {{\n    match host=\"broken\"\n    exec \"warm-cache.sh\" offline=\"root\" {{\n        \
         script \"#!/bin/sh\\necho warming\\necho 'cache dir /srv/cache missing' >&2\\nexit 1\\n\"\n    }}\n}}\n\
         override \"ntp\" {{\n    match host=\"baked\"\n    package \"chrony\"\n}}\n"
    ));
    spec
}

#[test]
fn six_hosts_six_rows_that_hide_nothing() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let bin = bell_run();
    let fx = Fixture::new();
    for (out, motd) in [("out1", "one"), ("out2", "two")] {
        std::fs::write(fx.path().join("bell.kdl"), spec(motd)).unwrap();
        let run = fx.bellc(&["build", "bell.kdl", "-o", out]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let version = |out: &str| release_of(&fx.path().join(out)).version;
    let (v1, v2) = (version("out1"), version("out2"));
    let url = etcd.url.as_str();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let root = |host: &str| roots[HOSTS.iter().position(|h| *h == host).unwrap()].path();
    let metrics = fx.path().join("baked.prom");
    let run = |host: &str, args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--root", root(host).to_str().unwrap(), "--host", host]);
        all.extend(["--report", url]);
        run_bin(&bin, &all, &[])
    };
    let apply = |host: &str, out: &str, release: &str, extra: &[&str]| {
        let bundle = fx.path().join(out).join("hosts").join(host);
        let mut args = vec!["apply", bundle.to_str().unwrap(), "--release", release];
        args.extend_from_slice(extra);
        run(host, &args)
    };
    for host in ["ok", "baked"] {
        let extra = ["--metrics", metrics.to_str().unwrap()];
        let out = apply(
            host,
            "out2",
            &v2,
            if host == "baked" { &extra } else { &[] },
        );
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
    }
    let out = apply("broken", "out2", &v2, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    for host in ["drifty", "behind"] {
        let out = apply(host, "out1", &v1, &[]);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
    }
    // drifty's motd is changed by hand, and its check finds it.
    std::fs::write(root("drifty").join("etc/motd"), "changed by hand\n").unwrap();
    let out = run("drifty", &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // The baked image checks clean: its package waits for the first live apply.
    let out = run("baked", &["check", "--metrics", metrics.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // broken drifts too, and its check says so: why its apply failed must not be lost.
    std::fs::write(root("broken").join("etc/motd"), "changed by hand\n").unwrap();
    let out = run("broken", &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    // Then broken goes silent: its lease ends (revoked here rather than waited for).
    let lease = std::fs::read_to_string(root("broken").join("var/lib/bell/lease.json")).unwrap();
    let lease: serde_json::Value = serde_json::from_str(&lease).unwrap();
    etcd.client()
        .revoke_lease(lease["id"].as_i64().unwrap())
        .unwrap();
    let published = fx.bellc(&["publish", "out2", "--store", url]);
    assert_eq!(published.code, 0, "{}", published.stderr);

    // OUT left out: the store's published release, by fleet.
    let status = fx.bellc(&["status", "--store", url, "--fleet", "f", "--json"]);
    assert_eq!(status.code, 3, "{}\n{}", status.stdout, status.stderr);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(json["format"], 1);
    assert_eq!(json["version"], v2.as_str());
    let rows: Vec<(String, String, Vec<String>)> = json["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let flags = h["flags"].as_array().unwrap();
            (
                h["host"].as_str().unwrap().to_string(),
                h["state"].as_str().unwrap().to_string(),
                flags
                    .iter()
                    .map(|f| f.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect();
    let want = |host: &str, state: &str, flags: &[&str]| {
        let flags = flags.iter().map(|f| f.to_string()).collect();
        (host.to_string(), state.to_string(), flags)
    };
    assert_eq!(
        rows,
        [
            // No release was verified (no OUT): what each host reports is unverified, and
            // none is up to date on it.
            want(
                "broken",
                "failed",
                &["failed", "stale", "drifted", "unverified"]
            ),
            want("silent", "unaccounted", &[]),
            want("ok", "unverified", &["unverified"]),
            want("drifty", "drifted", &["drifted", "pending", "unverified"]),
            want("behind", "pending", &["pending", "unverified"]),
            want("baked", "deferred", &["deferred", "unverified"]),
        ],
        "{json:#}"
    );
    let row = |host: &str| common::row(&json, host);
    assert_eq!(
        row("broken")["failures"][0],
        "exec:warm-cache.sh (exit 1: cache dir /srv/cache missing)",
        "{json:#}"
    );
    assert_eq!(
        row("drifty")["drift"],
        serde_json::json!(["file:/etc/motd"])
    );
    assert_eq!(row("drifty")["version"], v1.as_str());
    assert_eq!(
        row("baked")["deferred"],
        serde_json::json!(["package:chrony"])
    );
    // The check did not say which release: the host's own record did.
    assert_eq!(row("baked")["version"], v2.as_str());
    assert!(row("ok")["age_seconds"].as_u64().unwrap() < 600);
    let counts = json["counts"].as_object().unwrap();
    assert_eq!(counts.len(), 14, "every state has a count: {json:#}");
    assert_eq!(counts["forged"], 0);
    assert_eq!(counts["unhealthy"], 0);

    // The text form lists every host with --all, in the same order and states.
    let text_status = fx.bellc(&["status", "--store", url, "--fleet", "f", "--all"]);
    let lines: Vec<&str> = text_status.stdout.lines().collect();
    assert!(lines[0].starts_with("HOST "), "{}", text_status.stdout);
    for (line, (host, state, _)) in lines[1..=6].iter().zip(&rows) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            (cells[0], cells[1]),
            (host.as_str(), state.as_str()),
            "{line}"
        );
    }
    assert!(lines[1].contains(" stale,drifted "), "{}", lines[1]);
    assert!(
        lines[1].ends_with("cache dir /srv/cache missing); drifted: file:/etc/motd"),
        "{}",
        lines[1]
    );
    assert!(lines[4].contains(" pending "), "{}", lines[4]);
    // Without --all, only up-to-date hosts are left out: `ok`, unverified, is shown.
    let short = fx.bellc(&["status", "--store", url, "--fleet", "f"]);
    assert_eq!(
        short.code, 3,
        "the failed host fails the default: {}",
        short.stderr
    );
    assert!(short.stdout.contains(" stale,drifted "), "{}", short.stdout);
    assert!(
        short
            .stdout
            .lines()
            .any(|l| l.starts_with("ok ") && l.contains(" unverified ")),
        "{}",
        short.stdout
    );

    // --fail-on decides: drift and deferred work alone do not fail the default.
    let fail_on = |states: &str| {
        fx.bellc(&[
            "status",
            "--store",
            url,
            "--fleet",
            "f",
            "--fail-on",
            states,
        ])
        .code
    };
    assert_eq!(fail_on("unhealthy"), 0);
    assert_eq!(fail_on("deferred"), 3);
    assert_eq!(fail_on("stale"), 3);
    assert_eq!(fail_on("pending"), 3, "drifty is pending too");
    assert_eq!(fail_on("no-such"), 64);

    // An old OUT is compared all the same, with a warning naming both releases.
    let old = fx.bellc(&["status", "out1", "--store", url]);
    assert!(
        old.stderr.contains(&format!(
            "holds release {}, but the store's current release of fleet `f` is {}",
            &v1[..12],
            &v2[..12]
        )),
        "{}",
        old.stderr
    );

    // One metrics file holds the apply and the check.
    let scraped = std::fs::read_to_string(&metrics).unwrap();
    for command in ["apply", "check"] {
        assert!(
            scraped.contains(&format!("bell_last_run_success{{command=\"{command}\"}} 1")),
            "{scraped}"
        );
    }
    assert!(scraped.contains(&format!("release=\"{v2}\"")), "{scraped}");
}

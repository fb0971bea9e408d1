//! Discovery, first part: hosts register their facts in a real etcd (`bell-run register`, from
//! image roots carrying copies of the `sys`, `proc` and `os-release` files they describe),
//! signed by an identity made for them, filed again only when a fact changes; `bellc hosts
//! pending` lists those the inventory lacks with their fingerprints and facts, flags a
//! registration under an inventory name with another identity, and names one that is not
//! signed by the key it names.

use crate::common;
use crate::common::enrolling::{host_root, register};
use crate::common::fleet::{bell_run, run_bin, Etcd};
use crate::common::Fixture;

#[test]
fn hosts_register_and_an_operator_sees_them_pending() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url.as_str();
    let roots: Vec<_> = (1..=3)
        .map(|i| host_root(&format!("52:54:00:00:00:0{i}"), 8 * 1024 * 1024))
        .collect();
    let mut fingerprints = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        let host = format!("new-{}", i + 1);
        let filed = register(root.path(), &host, url);
        assert_eq!(filed["filed"], true, "{filed:#}");
        assert_eq!(filed["key"], format!("/bell/f/discovery/{host}"));
        assert_eq!(filed["facts"]["cpus"], 4);
        assert_eq!(filed["facts"]["memory"], 8u64 << 30);
        assert_eq!(filed["facts"]["kernel"], "6.1.0-28-amd64");
        assert_eq!(filed["facts"]["disks"][0]["model"], "Samsung SSD 980");
        assert_eq!(filed["facts"]["disks"][0]["rotational"], false);
        fingerprints.push(filed["fingerprint"].as_str().unwrap().to_string());
        // Its identity was made for it, 0600, where bell-run keeps it.
        let key = root.path().join("etc/bell/identity.key");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // Nothing changed: nothing is filed again. A fact changes: it is.
    let revision = |host: &str| {
        etcd.client()
            .range_prefix(&format!("/bell/f/discovery/{host}"))
            .unwrap()[0]
            .mod_revision
    };
    let before = revision("new-1");
    assert_eq!(register(roots[0].path(), "new-1", url)["filed"], false);
    assert_eq!(revision("new-1"), before);
    std::fs::write(
        roots[0].path().join("proc/meminfo"),
        "MemTotal: 16777216 kB\n",
    )
    .unwrap();
    assert_eq!(register(roots[0].path(), "new-1", url)["filed"], true);
    assert!(revision("new-1") > before);

    // The inventory has `old` with a known identity; someone registers under its name with
    // another key, and an unsigned registration is put in with etcdctl.
    let old = host_root("52:54:00:00:00:09", 1024 * 1024);
    let claim = register(old.path(), "old", url);
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"old\" identity=\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJ+dU0P5Aa0C1ACA0vW1k5HhM5oZnRQ0u5u0vF\"\nhost \"new-3\" identity=\"IDENTITY3\"\n",
    );
    // new-3 is in the inventory already with the identity it registered with.
    let identity3 = run_bin(
        &bell_run(),
        &["identity", "--root", roots[2].path().to_str().unwrap()],
        &[],
    );
    let identity3 = String::from_utf8_lossy(&identity3.stdout);
    let identity3 = identity3
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl"))
        .unwrap()
        .replace("IDENTITY3", &identity3);
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let endpoint = url.trim_start_matches("etcd://");
    common::fleet::etcdctl(
        endpoint,
        &[
            "put",
            "/bell/f/discovery/evil",
            r#"{"format":1,"host":"evil"}"#,
        ],
    );

    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let standing: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["host"].as_str().unwrap(), r["standing"].as_str().unwrap()))
        .collect();
    assert_eq!(
        standing,
        [
            ("evil", "invalid"),
            ("new-1", "pending"),
            ("new-2", "pending"),
            ("old", "flagged")
        ]
    );
    assert_eq!(rows[1]["fingerprint"], fingerprints[0].as_str());
    assert_eq!(rows[1]["facts"]["memory"], 16u64 << 30);
    assert_eq!(rows[2]["fingerprint"], fingerprints[1].as_str());
    assert!(
        rows[0]["why"].as_str().unwrap().contains("not signed"),
        "{:#}",
        rows[0]
    );
    let why = rows[3]["why"].as_str().unwrap();
    assert!(
        why.contains(claim["fingerprint"].as_str().unwrap())
            && why.contains("the inventory gives `old`"),
        "{why}"
    );
    // In text: a table with the facts in a line.
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.lines().any(|l| l.starts_with("new-2 ")
            && l.contains(&fingerprints[1])
            && l.contains(
                "52:54:00:00:00:02 · 4 cpu · 8G · nvme0n1 932G · Debian GNU/Linux 12 (bookworm)"
            )),
        "{}",
        run.stdout
    );
    // A registration whose key paints (ESC, CR, a bidi override, a line of its own) is shown
    // escaped on its own row: no fake row, nothing a terminal acts on.
    let painted = "/bell/f/discovery/ev\u{1b}[2K\rnew-9     pending  \u{202e}\nnew-8 pending";
    common::fleet::etcdctl(endpoint, &["put", painted, r#"{"format":1}"#]);
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let shown = format!("{}{}", run.stdout, run.stderr);
    assert!(!shown.contains(['\u{1b}', '\r', '\u{202e}']), "{shown:?}");
    assert!(
        !shown
            .lines()
            .any(|l| l.starts_with("new-9") || l.starts_with("new-8")),
        "{shown}"
    );
    assert!(shown.contains("ev\\u{1b}[2K\\rnew-9"), "{shown}");
    common::fleet::etcdctl(endpoint, &["del", painted]);
    // `bellc hosts` itself is as it was.
    let run = fx.bellc(&["hosts", "bell.kdl"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("new-3\t"), "{}", run.stdout);

    // Accepting: a fingerprint other than the one registered accepts nothing, all or nothing.
    let accept = |args: &[&str]| {
        let mut all = vec!["hosts", "accept"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--inventory", "hosts.json", "--store", url, "--fleet", "f"]);
        fx.bellc(&all)
    };
    let wrong = format!("new-1={}", fingerprints[1]);
    let run = accept(&[wrong.as_str(), "new-2"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not accepted"), "{}", run.stderr);
    assert!(!fx.path().join("hosts.json").exists());
    // A host that never registered, a label that is no label: every reason at once.
    let run = accept(&["new-2", "nobody", "--label", "rack=r1\nforged"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("`nobody` has not registered"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("control character"), "{}", run.stderr);
    assert!(!fx.path().join("hosts.json").exists());

    let right = format!("new-1={}", fingerprints[0]);
    let run = accept(&["new-2", right.as_str(), "--label", "rack=r1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("accepted new-2 ({}", fingerprints[1])),
        "{}",
        run.stdout
    );
    let written = std::fs::read_to_string(fx.path().join("hosts.json")).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 4, "{written}");
    assert!(lines[1].starts_with(r#"  {"name":"new-1","#), "{written}");
    assert!(
        lines[1].contains(r#""accepted":2,"labels":{"rack":"r1"}"#),
        "{written}"
    );
    assert!(lines[2].contains(r#""accepted":1"#), "{written}");
    // The identity written is the one the host registered with.
    let listed: serde_json::Value = serde_json::from_str(&written).unwrap();
    let registered = etcd
        .client()
        .get("/bell/f/discovery/new-1")
        .unwrap()
        .unwrap();
    let registered: serde_json::Value = serde_json::from_slice(&registered).unwrap();
    assert_eq!(listed[0]["identity"], registered["signer"]);

    // The spec includes the inventory: they are hosts, no longer pending.
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap();
    std::fs::write(
        fx.path().join("bell.kdl"),
        format!("{spec}inventory \"hosts.json\"\n"),
    )
    .unwrap();
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["evil", "old"]);

    // Someone registers as new-1 with another key: pending flags it, accept refuses it.
    let impostor = host_root("52:54:00:00:00:66", 1024 * 1024);
    register(impostor.path(), "new-1", url);
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["host"] == "new-1" && r["standing"] == "flagged"),
        "{rows:#}"
    );
    let run = accept(&["new-1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("flagged, not accepted"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(fx.path().join("hosts.json")).unwrap(),
        written
    );

    // Rejecting: the registration goes; registering again with the same key shows `rejected`.
    let run = fx.bellc(&[
        "hosts", "reject", "evil", "old", "--store", url, "--fleet", "f",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd
        .client()
        .get("/bell/f/discovery/evil")
        .unwrap()
        .is_none());
    register(old.path(), "old", url);
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let standing: Vec<(&str, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["host"].as_str().unwrap(), r["standing"].as_str().unwrap()))
        .collect();
    assert_eq!(standing, [("new-1", "flagged"), ("old", "flagged")]);
    let run = fx.bellc(&["hosts", "reject", "nobody", "--store", url, "--fleet", "f"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no registration of nobody"),
        "{}",
        run.stderr
    );
}

/// What `register` says to do is a command that runs as it is: the accept it prints (the
/// inventory's name put in) adds the host, with the identity whose fingerprint it named.
#[test]
fn the_accept_register_prints_runs_as_printed() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let fx = Fixture::new();
    let root = host_root("52:54:00:00:00:09", 4 * 1024 * 1024);
    let out = run_bin(
        &bell_run(),
        &[
            "register",
            "--store",
            &etcd.url,
            "--fleet",
            "f",
            "--host",
            "node-17",
            "--root",
            root.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let command = said
        .split("accept it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no command: {said}"));
    let args: Vec<String> = command
        .split_whitespace()
        .map(|w| w.replace("INVENTORY.json", "hosts.json"))
        .collect();
    assert_eq!(args[..3], ["bellc", "hosts", "accept"], "{command}");
    assert!(args[3].starts_with("node-17=SHA256:"), "{command}");
    let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let run = fx.bellc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let inventory = std::fs::read_to_string(fx.path().join("hosts.json")).unwrap();
    assert!(inventory.contains("\"node-17\""), "{inventory}");
}

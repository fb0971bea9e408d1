//! Discovery end to end, as issue 54 asks: three machines register from image roots, an
//! operator sees them pending with their fingerprints and accepts them into the inventory the
//! spec includes, and the build gives `role=control` to exactly the `count` it asks for; a
//! fourth accepted later becomes a node and takes no role away; a registration forged under an
//! accepted name is flagged, not accepted; one never accepted shows in `status` as
//! `discovered`. A real etcd; bellc and bell-run as built.

use crate::common::enrolling::{host_root, register};
use crate::common::fleet::Etcd;
use crate::common::serving::Server;
use crate::common::Fixture;
use serde_json::Value;

const SPEC: &str = r#"fleet "f" target="debian-12"
inventory "hosts.json"
assign role="control" count=3
assign role="node"
override "control" {
    match role="control"
    sysctl { vm.swappiness 1 }
}
"#;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Each host's `role` label in a build's release.
fn roles(fx: &Fixture, out: &str) -> Vec<(String, String)> {
    let release = json(&std::fs::read_to_string(fx.path().join(out).join("release.json")).unwrap());
    release["hosts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, host)| {
            let role = host["labels"]["role"].as_str().unwrap_or("-").to_string();
            (name.clone(), role)
        })
        .collect()
}

#[test]
fn machines_register_are_accepted_and_get_roles_by_count() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url.as_str();
    let fx = Fixture::spec(SPEC);
    std::fs::write(fx.path().join("hosts.json"), "[]\n").unwrap();
    let roots: Vec<_> = (1..=5)
        .map(|i| host_root(&format!("52:54:00:00:01:0{i}"), 4 * 1024 * 1024))
        .collect();
    let mut fingerprints = Vec::new();
    for (i, root) in roots.iter().take(3).enumerate() {
        let filed = register(root.path(), &format!("m{}", i + 1), url);
        fingerprints.push(filed["fingerprint"].as_str().unwrap().to_string());
    }

    // Three control hosts wanted, none accepted: the build says how many are missing.
    let check = fx.bellc(&["check", "bell.kdl"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check
            .stderr
            .contains("`assign role=\"control\" count=3` needs 3 hosts; 0 do: 3 missing"),
        "{}",
        check.stderr
    );
    assert!(check.stderr.contains("bell.kdl:3:1"), "{}", check.stderr);

    // Pending lists them, with the fingerprints they registered with, spec errors or not.
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = json(&run.stdout);
    let seen: Vec<(&str, &str, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["host"].as_str().unwrap(),
                r["standing"].as_str().unwrap(),
                r["fingerprint"].as_str().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(&str, &str, &str)> = ["m1", "m2", "m3"]
        .iter()
        .zip(&fingerprints)
        .map(|(h, f)| (*h, "pending", f.as_str()))
        .collect();
    assert_eq!(seen, expected);

    // Accepted in the order m2, m3, m1 (the order an operator took them in, not their names).
    let accept = |hosts: &[&str]| {
        let mut args = vec!["hosts", "accept"];
        args.extend_from_slice(hosts);
        args.extend_from_slice(&["--inventory", "hosts.json", "--store", url, "--fleet", "f"]);
        let run = fx.bellc(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    let m2 = format!("m2={}", fingerprints[1]);
    accept(&[m2.as_str(), "m3"]);
    accept(&["m1"]);
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out1"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let got = roles(&fx, "out1");
    assert_eq!(
        got.iter().filter(|(_, r)| r == "control").count(),
        3,
        "{got:?}"
    );
    let release = json(&std::fs::read_to_string(fx.path().join("out1/release.json")).unwrap());
    assert_eq!(
        release["assignments"],
        serde_json::json!([{"label": "role", "value": "control", "count": 3, "hosts": ["m2", "m3", "m1"]}])
    );

    // A fourth machine registers and is accepted: it becomes a node, the others keep control.
    register(roots[3].path(), "m0", url);
    accept(&["m0"]);
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out2"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let got = roles(&fx, "out2");
    let want: Vec<(String, String)> = [
        ("m0", "node"),
        ("m1", "control"),
        ("m2", "control"),
        ("m3", "control"),
    ]
    .iter()
    .map(|(h, r)| (h.to_string(), r.to_string()))
    .collect();
    assert_eq!(got, want);
    // Explain says why each got its role.
    let explain = fx.bellc(&["explain", "m1", "bell.kdl"]);
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    assert!(
        explain.stdout.contains(
            "// role=\"control\": assign role=\"control\" count=3  bell.kdl:3: chosen 3 of 3"
        ),
        "{}",
        explain.stdout
    );
    let explain = fx.bellc(&["explain", "m0", "bell.kdl"]);
    assert!(
        explain
            .stdout
            .contains("// role=\"node\": assign role=\"node\"  bell.kdl:4: every host"),
        "{}",
        explain.stdout
    );

    // On call: hold the control hosts by their label, and let them go again.
    let hold = |verb: &str, selector: &str| {
        fx.bellc(&[
            verb, "--where", selector, "--out", "out2", "--store", url, "--fleet", "f",
        ])
    };
    let run = hold("hold", "role=control");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let held = || {
        let run = fx.bellc(&["lock", "status", "--store", url, "--fleet", "f", "--json"]);
        let status = json(&run.stdout);
        let names: Vec<String> = status["held"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names
    };
    assert_eq!(held(), ["m1", "m2", "m3"]);
    let run = hold("hold", "role=spare");
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("no host of out2's release has role=spare"),
        "{}",
        run.stderr
    );
    let run = hold("unhold", "role=control");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(held().is_empty());

    // Someone registers under m2's name with another key: flagged, and accept refuses it.
    let forger = host_root("52:54:00:00:01:66", 1024 * 1024);
    register(forger.path(), "m2", url);
    let run = fx.bellc(&["hosts", "pending", "bell.kdl", "--store", url, "--json"]);
    let rows = json(&run.stdout);
    assert_eq!(rows[0]["host"], "m2");
    assert_eq!(rows[0]["standing"], "flagged");
    let before = std::fs::read_to_string(fx.path().join("hosts.json")).unwrap();
    let run = fx.bellc(&[
        "hosts",
        "accept",
        "m2",
        "--inventory",
        "hosts.json",
        "--store",
        url,
        "--fleet",
        "f",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(fx.path().join("hosts.json")).unwrap(),
        before
    );

    // A fifth registers and is never accepted: status lists it as discovered, beside the
    // accepted hosts that never reported (unaccounted).
    let filed = register(roots[4].path(), "m5", url);
    let run = fx.bellc(&["status", "out2", "--store", url, "--json"]);
    let status = json(&run.stdout);
    let states: Vec<(&str, &str)> = status["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].as_str().unwrap(), h["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("m0", "unaccounted"),
            ("m1", "unaccounted"),
            ("m2", "unaccounted"),
            ("m3", "unaccounted"),
            ("m5", "discovered")
        ],
        "{status:#}"
    );
    assert_eq!(status["counts"]["discovered"], 1);
    let m5 = &status["hosts"][4];
    assert!(
        m5["detail"]
            .as_str()
            .unwrap()
            .contains(filed["fingerprint"].as_str().unwrap()),
        "{m5:#}"
    );
    let run = fx.bellc(&["status", "out2", "--store", url]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("m5") && l.contains("discovered")),
        "{}",
        run.stdout
    );
    // The status page and its API say the same.
    let server = Server::start(&fx, &["out2", "--store", url]);
    let (code, api) = server.get("/api/v1/status");
    assert_eq!(code, 200, "{api}");
    let api = json(&api);
    assert_eq!(api["counts"]["discovered"], 1, "{api:#}");
    let (code, page) = server.get("/");
    assert_eq!(code, 200);
    assert!(page.contains("m5") && page.contains("discovered"), "{page}");
    // Its own page says what it is and how to accept it.
    let (code, host) = server.get("/hosts/m5");
    assert_eq!(code, 200, "{host}");
    assert!(host.contains("not accepted"), "{host}");
}

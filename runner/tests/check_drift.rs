//! `bell-run check`: managed files (content, mode) and live values read back by a resource's
//! check script, compared with the applied generation; exactly the drifted ones are named, and
//! `apply` of the same bundle puts them back (files by the switch, live values by running the
//! drifted resource's apply again because its check said so).
use crate::common::*;

/// A "live" value outside the managed files, as a kernel setting would be: the apply writes
/// it, the check reads it back.
fn bundle(w: &World, want: &str) -> BundleSpec {
    let live = w.tmp.path().join("live");
    let live = live.display();
    BundleSpec::new()
        .file("/etc/demo.conf", "a = 1\n", "0644")
        .file("/etc/other.conf", "b = 2\n", "0600")
        .resource(ResourceSpec::new("conf", "demo").files(&["/etc/demo.conf"]))
        .resource(
            ResourceSpec::new("live", "value")
                .apply(&format!("printf '%s\\n' '{want}' > '{live}'\n"))
                .check(&format!(
                    "have=$(cat '{live}')\n[ \"$have\" = '{want}' ] && exit 0\necho \"value is $have, want {want}\"\nexit 2\n"
                )),
        )
        .resource(ResourceSpec::new("live", "broken-check").check("echo cannot read; exit 1\n"))
}

fn check(w: &World, extra: &[&str]) -> std::process::Output {
    let root = w.root();
    let mut args = vec!["check", "--root", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    w.run(&args)
}

#[test]
fn check_names_exactly_what_drifted_and_apply_repairs_it() {
    let w = World::new();
    let spec = bundle(&w, "42").resource(ResourceSpec::new("plain", "x"));
    // Without the resource whose check cannot run, to see a clean exit 0 first.
    let clean = BundleSpec {
        resources: spec
            .resources
            .iter()
            .filter(|r| r.name != "broken-check")
            .cloned()
            .collect(),
        ..spec.clone()
    };
    let b = w.build(&clean);
    expect_code(&w.apply(&b, &[]), 0);
    let out = check(&w, &[]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("0 drifted, 0 errors"),
        "{}",
        stdout(&out)
    );

    // Behind bell's back: one file's content, another's mode, and the live value.
    let root = w.root();
    std::fs::write(root.join("etc/demo.conf"), "a = 2\n").unwrap();
    // A secret file (0600 in the bundle) edited too: that it differs is said, never its lines.
    std::fs::write(root.join("etc/other.conf"), "b = hunter2\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("etc/other.conf"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(w.tmp.path().join("live"), "7\n").unwrap();

    let out = check(&w, &["--json"]);
    expect_code(&out, 2);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut names: Vec<String> = value["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} ({})",
                d["name"].as_str().unwrap(),
                d["detail"].as_str().unwrap()
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "file:/etc/demo.conf (content differs from line 1 (- bundle, + host):\n    - a = 1\n    + a = 2)",
            "file:/etc/other.conf (content differs, mode 0644, the bundle sets 0600)",
            "live:value (value is 7, want 42)",
        ]
    );
    assert_eq!(value["result"], "drifted");
    assert!(!stdout(&out).contains("hunter2"), "{}", stdout(&out));
    let human = check(&w, &[]);
    assert!(!stdout(&human).contains("hunter2"), "{}", stdout(&human));
    assert!(
        stdout(&human).contains("drifted file:/etc/demo.conf: content differs from line 1 (- bundle, + host):\n    - a = 1\n    + a = 2\n"),
        "{}",
        stdout(&human)
    );

    // The same bundle again: files put back, the drifted resource applied again.
    let out = w.apply(&b, &["--json"]);
    expect_code(&out, 0);
    let applied: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes: Vec<(String, String)> = applied["plan"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        changes.contains(&("live:value".into(), "drifted".into())),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("plain:x".into(), "unchanged".into())),
        "{changes:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.tmp.path().join("live")).unwrap(),
        "42\n"
    );
    // Said and counted as a repair, not as a change of the bundle.
    let repaired: Vec<&serde_json::Value> = applied["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["detail"] == "drifted → put back")
        .map(|o| &o["key"])
        .collect();
    assert_eq!(repaired, ["conf:demo", "live:value"], "{applied}");
    assert_eq!(applied["repaired"], 2, "{applied}");
    let out = check(&w, &[]);
    expect_code(&out, 0);

    // The same on the lines a person reads.
    std::fs::write(w.tmp.path().join("live"), "8\n").unwrap();
    expect_code(&check(&w, &[]), 2);
    let out = w.apply(&b, &[]);
    expect_code(&out, 0);
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("  * live:value") && l.ends_with("ok: drifted → put back")),
        "{text}"
    );
    assert!(
        text.contains("result: 0 changed, 1 drifted and put back, "),
        "{text}"
    );

    // A check that cannot answer is an error (exit 1), not drift.
    let b2 = w.build(&spec);
    expect_code(&w.apply(&b2, &[]), 0);
    let out = check(&w, &[]);
    expect_code(&out, 1);
    assert!(
        stdout(&out).contains("error live:broken-check: check exit 1: cannot read"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn check_refuses_when_nothing_was_applied() {
    let w = World::new();
    let out = check(&w, &[]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("no generation has been applied"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn reports_go_to_a_directory_with_one_state_per_category() {
    let w = World::new();
    let b = w.build(&bundle(&w, "1"));
    let reports = w.tmp.path().join("reports");
    let dest = reports.to_str().unwrap();
    expect_code(
        &w.apply(
            &b,
            &["--report", dest, "--host", "node-1", "--release", "r1"],
        ),
        0,
    );
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(reports.join("node-1.json")).unwrap()).unwrap()
    };
    let report = read();
    assert_eq!(report["command"], "apply");
    assert_eq!(report["result"], "success");
    assert_eq!(report["fleet"], "test");
    assert_eq!(report["release"], "r1");
    assert_eq!(report["bundle"], b.file_name().unwrap().to_str().unwrap());
    // The check with the broken check script: failed; the apply state stays.
    let out = check(&w, &["--report", dest, "--host", "node-1"]);
    expect_code(&out, 1);
    let report = read();
    assert_eq!(report["command"], "check");
    assert_eq!(report["status"]["check"], "failed");
    assert_eq!(report["status"]["apply"], "success");
    // Without --host the name comes from ROOT/etc/hostname.
    std::fs::write(w.root().join("etc/hostname"), "node-2\n").unwrap();
    let out = check(&w, &["--report", dest]);
    expect_code(&out, 1);
    assert!(reports.join("node-2.json").is_file());
    // A host name that would leave the directory is not filed; the run's own result stands.
    let out = check(&w, &["--report", dest, "--host", "../x"]);
    expect_code(&out, 1);
    assert!(stderr(&out).contains("cannot be filed"), "{}", stderr(&out));
    assert!(!w.tmp.path().join("x.json").exists());
}

/// A file the bundle does not call secret can become one on the host: someone adds a
/// database password and makes it private, or writes a private key over it. What the host
/// holds decides too: the report says the content differs, never its lines.
#[test]
fn a_host_file_made_private_or_holding_a_key_is_never_quoted() {
    let w = World::new();
    let spec = BundleSpec::new()
        .file("/etc/app.conf", "user = app\n", "0644")
        .file("/etc/tls.pem", "-----BEGIN CERTIFICATE-----\n", "0644")
        .resource(ResourceSpec::new("conf", "app").files(&["/etc/app.conf", "/etc/tls.pem"]));
    let b = w.build(&spec);
    expect_code(&w.apply(&b, &[]), 0);
    let root = w.root();
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        root.join("etc/app.conf"),
        "user = app\npassword = db-hunter2\n",
    )
    .unwrap();
    std::fs::set_permissions(
        root.join("etc/app.conf"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(
        root.join("etc/tls.pem"),
        "-----BEGIN PRIVATE KEY-----\nMIIkeymaterial\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let reports = w.tmp.path().join("reports");
    let dest = reports.to_str().unwrap();
    let out = check(&w, &["--json", "--report", dest, "--host", "node-1"]);
    expect_code(&out, 2);
    let report = std::fs::read_to_string(reports.join("node-1.json")).unwrap();
    for text in [stdout(&out), stderr(&out), report] {
        assert!(!text.contains("db-hunter2"), "{text}");
        assert!(!text.contains("MIIkeymaterial"), "{text}");
    }
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let details: Vec<&str> = value["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["detail"].as_str().unwrap())
        .collect();
    assert_eq!(
        details,
        [
            "content differs, mode 0600, the bundle sets 0644",
            "content differs"
        ]
    );
}

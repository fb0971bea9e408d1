//! A line changed behind bell's back in a file that several resources share
//! (`/etc/sysctl.d/60-bell.conf`, `/etc/security/limits.d/60-bell.conf`) is drift as a file
//! of one resource is: the apply puts the file back and marks each resource with a line in it
//! `*` (drifted → put back), counts them, and reports them; `bell-run check` names them. A
//! change of one key's value rewrites the file too, and that is no drift of the others.
use crate::common::fleet::{bell_run, text};
use crate::common::Fixture;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn spec(swappiness: u32) -> String {
    format!(
        r#"fleet "f" target="debian-12"
host "a"
sysctl {{
    vm.swappiness {swappiness}
    net.core.somaxconn 1024
}}
limit "nofile" domain="*" type="soft" item="nofile" value=65536
"#
    )
}

fn bell_run_json(args: &[&str], root: &Path) -> Value {
    let out = Command::new(bell_run())
        .args(args)
        .arg("--root")
        .arg(root)
        .arg("--json")
        .output()
        .expect("bell-run");
    assert!(matches!(out.status.code(), Some(0 | 2)), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

/// `KIND:NAME` → what the apply planned for it (`unchanged`, `changed`, `drifted`, …).
fn changes(report: &Value) -> Vec<(String, String)> {
    report["plan"]["resources"]
        .as_array()
        .expect("planned resources")
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["change"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, c)| (k.to_string(), c.to_string()))
        .collect()
}

#[test]
fn a_changed_line_of_a_shared_file_marks_and_counts_the_resources_that_own_lines_in_it() {
    let fx = Fixture::spec(&spec(10));
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = fx.path().join("out/hosts/a");
    let bundle = bundle.to_str().unwrap();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let first = bell_run_json(&["apply", bundle], root);
    assert_eq!(first["changed"], 3, "{first}");
    let sysctl_d = root.join("etc/sysctl.d/60-bell.conf");
    let limits_d = root.join("etc/security/limits.d/60-bell.conf");
    let (sysctls, limits) = (
        std::fs::read_to_string(&sysctl_d).unwrap(),
        std::fs::read_to_string(&limits_d).unwrap(),
    );
    assert!(sysctls.contains("vm.swappiness = 10"), "{sysctls}");

    // A re-apply with nothing changed marks nothing.
    let again = bell_run_json(&["apply", bundle], root);
    assert_eq!(again["changed"], 0, "{again}");
    assert_eq!(again["repaired"], 0, "{again}");

    // The sysctl file edited on the host: both keys with a line in it are drifted, put back.
    std::fs::write(&sysctl_d, format!("{sysctls}vm.swappiness = 60\n")).unwrap();
    let repaired = bell_run_json(&["apply", bundle], root);
    assert_eq!(
        changes(&repaired),
        pairs(&[
            ("sysctl:net.core.somaxconn", "drifted"),
            ("sysctl:vm.swappiness", "drifted"),
            ("limit:nofile", "unchanged"),
        ]),
        "{repaired}"
    );
    assert_eq!(repaired["repaired"], 2, "{repaired}");
    assert_eq!(std::fs::read_to_string(&sysctl_d).unwrap(), sysctls);
    let drift = repaired["drift"].to_string();
    assert!(drift.contains("file:/etc/sysctl.d/60-bell.conf"), "{drift}");
    // As a reader sees it.
    let shown = Command::new(bell_run())
        .args(["apply", bundle, "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown));
    std::fs::write(&limits_d, format!("{limits}* hard nofile 10\n")).unwrap();
    let shown = Command::new(bell_run())
        .args(["apply", bundle, "--root"])
        .arg(root)
        .output()
        .unwrap();
    let said = text(&shown);
    assert!(shown.status.success(), "{said}");
    assert!(said.contains("* limit:nofile"), "{said}");
    assert!(said.contains("drifted → put back"), "{said}");
    assert!(said.contains("1 drifted and put back"), "{said}");
    assert_eq!(std::fs::read_to_string(&limits_d).unwrap(), limits);

    // `bell-run check` names the resource whose line drifted (it has no check of its own).
    std::fs::write(&limits_d, format!("{limits}* hard nofile 10\n")).unwrap();
    let checked = bell_run_json(&["check", "--offline"], root);
    let limit = checked["resources"]
        .as_array()
        .expect("checked resources")
        .iter()
        .find(|r| r["key"] == "limit:nofile")
        .cloned()
        .unwrap_or_default();
    assert_eq!(limit["result"], "drifted-files", "{checked}");
    bell_run_json(&["apply", bundle], root);

    // One key's new value rewrites the shared file: that key changed, the other is no drift.
    std::fs::write(fx.path().join("bell.kdl"), spec(5)).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let changed = bell_run_json(&["apply", bundle], root);
    assert_eq!(
        changes(&changed),
        pairs(&[
            ("sysctl:net.core.somaxconn", "unchanged"),
            ("sysctl:vm.swappiness", "changed"),
            ("limit:nofile", "unchanged"),
        ]),
        "{changed}"
    );
    assert_eq!(changed["repaired"], 0, "{changed}");
    assert_eq!(changed["drift"], serde_json::json!([]), "{changed}");
}

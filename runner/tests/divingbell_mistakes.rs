//! The mistakes of Divingbell that bell-run must not repeat, each pinned by a test with small
//! hand-written scripts: deleting files it never wrote, leaving a departed resource unreverted
//! because its apply had failed, reverting removed settings only after applying new ones, and
//! reporting success when an apply failed.
use crate::common::*;

#[test]
fn a_file_that_was_there_before_bell_is_never_deleted() {
    let w = World::new();
    let path = w.root().join("etc/limits.d");
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("90-admin.conf"), "admin's own\n").unwrap();
    std::fs::write(path.join("untouched.conf"), "not bell's\n").unwrap();
    let spec = BundleSpec::new()
        .file("/etc/limits.d/90-admin.conf", "bell's\n", "0644")
        .resource(ResourceSpec::new("limits", "admin").files(&["/etc/limits.d/90-admin.conf"]));
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    expect_code(&w.apply(&w.build(&BundleSpec::new()), &[]), 0);
    assert_eq!(
        std::fs::read_to_string(path.join("90-admin.conf")).unwrap(),
        "admin's own\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("untouched.conf")).unwrap(),
        "not bell's\n"
    );
}

#[test]
fn a_departed_resource_is_reverted_even_when_its_last_apply_failed() {
    let w = World::new();
    let unit = "/etc/systemd/system/bell-x.service";
    let spec = BundleSpec::new()
        .file(unit, "[Service]\nExecStart=/bin/true\n", "0644")
        .resource(
            ResourceSpec::new("unit", "bell-x")
                .files(&[unit])
                .apply(&format!("{}exit 1\n", w.event("apply unit")))
                .revert(&w.event("revert unit")),
        );
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 3);
    let out = w.apply(&w.build(&BundleSpec::new()), &[]);
    expect_code(&out, 0);
    assert_eq!(w.events(), vec!["apply unit", "revert unit"]);
    assert!(
        !w.root().join(unit.trim_start_matches('/')).exists(),
        "the unit file is gone"
    );
}

#[test]
fn removed_settings_are_reverted_before_new_ones_are_applied_and_before_files_switch() {
    let w = World::new();
    let old_file = "/etc/sysctl.d/60-bell-old.conf";
    let root = w.root();
    let spec1 = BundleSpec::new()
        .file(old_file, "a = 1\n", "0644")
        .resource(
            ResourceSpec::new("sysctl", "old")
                .files(&[old_file])
                .apply(&w.event("apply old"))
                // The revert still sees its own file: it runs before the switch removes it.
                .revert(&format!(
                    "if [ -e '{}' ]; then {} else {} fi\n",
                    root.join(old_file.trim_start_matches('/')).display(),
                    w.event("revert old, file present").trim_end().to_string() + ";",
                    w.event("revert old, file gone").trim_end().to_string() + ";"
                )),
        );
    let new_file = "/etc/sysctl.d/60-bell-new.conf";
    let spec2 = BundleSpec::new()
        .file(new_file, "a = 1\n", "0644")
        .resource(
            ResourceSpec::new("sysctl", "new")
                .files(&[new_file])
                .apply(&w.event("apply new")),
        );
    expect_code(&w.apply(&w.build(&spec1), &[]), 0);
    w.clear_events();
    expect_code(&w.apply(&w.build(&spec2), &[]), 0);
    assert_eq!(w.events(), vec!["revert old, file present", "apply new"]);
}

#[test]
fn a_failed_apply_is_reported_named_with_exit_3_and_dependents_are_skipped() {
    let w = World::new();
    let spec = BundleSpec::new()
        .resource(ResourceSpec::new("apt", "repo").apply(&format!(
            "{}echo broken >&2\nexit 7\n",
            w.event("apply repo")
        )))
        .resource(
            ResourceSpec::new("apt", "pkg")
                .after(&["apt:repo"])
                .apply(&w.event("apply pkg")),
        )
        .resource(
            ResourceSpec::new("apt", "pkg-conf")
                .after(&["apt:pkg"])
                .apply(&w.event("apply pkg-conf")),
        )
        .resource(ResourceSpec::new("sysctl", "other").apply(&w.event("apply other")));
    let bundle = w.build(&spec);
    let out = w.apply(&bundle, &["--json"]);
    expect_code(&out, 3);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["result"], "failed");
    assert_eq!(
        report["failed"],
        serde_json::json!(["apt:repo", "apt:pkg", "apt:pkg-conf"])
    );
    let statuses: Vec<&str> = report["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["failed", "skipped", "skipped", "ok"]);
    assert_eq!(w.events(), vec!["apply repo", "apply other"]);
    // The output of the failed script is kept under the state directory.
    // Named where it really is: under the root, not as the path inside it.
    let log = report["resources"][0]["log"].as_str().unwrap();
    assert!(log.starts_with(w.root().to_str().unwrap()), "{log}");
    let text = std::fs::read_to_string(log).unwrap();
    assert_eq!(text, "broken\n");

    // Text output names it too, and counts what did not run apart from what failed.
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 3);
    assert!(
        stdout(&out).lines().any(|l| l
            == "result: 0 changed, 1 unchanged, 1 failed (apt:repo), \
                2 skipped after a failure (apt:pkg, apt:pkg-conf)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_resource_that_failed_last_time_is_retried_when_the_bundle_is_unchanged() {
    let w = World::new();
    let flag = w.tmp.path().join("fixed");
    let spec = BundleSpec::new().resource(ResourceSpec::new("svc", "flaky").apply(&format!(
        "{}[ -e '{}' ]\n",
        w.event("apply flaky"),
        flag.display()
    )));
    let bundle = w.build(&spec);
    expect_code(&w.apply(&bundle, &[]), 3);
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 3);
    assert!(stdout(&out).contains("! svc:flaky"), "{}", stdout(&out));
    std::fs::write(&flag, "").unwrap();
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert_eq!(w.events().len(), 3, "retried each time");
    let out = w.apply(&bundle, &[]);
    assert!(
        stdout(&out).contains("result: 0 changed"),
        "{}",
        stdout(&out)
    );
    assert_eq!(w.events().len(), 3, "not run once it succeeded");
}

#[test]
fn a_failed_revert_is_retried_on_the_next_run() {
    let w = World::new();
    let flag = w.tmp.path().join("can-revert");
    let spec =
        BundleSpec::new().resource(ResourceSpec::new("mount", "data").apply("true\n").revert(
            &format!("{}[ -e '{}' ]\n", w.event("revert data"), flag.display()),
        ));
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    let empty = w.build(&BundleSpec::new());
    expect_code(&w.apply(&empty, &[]), 3);
    std::fs::write(&flag, "").unwrap();
    expect_code(&w.apply(&empty, &[]), 0);
    expect_code(&w.apply(&empty, &[]), 0);
    assert_eq!(w.events(), vec!["revert data", "revert data"]);
}

#[test]
fn a_failed_apply_shows_the_scripts_one_line_reason_inline() {
    let w = World::new();
    let spec = BundleSpec::new().resource(
        ResourceSpec::new("sysctl", "net.ipv4.ip_forward")
            .apply("echo 'some noise' >&2\necho 'bell: sysctl:net.ipv4.ip_forward: the kernel refused it' >&2\nexit 1\n"),
    );
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 3);
    let text = stdout(&out);
    assert!(
        text.contains("failed: exit 1: sysctl:net.ipv4.ip_forward: the kernel refused it"),
        "{text}"
    );
}

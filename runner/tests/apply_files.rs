//! Applying offline into a temp root: every file lands with its content, mode and owner; a
//! re-apply is a no-op; a dropped file gives back exactly what was there before bell, and a
//! bell-only file is deleted.
use crate::common::*;
use std::os::unix::fs::MetadataExt;

fn gen1(w: &World) -> BundleSpec {
    BundleSpec::new()
        .file(
            "/etc/sysctl.d/60-bell.conf",
            "net.ipv4.ip_forward = 1\n",
            "0644",
        )
        .file_owned(
            "/etc/sudoers.d/bell-alice",
            "alice ALL=(ALL) ALL\n",
            "0440",
            "root",
            "root",
        )
        .file_owned(
            "/home/alice/.ssh/authorized_keys",
            "ssh-ed25519 AAAA alice\n",
            "0600",
            "alice",
            "staff",
        )
        .file("/etc/motd", "managed by bell\n", "0644")
        .resource(
            ResourceSpec::new("sysctl", "ip_forward")
                .files(&["/etc/sysctl.d/60-bell.conf"])
                .apply(&w.event("apply sysctl")),
        )
        .resource(ResourceSpec::new("user", "alice").files(&[
            "/etc/sudoers.d/bell-alice",
            "/home/alice/.ssh/authorized_keys",
        ]))
        .resource(ResourceSpec::new("motd", "motd").files(&["/etc/motd"]))
}

#[test]
fn every_file_lands_with_content_mode_and_owner() {
    let w = World::new();
    let bundle = w.build(&gen1(&w));
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    let root = w.root();
    assert_eq!(
        std::fs::read_to_string(root.join("etc/sysctl.d/60-bell.conf")).unwrap(),
        "net.ipv4.ip_forward = 1\n"
    );
    assert_eq!(mode_of(&root.join("etc/sysctl.d/60-bell.conf")), 0o644);
    assert_eq!(mode_of(&root.join("etc/sudoers.d/bell-alice")), 0o440);
    let keys = root.join("home/alice/.ssh/authorized_keys");
    assert_eq!(mode_of(&keys), 0o600);
    let meta = std::fs::metadata(&keys).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (1000, 1001),
        "owner from the root's etc/passwd"
    );
    assert_eq!(w.events(), vec!["apply sysctl"]);
    assert!(stdout(&out).contains("offline"), "{}", stdout(&out));
}

#[test]
fn reapplying_the_same_bundle_writes_nothing_and_runs_nothing() {
    let w = World::new();
    let bundle = w.build(&gen1(&w));
    expect_code(&w.apply(&bundle, &[]), 0);
    let before = snapshot(&w.root(), &["var/lib/bell"], true, true);
    w.clear_events();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("result: 0 changed"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("0 written"), "{}", stdout(&out));
    assert_eq!(
        snapshot(&w.root(), &["var/lib/bell"], true, true),
        before,
        "mtimes unchanged"
    );
    assert!(
        w.events().is_empty(),
        "no apply script ran: {:?}",
        w.events()
    );
}

#[test]
fn a_dropped_file_restores_the_file_from_before_bell_and_deletes_a_bell_only_file() {
    let w = World::new();
    let root = w.root();
    // /etc/motd existed before bell, with its own mode and mtime.
    std::fs::write(root.join("etc/motd"), "the distribution's motd\n").unwrap();
    std::fs::set_permissions(
        root.join("etc/motd"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options()
        .write(true)
        .open(root.join("etc/motd"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let pristine = snapshot(&root, &["var/lib/bell"], true, false);

    expect_code(&w.apply(&w.build(&gen1(&w)), &[]), 0);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/motd")).unwrap(),
        "managed by bell\n"
    );

    // A bundle that manages nothing any more: every file bell wrote goes, the motd comes back.
    let empty = w.build(&BundleSpec::new());
    let out = w.apply(&empty, &[]);
    expect_code(&out, 0);
    assert!(
        !root.join("etc/sysctl.d/60-bell.conf").exists(),
        "bell-only file deleted"
    );
    assert!(!root.join("home/alice/.ssh/authorized_keys").exists());
    assert_eq!(
        snapshot(&root, &["var/lib/bell"], true, false),
        pristine,
        "exactly the files from before bell, with content, mode, owner and mtime"
    );
}

#[test]
fn a_drifted_file_is_put_back_and_its_resource_applied_again() {
    let w = World::new();
    let bundle = w.build(&gen1(&w));
    expect_code(&w.apply(&bundle, &[]), 0);
    std::fs::write(
        w.root().join("etc/sysctl.d/60-bell.conf"),
        "edited by hand\n",
    )
    .unwrap();
    w.clear_events();
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(w.root().join("etc/sysctl.d/60-bell.conf")).unwrap(),
        "net.ipv4.ip_forward = 1\n"
    );
    assert_eq!(w.events(), vec!["apply sysctl"]);
}

#[test]
fn a_file_changed_by_hand_after_bell_stopped_managing_it_is_not_deleted() {
    let w = World::new();
    expect_code(&w.apply(&w.build(&gen1(&w)), &[]), 0);
    // Someone edits a bell-only file; then bell stops managing it: it is not bell's any more.
    std::fs::write(w.root().join("etc/sysctl.d/60-bell.conf"), "mine now\n").unwrap();
    let out = w.apply(&w.build(&BundleSpec::new()), &[]);
    expect_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(w.root().join("etc/sysctl.d/60-bell.conf")).unwrap(),
        "mine now\n"
    );
    assert!(
        stdout(&out).contains("left /etc/sysctl.d/60-bell.conf in place"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_unknown_owner_is_refused_before_anything_changes() {
    let w = World::new();
    let spec = BundleSpec::new()
        .file("/etc/a.conf", "a\n", "0644")
        .file_owned("/etc/b.conf", "b\n", "0644", "mallory", "root")
        .resource(ResourceSpec::new("f", "ab").files(&["/etc/a.conf", "/etc/b.conf"]));
    let before = snapshot(&w.root(), &[], true, true);
    let out = w.apply(&w.build(&spec), &[]);
    expect_code(&out, 1);
    assert!(stderr(&out).contains("owner `mallory`"), "{}", stderr(&out));
    assert_eq!(snapshot(&w.root(), &[], true, true), before);
}

/// A new bundle that changes a file's content is a change, not drift; a file edited by hand, or
/// whose mode was changed behind bell's back, is drift.
#[test]
fn a_changed_bundle_is_not_drift_but_a_hand_edit_or_chmod_is() {
    let drift_of = |out: &std::process::Output| -> Vec<String> {
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["drift"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let motd = |content: &str| {
        BundleSpec::new()
            .file("/etc/motd", content, "0644")
            .resource(ResourceSpec::new("motd", "motd").files(&["/etc/motd"]))
    };
    let w = World::new();
    expect_code(&w.apply(&w.build(&motd("version 1\n")), &[]), 0);
    let second = w.build(&motd("version 2\n"));
    let out = w.apply(&second, &["--json"]);
    expect_code(&out, 0);
    assert_eq!(drift_of(&out), Vec::<String>::new());

    std::fs::write(w.root().join("etc/motd"), "edited by hand\n").unwrap();
    let out = w.apply(&second, &["--json"]);
    assert_eq!(drift_of(&out), ["file:/etc/motd"]);
    let motd = w.root().join("etc/motd");
    std::fs::set_permissions(&motd, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let out = w.apply(&second, &["--json"]);
    assert_eq!(drift_of(&out), ["file:/etc/motd"]);
}

//! perm apply/revert run for real over a temp root: apply records each matched path's original
//! owner, group and mode and sets the spec's; re-apply changes nothing; revert puts the
//! originals back. Glob characters expand on the host; every other character of the spec path,
//! however hostile, is literal.

use crate::common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn ids(p: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(p).expect("stat");
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

fn root_with_accounts() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(root.path().join("etc")).expect("mkdir");
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:4242:4242::/srv/app:/bin/sh\n",
    )
    .expect("passwd");
    std::fs::write(root.path().join("etc/group"), "root:x:0:\napp:x:4343:\n").expect("group");
    root
}

/// `ignore-missing=#true` under a directory the root does not have (or reaches only through a
/// link to nowhere, as `/var/run -> /run` in an image before boot): apply, check and revert do
/// nothing and succeed. Without it, the apply fails naming the directory.
#[test]
fn a_missing_directory_is_nothing_to_do_when_missing_is_ignored() {
    let spec = |ignore: bool| {
        format!(
            "fleet \"t\" target=\"debian-12\"\nhost \"h\"\nperm \"/var/run/app/*.sock\" owner=\"app\" mode=\"0660\"{}\n",
            if ignore { " ignore-missing=#true" } else { "" }
        )
    };
    let c = compile_ok(&spec(true));
    let b = only_bundle(&c);
    let root = root_with_accounts();
    std::fs::create_dir_all(root.path().join("var")).expect("mkdir");
    std::os::unix::fs::symlink("/run", root.path().join("var/run")).expect("link");
    let state = tempfile::tempdir().expect("temp dir");
    for role in ["apply", "check", "revert"] {
        let out = run(
            &script(b, "perm", "/var/run/app/*.sock", role),
            root.path(),
            state.path(),
            true,
        );
        ok(&out);
    }
    assert!(
        !root.path().join("run").exists(),
        "the apply made the directory"
    );

    let c = compile_ok(&spec(false));
    let apply = script(only_bundle(&c), "perm", "/var/run/app/*.sock", "apply");
    let out = run(&apply, root.path(), state.path(), true);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot enter /var/run/app"), "{stderr}");
}

#[test]
fn apply_reapply_revert_over_a_glob_with_hostile_names() {
    if !nix_root() {
        return;
    }
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
perm "/srv/app/*.key" owner="app" group="app" mode="0600" ignore-missing=#true
"#,
    );
    let b = only_bundle(&c);
    let root = root_with_accounts();
    let dir = root.path().join("srv/app");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let names = ["a.key", "it's $(touch pwned) `x`.key", "other.txt"];
    for n in names {
        let p = dir.join(n);
        std::fs::write(&p, "k").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let state = tempfile::tempdir().expect("temp dir");
    let apply = script(b, "perm", "/srv/app/*.key", "apply");
    // The script's own directory is its working directory: where `touch pwned` would land.
    let cwd = tempfile::tempdir().expect("temp dir");
    ok(&run_in(&apply, root.path(), state.path(), true, cwd.path()));
    assert_eq!(ids(&dir.join(names[0])), (4242, 4343, 0o600));
    assert_eq!(ids(&dir.join(names[1])), (4242, 4343, 0o600));
    assert_eq!(
        ids(&dir.join(names[2])),
        (0, 0, 0o644),
        "not matched by the glob"
    );
    for place in [root.path(), &dir, cwd.path()] {
        assert!(
            !place.join("pwned").exists(),
            "a name ran a command in {}",
            place.display()
        );
    }
    assert_eq!(
        std::fs::read_dir(state.path().join("orig"))
            .expect("records")
            .count(),
        2
    );

    let before = snapshot_tree(state.path());
    let ctime = std::fs::metadata(dir.join(names[0]))
        .expect("stat")
        .ctime_nsec();
    ok(&run(&apply, root.path(), state.path(), true));
    assert_eq!(
        snapshot_tree(state.path()),
        before,
        "re-apply rewrote its state"
    );
    assert_eq!(
        std::fs::metadata(dir.join(names[0]))
            .expect("stat")
            .ctime_nsec(),
        ctime,
        "re-apply touched the file"
    );

    ok(&run(
        &script(b, "perm", "/srv/app/*.key", "revert"),
        root.path(),
        state.path(),
        true,
    ));
    for n in names {
        assert_eq!(ids(&dir.join(n)), (0, 0, 0o644), "{n} not restored");
    }
    assert_eq!(
        std::fs::read_dir(state.path().join("orig"))
            .expect("records")
            .count(),
        0
    );
}

#[test]
fn a_missing_path_fails_unless_ignore_missing() {
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
perm "/etc/shadow" owner="root" group="root" mode="0640"
"#,
    );
    let b = only_bundle(&c);
    let root = root_with_accounts();
    let state = tempfile::tempdir().expect("temp dir");
    let out = run(
        &script(b, "perm", "/etc/shadow", "apply"),
        root.path(),
        state.path(),
        true,
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "bell: perm:/etc/shadow: nothing matches /etc/shadow\n"
    );
}

#[test]
fn an_unknown_owner_fails_with_its_name() {
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
perm "/etc/x" owner="nobody-here" mode="0640"
"#,
    );
    let b = only_bundle(&c);
    let root = root_with_accounts();
    std::fs::write(root.path().join("etc/x"), "").expect("write");
    let state = tempfile::tempdir().expect("temp dir");
    let out = run(
        &script(b, "perm", "/etc/x", "apply"),
        root.path(),
        state.path(),
        true,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("user nobody-here does not exist"));
}

#[test]
fn the_check_reports_paths_changed_behind_bells_back_and_new_matches() {
    if !nix_root() {
        return;
    }
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
perm "/srv/app/*.key" owner="app" group="app" mode="0600" ignore-missing=#true
"#,
    );
    let b = only_bundle(&c);
    let root = root_with_accounts();
    let dir = root.path().join("srv/app");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("a.key"), "k").expect("write");
    let state = tempfile::tempdir().expect("temp dir");
    let apply = script(b, "perm", "/srv/app/*.key", "apply");
    let check = script(b, "perm", "/srv/app/*.key", "check");
    ok(&run(&apply, root.path(), state.path(), true));
    let out = run(&check, root.path(), state.path(), true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // Someone changes the mode back, and a new key appears.
    std::fs::set_permissions(dir.join("a.key"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    std::fs::write(dir.join("b.key"), "k").expect("write");
    let out = run(&check, root.path(), state.path(), true);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "/srv/app/a.key is 4242 4343 644 (uid gid mode), the bundle sets 4242 4343 600"
        ),
        "{said}"
    );
    assert!(said.contains("/srv/app/b.key is 0 0 644"), "{said}");

    // The apply that follows a drift report puts both right.
    ok(&run(&apply, root.path(), state.path(), true));
    assert_eq!(ids(&dir.join("b.key")), (4242, 4343, 0o600));
    let out = run(&check, root.path(), state.path(), true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// chown needs root; elsewhere the test is skipped with a note (and fails in CI).
fn nix_root() -> bool {
    bell_testkit::root()
}

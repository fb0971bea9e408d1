//! The unit and mount checks offline (an image root, no systemd): after the apply made the
//! enable links their [Install] sections ask for, the check is in sync; a link removed behind
//! bell's back is drift naming the unit and the link; the apply puts it back. What is live only
//! (is-active, findmnt, loaded AppArmor profiles) is not read offline: those checks exit 0, and
//! a unit neither enabled nor started has no check at all. The live halves run in the VM test.

use crate::common::*;
use std::path::Path;

const SPEC: &str = r##"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
mount "data" target="/srv/it's $(x)" device="tmpfs" type="tmpfs"
unit "myapp.service" enable=#true {
    content #"""
        [Service]
        ExecStart=/bin/true
        [Install]
        WantedBy=multi-user.target
        RequiredBy=bell-test.target
        """#
}
unit "idle.service" enable=#false start=#false {
    content "[Service]\nExecStart=/bin/true\n"
}
apparmor "p" {
    profile "profile p /usr/bin/p {\n}\n"
}
"##;

fn check(text: &str, root: &Path, state: &Path) -> (i32, String) {
    let out = run(text, root, state, true);
    assert!(
        out.stderr.is_empty(),
        "the check wrote to stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What a check said about `KIND:NAME`, as a resource's own check says it (its exit status and
/// what it printed): a batch's check (mounts) answers `KIND:NAME<TAB>RESULT<TAB>DETAIL` for it.
fn verdict(key: &str, (code, out): (i32, String)) -> (i32, String) {
    let Some(line) = out.lines().find(|l| l.starts_with(&format!("{key}\t"))) else {
        return (code, out);
    };
    assert_eq!(code, 0, "a batch's check exits 0: {out}");
    let mut fields = line.splitn(3, '\t').skip(1);
    match (fields.next(), fields.next().unwrap_or_default()) {
        (Some("in-sync"), _) => (0, String::new()),
        (Some("drifted"), detail) => (2, format!("{detail}\n")),
        _ => (1, out),
    }
}

fn drift_and_repair(kind: &str, name: &str, link: &str, said: &str) {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let root = tempfile::tempdir().expect("temp dir");
    let state = tempfile::tempdir().expect("temp dir");
    let (apply, check_script) = (
        script(b, kind, name, "apply"),
        script(b, kind, name, "check"),
    );
    let key = format!("{kind}:{name}");
    ok(&run(&apply, root.path(), state.path(), true));
    assert_eq!(
        verdict(&key, check(&check_script, root.path(), state.path())),
        (0, String::new())
    );
    std::fs::remove_file(root.path().join(link)).expect("remove the link");
    assert_eq!(
        verdict(&key, check(&check_script, root.path(), state.path())),
        (2, format!("{said}\n"))
    );
    ok(&run(&apply, root.path(), state.path(), true));
    assert!(root.path().join(link).symlink_metadata().is_ok());
    assert_eq!(
        verdict(&key, check(&check_script, root.path(), state.path())),
        (0, String::new())
    );
}

#[test]
fn a_removed_wants_link_of_a_unit_is_drift() {
    drift_and_repair(
        "unit",
        "myapp.service",
        "etc/systemd/system/multi-user.target.wants/myapp.service",
        "myapp.service is not enabled: /etc/systemd/system/multi-user.target.wants/myapp.service is missing",
    );
}

#[test]
fn a_removed_requires_link_of_a_unit_is_drift() {
    drift_and_repair(
        "unit",
        "myapp.service",
        "etc/systemd/system/bell-test.target.requires/myapp.service",
        "myapp.service is not enabled: /etc/systemd/system/bell-test.target.requires/myapp.service is missing",
    );
}

#[test]
fn a_removed_local_fs_link_of_a_mount_is_drift() {
    let unit = bellc_core::escape::mount_unit_name("/srv/it's $(x)");
    drift_and_repair(
        "mount",
        "data",
        &format!("etc/systemd/system/local-fs.target.wants/{unit}"),
        &format!(
            "{unit} is not enabled: /etc/systemd/system/local-fs.target.wants/{unit} is missing"
        ),
    );
}

#[test]
fn live_only_state_is_not_read_offline() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let root = tempfile::tempdir().expect("temp dir");
    let state = tempfile::tempdir().expect("temp dir");
    // Nothing under the root at all: an AppArmor check has nothing it could read offline.
    assert_eq!(
        check(
            &script(b, "apparmor", "p", "check"),
            root.path(),
            state.path()
        ),
        (0, String::new())
    );
    let idle = b
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == "unit" && r.name == "idle.service")
        .expect("idle.service");
    assert!(
        idle.check.is_none(),
        "nothing to read back for idle.service"
    );
}

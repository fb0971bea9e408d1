//! `ethtool`'s check script reads the features back for `bell-run check`: in sync, drifted
//! (naming each feature that is not as the bundle sets it) or unreadable. Run against a stub
//! `ethtool` that prints what `ethtool -k` prints; the live path runs in the VM test.

use crate::common::{compile_ok, only_bundle, script};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const SPEC: &str = r#"fleet "f" target="debian-12"
host "h"
ethtool "ens3" {
    tx-checksumming "off"
    generic-receive-offload "on"
}
"#;

/// Runs the check live with an `ethtool` on PATH that prints `features` for `-k ens3` (and
/// fails for any other interface).
fn check_with(features: Option<&str>, offline: bool) -> Output {
    check_spec_with(SPEC, features, offline)
}

fn check_spec_with(spec: &str, features: Option<&str>, offline: bool) -> Output {
    let b = compile_ok(spec);
    let text = script(only_bundle(&b), "ethtool", "ens3", "check");
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let stub = bin.join("ethtool");
    let listing = dir.path().join("features");
    if let Some(f) = features {
        std::fs::write(&listing, f).unwrap();
    }
    std::fs::write(
        &stub,
        format!(
            "#!/bin/sh\n[ \"$1 $2\" = \"-k ens3\" ] && [ -f {l} ] || {{ echo 'Cannot get device features: No such device' >&2; exit 75; }}\ncat {l}\n",
            l = listing.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let file = dir.path().join("check");
    std::fs::write(&file, text).unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    Command::new("sh")
        .arg(&file)
        .env("PATH", path)
        .env("BELL_ROOT", Path::new("/"))
        .env("BELL_STATE", &state)
        .env("BELL_OFFLINE", if offline { "1" } else { "0" })
        .output()
        .unwrap()
}

fn listing(tx: &str, gro: &str) -> String {
    format!(
        "Features for ens3:\nrx-checksumming: on [fixed]\ntx-checksumming: {tx}\n\ttx-checksum-ipv4: off [fixed]\ngeneric-receive-offload: {gro}\n"
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn in_sync_is_exit_0() {
    let out = check_with(Some(&listing("off", "on")), false);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stdout(&out), "");
    // A value ethtool annotates is still the value.
    let out = check_with(Some(&listing("off [requested on]", "on")), false);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn each_drifted_feature_is_named() {
    let out = check_with(Some(&listing("on", "off")), false);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        stdout(&out),
        "feature generic-receive-offload of ens3 is off, the bundle sets on\n\
         feature tx-checksumming of ens3 is on, the bundle sets off\n"
    );
    let missing = "Features for ens3:\ntx-checksumming: off\n";
    let out = check_with(Some(missing), false);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stdout(&out).contains("ens3 has no feature generic-receive-offload"));
}

#[test]
fn a_feature_of_another_is_read_from_its_indented_line_and_only_a_whole_name_matches() {
    let spec = SPEC.replace(
        "    tx-checksumming \"off\"\n",
        "    tx-checksum-ipv4 \"off\"\n    rx-gro-hw \"off\"\n",
    );
    // `tx-checksum-ipv4` under `tx-checksumming`, indented by a tab; `rx-gro-hw` only as the
    // end of a longer name and as the start of one: neither is that feature.
    let features = "Features for ens3:\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\n\
                    generic-receive-offload: on\nxrx-gro-hw: off\nrx-gro-hw-list: off\n";
    let out = check_spec_with(&spec, Some(features), false);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        stdout(&out),
        "ens3 has no feature rx-gro-hw, the bundle sets it off\n"
    );
    let features = format!("{features}rx-gro-hw: on\n");
    let out = check_spec_with(&spec, Some(&features), false);
    assert_eq!(
        stdout(&out),
        "feature rx-gro-hw of ens3 is on, the bundle sets off\n"
    );
}

#[test]
fn an_unreadable_nic_is_an_error_not_drift() {
    let out = check_with(None, false);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the features of ens3"));
}

#[test]
fn offline_there_is_nothing_to_read() {
    let out = check_with(None, true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

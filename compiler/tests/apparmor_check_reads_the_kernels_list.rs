//! The AppArmor check reads the kernel's list of loaded profiles (`NAME (MODE)` per line) once,
//! with builtins, and says for each profile of the resource's file whether it is loaded in the
//! spec's mode. Run for real against lists written into a tmpfs mounted over
//! /sys/kernel/security inside `unshare --mount`, so the machine's AppArmor is not touched.
use crate::common::*;

const SPEC: &str = r####"fleet "f" target="debian-12"
host "h"
apparmor "pair" mode="complain" {
    profile #"""
        profile a-b /usr/bin/ab {
        }
        profile a /usr/bin/a {
        }
        """#
}
"####;

#[test]
fn each_profile_is_found_on_its_own_line_in_the_spec_mode() {
    if !bell_testkit::namespaces(&["--mount"])
        || !std::path::Path::new("/sys/kernel/security").is_dir()
    {
        return;
    }
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("check.sh"),
        script(b, "apparmor", "pair", "check"),
    )
    .unwrap();
    // Each case: a label and the kernel's list.
    let cases = [
        ("synced", "x (enforce)\na-b (complain)\na (complain)\n"),
        // Without the last newline, and a line that only starts like `a`'s before it.
        (
            "unterminated",
            "a (complain) x\na (complai\na-b (complain)\na (complain)",
        ),
        ("enforced", "a (enforce)\na-b (complain)\n"),
        ("missing", "a-b (complain)\na-bc (complain)\nb (complain)\n"),
        ("empty", ""),
    ];
    let mut driver = String::from(
        "set -eu\nexport BELL_ROOT=/ BELL_OFFLINE=0 BELL_STATE=$PWD\nmount -t tmpfs tmpfs /sys/kernel/security\nmkdir /sys/kernel/security/apparmor\n",
    );
    for (label, list) in cases {
        driver += &format!(
            "printf '%s' '{list}' >/sys/kernel/security/apparmor/profiles\nrc=0; sh check.sh >out 2>&1 || rc=$?\nsed 's/^/{label}: /' out\necho \"{label}_rc=$rc\"\n"
        );
    }
    let text = in_mount_namespace(dir.path(), &driver);
    let said = |label: &str| labelled(&text, label);
    for label in ["synced", "unterminated"] {
        assert_eq!(value_of(&text, &format!("{label}_rc")), "0", "{text}");
        assert!(said(label).is_empty(), "{text}");
    }
    assert_eq!(value_of(&text, "enforced_rc"), "2", "{text}");
    assert_eq!(
        said("enforced"),
        ["profile a is in enforce mode, the bundle loads it in complain mode"]
    );
    assert_eq!(value_of(&text, "missing_rc"), "2", "{text}");
    assert_eq!(said("missing"), ["profile a is not loaded"]);
    assert_eq!(value_of(&text, "empty_rc"), "2", "{text}");
    assert_eq!(
        said("empty"),
        ["profile a-b is not loaded", "profile a is not loaded"]
    );
}

//! An account is made with what the image holds, and what the image lacks is said, not left
//! for the first login to find: a root without `/etc/login.defs` gives `useradd`'s built-in
//! defaults (group 100, no group of the account's own), and a shell that is not an executable
//! file of the image locks the account out. Both are notes of the user resource, on its line of
//! the apply's output and in `bell-run status`, whether it was applied by itself or in its
//! batch; an image that has both says nothing.
use crate::common;
use crate::common::fleet::{bell_run, text};
use crate::common::pulling::image_root;
use crate::common::Fixture;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const DEFS: &str =
    "UID_MIN 1000\nUID_MAX 60000\nGID_MIN 1000\nGID_MAX 60000\nUSERGROUPS_ENAB yes\n";

fn bake(spec: &str, prepare: impl Fn(&Path)) -> (tempfile::TempDir, String, String) {
    let fx = Fixture::spec(spec);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let root = image_root();
    prepare(root.path());
    let out = Command::new(bell_run())
        .arg("apply")
        .arg(fx.path().join("out/hosts/a"))
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    let applied = text(&out);
    assert!(out.status.success(), "{applied}");
    let out = Command::new(bell_run())
        .args(["status", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    let status = text(&out);
    assert!(out.status.success(), "{status}");
    (root, applied, status)
}

/// The line of `key` in an apply's or status's output.
fn line_of<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == key))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{output}"))
}

/// Gives the image a merged /usr (`/bin` a link to `usr/bin`) with an executable bash in it,
/// and Debian's login.defs.
fn debian_like(root: &Path) {
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    let bash = root.join("usr/bin/bash");
    std::fs::write(&bash, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&bash, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.join("etc/login.defs"), DEFS).unwrap();
}

#[test]
fn an_account_made_without_login_defs_or_with_a_missing_shell_says_so() {
    // useradd (or the offline writer) writes the image's shadow file as root.
    if !common::in_memory::is_root() {
        return;
    }
    let (root, applied, status) = bake(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nuser \"ops\" shell=\"/bin/zsh\"\n",
        |_| {},
    );
    let line = line_of(&applied, "user:ops");
    assert!(line.contains(" ok: "), "{applied}");
    assert!(
        line.contains("no /etc/login.defs in the image: ops got useradd's defaults (group 100, no group of its own)"),
        "{applied}"
    );
    assert!(
        line.contains(
            "shell /bin/zsh of ops is not an executable file of the image (install it first)"
        ),
        "{applied}"
    );
    // The account is as useradd's defaults make it: group 100.
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let ops = passwd.lines().find(|l| l.starts_with("ops:")).unwrap();
    assert_eq!(ops.split(':').nth(3), Some("100"), "{ops}");
    // `status` keeps what the apply said.
    assert!(
        line_of(&status, "user:ops").contains("not an executable file of the image"),
        "{status}"
    );
}

#[test]
fn accounts_applied_in_their_batch_each_say_what_the_image_lacks() {
    if !common::in_memory::is_root() {
        return;
    }
    let (_root, applied, _) = bake(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nuser \"ops\" shell=\"/bin/zsh\"\nuser \"dev\" shell=\"/bin/bash\"\n",
        |root| {
            debian_like(root);
            std::fs::remove_file(root.join("etc/login.defs")).unwrap();
        },
    );
    let ops = line_of(&applied, "user:ops");
    assert!(
        ops.contains(
            "shell /bin/zsh of ops is not an executable file of the image (install it first)"
        ),
        "{applied}"
    );
    assert!(ops.contains("no /etc/login.defs in the image"), "{applied}");
    // bash is there, through the image's own /bin link.
    let dev = line_of(&applied, "user:dev");
    assert!(!dev.contains("shell"), "{applied}");
    assert!(dev.contains("no /etc/login.defs in the image"), "{applied}");
}

#[test]
fn an_image_with_login_defs_and_the_shell_says_nothing() {
    if !common::in_memory::is_root() {
        return;
    }
    let (root, applied, _) = bake(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nuser \"ops\" shell=\"/bin/bash\"\nuser \"dev\"\n",
        debian_like,
    );
    for key in ["user:ops", "user:dev"] {
        let line = line_of(&applied, key);
        assert!(line.trim_end().ends_with(" ok"), "{applied}");
    }
    // Each has a group of its own, as the image's login.defs says.
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let ops = passwd.lines().find(|l| l.starts_with("ops:")).unwrap();
    assert_ne!(ops.split(':').nth(3), Some("100"), "{ops}");
}

/// A shell that is a link out of the image is not the image's: said, not followed.
#[test]
fn a_shell_linked_out_of_the_image_is_not_taken_for_the_image_s() {
    if !common::in_memory::is_root() {
        return;
    }
    let (_root, applied, _) = bake(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\"\nuser \"ops\" shell=\"/opt/sh\"\n",
        |root| {
            std::fs::write(root.join("etc/login.defs"), DEFS).unwrap();
            // `opt` climbs out of the root to the build machine's /bin, where an sh is.
            std::os::unix::fs::symlink("../../../../../../../../bin", root.join("opt")).unwrap();
        },
    );
    let line = line_of(&applied, "user:ops");
    assert!(line.contains(" ok: "), "{applied}");
    assert!(
        line.contains(
            "shell /opt/sh of ops is not an executable file of the image (install it first)"
        ),
        "{applied}"
    );
}

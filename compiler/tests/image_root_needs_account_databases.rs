//! An image root without the account databases its users are added to is refused before
//! anything changes, naming each missing file, instead of failing halfway with `password hash
//! of ops was not set`. A bundle without accounts still applies into a bare root.

use crate::common::fleet::{apply_into, bell_run, text};
use crate::common::pulling::{fingerprint, image_root};
use crate::common::Fixture;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";

fn build(fx: &Fixture, with_user: bool) -> std::path::PathBuf {
    let mut spec = String::from(
        "fleet \"f\" target=\"debian-12\" secrets=\"plaintext\"\nhost \"h\"\nfile \"/etc/motd\" {\n    content \"hi\\n\"\n}\n",
    );
    if with_user {
        spec.push_str(&format!("user \"ops\" {{\n    password \"{HASH}\"\n}}\n"));
    }
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    fx.path().join("out/hosts/h")
}

#[test]
fn a_root_without_account_databases_is_refused_naming_what_is_missing() {
    let bin = bell_run();
    let fx = Fixture::new();
    let bundle = build(&fx, true);

    let bare = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(bare.path().join("etc")).unwrap();
    std::fs::write(
        bare.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\n",
    )
    .unwrap();
    let before = fingerprint(bare.path());
    let out = apply_into(&bin, &bundle, bare.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for missing in ["etc/group", "etc/shadow"] {
        assert!(
            stderr.contains(&format!("{missing}: missing")),
            "{missing}:\n{stderr}"
        );
    }
    assert!(!stderr.contains("etc/passwd: missing"), "{stderr}");
    assert!(
        stderr.contains("an image root needs the account databases its users are added to"),
        "{stderr}"
    );
    assert!(
        stderr.contains("user:ops"),
        "names who needs them: {stderr}"
    );
    assert_eq!(
        fingerprint(bare.path()),
        before,
        "a refused apply changed the root"
    );

    // With them, the same bundle applies.
    let root = image_root();
    let out = apply_into(&bin, &bundle, root.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_bare_root_is_refused_for_owned_files_and_takes_a_bundle_that_has_none() {
    let bin = bell_run();
    let fx = Fixture::new();
    let bundle = build(&fx, false);
    let bare = tempfile::tempdir().unwrap();
    let before = fingerprint(bare.path());
    let out = apply_into(&bin, &bundle, bare.path());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for missing in ["etc/passwd", "etc/group"] {
        assert!(
            stderr.contains(&format!("{missing}: missing (needed by file:/etc/motd)")),
            "{stderr}"
        );
    }
    assert!(
        !stderr.contains("etc/shadow"),
        "no account, no shadow: {stderr}"
    );
    assert_eq!(fingerprint(bare.path()), before);

    // A bundle of kernel settings only needs no account database.
    std::fs::write(
        fx.path().join("bell.kdl"),
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nsysctl {\n    vm.swappiness 10\n}\n",
    )
    .unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = apply_into(&bin, &fx.path().join("out2/hosts/h"), bare.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// An image whose `/home` is an absolute link to a disk the image does not have: `useradd`
/// fails saying only `cannot create directory /home`; bell-run's line names the link, read as
/// the image will read it (its target under the root), not only the log.
#[test]
fn a_failure_on_a_link_that_leads_nowhere_in_the_root_names_the_link() {
    if !bell_testkit::root() || !bell_testkit::tool("useradd") {
        return;
    }
    let bin = bell_run();
    let fx = Fixture::new();
    let bundle = build(&fx, true);
    let root = image_root();
    std::os::unix::fs::symlink("/bell-test-no-such-disk/home", root.path().join("home")).unwrap();
    let out = apply_into(&bin, &bundle, root.path());
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("user:ops") && l.contains("failed"))
        .unwrap_or_else(|| panic!("no failed line for user:ops:\n{}", text(&out)));
    assert!(
        line.contains(
            "/home is a link to /bell-test-no-such-disk/home, which leads nowhere inside the root"
        ),
        "{line}"
    );

    // A link that leads somewhere inside the root is no one's fault: the same bundle applies.
    let root = image_root();
    std::fs::create_dir_all(root.path().join("data/home")).unwrap();
    std::os::unix::fs::symlink("/data/home", root.path().join("home")).unwrap();
    let out = apply_into(&bin, &bundle, root.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(root.path().join("data/home/ops").is_dir());
}

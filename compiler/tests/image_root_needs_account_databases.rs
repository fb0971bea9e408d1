//! An image root without the account databases its users are added to is refused before
//! anything changes, naming each missing file, instead of failing halfway with `password hash
//! of ops was not set`. A bundle without accounts still applies into a bare root.

mod common;
use common::fleet::{apply_into, bell_run, text};
use common::pulling::{fingerprint, image_root};
use common::Fixture;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";

fn build(fx: &Fixture, with_user: bool) -> std::path::PathBuf {
    let mut spec = String::from(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nfile \"/etc/motd\" {\n    content \"hi\\n\"\n}\n",
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

//! The file apply reads back what bell-run put in place: content, owner, group and mode. It is
//! run for real over a temp root holding the file as bell-run would switch it, then over one
//! where the host did not take the mode or the content.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn apply_accepts_the_file_as_written_and_fails_on_drift() {
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
host "e" address="10.0.0.9" role="etcd"
override "etcd" {
    match role="etcd"
    service "etcd" port=2379
}
file "/etc/my app/peers.conf" mode="0640" owner="root" group="root" {
    content "peers={{ services.etcd | map(attribute='address') | join(',') }} on {{ host.name }} in {{ fleet.name }}\n"
}
"#,
    );
    let b = c
        .bundles
        .values()
        .find(|b| {
            b.manifest.files.iter().any(|f| {
                b.contents[&format!("root{}", f.path)].starts_with(b"peers=10.0.0.9 on h ")
            })
        })
        .expect("bundle of h");
    let path = "/etc/my app/peers.conf";
    assert_eq!(file(b, path), "peers=10.0.0.9 on h in t\n");
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(root.path().join("etc/my app")).expect("mkdir");
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\n",
    )
    .expect("passwd");
    std::fs::write(root.path().join("etc/group"), "root:x:0:\n").expect("group");
    let on_host = root.path().join("etc/my app/peers.conf");
    std::fs::write(&on_host, file(b, path)).expect("write");
    std::fs::set_permissions(&on_host, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let state = tempfile::tempdir().expect("temp dir");
    let apply = script(b, "file", path, "apply");
    ok(&run(&apply, root.path(), state.path(), true));
    ok(&run(&apply, root.path(), state.path(), true));
    assert_eq!(std::fs::read_dir(state.path()).expect("state").count(), 0);

    std::fs::set_permissions(&on_host, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = run(&apply, root.path(), state.path(), true);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "bell: file:/etc/my app/peers.conf: /etc/my app/peers.conf has mode 644, not 0640\n"
    );
    std::fs::write(&on_host, "edited\n").expect("write");
    let out = run(&apply, root.path(), state.path(), true);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not hold the content bell wrote"));
    assert!(b
        .manifest
        .resources
        .iter()
        .any(|r| r.kind == "file" && r.revert.is_none()));
}

/// A secret file's apply names no digest of it (a served script that did would confirm a guess
/// of the secret to anyone): it compares the landed file with bell-run's own copy in the bundle
/// it runs from, and fails when they differ or the copy is not there.
#[test]
fn a_secret_files_apply_names_no_digest_and_compares_with_bell_runs_copy() {
    // A declared secret (a password hash) makes the unit that holds it secret too.
    const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
    let content = "token-Qz81-secret\n";
    let c = compile_ok(&format!(
        r#"
fleet "t" target="debian-12" secrets="plaintext"
host "h" address="10.0.0.1"
file "/etc/app/token" mode="0600" {{
    content "{}"
}}
user "app" {{
    password "{HASH}"
}}
unit "app.service" {{
    content "[Service]\nEnvironment=HASH={HASH}\nExecStart=/bin/true\n"
}}
"#,
        content.escape_default(),
    ));
    let b = c.bundles.values().next().expect("one bundle");
    let path = "/etc/app/token";
    let apply = script(b, "file", path, "apply");
    let unit_apply = script(b, "unit", "app.service", "apply");
    let unit_text = file(b, "/etc/systemd/system/app.service");
    let file_digest = bell_bundle::sha256_hex(content.as_bytes());
    let unit_digest = bell_bundle::sha256_hex(unit_text.as_bytes());
    for text in [&apply, &unit_apply] {
        assert!(!text.contains(&file_digest), "{text}");
        assert!(!text.contains(&unit_digest), "{text}");
    }

    let root = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(root.path().join("etc/app")).expect("mkdir");
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\n",
    )
    .expect("passwd");
    std::fs::write(root.path().join("etc/group"), "root:x:0:\n").expect("group");
    let on_host = root.path().join("etc/app/token");
    std::fs::write(&on_host, content).expect("write");
    std::fs::set_permissions(&on_host, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let state = tempfile::tempdir().expect("temp dir");
    // bell-run's copy of the bundle, the scripts' working directory.
    let bundle = tempfile::tempdir().expect("temp dir");
    let copy = bundle.path().join("root/etc/app/token");
    std::fs::create_dir_all(copy.parent().unwrap()).expect("mkdir");
    std::fs::write(&copy, content).expect("write");
    ok(&run_in(
        &apply,
        root.path(),
        state.path(),
        true,
        bundle.path(),
    ));

    std::fs::write(&on_host, "token-guess\n").expect("write");
    let out = run_in(&apply, root.path(), state.path(), true, bundle.path());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("does not hold the content bell wrote"),
        "{out:?}"
    );
    std::fs::write(&on_host, content).expect("write");
    std::fs::remove_file(&copy).expect("rm");
    let out = run_in(&apply, root.path(), state.path(), true, bundle.path());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("bell-run's copy of /etc/app/token is missing"),
        "{out:?}"
    );
}

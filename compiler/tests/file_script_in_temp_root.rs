//! The file apply reads back what bell-run put in place: content, owner, group and mode. It is
//! run for real over a temp root holding the file as bell-run would switch it, then over one
//! where the host did not take the mode or the content.

mod common;
use common::*;
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

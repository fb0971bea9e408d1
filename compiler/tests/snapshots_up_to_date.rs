//! `snapshots/` holds the builds of `examples/`; this fails when a change to the compiler or
//! the stdlib changes what the examples build into, until the snapshots are rebuilt and the
//! difference is reviewed in the pull request.
mod common;
use common::*;

fn check(example: &str) {
    let root = repo_root();
    let spec = format!("examples/{example}.kdl");
    let out = format!("snapshots/{example}");
    let run = bellc_in(&root, &["build", "--check", &spec, "-o", &out]);
    assert_eq!(
        run.code, 0,
        "snapshots/{example} is stale; rebuild with `cargo run -p bellc -- build {spec} -o {out}` (delete it first) and review the diff:\n{}",
        run.stderr
    );
    // --check compares what the build writes; it must also not leave extra bundles behind.
    let release: bell_bundle::Release = serde_json::from_str(
        &std::fs::read_to_string(root.join(&out).join("release.json")).unwrap(),
    )
    .unwrap();
    let used: std::collections::BTreeSet<String> =
        release.hosts.values().map(|h| h.bundle.clone()).collect();
    let on_disk: std::collections::BTreeSet<String> =
        std::fs::read_dir(root.join(&out).join("bundles"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    assert_eq!(
        on_disk, used,
        "snapshots/{example}/bundles holds bundles no host uses"
    );
}

#[test]
fn divingbell_snapshot_is_up_to_date() {
    check("divingbell");
}

#[test]
fn three_role_snapshot_is_up_to_date() {
    check("three-role");
}

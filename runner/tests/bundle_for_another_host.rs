//! `bell-run apply OUT/hosts/web-03` to a root that says it is `web-99` is a wrong path or a
//! wrong `--root`: it is refused before anything changes, unless `--host` says the root is to
//! become `web-03`.
use crate::common::*;

#[test]
fn a_bundle_through_hosts_name_is_refused_on_another_host() {
    let w = World::new();
    let bundle = w.build(&BundleSpec::new().file("/etc/motd", "web\n", "0644"));
    let hosts = w.tmp.path().join("out/hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    let link = hosts.join("web-03");
    std::os::unix::fs::symlink(&bundle, &link).unwrap();
    std::fs::write(w.root().join("etc/hostname"), "web-99\n").unwrap();
    let before = snapshot(&w.root(), &[], true, true);

    let out = w.apply(&link, &[]);
    expect_code(&out, 1);
    let err = stderr(&out);
    assert!(
        err.contains("is the bundle of host `web-03`, but this root is `web-99`"),
        "{err}"
    );
    assert!(err.contains("pass `--host web-03`"), "{err}");
    assert_eq!(
        snapshot(&w.root(), &[], true, true),
        before,
        "a refused apply changed the root"
    );
    // A dry run is refused the same way.
    expect_code(&w.apply(&link, &["--dry-run"]), 1);
    // `--host` names what the root is to be; the bundle's own directory name is not checked.
    expect_code(&w.apply(&link, &["--host", "web-99"]), 1);
    expect_code(&w.apply(&link, &["--host", "web-03"]), 0);
    expect_code(&w.apply(&bundle, &[]), 0);
}

#[test]
fn json_refusals_are_one_answer_on_stdout() {
    let w = World::new();
    let out = w.apply(&w.tmp.path().join("no-such-bundle"), &["--json"]);
    expect_code(&out, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["result"], "refused");
    assert!(json["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(stderr(&out), "", "the error went to both streams");
}

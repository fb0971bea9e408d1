//! `OUT/hosts/<name>` follows the release: a rebuild links new hosts, repairs a link or an
//! entry changed by hand, removes the links of hosts that left, and leaves alone what is not a
//! link (only links are bellc's to remove).
use crate::common::*;
use std::fs;
use std::path::Path;

fn spec(hosts: &[&str]) -> String {
    let mut text = String::from("fleet \"f\" target=\"debian-12\"\nsysctl { vm.swappiness 10 }\n");
    for host in hosts {
        text.push_str(&format!("host \"{host}\"\n"));
    }
    text
}

fn link(out: &Path, host: &str) -> Option<String> {
    fs::read_link(out.join("hosts").join(host))
        .ok()
        .map(|t| t.to_string_lossy().to_string())
}

#[test]
fn host_links_follow_the_release_and_only_links_are_removed() {
    let fx = Fixture::spec(&spec(&["a", "b", "c"]));
    let dir = fx.path();
    let out = dir.join("out");
    let cold = bellc_in(dir, &["build", "--timings", "bell.kdl", "-o", "out"]).timings();
    assert_eq!(cold["links_written"], 3);
    let target = link(&out, "a").expect("a is linked");
    assert!(target.starts_with("../bundles/"), "{target}");
    assert_eq!(link(&out, "b").as_deref(), Some(target.as_str()));
    let first =
        serde_json::from_slice::<serde_json::Value>(&fs::read(out.join("release.json")).unwrap())
            .unwrap()["version"]
            .as_str()
            .unwrap()
            .to_string();

    // By hand: a's link is a directory now, b points elsewhere, and a file that is no host's.
    fs::remove_file(out.join("hosts/a")).unwrap();
    fs::create_dir(out.join("hosts/a")).unwrap();
    fs::write(out.join("hosts/a/x"), "x").unwrap();
    fs::remove_file(out.join("hosts/b")).unwrap();
    std::os::unix::fs::symlink("../bundles/elsewhere", out.join("hosts/b")).unwrap();
    fs::write(out.join("hosts/README"), "not a host").unwrap();
    // c leaves, d comes.
    fs::write(dir.join("bell.kdl"), spec(&["a", "b", "d"])).unwrap();

    let again = bellc_in(dir, &["build", "--timings", "bell.kdl", "-o", "out"]).timings();
    assert_eq!(again["links_written"], 3, "a, b repaired and d linked");
    assert_eq!(again["links_removed"], 1, "c's link went");
    assert_eq!(again["release_written"], true);
    for host in ["a", "b", "d"] {
        assert_eq!(link(&out, host).as_deref(), Some(target.as_str()), "{host}");
    }
    assert!(!out.join("hosts/c").exists() && link(&out, "c").is_none());
    assert_eq!(
        fs::read_to_string(out.join("hosts/README")).unwrap(),
        "not a host"
    );
    // The release it replaced is kept by its version, byte for byte as it was.
    let kept = out.join("releases").join(format!("{first}.json"));
    assert!(kept.is_file(), "{} kept", kept.display());
    assert_ne!(
        fs::read(&kept).unwrap(),
        fs::read(out.join("release.json")).unwrap()
    );

    // Nothing changed: no link is written again, release.json stays.
    let same = bellc_in(
        dir,
        &["build", "--timings", "--force", "bell.kdl", "-o", "out"],
    )
    .timings();
    assert_eq!(same["links_written"], 0);
    assert_eq!(same["links_removed"], 0);
    assert_eq!(same["release_written"], false);
}

//! `bell-run pull`: hosts fetch their own bundle from a served build output (a directory here;
//! nginx in `pull_over_http.rs`), apply only what a trusted key signed, never go back to an
//! older release, and refuse an expired one, a tampered or truncated file, an unsigned release
//! or another key's, each with the root exactly as it was. Real bellc, real bell-run.

mod common;
use common::fleet::{bell_run, run_bin, text};
use common::Fixture;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const HOSTS: [&str; 4] = ["h1", "h2", "h3", "h4"];

/// A fleet of four hosts; h1 has a file of its own, so that bundles differ between hosts.
pub fn spec(motd: &str) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for host in HOSTS {
        spec.push_str(&format!("host \"{host}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n\
         override \"one\" {{\n    match host=\"h1\"\n    file \"/etc/role\" {{\n        content \"first\\n\"\n    }}\n}}\n"
    ));
    spec
}

/// Builds `spec(motd)` into `out`, signed with `key` (and `extra` arguments).
pub fn build(fx: &Fixture, motd: &str, out: &str, key: &str, extra: &[&str]) {
    std::fs::write(fx.path().join("bell.kdl"), spec(motd)).unwrap();
    let mut args = vec!["build", "bell.kdl", "-o", out, "--sign-key", key];
    args.extend_from_slice(extra);
    let run = fx.bellc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// `cp -a FROM/. TO/`: build outputs copied one over another, as a mirror is filled.
pub fn copy_over(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

pub fn image_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    for db in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(db), root.path().join("etc").join(db)).unwrap();
    }
    root
}

/// Everything under a root: type, mode, owner, content or link target, modification time.
pub fn fingerprint(root: &Path) -> BTreeMap<PathBuf, String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .map(|e| {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(e.path()).unwrap())
            } else if meta.is_file() {
                bell_bundle::sha256_hex(&std::fs::read(e.path()).unwrap())
            } else {
                "dir".to_string()
            };
            let stamp = if meta.is_dir() {
                0
            } else {
                meta.mtime_nsec() + meta.mtime()
            };
            let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
            (
                rel,
                format!(
                    "{what} {:o} {} {stamp}",
                    meta.permissions().mode(),
                    meta.uid()
                ),
            )
        })
        .collect()
}

pub fn pull(bin: &Path, source: &str, root: &Path, host: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "pull",
        "--source",
        source,
        "--root",
        root.to_str().unwrap(),
        "--host",
        host,
    ];
    args.extend_from_slice(extra);
    run_bin(bin, &args, &[])
}

/// A pull that must be refused with `reason` and leave the root exactly as it was.
pub fn refused(bin: &Path, source: &str, root: &Path, host: &str, extra: &[&str], reason: &str) {
    let before = fingerprint(root);
    let out = pull(bin, source, root, host, extra);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(reason),
        "wanted `{reason}`:\n{}",
        text(&out)
    );
    assert_eq!(fingerprint(root), before, "a refused pull changed the root");
}

pub fn motd(root: &Path) -> String {
    std::fs::read_to_string(root.join("etc/motd")).unwrap_or_default()
}

pub fn release_of(out: &Path) -> bell_bundle::Release {
    serde_json::from_str(&std::fs::read_to_string(out.join("release.json")).unwrap()).unwrap()
}

/// The host path inside a served bundle whose content is `motd`.
fn served_motd(served: &Path, host: &str) -> PathBuf {
    let bundle = &release_of(served).hosts[host].bundle;
    served.join("bundles").join(bundle).join("root/etc/motd")
}

#[test]
fn hosts_pull_signed_releases_from_a_directory_and_refuse_what_they_must() {
    let bin = bell_run();
    let fx = Fixture::new();
    for key in ["ci", "other"] {
        assert_eq!(fx.bellc(&["keygen", key]).code, 0);
    }
    build(&fx, "release 1", "out1", "ci.key", &[]);
    build(&fx, "release 2", "out2", "ci.key", &[]);
    let dir = |name: &str| fx.path().join(name);
    let trust = dir("ci.pub");
    let trust = trust.to_str().unwrap();
    let served = dir("served");
    copy_over(&dir("out1"), &served);
    let source = served.to_str().unwrap();

    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    for (host, root) in HOSTS.iter().zip(&roots) {
        let out = pull(&bin, source, root.path(), host, &["--trust", trust]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("verified: key"), "{stdout}");
        assert_eq!(motd(root.path()), "release 1\n");
        assert_eq!(root.path().join("etc/role").exists(), *host == "h1");
    }
    // Pulling again is a re-apply of what is there: nothing fetched, nothing changed.
    let out = pull(&bin, source, roots[1].path(), "h2", &["--trust", trust]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is applied already"));

    // Release 2 is copied over release 1: the served directory holds both.
    copy_over(&dir("out2"), &served);
    let first = release_of(&dir("out1"));
    assert!(served
        .join(format!("releases/{}.json.minisig", first.version))
        .is_file());

    // Refusals while the hosts run release 1. A file of h2's new bundle changed on the server:
    let tampered = dir("tampered");
    copy_over(&served, &tampered);
    std::fs::write(served_motd(&tampered, "h2"), "release 2, and a backdoor\n").unwrap();
    refused(
        &bin,
        tampered.to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "sha256",
    );
    // ... cut short (truncated):
    let truncated = dir("truncated");
    copy_over(&served, &truncated);
    std::fs::write(served_motd(&truncated, "h2"), "rel").unwrap();
    refused(
        &bin,
        truncated.to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "sha256",
    );
    // ... signed by a key this host does not trust:
    let foreign = dir("foreign");
    copy_over(&dir("out2"), &foreign);
    assert_eq!(
        fx.bellc(&["publish", "foreign", "--sign-key", "other.key"])
            .code,
        0
    );
    refused(
        &bin,
        foreign.to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "does not trust",
    );
    // ... not signed at all:
    let unsigned = dir("unsigned");
    copy_over(&dir("out2"), &unsigned);
    std::fs::remove_file(unsigned.join("release.json.minisig")).unwrap();
    refused(
        &bin,
        unsigned.to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "is not signed",
    );
    // ... changed after signing (h2 given h1's bundle):
    let forged = dir("forged");
    copy_over(&dir("out2"), &forged);
    let mut release = release_of(&forged);
    let h1 = release.hosts["h1"].clone();
    release.hosts.insert("h2".into(), h1);
    std::fs::write(forged.join("release.json"), release.to_json()).unwrap();
    refused(
        &bin,
        forged.to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "changed after signing",
    );
    // The trust file in the root is the default: an unsigned release is refused without `--trust`.
    std::fs::create_dir_all(roots[3].path().join("etc/bell")).unwrap();
    std::fs::copy(
        fx.path().join("ci.pub"),
        roots[3].path().join("etc/bell/trusted.pub"),
    )
    .unwrap();
    refused(
        &bin,
        unsigned.to_str().unwrap(),
        roots[3].path(),
        "h4",
        &[],
        "is not signed",
    );

    // After the refusals, every host moves to release 2 from the served directory, taking the
    // files that did not change from its applied generation.
    for (host, root) in HOSTS.iter().zip(&roots) {
        let extra: &[&str] = if *host == "h4" {
            &[]
        } else {
            &["--trust", trust]
        };
        let out = pull(&bin, source, root.path(), host, extra);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(motd(root.path()), "release 2\n");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("taken from the applied generation"),
            "{stdout}"
        );
        assert!(
            !root.path().join("var/lib/bell/incoming").exists(),
            "the staging directory is gone after the apply"
        );
    }

    // Release 1, validly signed, served again: a rollback, refused.
    refused(
        &bin,
        dir("out1").to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "rollback",
    );

    // An expired release: a newer build that was valid for one second.
    build(&fx, "release 3", "out3", "ci.key", &["--expires", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    refused(
        &bin,
        dir("out3").to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "expired",
    );

    // A host that trusts no key applies unsigned releases and says so.
    let loose = image_root();
    let out = pull(&bin, unsigned.to_str().unwrap(), loose.path(), "h3", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unverified"));
    // A host the release does not name is refused.
    refused(
        &bin,
        source,
        loose.path(),
        "h9",
        &[],
        "names no bundle for host `h9`",
    );
}

//! `bell-run pull`: hosts fetch their own bundle from a served build output (a directory here;
//! nginx in `pull_over_http.rs`), apply only what a trusted key signed, never go back to an
//! older release, and refuse an expired one, a tampered or truncated file, an unsigned release
//! or another key's, each with the root exactly as it was. Real bellc, real bell-run.

use crate::common::fleet::{bell_run, text};
use crate::common::pulling::*;

#[test]
fn hosts_pull_signed_releases_from_a_directory_and_refuse_what_they_must() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let (fx, served) = (&setup.fx, setup.served.clone());
    let dir = |name: &str| setup.dir(name);
    let trust = setup.trust.as_str();
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

    let h2_refuses = |mirror: &std::path::Path, reason: &str| {
        let mirror = mirror.to_str().unwrap();
        refused(
            &bin,
            mirror,
            roots[1].path(),
            "h2",
            &["--trust", trust],
            reason,
        )
    };
    // Refusals while the hosts run release 1. A file of h2's new bundle changed on the server:
    let tampered = dir("tampered");
    copy_over(&served, &tampered);
    std::fs::write(served_motd(&tampered, "h2"), "release 2, and a backdoor\n").unwrap();
    h2_refuses(&tampered, "more than the 10 bytes expected");
    std::fs::write(served_motd(&tampered, "h2"), "release X\n").unwrap();
    h2_refuses(&tampered, "sha256");
    // ... cut short (truncated):
    let truncated = dir("truncated");
    copy_over(&served, &truncated);
    std::fs::write(served_motd(&truncated, "h2"), "rel").unwrap();
    h2_refuses(&truncated, "sha256");
    // ... signed by a key this host does not trust:
    let foreign = dir("foreign");
    copy_over(&dir("out2"), &foreign);
    assert_eq!(
        fx.bellc(&["publish", "foreign", "--sign-key", "other.key"])
            .code,
        0
    );
    h2_refuses(&foreign, "does not trust");
    // ... not signed at all:
    let unsigned = dir("unsigned");
    copy_over(&dir("out2"), &unsigned);
    std::fs::remove_file(unsigned.join("release.json.minisig")).unwrap();
    h2_refuses(&unsigned, "is not signed");
    // ... changed after signing (h2 given h1's bundle):
    let forged = dir("forged");
    copy_over(&dir("out2"), &forged);
    let mut release = release_of(&forged);
    let h1 = release.hosts["h1"].clone();
    release.hosts.insert("h2".into(), h1);
    std::fs::write(forged.join("release.json"), release.to_json()).unwrap();
    h2_refuses(&forged, "changed after signing");
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

    // A release of another fleet, signed by the same key (fleets share CI's key, or one was
    // renamed): refused by a host of fleet `f`, whether it names its fleet or knows it from
    // what it accepted; the root as it was.
    let staging = spec("release staging").replace("fleet \"f\"", "fleet \"staging\"");
    std::fs::write(fx.path().join("bell.kdl"), staging).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "staging", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let staging = dir("staging");
    let staging = staging.to_str().unwrap();
    h2_refuses(
        &dir("staging"),
        "is of fleet `staging`, but this host is of fleet `f`",
    );
    refused(
        &bin,
        staging,
        roots[1].path(),
        "h2",
        &["--trust", trust, "--fleet", "f"],
        "(`--fleet`)",
    );
    // Moved to `staging` on purpose, the host keeps what it accepted of `f`: release 1 of `f`,
    // replayed, is still a rollback.
    let out = pull(
        &bin,
        staging,
        roots[1].path(),
        "h2",
        &["--trust", trust, "--fleet", "staging"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(roots[1].path()), "release staging\n");
    refused(
        &bin,
        dir("out1").to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust, "--fleet", "f"],
        "rollback",
    );
    let out = pull(
        &bin,
        source,
        roots[1].path(),
        "h2",
        &["--trust", trust, "--fleet", "f"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(roots[1].path()), "release 2\n");

    // An expired release: a newer build that was valid for one second.
    build(fx, "release 3", "out3", "ci.key", &["--expires", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    refused(
        &bin,
        dir("out3").to_str().unwrap(),
        roots[1].path(),
        "h2",
        &["--trust", trust],
        "expired",
    );

    // A trust file (or its directory) that someone else could have written is no trust at
    // all: refused, naming it, whether it is the root's or given with `--trust`.
    {
        use std::os::unix::fs::PermissionsExt;
        let set_mode = |path: &std::path::Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let trust_dir = roots[3].path().join("etc/bell");
        let trust_file = trust_dir.join("trusted.pub");
        let h4_refuses = |reason: &str| refused(&bin, source, roots[3].path(), "h4", &[], reason);
        // What is loosened, to which mode, the reason given; then its own mode again.
        for (path, loose, reason, own) in [
            (
                &trust_file,
                0o666,
                "is writable by everyone (mode 0666)",
                0o644,
            ),
            (&trust_file, 0o664, "is writable by its group", 0o644),
            (&trust_dir, 0o777, "the directory of the trust file", 0o755),
        ] {
            set_mode(path, loose);
            h4_refuses(reason);
            set_mode(path, own);
        }
        // Giving a file away takes root.
        if bell_testkit::root() {
            std::os::unix::fs::chown(&trust_file, Some(65534), None).unwrap();
            h4_refuses("belongs to uid 65534, not to root");
            std::os::unix::fs::chown(&trust_file, Some(0), None).unwrap();
        }
        let given = trust_file.to_str().unwrap();
        set_mode(&trust_file, 0o646);
        refused(
            &bin,
            source,
            roots[1].path(),
            "h2",
            &["--trust", given],
            "writable by everyone",
        );
        set_mode(&trust_file, 0o644);
    }

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

//! `bell-run remove`: the root as bell found it, and a failed revert kept to run again.

use super::*;

/// `remove` takes bell off a root: every resource reverted, a file bell took over given its
/// original back, a file bell created removed, the timer's units and bell's own directory gone,
/// the accounts bell created named. Without `--yes` or with `--dry-run` nothing changes; a
/// failing revert keeps bell's state so that the removal can run again.
#[test]
fn remove_leaves_the_root_as_bell_found_it() {
    let w = World::new();
    let root = w.root();
    let r = root.to_str().unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/motd"), "the image's own motd\n").unwrap();
    let spec = BundleSpec::new()
        .file("/etc/motd", "managed by bell\n", "0644")
        .file("/etc/bell-only.conf", "x\n", "0644")
        .resource(
            ResourceSpec::new("conf", "main")
                .files(&["/etc/motd", "/etc/bell-only.conf"])
                .apply(&w.event("apply main"))
                .revert(&w.event("revert main")),
        )
        .resource(
            ResourceSpec::new("svc", "later")
                .after(&["conf:main"])
                .apply(&w.event("apply later"))
                .revert(&w.event("revert later")),
        );
    let bundle = w.build(&spec);
    expect_code(&w.apply(&bundle, &[]), 0);
    expect_code(&w.run(&["install-timer", "--root", r]), 0);
    assert!(root.join("etc/systemd/system/bell-run.timer").is_file());
    std::os::unix::fs::symlink(
        "/etc/systemd/system/bell-run.timer",
        root.join("etc/systemd/system/timers.target.wants/bell-run.timer")
            .tap_mkdir(),
    )
    .unwrap();
    // What a reverted `user` leaves in the ledger.
    let ledger = root.join("var/lib/bell/accounts/expired");
    std::fs::create_dir_all(&ledger).unwrap();
    std::fs::write(ledger.join("alice"), "1001\n").unwrap();
    w.clear_events();

    let snapshot = || {
        let mut paths: Vec<String> = walk(&root);
        paths.sort();
        paths
    };
    let before = snapshot();
    let out = w.run(&["remove", "--root", r]);
    expect_code(&out, 64);
    assert!(stderr(&out).contains("say `--yes`"), "{}", stderr(&out));
    let out = w.run(&["remove", "--dry-run", "--root", r]);
    expect_code(&out, 0);
    let plan = stdout(&out);
    for line in [
        "- svc:later",
        "- conf:main",
        "file /etc/motd: restore the file from before bell",
        "file /etc/bell-only.conf: remove",
    ] {
        assert!(
            plan.contains(line),
            "{line}:
{plan}"
        );
    }
    assert_eq!(snapshot(), before, "a dry run changed the root");
    assert!(w.events().is_empty());

    let out = w.run(&["remove", "--yes", "--root", r]);
    expect_code(&out, 0);
    let said = stdout(&out);
    assert_eq!(w.events(), vec!["revert later", "revert main"], "{said}");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/motd")).unwrap(),
        "the image's own motd\n"
    );
    assert!(!root.join("etc/bell-only.conf").exists());
    assert!(!root.join("var/lib/bell").exists(), "{said}");
    for unit in [
        "bell-run.timer",
        "bell-run.service",
        "timers.target.wants/bell-run.timer",
    ] {
        let path = root.join("etc/systemd/system").join(unit);
        assert!(
            std::fs::symlink_metadata(&path).is_err(),
            "{unit} is still there"
        );
        assert!(
            said.contains(&format!("removed /etc/systemd/system/{unit}")),
            "{said}"
        );
    }
    assert!(
        said.contains("accounts bell created stay, expired and locked"),
        "{said}"
    );
    assert!(said.contains(": alice;"), "{said}");

    // Nothing is left to remove.
    let out = w.run(&["remove", "--yes", "--root", r]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("nothing to remove"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_removal_whose_revert_fails_keeps_bells_state_to_run_again() {
    let w = World::new();
    let root = w.root();
    let r = root.to_str().unwrap();
    let fails = root.join("revert-fails");
    std::fs::write(&fails, "").unwrap();
    let spec = BundleSpec::new().resource(
        ResourceSpec::new("svc", "stubborn")
            .apply(&w.event("apply"))
            .revert(&format!(
                "if [ -e '{}' ]; then exit 5; fi\n{}",
                fails.display(),
                w.event("revert")
            )),
    );
    expect_code(&w.apply(&w.build(&spec), &[]), 0);
    let out = w.run(&["remove", "--yes", "--root", r]);
    expect_code(&out, 3);
    assert!(
        stdout(&out).contains("bell's state is kept"),
        "{}",
        stdout(&out)
    );
    assert!(root.join("var/lib/bell/state.json").is_file());
    std::fs::remove_file(&fails).unwrap();
    let out = w.run(&["remove", "--yes", "--root", r]);
    expect_code(&out, 0);
    assert!(w.events().contains(&"revert".to_string()));
    assert!(!root.join("var/lib/bell").exists());
}

/// Every path under `dir`, relative, with its content for files.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
                out.push(format!("{rel}/"));
            } else if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&path).unwrap().display()
                ));
            } else {
                out.push(format!("{rel}: {:?}", std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    /// The path, its parent made.
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(self.parent().unwrap()).unwrap();
        self
    }
}

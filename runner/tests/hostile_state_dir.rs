//! bell-run's own directory in a hostile root: a link at every place bell-run reads or writes,
//! a second hard link, a wrong owner, a mode open to others. Every command refuses, naming
//! what to fix, and neither the root nor the tree outside it changes, byte for byte and
//! mtime for mtime.
use crate::common::*;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

struct Case {
    name: &'static str,
    /// What the message must name.
    names: &'static str,
    plant: fn(bell: &Path, outside: &Path),
}

fn relink(path: &Path, to: &Path) {
    if path.is_dir() && !path.is_symlink() {
        std::fs::remove_dir_all(path).unwrap();
    } else {
        let _ = std::fs::remove_file(path);
    }
    symlink(to, path).unwrap();
}

fn hard_link(path: &Path, to: &Path) {
    let _ = std::fs::remove_file(path);
    std::fs::hard_link(to, path).unwrap();
}

const CASES: &[Case] = &[
    Case {
        name: "the directory itself",
        names: "var/lib/bell is a symbolic link",
        plant: |bell, outside| relink(bell, &outside.join("dir")),
    },
    Case {
        name: "lock to an outside file",
        names: "var/lib/bell/lock is a symbolic link",
        plant: |bell, outside| relink(&bell.join("lock"), &outside.join("victim")),
    },
    Case {
        name: "lock hard-linked to an outside file",
        names: "var/lib/bell/lock has 2 hard links",
        plant: |bell, outside| hard_link(&bell.join("lock"), &outside.join("victim")),
    },
    Case {
        name: "state.json to /dev/zero",
        names: "var/lib/bell/state.json is a symbolic link (to /dev/zero)",
        plant: |bell, _| relink(&bell.join("state.json"), Path::new("/dev/zero")),
    },
    Case {
        name: "state.json to an outside file",
        names: "var/lib/bell/state.json is a symbolic link",
        plant: |bell, outside| relink(&bell.join("state.json"), &outside.join("victim")),
    },
    Case {
        name: "state.json a FIFO",
        names: "var/lib/bell/state.json is not a plain file or directory",
        plant: |bell, _| {
            std::fs::remove_file(bell.join("state.json")).unwrap();
            let made = std::process::Command::new("mkfifo")
                .arg(bell.join("state.json"))
                .status()
                .unwrap();
            assert!(made.success());
        },
    },
    Case {
        name: "journal.json to an outside file",
        names: "var/lib/bell/journal.json is a symbolic link",
        plant: |bell, outside| relink(&bell.join("journal.json"), &outside.join("victim")),
    },
    Case {
        name: "drifted to an outside file",
        names: "var/lib/bell/drifted is a symbolic link",
        plant: |bell, outside| relink(&bell.join("drifted"), &outside.join("victim")),
    },
    Case {
        name: "the log directory",
        names: "var/lib/bell/log is a symbolic link",
        plant: |bell, outside| relink(&bell.join("log"), &outside.join("dir")),
    },
    Case {
        name: "a script's log",
        names: "var/lib/bell/log/svc/web/apply.log is a symbolic link",
        plant: |bell, outside| relink(&bell.join("log/svc/web/apply.log"), &outside.join("victim")),
    },
    Case {
        name: "a resource's state directory",
        names: "var/lib/bell/state/svc/web is a symbolic link",
        plant: |bell, outside| relink(&bell.join("state/svc/web"), &outside.join("dir")),
    },
    Case {
        name: "the generations",
        names: "var/lib/bell/generations is a symbolic link",
        plant: |bell, outside| relink(&bell.join("generations"), &outside.join("dir")),
    },
    Case {
        name: "a file of a kept generation",
        names: "manifest.json is a symbolic link",
        plant: |bell, outside| {
            let generation = std::fs::read_dir(bell.join("generations"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            relink(&generation.join("manifest.json"), &outside.join("victim"))
        },
    },
    Case {
        name: "the backups",
        names: "var/lib/bell/backup is a symbolic link",
        plant: |bell, outside| relink(&bell.join("backup"), &outside.join("dir")),
    },
    Case {
        name: "a directory among the backups",
        names: "var/lib/bell/backup/etc is a symbolic link",
        plant: |bell, outside| relink(&bell.join("backup/etc"), &outside.join("dir")),
    },
    Case {
        name: "current pointing outside",
        names: "var/lib/bell/current is a symbolic link",
        plant: |bell, outside| relink(&bell.join("current"), &outside.join("dir")),
    },
    Case {
        name: "the directory open to others",
        names: "var/lib/bell is writable by group or others (mode 0777)",
        plant: |bell, _| {
            std::fs::set_permissions(bell, std::fs::Permissions::from_mode(0o777)).unwrap()
        },
    },
    Case {
        name: "a log directory open to the group",
        names: "var/lib/bell/log/svc is writable by group or others (mode 0775)",
        plant: |bell, _| {
            std::fs::set_permissions(bell.join("log/svc"), std::fs::Permissions::from_mode(0o775))
                .unwrap()
        },
    },
    Case {
        name: "var/lib open to others",
        names: "var/lib is writable by group or others (mode 0777)",
        plant: |bell, _| {
            std::fs::set_permissions(
                bell.parent().unwrap(),
                std::fs::Permissions::from_mode(0o777),
            )
            .unwrap()
        },
    },
];

/// A root that has been applied to once: logs, state directories, a generation, a backup.
fn applied_world() -> (World, PathBuf, PathBuf) {
    let w = World::new();
    let root = w.root();
    std::fs::write(root.join("etc/app.conf"), "before bell\n").unwrap();
    let bundle = w.build(
        &BundleSpec::new()
            .file("/etc/app.conf", "managed\n", "0644")
            .resource(
                ResourceSpec::new("svc", "web")
                    .apply("echo applied\n")
                    .check("exit 0\n"),
            ),
    );
    expect_code(&w.apply(&bundle, &[]), 0);
    let bell = root.join("var/lib/bell");
    assert!(bell.join("backup/etc/app.conf").exists());
    assert!(bell.join("log/svc/web/apply.log").exists());
    let outside = w.tmp.path().join("outside");
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    std::fs::write(outside.join("victim"), "precious\n").unwrap();
    std::fs::write(outside.join("dir/kept"), "precious\n").unwrap();
    (w, bell, outside)
}

fn commands(w: &World) -> Vec<Vec<String>> {
    let root = w.root().display().to_string();
    let other = w.build(&BundleSpec::new().file("/etc/other.conf", "other\n", "0644"));
    let other = other.display().to_string();
    let with_root = |args: &[&str]| {
        let mut v: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        v.extend(["--root".to_string(), root.clone()]);
        v
    };
    vec![
        with_root(&["apply", &other]),
        with_root(&["apply", &other, "--dry-run"]),
        with_root(&["check"]),
        with_root(&["status"]),
        with_root(&["rollback"]),
        with_root(&["recover"]),
    ]
}

#[test]
fn every_link_owner_and_mode_problem_in_the_state_directory_is_refused_and_nothing_changes() {
    for case in CASES {
        let (w, bell, outside) = applied_world();
        (case.plant)(&bell, &outside);
        let before_outside = snapshot(&outside, &[], true, true);
        // A FIFO cannot be read for the comparison; everything else in the root is.
        let fifo = ["var/lib/bell/state.json"];
        let skip: &[&str] = if case.name.contains("FIFO") {
            &fifo
        } else {
            &[]
        };
        let before_root = snapshot(&w.root(), skip, true, true);
        for args in commands(&w) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = w.run(&args);
            let err = stderr(&out);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{}: `{}` was not refused:\n{}{err}",
                case.name,
                args[0],
                stdout(&out)
            );
            assert!(
                err.contains("bell-run's own directory is unsafe") && err.contains(case.names),
                "{}: `{}` does not name `{}`:\n{err}",
                case.name,
                args[0],
                case.names
            );
            assert!(err.contains("help: "), "{err}");
        }
        assert_eq!(
            snapshot(&outside, &[], true, true),
            before_outside,
            "{}: the tree outside the root changed",
            case.name
        );
        assert_eq!(
            snapshot(&w.root(), skip, true, true),
            before_root,
            "{}: the root changed",
            case.name
        );
    }
}

#[test]
fn a_state_directory_of_another_user_is_refused() {
    if !bell_testkit::root() {
        return;
    }
    let (w, bell, _) = applied_world();
    std::os::unix::fs::chown(bell.join("state"), Some(4242), None).unwrap();
    let before = snapshot(&w.root(), &[], true, true);
    let out = w.run(&["status", "--root", w.root().to_str().unwrap()]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("var/lib/bell/state belongs to uid 4242, not to uid 0"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&w.root(), &[], true, true), before);
}

#[test]
fn a_fresh_root_gets_a_private_state_directory_and_check_leaves_it_untouched() {
    let w = World::new();
    let root = w.root();
    // `check` of a root never applied to creates nothing, not even the lock.
    let before = snapshot(&root, &[], true, true);
    let out = w.run(&["check", "--root", root.to_str().unwrap()]);
    assert_eq!(snapshot(&root, &[], true, true), before, "{}", stderr(&out));

    expect_code(
        &w.apply(
            &w.build(&BundleSpec::new().file("/etc/a", "a\n", "0644")),
            &[],
        ),
        0,
    );
    let mode = std::fs::metadata(root.join("var/lib/bell"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

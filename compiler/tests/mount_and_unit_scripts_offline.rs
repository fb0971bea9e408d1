//! What of mount and unit scripts runs without a live systemd, run for real over a temp root
//! with BELL_OFFLINE=1 (baking an image): the mount point is created and recorded, units are
//! enabled by the symlinks their [Install] section asks for, a re-apply changes nothing, and a
//! revert removes only what bell created. Starting, restarting and checking the mount with
//! findmnt need a booted systemd and are left to the VM tests.

use crate::common::*;
use std::path::Path;

fn link(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_link(root.join(rel))
        .ok()
        .map(|p| p.display().to_string())
}

#[test]
fn mount_point_is_created_enabled_and_removed_only_when_bell_made_it() {
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
mount "data" target="/srv/bell data/x" device="tmpfs" type="tmpfs" options="size=8M"
mount "mnt" target="/mnt" device="tmpfs" type="tmpfs"
"#,
    );
    let b = only_bundle(&c);
    let unit = bellc_core::escape::mount_unit_name("/srv/bell data/x");
    assert_eq!(unit, "srv-bell\\x20data-x.mount");
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(root.path().join("srv/keep")).expect("mkdir");
    std::fs::create_dir_all(root.path().join("mnt")).expect("mkdir");
    let (s_data, s_mnt) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let apply = script(b, "mount", "data", "apply");
    ok(&run(&apply, root.path(), s_data.path(), true));
    ok(&run(
        &script(b, "mount", "mnt", "apply"),
        root.path(),
        s_mnt.path(),
        true,
    ));
    assert!(root.path().join("srv/bell data/x").is_dir());
    assert_eq!(
        link(
            root.path(),
            &format!("etc/systemd/system/local-fs.target.wants/{unit}")
        )
        .as_deref(),
        Some(format!("/etc/systemd/system/{unit}").as_str())
    );
    assert_eq!(
        std::fs::read_to_string(s_data.path().join("created")).expect("record"),
        "/srv/bell data\n"
    );
    assert!(
        !s_mnt.path().join("created").exists(),
        "/mnt existed before"
    );

    let before = snapshot_tree(s_data.path());
    ok(&run(&apply, root.path(), s_data.path(), true));
    assert_eq!(snapshot_tree(s_data.path()), before);

    ok(&run(
        &script(b, "mount", "data", "revert"),
        root.path(),
        s_data.path(),
        true,
    ));
    ok(&run(
        &script(b, "mount", "mnt", "revert"),
        root.path(),
        s_mnt.path(),
        true,
    ));
    assert!(
        !root.path().join("srv/bell data").exists(),
        "bell created it"
    );
    assert!(root.path().join("srv/keep").is_dir() && root.path().join("mnt").is_dir());
    assert!(link(
        root.path(),
        &format!("etc/systemd/system/local-fs.target.wants/{unit}")
    )
    .is_none());
}

#[test]
fn mount_point_that_is_a_file_fails() {
    let c = compile_ok(
        "fleet \"t\" target=\"ubuntu-24.04\"\nhost \"h\" address=\"10.0.0.1\"\nmount \"m\" target=\"/m\" device=\"tmpfs\" type=\"tmpfs\"\n",
    );
    let root = tempfile::tempdir().expect("temp dir");
    std::fs::write(root.path().join("m"), "").expect("write");
    let state = tempfile::tempdir().expect("temp dir");
    let out = run(
        &script(only_bundle(&c), "mount", "m", "apply"),
        root.path(),
        state.path(),
        true,
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "bell: mount:m: /m exists and is not a directory\n"
    );
}

#[test]
fn unit_is_enabled_by_its_install_section_and_disabled_by_revert() {
    let c = compile_ok(
        r##"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
unit "myapp.service" enable=#true {
    content #"""
        [Unit]
        Description=my app on {{ host.name }}
        [Service]
        ExecStart=/usr/bin/myapp
        [Install]
        WantedBy=multi-user.target
        RequiredBy=other.target ../../escape.target
        """#
}
"##,
    );
    let b = only_bundle(&c);
    assert!(file(b, "/etc/systemd/system/myapp.service").contains("Description=my app on h\n"));
    let root = tempfile::tempdir().expect("temp dir");
    let state = tempfile::tempdir().expect("temp dir");
    let apply = script(b, "unit", "myapp.service", "apply");
    ok(&run(&apply, root.path(), state.path(), true));
    for dir in ["multi-user.target.wants", "other.target.requires"] {
        assert_eq!(
            link(
                root.path(),
                &format!("etc/systemd/system/{dir}/myapp.service")
            )
            .as_deref(),
            Some("/etc/systemd/system/myapp.service")
        );
    }
    assert!(!root.path().join("escape.target.requires").exists());
    let before = snapshot_tree(root.path());
    ok(&run(&apply, root.path(), state.path(), true));
    assert_eq!(snapshot_tree(root.path()).len(), before.len());
    ok(&run(
        &script(b, "unit", "myapp.service", "revert"),
        root.path(),
        state.path(),
        true,
    ));
    assert!(link(
        root.path(),
        "etc/systemd/system/multi-user.target.wants/myapp.service"
    )
    .is_none());
    assert!(link(
        root.path(),
        "etc/systemd/system/other.target.requires/myapp.service"
    )
    .is_none());
    assert_eq!(std::fs::read_dir(state.path()).expect("state").count(), 0);
}

#[test]
fn the_batch_apply_makes_each_mount_as_its_own_apply_and_a_failing_one_stops_only_itself() {
    let c = compile_ok(
        r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
mount "data" target="/srv/bell data/x" device="tmpfs" type="tmpfs" options="size=8M"
mount "mnt" target="/mnt" device="tmpfs" type="tmpfs"
mount "file" target="/m" device="tmpfs" type="tmpfs"
mount "inner" target="/mnt/inner" device="tmpfs" type="tmpfs"
"#,
    );
    let b = only_bundle(&c);
    // Nested under /mnt, `inner` comes after it: never run together, it runs its own apply.
    let inner = b.manifest.resources.iter().find(|r| r.name == "inner");
    assert_eq!(inner.unwrap().after, ["mount:mnt"]);
    let names = ["data", "mnt", "file"];
    let new_root = || {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(root.path().join("mnt")).expect("mkdir");
        std::fs::write(root.path().join("m"), "").expect("write");
        let states = tempfile::tempdir().expect("temp dir");
        for name in names {
            std::fs::create_dir_all(states.path().join(name)).expect("mkdir");
        }
        (root, states)
    };
    let (own, own_states) = new_root();
    let mut said = Vec::new();
    for name in names {
        let state = own_states.path().join(name);
        let out = run(&script(b, "mount", name, "apply"), own.path(), &state, true);
        let stderr = String::from_utf8_lossy(&out.stderr);
        said.push(
            match stderr.strip_prefix(&format!("bell: mount:{name}: ")) {
                Some(why) => format!("mount:{name}\tfailed\t{}", why.trim_end()),
                None => format!("mount:{name}\tok\t"),
            },
        );
    }
    let (together, states) = new_root();
    let pairs: Vec<(String, std::path::PathBuf)> = names
        .iter()
        .map(|n| (format!("mount:{n}"), states.path().join(n)))
        .collect();
    let pairs: Vec<(&str, &Path)> = pairs
        .iter()
        .map(|(k, s)| (k.as_str(), s.as_path()))
        .collect();
    let batch = tempfile::tempdir().expect("temp dir");
    let out = run_batch(
        &batch_script(b, "mount", "apply"),
        together.path(),
        batch.path(),
        &pairs,
        true,
    );
    ok(&out);
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    said.sort();
    assert_eq!(lines, said);
    assert!(said.contains(&"mount:file\tfailed\t/m exists and is not a directory".to_string()));
    assert_eq!(tree(together.path()), tree(own.path()));
    assert_eq!(tree(states.path()), tree(own_states.path()));
    assert!(together.path().join("srv/bell data/x").is_dir());
}

/// Every entry under `dir`, relative: its type and mode, and a file's content or a link's target.
fn tree(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|entry| {
            let entry = entry.expect("walk");
            let meta = entry.path().symlink_metadata().expect("metadata");
            let what = if meta.is_file() {
                String::from_utf8_lossy(&std::fs::read(entry.path()).expect("read")).into_owned()
            } else {
                link(
                    dir,
                    &entry
                        .path()
                        .strip_prefix(dir)
                        .unwrap()
                        .display()
                        .to_string(),
                )
                .unwrap_or_default()
            };
            let rel = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            format!("{rel} {:o} {what}", meta.permissions().mode())
        })
        .collect()
}

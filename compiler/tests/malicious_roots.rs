//! Image roots with a directory link at every level a kind writes through: each bundle is
//! built by bellc and applied offline by bell-run into a root whose link climbs out of it.
//! Every case is refused, the message names the link, and the tree outside the root is
//! unchanged byte for byte, mode for mode, mtime for mtime. An absolute link is resolved
//! inside the root, as the booted image will see it, and nothing outside changes either.
use crate::common;
use crate::common::fleet::*;
use crate::common::*;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

struct Case {
    what: &'static str,
    spec: &'static str,
    /// The link planted in the root, and where it points.
    link: &'static str,
    to: &'static str,
    /// bell-run's exit: 1 when bell-run itself refuses the managed path, 3 when the script
    /// of the resource does.
    code: i32,
    /// What the output must say.
    says: &'static str,
}

const ACCOUNT: &str = "ops:x:4242:4242::/home/ops:/bin/sh\n";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";

const CASES: &[Case] = &[
    Case {
        what: "perm through var/run",
        spec: "perm \"/var/run/*\" mode=\"0600\"\n",
        link: "var/run",
        to: "../../outside/run",
        code: 3,
        says: "leads out of ROOT through the link /var/run",
    },
    Case {
        what: "a mount point under srv",
        spec: "mount \"data\" target=\"/srv/data\" device=\"tmpfs\" type=\"tmpfs\"\n",
        link: "srv",
        to: "../outside/srv",
        code: 3,
        says: "leads out of ROOT through the link /srv",
    },
    Case {
        what: "a mount's enable link",
        spec: "mount \"data\" target=\"/data\" device=\"tmpfs\" type=\"tmpfs\"\n",
        link: "etc/systemd/system/local-fs.target.wants",
        to: "../../../../outside/wants",
        code: 3,
        says: "through the link /etc/systemd/system/local-fs.target.wants",
    },
    Case {
        what: "a unit's enable link",
        spec: "unit \"app.service\" enable=#true start=#false {\n    content \"[Service]\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\n\"\n}\n",
        link: "etc/systemd/system/multi-user.target.wants",
        to: "../../../../outside/wants",
        code: 3,
        says: "through the link /etc/systemd/system/multi-user.target.wants",
    },
    Case {
        what: "authorized_keys under home",
        spec: "user \"ops\" {\n    ssh-key \"KEY\"\n}\n",
        link: "home",
        to: "../outside/home",
        code: 3,
        says: "leads out of ROOT through the link /home",
    },
    Case {
        what: "the sudoers drop-in",
        spec: "user \"ops\" sudo=#true {\n    ssh-keys \"unmanaged\"\n}\n",
        link: "etc/sudoers.d",
        to: "../../outside/sudoers.d",
        code: 3,
        says: "leads out of ROOT through the link /etc/sudoers.d",
    },
    Case {
        what: "limits.d",
        spec: "limit \"nofile\" domain=\"root\" type=\"soft\" item=\"nofile\" value=101\n",
        link: "etc/security/limits.d",
        to: "../../../outside/limits.d",
        code: 1,
        says: "ROOT/etc/security/limits.d is a link to ",
    },
    Case {
        what: "sysctl.d",
        spec: "sysctl {\n    vm.swappiness 10\n}\n",
        link: "etc/sysctl.d",
        to: "../../outside/sysctl.d",
        code: 1,
        says: "ROOT/etc/sysctl.d is a link to ",
    },
    Case {
        what: "apparmor.d",
        spec: "apparmor \"tool\" {\n    profile \"/usr/bin/tool {\\n}\\n\"\n}\n",
        link: "etc/apparmor.d",
        to: "../../outside/apparmor.d",
        code: 1,
        says: "ROOT/etc/apparmor.d is a link to ",
    },
    Case {
        what: "apt",
        spec: "apt-source \"vendor\" url=\"https://deb.example/debian\" suites=\"bookworm\" components=\"main\"\n",
        link: "etc/apt",
        to: "../../outside/apt",
        code: 1,
        says: "ROOT/etc/apt is a link to ",
    },
];

/// An image root with its account databases (and the account `ops`, so that the user cases
/// reach their files), and a tree beside it that nothing may touch.
fn image() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    for db in ["passwd", "group", "shadow", "gshadow"] {
        let mut text = std::fs::read_to_string(Path::new("/etc").join(db)).unwrap();
        text.push_str(match db {
            "passwd" => ACCOUNT,
            "group" => "ops:x:4242:\n",
            "shadow" => "ops:*:19000:0:99999:7:::\n",
            _ => "ops:!::\n",
        });
        std::fs::write(root.join("etc").join(db), text).unwrap();
    }
    let outside = dir.path().join("outside");
    for sub in [
        "run",
        "srv",
        "wants",
        "home/ops/.ssh",
        "sudoers.d",
        "limits.d",
        "sysctl.d",
        "apparmor.d",
        "apt/sources.list.d",
    ] {
        std::fs::create_dir_all(outside.join(sub)).unwrap();
        std::fs::write(outside.join(sub).join("precious"), "do not touch\n").unwrap();
    }
    dir
}

/// Every entry under `dir`, links not followed: path, kind, content, mode, owner, mtime.
fn hashed(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            let content = if meta.is_file() {
                bell_bundle::sha256_hex(&std::fs::read(entry.path()).unwrap())
            } else {
                String::new()
            };
            format!(
                "{} {:o} {}:{} {} {}.{}",
                entry.path().display(),
                meta.mode(),
                meta.uid(),
                meta.gid(),
                content,
                meta.mtime(),
                meta.mtime_nsec()
            )
        })
        .collect()
}

fn build(spec: &str) -> (Fixture, std::path::PathBuf) {
    let f = Fixture::spec(&format!(
        "fleet \"t\" target=\"debian-12\"\nhost \"h\"\n{}",
        spec.replace("KEY", KEY)
    ));
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = f.path().join("out/hosts/h");
    (f, bundle)
}

#[test]
fn a_link_out_of_the_root_is_refused_by_name_and_nothing_outside_changes() {
    // The account tools and the ownership of what bell-run writes need root.
    if !common::in_memory::is_root() {
        return;
    }
    let bin = bell_run();
    for case in CASES {
        let dir = image();
        let root = dir.path().join("root");
        let link = root.join(case.link);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        symlink(case.to, &link).unwrap();
        let (_f, bundle) = build(case.spec);
        let before = hashed(&dir.path().join("outside"));
        let out = apply_into(&bin, &bundle, &root);
        let said = text(&out).replace(root.to_str().unwrap(), "ROOT");
        assert_eq!(
            out.status.code(),
            Some(case.code),
            "{}: not refused as expected:\n{said}",
            case.what
        );
        assert!(
            said.contains(case.says),
            "{}: the output does not say `{}`:\n{said}",
            case.what,
            case.says
        );
        assert_eq!(
            hashed(&dir.path().join("outside")),
            before,
            "{}: the tree outside the root changed",
            case.what
        );
    }
}

#[test]
fn an_absolute_link_is_resolved_inside_the_root_as_the_image_sees_it() {
    let bin = bell_run();
    let dir = image();
    let root = dir.path().join("root");
    // An absolute link names a place on the booted host: here, a directory that must not be
    // created on the machine that bakes the image.
    let elsewhere = format!("/bell-test-elsewhere-{}", std::process::id());
    symlink(&elsewhere, root.join("srv")).unwrap();
    let (_f, bundle) =
        build("mount \"data\" target=\"/srv/data\" device=\"tmpfs\" type=\"tmpfs\"\n");
    let before = hashed(&dir.path().join("outside"));
    let out = apply_into(&bin, &bundle, &root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !Path::new(&elsewhere).exists(),
        "{elsewhere} was created on this machine"
    );
    assert!(root
        .join(elsewhere.trim_start_matches('/'))
        .join("data")
        .is_dir());
    assert_eq!(hashed(&dir.path().join("outside")), before);
}

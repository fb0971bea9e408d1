//! On an image root, the user apply writes a new account into the account databases itself
//! (one awk, `stdlib/user/add-offline.sh.j2`) instead of running `useradd`. Each case builds
//! the same root twice, makes the accounts once with the rendered apply and once with
//! `useradd --root` as the apply runs it (live, and for what the writer leaves to it), and
//! compares the databases and the home directories, byte for byte and mode for mode.

use crate::common::in_memory::{bundle, is_root};
use crate::common::{batch_script, have, script};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";
/// 2023-11-14: both ways date the password's last change by it.
const EPOCH: &str = "1700000000";

/// alice: a password and a key (her home is made with its ~/.ssh); bob: a shell of his own, no
/// password, keys left alone (his home alone).
fn spec() -> String {
    format!(
        r#"
fleet "f" target="debian-12"
host "h"
user "alice" {{
    password "{HASH}"
    ssh-key "{KEY}"
}}
user "bob" shell="/bin/sh" {{
    ssh-keys "unmanaged"
}}
"#
    )
}

/// What `useradd` is given by the apply for each account of [`spec`].
const USERADD: &[(&str, &[&str])] = &[
    ("alice", &["--password", HASH]),
    ("bob", &["--shell", "/bin/sh", "--password", "*"]),
];

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\ndebian:x:1000:1000::/home/debian:/bin/bash\n";
const SHADOW: &str =
    "root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\ndebian:!:19000:0:99999:7:::\n";
const GROUP: &str = "root:x:0:\nusers:x:100:\ndebian:x:1000:\n";
const GSHADOW: &str = "root:*::\nusers:*::\ndebian:!::\n";

/// Debian 12's login.defs, the keys useradd reads.
const DEBIAN_DEFS: &str = "# /etc/login.defs\nMAIL_DIR        /var/mail\nUMASK\t\t022\nPASS_MAX_DAYS\t99999\nPASS_MIN_DAYS\t0\nPASS_WARN_AGE\t7\nUID_MIN\t\t\t 1000\nUID_MAX\t\t\t60000\nSUB_UID_MIN\t\t   100000\nSUB_UID_MAX\t\t600100000\nSUB_UID_COUNT\t\t    65536\nGID_MIN\t\t\t 1000\nGID_MAX\t\t\t60000\nSUB_GID_MIN\t\t   100000\nSUB_GID_MAX\t\t600100000\nSUB_GID_COUNT\t\t    65536\nENCRYPT_METHOD SHA512\nUSERGROUPS_ENAB yes\n";

struct Case {
    name: &'static str,
    /// Files of the root besides the four databases (which a case may replace), with modes.
    files: &'static [(&'static str, &'static str, u32)],
    links: &'static [(&'static str, &'static str)],
    dirs: &'static [&'static str],
    /// Whether the writer leaves the accounts to useradd (then the apply's root has useradd's
    /// backup files).
    useradd: bool,
    epoch: bool,
}

const CASES: &[Case] = &[
    // The benchmark's image root: no login.defs, no default/useradd, no skeleton, no /home.
    Case {
        name: "bare",
        files: &[],
        links: &[],
        dirs: &[],
        useradd: false,
        epoch: true,
    },
    // Debian 12: user groups, ageing fields, subordinate ids next to a range in use, a skeleton
    // with a private file and a link, the default shell from default/useradd.
    Case {
        name: "debian",
        files: &[
            ("etc/login.defs", DEBIAN_DEFS, 0o644),
            ("etc/default/useradd", "# defaults\nSHELL=/bin/sh\n", 0o644),
            ("etc/subuid", "debian:100000:65536\n", 0o644),
            ("etc/subgid", "", 0o644),
            ("etc/skel/.profile", "# ~/.profile\n", 0o644),
            ("etc/skel/.secret", "private\n", 0o600),
        ],
        links: &[("etc/skel/.alias", ".profile")],
        dirs: &["home"],
        useradd: false,
        epoch: false,
    },
    // A narrow uid range whose top is taken (so the lowest free ids are given), the uid taken as
    // a gid (so the user group gets the next gid), HOME_MODE, quoted values, an inactive period,
    // a home base that does not exist yet, and databases whose last line has no newline.
    Case {
        name: "tight",
        files: &[
            (
                "etc/login.defs",
                "UID_MIN 2000\nUID_MAX 2003\nGID_MIN 2000\nGID_MAX 2010\nUSERGROUPS_ENAB \"yes\"\nHOME_MODE 0750\nPASS_MAX_DAYS 90\nPASS_MIN_DAYS 1\nPASS_WARN_AGE 14\nSUB_UID_COUNT 1000\n",
                0o644,
            ),
            (
                "etc/default/useradd",
                "HOME=/srv/users\nINACTIVE=30\nSKEL=/etc/skel-none\n",
                0o644,
            ),
            (
                "etc/passwd",
                "root:x:0:0:root:/root:/bin/bash\nfirst:x:2000:2000::/srv/first:/bin/sh\nlast:x:2003:2003::/srv/last:/bin/sh",
                0o644,
            ),
            (
                "etc/group",
                "root:x:0:\nfirst:x:2000:\nlast:x:2003:\ntaken:x:2001:",
                0o644,
            ),
            ("etc/subuid", "first:100000:1000\n", 0o644),
        ],
        links: &[],
        dirs: &[],
        useradd: false,
        epoch: true,
    },
    // What the writer leaves to useradd: a skeleton with a directory (useradd copies it 0700),
    // a mail spool.
    Case {
        name: "skeleton with a directory, mail spool",
        files: &[
            ("etc/login.defs", DEBIAN_DEFS, 0o644),
            ("etc/default/useradd", "CREATE_MAIL_SPOOL=yes\n", 0o644),
            ("etc/skel/.config/app.conf", "x=1\n", 0o644),
        ],
        links: &[],
        dirs: &["var/mail", "home"],
        useradd: true,
        epoch: true,
    },
];

fn make_root(case: &Case) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    let base = [
        ("etc/passwd", PASSWD, 0o644),
        ("etc/shadow", SHADOW, 0o640),
        ("etc/group", GROUP, 0o644),
        ("etc/gshadow", GSHADOW, 0o640),
    ];
    for (path, text, mode) in base.iter().chain(case.files) {
        let p = r.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    for (link, target) in case.links {
        std::os::unix::fs::symlink(target, r.join(link)).unwrap();
    }
    for d in case.dirs {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    dir
}

/// Every file under `root/dir`, with what useradd and the writer decide about it: type, mode,
/// owner, content or link target. `~/.ssh` is left out (the apply fills it after useradd).
fn tree(root: &Path, dir: &str, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return;
    };
    for e in entries {
        let e = e.unwrap();
        let rel = format!("{dir}/{}", e.file_name().to_string_lossy());
        if rel.ends_with("/.ssh") {
            continue;
        }
        let md = std::fs::symlink_metadata(e.path()).unwrap();
        let what = if md.file_type().is_symlink() {
            format!("-> {}", std::fs::read_link(e.path()).unwrap().display())
        } else if md.is_dir() {
            tree(root, &rel, out);
            "dir".to_string()
        } else {
            std::fs::read_to_string(e.path()).unwrap_or_default()
        };
        let mode = md.permissions().mode() & 0o7777;
        out.insert(rel, format!("{mode:o} {}:{} {what}", md.uid(), md.gid()));
    }
}

/// The account databases and the homes: what the two ways must agree on.
fn accounts(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in ["passwd", "shadow", "group", "gshadow", "subuid", "subgid"] {
        let p = root.join("etc").join(db);
        if let Ok(text) = std::fs::read_to_string(&p) {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
            out.insert(format!("etc/{db}"), format!("{mode:o} {text}"));
        }
    }
    for base in ["home", "srv/users", "srv", "var/mail"] {
        tree(root, base, &mut out);
    }
    out
}

/// A root of `case`, `prepare`d, with the accounts of [`USERADD`] made by `useradd --root`, in
/// turn, as the apply runs it.
fn made_by_useradd(case: &Case, prepare: impl Fn(&Path)) -> tempfile::TempDir {
    let root = make_root(case);
    prepare(root.path());
    for (user, args) in USERADD {
        let mut useradd = Command::new("useradd");
        useradd
            .arg("--root")
            .arg(root.path())
            .arg("--create-home")
            .args(*args)
            .arg(user);
        if case.epoch {
            useradd.env("SOURCE_DATE_EPOCH", EPOCH);
        }
        let out = useradd.output().unwrap();
        assert!(
            out.status.success(),
            "{}: useradd {user} failed: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    root
}

/// Makes both accounts of [`spec`] with one run of the accounts' batch apply, `awk` behind a
/// shim that counts its runs; returns the runs.
fn made_by_the_batch(b: &bellc_core::render::RenderedBundle, case: &Case, root: &Path) -> usize {
    let shims = tempfile::tempdir().unwrap();
    let count = shims.path().join("count");
    let awk = shims.path().join("awk");
    let real = ["/usr/bin/awk", "/bin/awk"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("awk");
    std::fs::write(
        &awk,
        format!(
            "#!/bin/sh\necho run >>'{}'\nexec {real} \"$@\"\n",
            count.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&awk, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}:/usr/sbin:/sbin",
        shims.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let state = tempfile::tempdir().unwrap();
    let mut batch = Command::new("sh");
    batch
        .arg("-c")
        .arg(batch_script(b, "user", "apply"))
        .arg("batch");
    for (user, _) in USERADD {
        let dir = state.path().join(user);
        std::fs::create_dir_all(&dir).unwrap();
        batch.arg(format!("user:{user}")).arg(dir);
    }
    batch
        .env("PATH", path)
        .env("BELL_ROOT", root)
        .env("BELL_STATE", state.path())
        .env("BELL_OFFLINE", "1");
    if case.epoch {
        batch.env("SOURCE_DATE_EPOCH", EPOCH);
    }
    let out = batch.output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("user:alice\tok") && said.contains("user:bob\tok"),
        "{}: the batch apply failed: {said}{}",
        case.name,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&count).map_or(0, |c| c.lines().count())
}

/// Compares the accounts and homes of two roots, entry by entry.
fn assert_same_accounts(case: &str, got: &Path, want: &Path) {
    let (got, want) = (accounts(got), accounts(want));
    for key in want.keys().chain(got.keys()) {
        assert_eq!(
            got.get(key),
            want.get(key),
            "{case}: {key} differs (left: the batch apply, right: useradd)"
        );
    }
}

/// The batch apply decides every new account of a first apply with one awk, in the order they
/// are made, and what it writes is what useradd, run for each in turn, writes. An account that
/// falls back to useradd (its home is there already) leaves the ones after it to decide their
/// own lines (a second awk), as useradd picked its ids itself.
#[test]
fn the_batch_decides_every_new_account_with_one_awk_as_useradd_would() {
    if !is_root() || !have("useradd") {
        return;
    }
    let b = bundle(&spec(), "h");
    for case in CASES {
        let by_batch = make_root(case);
        let runs = made_by_the_batch(&b, case, by_batch.path());
        assert_same_accounts(
            case.name,
            by_batch.path(),
            made_by_useradd(case, |_| {}).path(),
        );
        // Left to useradd: the batch's awk and each account's own say so.
        assert_eq!(runs, if case.useradd { 3 } else { 1 }, "{}", case.name);
    }
    let case = &CASES[1];
    let home_there = |root: &Path| std::fs::create_dir_all(root.join("home/alice")).unwrap();
    let by_batch = make_root(case);
    home_there(by_batch.path());
    let runs = made_by_the_batch(&b, case, by_batch.path());
    assert_same_accounts(
        "alice's home there",
        by_batch.path(),
        made_by_useradd(case, home_there).path(),
    );
    assert!(
        by_batch.path().join("etc/passwd-").exists(),
        "alice was not left to useradd"
    );
    assert_eq!(
        runs, 2,
        "bob did not decide his own lines after alice's fell back"
    );
}

#[test]
fn new_accounts_on_an_image_root_are_what_useradd_makes() {
    if !is_root() || !have("useradd") {
        return;
    }
    let b = bundle(&spec(), "h");
    for case in CASES {
        let by_apply = make_root(case);
        let by_useradd = made_by_useradd(case, |_| {});
        let state = tempfile::tempdir().unwrap();
        for (user, _) in USERADD {
            let mut apply = Command::new("sh");
            apply
                .arg("-c")
                .arg(script(&b, "user", user, "apply"))
                .env("BELL_ROOT", by_apply.path())
                .env("BELL_STATE", state.path().join(user))
                .env("BELL_OFFLINE", "1");
            if case.epoch {
                apply.env("SOURCE_DATE_EPOCH", EPOCH);
            }
            std::fs::create_dir_all(state.path().join(user)).unwrap();
            let out = apply.output().unwrap();
            assert!(
                out.status.success(),
                "{}: the apply of {user} failed: {}",
                case.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (got, want) = (accounts(by_apply.path()), accounts(by_useradd.path()));
        assert!(
            want.keys()
                .any(|k| k.ends_with("/alice") || k.ends_with("/bob")),
            "{}: no home was made: {want:#?}",
            case.name
        );
        for key in want.keys().chain(got.keys()) {
            assert_eq!(
                got.get(key),
                want.get(key),
                "{}: {key} differs (left: the apply, right: useradd)",
                case.name
            );
        }
        // useradd keeps a backup of each database it rewrites; the writer appends.
        assert_eq!(
            by_apply.path().join("etc/passwd-").exists(),
            case.useradd,
            "{}: the apply {} useradd",
            case.name,
            if case.useradd {
                "did not leave it to"
            } else {
                "ran"
            }
        );
        // The key the apply added went into the home it made.
        let keys = by_apply.path().join(
            got.keys()
                .find(|k| k.ends_with("/alice"))
                .unwrap()
                .to_string()
                + "/.ssh/authorized_keys",
        );
        assert_eq!(
            std::fs::read_to_string(&keys).unwrap(),
            format!("{KEY}\n"),
            "{}",
            case.name
        );
    }
}

/// A database planted as a link to a file of the build machine: the writer appends to none of
/// the root's databases through it and leaves the account to `useradd`, which reads the root
/// as the image will (the link's target under the root).
#[test]
fn a_database_planted_as_a_link_out_of_the_root_is_not_written_through() {
    if !is_root() || !have("useradd") {
        return;
    }
    let b = bundle(&spec(), "h");
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("subuid");
    std::fs::write(&target, "someone:100000:65536\n").unwrap();
    let case = &CASES[1];
    let root = make_root(case);
    std::fs::remove_file(root.path().join("etc/subuid")).unwrap();
    std::os::unix::fs::symlink(&target, root.path().join("etc/subuid")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(script(&b, "user", "alice", "apply"))
        .env("BELL_ROOT", root.path())
        .env("BELL_STATE", state.path())
        .env("BELL_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "someone:100000:65536\n"
    );
    assert!(
        root.path().join("etc/passwd-").exists(),
        "the account was not left to useradd"
    );
    assert!(root.path().join("home/alice").is_dir());
}

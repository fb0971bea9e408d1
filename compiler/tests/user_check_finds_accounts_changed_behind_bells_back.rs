//! The user check, run offline over a temporary root after the real apply (`useradd --root` &
//! co.): in sync after the apply; drifted, naming what, when the account is changed behind
//! bell's back (a key added to or removed from authorized_keys, the sudoers drop-in removed or
//! planted, the shell changed, the account expired, the password hash replaced); in sync again
//! after the apply runs again. Spec values reach the script quoted: a shell with quotes and `$(`
//! is compared as written.

use crate::common::in_memory::{bundle, is_root};
use crate::common::{have, script};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";
const KEY_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKSAYsxYiAVlSSWQfmJFmq4RM4FKvKuP5VAtPD6lkEDO alice@example";
const SHELL: &str = "/opt/it's $(touch pwned)/sh";

fn spec() -> String {
    format!(
        r##"
fleet "f" target="ubuntu-24.04"
host "h"
user "alice" sudo=#true shell="/bin/bash" {{
    password "{HASH}"
    ssh-key "{KEY_A}"
    ssh-key "{KEY_B}"
}}
user "bob" shell=#"{SHELL}"# {{
    ssh-key "{KEY_B}"
}}
"##
    )
}

struct Root {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Root {
    fn new(bundle: &bellc_core::render::RenderedBundle) -> Root {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = [
            ("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n", 0o644),
            ("etc/shadow", "root:*:19000:0:99999:7:::\n", 0o640),
            ("etc/group", "root:x:0:\nsudo:x:27:\n", 0o644),
            ("etc/gshadow", "root:*::\nsudo:*::\n", 0o640),
        ];
        for (path, text, mode) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, text).expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        std::fs::create_dir_all(dir.path().join("etc/sudoers.d")).expect("mkdir");
        // What bell-run does before the applies: the managed files (the staged drop-in) land.
        for (path, bytes) in &bundle.contents {
            if let Some(host_path) = path.strip_prefix("root/") {
                let p = dir.path().join(host_path);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::fs::write(&p, bytes).expect("write");
            }
        }
        Root {
            dir,
            state: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn run(&self, user: &str, text: &str) -> Output {
        self.run_with(user, text, &[])
    }

    /// Runs `text` as bell-run would for resource `user` (its state directory
    /// `BELL_STATE`), with `args` after the script.
    fn run_with(&self, user: &str, text: &str, args: &[&std::ffi::OsStr]) -> Output {
        let file = self.state.path().join("script.sh");
        std::fs::write(&file, text).expect("write");
        Command::new("sh")
            .arg(&file)
            .args(args)
            .current_dir(self.state.path())
            .env("BELL_ROOT", self.dir.path())
            .env("BELL_STATE", self.state.path().join(user))
            .env("BELL_OFFLINE", "1")
            .output()
            .expect("sh")
    }

    /// Rewrites field `n` (0-based) of `user`'s line in etc/`db`.
    fn set_field(&self, db: &str, user: &str, n: usize, value: &str) {
        let path = self.path(&format!("etc/{db}"));
        let text = std::fs::read_to_string(&path).expect("read");
        let mut out = String::new();
        for line in text.lines() {
            let mut f: Vec<&str> = line.split(':').collect();
            if f[0] == user {
                f[n] = value;
            }
            out.push_str(&f.join(":"));
            out.push('\n');
        }
        std::fs::write(&path, out).expect("write");
    }
}

/// The check of `user`, as a check of its own would say it: its exit status (0 in sync, 2
/// drifted) and what differs, a line each. The accounts' batch check is run as bell-run runs
/// it, asked about `user` (its key and state directory as arguments), and answers a line.
fn check(root: &Root, b: &bellc_core::render::RenderedBundle, user: &str) -> (i32, String) {
    let key = format!("user:{user}");
    let state = root.state.path().join(user);
    let args = [std::ffi::OsStr::new(&key), state.as_os_str()];
    let out = root.run_with("batch-user", &script(b, "user", user, "check"), &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.stderr.is_empty() && out.status.success(),
        "the check failed or wrote to stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .strip_prefix(&format!("{key}\t"))
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("the check answered no line for {key}: {stdout}"));
    match line.split_once('\t') {
        Some(("in-sync", "")) => (0, String::new()),
        Some(("drifted", how)) => (2, format!("{}\n", how.replace("; ", "\n"))),
        _ => panic!("not an answer: {line}"),
    }
}

fn apply(root: &Root, b: &bellc_core::render::RenderedBundle, user: &str) {
    let out = root.run(user, &script(b, "user", user, "apply"));
    assert!(
        out.status.success(),
        "apply {user} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keys_of(root: &Root, user: &str) -> PathBuf {
    root.path(&format!("home/{user}/.ssh/authorized_keys"))
}

/// One drift: `change` behind bell's back, the check names it, the apply repairs it.
fn drift_and_repair(
    root: &Root,
    b: &bellc_core::render::RenderedBundle,
    user: &str,
    change: impl FnOnce(&Root),
    said: &str,
) {
    change(root);
    assert_eq!(check(root, b, user), (2, format!("{said}\n")));
    apply(root, b, user);
    assert_eq!(
        check(root, b, user),
        (0, String::new()),
        "after repairing: {said}"
    );
}

fn ready() -> bool {
    is_root() && have("useradd") && have("visudo")
}

#[test]
fn drift_in_passwd_shadow_keys_and_sudoers_is_found_and_repaired() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(), "h");
    let root = Root::new(&b);
    assert_eq!(check(&root, &b, "alice").0, 2, "alice does not exist yet");
    for user in ["alice", "bob"] {
        apply(&root, &b, user);
        assert_eq!(
            check(&root, &b, user),
            (0, String::new()),
            "{user} just applied"
        );
    }

    // Asked about both at once, as bell-run asks: one line each, and one sha256sum for the
    // files of both, each digest read back by the right account.
    std::fs::write(keys_of(&root, "alice"), format!("{KEY_A}\n")).expect("write");
    let (alice, bob) = (
        root.state.path().join("alice"),
        root.state.path().join("bob"),
    );
    let args: [&std::ffi::OsStr; 4] = [
        "user:alice".as_ref(),
        alice.as_os_str(),
        "user:bob".as_ref(),
        bob.as_os_str(),
    ];
    let out = root.run_with("batch-user", &script(&b, "user", "bob", "check"), &args);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "user:alice\tdrifted\tauthorized_keys of alice lacks a key of the bundle: {KEY_B}\n\
             user:bob\tin-sync\t\n"
        )
    );
    apply(&root, &b, "alice");

    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| {
            let p = keys_of(r, "alice");
            let mut text = std::fs::read_to_string(&p).expect("read");
            text.push_str("ssh-rsa AAAAB3 intruder@elsewhere\n");
            std::fs::write(&p, text).expect("write");
        },
        "authorized_keys of alice holds a key the bundle does not: ssh-rsa AAAAB3 intruder@elsewhere",
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| std::fs::write(keys_of(r, "alice"), format!("{KEY_B}\n")).expect("write"),
        &format!("authorized_keys of alice lacks a key of the bundle: {KEY_A}"),
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| std::fs::remove_file(r.path("etc/sudoers.d/bell-alice")).expect("rm"),
        "sudoers drop-in /etc/sudoers.d/bell-alice of alice is missing",
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| r.set_field("passwd", "alice", 6, "/bin/sh"),
        "shell of alice is /bin/sh, the bundle sets /bin/bash",
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| r.set_field("shadow", "alice", 7, "1"),
        "alice expires (day 1 since 1970), the bundle clears the expiry",
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |r| r.set_field("shadow", "alice", 1, "!locked"),
        "password hash of alice is not the one the bundle sets",
    );

    // The hash is compared with the one the apply set, which it records private in alice's
    // state: the check itself holds no hash, and is not fooled by a record planted as a link.
    let check_text = script(&b, "user", "alice", "check");
    assert!(
        !check_text.contains(HASH),
        "the accounts' check holds a hash"
    );
    let record = root.state.path().join("alice/password");
    let mode = std::fs::metadata(&record)
        .expect("the record")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the record of the hash is private");
    assert_eq!(
        std::fs::read_to_string(&record).expect("read"),
        format!("{HASH}\n")
    );
    drift_and_repair(
        &root,
        &b,
        "alice",
        |_| std::fs::remove_file(&record).expect("rm"),
        "bell has no record of the password hash it set for alice",
    );
    let elsewhere = root.state.path().join("elsewhere");
    std::fs::write(&elsewhere, format!("{HASH}\n")).expect("write");
    drift_and_repair(
        &root,
        &b,
        "alice",
        |_| {
            std::fs::remove_file(&record).expect("rm");
            std::os::unix::fs::symlink(&elsewhere, &record).expect("symlink");
        },
        "bell has no record of the password hash it set for alice",
    );
    assert!(
        !record.is_symlink(),
        "the apply wrote its record through a planted link"
    );
    assert_eq!(
        std::fs::read_to_string(&elsewhere).expect("read"),
        format!("{HASH}\n")
    );

    // bob has no sudo: a drop-in planted for him is drift, and the apply removes it.
    drift_and_repair(
        &root,
        &b,
        "bob",
        |r| std::fs::write(r.path("etc/sudoers.d/bell-bob"), "bob ALL=(ALL) ALL\n").expect("write"),
        "sudoers drop-in /etc/sudoers.d/bell-bob grants bob sudo, the bundle does not",
    );
    drift_and_repair(
        &root,
        &b,
        "bob",
        |r| r.set_field("passwd", "bob", 6, "/bin/bash"),
        &format!("shell of bob is /bin/bash, the bundle sets {SHELL}"),
    );
    assert!(!root.state.path().join("pwned").exists());
    assert!(!Path::new("pwned").exists());

    // Two differences at once: one line each.
    std::fs::remove_file(keys_of(&root, "bob")).expect("rm");
    root.set_field("shadow", "bob", 7, "20000");
    assert_eq!(
        check(&root, &b, "bob"),
        (
            2,
            "bob expires (day 20000 since 1970), the bundle clears the expiry\nauthorized_keys of bob is missing\n"
                .to_string()
        )
    );
}

#[test]
fn unmanaged_keys_are_left_alone() {
    if !ready() {
        return;
    }
    let spec = "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\nuser \"carol\" {\n    ssh-keys \"unmanaged\"\n}\n";
    let b = bundle(spec, "h");
    let root = Root::new(&b);
    apply(&root, &b, "carol");
    let ssh = root.path("home/carol/.ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("authorized_keys"), format!("{KEY_A}\n")).expect("write");
    assert_eq!(check(&root, &b, "carol"), (0, String::new()));
}

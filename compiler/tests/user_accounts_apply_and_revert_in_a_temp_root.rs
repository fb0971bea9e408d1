//! The rendered user scripts, run with the real shadow tools (`useradd --root` & co.) against a
//! temporary root: create, re-apply without change, expire on revert, purge with
//! `purge-expired=#true`, give back what they changed on an account bell did not create, and
//! expire the default account only behind a user who can take over.

use crate::common::in_memory::{bundle, is_root};
use crate::common::{batch_script, have, script};
use bellc_core::render::RenderedBundle;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";
const KEY_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKSAYsxYiAVlSSWQfmJFmq4RM4FKvKuP5VAtPD6lkEDO alice@example";

fn spec(purge: bool) -> String {
    format!(
        r#"
fleet "f" target="ubuntu-24.04"
host "h"
users purge-expired=#{purge}
user "alice" sudo=#true {{
    password "{HASH}"
    ssh-key "{KEY_A}"
}}
user "olduser" shell="/bin/sh" {{
    ssh-key "{KEY_B}"
}}
"#
    )
}

/// A root with a small account database: root, the target's default account `ubuntu`, and
/// `olduser`, an account that exists before bell.
struct Root {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Root {
    fn new(bundle: &RenderedBundle) -> Root {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        let files = [
            ("etc/passwd", "root:x:0:0:root:/root:/bin/bash\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\nolduser:x:1001:1001::/home/olduser:/bin/bash\n", 0o644),
            ("etc/shadow", "root:*:19000:0:99999:7:::\nubuntu:!:19000:0:99999:7:::\nolduser:!:19000:0:99999:7:::\n", 0o640),
            ("etc/group", "root:x:0:\nsudo:x:27:ubuntu\nubuntu:x:1000:\nolduser:x:1001:\n", 0o644),
            ("etc/gshadow", "root:*::\nsudo:*::ubuntu\nubuntu:!::\nolduser:!::\n", 0o640),
            ("home/olduser/.ssh/authorized_keys", "ssh-rsa AAAA old@before\n", 0o600),
            ("etc/skel/.profile", "# skel\n", 0o644),
        ];
        for (path, text, mode) in files {
            let p = r.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::create_dir_all(r.join("etc/sudoers.d")).unwrap();
        std::fs::create_dir_all(r.join("home/ubuntu")).unwrap();
        let root = Root {
            dir,
            state: tempfile::tempdir().expect("tempdir"),
        };
        root.switch_files(bundle);
        root
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// What bell-run does before the applies: the bundle's managed files land in the root.
    fn switch_files(&self, bundle: &RenderedBundle) {
        for (path, bytes) in &bundle.contents {
            if let Some(host_path) = path.strip_prefix("root/") {
                let p = self.path(host_path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, bytes).unwrap();
            }
        }
    }

    /// Runs a script as bell-run does, offline, on a fixed day (the shadow lines it writes do not
    /// depend on when the test runs); the exit status and stderr.
    fn run(&self, resource: &str, text: &str) -> (bool, String) {
        let file = self.state.path().join("script.sh");
        std::fs::write(&file, text).unwrap();
        let out = Command::new("sh")
            .arg(&file)
            .env("BELL_ROOT", self.dir.path())
            .env("BELL_STATE", self.state.path().join(resource))
            .env("BELL_OFFLINE", "1")
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .output()
            .expect("sh");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, resource: &str, text: &str) {
        let (ok, stderr) = self.run(resource, text);
        assert!(ok, "{resource} failed: {stderr}");
    }

    fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.path(p)).unwrap_or_default()
    }

    /// The fields of an account's line in etc/passwd or etc/shadow.
    fn entry(&self, db: &str, user: &str) -> Option<Vec<String>> {
        self.read(&format!("etc/{db}"))
            .lines()
            .map(|l| l.split(':').map(String::from).collect::<Vec<_>>())
            .find(|f| f[0] == user)
    }
}

fn ready() -> bool {
    is_root() && have("useradd") && have("visudo")
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_new_account_is_created_kept_and_expired() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(false), "h");
    let root = Root::new(&b);
    let apply = script(&b, "user", "alice", "apply");
    root.ok("alice", &apply);

    let passwd = root.entry("passwd", "alice").expect("alice exists");
    let shadow = root.entry("shadow", "alice").unwrap();
    assert_eq!(shadow[1], HASH);
    assert_eq!(shadow[7], "", "not expired");
    let uid: u32 = passwd[2].parse().unwrap();
    let home = root.path(passwd[5].trim_start_matches('/'));
    let ssh = home.join(".ssh");
    let keys = ssh.join("authorized_keys");
    assert_eq!(
        std::fs::read_to_string(&keys).unwrap(),
        format!("{KEY_A}\n")
    );
    assert_eq!(mode(&ssh), 0o700);
    assert_eq!(mode(&keys), 0o600);
    assert_eq!(std::fs::metadata(&keys).unwrap().uid(), uid);
    assert_eq!(std::fs::metadata(&ssh).unwrap().uid(), uid);
    let dropin = root.path("etc/sudoers.d/bell-alice");
    assert_eq!(
        std::fs::read_to_string(&dropin).unwrap(),
        root.read("var/lib/bell/sudoers/alice")
    );
    assert_eq!(mode(&dropin), 0o440);
    let out = Command::new("visudo")
        .args(["-c", "-f"])
        .arg(&dropin)
        .output()
        .unwrap();
    assert!(out.status.success());

    // Unchanged re-apply: nothing is rewritten.
    let before = (
        root.read("etc/passwd"),
        root.read("etc/shadow"),
        root.read("etc/group"),
        std::fs::metadata(&keys).unwrap().ino(),
        std::fs::metadata(&dropin).unwrap().ino(),
    );
    root.ok("alice", &apply);
    let after = (
        root.read("etc/passwd"),
        root.read("etc/shadow"),
        root.read("etc/group"),
        std::fs::metadata(&keys).unwrap().ino(),
        std::fs::metadata(&dropin).unwrap().ino(),
    );
    assert_eq!(before, after);

    // Revert: expired and locked, not removed; the drop-in goes.
    root.ok("alice", &script(&b, "user", "alice", "revert"));
    let shadow = root.entry("shadow", "alice").expect("alice is kept");
    assert_eq!(shadow[7], "1", "expired");
    assert!(shadow[1].starts_with('!'), "locked: {}", shadow[1]);
    assert!(!dropin.exists());
    assert!(home.exists());

    // Back in the spec: usable again.
    root.ok("alice", &apply);
    let shadow = root.entry("shadow", "alice").unwrap();
    assert_eq!((shadow[1].as_str(), shadow[7].as_str()), (HASH, ""));
}

#[test]
fn purge_expired_removes_the_account_and_its_home() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(true), "h");
    let root = Root::new(&b);
    root.ok("alice", &script(&b, "user", "alice", "apply"));
    let home = root.path("home/alice");
    assert!(home.join(".ssh/authorized_keys").exists());
    root.ok("alice", &script(&b, "user", "alice", "revert"));
    assert_eq!(root.entry("passwd", "alice"), None);
    assert_eq!(root.entry("shadow", "alice"), None);
    assert!(!home.exists(), "the home directory is removed");
}

#[test]
fn an_account_bell_did_not_create_is_given_back_never_expired() {
    if !ready() {
        return;
    }
    // Even with purge-expired, an account that existed before bell stays.
    let b = bundle(&spec(true), "h");
    let root = Root::new(&b);
    let shadow_before = root.entry("shadow", "olduser").unwrap();
    root.ok("olduser", &script(&b, "user", "olduser", "apply"));
    assert_eq!(root.entry("passwd", "olduser").unwrap()[6], "/bin/sh");
    assert_eq!(
        root.read("home/olduser/.ssh/authorized_keys"),
        format!("{KEY_B}\n")
    );
    root.ok("olduser", &script(&b, "user", "olduser", "revert"));
    assert_eq!(root.entry("passwd", "olduser").unwrap()[6], "/bin/bash");
    assert_eq!(root.entry("shadow", "olduser").unwrap(), shadow_before);
    assert_eq!(
        root.read("home/olduser/.ssh/authorized_keys"),
        "ssh-rsa AAAA old@before\n"
    );
}

#[test]
fn a_symlinked_ssh_directory_is_refused() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(false), "h");
    let root = Root::new(&b);
    let victim = root.path("etc/victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::remove_dir_all(root.path("home/olduser/.ssh")).unwrap();
    std::os::unix::fs::symlink(&victim, root.path("home/olduser/.ssh")).unwrap();
    let (ok, stderr) = root.run("olduser", &script(&b, "user", "olduser", "apply"));
    assert!(!ok);
    assert!(stderr.contains("is a symlink"), "{stderr}");
    assert!(std::fs::read_dir(&victim).unwrap().next().is_none());
}

#[test]
fn the_default_account_is_expired_and_given_back() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(false), "h");
    let resource = b
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == "default-account")
        .expect("alice can take over, so ubuntu is expired");
    assert_eq!(resource.name, "ubuntu");
    assert_eq!(resource.after, ["user:alice"]);
    let root = Root::new(&b);
    root.ok("ubuntu", &script(&b, "default-account", "ubuntu", "apply"));
    assert_eq!(root.entry("shadow", "ubuntu").unwrap()[7], "1");

    // The check: in sync now; drifted once someone re-enables the account behind bell's back.
    let check = script(&b, "default-account", "ubuntu", "check");
    root.ok("ubuntu", &check);
    let unexpired = Command::new("usermod")
        .args(["--root"])
        .arg(root.dir.path())
        .args(["--expiredate", "", "ubuntu"])
        .status()
        .expect("usermod");
    assert!(unexpired.success());
    let file = root.state.path().join("check.sh");
    std::fs::write(&file, &check).unwrap();
    let out = Command::new("sh")
        .arg(&file)
        .env("BELL_ROOT", root.dir.path())
        .env("BELL_STATE", root.state.path().join("ubuntu"))
        .env("BELL_OFFLINE", "1")
        .output()
        .expect("sh");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "account ubuntu is no longer expired (expiry field empty)\n"
    );
    root.ok("ubuntu", &script(&b, "default-account", "ubuntu", "apply"));
    root.ok("ubuntu", &check);

    root.ok("ubuntu", &script(&b, "default-account", "ubuntu", "revert"));
    assert_eq!(root.entry("shadow", "ubuntu").unwrap()[7], "");
}

#[test]
fn hostile_key_comments_and_shells_stay_literal() {
    if !ready() {
        return;
    }
    let comment = r#"it's "$(touch pwned)" `touch pwned2` ${HOME} \ ;"#;
    let shell = "/bin/it's $(touch pwned3)";
    let key = format!("{} {comment}", &KEY_A[..KEY_A.rfind(' ').unwrap()]);
    let text = format!(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\nuser \"mallory\" shell=\"{}\" {{\n    ssh-key \"{}\"\n}}\n",
        shell.replace('\\', "\\\\").replace('"', "\\\""),
        key.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let b = bundle(&text, "h");
    let root = Root::new(&b);
    let cwd = tempfile::tempdir().unwrap();
    let file = cwd.path().join("apply.sh");
    std::fs::write(&file, script(&b, "user", "mallory", "apply")).unwrap();
    let out = Command::new("sh")
        .arg(&file)
        .current_dir(cwd.path())
        .env("BELL_ROOT", root.dir.path())
        .env("BELL_STATE", root.state.path().join("mallory"))
        .env("BELL_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        root.read("home/mallory/.ssh/authorized_keys"),
        format!("{key}\n")
    );
    assert_eq!(root.entry("passwd", "mallory").unwrap()[6], shell);
    let created: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert_eq!(
        created.len(),
        1,
        "only the script is in the working directory"
    );
}

/// Divingbell's gate: users removed from the spec are expired with their homes kept; a later
/// release that turns `purge-expired` on removes those accounts, never one bell did not create,
/// one the spec took back, or one someone made again under the same name.
#[test]
fn a_later_purge_removes_accounts_expired_earlier() {
    if !ready() {
        return;
    }
    let before = bundle(&spec(false), "h");
    let root = Root::new(&before);
    for user in ["alice", "olduser"] {
        root.ok(user, &script(&before, "user", user, "apply"));
    }
    // Both leave the spec while purging is off: alice (bell's) is expired, olduser given back.
    for user in ["alice", "olduser"] {
        root.ok(user, &script(&before, "user", user, "revert"));
    }
    assert_eq!(root.entry("shadow", "alice").unwrap()[7], "1");
    assert!(root.path("home/alice").exists());
    // A release without users, purging on.
    let later = bundle(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\nusers purge-expired=#true\n",
        "h",
    );
    let check = script(&later, "users", "purge-expired", "check");
    let (in_sync, _) = root.run("users", &check);
    assert!(!in_sync, "the expired account is drift until purged");
    root.ok("users", &script(&later, "users", "purge-expired", "apply"));
    assert_eq!(root.entry("passwd", "alice"), None);
    assert!(!root.path("home/alice").exists(), "the home goes too");
    assert!(root.entry("passwd", "olduser").is_some(), "not bell's");
    root.ok("users", &check);
    // Nothing left to do: the purge again changes nothing.
    let passwd = root.read("etc/passwd");
    root.ok("users", &script(&later, "users", "purge-expired", "apply"));
    assert_eq!(root.read("etc/passwd"), passwd);
}

#[test]
fn a_purge_spares_accounts_taken_back_or_made_again() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(false), "h");
    let later = bundle(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\nusers purge-expired=#true\n",
        "h",
    );
    let purge = script(&later, "users", "purge-expired", "apply");
    // Taken back: expired, then in the spec again before the purge.
    let root = Root::new(&b);
    let apply = script(&b, "user", "alice", "apply");
    root.ok("alice", &apply);
    root.ok("alice", &script(&b, "user", "alice", "revert"));
    root.ok("alice", &apply);
    root.ok("users", &purge);
    assert_eq!(
        root.entry("shadow", "alice").unwrap()[7],
        "",
        "alice is back"
    );
    // ...and still bell's: leaving again expires it, and a purge then removes it.
    root.ok("alice", &script(&b, "user", "alice", "revert"));
    root.ok("users", &purge);
    assert_eq!(root.entry("passwd", "alice"), None);

    // Made again by someone else under the same name (another uid): not bell's to remove.
    let root = Root::new(&b);
    root.ok("alice", &apply);
    root.ok("alice", &script(&b, "user", "alice", "revert"));
    Command::new("userdel")
        .args(["--root"])
        .arg(root.dir.path())
        .arg("alice")
        .status()
        .unwrap();
    Command::new("useradd")
        .args(["--root"])
        .arg(root.dir.path())
        .args(["--uid", "4242", "--expiredate", "1970-01-02", "alice"])
        .status()
        .unwrap();
    root.ok("users", &purge);
    assert!(
        root.entry("passwd", "alice").is_some(),
        "someone else's alice stays"
    );
}

impl Root {
    /// Runs the batch's apply as [`Root::run`] runs a script, for `accounts` (each with a state
    /// directory of its own); its stdout.
    fn run_batch(&self, text: &str, accounts: &[&str]) -> String {
        self.run_batch_with(
            text,
            accounts,
            &std::env::var_os("PATH").unwrap_or_default(),
        )
    }

    /// [`Root::run_batch`] with `path` for PATH.
    fn run_batch_with(&self, text: &str, accounts: &[&str], path: &std::ffi::OsStr) -> String {
        let file = self.state.path().join("batch.sh");
        std::fs::write(&file, text).unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg(&file);
        for account in accounts {
            let state = self.state.path().join(account);
            std::fs::create_dir_all(&state).unwrap();
            cmd.arg(format!("user:{account}")).arg(state);
        }
        let out = cmd
            .env("PATH", path)
            .env("BELL_ROOT", self.dir.path())
            .env("BELL_STATE", self.state.path().join("batch"))
            .env("BELL_OFFLINE", "1")
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the accounts' applies leave: the databases, every entry under home/ and
    /// etc/sudoers.d (type, mode, owner, content), and each account's state.
    fn accounts(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for db in ["etc/passwd", "etc/shadow", "etc/group", "etc/gshadow"] {
            seen.push(format!("{db}: {}", self.read(db)));
        }
        let mut walk = vec![self.path("home"), self.path("etc/sudoers.d")];
        for account in ["alice", "olduser"] {
            walk.push(self.state.path().join(account));
        }
        while let Some(dir) = walk.pop() {
            let mut entries: Vec<_> = std::fs::read_dir(&dir)
                .map(|d| d.map(|e| e.unwrap().path()).collect())
                .unwrap_or_default();
            entries.sort();
            for p in entries {
                let meta = std::fs::symlink_metadata(&p).unwrap();
                let what = if meta.is_dir() {
                    walk.push(p.clone());
                    String::new()
                } else {
                    std::fs::read_to_string(&p).unwrap_or_default()
                };
                let name = p
                    .strip_prefix(self.dir.path())
                    .or_else(|_| p.strip_prefix(self.state.path()))
                    .unwrap();
                seen.push(format!(
                    "{} {:o} {} {what}",
                    name.display(),
                    meta.permissions().mode(),
                    meta.uid()
                ));
            }
        }
        seen
    }
}

/// The batch's answers, `KEY\tSTATUS`, without their notes (this root has no login.defs and
/// no shells: `accounts_checked_against_the_image` reads those). Lines without a tab are the
/// tools' output, the batch's log.
fn answers(said: &str) -> Vec<String> {
    said.lines()
        .filter(|l| l.contains('\t'))
        .map(|l| l.splitn(3, '\t').take(2).collect::<Vec<_>>().join("\t"))
        .collect()
}

#[test]
fn the_batch_apply_makes_each_account_as_its_own_apply_and_a_failing_one_stops_only_itself() {
    if !ready() {
        return;
    }
    let b = bundle(&spec(false), "h");
    let batch = batch_script(&b, "user", "apply");

    // Each account by its own apply, and both by one run of the batch's: the same root.
    let own = Root::new(&b);
    for account in ["alice", "olduser"] {
        own.ok(account, &script(&b, "user", account, "apply"));
    }
    let together = Root::new(&b);
    let said = together.run_batch(&batch, &["alice", "olduser"]);
    // Lines without a tab are the tools' output, the batch's log.
    let lines = answers(&said);
    assert_eq!(lines, ["user:alice\tok", "user:olduser\tok"], "{said}");
    assert_eq!(together.accounts(), own.accounts());
    assert!(together.entry("passwd", "alice").is_some());

    // olduser's ~/.ssh planted as a link out of the root: its apply fails, saying why, and
    // writes nothing through it; alice is made all the same.
    let planted = Root::new(&b);
    let victim = planted.path("etc/victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::remove_dir_all(planted.path("home/olduser/.ssh")).unwrap();
    std::os::unix::fs::symlink(&victim, planted.path("home/olduser/.ssh")).unwrap();
    let said = planted.run_batch(&batch, &["olduser", "alice", "nobody"]);
    let lines: Vec<&str> = said.lines().filter(|l| l.contains('\t')).collect();
    assert_eq!(lines.len(), 3, "{said}");
    assert!(
        lines[0].starts_with("user:olduser\tfailed\t") && lines[0].contains("is a symlink"),
        "{said}"
    );
    assert_eq!(answers(lines[1]), ["user:alice\tok"], "{said}");
    assert_eq!(
        lines[2],
        "user:nobody\tfailed\tnot an account of this bundle"
    );
    assert!(std::fs::read_dir(&victim).unwrap().next().is_none());
    assert!(planted.entry("passwd", "alice").is_some());
}

/// Where `tool` is on PATH (and the sbin directories a non-root PATH may lack).
fn find_tool(tool: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{tool} not found"))
}

#[test]
fn the_batch_checks_every_drop_in_with_one_visudo_and_still_names_a_rejected_one() {
    if !ready() {
        return;
    }
    let b = bundle(
        &format!(
            r#"
fleet "f" target="ubuntu-24.04"
host "h"
user "alice" sudo=#true {{
    password "{HASH}"
}}
user "carol" sudo="ALL=(root) /usr/bin/systemctl"
"#
        ),
        "h",
    );
    let batch = batch_script(&b, "user", "apply");
    // visudo behind a shim that counts its runs.
    let shim = tempfile::tempdir().expect("tempdir");
    let log = shim.path().join("runs");
    let visudo = shim.path().join("visudo");
    std::fs::write(
        &visudo,
        format!(
            "#!/bin/sh\necho \"$*\" >>'{}'\nexec '{}' \"$@\"\n",
            log.display(),
            find_tool("visudo").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&visudo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(shim.path().to_path_buf())
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            ))
            .chain(["/usr/sbin".into(), "/sbin".into()]),
    )
    .unwrap();
    let runs = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        std::fs::remove_file(&log).ok();
        text.lines().count()
    };

    let root = Root::new(&b);
    let said = root.run_batch_with(&batch, &["alice", "carol"], &path);
    let lines = answers(&said);
    assert_eq!(lines, ["user:alice\tok", "user:carol\tok"], "{said}");
    assert_eq!(runs(), 1, "one visudo for both drop-ins");
    for user in ["alice", "carol"] {
        let dropin = root.read(&format!("etc/sudoers.d/bell-{user}"));
        assert!(dropin.contains(&format!("{user} ")), "{user}: {dropin}");
    }

    // carol's staged drop-in broken: the whole is rejected, so each is checked alone; carol's
    // apply fails naming it, alice's lands, and no broken drop-in reaches sudoers.d.
    let root = Root::new(&b);
    std::fs::write(
        root.path("var/lib/bell/sudoers/carol"),
        "carol ALL=(root) NOPASS: ALL\n",
    )
    .unwrap();
    let said = root.run_batch_with(&batch, &["alice", "carol"], &path);
    let lines: Vec<&str> = said.lines().filter(|l| l.contains('\t')).collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert_eq!(answers(lines[0]), ["user:alice\tok"], "{said}");
    assert!(
        lines[1].starts_with("user:carol\tfailed\tvisudo rejects"),
        "{said}"
    );
    assert_eq!(runs(), 3, "the whole, then each alone");
    assert!(root.read("etc/sudoers.d/bell-alice").contains("alice "));
    assert!(!root.path("etc/sudoers.d/bell-carol").exists());
}

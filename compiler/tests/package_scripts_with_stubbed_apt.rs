//! The rendered package scripts, run by a real shell with `apt-get`, `dpkg-query`,
//! `debconf-set-selections` and `dpkg-reconfigure` replaced on PATH by stubs that keep a tiny
//! package database and log every call. (The real apt runs in the VM end-to-end test.)

use crate::common::in_memory::bundle;
use crate::common::script;
use bellc_core::render::RenderedBundle;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const SPEC: &str = r#"
fleet "f" target="ubuntu-24.04"
host "h"
host "down" downgrade="yes"
package "openssh-server" version="1:9.6p1-3ubuntu13" {
    debconf "openssh-server/permit-root-login" type="boolean" value=#false
}
package "htop"
package "telnetd" absent=#true
override "downgrades" {
    match downgrade="yes"
    apt allow-downgrade=#true
}
"#;

/// `dpkg-query -W -f=FORMAT PKG`: `installed VERSION` from $FAKE_DB/PKG, else `not-installed `.
const DPKG_QUERY: &str = r#"#!/bin/sh
for pkg; do :; done
echo "dpkg-query $pkg" >>"$FAKE_LOG"
if [ -f "$FAKE_DB/$pkg" ]; then echo "installed $(cat "$FAKE_DB/$pkg")"; else echo "not-installed "; fi
"#;

/// `apt-get [options] install|purge|remove PKG[=VERSION]...`; `FAKE_WRONG` installs 0.0-bad.
const APT_GET: &str = r#"#!/bin/sh
echo "apt-get $*" >>"$FAKE_LOG"
op=
for a; do
    case $a in
        -o) skip=1; continue ;;
        -*) continue ;;
    esac
    if [ "${skip:-}" = 1 ]; then skip=; continue; fi
    if [ -z "$op" ]; then op=$a; continue; fi
    case $op in
        install)
            pkg=${a%%=*}
            case $a in *=*) v=${a#*=} ;; *) v=1.0-1 ;; esac
            if [ -n "${FAKE_WRONG:-}" ]; then v=0.0-bad; fi
            echo "$v" >"$FAKE_DB/$pkg" ;;
        purge|remove) rm -f "$FAKE_DB/$a" ;;
    esac
done
"#;

const LOGGER: &str = r#"#!/bin/sh
echo "$(basename "$0") $*" >>"$FAKE_LOG"
"#;

struct Host {
    root: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Host {
    fn new(bundle: &RenderedBundle) -> Host {
        let host = Host {
            root: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        };
        let w = host.work.path();
        for (name, text) in [
            ("dpkg-query", DPKG_QUERY),
            ("apt-get", APT_GET),
            ("debconf-set-selections", LOGGER),
            ("dpkg-reconfigure", LOGGER),
        ] {
            let p = w.join("bin").join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::create_dir_all(w.join("db")).unwrap();
        std::fs::write(w.join("log"), "").unwrap();
        for (path, bytes) in &bundle.contents {
            if let Some(host_path) = path.strip_prefix("root/") {
                let p = host.root.path().join(host_path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, bytes).unwrap();
            }
        }
        host
    }

    fn install(&self, pkg: &str, version: &str) {
        std::fs::write(
            self.work.path().join("db").join(pkg),
            format!("{version}\n"),
        )
        .unwrap();
    }

    fn version(&self, pkg: &str) -> Option<String> {
        std::fs::read_to_string(self.work.path().join("db").join(pkg))
            .ok()
            .map(|v| v.trim().to_string())
    }

    /// Runs a script; its success, stderr, and the tool calls it made (dpkg-query left out).
    fn run(&self, name: &str, text: &str, env: &[(&str, &str)]) -> (bool, String, Vec<String>) {
        let w = self.work.path();
        let log = w.join("log");
        std::fs::write(&log, "").unwrap();
        let file = w.join("script.sh");
        std::fs::write(&file, text).unwrap();
        let path = format!(
            "{}:{}",
            w.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("sh");
        cmd.arg(&file)
            .env("PATH", path)
            .env("BELL_ROOT", self.root.path())
            .env("BELL_STATE", w.join("state").join(name))
            .env("FAKE_DB", w.join("db"))
            .env("FAKE_LOG", &log)
            .env_remove("BELL_OFFLINE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let calls = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("dpkg-query"))
            .map(|l| l.replace(&self.root.path().display().to_string(), "ROOT"))
            .collect();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            calls,
        )
    }

    /// Runs a check script: its exit code and what it printed.
    fn check(&self, name: &str, text: &str) -> (Option<i32>, String) {
        let w = self.work.path();
        let file = w.join("check.sh");
        std::fs::write(&file, text).unwrap();
        let path = format!(
            "{}:{}",
            w.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = Command::new("sh")
            .arg(&file)
            .env("PATH", path)
            .env("BELL_ROOT", self.root.path())
            .env("BELL_STATE", w.join("state").join(name))
            .env("FAKE_DB", w.join("db"))
            .env("FAKE_LOG", w.join("log"))
            .env("BELL_OFFLINE", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn ok(&self, name: &str, text: &str) -> Vec<String> {
        let (ok, stderr, calls) = self.run(name, text, &[]);
        assert!(ok, "{name} failed: {stderr}");
        calls
    }
}

const OPTS: &str = "-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold";

#[test]
fn a_pinned_package_is_installed_after_its_answers_and_kept_on_reapply() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    let apply = script(&b, "package", "openssh-server", "apply");
    let calls = host.ok("openssh-server", &apply);
    assert_eq!(
        calls,
        [
            "debconf-set-selections ROOT/var/lib/bell/debconf/openssh-server.seed".to_string(),
            format!("apt-get {OPTS} install openssh-server=1:9.6p1-3ubuntu13"),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(
            host.root
                .path()
                .join("var/lib/bell/debconf/openssh-server.seed")
        )
        .unwrap(),
        "openssh-server openssh-server/permit-root-login boolean false\n"
    );
    assert_eq!(
        host.version("openssh-server").as_deref(),
        Some("1:9.6p1-3ubuntu13")
    );
    // Divingbell purged pinned packages on a re-run; an unchanged re-apply does nothing.
    assert_eq!(host.ok("openssh-server", &apply), Vec::<String>::new());
    assert_eq!(
        host.version("openssh-server").as_deref(),
        Some("1:9.6p1-3ubuntu13")
    );
    // Bell installed it, so the revert removes it.
    let calls = host.ok(
        "openssh-server",
        &script(&b, "package", "openssh-server", "revert"),
    );
    assert_eq!(calls, [format!("apt-get {OPTS} remove openssh-server")]);
    assert_eq!(host.version("openssh-server"), None);
}

#[test]
fn a_package_that_was_there_before_is_never_removed() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    host.install("htop", "3.3.0-4");
    assert_eq!(
        host.ok("htop", &script(&b, "package", "htop", "apply")),
        Vec::<String>::new()
    );
    assert_eq!(
        host.ok("htop", &script(&b, "package", "htop", "revert")),
        Vec::<String>::new()
    );
    assert_eq!(host.version("htop").as_deref(), Some("3.3.0-4"));

    // Pinned at another version: upgraded, and still kept by the revert.
    host.install("openssh-server", "1:9.0p1-1");
    let calls = host.ok(
        "openssh-server",
        &script(&b, "package", "openssh-server", "apply"),
    );
    assert_eq!(
        calls.last().unwrap(),
        &format!("apt-get {OPTS} install openssh-server=1:9.6p1-3ubuntu13")
    );
    let calls = host.ok(
        "openssh-server",
        &script(&b, "package", "openssh-server", "revert"),
    );
    assert_eq!(calls, Vec::<String>::new());
    assert!(host.version("openssh-server").is_some());
}

#[test]
fn an_absent_package_is_purged_and_never_installed() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    let apply = script(&b, "package", "telnetd", "apply");
    host.install("telnetd", "0.17-44");
    assert_eq!(
        host.ok("telnetd", &apply),
        [format!("apt-get {OPTS} purge telnetd")]
    );
    assert_eq!(host.version("telnetd"), None);
    assert_eq!(host.ok("telnetd", &apply), Vec::<String>::new());
    assert_eq!(
        host.ok("telnetd", &script(&b, "package", "telnetd", "revert")),
        Vec::<String>::new()
    );
    assert_eq!(host.version("telnetd"), None);
}

#[test]
fn downgrades_are_allowed_only_when_apt_says_so() {
    let strict = bundle(SPEC, "h");
    let allowing = bundle(SPEC, "down");
    for (b, flag) in [(&strict, false), (&allowing, true)] {
        let host = Host::new(b);
        host.install("openssh-server", "1:9.9p1-1");
        let calls = host.ok(
            "openssh-server",
            &script(b, "package", "openssh-server", "apply"),
        );
        let install = calls.iter().find(|c| c.starts_with("apt-get")).unwrap();
        assert_eq!(install.contains("--allow-downgrades"), flag, "{install}");
    }
}

#[test]
fn an_install_that_does_not_take_fails_with_a_reason() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    let (ok, stderr, _) = host.run(
        "openssh-server",
        &script(&b, "package", "openssh-server", "apply"),
        &[("FAKE_WRONG", "1")],
    );
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "bell: package:openssh-server: openssh-server is at '0.0-bad', not 1:9.6p1-3ubuntu13"
    );
}

#[test]
fn new_answers_reconfigure_an_installed_package() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    host.install("openssh-server", "1:9.6p1-3ubuntu13");
    let calls = host.ok(
        "openssh-server",
        &script(&b, "package", "openssh-server", "apply"),
    );
    assert_eq!(
        calls,
        [
            "debconf-set-selections ROOT/var/lib/bell/debconf/openssh-server.seed",
            "dpkg-reconfigure -f noninteractive openssh-server"
        ]
    );
}

#[test]
fn offline_packages_pass_only_when_the_image_already_matches() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    let apply = script(&b, "package", "htop", "apply");
    let (ok, stderr, calls) = host.run("htop", &apply, &[("BELL_OFFLINE", "1")]);
    assert!(!ok);
    assert!(
        stderr.contains("installing htop needs a live host"),
        "{stderr}"
    );
    assert_eq!(calls, Vec::<String>::new());
    host.install("htop", "3.3.0-4");
    let (ok, stderr, calls) = host.run("htop-2", &apply, &[("BELL_OFFLINE", "1")]);
    assert!(ok, "{stderr}");
    assert_eq!(calls, Vec::<String>::new());
}

#[test]
fn the_check_reports_a_package_changed_behind_bells_back() {
    let b = bundle(SPEC, "h");
    let host = Host::new(&b);
    let check = script(&b, "package", "openssh-server", "check");
    assert_eq!(
        host.check("openssh-server", &check),
        (
            Some(2),
            "openssh-server is not installed (not-installed )\n".to_string()
        )
    );
    host.ok(
        "openssh-server",
        &script(&b, "package", "openssh-server", "apply"),
    );
    assert_eq!(
        host.check("openssh-server", &check),
        (Some(0), String::new())
    );
    // Someone upgrades it by hand: the pin is no longer met.
    host.install("openssh-server", "1:9.9p1-1");
    assert_eq!(
        host.check("openssh-server", &check),
        (
            Some(2),
            "openssh-server is at 1:9.9p1-1, the bundle pins 1:9.6p1-3ubuntu13\n".to_string()
        )
    );
    // An absent package that comes back is drift too.
    let telnetd = script(&b, "package", "telnetd", "check");
    assert_eq!(host.check("telnetd", &telnetd), (Some(0), String::new()));
    host.install("telnetd", "0.17-44");
    let (code, said) = host.check("telnetd", &telnetd);
    assert_eq!(code, Some(2));
    assert!(
        said.starts_with("telnetd should be absent but is installed 0.17-44"),
        "{said}"
    );
}

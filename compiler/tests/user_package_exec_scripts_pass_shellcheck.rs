//! Every apply/revert script and trigger that the user, package, apt, apt-source, kernel-args
//! and modprobe kinds
//! render for the examples passes shellcheck as POSIX sh; every staged sudoers drop-in passes
//! `visudo -c`.

use crate::common;
use crate::common::have;
use crate::common::in_memory::example;
use std::process::Command;

const KINDS: &[&str] = &[
    "scripts/user/",
    "scripts/default-account/",
    "scripts/package/",
    "scripts/apt/",
    "scripts/trigger/apt-update",
    "scripts/kernel-args/",
    "scripts/modprobe/",
    "scripts/batch/",
    "scripts/live/",
];

const SOURCES: &str = r#"
fleet "f" target="debian-12"
host "h"
apt upgrade=#true allow-downgrade=#true
apt-source "vendor" url="https://deb.example/debian" suites="bookworm bookworm-updates" components="main" {
    key "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGV\n-----END PGP PUBLIC KEY BLOCK-----\n"
}
package "htop"
"#;

/// Pinned to a snapshot: apt reads only the release's sources, in every script that runs it.
const PINNED: &str = r#"
fleet "f" target="debian-12"
host "h" address="10.0.0.1"
apt upgrade=#true
apt-source "debian" url="http://snapshot.debian.org/archive/debian/{snapshot}" snapshot="20261120T000000Z" suites="bookworm" components="main"
apt-source "vendor" url="https://deb.example/debian" suites="./"
package "htop"
kernel-args "hugepages" {
    arg "hugepagesz=1G"
    arg "hugepages=16"
    remove "quiet"
}
kernel-args "only-remove" {
    remove "splash"
}
kernel-args "only-add" {
    arg "nosmt"
}
modprobe "snd-pcsp" blacklist=#true
override "web" {
    match host="h"
    service "web" port=8080
}
live "/etc/hap'roxy/back ends.cfg" service="web" owner="haproxy" reload-timeout="5s" {
    template "{% for s in services.web %}server {{ s.host }}\n{% endfor %}"
    reload "systemctl reload 'haproxy' && echo \"$(date)\" >/dev/null"
}
live "/etc/quiet.cfg" service="web" {
    template "{{ services.web | length }}"
}
"#;

#[test]
fn rendered_scripts_pass_shellcheck() {
    if !have("shellcheck") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    let mut bundles: Vec<bellc_core::render::RenderedBundle> = ["divingbell.kdl", "three-role.kdl"]
        .iter()
        .flat_map(|e| example(e).bundles.into_values())
        .collect();
    bundles.push(common::in_memory::bundle(SOURCES, "h"));
    bundles.push(common::in_memory::bundle(PINNED, "h"));
    for bundle in &bundles {
        for (path, bytes) in &bundle.contents {
            if !KINDS.iter().any(|k| path.starts_with(k)) {
                continue;
            }
            let file = dir.path().join(format!("{checked}.sh"));
            std::fs::write(&file, bytes).expect("write");
            let out = Command::new("shellcheck")
                .args(["--shell=sh", "--severity=style"])
                .arg(&file)
                .output()
                .expect("shellcheck");
            assert!(
                out.status.success(),
                "shellcheck rejects {path}:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
            checked += 1;
        }
    }
    // user, default-account, package apply+revert from the examples, plus apt and the trigger.
    assert!(checked >= 33, "only {checked} scripts checked");
}

#[test]
fn staged_sudoers_dropins_pass_visudo() {
    if !have("visudo") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for bundle in example("divingbell.kdl").bundles.values() {
        for (path, bytes) in &bundle.contents {
            if !path.starts_with("root/var/lib/bell/sudoers/") {
                continue;
            }
            let file = dir.path().join("dropin");
            std::fs::write(&file, bytes).expect("write");
            let out = Command::new("visudo")
                .args(["-c", "-f"])
                .arg(&file)
                .output()
                .expect("visudo");
            assert!(
                out.status.success(),
                "visudo rejects {path}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "the divingbell example has a sudo user");
}

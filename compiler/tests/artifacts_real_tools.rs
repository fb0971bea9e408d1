//! Every artifact the examples emit, read by the real tool that will consume it on the host:
//! shellcheck for every script (ours as POSIX sh, exec scripts with the shell their shebang
//! names), `systemd-analyze verify` for every unit (whose file name must round-trip through
//! `systemd-escape` for mounts), `apparmor_parser` for every profile and `visudo -c` for every
//! sudoers file. The walk is generic, so kinds added later are covered too.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn build(example: &str) -> tempfile::TempDir {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let (compiled, lines) = compile_path(&spec, None);
    let compiled = compiled.unwrap_or_else(|| panic!("{example}:\n{}", lines.join("\n")));
    let out = tempfile::tempdir().expect("temp dir");
    bellc_core::emit::write(out.path(), &compiled.bundles, &compiled.release).expect("emit");
    out
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect()
}

fn bundles(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join("bundles"))
        .expect("bundles dir")
        .map(|e| e.expect("entry").path())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty());
    dirs
}

fn check(cmd: &mut Command, what: &Path) {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{:?} rejects {}:\n{}{}",
        cmd.get_program(),
        what.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn shell_of(script: &Path) -> Option<&'static str> {
    let text = std::fs::read_to_string(script).expect("read script");
    let first = text.lines().next().unwrap_or("");
    match first.trim_end() {
        "#!/bin/sh" | "#!/usr/bin/env sh" => Some("sh"),
        "#!/bin/bash" | "#!/usr/bin/env bash" | "#!/usr/bin/bash" => Some("bash"),
        other => {
            eprintln!(
                "note: {} has shebang {other:?}, which shellcheck does not read",
                script.display()
            );
            None
        }
    }
}

fn scripts_pass_shellcheck(out: &Path) -> usize {
    let mut n = 0;
    for bundle in bundles(out) {
        for script in files_under(&bundle.join("scripts")) {
            let Some(shell) = shell_of(&script) else {
                continue;
            };
            check(
                Command::new("shellcheck").args(["-s", shell]).arg(&script),
                &script,
            );
            n += 1;
        }
    }
    n
}

fn units_pass_systemd_analyze(out: &Path) -> usize {
    let mut n = 0;
    for bundle in bundles(out) {
        let unit_dir = bundle.join("root/etc/systemd/system");
        let units: Vec<PathBuf> = files_under(&unit_dir)
            .into_iter()
            .filter(|p| p.parent() == Some(unit_dir.as_path()))
            .collect();
        if units.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let mut copies = Vec::new();
        for unit in &units {
            let name = unit.file_name().expect("name");
            let copy = dir.path().join(name);
            std::fs::copy(unit, &copy).expect("copy unit");
            copies.push(copy);
            let text = std::fs::read_to_string(unit).expect("read unit");
            if let Some(wher) = text.lines().find_map(|l| l.strip_prefix("Where=")) {
                let escaped = Command::new("systemd-escape")
                    .args(["--path", "--suffix=mount", &wher.replace("%%", "%")])
                    .output()
                    .expect("systemd-escape");
                assert_eq!(
                    String::from_utf8_lossy(&escaped.stdout).trim_end(),
                    name.to_string_lossy(),
                    "mount unit name does not match its Where="
                );
            }
        }
        check(
            Command::new("systemd-analyze")
                .args(["verify", "--man=no"])
                .args(&copies)
                .current_dir(dir.path()),
            &unit_dir,
        );
        n += copies.len();
    }
    n
}

fn profiles_pass_apparmor_parser(out: &Path) -> usize {
    let mut n = 0;
    for bundle in bundles(out) {
        for profile in files_under(&bundle.join("root/etc/apparmor.d")) {
            check(
                Command::new("apparmor_parser")
                    .args(["--skip-kernel-load", "--skip-cache", "-Q", "-K"])
                    .arg(&profile),
                &profile,
            );
            n += 1;
        }
    }
    n
}

fn sudoers_pass_visudo(out: &Path) -> usize {
    let mut n = 0;
    for bundle in bundles(out) {
        // Staged where sudo never reads them; the apply installs them into sudoers.d.
        for file in files_under(&bundle.join("root/var/lib/bell/sudoers")) {
            check(Command::new("visudo").args(["-c", "-f"]).arg(&file), &file);
            n += 1;
        }
    }
    n
}

#[test]
fn divingbell_artifacts() {
    let out = build("divingbell.kdl");
    if have("shellcheck") {
        assert!(scripts_pass_shellcheck(out.path()) > 0);
    }
    if have("systemd-analyze") && have("systemd-escape") {
        assert!(units_pass_systemd_analyze(out.path()) > 0);
    }
    if have("apparmor_parser") {
        assert!(profiles_pass_apparmor_parser(out.path()) > 0);
    }
    if have("visudo") {
        assert!(sudoers_pass_visudo(out.path()) > 0);
    }
}

#[test]
fn three_role_artifacts() {
    let out = build("three-role.kdl");
    if have("shellcheck") {
        assert!(scripts_pass_shellcheck(out.path()) > 0);
    }
    if have("systemd-analyze") && have("systemd-escape") {
        assert!(units_pass_systemd_analyze(out.path()) > 0);
    }
    if have("apparmor_parser") {
        profiles_pass_apparmor_parser(out.path());
    }
    if have("visudo") {
        assert!(sudoers_pass_visudo(out.path()) > 0);
    }
}

/// A spec with every kind of this module and hostile values where the language allows them,
/// through the same tools.
#[test]
fn hostile_values_stay_valid_artifacts() {
    let spec = r###"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
mount "odd" target="/srv/it's a $(x) %n dir" device="/dev/disk/by-label/a b" type="ext4" options="x-systemd.device-timeout=1s,nofail" after="systemd-udevd.service"
ethtool "br-0.1" {
    gro off
    rx-checksum on
}
perm "/srv/it's $(reboot)/*.key" owner="root" group="root" mode="0600" ignore-missing=#true
file "/etc/bell `x` $y/it's.conf" {
    content "a='{{ host.name }}'\n"
}
unit "bell-test.service" enable=#true {
    content #"""
        [Unit]
        Description=test {{ host.address }}
        [Service]
        ExecStart=/bin/true
        [Install]
        WantedBy=multi-user.target
        """#
}
"###;
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("bell.kdl"), spec).expect("write");
    let (compiled, lines) = compile_path(&dir.path().join("bell.kdl"), None);
    let compiled = compiled.unwrap_or_else(|| panic!("{}", lines.join("\n")));
    let out = tempfile::tempdir().expect("temp dir");
    bellc_core::emit::write(out.path(), &compiled.bundles, &compiled.release).expect("emit");
    if have("shellcheck") {
        assert!(scripts_pass_shellcheck(out.path()) >= 9);
    }
    if have("systemd-analyze") && have("systemd-escape") {
        assert_eq!(units_pass_systemd_analyze(out.path()), 3);
    }
}

//! The sysctl check script as rendered (on a key that takes text, so the hostile value gets
//! past the build-time check of number keys): clean under shellcheck, a hostile value stays one
//! quoted word, and run against a fake `/proc/sys` under BELL_ROOT it exits 0 in sync, 2 with
//! the difference when drifted (comparing words, as the kernel separates fields by tabs), and
//! 0 offline, where there is no live value to read.
mod common;
use common::fleet::*;
use common::*;
use std::process::Command;

const HOSTILE: &str = "1024 $(touch PWNED)' 65000";

fn check_script(f: &Fixture) -> std::path::PathBuf {
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = f.path().join("out/hosts/h").canonicalize().unwrap();
    bundle.join("scripts/sysctl/kernel.core_pattern.check")
}

#[test]
fn check_script_compares_words_and_keeps_hostile_values_quoted() {
    let value = HOSTILE.replace('\\', "\\\\").replace('"', "\\\"");
    let f = Fixture::spec(&format!(
        "fleet \"t\" target=\"debian-12\"\nhost \"h\" address=\"10.0.0.1\"\nsysctl {{\n    kernel.core_pattern \"{value}\"\n}}\n"
    ));
    let script = check_script(&f);
    if require("shellcheck") {
        let out = Command::new("shellcheck") // SC2016 is the point here: the `$(...)` must not expand.
            .args(["-s", "sh", "-e", "SC2016"])
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let root = tempfile::tempdir().unwrap();
    let proc_file = root.path().join("proc/sys/kernel/core_pattern");
    std::fs::create_dir_all(proc_file.parent().unwrap()).unwrap();
    let state = root.path().join("state");
    let check = |offline: &str| {
        Command::new("sh")
            .arg(&script)
            .current_dir(root.path())
            .env("BELL_ROOT", root.path())
            .env("BELL_STATE", &state)
            .env("BELL_OFFLINE", offline)
            .output()
            .unwrap()
    };
    // The kernel's tab-separated form of the same words is in sync.
    std::fs::write(&proc_file, HOSTILE.replace(' ', "\t") + "\n").unwrap();
    let out = check("0");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    std::fs::write(&proc_file, "32768\t60999\n").unwrap();
    let out = check("0");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("kernel.core_pattern is 32768 60999, the bundle sets {HOSTILE}\n")
    );
    assert_eq!(
        check("1").status.code(),
        Some(0),
        "offline reads nothing live"
    );
    std::fs::remove_file(&proc_file).unwrap();
    let out = check("0");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!root.path().join("PWNED").exists() && !f.path().join("PWNED").exists());
}

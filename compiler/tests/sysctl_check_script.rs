//! The sysctl check as rendered: one script (the sysctl batch's) reads back every key of the
//! host and prints a line per key. Keys that take text, so that hostile values get past the
//! build-time check of number keys: clean under shellcheck, a hostile value stays one quoted
//! word, and run against a fake `/proc/sys` under BELL_ROOT it says `in-sync` (comparing words,
//! as the kernel separates fields by tabs), `drifted` with the difference, `drifted` for a key
//! this kernel lacks, a value that looks like the tag `grep -H` puts before another key's lines
//! is read as a value,
//! and offline, where there is no live value to read, it prints nothing. The batch's apply, which
//! sets every due key in one process, keeps the same values quoted as it writes them.
use crate::common::fleet::*;
use crate::common::*;
use std::process::Command;

const HOSTILE: &str = "1024 $(touch PWNED)' 65000";

fn check_script(f: &Fixture) -> std::path::PathBuf {
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = f.path().join("out/hosts/h").canonicalize().unwrap();
    let manifest = std::fs::read_to_string(bundle.join("bundle.json")).unwrap();
    assert!(
        !manifest.contains("sysctl/kernel.core_pattern.check"),
        "a key has no check of its own"
    );
    bundle.join("scripts/batch/sysctl.check")
}

/// shellcheck passes `script` as POSIX sh, SC2016 left out: it is the point that a `$(...)` in a
/// value is single-quoted and does not expand.
fn shellcheck_clean(script: &std::path::Path) {
    if !require("shellcheck") {
        return;
    }
    let out = Command::new("shellcheck")
        .args(["-s", "sh", "-e", "SC2016"])
        .arg(script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A host setting three text keys: a hostile value, one shaped like the tag `grep -H` puts
/// before each line of the next key's file under `root` (returned), and a plain one.
fn hostile_fixture(root: &std::path::Path) -> (Fixture, String) {
    let tag_like = format!("{}/proc/sys/kernel/hostname:h", root.display());
    let f = Fixture::spec(&format!(
        "fleet \"t\" target=\"debian-12\"\nhost \"h\" address=\"10.0.0.1\"\nsysctl {{\n    kernel.core_pattern \"{}\"\n    kernel.domainname \"{}\"\n    kernel.hostname \"h\"\n}}\n",
        kdl(HOSTILE),
        kdl(&tag_like),
    ));
    (f, tag_like)
}

fn kdl(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

#[test]
fn one_check_reads_every_key_and_keeps_hostile_values_quoted() {
    let root = tempfile::tempdir().unwrap();
    let (f, tag_like) = hostile_fixture(root.path());
    let script = check_script(&f);
    shellcheck_clean(&script);
    let sys = root.path().join("proc/sys/kernel");
    std::fs::create_dir_all(&sys).unwrap();
    let state = root.path().join("state");
    let check = |offline: &str| {
        let out = Command::new("sh")
            .arg(&script)
            .current_dir(root.path())
            .env("BELL_ROOT", root.path())
            .env("BELL_STATE", &state)
            .env("BELL_OFFLINE", offline)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    // The kernel's tab-separated form of the same words is in sync; a value shaped like a
    // line of another key's file is a value.
    std::fs::write(sys.join("core_pattern"), HOSTILE.replace(' ', "\t") + "\n").unwrap();
    std::fs::write(sys.join("domainname"), format!("{tag_like}\n")).unwrap();
    std::fs::write(sys.join("hostname"), "h\n").unwrap();
    assert_eq!(
        check("0"),
        "sysctl:kernel.core_pattern\tin-sync\t\n\
         sysctl:kernel.domainname\tin-sync\t\n\
         sysctl:kernel.hostname\tin-sync\t\n"
    );
    std::fs::write(sys.join("core_pattern"), "32768\t60999\n").unwrap();
    std::fs::remove_file(sys.join("domainname")).unwrap();
    // A value of several lines is its words.
    std::fs::write(sys.join("hostname"), "other\nname\n").unwrap();
    assert_eq!(
        check("0"),
        format!(
            "sysctl:kernel.core_pattern\tdrifted\tkernel.core_pattern is 32768 60999, the bundle sets {HOSTILE}\n\
             sysctl:kernel.domainname\tdrifted\tkernel.domainname: this kernel has no such key\n\
             sysctl:kernel.hostname\tdrifted\tkernel.hostname is other name, the bundle sets h\n"
        )
    );
    assert_eq!(check("1"), "", "offline reads nothing live");
    assert!(!root.path().join("PWNED").exists() && !f.path().join("PWNED").exists());
    assert!(!state.exists() || std::fs::read_dir(&state).unwrap().next().is_none());
}

#[test]
fn one_apply_sets_every_due_key_and_keeps_hostile_values_quoted() {
    let root = tempfile::tempdir().unwrap();
    let (f, tag_like) = hostile_fixture(root.path());
    let script = check_script(&f).with_file_name("sysctl.apply");
    shellcheck_clean(&script);
    let sys = root.path().join("proc/sys/kernel");
    std::fs::create_dir_all(&sys).unwrap();
    let state = root.path().join("state");
    let keys = ["core_pattern", "domainname", "hostname"];
    for key in keys {
        std::fs::create_dir_all(state.join(key)).unwrap();
    }
    let apply = |offline: &str| {
        let mut cmd = Command::new("sh");
        cmd.arg(&script);
        for key in keys {
            cmd.arg(format!("sysctl:kernel.{key}")).arg(state.join(key));
        }
        let out = cmd
            .current_dir(root.path())
            .env("BELL_ROOT", root.path())
            .env("BELL_STATE", state.join("batch"))
            .env("BELL_OFFLINE", offline)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        // A key is answered when its fate is known: those written after they are read back.
        let stdout = String::from_utf8(out.stdout).unwrap();
        let mut lines: Vec<String> = stdout.lines().map(|l| format!("{l}\n")).collect();
        lines.sort();
        lines.concat()
    };
    std::fs::write(sys.join("core_pattern"), "core\tdump\n").unwrap();
    std::fs::write(sys.join("domainname"), "(none)\n").unwrap();
    assert_eq!(apply("1"), "", "offline sets nothing live");
    assert_eq!(
        std::fs::read_to_string(sys.join("core_pattern")).unwrap(),
        "core\tdump\n"
    );
    assert_eq!(
        apply("0"),
        "sysctl:kernel.core_pattern\tok\t\n\
         sysctl:kernel.domainname\tok\t\n\
         sysctl:kernel.hostname\tfailed\tthis kernel has no sysctl kernel.hostname\n"
    );
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap();
    assert_eq!(read(sys.join("core_pattern")), format!("{HOSTILE}\n"));
    assert_eq!(read(sys.join("domainname")), format!("{tag_like}\n"));
    assert_eq!(read(state.join("core_pattern/original")), "core\tdump\n");
    assert_eq!(read(state.join("domainname/original")), "(none)\n");
    assert!(!state.join("hostname/original").exists());
    assert!(!root.path().join("PWNED").exists() && !f.path().join("PWNED").exists());
}

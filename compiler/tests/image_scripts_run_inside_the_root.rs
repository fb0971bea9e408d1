//! An `exec` script or a health probe applied to an image root runs inside the image, never
//! on the build machine: the real bell-run bakes a bundle into a minimal root (a shell and the
//! libraries it links) from a private mount namespace in which the build machine's `/etc/motd`
//! is a scratch file, so a script that escaped would show there. Also: `offline="root"` runs
//! against `$BELL_ROOT` with the rest of the build machine read-only and a private `/tmp`;
//! `offline="defer"`, `offline="skip"` and a root without the script's interpreter do not run
//! and say why; and a deferred script runs at the next apply that can run it.
use crate::common::fleet::bell_run;
use crate::common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

const SPEC: &str = r##"fleet "lab" target="debian-12"
host "db-1" role="db"
exec "010-motd.sh" rerun="once-successfully" {
    script "#!/bin/sh\necho 'managed by bell' > /etc/motd\nread -r name < /proc/sys/kernel/hostname\necho \"$name\" > /etc/seen-hostname\n"
}
exec "020-against-root.sh" offline="root" {
    env SCRATCH="/tmp/bell-scratch-PID"
    script "#!/bin/sh\necho baked > \"$BELL_ROOT/etc/issue\"\nread -r name < /proc/sys/kernel/hostname\necho \"$name\" > \"$BELL_ROOT/etc/seen-hostname-root\"\necho scratch > \"$SCRATCH\"\nif echo escaped > /etc/motd; then exit 9; fi\n"
}
exec "030-later.sh" offline="defer" {
    script "#!/bin/sh\necho live >> \"$BELL_ROOT/etc/later\"\n"
}
exec "040-needs-bash.sh" {
    script "#!/bin/bash\necho bash >> /etc/bash-ran\n"
}
exec "050-no-escape.sh" {
    script "#!/bin/sh\n[ \"$BELL_ROOT\" = / ] || exit 3\n[ \"$BELL_OFFLINE\" = 1 ] || exit 4\nif echo x > /proc/sys/kernel/hostname; then exit 5; fi\nif echo x > /dev/sda; then exit 6; fi\ncd ..; cd ..; cd ..; cd ..; [ -f /etc/motd ] || exit 7\nexit 0\n"
}
health "motd" {
    run "read -r line < /etc/motd && [ \"$line\" = 'managed by bell' ]"
}
health "live-only" offline="skip" {
    run "exit 1"
}
"##;

/// A root with `/bin/sh` (the build machine's dash, or sh) and the libraries it links, and
/// the directories an image has.
fn minimal_root(root: &Path) {
    for dir in ["bin", "etc", "proc", "sys", "dev", "tmp"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    let shell = ["/bin/dash", "/bin/sh"]
        .into_iter()
        .find_map(|p| fs::canonicalize(p).ok())
        .expect("a shell");
    install(&shell, root, "bin/sh");
}

/// Copies `program` into `root` as `at`, with the libraries `ldd` says it links.
fn install(program: &Path, root: &Path, at: &str) {
    fs::copy(program, root.join(at)).unwrap();
    let ldd = Command::new("ldd").arg(program).output().unwrap();
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        let to = root.join(lib.trim_start_matches('/'));
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(lib, &to).unwrap();
    }
}

/// The spec, its `offline="root"` script writing a file of this test's own under `/tmp`.
fn spec() -> (String, std::path::PathBuf) {
    let scratch = format!("/tmp/bell-scratch-{}", std::process::id());
    (
        SPEC.replace("/tmp/bell-scratch-PID", &scratch),
        scratch.into(),
    )
}

/// The output line of `key`.
fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(&format!(" {key} ")))
        .unwrap_or_default()
}

/// bell-run applies `bundle` to `root` in a private mount namespace whose `/etc/motd` is the
/// file `motd`: what a script wrote there shows.
fn apply_in_namespace(bundle: &Path, root: &Path, motd: &Path) -> Run {
    let script = format!(
        "mount --bind {motd} /etc/motd && exec {bin} apply {bundle} --root {root}",
        motd = motd.display(),
        bin = bell_run().display(),
        bundle = bundle.display(),
        root = root.display(),
    );
    Run::from(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .output()
            .unwrap(),
    )
}

#[test]
fn scripts_for_the_image_run_inside_it_and_never_on_the_build_machine() {
    if !bell_testkit::namespaces(&["--mount"]) || !bell_testkit::tool("ldd") {
        return;
    }
    let (spec, scratch) = spec();
    let f = Fixture::spec(&spec);
    let built = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    let bundle = f.path().join("out/hosts/db-1");
    let root = f.path().join("img");
    minimal_root(&root);
    fs::write(root.join("etc/hostname"), "db-1\n").unwrap();
    let motd = f.path().join("build-machine-motd");
    fs::write(&motd, "the build machine's\n").unwrap();

    let run = apply_in_namespace(&bundle, &root, &motd);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{out}");
    assert_eq!(
        fs::read_to_string(root.join("etc/motd")).unwrap(),
        "managed by bell\n"
    );
    assert_eq!(
        fs::read_to_string(&motd).unwrap(),
        "the build machine's\n",
        "an exec wrote the build machine's /etc/motd: {out}"
    );
    // offline="root": `$BELL_ROOT` written, the build machine's /tmp untouched (a private one).
    assert_eq!(
        fs::read_to_string(root.join("etc/issue")).unwrap(),
        "baked\n"
    );
    assert!(!scratch.exists(), "{out}");
    // Both ways, the script's host is named as the image is, not as the build machine.
    for seen in ["etc/seen-hostname", "etc/seen-hostname-root"] {
        assert_eq!(
            fs::read_to_string(root.join(seen)).unwrap(),
            "db-1\n",
            "{seen}"
        );
    }
    for key in [
        "exec:010-motd.sh",
        "exec:020-against-root.sh",
        "exec:050-no-escape.sh",
    ] {
        assert!(line(&out, key).contains(" ok: first run"), "{key}: {out}");
    }
    // What did not run says why, and the bake still succeeded.
    for (key, why) in [
        (
            "exec:030-later.sh",
            "deferred: offline=\"defer\": it runs at the first live apply",
        ),
        (
            "exec:040-needs-bash.sh",
            "deferred: the image has no /bin/bash to run it inside",
        ),
    ] {
        assert!(line(&out, key).contains(why), "{key}: {out}");
    }
    assert!(!root.join("etc/later").exists() && !root.join("etc/bash-ran").exists());
    assert!(out.contains("health motd"), "{out}");
    assert!(out.contains("healthy (1 attempt)"), "{out}");
    assert!(
        out.contains("live-only  not run: offline=\"skip\""),
        "{out}"
    );
    assert!(out.contains("2 deferred to the first live apply"), "{out}");

    // The deferred script runs once the image can run it: here, once it has bash.
    if let Some(bash) = bell_testkit::find("bash") {
        install(&fs::canonicalize(bash).unwrap(), &root, "bin/bash");
        let again = apply_in_namespace(&bundle, &root, &motd);
        let out = format!("{}{}", again.stdout, again.stderr);
        assert_eq!(again.code, 0, "{out}");
        assert_eq!(
            fs::read_to_string(root.join("etc/bash-ran")).unwrap(),
            "bash\n"
        );
        // Run once already: not again.
        assert!(line(&out, "exec:010-motd.sh").contains("not-due"), "{out}");
        assert!(
            line(&out, "exec:040-needs-bash.sh").contains(" ok: first run"),
            "{out}"
        );
        assert_eq!(fs::read_to_string(&motd).unwrap(), "the build machine's\n");
    }
}

#[test]
fn a_root_without_a_shell_defers_every_script_and_says_why() {
    if !bell_testkit::namespaces(&["--mount"]) {
        return;
    }
    let (spec, _) = spec();
    let f = Fixture::spec(&spec);
    let built = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(built.code, 0, "{}", built.stderr);
    let root = f.path().join("empty-root");
    fs::create_dir_all(root.join("etc")).unwrap();
    let motd = f.path().join("build-machine-motd");
    fs::write(&motd, "the build machine's\n").unwrap();
    let run = apply_in_namespace(&f.path().join("out/hosts/db-1"), &root, &motd);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{out}");
    assert!(
        line(&out, "exec:010-motd.sh").contains("deferred: the image has no /bin/sh to run it"),
        "{out}"
    );
    assert!(out.contains("not run: the image has no /bin/sh"), "{out}");
    assert!(!root.join("etc/motd").exists());
    assert_eq!(fs::read_to_string(&motd).unwrap(), "the build machine's\n");
    // Deferred, so nothing is recorded as run: the first live apply runs it.
    let state = fs::read_to_string(root.join("var/lib/bell/state.json")).unwrap();
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    let rec = &state["resources"]["exec:010-motd.sh"];
    assert_eq!(rec["result"], "deferred", "{rec}");
    assert!(rec["exec"]["ran_hash"].is_null(), "{rec}");
}

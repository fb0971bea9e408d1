//! A change that takes effect at the next boot is not drift: a resource marked `at_boot` (a
//! kernel command line) is checked after its apply, and a check that exits 76 says the host
//! needs a reboot, with what it printed as the reason; so does the target's own
//! `/run/reboot-required`. `apply` and `check` print the reasons, the report carries them, and
//! a link out of the root is never followed to read the target's signal.
use crate::common::*;

/// A kernel command line stand-in: `cmdline` under the root plays `/proc/cmdline`, and the
/// drop-in holds the argument the bundle wants.
fn kernel_args(at_boot: bool) -> BundleSpec {
    let check = "grep -qw 'bell.test=1' \"$BELL_ROOT/cmdline\" 2>/dev/null && exit 0\n\
                 echo 'bell.test=1 is not on the running kernel'\"'\"'s command line'\n\
                 exit 76\n";
    let mut resource = ResourceSpec::new("kernel-args", "test")
        .files(&["/etc/default/grub.d/60-bell-test.cfg"])
        .apply("exit 0\n")
        .check(check);
    if at_boot {
        resource = resource.at_boot();
    }
    BundleSpec::new()
        .file(
            "/etc/default/grub.d/60-bell-test.cfg",
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX bell.test=1\"\n",
            "0644",
        )
        .resource(resource)
}

const REASON: &str = "kernel-args:test: bell.test=1 is not on the running kernel's command line";

fn check(w: &World, reports: &std::path::Path) -> std::process::Output {
    let root = w.root();
    w.run(&[
        "check",
        "--root",
        root.to_str().unwrap(),
        "--host",
        "h",
        "--report",
        reports.to_str().unwrap(),
    ])
}

fn report(reports: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(reports.join("h.json")).expect("a report");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn a_change_at_boot_is_a_reason_to_reboot_not_drift() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let bundle = w.build(&kernel_args(true));
    let out = w.apply(
        &bundle,
        &["--host", "h", "--report", reports.to_str().unwrap()],
    );
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains(&format!("\nreboot required: {REASON}\n")),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        report(&reports)["reboot_required"],
        serde_json::json!([REASON])
    );
    assert_eq!(report(&reports)["result"], "success");

    // A check says the same, and exits 0: nothing drifted.
    let out = check(&w, &reports);
    expect_code(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("reboot required: {REASON}")),
        "{text}"
    );
    assert!(text.contains("0 drifted, 0 errors"), "{text}");
    assert_eq!(
        report(&reports)["reboot_required"],
        serde_json::json!([REASON])
    );

    // Applied again unchanged: nothing is applied again (offline, as here, an unchanged
    // resource is not checked at all; live, its drift check gives the reason).
    let out = w.apply(&bundle, &["--host", "h"]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("result: 0 changed"),
        "{}",
        stdout(&out)
    );

    // After the "boot": the argument is on the command line, and no reason is left.
    std::fs::write(w.root().join("cmdline"), "ro quiet bell.test=1\n").unwrap();
    let out = check(&w, &reports);
    expect_code(&out, 0);
    asks_no_reboot(&out);
    assert!(report(&reports).get("reboot_required").is_none());
}

#[test]
fn without_at_boot_a_new_change_is_asked_only_by_the_next_check() {
    let w = World::new();
    let out = w.apply(&w.build(&kernel_args(false)), &[]);
    expect_code(&out, 0);
    asks_no_reboot(&out);
}

#[test]
fn the_targets_own_signal_names_the_packages_and_no_link_is_followed() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    std::fs::write(w.root().join("cmdline"), "bell.test=1\n").unwrap();
    let out = w.apply(&w.build(&kernel_args(true)), &[]);
    expect_code(&out, 0);
    let run = w.root().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("reboot-required"),
        "*** System restart required ***\n",
    )
    .unwrap();
    std::fs::write(
        run.join("reboot-required.pkgs"),
        "linux-image-6.1.0-28-amd64\nlibc6\nlinux-image-6.1.0-28-amd64\n$(reboot)\n",
    )
    .unwrap();
    let out = check(&w, &reports);
    expect_code(&out, 0);
    let reason =
        "/run/reboot-required is present (for libc6, linux-image-6.1.0-28-amd64)".to_string();
    assert!(
        stdout(&out).contains(&format!("reboot required: {reason}\n")),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        report(&reports)["reboot_required"],
        serde_json::json!([reason])
    );

    // The signal as a link out of the root, or its directory as one: read neither.
    let outside = w.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("reboot-required"), "from outside\n").unwrap();
    std::fs::remove_file(run.join("reboot-required")).unwrap();
    std::os::unix::fs::symlink(outside.join("reboot-required"), run.join("reboot-required"))
        .unwrap();
    let out = check(&w, &reports);
    expect_code(&out, 0);
    asks_no_reboot(&out);
    std::fs::remove_dir_all(&run).unwrap();
    std::os::unix::fs::symlink(&outside, &run).unwrap();
    let out = check(&w, &reports);
    expect_code(&out, 0);
    asks_no_reboot(&out);
}

#[test]
fn an_exec_that_asks_for_a_reboot_needs_one_until_the_next_boot() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let mut policy = exec_policy(bell_bundle::Rerun::OnceSuccessfully);
    policy.reboot = true;
    let bundle = w.build(&BundleSpec::new().resource(
        ResourceSpec::new("exec", "firmware.sh").exec("#!/bin/sh\nexit 0\n", policy.clone()),
    ));
    let boot = |id: &'static str| [("BELL_RUN_BOOT_ID", id)];
    let reason = "exec:firmware.sh: ran in this boot, and what it did takes effect at the next";
    let out = w.apply_env(
        &bundle,
        &["--host", "h", "--report", reports.to_str().unwrap()],
        &boot("boot-1"),
    );
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains(&format!("reboot required: {reason}\n")),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        report(&reports)["reboot_required"],
        serde_json::json!([reason])
    );
    // Still in that boot: a check says it too.
    let root = w.root();
    let check =
        |id: &'static str| w.run_env(&["check", "--root", root.to_str().unwrap()], &boot(id));
    let out = check("boot-1");
    expect_code(&out, 0);
    assert!(stdout(&out).contains(reason), "{}", stdout(&out));
    // After the boot it has had its reboot.
    let out = check("boot-2");
    expect_code(&out, 0);
    asks_no_reboot(&out);
    // A failed run asks for nothing.
    let w = World::new();
    let bundle = w
        .build(&BundleSpec::new().resource(
            ResourceSpec::new("exec", "firmware.sh").exec("#!/bin/sh\nexit 1\n", policy),
        ));
    let out = w.apply_env(&bundle, &[], &boot("boot-1"));
    asks_no_reboot(&out);
}

/// The run printed no `reboot required` line.
fn asks_no_reboot(out: &std::process::Output) {
    assert!(!stdout(out).contains("reboot required"), "{}", stdout(out));
}

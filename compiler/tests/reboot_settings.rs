//! `reboot`: a setting placed like any (top, by label, per host) that goes into the manifest
//! for bell-run to decide on the host; its windows are checked at build time with the parser
//! bell-run uses, every mistake at once, and the `kernel-args` of the host travel with it for
//! a kexec. The reboot itself is `reboot_in_window.rs`'s.

use crate::common::in_memory::{build, bundle, errors, text};

const SPEC: &str = r#"fleet "k" target="debian-12"
host "db-1" role="db"
host "web-1" role="web"
host "lab-1" role="web"
kernel-args "hugepages" {
    arg "hugepagesz=1G"
    remove "quiet"
}
reboot {
    window "Sat,Sun 02:00-05:00"
    before-reboot "systemctl stop app"
}
override "db" {
    match role="db"
    reboot method="kexec" {
        window "Wed 22:00-01:00 +01:00"
        after-boot "systemctl start app"
    }
}
override "lab" {
    match host="lab-1"
    reboot policy="never"
}
"#;

/// The release says which hosts their bundle reboots (a rollout counts such a host converged
/// only once it has): those whose policy is not "never", and no host without `reboot`.
#[test]
fn the_release_names_the_hosts_a_bundle_reboots() {
    let compiled = build(SPEC).compiled.expect("the spec builds");
    let reboots = |host: &str| compiled.release.hosts[host].reboots;
    assert!(reboots("web-1") && reboots("db-1"));
    assert!(!reboots("lab-1"), "policy=\"never\"");
    let plain = build("fleet \"k\" target=\"debian-12\"\nhost \"h\"\n")
        .compiled
        .expect("builds");
    assert!(!plain.release.hosts["h"].reboots);
}

#[test]
fn the_settings_reach_the_manifest_per_host() {
    let web = bundle(SPEC, "web-1");
    let reboot = web
        .manifest
        .reboot
        .clone()
        .expect("web-1 has a reboot policy");
    assert_eq!(reboot.policy, bell_bundle::RebootPolicy::WhenRequired);
    assert_eq!(reboot.method, bell_bundle::RebootMethod::Reboot);
    assert_eq!(reboot.windows, ["Sat,Sun 02:00-05:00"]);
    assert!(reboot.after_boot.is_none());
    let hook = reboot.before_reboot.expect("before-reboot");
    assert_eq!(hook.timeout, 300);
    assert!(text(&web, &hook.script.path).ends_with("\nsystemctl stop app\n"));
    assert_eq!(reboot.kernel_args, ["hugepagesz=1G"]);
    assert_eq!(reboot.kernel_args_removed, ["quiet"]);

    // A label's override replaces the fields it gives; the others come from below.
    let db = bundle(SPEC, "db-1").manifest.reboot.expect("db-1");
    assert_eq!(db.method, bell_bundle::RebootMethod::Kexec);
    assert_eq!(db.windows, ["Wed 22:00-01:00 +01:00"]);
    assert!(db.before_reboot.is_some() && db.after_boot.is_some());
    let lab = bundle(SPEC, "lab-1").manifest.reboot.expect("lab-1");
    assert_eq!(lab.policy, bell_bundle::RebootPolicy::Never);

    // Without `reboot`, the manifest has none and the bundle is what it was.
    let plain =
        "fleet \"k\" target=\"debian-12\"\nhost \"h\"\nfile \"/etc/motd\" { content \"hi\\n\"; }\n";
    let b = bundle(plain, "h");
    assert!(b.manifest.reboot.is_none());
    assert!(!b.manifest_json.contains("reboot"));
}

#[test]
fn every_window_mistake_at_once_with_its_place() {
    let errs = errors(
        r#"fleet "k" target="debian-12"
host "h"
reboot policy="sometimes" method="kexec" {
    window "Saturday 02:00-05:00"
    window "Sat 02:00-05:00 Europe/Berlin"
    window "Sat 2:00-05:00"
    window "Fri-Mon 02:00-03:00"
    window "Sat 02:00-02:00"
}
"#,
    );
    let has = |errs: &[String], at: &str, says: &str| {
        assert!(
            errs.iter().any(|e| e.starts_with(at) && e.contains(says)),
            "no `{says}` at {at} in {errs:#?}"
        );
    };
    has(
        &errs,
        "bell.kdl:3:8:",
        "`reboot policy` cannot be \"sometimes\"",
    );
    has(&errs, "bell.kdl:4:12:", "`Saturday` is not a day");
    has(
        &errs,
        "bell.kdl:5:12:",
        "`Europe/Berlin` is not a time zone",
    );
    has(&errs, "bell.kdl:6:12:", "`2:00` is not a time");
    has(&errs, "bell.kdl:7:12:", "`Fri-Mon` runs backwards");
    has(&errs, "bell.kdl:8:12:", "`02:00-02:00` is empty");
    let errs = errors("fleet \"k\" target=\"debian-12\"\nhost \"h\"\nreboot timeout=\"2h\"\n");
    has(
        &errs,
        "bell.kdl:3:8:",
        "`reboot`: `timeout` must be between 1s and 1h",
    );
}

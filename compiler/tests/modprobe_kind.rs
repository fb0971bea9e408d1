//! The `modprobe` kind: a module's options and blacklisting in bell's own modprobe.d file,
//! read back by the real `modprobe --showconfig`, and every mistake pointed at its value.

use crate::common::have;
use crate::common::in_memory::{bundle, errors, text};
use std::process::Command;

const SPEC: &str = r#"
fleet "f" target="debian-12"
host "h"
modprobe "bonding" options="max_bonds=2   miimon=100"
modprobe "floppy" blacklist=#true
modprobe "snd-hda-intel" options="power_save=1" blacklist=#true
"#;

#[test]
fn options_and_blacklists_land_in_bells_own_files() {
    let b = bundle(SPEC, "h");
    assert_eq!(
        text(&b, "root/etc/modprobe.d/bell-bonding.conf"),
        "# Managed by bell: kernel module `bonding` (modprobe.d(5)). Changes here are overwritten by the next apply.\n\
         options bonding max_bonds=2 miimon=100\n"
    );
    assert_eq!(
        text(&b, "root/etc/modprobe.d/bell-floppy.conf")
            .lines()
            .nth(1),
        Some("blacklist floppy")
    );
    let module = b
        .manifest
        .resources
        .iter()
        .find(|r| r.key() == "modprobe:snd-hda-intel")
        .expect("the resource");
    assert_eq!(module.files, ["/etc/modprobe.d/bell-snd-hda-intel.conf"]);
    assert!(module.apply.is_none() && module.revert.is_none());
}

/// kmod parses the files as modprobe will at the next load: no line is refused, and every
/// setting shows in its merged configuration.
#[test]
fn modprobe_reads_the_files_back() {
    if !have("modprobe") {
        return;
    }
    let b = bundle(SPEC, "h");
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, bytes) in &b.contents {
        if let Some(name) = path.strip_prefix("root/etc/modprobe.d/") {
            std::fs::write(dir.path().join(name), bytes).expect("write");
        }
    }
    let out = Command::new("modprobe")
        .arg("-C")
        .arg(dir.path())
        .arg("--showconfig")
        .output()
        .expect("run modprobe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("ERROR"),
        "{stderr}"
    );
    let config = String::from_utf8_lossy(&out.stdout);
    for line in [
        "options bonding max_bonds=2 miimon=100",
        "blacklist floppy",
        "options snd_hda_intel power_save=1",
        "blacklist snd_hda_intel",
    ] {
        assert!(
            config.lines().any(|l| l == line),
            "no `{line}` in:\n{config}"
        );
    }
}

fn check(body: &str, expected: &[&str]) {
    let spec = format!("fleet \"f\" target=\"debian-12\"\nhost \"h\"\n{body}");
    let got: Vec<String> = errors(&spec)
        .into_iter()
        .filter(|d| d.contains(": error["))
        .collect();
    assert_eq!(got, expected, "for:\n{body}");
}

#[test]
fn a_module_name_modprobe_cannot_load_is_refused_at_the_name() {
    check(
        "modprobe \"../evil\" blacklist=#true\n",
        &["bell.kdl:3:10: error[bell::lower::invalid_value]: module name `../evil` holds `.`, which is not a letter, digit, `_` or `-`"],
    );
}

/// A newline would smuggle a second directive into the file; a quote or `#` would change how
/// the words are read.
#[test]
fn hostile_options_are_refused_at_the_value() {
    check(
        "modprobe \"bonding\" options=\"max_bonds=2\\nblacklist usb_storage\"\n",
        &["bell.kdl:3:20: error[bell::lower::invalid_value]: `max_bonds=2\\nblacklist` is not a `param=value` word"],
    );
    check(
        "modprobe \"bonding\" options=\"a=\\\"b c\\\"\"\n",
        &["bell.kdl:3:20: error[bell::lower::invalid_value]: `a=\\\"b` is not a `param=value` word"],
    );
}

#[test]
fn a_module_with_nothing_to_say_is_an_error() {
    check(
        "modprobe \"bonding\"\n",
        &["bell.kdl:3:10: error[bell::render::invalid]: `modprobe:bonding` sets neither `options` nor `blacklist=#true`"],
    );
}

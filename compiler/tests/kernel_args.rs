//! `kernel-args`: arguments added to or taken out of the kernel command line, as a GRUB
//! drop-in and `update-grub`; its check reads `/proc/cmdline` and says a reboot is required,
//! not drift, until the kernel boots with them. The drop-in is sourced here by `sh` as
//! grub-mkconfig sources it, and a whole bundle is applied, checked, "rebooted" and taken back
//! live inside `unshare --mount` (tmpfs over /etc/default, /var/lib and /run, a file bound over
//! /proc/cmdline and one over /proc/modules, a stub `update-grub` that writes the command line
//! grub.cfg would carry); a blacklisted module that is loaded waits for the boot the same way.

use crate::common::fleet::bell_run;
use crate::common::in_memory::{bundle, errors, text};
use crate::common::{value_of, Fixture};
use std::process::Command;

const SPEC: &str = r#"fleet "k" target="debian-12"
host "h"
kernel-args "hugepages" {
    arg "hugepagesz=1G"
    arg "hugepages=16"
    remove "quiet"
}
kernel-args "console" {
    arg "console=ttyS0,115200n8"
    remove "console=tty0"
}
"#;

#[test]
fn a_drop_in_per_resource_that_takes_effect_at_boot() {
    let b = bundle(SPEC, "h");
    let dropin = text(&b, "root/etc/default/grub.d/60-bell-hugepages.cfg");
    assert!(
        dropin.contains("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX hugepagesz=1G hugepages=16\"\n"),
        "{dropin}"
    );
    let resource = b
        .manifest
        .resources
        .iter()
        .find(|r| r.key() == "kernel-args:hugepages")
        .expect("the resource");
    assert!(
        resource.at_boot,
        "checked after its apply: it takes effect at boot"
    );
    assert_eq!(
        resource.files,
        ["/etc/default/grub.d/60-bell-hugepages.cfg"]
    );
    assert!(text(&b, &resource.apply.as_ref().unwrap().path).contains("update-grub ||"));
    assert!(text(&b, &resource.check.as_ref().unwrap().path).contains("exit 76"));
}

/// What `GRUB_CMDLINE_LINUX` and `_DEFAULT` are after `/etc/default/grub` (with `linux` and
/// `default`) and the bundle's drop-ins are sourced in name order, as grub-mkconfig does.
fn sourced(linux: &str, default: &str) -> String {
    let b = bundle(SPEC, "h");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("grub"),
        format!("GRUB_CMDLINE_LINUX=\"{linux}\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"{default}\"\n"),
    )
    .unwrap();
    // A file a glob in the command line could match, were it expanded.
    std::fs::write(dir.path().join("matched-by-a-glob"), "").unwrap();
    for name in ["console", "hugepages"] {
        let path = format!("root/etc/default/grub.d/60-bell-{name}.cfg");
        std::fs::write(dir.path().join(format!("{name}.cfg")), text(&b, &path)).unwrap();
    }
    let out = Command::new("sh")
        .args([
            "-euc",
            ". ./grub; . ./console.cfg; . ./hugepages.cfg; \
             printf '%s|%s' \"$GRUB_CMDLINE_LINUX\" \"$GRUB_CMDLINE_LINUX_DEFAULT\"",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn sourced_as_grub_mkconfig_does_the_drop_ins_add_and_take_out() {
    assert_eq!(
        sourced("console=tty0 rootdelay=5", "quiet splash"),
        "rootdelay=5 console=ttyS0,115200n8 hugepagesz=1G hugepages=16|splash"
    );
    // `remove "quiet"` takes `quiet=…` too; `console=tty0` only that console; a glob the image
    // wrote stays a word, never a file name.
    assert_eq!(
        sourced("quiet=1 console=ttyS1 matched-by-*", "quiet"),
        "console=ttyS1 matched-by-* console=ttyS0,115200n8 hugepagesz=1G hugepages=16|"
    );
}

#[test]
fn mistakes_are_reported_at_the_value_all_at_once() {
    let diags = errors(
        r#"fleet "k" target="debian-12"
host "h"
kernel-args "a" {
    arg "hugepages=\"16\""
    arg "a=$(reboot)"
    arg "a b"
}
kernel-args "b" {
    arg "nosmt"
}
kernel-args "c" {
    arg "nosmt"
    arg "mitigations=off"
}
kernel-args "d" {
    arg "mitigations=auto"
    remove "nosmt"
}
kernel-args "e"
"#,
    );
    let want = [
        ("bell.kdl:4:9:", "the value of `hugepages=\\\"16\\\"` holds `\"`"),
        ("bell.kdl:5:9:", "the value of `a=$(reboot)` holds `$`"),
        ("bell.kdl:6:9:", "the parameter name of `a b` holds"),
        ("bell.kdl:11:13:", "`nosmt` is on the command line twice (`kernel-args:b` and `kernel-args:c`)"),
        ("bell.kdl:15:13:", "`mitigations` is given two values, `mitigations=off` by `kernel-args:c` and `mitigations=auto` by `kernel-args:d`"),
        ("bell.kdl:17:12:", "`kernel-args:d` removes `nosmt`, which `kernel-args:b` adds as `nosmt`"),
        ("bell.kdl:19:13:", "`kernel-args:e` neither adds nor removes an argument"),
    ];
    for (at, message) in want {
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with(at) && d.contains(message)),
            "no `{message}` at {at}:\n{diags:#?}"
        );
    }
    assert_eq!(diags.len(), want.len(), "{diags:#?}");
}

#[test]
fn applied_live_a_reboot_is_required_until_the_kernel_boots_with_them() {
    if !bell_testkit::namespaces(&["--mount"]) {
        return;
    }
    let bin = bell_run();
    // A blacklisted module takes effect at the next boot as well.
    let f = Fixture::spec(&format!("{SPEC}modprobe \"floppy\" blacklist=#true\n"));
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    std::fs::write(
        f.path().join("bell.kdl"),
        "fleet \"k\" target=\"debian-12\"\nhost \"h\"\nfile \"/etc/motd\" { content \"hi\\n\" }\n",
    )
    .unwrap();
    let run = f.bellc(&["build", "bell.kdl", "-o", "after"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let dir = tempfile::tempdir().unwrap();
    let stubs = dir.path().join("bin");
    std::fs::create_dir(&stubs).unwrap();
    // What grub-mkconfig does with the command line: source the defaults and the drop-ins.
    let grub_cfg = dir.path().join("grub.cfg");
    std::fs::write(
        stubs.join("update-grub"),
        format!(
            "#!/bin/sh\nset -e\n. /etc/default/grub\nfor f in /etc/default/grub.d/*.cfg; do [ ! -e \"$f\" ] || . \"$f\"; done\n\
             echo \"BOOT_IMAGE=/vmlinuz $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT\" >{}\necho ran >>{}/update-grub.runs\n",
            grub_cfg.display(),
            dir.path().display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(stubs.join("update-grub"))
        .status()
        .unwrap();
    let driver = format!(
        r#"set -u
export PATH={stubs}:$PATH
bell={bin}
mount -t tmpfs tmpfs /etc/default
mount -t tmpfs tmpfs /var/lib
mount -t tmpfs tmpfs /run
printf 'GRUB_CMDLINE_LINUX="console=tty0"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n' >/etc/default/grub
echo 'BOOT_IMAGE=/vmlinuz console=tty0 quiet' >cmdline
mount --bind cmdline /proc/cmdline
# A kernel without loadable modules (some test machines) has no /proc/modules to stand in for.
if [ -e /proc/modules ]; then
    printf 'floppy 86016 0 - Live 0x0000000000000000\nloop 32768 0 - Live 0x0000000000000000\n' >modules
    mount --bind modules /proc/modules
    echo modules=1
else
    echo modules=0
fi
"$bell" apply {out}/hosts/h --host h >apply1.out 2>&1; echo "apply1=$?"
echo "runs1=$(wc -l <update-grub.runs)"
"$bell" check >check1.out 2>&1; echo "check1=$?"
"$bell" apply {out}/hosts/h --host h >again.out 2>&1; echo "again=$?"
echo "runs_again=$(wc -l <update-grub.runs)"
# The boot: the kernel now has what grub.cfg says, and no floppy.
cp {grub_cfg} cmdline
printf 'loop 32768 0 - Live 0x0000000000000000\n' >modules
"$bell" check >check2.out 2>&1; echo "check2=$?"
"$bell" apply {after}/hosts/h --host h >apply2.out 2>&1; echo "apply2=$?"
echo "dropins=$(ls /etc/default/grub.d | wc -l)"
echo "runs2=$(wc -l <update-grub.runs)"
"#,
        stubs = stubs.display(),
        bin = bin.display(),
        out = f.path().join("out").display(),
        after = f.path().join("after").display(),
        grub_cfg = grub_cfg.display(),
    );
    std::fs::write(dir.path().join("driver.sh"), driver).unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "sh", "driver.sh"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let file = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(value_of(&stdout, "apply1"), "0", "{}", file("apply1.out"));
    assert_eq!(
        value_of(&stdout, "runs1"),
        "2",
        "update-grub once per resource"
    );
    let apply1 = file("apply1.out");
    for reason in [
        "reboot required: kernel-args:console: not yet on the running kernel's command line: console=ttyS0,115200n8; still on the running kernel's command line: console=tty0",
        "reboot required: kernel-args:hugepages: not yet on the running kernel's command line: hugepagesz=1G hugepages=16; still on the running kernel's command line: quiet",
    ] {
        assert!(apply1.contains(reason), "{apply1}");
    }
    let floppy =
        "reboot required: modprobe:floppy: floppy is loaded; blacklisted, it is not loaded from the next boot";
    // Where the kernel has no loadable modules, none is loaded: nothing to wait for.
    assert_eq!(
        apply1.contains(floppy),
        value_of(&stdout, "modules") == "1",
        "{apply1}"
    );
    // What grub.cfg held after the apply, the command line of the "boot" below.
    assert_eq!(
        file("cmdline").trim(),
        "BOOT_IMAGE=/vmlinuz console=ttyS0,115200n8 hugepagesz=1G hugepages=16"
    );
    // Not drift: a check exits 0 and says why the host needs a reboot.
    assert_eq!(value_of(&stdout, "check1"), "0", "{}", file("check1.out"));
    assert!(
        file("check1.out").contains("reboot required: kernel-args:hugepages"),
        "{}",
        file("check1.out")
    );
    assert!(file("check1.out").contains("0 drifted, 0 errors"));
    // Applied again before the boot: nothing to do, the same reasons (from its drift check).
    assert_eq!(value_of(&stdout, "again"), "0", "{}", file("again.out"));
    assert!(
        file("again.out").contains("result: 0 changed"),
        "{}",
        file("again.out")
    );
    assert!(file("again.out").contains("reboot required: kernel-args:hugepages"));
    assert_eq!(
        value_of(&stdout, "runs_again"),
        "2",
        "update-grub is not run again"
    );
    // Booted with them: nothing left to say.
    assert_eq!(value_of(&stdout, "check2"), "0", "{}", file("check2.out"));
    assert!(
        !file("check2.out").contains("reboot required"),
        "{}",
        file("check2.out")
    );
    // Taken back: the drop-ins go before update-grub runs again.
    assert_eq!(value_of(&stdout, "apply2"), "0", "{}", file("apply2.out"));
    assert_eq!(value_of(&stdout, "dropins"), "0");
    assert_eq!(value_of(&stdout, "runs2"), "4", "once per revert");
    assert_eq!(
        file("grub.cfg").trim(),
        "BOOT_IMAGE=/vmlinuz console=tty0 quiet"
    );
}

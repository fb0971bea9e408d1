//! The mounts' batch check, live, tells mounts in sync from the kernel's mount table and the
//! enable links with builtins: no `systemctl`, no `findmnt`. Only when a mount is not in sync
//! does it ask `systemctl show` (once, for every unit) and `findmnt`, to say how. Run for real
//! inside `unshare --mount`: tmpfs over /mnt (the mount points), /etc/systemd/system (the enable
//! links) and /dev (a udev-style UUID link), so nothing of the machine is touched; `systemctl`
//! is a stub that answers from the same namespace and counts its calls.
use crate::common::*;

const SPEC: &str = r#"fleet "f" target="debian-12"
host "h"
mount "plain" target="/mnt/plain" device="tmpfs" type="tmpfs"
mount "tagged" target="/mnt/tagged" device="UUID=0b311-bell" type="auto"
mount "linked" target="/mnt/linked" device="/mnt/src/null-link" type="tmpfs"
mount "bound" target="/mnt/bound" device="/mnt/src" type="none" options="bind"
"#;

/// Stands in for `systemctl show`: a block per unit, enabled when its link is there, active
/// when something is mounted on its Where.
const SYSTEMCTL: &str = r#"#!/bin/sh
echo systemctl >>"$CALLS"
for u in "$@"; do
    case $u in *.mount) ;; *) continue ;; esac
    where=/mnt/${u#mnt-}
    where=${where%.mount}
    state=disabled
    [ ! -L "/etc/systemd/system/local-fs.target.wants/$u" ] || state=enabled
    active=inactive
    ! findmnt --mountpoint "$where" >/dev/null || active=active
    printf 'LoadState=loaded\nUnitFileState=%s\nActiveState=%s\n\n' "$state" "$active"
done
"#;

const DRIVER: &str = r#"
set -eu
here=$PWD
export BELL_ROOT=/ BELL_OFFLINE=0 BELL_STATE=$here/state CALLS=$here/calls PATH=$here/bin:$PATH
mkdir -p state hostdev
: >calls
# A /dev of the namespace's own, with the machine's null and zero in it.
mount --rbind /dev hostdev
mount -t tmpfs tmpfs /dev
for n in null zero; do touch "/dev/$n"; mount --bind "hostdev/$n" "/dev/$n"; done
mkdir -p /dev/disk/by-uuid
ln -s ../../null /dev/disk/by-uuid/0b311-bell
mount -t tmpfs tmpfs /etc/systemd/system
mkdir /etc/systemd/system/local-fs.target.wants
mount -t tmpfs tmpfs /mnt
mkdir /mnt/plain /mnt/tagged /mnt/linked /mnt/bound /mnt/src
ln -s /dev/null /mnt/src/null-link
for m in plain tagged linked bound; do
    ln -s "/etc/systemd/system/mnt-$m.mount" "/etc/systemd/system/local-fs.target.wants/mnt-$m.mount"
done
mount -t tmpfs tmpfs /mnt/plain
# The kernel shows a tmpfs's source as given: the device the tag and the link name.
mount -t tmpfs /dev/null /mnt/tagged
mount -t tmpfs /dev/null /mnt/linked
mount --bind /mnt/src /mnt/bound
sh check.sh | sed 's/^/synced: /'
echo "synced_calls=$(wc -l <calls)"

# Behind bell's back: another file system type, another device, a link removed, an unmount.
umount /mnt/plain
mount -t ramfs tmpfs /mnt/plain
umount /mnt/tagged
mount -t tmpfs /dev/zero /mnt/tagged
rm /etc/systemd/system/local-fs.target.wants/mnt-linked.mount
umount /mnt/bound
sh check.sh | sed 's/^/drifted: /'
echo "drifted_calls=$(wc -l <calls)"
"#;

#[test]
fn mounts_in_sync_are_told_without_a_process_and_drift_still_says_how() {
    if !bell_testkit::namespaces(&["--mount"])
        || !std::path::Path::new("/etc/systemd/system").is_dir()
    {
        return;
    }
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("check.sh"),
        batch_script(b, "mount", "check"),
    )
    .unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("systemctl"), SYSTEMCTL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        bin.join("systemctl"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let text = in_mount_namespace(dir.path(), DRIVER);
    let lines = |label: &str| -> Vec<String> {
        let lines = labelled(&text, label).into_iter();
        lines.map(|l| l.replace('\t', " | ")).collect()
    };
    assert_eq!(
        lines("synced"),
        [
            "mount:plain | in-sync | ",
            "mount:tagged | in-sync | ",
            "mount:linked | in-sync | ",
            "mount:bound | in-sync | ",
        ],
        "{text}"
    );
    assert_eq!(
        value_of(&text, "synced_calls"),
        "0",
        "no systemctl when all are in sync"
    );
    let drifted = lines("drifted");
    let detail = |key: &str| -> String {
        drifted
            .iter()
            .find_map(|l| l.strip_prefix(&format!("mount:{key} | drifted | ")))
            .unwrap_or_else(|| panic!("mount:{key} not drifted:\n{text}"))
            .to_string()
    };
    assert_eq!(drifted.len(), 4, "{text}");
    assert!(
        detail("plain").starts_with("/mnt/plain has tmpfs"),
        "{text}"
    );
    assert!(
        detail("plain").ends_with("ramfs mounted, the bundle mounts tmpfs (tmpfs)"),
        "{text}"
    );
    assert!(
        detail("tagged").starts_with("/mnt/tagged has /dev/zero"),
        "{text}"
    );
    assert_eq!(
        detail("linked"),
        "mnt-linked.mount is disabled, the bundle enables it"
    );
    assert_eq!(
        detail("bound"),
        "mnt-bound.mount is inactive, the bundle starts it; \
         nothing is mounted on /mnt/bound, the bundle mounts /mnt/src (none)"
    );
    assert_eq!(
        value_of(&text, "drifted_calls"),
        "1",
        "one systemctl for every unit"
    );
}

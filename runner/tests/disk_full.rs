//! A full disk, for real: the root is a small tmpfs in a private mount namespace. A bundle too
//! big to copy is refused and leaves no half copy behind to hold the space; one that copies
//! but cannot be staged is refused and leaves no copy at all; a bundle that fits applies next.
use crate::common::*;
use std::process::Command;

#[test]
fn a_full_disk_refuses_cleanly_and_the_next_apply_that_fits_succeeds() {
    if !bell_testkit::namespaces(&["--mount"]) {
        return;
    }
    let w = World::new();
    let kib = |n: usize| "x".repeat(n * 1024);
    // The tmpfs holds 512 KiB: 600 KiB cannot be copied at all; 300 KiB can be copied but not
    // also staged beside the copy.
    let too_big = w.build(&BundleSpec::new().file("/etc/big", &kib(600), "0644"));
    let no_room_to_stage = w.build(&BundleSpec::new().file("/etc/half", &kib(300), "0644"));
    let fits = w.build(&BundleSpec::new().file("/etc/small", &kib(100), "0644"));
    let root = w.root();
    let driver = format!(
        r#"set -u
root='{root}'
cp -a "$root" "$root.seed"
mount -t tmpfs -o size=512k tmpfs "$root"
cp -a "$root.seed/." "$root/"
listing() {{ echo "$1: $(ls -A "$root/var/lib/bell/generations" 2>/dev/null | tr '\n' ' ')"; }}
'{bin}' apply '{too_big}' --root "$root" 2>"$root.err1"; echo "too-big exit $?"
listing after-too-big
'{bin}' apply '{no_room_to_stage}' --root "$root" 2>"$root.err2"; echo "no-room exit $?"
listing after-no-room
test -e "$root/etc/half" && echo "half was written"
'{bin}' apply '{fits}' --root "$root" >/dev/null 2>"$root.err3"; echo "fits exit $?"
listing after-fits
test -e "$root/etc/small" && echo "small was written"
cat "$root.err1" "$root.err2" "$root.err3"
"#,
        root = root.display(),
        bin = bin(),
        too_big = too_big.display(),
        no_room_to_stage = no_room_to_stage.display(),
        fits = fits.display(),
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &driver])
        .output()
        .unwrap();
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let id = |bundle: &std::path::Path| bell_bundle::verify_dir(bundle).unwrap().id();
    assert_eq!(lines[0], "too-big exit 1", "{text}");
    assert_eq!(
        lines[1].trim_end(),
        "after-too-big:",
        "no half copy may stay: {text}"
    );
    assert_eq!(lines[2], "no-room exit 1", "{text}");
    assert_eq!(
        lines[3].trim_end(),
        "after-no-room:",
        "a refused apply keeps no copy: {text}"
    );
    assert_eq!(lines[4], "fits exit 0", "{text}");
    assert_eq!(
        lines[5].trim_end(),
        format!("after-fits: {}", id(&fits)),
        "{text}"
    );
    assert_eq!(lines[6], "small was written", "{text}");
    assert!(
        text.contains("cannot copy the bundle") && text.contains("nothing was changed"),
        "{text}"
    );
    assert!(text.contains("the file switch failed"), "{text}");
}

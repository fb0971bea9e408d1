//! sysctl apply/revert scripts run for real in a private network namespace (`unshare --net
//! --mount`), where net.* keys belong to the test: apply sets and records the original,
//! re-apply changes nothing (not even its state), revert restores the original, and a value the
//! kernel refuses or does not take fails the resource. The batch's apply, which sets every due
//! key in one process, does as the keys' own applies do, line by line.

use crate::common::*;
use std::process::Command;

const SPEC: &str = r#"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
sysctl {
    net.ipv4.ip_forward 1
    "net/ipv4/conf/all/rp_filter" 2
    net.ipv4.ip_local_port_range "20000 40000"
}
"#;

/// Runs `driver` (sh) in a fresh network and mount namespace; None when that is not possible.
fn in_netns(driver: &str, dir: &std::path::Path) -> Option<String> {
    if !bell_testkit::namespaces(&["--net", "--mount"]) {
        return None;
    }
    let path = dir.join("driver.sh");
    std::fs::write(&path, driver).expect("write driver");
    let out = Command::new("unshare")
        .args(["--net", "--mount", "sh"])
        .arg(&path)
        .current_dir(dir)
        .output()
        .expect("run unshare");
    assert!(
        out.status.success(),
        "driver failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The lines the batch check printed under `label`.
fn checked(out: &str, label: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{label}: ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn apply_reapply_revert_restore_the_original() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    for (key, tag) in [
        ("net.ipv4.ip_forward", "fwd"),
        ("net/ipv4/conf/all/rp_filter", "rpf"),
        // Several digits and two fields, which the kernel separates by a tab.
        ("net.ipv4.ip_local_port_range", "range"),
    ] {
        for role in ["apply", "revert"] {
            std::fs::write(
                dir.path().join(format!("{tag}.{role}")),
                script(b, "sysctl", key, role),
            )
            .expect("write script");
        }
    }
    // One check reads every key back (the batch of the sysctl kind).
    std::fs::write(
        dir.path().join("batch.check"),
        script(b, "sysctl", "net.ipv4.ip_forward", "check"),
    )
    .expect("write script");
    let driver = r#"
set -u
export BELL_ROOT=/ BELL_OFFLINE=0
show() { printf '%s_fwd=%s\n%s_rpf=%s\n%s_range=%s\n' "$1" "$(cat /proc/sys/net/ipv4/ip_forward)" "$1" "$(cat /proc/sys/net/ipv4/conf/all/rp_filter)" "$1" "$(cat /proc/sys/net/ipv4/ip_local_port_range)"; }
stamp() { printf '%s=%s\n' "$1" "$(stat -c '%y %s' state/fwd/original state/rpf/original 2>&1 | tr '\n' ' ')"; }
step() { for t in fwd rpf range; do BELL_STATE=state/$t sh "$t.$1" || echo "failed_$1_$t"; done; }
show before
step apply; show applied; stamp stamp1
printf 'orig_fwd=%s\norig_rpf=%s\n' "$(cat state/fwd/original)" "$(cat state/rpf/original)"
sleep 0.05
step apply; show reapplied; stamp stamp2
BELL_STATE=state/batch sh batch.check | sed 's/^/applied_check: /'
step revert; show reverted
BELL_STATE=state/batch sh batch.check | sed 's/^/reverted_check: /'
printf 'left=%s\n' "$(find state -type f | tr '\n' ' ')"
"#;
    let Some(out) = in_netns(driver, dir.path()) else {
        return;
    };
    assert!(!out.contains("failed_"), "{out}");
    assert_eq!(value_of(&out, "applied_fwd"), "1");
    assert_eq!(value_of(&out, "applied_rpf"), "2");
    assert_eq!(value_of(&out, "applied_range"), "20000\t40000");
    assert_eq!(value_of(&out, "orig_fwd"), value_of(&out, "before_fwd"));
    assert_eq!(value_of(&out, "orig_rpf"), value_of(&out, "before_rpf"));
    assert_eq!(value_of(&out, "reapplied_fwd"), "1");
    assert_eq!(
        value_of(&out, "stamp1"),
        value_of(&out, "stamp2"),
        "re-apply rewrote its state"
    );
    assert_eq!(value_of(&out, "reverted_fwd"), value_of(&out, "before_fwd"));
    assert_eq!(value_of(&out, "reverted_rpf"), value_of(&out, "before_rpf"));
    assert_eq!(
        value_of(&out, "reverted_range"),
        value_of(&out, "before_range")
    );
    // Applied: every key in sync, one line each.
    let applied = checked(&out, "applied_check");
    assert_eq!(
        applied,
        [
            "sysctl:net.ipv4.ip_forward\tin-sync\t",
            "sysctl:net/ipv4/conf/all/rp_filter\tin-sync\t",
            "sysctl:net.ipv4.ip_local_port_range\tin-sync\t",
        ]
        .map(String::from)
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>(),
        "{out}"
    );
    // Back to the original: in sync again only where the original was what the bundle sets.
    let reverted = checked(&out, "reverted_check");
    assert_eq!(
        reverted.contains("sysctl:net.ipv4.ip_forward\tin-sync\t"),
        value_of(&out, "before_fwd") == "1",
        "{out}"
    );
    let before = value_of(&out, "before_range").replace('\t', " ");
    assert!(
        reverted.contains(&format!(
            "sysctl:net.ipv4.ip_local_port_range\tdrifted\tnet.ipv4.ip_local_port_range is {before}, the bundle sets 20000 40000"
        )),
        "{out}"
    );
    assert!(
        value_of(&out, "left").trim().is_empty(),
        "revert left state: {out}"
    );
}

#[test]
fn a_value_the_kernel_refuses_or_does_not_take_fails_the_resource() {
    let dir = tempfile::tempdir().expect("temp dir");
    // "abc" is refused with EINVAL; "1 2" is accepted but the kernel keeps only "1".
    for (tag, value) in [("refused", "\"abc\""), ("not_taken", "\"1 2\"")] {
        let c = compile_ok(&format!(
            "fleet \"t\" target=\"ubuntu-24.04\"\nhost \"h\" address=\"10.0.0.1\"\nsysctl {{\n    net.ipv4.ip_forward {value}\n}}\n"
        ));
        let b = only_bundle(&c);
        std::fs::write(
            dir.path().join(tag),
            script(b, "sysctl", "net.ipv4.ip_forward", "apply"),
        )
        .expect("write script");
    }
    let driver = r#"
export BELL_ROOT=/ BELL_OFFLINE=0
for t in refused not_taken; do
    BELL_STATE=state/$t sh "$t" 2>"$t.err"; printf '%s_rc=%s\n%s_err=%s\n' "$t" "$?" "$t" "$(cat "$t.err")"
done
"#;
    let Some(out) = in_netns(driver, dir.path()) else {
        return;
    };
    assert_eq!(value_of(&out, "refused_rc"), "1", "{out}");
    assert!(
        value_of(&out, "refused_err").starts_with(
            "bell: sysctl:net.ipv4.ip_forward: the kernel refused net.ipv4.ip_forward = abc"
        ),
        "{out}"
    );
    assert_eq!(value_of(&out, "not_taken_rc"), "1", "{out}");
    assert!(
        value_of(&out, "not_taken_err")
            .contains("net.ipv4.ip_forward is 1 after setting it to 1 2"),
        "{out}"
    );
}

/// Offline (an image root), the apply script changes no live value and records nothing; the
/// same script live, in the same namespace, does change it (so the first half can fail).
#[test]
fn offline_touches_nothing_live() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("fwd.apply"),
        script(b, "sysctl", "net.ipv4.ip_forward", "apply"),
    )
    .expect("write script");
    let driver = r#"
set -u
export BELL_ROOT=/
fwd() { cat /proc/sys/net/ipv4/ip_forward; }
printf 'before=%s\n' "$(fwd)"
BELL_OFFLINE=1 BELL_STATE=offline sh fwd.apply || echo failed_offline
printf 'offline=%s\nrecorded=%s\n' "$(fwd)" "$(find offline -type f 2>/dev/null | wc -l)"
BELL_OFFLINE=0 BELL_STATE=live sh fwd.apply || echo failed_live
printf 'live=%s\n' "$(fwd)"
"#;
    let Some(out) = in_netns(driver, dir.path()) else {
        return;
    };
    assert!(!out.contains("failed_"), "{out}");
    assert_eq!(
        value_of(&out, "before"),
        "0",
        "a new namespace forwards nothing"
    );
    assert_eq!(
        value_of(&out, "offline"),
        "0",
        "offline changed the live value"
    );
    assert_eq!(
        value_of(&out, "recorded"),
        "0",
        "offline recorded an original"
    );
    assert_eq!(
        value_of(&out, "live"),
        "1",
        "the script does not set the value live"
    );
}

#[test]
fn the_batch_apply_sets_every_key_it_is_given_as_their_own_applies_do() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
    write("batch.apply", batch_script(b, "sysctl", "apply"));
    write("batch.check", batch_script(b, "sysctl", "check"));
    for (key, tag) in [
        ("net.ipv4.ip_forward", "fwd"),
        ("net/ipv4/conf/all/rp_filter", "rpf"),
        ("net.ipv4.ip_local_port_range", "range"),
    ] {
        write(&format!("{tag}.revert"), script(b, "sysctl", key, "revert"));
    }
    let driver = r#"
set -u
export BELL_ROOT=/ BELL_OFFLINE=0
show() { printf '%s_fwd=%s\n%s_rpf=%s\n%s_range=%s\n' "$1" "$(cat /proc/sys/net/ipv4/ip_forward)" "$1" "$(cat /proc/sys/net/ipv4/conf/all/rp_filter)" "$1" "$(cat /proc/sys/net/ipv4/ip_local_port_range)"; }
stamp() { printf '%s=%s\n' "$1" "$(stat -c '%y %s' state/fwd/original state/range/original 2>&1 | tr '\n' ' ')"; }
mkdir -p state/batch state/fwd state/rpf state/range state/x
set -- sysctl:net.ipv4.ip_forward state/fwd sysctl:net/ipv4/conf/all/rp_filter state/rpf \
    sysctl:net.ipv4.ip_local_port_range state/range sysctl:not.ours state/x
show before
# What a first apply interrupted while keeping the original leaves: an empty file.
: >state/rpf/original
BELL_STATE=state/batch sh batch.apply "$@" | sed 's/^/first: /'
show applied; stamp stamp1
printf 'orig_fwd=%s\norig_range=%s\norig_rpf=%s\n' "$(cat state/fwd/original)" "$(cat state/range/original)" "$(cat state/rpf/original)"
sleep 0.05
BELL_STATE=state/batch sh batch.apply "$@" | sed 's/^/again: /'
stamp stamp2
BELL_STATE=state/batch sh batch.check | sed 's/^/check: /'
for t in fwd rpf range; do BELL_STATE=state/$t sh "$t.revert" || echo "failed_revert_$t"; done
show reverted
# A revert whose original is empty (never set after it) leaves the key alone.
echo 1 >/proc/sys/net/ipv4/ip_forward
: >state/fwd/original
BELL_STATE=state/fwd sh fwd.revert || echo failed_empty_revert
printf 'empty_revert_fwd=%s\n' "$(cat /proc/sys/net/ipv4/ip_forward)"
"#;
    let Some(out) = in_netns(driver, dir.path()) else {
        return;
    };
    assert!(!out.contains("failed_"), "{out}");
    let ok = [
        "sysctl:net.ipv4.ip_forward\tok\t",
        "sysctl:net/ipv4/conf/all/rp_filter\tok\t",
        "sysctl:net.ipv4.ip_local_port_range\tok\t",
        "sysctl:not.ours\tfailed\tnot a sysctl key of this bundle",
    ]
    .map(String::from)
    .into_iter()
    .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(checked(&out, "first"), ok, "{out}");
    assert_eq!(checked(&out, "again"), ok, "{out}");
    assert_eq!(value_of(&out, "applied_fwd"), "1");
    assert_eq!(value_of(&out, "applied_rpf"), "2");
    assert_eq!(value_of(&out, "applied_range"), "20000\t40000");
    // The originals as the keys' own applies keep them (the range with its tab), once.
    assert_eq!(value_of(&out, "orig_fwd"), value_of(&out, "before_fwd"));
    assert_eq!(value_of(&out, "orig_range"), value_of(&out, "before_range"));
    // An empty original is not one kept: written again from the key's value.
    assert_eq!(value_of(&out, "orig_rpf"), value_of(&out, "before_rpf"));
    assert_eq!(value_of(&out, "empty_revert_fwd"), "1");
    assert_eq!(value_of(&out, "stamp1"), value_of(&out, "stamp2"));
    assert_eq!(checked(&out, "check").len(), 3, "{out}");
    assert!(
        checked(&out, "check")
            .iter()
            .all(|l| l.contains("\tin-sync")),
        "{out}"
    );
    for tag in ["fwd", "rpf", "range"] {
        assert_eq!(
            value_of(&out, &format!("reverted_{tag}")),
            value_of(&out, &format!("before_{tag}")),
            "{out}"
        );
    }
}

#[test]
fn the_batch_apply_fails_a_refused_or_untaken_value_alone_with_the_own_applys_words() {
    let c = compile_ok(
        "fleet \"t\" target=\"ubuntu-24.04\"\nhost \"h\" address=\"10.0.0.1\"\nsysctl {\n    net.ipv4.ip_forward \"1 2\"\n    net.ipv4.conf.all.rp_filter \"abc\"\n    net.ipv4.conf.all.forwarding 1\n}\n",
    );
    let b = only_bundle(&c);
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
    write("batch.apply", batch_script(b, "sysctl", "apply"));
    write(
        "refused.apply",
        script(b, "sysctl", "net.ipv4.conf.all.rp_filter", "apply"),
    );
    write(
        "untaken.apply",
        script(b, "sysctl", "net.ipv4.ip_forward", "apply"),
    );
    let driver = r#"
export BELL_ROOT=/ BELL_OFFLINE=0
mkdir -p state/batch state/a state/b state/c
BELL_STATE=state/batch sh batch.apply sysctl:net.ipv4.ip_forward state/a \
    sysctl:net.ipv4.conf.all.rp_filter state/b sysctl:net.ipv4.conf.all.forwarding state/c \
    | sed 's/^/batch: /'
printf 'rc=%s\nforwarding=%s\n' "$?" "$(cat /proc/sys/net/ipv4/conf/all/forwarding)"
for t in refused untaken; do
    BELL_STATE=state/$t sh "$t.apply" 2>&1 | sed "s/^/$t: /"
done
"#;
    let Some(out) = in_netns(driver, dir.path()) else {
        return;
    };
    assert_eq!(value_of(&out, "rc"), "0", "{out}");
    assert_eq!(value_of(&out, "forwarding"), "1", "{out}");
    let said = checked(&out, "batch");
    let own = |tag: &str, key: &str| {
        let line = checked(&out, tag).into_iter().next().unwrap_or_default();
        let why = line
            .strip_prefix(&format!("bell: sysctl:{key}: "))
            .unwrap_or("?");
        format!("sysctl:{key}\tfailed\t{why}")
    };
    let expected = [
        own("untaken", "net.ipv4.ip_forward"),
        own("refused", "net.ipv4.conf.all.rp_filter"),
        "sysctl:net.ipv4.conf.all.forwarding\tok\t".to_string(),
    ]
    .into_iter()
    .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(said, expected, "{out}");
    assert!(
        said.iter()
            .any(|l| l.contains("the kernel refused net.ipv4.conf.all.rp_filter = abc")),
        "{out}"
    );
    assert!(
        said.iter()
            .any(|l| l.contains("net.ipv4.ip_forward is 1 after setting it to 1 2")),
        "{out}"
    );
}

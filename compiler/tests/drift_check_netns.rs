//! Drift on a live host, for real: inside `unshare --net --mount` (a private network namespace,
//! so net.* sysctls belong to the test; tmpfs over /etc/sysctl.d, /etc/security/limits.d and
//! /var/lib so nothing of the machine is touched) a bundle is applied to `/`, then a managed
//! file and a live sysctl are changed behind bell's back. `bell-run check` names exactly those
//! two and exits 2; `bell-run apply` of the same bundle puts the file back and applies the
//! drifted sysctl again (its check said so), after which `check` is clean.
use crate::common::fleet::*;
use crate::common::*;
use std::process::Command;

const SPEC: &str = r#"fleet "lab" target="debian-12"
host "h" address="10.0.0.1"
sysctl {
    net.ipv4.ip_forward 1
    net.ipv4.tcp_syncookies 1
}
limit "nofile" domain="*" type="soft" item="nofile" value=4096
"#;

#[test]
fn check_names_the_edited_file_and_the_changed_sysctl_and_apply_repairs_them() {
    if !require("sysctl") || !bell_testkit::namespaces(&["--net", "--mount"]) {
        return;
    }
    let bin = bell_run();
    let f = Fixture::spec(SPEC);
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = f.path().join("out/hosts/h").canonicalize().unwrap();
    let manifest: bell_bundle::Manifest =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("bundle.json")).unwrap())
            .unwrap();
    let repairs_live = manifest
        .resources
        .iter()
        .any(|r| r.key() == "sysctl:net.ipv4.ip_forward" && r.apply.is_some());

    let driver = format!(
        r#"set -u
bell={bin}
bundle={bundle}
mount -t tmpfs tmpfs /etc/sysctl.d
mount -t tmpfs tmpfs /etc/security/limits.d
mount -t tmpfs tmpfs /var/lib
# The values the bundle wants, so that the host starts in sync with or without apply scripts.
sysctl -q -w net.ipv4.ip_forward=1 net.ipv4.tcp_syncookies=1
"$bell" apply "$bundle" >apply1.out 2>&1; echo "apply1=$?"
"$bell" check >check1.out 2>&1; echo "check1=$?"
echo '* hard nofile 1' >> /etc/security/limits.d/60-bell.conf
sysctl -q -w net.ipv4.ip_forward=0
"$bell" check --json >check2.json 2>check2.err; echo "check2=$?"
"$bell" apply "$bundle" --json >apply2.json 2>apply2.err; echo "apply2=$?"
echo "forward=$(cat /proc/sys/net/ipv4/ip_forward)"
echo "limits=$(grep -c 'hard nofile 1' /etc/security/limits.d/60-bell.conf)"
"$bell" check >check3.out 2>&1; echo "check3=$?"
"#,
        bin = bin.display(),
        bundle = bundle.display(),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("driver.sh"), driver).unwrap();
    let out = Command::new("unshare")
        .args(["--net", "--mount", "sh", "driver.sh"])
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
    assert_eq!(value_of(&stdout, "check1"), "0", "{}", file("check1.out"));

    assert_eq!(value_of(&stdout, "check2"), "2", "{}", file("check2.err"));
    let check: serde_json::Value = serde_json::from_str(&file("check2.json")).unwrap();
    let drift: Vec<(String, String)> = check["drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().into(),
                d["detail"].as_str().unwrap().into(),
            )
        })
        .collect();
    // The edit itself is shown: the line added behind bell's back.
    let limits = &drift[0].1;
    assert!(
        limits.starts_with("content differs from line ")
            && limits.ends_with("(- bundle, + host):\n    + * hard nofile 1"),
        "{limits}"
    );
    assert_eq!(
        drift,
        [
            (
                "file:/etc/security/limits.d/60-bell.conf".to_string(),
                limits.clone()
            ),
            (
                "sysctl:net.ipv4.ip_forward".to_string(),
                "net.ipv4.ip_forward is 0, the bundle sets 1".to_string()
            ),
        ]
    );

    assert_eq!(value_of(&stdout, "apply2"), "0", "{}", file("apply2.err"));
    let apply: serde_json::Value = serde_json::from_str(&file("apply2.json")).unwrap();
    let change = |key: &str| {
        apply["plan"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .map(|r| r["change"].as_str().unwrap().to_string())
    };
    assert_eq!(
        change("sysctl:net.ipv4.ip_forward").as_deref(),
        Some("drifted")
    );
    assert_eq!(
        change("sysctl:net.ipv4.tcp_syncookies").as_deref(),
        Some("unchanged")
    );
    assert_eq!(
        value_of(&stdout, "limits"),
        "0",
        "the managed file was put back"
    );
    assert!(repairs_live, "sysctl resources have an apply script");
    assert_eq!(
        value_of(&stdout, "forward"),
        "1",
        "the live value was put back"
    );
    assert_eq!(value_of(&stdout, "check3"), "0", "{}", file("check3.out"));
}

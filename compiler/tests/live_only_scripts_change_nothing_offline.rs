//! bellc marks a stdlib script `live_only` when its second line says it acts on the running
//! system only, and bell-run then never starts it on an image root. This holds bellc to that
//! word: every marked script of the examples, run offline as bell-run would, exits 0 and
//! changes nothing under the root (its state directory included), with an empty state
//! directory and with one holding every file the script reads from it. It also pins which
//! scripts are marked, and that a user's `exec` script never is, whatever its second line.
use crate::common;
use crate::common::in_memory::{bundle, example};
use bellc_core::render::LIVE_ONLY_LINE;
use std::collections::BTreeSet;
use std::path::Path;

/// Every `$BELL_STATE/NAME` the script reads, created (as a directory when it tests `-d`).
fn populate_state(text: &str, state: &Path) {
    for (at, _) in text.match_indices("$BELL_STATE/") {
        let name: String = text[at + "$BELL_STATE/".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            .collect();
        if name.is_empty() {
            continue;
        }
        let path = state.join(&name);
        if text.contains(&format!("-d \"$BELL_STATE/{name}\"")) {
            std::fs::create_dir_all(&path).unwrap();
        } else {
            std::fs::write(&path, "1\n").unwrap();
        }
    }
}

#[test]
fn marked_scripts_exit_at_once_offline_and_only_they_are_marked() {
    let mut marked = BTreeSet::new();
    let mut ran = 0;
    for name in ["divingbell.kdl", "three-role.kdl"] {
        for b in example(name).bundles.values() {
            let mut scripts: Vec<(String, &str, &bell_bundle::Script)> = Vec::new();
            for r in &b.manifest.resources {
                for (role, s) in [
                    ("apply", &r.apply),
                    ("check", &r.check),
                    ("revert", &r.revert),
                ] {
                    if let Some(s) = s {
                        scripts.push((format!("{}:{}", r.kind, r.name), role, s));
                    }
                }
            }
            for t in &b.manifest.triggers {
                scripts.push((format!("trigger:{}", t.name), "trigger", &t.script));
            }
            for batch in &b.manifest.batches {
                scripts.push((format!("batch:{}", batch.name), "check", &batch.check));
            }
            for (key, role, script) in scripts {
                // A sealed script is in the bundle by its keyed digest.
                let bytes = match script.sealed {
                    true => &b.sealed[&script.sha256],
                    false => &b.contents[&script.path],
                };
                let text = String::from_utf8(bytes.to_vec()).unwrap();
                let says = text.lines().nth(1) == Some(LIVE_ONLY_LINE);
                assert_eq!(script.live_only, says, "{key} {role}: marked as it says");
                if !script.live_only {
                    continue;
                }
                let kind = key.split(':').next().unwrap_or_default().to_string();
                marked.insert(format!("{kind} {role}"));
                for populated in [false, true] {
                    let root = tempfile::tempdir().unwrap();
                    std::fs::create_dir_all(root.path().join("etc")).unwrap();
                    let state = root.path().join("var/lib/bell/state/x");
                    std::fs::create_dir_all(&state).unwrap();
                    if populated {
                        populate_state(&text, &state);
                    }
                    let before = common::snapshot_tree(root.path());
                    let out = common::run(&text, root.path(), &state, true);
                    common::ok(&out);
                    assert!(
                        out.stdout.is_empty(),
                        "{key} {role} printed offline: {}",
                        String::from_utf8_lossy(&out.stdout)
                    );
                    assert_eq!(
                        before,
                        common::snapshot_tree(root.path()),
                        "{key} {role} (state populated: {populated}) changed the root offline"
                    );
                    ran += 1;
                }
            }
        }
    }
    let want: BTreeSet<String> = [
        "apparmor apply",
        "apparmor check",
        "apparmor revert",
        "batch check",
        "ethtool check",
        "sysctl apply",
        "sysctl revert",
        "trigger trigger",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(marked, want);
    assert!(ran > 20, "only {ran} runs");
}

#[test]
fn a_users_exec_script_is_never_marked() {
    let script = format!("#!/bin/sh\n{LIVE_ONLY_LINE}\ntouch /tmp/x\n");
    let spec = format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nexec \"s.sh\" {{\n    script {script:?}\n}}\n"
    );
    let b = bundle(&spec, "h");
    let exec = b
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == "exec")
        .and_then(|r| r.apply.as_ref())
        .expect("the exec script");
    assert_eq!(
        String::from_utf8(b.contents[&exec.path].to_vec()).unwrap(),
        script
    );
    assert!(!exec.live_only);
}

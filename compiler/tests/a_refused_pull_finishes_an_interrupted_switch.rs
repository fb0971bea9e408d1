//! A switch of files that a killed bell-run left halfway (SIGKILL at its `mid-switch` crash
//! point: some files of the new generation in place, others still the old one's) is finished
//! by the next pull before anything else, also when that pull is then refused because the
//! mirror is away: the host never stays on a mix of two generations while it waits for the
//! mirror. Found by the fault run (`fleet_under_faults`, seed 2026): a host killed mid-switch,
//! then the mirror down, and its pulls refused for as long, each leaving the mix in place.

use crate::common::fleet::{bell_run, run_bin, text};
use crate::common::pulling::*;
use std::os::unix::process::ExitStatusExt;

/// Every file the state of `root` says bell-run manages, with what the state says it holds and
/// what it does hold, where the two differ.
fn mixed(root: &std::path::Path) -> Vec<String> {
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("var/lib/bell/state.json")).unwrap())
            .unwrap();
    let files = state["files"].as_object().expect("managed files");
    assert!(!files.is_empty());
    files
        .iter()
        .filter_map(|(path, file)| {
            let want = file["sha256"].as_str().unwrap();
            let held = std::fs::read(root.join(path.trim_start_matches('/')))
                .map(|b| bell_bundle::sha256_hex(&b))
                .unwrap_or_default();
            (held != want).then(|| format!("{path}: holds {held}, the state says {want}"))
        })
        .collect()
}

#[test]
fn a_pull_refused_for_a_missing_mirror_still_finishes_the_switch_a_crash_left() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let trust = setup.trust.as_str();
    let source = setup.served.to_str().unwrap();
    let root = image_root();
    let args = |source: &str| {
        let root = root.path().to_str().unwrap().to_string();
        [
            "pull", "--source", source, "--root", &root, "--host", "h1", "--trust", trust,
        ]
        .map(str::to_string)
    };
    let run = |source: &str, env: &[(&str, &str)]| {
        let args = args(source);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_bin(&bin, &args, env)
    };
    let out = run(source, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(motd(root.path()), "release 1\n");

    // Release 2 changes the motd and the role: killed after the first file of the switch.
    copy_over(&setup.dir("out2"), &setup.served);
    let out = run(source, &[("BELL_RUN_FAILPOINT", "mid-switch")]);
    assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    assert!(
        !mixed(root.path()).is_empty(),
        "the crash left no mix to finish"
    );

    // The mirror is away: the pull is refused, and the switch is finished first all the same.
    let gone = setup.dir("no-mirror-here");
    let out = run(gone.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("completed the interrupted switch to generation"),
        "{}",
        text(&out)
    );
    assert_eq!(mixed(root.path()), Vec::<String>::new(), "{}", text(&out));
    assert_eq!(motd(root.path()), "release 2\n");
    assert!(!root.path().join("var/lib/bell/journal.json").exists());

    // The next pull with the mirror back goes on from there.
    let out = run(source, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(mixed(root.path()), Vec::<String>::new());
}

//! A script the manifest marks `live_only` acts on the running system only, so on an image
//! root (offline) bell-run does not start it: the apply, check, revert and trigger each count
//! as having exited 0, without a process. An unmarked script with the same text runs.
use crate::common::*;

fn bundle(w: &World, marked: bool, with_resource: bool) -> BundleSpec {
    let script = |what: &str| {
        let head = if marked { LIVE_ONLY } else { "#!/bin/sh\n" };
        format!("{head}{}", w.event(what))
    };
    let mut spec = BundleSpec::new().file("/etc/systemd/system/a.service", "[Unit]\n", "0644");
    if with_resource {
        spec = spec.resource(
            ResourceSpec::new("sysctl", "vm.swappiness")
                .files(&["/etc/systemd/system/a.service"])
                .apply(&script("apply"))
                .check(&script("check"))
                .revert(&script("revert")),
        );
    }
    spec.trigger(
        "daemon-reload",
        &["/etc/systemd/system/"],
        &script("trigger"),
    )
}

fn check(w: &World) -> std::process::Output {
    let root = w.root();
    w.run(&["check", "--root", root.to_str().unwrap(), "--json"])
}

#[test]
fn marked_scripts_are_not_started_offline_and_unmarked_ones_are() {
    let w = World::new();
    let out = w.apply(&w.build(&bundle(&w, true, true)), &["--json"]);
    expect_code(&out, 0);
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["resources"][0]["key"], "sysctl:vm.swappiness");
    assert_eq!(report["resources"][0]["status"], "ok", "{report}");
    expect_code(&check(&w), 0);
    // Removing the resource reverts it: not started either, and no state is left.
    let state = w.root().join("var/lib/bell/state/sysctl/vm.swappiness");
    expect_code(&w.apply(&w.build(&bundle(&w, true, false)), &[]), 0);
    assert!(w.events().is_empty(), "started: {:?}", w.events());
    assert!(!state.exists(), "its state stayed");

    // The same scripts unmarked: every one runs.
    let w = World::new();
    expect_code(&w.apply(&w.build(&bundle(&w, false, true)), &[]), 0);
    expect_code(&check(&w), 0);
    let state = w.root().join("var/lib/bell/state/sysctl/vm.swappiness");
    assert!(
        state.is_dir(),
        "the applied resource has no state directory"
    );
    expect_code(&w.apply(&w.build(&bundle(&w, false, false)), &[]), 0);
    assert_eq!(w.events(), vec!["trigger", "apply", "check", "revert"]);
    assert!(!state.exists(), "its state stayed after the revert");
}

//! `exec`: the user's script ships verbatim as the resource's apply, its policy goes into the
//! manifest for bell-run, and the policy rules of the language are diagnostics that point at
//! the property breaking them.

use crate::common;
use crate::common::in_memory::{bundle, errors, example};
use bell_bundle::{ExecPolicy, OnFailure, Rerun};
use std::collections::BTreeMap;

#[test]
fn the_divingbell_example_carries_its_policies() {
    let compiled = example("divingbell.kdl");
    let id = &compiled.release.hosts["node-plain"].bundle;
    let b = &compiled.bundles[id];
    let execs: Vec<_> = b
        .manifest
        .resources
        .iter()
        .filter(|r| r.kind == "exec")
        .collect();
    let names: Vec<&str> = execs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["001-script1.sh", "002-script2.sh", "003-script3.sh"]
    );
    assert_eq!(
        execs[0].exec.as_ref().unwrap(),
        &ExecPolicy {
            rerun: Rerun::OnceSuccessfully,
            rerun_interval: None,
            retry_interval: None,
            rerun_interval_persist: true,
            retry_interval_persist: true,
            rerun_max_count: None,
            retry_max_count: None,
            timeout: 1800,
            on_failure: OnFailure::Halt,
            background: false,
            args: vec!["arg1".into(), "arg2".into()],
            env: BTreeMap::from([
                ("env1".into(), "env1-val".into()),
                ("env2".into(), "env2-val".into())
            ]),
            offline: bell_bundle::Offline::Image,
            reboot: false,
        }
    );
    let p2 = execs[1].exec.as_ref().unwrap();
    assert_eq!(
        (
            p2.rerun,
            p2.rerun_interval,
            p2.retry_interval,
            p2.on_failure
        ),
        (Rerun::Always, Some(3600), Some(60), OnFailure::Continue)
    );
    assert_eq!(execs[2].exec.as_ref().unwrap().rerun, Rerun::Never);
    // The script is the apply, byte for byte; nothing to revert.
    let apply = execs[1].apply.as_ref().unwrap();
    assert_eq!(&*b.contents[&apply.path], b"#!/bin/sh\necho hello\n");
    assert!(execs.iter().all(|r| r.revert.is_none()));
}

#[test]
fn the_script_is_not_templated() {
    let b = bundle(
        r##"
fleet "f" target="debian-12"
host "h"
exec "s.sh" {
    script "#!/bin/sh\necho '{{ host.name }}' \"$HOME\" `id`\n"
}
"##,
        "h",
    );
    assert_eq!(
        common::script(&b, "exec", "s.sh", "apply"),
        "#!/bin/sh\necho '{{ host.name }}' \"$HOME\" `id`\n"
    );
}

#[test]
fn identity_covers_the_name_and_the_policy() {
    let spec = |name: &str, timeout: u32| {
        format!(
            "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nexec \"{name}\" timeout={timeout} {{\n    script \"#!/bin/sh\\ntrue\\n\"\n}}\n"
        )
    };
    let hash = |text: String| bundle(&text, "h").manifest.resources[0].hash.clone();
    let base = hash(spec("a.sh", 60));
    assert_ne!(base, hash(spec("b.sh", 60)));
    assert_ne!(base, hash(spec("a.sh", 61)));
    assert_eq!(base, hash(spec("a.sh", 60)));
}

#[test]
fn after_edges_are_kept() {
    let b = bundle(
        r##"
fleet "f" target="debian-12"
host "h"
package "htop"
exec "s.sh" {
    after "package:htop"
    script "#!/bin/sh\n"
}
"##,
        "h",
    );
    let exec = b
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == "exec")
        .unwrap();
    assert_eq!(exec.after, ["package:htop"]);
}

fn one_error(body: &str) -> String {
    let text = format!("fleet \"f\" target=\"debian-12\"\nhost \"h\"\n{body}");
    let errors = errors(&text);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    errors.into_iter().next().unwrap()
}

#[test]
fn a_finite_rerun_interval_needs_rerun_always() {
    let e = one_error(
        "exec \"s.sh\" rerun=\"once-successfully\" \\\n    rerun-interval=60 {\n    script \"#!/bin/sh\\n\"\n}\n",
    );
    assert_eq!(
        e,
        "bell.kdl:4:5: error[bell::render::invalid]: `exec:s.sh` has a finite `rerun-interval` but does not rerun"
    );
    // "infinite" means none, and is fine with any rerun.
    bundle(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nexec \"s.sh\" rerun=\"never\" rerun-interval=\"infinite\" retry-interval=\"infinite\" {\n    script \"#!/bin/sh\\n\"\n}\n",
        "h",
    );
}

#[test]
fn a_finite_retry_interval_needs_a_rerun() {
    let e = one_error(
        "exec \"s.sh\" rerun=\"never\" {\n    script \"#!/bin/sh\\n\"\n}\noverride \"o\" {\n    match host=\"h\"\n    exec \"s.sh\" retry-interval=30\n}\n",
    );
    assert_eq!(
        e,
        "bell.kdl:8:17: error[bell::render::invalid]: `exec:s.sh` has a finite `retry-interval` but `rerun=\"never\"`"
    );
    let b = bundle(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nexec \"s.sh\" rerun=\"once-successfully\" retry-interval=30 {\n    script \"#!/bin/sh\\n\"\n}\n",
        "h",
    );
    assert_eq!(
        b.manifest.resources[0]
            .exec
            .as_ref()
            .unwrap()
            .retry_interval,
        Some(30)
    );
}

#[test]
fn the_timeout_cannot_be_infinite() {
    let e = one_error("exec \"s.sh\" timeout=\"infinite\" {\n    script \"#!/bin/sh\\n\"\n}\n");
    assert_eq!(
        e,
        "bell.kdl:3:13: error[bell::render::invalid]: `exec:s.sh` cannot have an infinite `timeout`"
    );
}

#[test]
fn env_names_must_be_shell_identifiers() {
    let e = one_error(
        "exec \"s.sh\" {\n    script \"#!/bin/sh\\n\"\n    env GOOD=\"1\" \"1bad\"=\"2\"\n}\n",
    );
    assert_eq!(
        e,
        "bell.kdl:5:5: error[bell::render::invalid]: `1bad` is not a valid environment variable name"
    );
}

#[test]
fn env_cannot_set_bell_runs_own_variables() {
    // An exec told BELL_OFFLINE=0 while an image is baked would touch the build machine.
    let e =
        one_error("exec \"s.sh\" {\n    script \"#!/bin/sh\\n\"\n    env BELL_OFFLINE=\"0\"\n}\n");
    assert_eq!(
        e,
        "bell.kdl:5:5: error[bell::render::invalid]: `BELL_OFFLINE` is set by bell-run itself"
    );
}

#[test]
fn persistence_and_max_counts_reach_the_manifest() {
    let b = bundle(
        r##"
fleet "f" target="debian-12"
host "h"
exec "a.sh" rerun="always" rerun-interval=3600 rerun-interval-persist=#false rerun-max-count=3 retry-interval=60 retry-interval-persist=#false retry-max-count=5 {
    script "#!/bin/sh\n"
}
exec "b.sh" rerun="always" rerun-max-count="infinite" retry-max-count="infinite" {
    script "#!/bin/sh\n"
}
"##,
        "h",
    );
    let policy = |i: usize| b.manifest.resources[i].exec.clone().unwrap();
    let a = policy(0);
    assert_eq!(
        (
            a.rerun_interval_persist,
            a.retry_interval_persist,
            a.rerun_max_count,
            a.retry_max_count
        ),
        (false, false, Some(3), Some(5))
    );
    let b = policy(1);
    assert_eq!(
        (
            b.rerun_interval_persist,
            b.retry_interval_persist,
            b.rerun_max_count,
            b.retry_max_count
        ),
        (true, true, None, None)
    );
}

#[test]
fn persistence_and_counts_need_what_they_modify() {
    let script = "{\n    script \"#!/bin/sh\\n\"\n}\n";
    for (props, expected) in [
        (
            "rerun-interval-persist=#false",
            "`exec:s.sh` has `rerun-interval-persist=#false` but no finite `rerun-interval`",
        ),
        (
            "retry-interval-persist=#false",
            "`exec:s.sh` has `retry-interval-persist=#false` but no finite `retry-interval`",
        ),
        (
            "rerun=\"once-successfully\" rerun-max-count=2",
            "`exec:s.sh` has a `rerun-max-count` but does not rerun",
        ),
        (
            "rerun=\"never\" retry-max-count=2",
            "`exec:s.sh` has a `retry-max-count` but `rerun=\"never\"`",
        ),
        (
            "retry-max-count=-1",
            "`exec retry-max-count` expects a whole number of times (or \"infinite\")",
        ),
    ] {
        let e = one_error(&format!("exec \"s.sh\" {props} {script}"));
        assert!(e.contains(expected), "{props}: {e}");
    }
}

#[test]
fn a_script_that_asks_for_a_reboot_runs_once() {
    let b = bundle(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nexec \"firmware.sh\" rerun=\"once-successfully\" reboot=#true {\n    script \"#!/bin/sh\\n\"\n}\nexec \"plain.sh\" {\n    script \"#!/bin/sh\\n\"\n}\n",
        "h",
    );
    let policy = |name: &str| {
        b.manifest
            .resources
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.exec.clone())
            .expect(name)
    };
    assert!(policy("firmware.sh").reboot);
    assert!(!policy("plain.sh").reboot);
    assert!(
        !b.manifest_json.contains("\"reboot\": false"),
        "left out when false"
    );
    let e = one_error(
        "exec \"fw.sh\" rerun=\"always\" \\\n    reboot=#true {\n    script \"#!/bin/sh\\n\"\n}\n",
    );
    assert_eq!(
        e,
        "bell.kdl:4:5: error[bell::render::invalid]: `exec:fw.sh` asks for a reboot after every run, and runs again after every boot"
    );
}

//! Triggers run once per apply, between the file switch and the applies, when a managed file
//! under one of their paths was created, changed or removed, and not otherwise.
use crate::common::*;

fn units(w: &World, content: &str, with_second: bool) -> BundleSpec {
    let mut spec = BundleSpec::new()
        .file("/etc/systemd/system/a.service", content, "0644")
        .file("/etc/sysctl.d/60-bell.conf", "x = 1\n", "0644");
    let mut files = vec!["/etc/systemd/system/a.service"];
    if with_second {
        spec = spec.file("/etc/systemd/system/b.service", content, "0644");
        files.push("/etc/systemd/system/b.service");
    }
    spec.resource(
        ResourceSpec::new("unit", "ab")
            .files(&files)
            .apply(&w.event("apply units")),
    )
    .resource(
        ResourceSpec::new("sysctl", "x")
            .files(&["/etc/sysctl.d/60-bell.conf"])
            .apply(&w.event("apply sysctl")),
    )
    .trigger(
        "daemon-reload",
        &["/etc/systemd/system/"],
        &w.event("daemon-reload"),
    )
}

#[test]
fn a_trigger_runs_once_before_the_applies_when_its_paths_change() {
    let w = World::new();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", true)), &[]), 0);
    assert_eq!(
        w.events(),
        vec!["daemon-reload", "apply units", "apply sysctl"]
    );

    w.clear_events();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", true)), &[]), 0);
    assert!(w.events().is_empty(), "nothing changed: {:?}", w.events());

    // Removing a unit fires it too.
    w.clear_events();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", false)), &[]), 0);
    assert_eq!(w.events(), vec!["daemon-reload", "apply units"]);
}

#[test]
fn a_change_outside_the_trigger_paths_does_not_fire_it() {
    let w = World::new();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", false)), &[]), 0);
    std::fs::write(w.root().join("etc/sysctl.d/60-bell.conf"), "drift\n").unwrap();
    w.clear_events();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", false)), &[]), 0);
    assert_eq!(w.events(), vec!["apply sysctl"]);
}

#[test]
fn dropping_the_last_unit_still_runs_the_previous_generation_trigger() {
    let w = World::new();
    expect_code(&w.apply(&w.build(&units(&w, "[Unit]\n", false)), &[]), 0);
    w.clear_events();
    expect_code(&w.apply(&w.build(&BundleSpec::new()), &[]), 0);
    assert_eq!(w.events(), vec!["daemon-reload"]);
}

#[test]
fn a_failed_trigger_fails_the_run_and_is_retried() {
    let w = World::new();
    let flag = w.tmp.path().join("ok");
    let spec = BundleSpec::new()
        .file("/etc/systemd/system/a.service", "[Unit]\n", "0644")
        .resource(ResourceSpec::new("unit", "a").files(&["/etc/systemd/system/a.service"]))
        .trigger(
            "daemon-reload",
            &["/etc/systemd/system/"],
            &format!("{}[ -e '{}' ]\n", w.event("reload"), flag.display()),
        );
    let bundle = w.build(&spec);
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 3);
    assert!(
        stdout(&out).contains("trigger:daemon-reload"),
        "{}",
        stdout(&out)
    );
    std::fs::write(&flag, "").unwrap();
    expect_code(&w.apply(&bundle, &[]), 0);
    expect_code(&w.apply(&bundle, &[]), 0);
    assert_eq!(w.events(), vec!["reload", "reload"]);
}

/// A trigger script that records the arguments it was given, one `[ARG]` per line.
fn recording(w: &World) -> String {
    format!(
        "for arg do printf '[%s]\\n' \"$arg\"; done >> '{}'\necho end >> '{}'\n",
        w.events_path().display(),
        w.events_path().display()
    )
}

#[test]
fn a_trigger_is_told_which_paths_fired_it_and_how() {
    let w = World::new();
    let hostile = "/etc/systemd/system/it's a\nunit $(x).service";
    let spec = |content: &str, with: &[&str]| {
        // Only `a.service` takes `content`.
        let mut spec = BundleSpec::new().file("/etc/sysctl.d/60-bell.conf", content, "0644");
        for path in with {
            let text = if path.ends_with("/a.service") {
                content
            } else {
                "x\n"
            };
            spec = spec.file(path, text, "0644");
        }
        let mut files = with.to_vec();
        files.push("/etc/sysctl.d/60-bell.conf");
        spec.resource(ResourceSpec::new("unit", "u").files(&files))
            .trigger("daemon-reload", &["/etc/systemd/system/"], &recording(&w))
    };
    let a = "/etc/systemd/system/a.service";
    let b = "/etc/systemd/system/b.service";
    expect_code(&w.apply(&w.build(&spec("1\n", &[a, b, hostile])), &[]), 0);
    let created: Vec<String> = [a, b, hostile]
        .iter()
        .map(|p| format!("[created={p}]"))
        .collect();
    let mut want: Vec<String> = created.join("\n").lines().map(str::to_string).collect();
    want.push("end".into());
    assert_eq!(w.events(), want);

    // New content for `a`, `b` gone, the hostile one unchanged.
    w.clear_events();
    expect_code(&w.apply(&w.build(&spec("2\n", &[a, hostile])), &[]), 0);
    let events = w.events();
    assert_eq!(
        events,
        [
            format!("[changed={a}]"),
            format!("[removed={b}]"),
            "end".into()
        ]
    );

    // The previous generation's trigger, for the paths the new one dropped.
    w.clear_events();
    expect_code(&w.apply(&w.build(&BundleSpec::new()), &[]), 0);
    let mut want = vec![format!("[removed={a}]")];
    want.extend(format!("[removed={hostile}]").lines().map(str::to_string));
    want.push("end".into());
    assert_eq!(w.events(), want);
}

#[test]
fn a_retried_trigger_is_told_the_paths_of_the_run_that_fired_it() {
    let w = World::new();
    let flag = w.tmp.path().join("ok");
    let spec = BundleSpec::new()
        .file("/etc/systemd/system/a.service", "[Unit]\n", "0644")
        .resource(ResourceSpec::new("unit", "a").files(&["/etc/systemd/system/a.service"]))
        .trigger(
            "daemon-reload",
            &["/etc/systemd/system/"],
            &format!("{}[ -e '{}' ]\n", recording(&w), flag.display()),
        );
    let bundle = w.build(&spec);
    expect_code(&w.apply(&bundle, &[]), 3);
    // Still owed, and fired again by the same file put back: told once.
    std::fs::remove_file(w.root().join("etc/systemd/system/a.service")).unwrap();
    std::fs::write(&flag, "").unwrap();
    expect_code(&w.apply(&bundle, &[]), 0);
    let once = ["[created=/etc/systemd/system/a.service]", "end"];
    let want: Vec<&str> = once.iter().chain(once.iter()).copied().collect();
    assert_eq!(w.events(), want);
}

//! The other commands and output modes: status, rollback, verify, --dry-run, --json,
//! install-timer (checked by systemd-analyze), re-applying the current generation as the timer
//! does, and usage errors.
use crate::common::*;

mod remove;
mod timer;

pub(crate) fn gen(w: &World, n: u32) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/bell.conf", &format!("generation {n}\n"), "0644")
        .resource(
            ResourceSpec::new("conf", "main")
                .files(&["/etc/bell.conf"])
                .apply(&w.event(&format!("apply main {n}"))),
        )
        .resource(
            ResourceSpec::new("gen", &format!("only{n}"))
                .apply(&w.event(&format!("apply only{n}")))
                .revert(&w.event(&format!("revert only{n}"))),
        )
}

pub(crate) fn id_of(bundle: &std::path::Path) -> String {
    bundle.file_name().unwrap().to_string_lossy().to_string()
}

#[test]
fn status_shows_the_generation_and_every_result() {
    let w = World::new();
    let root = w.root();
    let status = |json: bool| {
        let mut args = vec!["status", "--root", root.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        w.run(&args)
    };
    let out = status(false);
    expect_code(&out, 0);
    assert!(stdout(&out).contains("no generation applied"));

    let bundle =
        w.build(&gen(&w, 1).resource(ResourceSpec::new("svc", "broken").apply("exit 4\n")));
    expect_code(
        &w.apply_env(&bundle, &[], &[("BELL_RUN_NOW", "1700000000")]),
        3,
    );
    let out = status(false);
    expect_code(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains(&format!("generation {}", id_of(&bundle))),
        "{text}"
    );
    assert!(
        text.contains("applied 2023-11-14 22:13:20 UTC (1700000000), result failed"),
        "{text}"
    );
    assert!(text.contains("conf:main   ok"), "{text}");
    assert!(text.contains("svc:broken  failed: exit 4"), "{text}");

    let out = status(true);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["generation"], id_of(&bundle));
    assert_eq!(value["resources"]["svc:broken"]["result"], "failed");
    assert_eq!(value["resources"]["conf:main"]["result"], "ok");
    assert_eq!(value["interrupted_switch"], false);
}

#[test]
fn rollback_applies_the_previous_generation_again() {
    let w = World::new();
    let root = w.root();
    let b1 = w.build(&gen(&w, 1));
    let b2 = w.build(&gen(&w, 2));
    let rollback = || w.run(&["rollback", "--root", root.to_str().unwrap()]);
    let out = rollback();
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("no previous generation"),
        "{}",
        stderr(&out)
    );

    expect_code(&w.apply(&b1, &[]), 0);
    expect_code(&w.apply(&b2, &[]), 0);
    w.clear_events();
    let out = rollback();
    expect_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/bell.conf")).unwrap(),
        "generation 1\n"
    );
    assert_eq!(
        w.events(),
        vec!["revert only2", "apply main 1", "apply only1"]
    );
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("var/lib/bell/state.json")).unwrap())
            .unwrap();
    assert_eq!(state["generation"], id_of(&b1));

    // A second rollback goes further back, not forward again: there is nothing before 1.
    let out = rollback();
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("is the oldest generation kept"),
        "{}",
        stderr(&out)
    );
    let newer = &id_of(&b2)[..8];
    assert!(
        stderr(&out).contains(&format!("`bell-run rollback --to {}", &id_of(&b2)[..12])),
        "{}",
        stderr(&out)
    );

    // The source bundle can be gone: rollback uses bell-run's own copy.
    std::fs::remove_dir_all(&b2).unwrap();
    expect_code(
        &w.run(&["rollback", "--to", newer, "--root", root.to_str().unwrap()]),
        0,
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/bell.conf")).unwrap(),
        "generation 2\n"
    );
}

/// `generations` lists what can be rolled back to, oldest first by first apply; `rollback`
/// steps back one at a time (a rolled-back generation keeps its place) and `--to` goes to any
/// kept one by a prefix of its id; a generation that is not kept is refused, nothing changed.
#[test]
fn generations_are_listed_and_any_kept_one_can_be_rolled_back_to() {
    let w = World::new();
    let root = w.root();
    let r = root.to_str().unwrap();
    let bundles: Vec<_> = (1..=3).map(|n| w.build(&gen(&w, n))).collect();
    for (n, b) in bundles.iter().enumerate() {
        let release = format!("rel-{}", n + 1);
        expect_code(&w.apply(b, &["--release", &release]), 0);
    }
    let ids: Vec<String> = bundles.iter().map(|b| id_of(b)).collect();
    let conf = || std::fs::read_to_string(root.join("etc/bell.conf")).unwrap();
    let listed = |w: &World| -> serde_json::Value {
        let out = w.run(&["generations", "--root", r, "--json"]);
        expect_code(&out, 0);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let value = listed(&w);
    let gens = value["generations"].as_array().unwrap();
    let order: Vec<&str> = gens.iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(order, ids.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(gens[2]["current"], true);
    assert_eq!(gens[0]["current"], false);
    assert_eq!(gens[1]["release"], "rel-2");
    assert_eq!(gens[0]["result"], "ok");

    let out = w.run(&["generations", "--root", r]);
    expect_code(&out, 0);
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains(&ids[2][..12]))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("rel-3") && line.ends_with("(applied now)"),
        "{line}"
    );

    // Back one, back another: 3 → 2 → 1, each keeping its release.
    expect_code(&w.run(&["rollback", "--root", r]), 0);
    assert_eq!(conf(), "generation 2\n");
    expect_code(&w.run(&["rollback", "--root", r]), 0);
    assert_eq!(conf(), "generation 1\n");
    let value = listed(&w);
    assert_eq!(value["generations"][0]["current"], true);
    assert_eq!(value["generations"][0]["release"], "rel-1");

    // Forward to 3 by a prefix of its id, in any case.
    let prefix = ids[2][..6].to_uppercase();
    expect_code(&w.run(&["rollback", "--to", &prefix, "--root", r]), 0);
    assert_eq!(conf(), "generation 3\n");

    // Refusals change nothing: the applied one, no such one, not an id.
    let before = std::fs::read(root.join("var/lib/bell/state.json")).unwrap();
    for (to, says) in [
        (&ids[2][..12], "is the one applied"),
        ("0000000", "no kept generation starts with `0000000`"),
        ("../../etc", "is not a generation"),
    ] {
        let out = w.run(&["rollback", "--to", to, "--root", r]);
        expect_code(&out, 1);
        assert!(stderr(&out).contains(says), "{to}: {}", stderr(&out));
    }
    assert_eq!(conf(), "generation 3\n");
    assert_eq!(
        std::fs::read(root.join("var/lib/bell/state.json")).unwrap(),
        before
    );
}

/// Every command explains itself: `bell-run CMD --help` and `bell-run help CMD` print that
/// command's usage, what it does and its options, not the list of every command.
#[test]
fn every_command_has_its_own_help() {
    let w = World::new();
    for command in [
        "apply",
        "check",
        "pull",
        "pending",
        "status",
        "generations",
        "rollback",
        "remove",
        "verify",
        "recover",
        "install-timer",
    ] {
        for args in [vec![command, "--help"], vec!["help", command]] {
            let out = w.run(&args);
            expect_code(&out, 0);
            let text = stdout(&out);
            assert!(
                text.starts_with(&format!("usage: bell-run {command}")),
                "{args:?}: {text}"
            );
            assert!(
                !text.contains("exit codes:\n   0  done"),
                "{args:?}: {text}"
            );
        }
    }
    let rollback = stdout(&w.run(&["rollback", "-h"]));
    assert!(rollback.contains("--to GENERATION"), "{rollback}");
    assert!(rollback.contains("markers"), "{rollback}");
    // Without a command, or an unknown one, the whole usage.
    let all = stdout(&w.run(&["--help"]));
    assert!(
        all.contains("bell-run remove") && all.contains("exit codes:"),
        "{all}"
    );
    let out = w.run(&["help", "frobnicate"]);
    expect_code(&out, 0);
    assert!(stdout(&out).contains("exit codes:"));
}

#[test]
fn verify_checks_a_bundle_without_a_root() {
    let w = World::new();
    let bundle = w.build(&gen(&w, 1));
    let out = w.run(&["verify", bundle.to_str().unwrap()]);
    expect_code(&out, 0);
    assert_eq!(
        stdout(&out),
        format!("bundle {} verifies: 2 resources, 1 files\n", id_of(&bundle))
    );
    let out = w.run(&["verify", bundle.to_str().unwrap(), "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["id"], id_of(&bundle));
    std::fs::write(bundle.join("root/etc/bell.conf"), "generation X\n").unwrap();
    let out = w.run(&["verify", bundle.to_str().unwrap(), "--json"]);
    expect_code(&out, 1);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["result"], "refused");
    assert!(value["error"]
        .as_str()
        .unwrap()
        .contains("root/etc/bell.conf does not match"));
}

#[test]
fn help_explains_the_markers() {
    let w = World::new();
    for args in [&["apply", "--help"][..], &["help"], &["rollback", "-h"]] {
        let out = w.run(args);
        expect_code(&out, 0);
        let text = stdout(&out);
        assert!(text.contains("usage: bell-run "), "{text}");
        for marker in [
            "+  created",
            "~  changed",
            "=  unchanged",
            "*  drifted",
            "!  retry",
            "^  trigger",
            "-  departed",
        ] {
            assert!(text.contains(marker), "{marker} missing from {text}");
        }
    }
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let w = World::new();
    let b1 = w.build(&gen(&w, 1));
    expect_code(&w.apply(&b1, &[]), 0);
    let b2 = w.build(&gen(&w, 2));
    let before = snapshot(&w.root(), &[], true, true);
    w.clear_events();
    let out = w.apply(&b2, &["--dry-run"]);
    expect_code(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("- gen:only1"), "{text}");
    assert!(text.contains("+ gen:only2"), "{text}");
    assert!(text.contains("~ conf:main"), "{text}");
    assert!(text.contains("file /etc/bell.conf: rewrite"), "{text}");
    // The same lower-case words as the JSON and `--help`'s marker table.
    let line = |key: &str| {
        text.lines()
            .find(|l| l.contains(key))
            .unwrap_or("")
            .to_string()
    };
    assert!(line("+ gen:only2").ends_with("  created"), "{text}");
    assert!(line("~ conf:main").ends_with("  changed"), "{text}");
    assert!(text.contains("plan: 1 created, 1 changed, 1 departed, 0 retried, 0 drifted, 0 unchanged; 1 files to switch"), "{text}");

    let out = w.apply(&b2, &["--dry-run", "--json"]);
    expect_code(&out, 0);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["result"], "planned");
    assert_eq!(value["plan"]["departed"][0]["key"], "gen:only1");
    assert_eq!(value["plan"]["resources"][0]["change"], "changed");
    assert_eq!(value["plan"]["resources"][1]["change"], "created");
    assert_eq!(value["plan"]["files"][0]["action"], "write");

    assert_eq!(snapshot(&w.root(), &[], true, true), before);
    assert!(w.events().is_empty());
}

#[test]
fn json_output_of_an_apply() {
    let w = World::new();
    let bundle = w.build(&gen(&w, 1));
    let out = w.apply(&bundle, &["--json"]);
    expect_code(&out, 0);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["result"], "ok");
    assert_eq!(value["generation"], id_of(&bundle));
    assert_eq!(value["offline"], true);
    assert_eq!(value["changed"], 2);
    assert_eq!(
        value["files"]["written"],
        serde_json::json!(["/etc/bell.conf"])
    );
    assert_eq!(value["resources"][0]["status"], "ok");
}

#[test]
fn reapplying_the_current_generation_as_the_timer_does_is_a_no_op() {
    let w = World::new();
    let bundle = w.build(&gen(&w, 1));
    expect_code(&w.apply(&bundle, &[]), 0);
    let current = w.root().join("var/lib/bell/current");
    assert!(current.exists());
    w.clear_events();
    let out = w.apply(&current, &[]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("result: 0 changed"),
        "{}",
        stdout(&out)
    );
    assert!(w.events().is_empty());
}

/// A re-apply takes the bundle's own manifest as the one applied last (same id, same
/// manifest) instead of hashing bell-run's copy once more, so the copy's integrity rests on the
/// stage step: a damaged copy is still found there and replaced, and nothing applies again.
#[test]
fn reapplying_over_a_damaged_copy_of_the_same_generation_replaces_the_copy() {
    let w = World::new();
    let bundle = w.build(&gen(&w, 1));
    expect_code(&w.apply(&bundle, &[]), 0);
    let copy = w
        .root()
        .join("var/lib/bell/generations")
        .join(id_of(&bundle));
    let conf = copy.join("root/etc/bell.conf");
    std::fs::write(&conf, "tampered\n").unwrap();
    w.clear_events();
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("result: 0 changed"),
        "{}",
        stdout(&out)
    );
    assert!(w.events().is_empty(), "{:?}", w.events());
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "generation 1\n");
    assert_eq!(
        std::fs::read_to_string(w.root().join("etc/bell.conf")).unwrap(),
        "generation 1\n"
    );
}

#[test]
fn usage_errors_exit_64() {
    let w = World::new();
    expect_code(&w.run(&[]), 64);
    expect_code(&w.run(&["apply"]), 64);
    expect_code(&w.run(&["frobnicate"]), 64);
    let out = w.run(&["status", "--bogus"]);
    expect_code(&out, 64);
    assert!(stderr(&out).contains("unknown option `--bogus`"));
    // Never the code of `check`'s "drift found".
    expect_code(&w.run(&["check", "extra"]), 64);
    expect_code(&w.run(&["pending"]), 64);
    // Every code is in the help.
    let help = w.run(&["--help"]);
    expect_code(&help, 0);
    let text = String::from_utf8_lossy(&help.stdout).to_string();
    for code in ["   0  ", "   1  ", "   2  ", "   3  ", "  10  ", "  64  "] {
        assert!(text.contains(code), "{code:?} missing from:\n{text}");
    }
}

#[test]
fn timings_say_where_the_time_went_per_phase_and_per_kind() {
    let w = World::new();
    let bundle = w.build(
        &BundleSpec::new()
            .resource(ResourceSpec::new("slow", "a").apply("sleep 0.05\n"))
            .resource(ResourceSpec::new("slow", "b").apply("sleep 0.05\n"))
            .resource(ResourceSpec::new("quick", "c").apply("true\n")),
    );
    let out = w.apply(&bundle, &["--timings", "--json"]);
    expect_code(&out, 0);
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let t = &value["timings"];
    let names: Vec<&str> = t["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "verify", "plan", "stage", "drift", "revert", "switch", "triggers", "scripts",
            "reboot", "state", "health"
        ]
    );
    let sum: f64 = t["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ms"].as_f64().unwrap_or_default())
        .sum();
    let total = t["total_ms"].as_f64().expect("total");
    assert!((sum - total).abs() < 0.01, "{sum} vs {total}");
    let scripts = t["phases"][7]["ms"].as_f64().unwrap();
    assert!(scripts >= 100.0, "two scripts of 50 ms: {scripts}");
    let kinds = t["kinds"].as_array().expect("kinds");
    let kind = |k: &str| kinds.iter().find(|x| x["kind"] == k).expect(k).clone();
    assert_eq!(kind("slow")["scripts"], 2);
    assert!(kind("slow")["ms"].as_f64().unwrap() >= 100.0);
    assert_eq!(kind("quick")["scripts"], 1);
    assert!(kind("quick")["ms"].as_f64().unwrap() < scripts);
    // Without --timings the report has none; as text it is a table after the report.
    let again = w.apply(&bundle, &["--json"]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&again)).expect("json");
    assert!(value.get("timings").is_none());
    let text = stdout(&w.apply(&bundle, &["--timings"]));
    assert!(text.contains("timings: "), "{text}");
    assert!(text.contains("  scripts "), "{text}");
}

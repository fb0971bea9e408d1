//! Every refusal of the rollout controller says what puts it right, as whole commands for
//! this OUT, store and key, and following that advice works. A real etcd, no hosts: a wave
//! that nobody pulls halts at its timeout, which is all a refusal needs to stand on.

use crate::common::fleet::{etcdctl, Etcd};
use crate::common::{Fixture, Run};

fn spec(release: u32) -> String {
    format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"h1\"\n\
         file \"/etc/motd\" {{\n    content \"release {release}\\n\"\n}}\n"
    )
}

/// The commands of a refusal's help line, each between backticks, after the test saw it
/// refused with exit 2, changing nothing.
fn advice(run: &Run, refusal: &str) -> Vec<String> {
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(refusal), "{}", run.stderr);
    let help = run
        .stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("help: "))
        .unwrap_or_else(|| panic!("no help line: {}", run.stderr));
    let commands: Vec<String> = help
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("bellc ") || c.starts_with("etcdctl "))
        .map(str::to_string)
        .collect();
    assert!(!commands.is_empty(), "help names no command: {help}");
    commands
}

/// Runs an advised `bellc` command (its words as printed, none of them quoted).
fn follow(fx: &Fixture, command: &str) -> Run {
    let words: Vec<&str> = command.split(' ').collect();
    assert_eq!(words[0], "bellc", "{command}");
    fx.bellc(&words[1..])
}

#[test]
fn every_refusal_names_the_command_that_puts_it_right() {
    let fx = Fixture::new();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for release in 1..=2 {
        std::fs::write(fx.path().join(format!("spec{release}.kdl")), spec(release)).unwrap();
        let out = format!("out{release}");
        let spec = format!("spec{release}.kdl");
        let run = fx.bellc(&["build", &spec, "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let url = etcd.url.clone();
    let rollout = |out: &str, more: &[&str]| {
        let mut args = vec!["rollout", out, "--store", &url, "--sign-key", "ci.key"];
        args.extend_from_slice(more);
        fx.bellc(&args)
    };
    let whole = |out: &str, what: &str| {
        format!("bellc rollout {out} --store {url} --sign-key ci.key {what}")
            .trim_end()
            .to_string()
    };

    // Not a build output: build into it.
    let said = advice(&rollout("nowhere", &[]), "is it a build output?");
    assert_eq!(said, ["bellc build SPEC -o nowhere --sign-key ci.key"]);

    // Nothing to resume: start one (the command without `--resume`).
    let said = advice(&rollout("out1", &["--resume"]), "no unfinished rollout");
    assert_eq!(said, [whole("out1", "")]);
    // Nothing to abort: going back is a rollout of the earlier build.
    let said = advice(&rollout("out1", &["--abort"]), "records no rollout");
    assert_eq!(said[1], whole("out1", ""), "{said:?}");

    // The first rollout halts: nobody pulls its wave.
    let halted = rollout("out1", &["--wave-timeout", "1s"]);
    assert_eq!(halted.code, 1, "{}{}", halted.stdout, halted.stderr);

    // A new one waits for it: continue or take back, both whole, and continuing works.
    let said = advice(&rollout("out1", &[]), "a new one waits");
    assert_eq!(said, [whole("out1", "--resume"), whole("out1", "--abort")]);
    let resumed = follow(&fx, &format!("{} --wave-timeout 1s", said[0]));
    assert_eq!(resumed.code, 1, "{}{}", resumed.stdout, resumed.stderr);
    assert!(resumed.stdout.contains("halted"), "{}", resumed.stdout);

    // Another build output, while the store holds the halted rollout out1 began: finish it
    // from its own build output, which the status command (it runs) says is release 1.
    let said = advice(&rollout("out2", &[]), "begun from another build output");
    let status = format!("bellc rollout --status --store {url} --fleet f");
    let there =
        |what: &str| format!("bellc rollout THAT_OUT --store {url} --sign-key ci.key {what}");
    assert_eq!(said, [status.clone(), there("--resume"), there("--abort")]);
    let shown = follow(&fx, &status);
    assert_eq!(shown.code, 3, "halted is a stop: {}", shown.stderr);
    let release: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.path().join("out1/release.json")).unwrap())
            .unwrap();
    let first = release["version"].as_str().unwrap()[..12].to_string();
    assert!(shown.stdout.contains("halted"), "{}", shown.stdout);
    assert!(shown.stdout.contains(&first), "{}", shown.stdout);

    // OUT's release.json replaced by another build's: the rollout it records can only be
    // taken back from here.
    let out1 = fx.path().join("out1");
    let honest = std::fs::read(out1.join("release.json")).unwrap();
    std::fs::copy(
        fx.path().join("out2/release.json"),
        out1.join("release.json"),
    )
    .unwrap();
    let said = advice(&rollout("out1", &["--resume"]), "can no longer be resumed");
    assert_eq!(said, [whole("out1", "--abort")]);
    std::fs::write(out1.join("release.json"), honest).unwrap();

    // The store's progress rewritten under OUT's record: the etcdctl line, then this command.
    let key = "/bell/f/rollout/progress";
    let progress = etcdctl(&etcd.endpoint, &["get", key, "--print-value-only"]);
    let mut forged: serde_json::Value = serde_json::from_str(progress.trim_end()).unwrap();
    forged["waves"] = serde_json::json!([["h1"], ["h2"]]);
    etcdctl(&etcd.endpoint, &["put", key, &forged.to_string()]);
    let said = advice(&rollout("out1", &["--resume"]), "OUT's signed record");
    assert_eq!(said, [format!("etcdctl del {key}"), whole("out1", "")]);
    etcdctl(&etcd.endpoint, &["del", key]);
    let resumed = rollout("out1", &["--resume", "--wave-timeout", "1s"]);
    assert_eq!(resumed.code, 1, "{}{}", resumed.stdout, resumed.stderr);

    // The fleet's first rollout takes no host back, but its abort ends it (naming the host
    // it leaves as it is), so that a fixed release, built into the same OUT, rolls out.
    let aborted = rollout("out1", &["--abort"]);
    assert_eq!(aborted.code, 0, "{}{}", aborted.stdout, aborted.stderr);
    assert!(
        aborted.stdout.contains("aborted: no host taken back")
            && aborted
                .stdout
                .contains("left as it is: h1: new in this release"),
        "{}",
        aborted.stdout
    );
    let said = advice(&rollout("out1", &["--abort"]), "aborted already");
    assert_eq!(said[1], whole("out1", ""), "{said:?}");
    let fixed = fx.bellc(&["build", "spec2.kdl", "-o", "out1", "--sign-key", "ci.key"]);
    assert_eq!(fixed.code, 0, "{}", fixed.stderr);
    let next = rollout("out1", &["--wave-timeout", "1s", "--json"]);
    assert_eq!(next.code, 1, "{}{}", next.stdout, next.stderr);
    let second = std::fs::read(out1.join("release.json")).unwrap();
    let second: serde_json::Value = serde_json::from_slice(&second).unwrap();
    assert_ne!(second["version"].as_str().unwrap()[..12], first);
    assert!(next.stdout.contains("\"wave-started\""), "{}", next.stdout);

    // A release whose fleet the store cannot file (written by hand): name it anew.
    let odd = fx.path().join("odd");
    std::fs::create_dir_all(&odd).unwrap();
    let mut release: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.path().join("out2/release.json")).unwrap())
            .unwrap();
    release["fleet"] = "../f".into();
    std::fs::write(odd.join("release.json"), release.to_string()).unwrap();
    let said = advice(&rollout("odd", &[]), "cannot be filed");
    assert_eq!(said, ["bellc build SPEC -o odd --sign-key ci.key"]);
}

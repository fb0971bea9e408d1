//! `bellc completions SHELL`: the script a shell sources, made by clap from the definitions that
//! parse the command line. Run here as bash runs it on TAB, through the function it registers.

use crate::common::Fixture;

fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    bell_testkit::bash_completes(script.as_bytes(), words)
}

#[test]
fn bash_completes_the_rollout_flags() {
    let run = Fixture::new().bellc(&["completions", "bash"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let offered = bash_completes(&run.stdout, &["bellc", "rollout", "--"]);
    for flag in ["--resume", "--abort", "--pause", "--store", "--continue"] {
        assert!(
            offered.iter().any(|o| o == flag),
            "{flag} not offered: {offered:?}"
        );
    }
    // Only rollout's own (and the global) flags: build's `--out` is not among them.
    assert!(!offered.iter().any(|o| o == "--out"), "{offered:?}");
    let commands = bash_completes(&run.stdout, &["bellc", "ro"]);
    assert_eq!(commands, ["rollout"], "{commands:?}");
}

#[test]
fn fish_completes_the_rollout_flags_and_zsh_takes_the_script() {
    let f = Fixture::new();
    let fish = f.bellc(&["completions", "fish"]);
    assert_eq!(fish.code, 0, "{}", fish.stderr);
    let offered = bell_testkit::fish_completes(fish.stdout.as_bytes(), "bellc rollout --");
    for flag in ["--resume", "--abort", "--pause", "--store", "--continue"] {
        assert!(
            offered.iter().any(|o| o == flag),
            "{flag} not offered: {offered:?}"
        );
    }
    assert!(!offered.iter().any(|o| o == "--out"), "{offered:?}");
    let commands = bell_testkit::fish_completes(fish.stdout.as_bytes(), "bellc ro");
    assert_eq!(commands, ["rollout"], "{commands:?}");
    // zsh: compinit takes the script and completes bellc with its function (the function's
    // own run needs a terminal; zsh has no `complete -C`).
    let zsh = f.bellc(&["completions", "zsh"]);
    assert_eq!(zsh.code, 0, "{}", zsh.stderr);
    assert_eq!(
        bell_testkit::zsh_registers(zsh.stdout.as_bytes(), "bellc"),
        "_bellc"
    );
}

#[test]
fn every_shell_gets_a_script_and_a_wrong_one_is_a_usage_error() {
    let f = Fixture::new();
    for (shell, says) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef bellc"),
        ("fish", "complete -c bellc"),
    ] {
        let run = f.bellc(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(says), "{shell}: {}", run.stdout);
        assert!(run.stdout.contains("rollout"), "{shell}");
    }
    let run = f.bellc(&["completions", "tcsh"]);
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(run.stderr.contains("bash"), "{}", run.stderr);
}

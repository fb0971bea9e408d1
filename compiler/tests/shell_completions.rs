//! `bellc completions SHELL`: the script a shell sources, made by clap from the definitions that
//! parse the command line. Run here as bash runs it on TAB, through the function it registers.

use crate::common::Fixture;

/// What bash offers for `words` with the cursor after the last one, using the completion
/// `script` registers for bellc (`complete -F FUNCTION bellc`), as bash calls it: the command,
/// the word being completed and the one before it.
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("bellc.bash");
    std::fs::write(&file, script).expect("script written");
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        r#"set -u
source "$1"
spec=$(complete -p bellc) || exit 9
function=${{spec##*-F }}; function=${{function%% *}}
COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}
"$function" bellc "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = quoted.join(" "),
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &program, "bash"])
        .arg(&file)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
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

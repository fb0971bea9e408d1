//! bellc's exit codes: a usage error is 64 (sysexits' EX_USAGE), apart from spec errors (1)
//! and inputs that cannot be used (2), and `--help` lists every code.

use crate::common;
use crate::common::Fixture;

const SPEC: &str = "fleet \"f\" target=\"debian-12\"\nhost \"h\"\n";

#[test]
fn usage_errors_exit_64() {
    let f = Fixture::spec(SPEC);
    for args in [
        vec!["frobnicate"],
        vec!["build", "--no-such-flag"],
        vec![],
        vec!["status", "out"],
        vec!["status", "out", "--reports", "r", "--version", "v1"],
        vec!["publish", "out", "--store", "/tmp/dir"],
        vec!["explain", "nosuchhost", "bell.kdl"],
    ] {
        let run = f.bellc(&args);
        assert_eq!(run.code, 64, "bellc {args:?}: {}", run.stderr);
        assert!(!run.stderr.is_empty(), "bellc {args:?} says nothing");
    }
}

#[test]
fn other_codes_stay_apart_from_usage() {
    let f = Fixture::spec(SPEC).file("bad.kdl", "fleet \"f\" target=\"debian-12\"\nhots \"h\"\n");
    assert_eq!(f.bellc(&["check", "bell.kdl"]).code, 0);
    assert_eq!(f.bellc(&["check", "bad.kdl"]).code, 1);
    // A spec or a build output that is not there: an input that cannot be used.
    assert_eq!(f.bellc(&["check", "missing.kdl"]).code, 2);
    assert_eq!(f.bellc(&["diff", "a", "b"]).code, 2);
}

#[test]
fn help_lists_every_exit_code() {
    let run = Fixture::new().bellc(&["--help"]);
    assert_eq!(run.code, 0);
    for code in ["   0  ", "   1  ", "   2  ", "  64  "] {
        assert!(
            run.stdout.contains(code),
            "{code:?} missing:\n{}",
            run.stdout
        );
    }
}

/// `bellc hosts | head -1`: the reader goes away and bellc ends quietly, as `ls` does (killed
/// by SIGPIPE), without a panic about a failed print.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let spec = common::repo_root().join("examples/three-role.kdl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
        .arg("hosts")
        .arg(&spec)
        .arg("--secrets-key")
        .arg(common::example_secrets_key())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Closed before bellc prints a line: its first write finds no reader.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.status.signal() == Some(libc::SIGPIPE) || out.status.success(),
        "{:?}: {stderr}",
        out.status
    );
}

/// Every command's `--help`, and `bellc --help` itself, into a pipe whose reader is gone before
/// bellc starts: no panic (exit 101), only success or a quiet SIGPIPE.
#[test]
fn help_into_a_closed_pipe_never_panics() {
    use std::os::unix::process::ExitStatusExt;
    let bellc = env!("CARGO_BIN_EXE_bellc");
    let listing = std::process::Command::new(bellc)
        .arg("--help")
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let commands: Vec<&str> = listing
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.len() > 15, "{listing}");
    let mut runs = vec![
        vec!["--help"],
        vec!["-h"],
        vec!["help"],
        vec!["help", "build"],
    ];
    runs.extend(
        commands
            .iter()
            .filter(|c| **c != "help")
            .map(|c| vec![*c, "--help"]),
    );
    for args in runs {
        let (out_reader, out_writer) = std::io::pipe().unwrap();
        let (err_reader, err_writer) = std::io::pipe().unwrap();
        drop(out_reader);
        drop(err_reader);
        let status = std::process::Command::new(bellc)
            .args(&args)
            .stdout(out_writer)
            .stderr(err_writer)
            .status()
            .unwrap();
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "bellc {args:?}: {status:?}"
        );
    }
}

//! A reader that goes away (`bell-run --help | head -1`, a pager quit early) makes no command
//! panic, and does not stop an apply half-way: what could not be written is lost, the work is
//! done and the exit code says how it ended.
use crate::common::*;
use std::process::{Command, Output, Stdio};

/// bell-run with `args`, its standard output and error a pipe nobody reads: the reading ends
/// are closed before it starts, so that its first write fails (EPIPE).
fn into_closed_pipes(args: &[&str]) -> Output {
    let (out_reader, out_writer) = std::io::pipe().unwrap();
    let (err_reader, err_writer) = std::io::pipe().unwrap();
    drop(out_reader);
    drop(err_reader);
    let status = Command::new("timeout")
        .arg("60")
        .arg(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(out_writer)
        .stderr(err_writer)
        .status()
        .unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

const COMMANDS: &[&str] = &[
    "apply",
    "check",
    "pull",
    "pending",
    "register",
    "status",
    "generations",
    "rollback",
    "remove",
    "verify",
    "identity",
    "recover",
    "install-timer",
];

#[test]
fn help_into_a_closed_pipe_exits_without_a_panic() {
    let mut runs = vec![vec!["--help"], vec!["help"]];
    runs.extend(COMMANDS.iter().map(|c| vec![*c, "--help"]));
    for args in runs {
        let out = into_closed_pipes(&args);
        // A panic exits 101; SIGPIPE would have killed it (no code).
        assert_eq!(
            out.status.code(),
            Some(0),
            "bell-run {args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn an_apply_into_a_closed_pipe_is_done_whole() {
    let w = World::new();
    let bundle = w.build(
        &BundleSpec::new()
            .file("/etc/motd", "managed by bell\n", "0644")
            .resource(
                ResourceSpec::new("motd", "motd")
                    .files(&["/etc/motd"])
                    .apply(&w.event("applied")),
            ),
    );
    let root = w.root();
    let out = into_closed_pipes(&[
        "apply",
        bundle.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--offline",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    assert_eq!(w.events(), ["applied"]);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/motd")).unwrap(),
        "managed by bell\n"
    );
    let out = into_closed_pipes(&["status", "--root", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
}

//! A pull always ends: a server that sends its answer a byte a second, or a FIFO named
//! `release.json` in a source directory, cannot hold `bell-run pull` (and with it the host's
//! timer) for ever. Each is refused, within `--fetch-timeout`, with the root as it was.

use crate::common::fleet::bell_run;
use crate::common::pulling::{fingerprint, image_root};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a pull of `source` into a fresh root and returns its exit code, stderr and how long it
/// took; a pull still running after `watchdog` is killed and fails the test.
fn pull(source: &str, extra: &[&str], watchdog: Duration) -> (Option<i32>, String, Duration) {
    let root = image_root();
    let before = fingerprint(root.path());
    // Built (by cargo, when no binary is given) before the clock starts: the time is the pull's.
    let bell_run = bell_run();
    let started = Instant::now();
    let mut child = Command::new(bell_run)
        .args(["pull", "--source", source, "--root"])
        .arg(root.path())
        .args(["--host", "h1"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > watchdog {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the pull of {source} still ran after {watchdog:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        fingerprint(root.path()),
        before,
        "a refused pull changed the root"
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), stderr, took)
}

#[test]
fn a_server_that_sends_a_byte_a_second_runs_out_of_time() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 4096];
        let _ = stream.read(&mut request);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
        // Well inside any read timeout, and never done.
        for _ in 0..60 {
            if stream.write_all(b"{").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let source = format!("http://127.0.0.1:{port}/fleet/");
    let (code, stderr, took) = pull(&source, &["--fetch-timeout", "3"], Duration::from_secs(30));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("ran out of time"), "{stderr}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    drop(server);
}

#[test]
fn a_fifo_where_the_release_should_be_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("release.json");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (code, stderr, _) = pull(dir.path().to_str().unwrap(), &[], Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not a plain file"), "{stderr}");
}

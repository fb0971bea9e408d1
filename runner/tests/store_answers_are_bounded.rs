//! A store that trickles its answer (a byte a second) or sends one far too large cannot hold
//! `bell-run pull` past its `--fetch-timeout`, nor fill the host's memory: the pull is
//! refused in time, having read at most a host's answer limit, and changes nothing.
use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A fake store on loopback that answers every request with `head` and then `body(write)`,
/// for at most `connections` connections; the thread ends by itself.
fn serve(connections: usize, head: &'static str, body: fn(&mut std::net::TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                if stream.write_all(head.as_bytes()).is_ok() {
                    body(&mut stream);
                }
            });
        }
    });
    port
}

fn pull(port: u16, fetch_timeout: &str) -> (std::process::Output, Duration) {
    let w = World::new();
    let source = tempdir();
    let started = Instant::now();
    let out = w.run(&[
        "pull",
        "--source",
        source.path().to_str().unwrap(),
        "--store",
        &format!("etcd://127.0.0.1:{port}"),
        "--fleet",
        "f",
        "--host",
        "h",
        "--root",
        w.root().to_str().unwrap(),
        "--offline",
        "--fetch-timeout",
        fetch_timeout,
    ]);
    assert!(!w.root().join("var/lib/bell").join("current").exists());
    (out, started.elapsed())
}

#[test]
fn a_trickling_store_is_refused_within_the_fetch_timeout() {
    let port = serve(16, "HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n", |s| {
        // A byte a second, for at most a minute.
        for _ in 0..60 {
            if s.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let (out, took) = pull(port, "3");
    expect_code(&out, 1);
    assert!(took < Duration::from_secs(8), "{took:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains("did not answer in time"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_huge_store_answer_is_refused_in_bounded_memory() {
    let port = serve(
        16,
        "HTTP/1.1 200 OK\r\nContent-Length: 209715200\r\n\r\n",
        |s| {
            let chunk = vec![b'['; 1 << 20];
            for _ in 0..200 {
                if s.write_all(&chunk).is_err() {
                    return;
                }
            }
        },
    );
    let (out, took) = pull(port, "60");
    expect_code(&out, 1);
    assert!(stderr(&out).contains("is larger than"), "{}", stderr(&out));
    assert!(took < Duration::from_secs(30), "{took:?}");
    // The largest child this test binary ran (this file's tests are its only ones).
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    #[allow(unsafe_code)]
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr());
        usage.assume_init()
    };
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(peak_mib < 100, "bell-run peaked at {peak_mib} MiB");
}

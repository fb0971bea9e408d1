//! The mirror as the hosts reach it: a TCP proxy in front of nginx that a fault can stop
//! (every connection dropped as soon as it is accepted) or make trickle (the answer sent a
//! few hundred bytes at a time), as a mirror behind a failing link looks from a host.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Serving = 0,
    Down = 1,
    Trickle = 2,
}

/// Whether the link is up, asked at each connection.
type Gate = Arc<dyn Fn() -> bool + Send + Sync>;

pub struct Mirror {
    /// `http://127.0.0.1:PORT/`, what the hosts are given as `--source`.
    pub url: String,
    mode: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl Mirror {
    /// A proxy on a free loopback port in front of `upstream` (`http://127.0.0.1:PORT/`).
    pub fn front(upstream: &str) -> Mirror {
        Mirror::gated(upstream, Arc::new(|| true))
    }

    /// [`Mirror::front`], that also drops every connection made while `gate` says the link is
    /// down (asked as each is accepted, so that a change is in force from the next one).
    pub fn gated(upstream: &str, gate: Gate) -> Mirror {
        Mirror::on("127.0.0.1", upstream, gate)
    }

    /// [`Mirror::gated`] on a free port of `address` (one a host reaches over a link of its
    /// own, say).
    pub fn on(address: &str, upstream: &str, gate: Gate) -> Mirror {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind(format!("{address}:0")).expect("bind the mirror's proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/", listener.local_addr().expect("address"));
        let mode = Arc::new(AtomicU8::new(Mode::Serving as u8));
        let stop = Arc::new(AtomicBool::new(false));
        let accepting = {
            let (mode, stop) = (mode.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            if mode.load(Ordering::Relaxed) == Mode::Down as u8 || !gate() {
                                let _ = client.shutdown(Shutdown::Both);
                                continue;
                            }
                            let (mode, upstream) = (mode.clone(), upstream.clone());
                            std::thread::spawn(move || relay(client, &upstream, &mode));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Mirror {
            url,
            mode,
            stop,
            accepting: Some(accepting),
        }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.accepting.take() {
            let _ = thread.join();
        }
    }
}

/// One connection: the request through as it comes, the answer back at the mode's pace.
fn relay(client: TcpStream, upstream: &str, mode: &AtomicU8) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    for stream in [&client, &server] {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    }
    let (Ok(mut from_client), Ok(mut to_server)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let ahead = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        let _ = to_server.shutdown(Shutdown::Write);
    });
    let (mut server, mut client) = (server, client);
    let mut buf = [0u8; 16 * 1024];
    loop {
        let trickle = mode.load(Ordering::Relaxed) == Mode::Trickle as u8;
        let want = if trickle { 256 } else { buf.len() };
        let n = match server.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
        if trickle {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = ahead.join();
}

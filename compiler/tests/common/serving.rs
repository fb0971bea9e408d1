//! `bellc serve` started by a test: on a free loopback port, refreshing every second, read
//! with plain HTTP requests, killed when dropped.

use super::Fixture;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

/// `bellc serve` on a free loopback port, killed on drop.
pub struct Server {
    child: Child,
    address: String,
}

impl Server {
    pub fn start(fx: &Fixture, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--refresh", "1"])
            .current_dir(fx.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bellc serve");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let address = loop {
            let line = lines
                .next()
                .expect("bellc serve said where it listens")
                .unwrap();
            if let Some(rest) = line.split("on http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        // The rest of stderr drains in the background, so a warning cannot block the server.
        std::thread::spawn(move || for _ in lines {});
        Server { child, address }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let mut stream = std::net::TcpStream::connect(&self.address).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.address
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_string())
    }

    pub fn store(&self) -> serde_json::Value {
        serde_json::from_str(&self.get("/api/v1/store").1).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

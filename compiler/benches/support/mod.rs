//! Shared by the fleet benchmarks: a real single-member etcd (Debian's `etcd-server`: a free
//! loopback port, a temporary data directory, killed on drop), numbers from the environment,
//! the clock.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct LocalEtcd {
    child: Child,
    pub endpoint: String,
    _data: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl LocalEtcd {
    pub fn start() -> LocalEtcd {
        // Another process may take a port between probing and binding (etcd then exits at
        // once): try again with others, as the tests' harness does.
        for _ in 0..5 {
            if let Some(etcd) = LocalEtcd::try_start() {
                return etcd;
            }
        }
        panic!("etcd did not start");
    }

    fn try_start() -> Option<LocalEtcd> {
        let data = tempfile::tempdir().expect("tempdir");
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("127.0.0.1:{client}");
        let mut child = Command::new("etcd")
            .arg(format!("--data-dir={}", data.path().join("data").display()))
            .arg(format!("--listen-client-urls=http://{endpoint}"))
            .arg(format!("--advertise-client-urls=http://{endpoint}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=default=http://127.0.0.1:{peer}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd (apt install etcd-server)");
        let etcd = bell_store::Etcd::new(vec![endpoint.clone()]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while etcd.put("/bench/ready", b"1").is_err() {
            let exited = child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(LocalEtcd {
            child,
            endpoint,
            _data: data,
        })
    }

    /// A client of its own (its request count starts at 0).
    pub fn client(&self) -> bell_store::Etcd {
        bell_store::Etcd::new(vec![self.endpoint.clone()])
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name` from the environment as a number, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Unix seconds.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

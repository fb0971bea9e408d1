//! For the fleet review tests: the real `bell-run` binary (built on demand, since a test of one
//! package cannot name another package's binary) and a real etcd server on a free loopback
//! port with a temporary data directory (killed on drop).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use super::have as require;

/// The bell-run binary of this workspace, built if needed (a no-op when up to date).
pub fn bell_run() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "bell-run", "--bin", "bell-run"])
        .current_dir(workspace)
        .status()
        .expect("run cargo build -p bell-run");
    assert!(status.success(), "cargo build -p bell-run failed");
    // Tests run from target/debug/deps/; the binaries are one level up.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("bell-run");
    assert!(bin.is_file(), "no bell-run at {}", bin.display());
    bin
}

pub fn run_bin(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{} panicked:\n{}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `bell-run apply BUNDLE --root ROOT`: a bundle applied into an image root.
pub fn apply_into(bin: &Path, bundle: &Path, root: &Path) -> Output {
    run_bin(
        bin,
        &[
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
        &[],
    )
}

pub fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A real etcd on loopback, for one test.
pub struct Etcd {
    child: Child,
    pub url: String,
    pub endpoint: String,
    _data: tempfile::TempDir,
}

impl Etcd {
    /// `None` (a skip) only outside CI when etcd is not installed.
    pub fn start() -> Option<Etcd> {
        if !require("etcd") {
            return None;
        }
        // Another process may take a port between probing and binding; try a few.
        for _ in 0..5 {
            let data = tempfile::tempdir().expect("tempdir");
            let (client, peer) = (free_port(), free_port());
            let endpoint = format!("127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let client_url = format!("http://{endpoint}");
            let log = std::fs::File::create(data.path().join("etcd.log")).expect("log");
            let child = Command::new("etcd")
                .arg("--name=bell-test")
                .arg(format!("--data-dir={}", data.path().join("data").display()))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=bell-test={peer_url}"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start etcd");
            let mut etcd = Etcd {
                child,
                url: format!("etcd://{endpoint}"),
                endpoint,
                _data: data,
            };
            if etcd.wait_ready() {
                return Some(etcd);
            }
        }
        panic!("etcd did not become ready on a free loopback port in five tries");
    }

    fn wait_ready(&mut self) -> bool {
        let store = bell_store::Etcd {
            endpoint: self.endpoint.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if store.put("/bell-test/ready", b"1").is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub fn client(&self) -> bell_store::Etcd {
        bell_store::Etcd {
            endpoint: self.endpoint.clone(),
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! For the discovery tests: image roots that register as the hosts they describe.

use super::fleet::{bell_run, run_bin, text};
use std::path::Path;

/// An image root carrying small copies of the `sys`, `proc` and `os-release` files a host is
/// described by: one NIC with `mac`, an NVMe SSD, four CPUs, `memory_kib` of memory.
pub fn host_root(mac: &str, memory_kib: u64) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let w = |path: &str, body: &str| {
        let at = root.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, body).unwrap();
    };
    w("sys/class/net/eth0/address", &format!("{mac}\n"));
    w("sys/block/nvme0n1/size", "1953525168\n");
    w("sys/block/nvme0n1/device/model", "Samsung SSD 980\n");
    w("sys/block/nvme0n1/queue/rotational", "0\n");
    w(
        "proc/cpuinfo",
        "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\nprocessor\t: 3\n",
    );
    w("proc/meminfo", &format!("MemTotal: {memory_kib} kB\n"));
    w("proc/sys/kernel/osrelease", "6.1.0-28-amd64\n");
    w(
        "etc/os-release",
        "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
    );
    root
}

/// `bell-run register` of `host` in fleet `f` from `root`: its `--json` answer.
pub fn register(root: &Path, host: &str, url: &str) -> serde_json::Value {
    let out = run_bin(
        &bell_run(),
        &[
            "register",
            "--store",
            url,
            "--fleet",
            "f",
            "--host",
            host,
            "--root",
            root.to_str().unwrap(),
            "--json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

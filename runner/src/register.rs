//! `bell-run register`: the host files what it is under its fleet's discovery prefix, signed by
//! its identity, for an operator to accept (`bellc hosts pending|accept`). The facts are read
//! from the root's `sys`, `proc` and `etc/os-release` (a test root with copies of those files
//! registers as the host they describe), never through a link that leads out of the root. A
//! registration is filed again only when a fact or the identity changed.

use crate::context::Refusal;
use crate::rootfs::Root;
use bell_store::discovery::{self, Disk, Facts, Interface, Registration};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What `register` did.
pub struct Registered {
    pub host: String,
    pub fleet: String,
    pub key: String,
    pub fingerprint: String,
    /// Filed now (first, or a fact or the identity changed); `false`: the one filed stands.
    pub filed: bool,
    pub facts: Facts,
}

/// Files the host's registration in `fleet` of the etcd store `dest`, unless the one filed says
/// the same (its facts, its identity). The identity is made when the host has none.
pub fn register(
    root_dir: &Path,
    host: Option<&str>,
    dest: &str,
    access: &bell_store::Access,
    fleet: &str,
) -> Result<Registered, Refusal> {
    let root = Root::open(root_dir).map_err(Refusal::new)?;
    bell_store::check_name("fleet", fleet).map_err(Refusal::new)?;
    let host = crate::report::host_name(host, &root.dir).map_err(Refusal::new)?;
    let etcd = bell_store::Etcd::open(dest, access)
        .map_err(Refusal::new)?
        .with_limits(bell_wire::etcd::Limits::HOST);
    let (key, _) = crate::identity::load_or_make(&root).map_err(Refusal::new)?;
    let identity = key.key.identity();
    let facts = facts(&root);
    let at = bell_store::keys::registration_key(fleet, &host);
    let standing = etcd.get(&at).map_err(Refusal::new)?;
    let same = standing
        .as_deref()
        .and_then(|raw| discovery::check(&host, raw).ok())
        .is_some_and(|(filed, by)| by == identity && filed.facts == facts && filed.fleet == fleet);
    if !same {
        let registration = Registration {
            format: discovery::REGISTRATION_FORMAT,
            host: host.clone(),
            fleet: fleet.to_string(),
            facts: facts.clone(),
            registered_at: crate::state::now(),
        };
        etcd.put(&at, discovery::signed(&registration, &key.key).as_bytes())
            .map_err(|e| {
                Refusal::new(format!("cannot file the registration: {e}"))
                    .help("nothing was filed; run it again")
            })?;
    }
    Ok(Registered {
        host,
        fleet: fleet.to_string(),
        key: at,
        fingerprint: identity.fingerprint(),
        filed: !same,
        facts,
    })
}

/// The most of any one fact file read (a `cpuinfo` of hundreds of cores is a few hundred KiB).
const MAX_FACT_BYTES: u64 = 1 << 20;

/// The host path `path` under the root, resolved, when it stays inside the root.
fn inside(root: &Root, path: &str) -> Option<PathBuf> {
    let canon = root.host(path).canonicalize().ok()?;
    canon.starts_with(&root.dir).then_some(canon)
}

/// A fact file's text, trimmed; `None` when it is not there (or leads out of the root).
fn read(root: &Root, path: &str) -> Option<String> {
    let file = std::fs::File::open(inside(root, path)?).ok()?;
    let mut text = String::new();
    file.take(MAX_FACT_BYTES).read_to_string(&mut text).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// The entries of a directory under the root, sorted.
fn names(root: &Root, path: &str) -> Vec<String> {
    let Some(dir) = inside(root, path) else {
        return Vec::new();
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Everything the host says about itself.
pub fn facts(root: &Root) -> Facts {
    let cpuinfo = read(root, "/proc/cpuinfo").unwrap_or_default();
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .filter(|m| !m.is_empty());
    let memory = read(root, "/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("MemTotal:")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024);
    let os = read(root, "/etc/os-release").and_then(|text| {
        text.lines().find_map(|l| {
            let value = l.strip_prefix("PRETTY_NAME=")?;
            Some(value.trim_matches('"').to_string())
        })
    });
    Facts {
        interfaces: interfaces(root),
        cpus: u32::try_from(cpus).unwrap_or(u32::MAX),
        cpu_model,
        memory,
        disks: disks(root),
        os,
        kernel: read(root, "/proc/sys/kernel/osrelease"),
    }
}

fn interfaces(root: &Root) -> Vec<Interface> {
    let v4 = ipv4_addresses(root);
    let v6 = ipv6_addresses(root);
    names(root, "/sys/class/net")
        .into_iter()
        .filter(|name| name != "lo")
        .map(|name| {
            let mac = read(root, &format!("/sys/class/net/{name}/address"));
            let addresses = v4
                .iter()
                .chain(&v6)
                .filter(|(iface, _)| *iface == name)
                .map(|(_, address)| address.clone())
                .collect();
            Interface {
                name,
                mac,
                addresses,
            }
        })
        .collect()
}

/// The local IPv4 addresses, by interface: `/proc/net/fib_trie` names the local ones (`/32
/// host LOCAL`), and `/proc/net/route` the interface and prefix of the network each is in.
fn ipv4_addresses(root: &Root) -> Vec<(String, String)> {
    let trie = read(root, "/proc/net/fib_trie").unwrap_or_default();
    let mut locals: Vec<u32> = Vec::new();
    let mut last: Option<u32> = None;
    for line in trie.lines() {
        let line = line.trim_start_matches([' ', '|', '+', '-']).trim();
        if let Ok(address) = line.parse::<std::net::Ipv4Addr>() {
            last = Some(u32::from(address));
        } else if line.ends_with("host LOCAL") {
            if let Some(address) = last.filter(|a| a >> 24 != 127 && !locals.contains(a)) {
                locals.push(address);
            }
        }
    }
    // Iface Destination Gateway Flags RefCnt Use Metric Mask…, addresses in the kernel's
    // (little-endian) byte order as hex.
    let routes: Vec<(String, u32, u32)> = read(root, "/proc/net/route")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::swap_bytes);
            Some((
                cols.first()?.to_string(),
                hex(cols.get(1)?)?,
                hex(cols.get(7)?)?,
            ))
        })
        .filter(|(_, _, mask)| *mask != 0)
        .collect();
    locals
        .into_iter()
        .filter_map(|address| {
            let (iface, _, mask) = routes
                .iter()
                .filter(|(_, dest, mask)| address & mask == *dest)
                .max_by_key(|(_, _, mask)| mask.count_ones())?;
            Some((
                iface.clone(),
                format!(
                    "{}/{}",
                    std::net::Ipv4Addr::from(address),
                    mask.count_ones()
                ),
            ))
        })
        .collect()
}

/// The global IPv6 addresses, by interface (`/proc/net/if_inet6`: address, index, prefix
/// length, scope, flags, name; scope 00 is global).
fn ipv6_addresses(root: &Root) -> Vec<(String, String)> {
    read(root, "/proc/net/if_inet6")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let (hex, prefix, scope, name) =
                (cols.first()?, cols.get(2)?, cols.get(3)?, cols.get(5)?);
            if *scope != "00" || hex.len() != 32 {
                return None;
            }
            let bits = u128::from_str_radix(hex, 16).ok()?;
            let prefix = u8::from_str_radix(prefix, 16).ok()?;
            Some((
                name.to_string(),
                format!("{}/{prefix}", std::net::Ipv6Addr::from(bits)),
            ))
        })
        .collect()
}

fn disks(root: &Root) -> Vec<Disk> {
    names(root, "/sys/block")
        .into_iter()
        .filter(|name| {
            !["loop", "ram", "zram", "sr", "fd"]
                .iter()
                .any(|p| name.starts_with(p))
        })
        .map(|name| {
            let at = |file: &str| read(root, &format!("/sys/block/{name}/{file}"));
            Disk {
                size: at("size")
                    .and_then(|s| s.parse::<u64>().ok())
                    .map_or(0, |sectors| sectors * 512),
                model: at("device/model"),
                serial: at("device/serial").or_else(|| at("serial")),
                rotational: at("queue/rotational").as_deref() == Some("1"),
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_from_a_root() {
        let dir = tempfile_dir();
        let w = |path: &str, text: &str| {
            let at = dir.join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        };
        w("sys/class/net/lo/address", "00:00:00:00:00:00\n");
        w("sys/class/net/eth0/address", "52:54:00:12:34:56\n");
        w("sys/block/vda/size", "41943040\n");
        w("sys/block/vda/device/serial", "disk-1\n");
        w("sys/block/vda/queue/rotational", "1\n");
        w("sys/block/loop0/size", "8\n");
        w(
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: QEMU Virtual CPU\n\nprocessor\t: 1\n",
        );
        w(
            "proc/meminfo",
            "MemTotal:        2030000 kB\nMemFree: 1 kB\n",
        );
        w(
            "proc/net/fib_trie",
            "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.0.2.15\n        /32 host LOCAL\n     |-- 127.0.0.1\n        /32 host LOCAL\n",
        );
        w(
            "proc/net/route",
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
             eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
        );
        w(
            "proc/net/if_inet6",
            "20010db8000000000000000000000001 02 40 00 80 eth0\nfe800000000000000000000000000001 02 40 20 80 eth0\n",
        );
        w(
            "etc/os-release",
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n",
        );
        // A link out of the root is not followed.
        std::os::unix::fs::symlink(
            "/proc/sys/kernel/osrelease",
            dir.join("proc/osrelease-link"),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("proc/sys/kernel")).unwrap();
        std::os::unix::fs::symlink(
            "/proc/sys/kernel/osrelease",
            dir.join("proc/sys/kernel/osrelease"),
        )
        .unwrap();
        let root = Root::open(&dir).unwrap();
        let facts = facts(&root);
        assert_eq!(facts.cpus, 2);
        assert_eq!(facts.cpu_model.as_deref(), Some("QEMU Virtual CPU"));
        assert_eq!(facts.memory, 2_030_000 * 1024);
        assert_eq!(facts.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(facts.kernel, None, "a link out of the root is not read");
        assert_eq!(facts.interfaces.len(), 1);
        assert_eq!(
            facts.interfaces[0].mac.as_deref(),
            Some("52:54:00:12:34:56")
        );
        assert_eq!(
            facts.interfaces[0].addresses,
            ["10.0.2.15/24", "2001:db8::1/64"]
        );
        assert_eq!(facts.disks.len(), 1);
        assert_eq!(facts.disks[0].size, 41_943_040 * 512);
        assert_eq!(facts.disks[0].serial.as_deref(), Some("disk-1"));
        assert!(facts.disks[0].rotational);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bell-register-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }
}

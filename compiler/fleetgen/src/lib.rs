//! Synthetic fleets for scale tests and benchmarks.
//!
//! The compiler's cost grows with hosts × resources × override layers, and its caching pays off
//! only when many hosts share a bundle. Real fleet specs are private, so this module writes
//! realistic ones of any size: racks, roles in fixed proportions, a NIC label, label and host
//! overrides, and (shape `unique`) a per-host file so that no two hosts share a bundle. The
//! output depends on nothing but the parameters, so a seed names a fleet exactly; the tiny
//! generator below exists because the shuffles must not change when a dependency does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

/// Parameters of a generated fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetGen {
    pub hosts: usize,
    pub seed: u64,
    pub shape: Shape,
    pub inventory: Inventory,
}

/// How much the hosts' configurations differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Hosts differ only through labels (role, NIC) and a host override on 1 % of them: most
    /// hosts share one of a handful of bundles.
    Shared,
    /// As `Shared`, plus a host override per host with a file naming the host: every bundle
    /// is different. The host overrides are in `overrides/*.kdl`, a thousand to a file.
    Unique,
    /// As `Shared`, and each host with a host override (1 % of them) also has the file of
    /// `Unique` in it: about one bundle of its own per hundred hosts, the rest shared, as a
    /// real site's exceptions are (ten thousand distinct bundles in a million hosts).
    Overridden,
    /// As `Shared`, plus the same file as `Unique` from one template in the base layer
    /// (`{{ host.name }}`, `{{ host.address }}`): every bundle is different, and the spec
    /// does not grow with the fleet beyond its inventory.
    Templated,
    /// As `Shared`, and every host has an identity (an Ed25519 key drawn from the seed), so
    /// its secrets (the users' password hashes) are sealed to it, one age file per secret and
    /// host, where the other shapes ship them in the clear (`secrets="plaintext"`).
    Sealed,
}

/// Where the hosts are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inventory {
    /// `host` nodes in `bell.kdl`.
    Inline,
    /// `inventory/hosts.json`, referenced from `bell.kdl`.
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetGenError {
    #[error(
        "unknown shape `{0}`, expected `shared`, `unique`, `overridden`, `templated` or `sealed`"
    )]
    UnknownShape(String),
    #[error("unknown inventory `{0}`, expected `inline` or `json`")]
    UnknownInventory(String),
}

impl FromStr for Shape {
    type Err = FleetGenError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "shared" => Ok(Shape::Shared),
            "unique" => Ok(Shape::Unique),
            "templated" => Ok(Shape::Templated),
            "overridden" => Ok(Shape::Overridden),
            "sealed" => Ok(Shape::Sealed),
            _ => Err(FleetGenError::UnknownShape(s.to_owned())),
        }
    }
}

impl FromStr for Inventory {
    type Err = FleetGenError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inline" => Ok(Inventory::Inline),
            "json" => Ok(Inventory::Json),
            _ => Err(FleetGenError::UnknownInventory(s.to_owned())),
        }
    }
}

impl Shape {
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Shared => "shared",
            Shape::Unique => "unique",
            Shape::Templated => "templated",
            Shape::Overridden => "overridden",
            Shape::Sealed => "sealed",
        }
    }
}

impl Inventory {
    pub fn as_str(self) -> &'static str {
        match self {
            Inventory::Inline => "inline",
            Inventory::Json => "json",
        }
    }
}

/// One generated host: its name, address and labels (`rack`, `role`, maybe `nic`), and with
/// `Shape::Sealed` its identity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GenHost {
    pub name: String,
    pub address: String,
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// Number of racks the hosts are spread over.
pub const RACKS: usize = 64;
/// Every `NIC_EVERY`-th host (1-based) carries `nic="mlx5"`.
pub const NIC_EVERY: usize = 9;
/// Path of the JSON inventory, relative to `bell.kdl`.
pub const INVENTORY_PATH: &str = "inventory/hosts.json";

const SYSCTLS: [(&str, &str); 20] = [
    ("net.core.somaxconn", "4096"),
    ("net.core.netdev_max_backlog", "16384"),
    ("net.core.rmem_max", "16777216"),
    ("net.core.wmem_max", "16777216"),
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.ip_local_port_range", "\"10240 65000\""),
    ("net.ipv4.tcp_fin_timeout", "15"),
    ("net.ipv4.tcp_keepalive_time", "600"),
    ("net.ipv4.tcp_max_syn_backlog", "8192"),
    ("net.ipv4.tcp_slow_start_after_idle", "0"),
    ("net.ipv4.tcp_tw_reuse", "1"),
    ("net.ipv4.conf.all.rp_filter", "2"),
    ("net.ipv6.conf.all.forwarding", "1"),
    ("vm.swappiness", "10"),
    ("vm.max_map_count", "262144"),
    ("vm.dirty_ratio", "20"),
    ("vm.dirty_background_ratio", "5"),
    ("fs.file-max", "2097152"),
    ("fs.inotify.max_user_watches", "524288"),
    ("kernel.pid_max", "4194304"),
];

/// A role label, its percentage of the hosts, and the sysctls its override changes.
type Role = (&'static str, usize, &'static [(&'static str, &'static str)]);

/// The last role takes what rounding leaves, so it is the largest.
const ROLES: [Role; 3] = [
    (
        "control",
        10,
        &[("net.core.somaxconn", "8192"), ("vm.swappiness", "1")],
    ),
    (
        "storage",
        20,
        &[
            ("vm.dirty_ratio", "40"),
            ("vm.dirty_background_ratio", "10"),
        ],
    ),
    (
        "compute",
        70,
        &[
            ("vm.max_map_count", "1048576"),
            ("net.core.netdev_max_backlog", "65536"),
            ("vm.swappiness", "0"),
        ],
    ),
];

/// (name, sudo, SHA-512 crypt hash, ssh-ed25519 public key). Made once with `openssl passwd -6`
/// and `ssh-keygen -t ed25519`; the passwords are `fleetgen-NAME-password` and the private
/// keys were thrown away.
const USERS: [(&str, bool, &str, &str); 3] = [
    (
        "ops",
        true,
        "$6$bellopssalt$udO9yaAwOMG2MCoMbbeHl1PPzWg5EFuAuDmfK39Zb9PXQM1CgokR48xItEm.bDAgY6AAg1gkMjnQFXEpXHzoJ1",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGp9sErYN/w3MSgsdEyS5AacAFEMVSzKeeugtUSYqNhO ops@fleet",
    ),
    (
        "auditor",
        false,
        "$6$bellauditorsalt$Gp6DSPdT2NPRC6SQjOt1S6EhamICZFP6vB8epU2APt6YwptWWZkR2xBTOq.2G20dXKlanRckzqlozJk3Kjb0A0",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAIoTgQq0jupMQ0jfp/iRoFQUpR3XGZC9ebu6q8KFuuy auditor@fleet",
    ),
    (
        "deploy",
        true,
        "$6$belldeploysalt$x9DvguTKgV2CXj3I4dQzl/VlU4AA8erO3n2P6AYyvcSVPKBOkOZ7NcsO6oREXxvPc77Kg9FOS28nF31x7xbY81",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKTCEBvTaq6ILhGHlf7GyiscpdauBcZHcQ/9T4bVx5JM deploy@fleet",
    ),
];

const NIC: &str = "ens3";

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and fixed forever, unlike a crate's
/// default generator. Public for tests that need reproducible randomness too.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift; the bias is below 2^-32 for any
    /// `n` a fleet can have.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// `part` percent of `total`, rounded half up.
fn percent(total: usize, part: usize) -> usize {
    (total * part + 50) / 100
}

/// A KDL 2.0 quoted string holding exactly `s`. bellc's own (`bellc_core::kdl_text::string`,
/// which also escapes the bidi controls KDL forbids) is not used: the generator stays outside
/// the library it measures, and its names never hold those characters.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A KDL 2.0 multi-line raw string whose lines are `lines`, for a node indented by `indent`
/// spaces (the closing line's indentation is what KDL strips from every line).
fn raw_block(indent: usize, lines: &[&str]) -> String {
    let pad = " ".repeat(indent + 4);
    let mut out = String::from("#\"\"\"\n");
    for line in lines {
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push_str(&pad);
    out.push_str("\"\"\"#");
    out
}

impl FleetGen {
    /// The hosts, in name order, with their labels. Roles are dealt in exact proportions and
    /// then shuffled by the seed.
    pub fn hosts(&self) -> Vec<GenHost> {
        let n = self.hosts;
        let width = n.to_string().len().max(4);
        let mut rng = SplitMix64(self.seed);
        let mut roles: Vec<&str> = Vec::with_capacity(n);
        let mut dealt = 0;
        for (i, (role, pct, _)) in ROLES.iter().enumerate() {
            // The last role takes the remainder, so the counts always add up to `n`.
            let count = if i + 1 == ROLES.len() {
                n - dealt
            } else {
                percent(n, *pct).min(n - dealt)
            };
            roles.resize(roles.len() + count, *role);
            dealt += count;
        }
        rng.shuffle(&mut roles);
        let sealed = self.shape == Shape::Sealed;
        // A stream of its own: keys do not move when the role deal changes.
        let mut keys = SplitMix64(self.seed ^ 0x6964_656e_7469_7479);
        roles
            .into_iter()
            .enumerate()
            .map(|(i, role)| {
                let number = i + 1;
                let mut labels = BTreeMap::new();
                // Contiguous blocks, as hosts fill racks in a real data centre.
                let rack = (i * RACKS).checked_div(n).unwrap_or(0);
                labels.insert("rack".to_owned(), format!("r{rack:02}"));
                labels.insert("role".to_owned(), role.to_owned());
                if number % NIC_EVERY == 0 {
                    labels.insert("nic".to_owned(), "mlx5".to_owned());
                }
                GenHost {
                    name: format!("node-{number:0width$}"),
                    address: format!(
                        "10.{}.{}.{}",
                        (number >> 16) & 0xff,
                        (number >> 8) & 0xff,
                        number & 0xff
                    ),
                    labels,
                    identity: sealed.then(|| {
                        let mut seed = [0u8; 32];
                        for word in seed.chunks_mut(8) {
                            word.copy_from_slice(&keys.next_u64().to_le_bytes());
                        }
                        bell_seal::openssh::Ed25519Key::from_seed(seed).public_line()
                    }),
                }
            })
            .collect()
    }

    /// Indices of the hosts that get a host override with a sysctl of their own (1 % of the
    /// fleet, at least one host), with that sysctl's value, in host order.
    fn host_overrides(&self) -> Vec<(usize, u32)> {
        if self.hosts == 0 {
            return Vec::new();
        }
        // A stream of its own, so that the choice does not move when the role deal changes.
        let mut rng = SplitMix64(self.seed ^ 0x686f_7374_6f76_6572);
        let mut indices: Vec<usize> = (0..self.hosts).collect();
        rng.shuffle(&mut indices);
        indices.truncate(percent(self.hosts, 1).max(1));
        indices.sort_unstable();
        indices
            .into_iter()
            .map(|i| (i, 1024 * (1 + rng.below(32) as u32)))
            .collect()
    }

    /// Relative path → content of every file of the fleet: `bell.kdl`, with
    /// `Inventory::Json` also `inventory/hosts.json`, and with `Shape::Unique` or
    /// `Shape::Overridden` the files of host overrides.
    pub fn generate(&self) -> BTreeMap<String, String> {
        let hosts = self.hosts();
        let mut files = BTreeMap::new();
        let mut kdl = String::new();
        let _ = writeln!(
            kdl,
            "// generated by bell-fleetgen --hosts {} --shape {} --inventory {} --seed {}",
            self.hosts,
            self.shape.as_str(),
            self.inventory.as_str(),
            self.seed
        );
        // Without identities (every shape but `Sealed`) the password hashes ship in the clear,
        // as in a trial: those benchmarks measure rendering and writing, and `Sealed` what
        // sealing to each host adds.
        let secrets = match self.shape {
            Shape::Sealed => "",
            _ => " secrets=\"plaintext\"",
        };
        let _ = writeln!(
            kdl,
            "fleet {} target=\"debian-12\"{secrets}\n",
            quote(&format!(
                "gen-{}-{}-{}",
                self.shape.as_str(),
                self.hosts,
                self.seed
            ))
        );
        match self.inventory {
            Inventory::Inline => {
                for host in &hosts {
                    let _ = write!(
                        kdl,
                        "host {} address={}",
                        quote(&host.name),
                        quote(&host.address)
                    );
                    for (key, value) in &host.labels {
                        let _ = write!(kdl, " {key}={}", quote(value));
                    }
                    if let Some(identity) = &host.identity {
                        let _ = write!(kdl, " identity={}", quote(identity));
                    }
                    kdl.push('\n');
                }
            }
            Inventory::Json => {
                let _ = writeln!(kdl, "inventory {}", quote(INVENTORY_PATH));
                files.insert(INVENTORY_PATH.to_owned(), inventory_json(&hosts));
            }
        }
        kdl.push('\n');
        base_config(&mut kdl);
        if self.shape == Shape::Templated {
            kdl.push_str(concat!(
                "file \"/etc/bell-host\" mode=\"0644\" owner=\"root\" group=\"root\" {\n",
                "    content \"host={{ host.name }}\\naddress={{ host.address }}\\n\"\n",
                "}\n",
            ));
        }
        label_overrides(&mut kdl);

        let mut per_host: BTreeMap<usize, Option<u32>> = BTreeMap::new();
        for (i, value) in self.host_overrides() {
            per_host.insert(i, Some(value));
        }
        if self.shape == Shape::Unique {
            for i in 0..hosts.len() {
                per_host.entry(i).or_insert(None);
            }
        }
        // Host overrides with a file of their own go into included files of a thousand hosts
        // each: a hundred thousand of them would not fit the size limit of one spec file.
        let own_file = matches!(self.shape, Shape::Unique | Shape::Overridden);
        let split = own_file;
        if split && !per_host.is_empty() {
            let _ = writeln!(kdl, "include {}", quote(&format!("{OVERRIDES_DIR}/*.kdl")));
        }
        let mut part = String::new();
        let mut parts = 0usize;
        for (n, (i, sysctl)) in per_host.into_iter().enumerate() {
            let Some(host) = hosts.get(i) else { continue };
            let out = if split { &mut part } else { &mut kdl };
            let _ = writeln!(out, "override {} {{", quote(&format!("host-{}", host.name)));
            let _ = writeln!(out, "    match host={}", quote(&host.name));
            if let Some(value) = sysctl {
                let _ = writeln!(out, "    sysctl {{ net.core.somaxconn {value} }}");
            }
            if own_file {
                let _ = writeln!(
                    out,
                    "    file \"/etc/bell-host\" mode=\"0644\" owner=\"root\" group=\"root\" {{"
                );
                let content = format!("host={}\naddress={}\n", host.name, host.address);
                let _ = writeln!(out, "        content {}", quote(&content));
                out.push_str("    }\n");
            }
            out.push_str("}\n");
            if split && (n + 1) % OVERRIDES_PER_FILE == 0 {
                files.insert(
                    format!("{OVERRIDES_DIR}/{parts:05}.kdl"),
                    std::mem::take(&mut part),
                );
                parts += 1;
            }
        }
        if !part.is_empty() {
            files.insert(format!("{OVERRIDES_DIR}/{parts:05}.kdl"), part);
        }
        files.insert("bell.kdl".to_owned(), kdl);
        files
    }
}

/// Where a unique fleet's host overrides are, [`OVERRIDES_PER_FILE`] to a file.
pub const OVERRIDES_DIR: &str = "overrides";
pub const OVERRIDES_PER_FILE: usize = 1000;

/// One host per line: a 100 000-host inventory stays diffable and greppable.
fn inventory_json(hosts: &[GenHost]) -> String {
    let mut out = String::from("[\n");
    for (i, host) in hosts.iter().enumerate() {
        // Serialising strings and string maps cannot fail.
        let line = serde_json::to_string(host).unwrap_or_default();
        out.push_str("  ");
        out.push_str(&line);
        if i + 1 < hosts.len() {
            out.push(',');
        }
        out.push('\n');
    }
    out.push_str("]\n");
    out
}

fn base_config(kdl: &mut String) {
    kdl.push_str("sysctl {\n");
    for (key, value) in SYSCTLS {
        let _ = writeln!(kdl, "    {key} {value}");
    }
    kdl.push_str("}\n");
    kdl.push_str(concat!(
        "limit \"nofile-soft\" domain=\"*\" type=\"soft\" item=\"nofile\" value=65536\n",
        "limit \"nofile-hard\" domain=\"*\" type=\"hard\" item=\"nofile\" value=1048576\n",
        "limit \"nproc\" domain=\"root\" type=\"soft\" item=\"nproc\" value=65536\n",
        "limit \"core_dump\" domain=\"0:\" type=\"hard\" item=\"core\" value=0\n",
        "mount \"scratch\" target=\"/srv/scratch\" device=\"tmpfs\" type=\"tmpfs\" ",
        "options=\"defaults,noatime,nosuid,nodev,noexec,mode=1777,size=1024M\"\n",
        "mount \"fleet-run\" target=\"/run/fleet\" device=\"tmpfs\" type=\"tmpfs\" ",
        "options=\"defaults,nosuid,nodev,mode=0755,size=64M\"\n",
    ));
    let _ = writeln!(kdl, "ethtool {} {{", quote(NIC));
    kdl.push_str("    tx-tcp-segmentation on\n    generic-receive-offload on\n}\n");
    kdl.push_str("users purge-expired=#false\n");
    for (name, sudo, hash, key) in USERS {
        let sudo = if sudo { " sudo=#true" } else { "" };
        let _ = writeln!(kdl, "user {}{sudo} {{", quote(name));
        let _ = writeln!(kdl, "    password {}", quote(hash));
        let _ = writeln!(kdl, "    ssh-key {}", quote(key));
        kdl.push_str("}\n");
    }
    let facts = raw_block(
        4,
        &[
            "#!/bin/sh",
            "set -eu",
            "# Under BELL_ROOT, so that baking an image (bell-run --root) writes into the image.",
            "root=${BELL_ROOT:-/}",
            "out=${root%/}$2",
            "mkdir -p \"${out%/*}\"",
            "{",
            "    echo \"fleet=$FLEET\"",
            "    echo \"kernel=$(uname -r)\"",
            "    echo \"cpus=$(nproc)\"",
            "} >\"$out\"",
        ],
    );
    let _ = writeln!(
        kdl,
        concat!(
            "exec \"001-fleet-facts.sh\" rerun=\"once-successfully\" timeout=600 on-failure=\"halt\" {{\n",
            "    args \"--out\" \"/run/fleet/facts\"\n",
            "    env FLEET=\"generated\"\n",
            "    after \"mount:fleet-run\"\n",
            "    script {}\n",
            "}}"
        ),
        facts
    );
    kdl.push_str(concat!(
        "exec \"002-scratch-check.sh\" rerun=\"always\" rerun-interval=3600 retry-interval=60 {\n",
        "    after \"mount:scratch\"\n",
        "    script \"#!/bin/sh\\nset -eu\\nroot=${BELL_ROOT:-/}\\ntest -d \\\"${root%/}/srv/scratch\\\"\\ntest -w \\\"${root%/}/srv/scratch\\\"\\n\"\n",
        "}\n",
    ));
    let profile = raw_block(
        4,
        &[
            "#include <tunables/global>",
            "profile fleet-agent /usr/local/bin/fleet-agent {",
            "  #include <abstractions/base>",
            "  capability net_admin,",
            "  /run/fleet/** rw,",
            "}",
        ],
    );
    let _ = writeln!(
        kdl,
        "apparmor \"fleet-agent\" mode=\"complain\" {{\n    profile {profile}\n}}\n"
    );
}

fn label_overrides(kdl: &mut String) {
    for (role, _, sysctls) in ROLES {
        let _ = writeln!(kdl, "override {} {{", quote(&format!("role-{role}")));
        let _ = writeln!(kdl, "    match role={}", quote(role));
        kdl.push_str("    sysctl {\n");
        for (key, value) in sysctls {
            let _ = writeln!(kdl, "        {key} {value}");
        }
        kdl.push_str("    }\n}\n");
    }
    let _ = writeln!(
        kdl,
        "override \"nic-mlx5\" {{\n    match nic=\"mlx5\"\n    ethtool {} {{ generic-receive-offload off }}\n}}",
        quote(NIC)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_what_kdl_needs() {
        assert_eq!(quote("a\"b\\c\nd\u{7}"), "\"a\\\"b\\\\c\\nd\\u{7}\"");
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // First outputs for seed 0 from the reference C implementation.
        let mut rng = SplitMix64(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }
}

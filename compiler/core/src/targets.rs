//! Target profiles (`targets/*.json`, embedded at build time): which distribution a host runs,
//! where it keeps the files bell writes when that is not where Debian keeps them, and which
//! features it has. Rendering reads directories through [`Target::path`] instead of
//! hard-coding them, so a new distribution is one JSON file and a new directory one constant.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub name: String,
    pub os: String,
    pub version: String,
    pub codename: String,
    /// Directories this distribution keeps somewhere else than Debian, by [`TargetPath::key`].
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
    pub package_manager: String,
    /// The distribution's built-in login account (`debian`, `ubuntu`), disabled only when a
    /// managed user can take over (Divingbell's rule).
    pub default_account: String,
    pub features: BTreeMap<String, bool>,
    /// How the kernel command line is set (`grub`: drop-ins under `/etc/default/grub.d`, then
    /// `update-grub`); without one, `kernel-args` cannot be used.
    #[serde(default)]
    pub bootloader: Option<String>,
    /// The kernel's sysctl keys, for the build-time check of keys and values.
    #[serde(default)]
    pub sysctl_keys: Option<SysctlKeysSource>,
}

/// Which list of sysctl keys (`targets/sysctl/LIST.txt`) a target's kernel has, and whether the
/// list was collected from that target's own kernel (`exact`): only then is a key missing
/// from it an error; on a target that borrows another's list it is a warning.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SysctlKeysSource {
    pub list: String,
    pub exact: bool,
}

/// What a sysctl key takes, as its value read on the booted kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlKind {
    /// Whole numbers: `1`, `4096 131072 6291456`.
    Number,
    /// Anything: a name (`bbr`), a pattern, or a key that reads empty until set.
    Text,
    /// The kernel takes no writes (`kernel.random.boot_id`).
    ReadOnly,
}

/// A kernel's sysctl keys in slash form (`net/ipv4/ip_forward`); the interface segment of a
/// per-interface key is `*` (`net/ipv4/conf/*/rp_filter`).
#[derive(Debug)]
pub struct SysctlKeys {
    /// Where the list comes from: `Debian GNU/Linux 12 (bookworm), kernel 6.1.0-56-amd64`.
    pub kernel: String,
    keys: BTreeMap<String, SysctlKind>,
}

/// The prefixes whose next segment names an interface (or `all`, `default`).
const PER_INTERFACE: &[&str] = &[
    "net/ipv4/conf/",
    "net/ipv6/conf/",
    "net/ipv4/neigh/",
    "net/ipv6/neigh/",
    "net/mpls/conf/",
];

impl SysctlKeys {
    fn parse(text: &str) -> SysctlKeys {
        let kernel = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# sysctl keys of "))
            .map(|l| l.trim_end_matches(',').to_string())
            .unwrap_or_default();
        let keys = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (path, kind) = l.split_once('\t')?;
                let kind = match kind {
                    "number" => SysctlKind::Number,
                    "read-only" => SysctlKind::ReadOnly,
                    _ => SysctlKind::Text,
                };
                Some((path.to_string(), kind))
            })
            .collect();
        SysctlKeys { kernel, keys }
    }

    /// `path` with its interface segment written `*`, for a per-interface key.
    fn generic(path: &str) -> Option<String> {
        let prefix = PER_INTERFACE.iter().find(|p| path.starts_with(**p))?;
        let rest = &path[prefix.len()..];
        let (_, key) = rest.split_once('/')?;
        Some(format!("{prefix}*/{key}"))
    }

    /// What the key at `path` (slash form) takes; `None` when the kernel has no such key.
    pub fn get(&self, path: &str) -> Option<SysctlKind> {
        self.keys
            .get(path)
            .or_else(|| Self::generic(path).and_then(|g| self.keys.get(&g)))
            .copied()
    }

    /// Every key in slash form, a per-interface key with `interface` in place of `*`.
    pub fn paths_for<'a>(&'a self, interface: &'a str) -> impl Iterator<Item = String> + 'a {
        self.keys
            .keys()
            .map(move |k| k.replacen("/*/", &format!("/{interface}/"), 1))
    }

    /// The interface segment of a per-interface key, if `path` is one.
    pub fn interface_of(path: &str) -> Option<&str> {
        let prefix = PER_INTERFACE.iter().find(|p| path.starts_with(**p))?;
        path[prefix.len()..].split_once('/').map(|(i, _)| i)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

const SYSCTL_LISTS: &[(&str, &str)] = &[(
    "debian-12",
    include_str!("../../../targets/sysctl/debian-12.txt"),
)];

/// The sysctl keys of `target`'s kernel, with whether the list is that kernel's own.
pub fn sysctl_keys(target: &Target) -> Option<(&'static SysctlKeys, bool)> {
    static LISTS: OnceLock<BTreeMap<&'static str, SysctlKeys>> = OnceLock::new();
    let lists = LISTS.get_or_init(|| {
        SYSCTL_LISTS
            .iter()
            .map(|(name, text)| (*name, SysctlKeys::parse(text)))
            .collect()
    });
    let source = target.sysctl_keys.as_ref()?;
    lists
        .get(source.list.as_str())
        .map(|keys| (keys, source.exact))
}

/// A directory bell writes into, with where Debian keeps it. A kind names the directories it
/// writes next to its render code; a profile lists (under `paths`, by `key`) only the ones its
/// distribution keeps elsewhere. So a new path is one constant, not an edit to every profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetPath {
    pub key: &'static str,
    pub default: &'static str,
}

impl Target {
    /// The directory `path` names on this target.
    pub fn path(&self, path: &TargetPath) -> &str {
        self.paths
            .get(path.key)
            .map_or(path.default, String::as_str)
    }
}

const EMBEDDED: &[(&str, &str)] = &[
    ("debian-12", include_str!("../../../targets/debian-12.json")),
    // The releases the sites that ran Divingbell ran; their sysctl keys are Debian 12's,
    // borrowed (a missing key a warning): no image of theirs can be built here.
    (
        "ubuntu-18.04",
        include_str!("../../../targets/ubuntu-18.04.json"),
    ),
    (
        "ubuntu-20.04",
        include_str!("../../../targets/ubuntu-20.04.json"),
    ),
    (
        "ubuntu-22.04",
        include_str!("../../../targets/ubuntu-22.04.json"),
    ),
    (
        "ubuntu-24.04",
        include_str!("../../../targets/ubuntu-24.04.json"),
    ),
];

/// Every known target, by name.
pub fn all() -> &'static BTreeMap<String, Target> {
    static TARGETS: OnceLock<BTreeMap<String, Target>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        EMBEDDED
            .iter()
            .filter_map(|(name, text)| {
                // The profiles are ours and tested (`every_profile_parses`); a broken one is
                // left out rather than crashing a user's build.
                serde_json::from_str::<Target>(text)
                    .ok()
                    .map(|t| (name.to_string(), t))
            })
            .collect()
    })
}

pub fn names() -> Vec<&'static str> {
    all().keys().map(String::as_str).collect()
}

pub fn get(name: &str) -> Option<&'static Target> {
    all().get(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_profile_parses() {
        assert_eq!(super::all().len(), super::EMBEDDED.len());
        for (name, target) in super::all() {
            assert_eq!(name, &target.name);
        }
    }

    const SYSCTL: super::TargetPath = super::TargetPath {
        key: "sysctl_dir",
        default: "/etc/sysctl.d",
    };

    fn profile(paths: &str) -> Result<super::Target, serde_json::Error> {
        serde_json::from_str(&format!(
            r#"{{"name": "x", "os": "x", "version": "1", "codename": "x",
                "package_manager": "apt", "default_account": "x", "features": {{}}{paths}}}"#
        ))
    }

    #[test]
    fn a_profile_names_only_the_paths_it_moves() {
        let debian_like = profile("").expect("parses");
        assert_eq!(debian_like.path(&SYSCTL), "/etc/sysctl.d");
        let moved = profile(r#", "paths": {"sysctl_dir": "/usr/lib/sysctl.d"}"#).expect("parses");
        assert_eq!(moved.path(&SYSCTL), "/usr/lib/sysctl.d");
    }

    #[test]
    fn every_target_has_a_sysctl_key_list() {
        for target in super::all().values() {
            let (keys, _) = super::sysctl_keys(target).expect("a list");
            assert!(keys.len() > 500, "{}", target.name);
            assert!(keys.kernel.contains("kernel 6."), "{}", keys.kernel);
            use super::SysctlKind::*;
            assert_eq!(keys.get("vm/swappiness"), Some(Number));
            assert_eq!(keys.get("net/ipv4/conf/eth0.100/rp_filter"), Some(Number));
            assert_eq!(keys.get("net/ipv4/conf/all/rp_filter"), Some(Number));
            assert_eq!(keys.get("kernel/core_pattern"), Some(Text));
            assert_eq!(keys.get("kernel/random/boot_id"), Some(ReadOnly));
            assert_eq!(keys.get("net/bridge/bridge-nf-call-iptables"), Some(Number));
            assert_eq!(keys.get("vm/swapiness"), None);
        }
    }

    #[test]
    fn a_misspelt_profile_field_is_refused() {
        assert!(profile(r#", "pahts": {}"#).is_err());
    }
}

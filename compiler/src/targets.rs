//! Target profiles (`targets/*.json`, embedded at build time): where a distribution keeps the
//! files bell writes, and which features it has. Rendering reads paths from here instead of
//! hard-coding them, so a new distribution is one JSON file.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Target {
    pub name: String,
    pub os: String,
    pub version: String,
    pub codename: String,
    pub paths: Paths,
    pub package_manager: String,
    /// The distribution's built-in login account (`debian`, `ubuntu`), disabled only when a
    /// managed user can take over (Divingbell's rule).
    pub default_account: String,
    pub features: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Paths {
    pub sysctl_dir: String,
    pub limits_dir: String,
    pub unit_dir: String,
    pub apparmor_dir: String,
    pub sudoers_dir: String,
    pub apt_sources_dir: String,
    pub apt_keyring_dir: String,
    pub debconf_dir: String,
}

const EMBEDDED: &[(&str, &str)] = &[
    ("debian-12", include_str!("../../targets/debian-12.json")),
    (
        "ubuntu-22.04",
        include_str!("../../targets/ubuntu-22.04.json"),
    ),
    (
        "ubuntu-24.04",
        include_str!("../../targets/ubuntu-24.04.json"),
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
}

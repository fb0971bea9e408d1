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
    fn a_misspelt_profile_field_is_refused() {
        assert!(profile(r#", "pahts": {}"#).is_err());
    }
}

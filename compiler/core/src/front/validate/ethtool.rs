//! ethtool feature names, from `stdlib/ethtool/features.txt`.

use super::*;

const ETHTOOL_FEATURES: &str = include_str!("../../../../../stdlib/ethtool/features.txt");

/// The feature names `ethtool -K` accepts, from `stdlib/ethtool/features.txt`.
pub fn ethtool_features() -> impl Iterator<Item = &'static str> {
    ETHTOOL_FEATURES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// A feature name `ethtool -K` knows (whether a given NIC can change it is known only on the host).
pub fn ethtool_feature(name: &str) -> Result<(), Invalid> {
    if ethtool_features().any(|f| f == name) {
        return Ok(());
    }
    let message = format!("unknown ethtool feature `{name}`");
    let help = match did_you_mean(name, ethtool_features()) {
        Some(suggestion) => {
            format!("did you mean `{suggestion}`? `ethtool -k DEV` lists the features of a device")
        }
        None => {
            "`ethtool -k DEV` lists the features of a device, e.g. `tx-tcp-segmentation` or `gro`"
                .to_owned()
        }
    };
    Err(invalid(message, help))
}

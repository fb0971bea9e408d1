//! ethtool feature names (checked against what `ethtool -k` prints) and did-you-mean.

use bellc_core::front::validate::{did_you_mean, ethtool_feature, ethtool_features};
use std::process::Command;

#[test]
fn feature_list_is_sorted_and_unique() {
    let features: Vec<&str> = ethtool_features().collect();
    assert!(features.len() > 80);
    let mut sorted = features.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(features, sorted);
    for alias in [
        "tso", "gso", "gro", "lro", "sg", "rx", "tx", "rxvlan", "txvlan", "ntuple", "rxhash", "ufo",
    ] {
        assert_eq!(ethtool_feature(alias), Ok(()), "{alias}");
    }
}

/// Every name this machine's ethtool prints for its interfaces is known.
#[test]
fn accepts_every_feature_ethtool_prints() {
    if !bell_testkit::tool("ethtool") {
        return;
    }
    let links = std::fs::read_dir("/sys/class/net").expect("list interfaces");
    let mut checked = 0;
    for link in links {
        let name = link.expect("interface").file_name();
        let output = Command::new("ethtool")
            .arg("-k")
            .arg(&name)
            .output()
            .expect("run ethtool");
        for line in String::from_utf8_lossy(&output.stdout).lines().skip(1) {
            let Some((feature, _)) = line.trim().split_once(':') else {
                continue;
            };
            assert_eq!(
                ethtool_feature(feature),
                Ok(()),
                "`{feature}` from {name:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "ethtool printed only {checked} features");
}

#[test]
fn unknown_features_get_a_suggestion() {
    let invalid = ethtool_feature("tx-tcp-segmentaton").expect_err("typo");
    assert_eq!(
        invalid.message,
        "unknown ethtool feature `tx-tcp-segmentaton`"
    );
    assert_eq!(
        invalid.help,
        "did you mean `tx-tcp-segmentation`? `ethtool -k DEV` lists the features of a device"
    );
    let invalid = ethtool_feature("generic-recieve-offload").expect_err("transposition");
    assert!(
        invalid
            .help
            .starts_with("did you mean `generic-receive-offload`?"),
        "{}",
        invalid.help
    );
    let invalid = ethtool_feature("TSO").expect_err("case");
    assert!(
        invalid.help.starts_with("`ethtool -k DEV` lists"),
        "{}",
        invalid.help
    );
    assert!(ethtool_feature("").is_err());
    assert!(ethtool_feature("tso off").is_err());
}

#[test]
fn did_you_mean_threshold_and_ties() {
    let words = ["service", "socket", "slice", "scope"];
    assert_eq!(did_you_mean("servcie", words), Some("service"));
    assert_eq!(did_you_mean("sevice", words), Some("service"));
    assert_eq!(did_you_mean("xyz", words), None);
    // Short words still allow one edit.
    assert_eq!(did_you_mean("tx", ["rx", "sg"]), Some("rx"));
    // Distance 2 is over the threshold for a 5-letter word (5 / 3 = 1).
    assert_eq!(did_you_mean("slxxe", words), None);
    // Ties go to the smallest candidate whatever the input order.
    assert_eq!(did_you_mean("ab", ["ac", "aa"]), Some("aa"));
    assert_eq!(did_you_mean("ab", ["aa", "ac"]), Some("aa"));
    // An exact match is not a suggestion.
    assert_eq!(did_you_mean("slice", ["slice"]), None);
    assert_eq!(did_you_mean("", ["a"]), Some("a"));
}

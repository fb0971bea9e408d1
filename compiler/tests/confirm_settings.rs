//! `confirm`: a setting placed like any (top, by label, per host) that carries its timeout
//! into the manifest for bell-run, refusing one no host could keep. What bell-run does with it
//! is `confirm_or_revert.rs`'s.

use crate::common::in_memory::{bundle, errors};

const SPEC: &str = r#"fleet "k" target="debian-12"
host "db-1" role="db"
host "web-1" role="web"
host "lab-1" role="lab"
confirm timeout="2m"
override "db" {
    match role="db"
    confirm timeout="10m"
}
override "lab" {
    match role="lab"
    confirm
}
"#;

#[test]
fn the_timeout_reaches_the_manifest_per_host() {
    let timeout = |host: &str| bundle(SPEC, host).manifest.confirm.map(|c| c.timeout);
    assert_eq!(timeout("web-1"), Some(120));
    assert_eq!(timeout("db-1"), Some(600));
    // A label's `confirm` replaces the fields it gives; the others come from below.
    assert_eq!(timeout("lab-1"), Some(120));
    // Without a timeout anywhere, deploy-rs's 30 s.
    let default = "fleet \"k\" target=\"debian-12\"\nhost \"h\"\nconfirm\n";
    assert_eq!(
        bundle(default, "h").manifest.confirm.map(|c| c.timeout),
        Some(30)
    );
    // Without `confirm`, the manifest has none and the bundle is what it was.
    let plain =
        "fleet \"k\" target=\"debian-12\"\nhost \"h\"\nfile \"/etc/motd\" { content \"hi\\n\"; }\n";
    let b = bundle(plain, "h");
    assert!(b.manifest.confirm.is_none());
    assert!(!b.manifest_json.contains("confirm"));
}

#[test]
fn a_timeout_no_host_could_keep_is_refused_where_it_is_written() {
    for (timeout, column) in [("1s", 9), ("2h", 9), ("0s", 9)] {
        let errs = errors(&format!(
            "fleet \"k\" target=\"debian-12\"\nhost \"h\"\nconfirm timeout=\"{timeout}\"\n"
        ));
        assert!(
            errs.iter()
                .any(|e| e.starts_with(&format!("bell.kdl:3:{column}:"))
                    && e.contains("`confirm`: `timeout` must be between 5s and 1h")),
            "{timeout}: {errs:#?}"
        );
    }
}

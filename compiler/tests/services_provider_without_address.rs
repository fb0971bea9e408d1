//! A host that provides a service must have an address for its consumers to reach; one that
//! has none is an error at the `service` line that names the host.

use crate::common::spec_dir::build;

#[test]
fn a_provider_without_an_address_is_named() {
    let spec = r#"
fleet "t" target="ubuntu-24.04"
host "ctl-1" address="10.0.0.1" role="control"
host "ctl-2" role="control"
host "ctl-3" role="control"
override "control" {
    match role="control"
    service "etcd" port=2379
}
"#;
    let b = build(&[("bell.kdl", spec)]);
    assert!(b.compiled.is_none());
    let short = b.short();
    assert_eq!(short.len(), 1, "{short:#?}");
    assert!(
        short[0].starts_with(&format!(
            "{}:8:5: error[bell::services::no_address]",
            "bell.kdl"
        )),
        "{short:#?}"
    );
    assert!(
        short[0]
            .contains("host `ctl-2` provides `etcd` but has no address (1 more provider has none)"),
        "{short:#?}"
    );
    let text = b.rendered();
    assert!(
        text.contains("makes `ctl-2` a provider of `etcd`"),
        "{text}"
    );
}

#[test]
fn consumers_need_no_address() {
    let spec = r#"
fleet "t" target="ubuntu-24.04"
host "ctl-1" address="10.0.0.1" role="control"
host "cmp-1" role="compute"
override "control" {
    match role="control"
    service "etcd"
}
override "compute" {
    match role="compute"
    uses "etcd"
}
"#;
    let b = build(&[("bell.kdl", spec)]);
    assert!(b.compiled.is_some(), "{:#?}", b.short());
}

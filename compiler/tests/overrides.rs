//! Override resolution as LANGUAGE.md specifies it: layered (every matching layer, label
//! layers in declaration order, host layers last, later wins key by key) and exclusive
//! (Divingbell's rule: at most one; a host override beats label overrides; among label
//! overrides the last matching one wins), `#null`, `remove`, and property-by-property merging.
use crate::common::*;
use bellc_core::resolve::ResolvedHost;
use std::collections::BTreeMap;

/// Resolves a spec and returns every host's sysctl values and resource keys.
fn resolve(spec: &str) -> BTreeMap<String, ResolvedHost> {
    let fx = Fixture::spec(spec);
    let mut sources = bellc_core::source::Sources::new();
    let mut diags = bellc_core::diagnostic::Diagnostics::new();
    let front =
        bellc_core::frontend(&fx.path().join("bell.kdl"), &mut sources, &mut diags).unwrap();
    assert!(!diags.has_errors(), "{:?}", diags.to_short_lines(&sources));
    front
        .resolution
        .hosts
        .into_iter()
        .map(|h| (h.name.clone(), h))
        .collect()
}

fn sysctl(host: &ResolvedHost, key: &str) -> Option<String> {
    host.model
        .sysctl
        .values()
        .find(|s| s.key == key)
        .map(|s| s.value.clone())
}

/// The Divingbell README's override example.
fn divingbell(mode: &str) -> String {
    format!(
        r#"
fleet "db" target="debian-12" overrides="{mode}"
host "plain" a="1"
host "dpdk" compute_type="dpdk"
host "sriov" compute_type="sriov"
host "both" compute_type="dpdk" another_label="another_value"
host "superhost" compute_type="dpdk"
host "superhost2" another_label="another_value"
sysctl {{
    net.ipv4.ip_forward 1
    net.ipv6.conf.all.forwarding 1
}}
override "compute" {{
    match compute_type="dpdk"
    match compute_type="sriov"
    sysctl {{ net.ipv4.ip_forward 0; net.core.somaxconn 100 }}
}}
override "another" {{
    match another_label="another_value"
    sysctl {{ net.ipv4.ip_forward 2 }}
}}
override "superhost" {{
    match host="superhost"
    sysctl {{ fs.file-max 12345; net.ipv6.conf.all.forwarding #null }}
}}
override "superhost2" {{
    match host="superhost2"
    sysctl {{ fs.file-max 23456 }}
}}
"#
    )
}

#[test]
fn layered_applies_every_matching_layer_in_order() {
    let hosts = resolve(&divingbell("layered"));
    assert_eq!(
        sysctl(&hosts["plain"], "net.ipv4.ip_forward").as_deref(),
        Some("1")
    );
    assert_eq!(
        sysctl(&hosts["dpdk"], "net.ipv4.ip_forward").as_deref(),
        Some("0")
    );
    assert_eq!(
        sysctl(&hosts["sriov"], "net.core.somaxconn").as_deref(),
        Some("100")
    );
    // Both label layers apply; the later one wins the key they share, the earlier keeps its own.
    assert_eq!(
        sysctl(&hosts["both"], "net.ipv4.ip_forward").as_deref(),
        Some("2")
    );
    assert_eq!(
        sysctl(&hosts["both"], "net.core.somaxconn").as_deref(),
        Some("100")
    );
    // The host layer comes last and adds to the label layers.
    let sh = &hosts["superhost"];
    assert_eq!(sysctl(sh, "fs.file-max").as_deref(), Some("12345"));
    assert_eq!(sysctl(sh, "net.ipv4.ip_forward").as_deref(), Some("0"));
    assert_eq!(sysctl(sh, "net.core.somaxconn").as_deref(), Some("100"));
    // #null removes an inherited key.
    assert_eq!(sysctl(sh, "net.ipv6.conf.all.forwarding"), None);
    assert_eq!(
        sysctl(&hosts["superhost2"], "net.ipv4.ip_forward").as_deref(),
        Some("2")
    );
}

#[test]
fn exclusive_applies_at_most_one_override() {
    let hosts = resolve(&divingbell("exclusive"));
    assert_eq!(
        sysctl(&hosts["plain"], "net.ipv4.ip_forward").as_deref(),
        Some("1")
    );
    assert_eq!(
        sysctl(&hosts["dpdk"], "net.ipv4.ip_forward").as_deref(),
        Some("0")
    );
    // Among label overrides the last matching one wins, alone: no somaxconn from `compute`.
    assert_eq!(
        sysctl(&hosts["both"], "net.ipv4.ip_forward").as_deref(),
        Some("2")
    );
    assert_eq!(sysctl(&hosts["both"], "net.core.somaxconn"), None);
    // A host override beats label overrides, alone: forwarding is the base value again.
    let sh = &hosts["superhost"];
    assert_eq!(sysctl(sh, "fs.file-max").as_deref(), Some("12345"));
    assert_eq!(sysctl(sh, "net.ipv4.ip_forward").as_deref(), Some("1"));
    assert_eq!(sysctl(sh, "net.core.somaxconn"), None);
    assert_eq!(sysctl(sh, "net.ipv6.conf.all.forwarding"), None);
    assert_eq!(
        sysctl(&hosts["superhost2"], "net.ipv4.ip_forward").as_deref(),
        Some("1")
    );
    assert_eq!(hosts["superhost2"].model.layers.len(), 1);
}

#[test]
fn remove_drops_inherited_resources_and_keys() {
    let hosts = resolve(
        r#"
fleet "f" target="debian-12"
host "a"
host "b" lean="yes"
sysctl { vm.swappiness 10; net.core.somaxconn 1 }
mount "mnt" target="/mnt" device="tmpfs" type="tmpfs"
package "htop"
package "curl"
override "lean" {
    match lean="yes"
    remove "mount:mnt" "package:htop" "sysctl:vm.swappiness"
}
"#,
    );
    let keys = |h: &ResolvedHost| {
        h.model
            .resources
            .iter()
            .map(|r| r.key())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&hosts["a"]),
        ["mount:mnt", "package:htop", "package:curl"]
    );
    assert_eq!(keys(&hosts["b"]), ["package:curl"]);
    assert_eq!(sysctl(&hosts["b"], "vm.swappiness"), None);
    assert_eq!(
        sysctl(&hosts["b"], "net.core.somaxconn").as_deref(),
        Some("1")
    );
}

#[test]
fn a_later_layer_overrides_a_resource_property_by_property() {
    let hosts = resolve(
        r##"
fleet "f" target="debian-12"
host "a" big="yes"
mount "data" target="/srv/data" device="tmpfs" type="tmpfs" options="size=1G"
exec "run.sh" rerun="always" {
    args "one" "two"
    script "#!/bin/sh\necho hi\n"
}
override "big" {
    match big="yes"
    mount "data" options="size=8G"
    exec "run.sh" { args "three"; }
}
"##,
    );
    let a = &hosts["a"];
    let mount = a.model.resources.iter().find(|r| r.name == "data").unwrap();
    assert_eq!(mount.str("options"), Some("size=8G"));
    assert_eq!(mount.str("target"), Some("/srv/data"), "inherited");
    let exec = a
        .model
        .resources
        .iter()
        .find(|r| r.name == "run.sh")
        .unwrap();
    assert_eq!(exec.list("args"), ["three"], "lists are replaced whole");
    assert!(exec.str("script").is_some(), "inherited");
    // Provenance: the options came from the first (and only) override, the target from base.
    assert_eq!(mount.fields["options"].1.layer, Some(0));
    assert_eq!(mount.fields["target"].1.layer, None);
}

#[test]
fn the_same_key_in_dotted_and_slash_form_is_one_key() {
    let hosts = resolve(
        r#"
fleet "f" target="debian-12"
host "a" x="1"
sysctl { net.ipv4.conf.all.rp_filter 1; "net/ipv4/conf/eth0.100/rp_filter" 2 }
override "x" {
    match x="1"
    sysctl { "net/ipv4/conf/all/rp_filter" 0 }
}
"#,
    );
    let a = &hosts["a"];
    assert_eq!(a.model.sysctl.len(), 2);
    assert_eq!(
        sysctl(a, "net/ipv4/conf/all/rp_filter").as_deref(),
        Some("0")
    );
    assert_eq!(
        sysctl(a, "net/ipv4/conf/eth0.100/rp_filter").as_deref(),
        Some("2")
    );
}

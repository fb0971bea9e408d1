//! The three-role example: control hosts provide etcd, compute hosts need three of them and get
//! a config file listing their addresses, and the plan rolls control hosts out first, one rack
//! host at a time.

use crate::common::spec_dir::examples;
use bellc_core::diagnostic::Diagnostics;
use bellc_core::render::Renderer;
use bellc_core::source::Sources;
use std::collections::HashMap;

fn compile() -> bellc_core::Compiled {
    let mut sources = Sources::with_base(examples());
    sources.open_secrets_with(crate::common::example_secrets_identities());
    let mut diags = Diagnostics::new();
    let compiled =
        bellc_core::compile(&examples().join("three-role.kdl"), &mut sources, &mut diags);
    assert!(!diags.has_errors(), "{:#?}", diags.to_short_lines(&sources));
    compiled.expect("the example builds")
}

#[test]
fn compute_hosts_see_the_three_etcd_addresses() {
    let compiled = compile();
    let services = bellc_core::render::service_endpoints(&compiled.resolution);
    let etcd = &services["etcd"];
    let hosts: Vec<&str> = etcd.iter().map(|e| e.host.as_str()).collect();
    assert_eq!(hosts, ["ctl-01", "ctl-02", "ctl-03"]);
    assert!(etcd.iter().all(|e| e.port == Some(2379)));

    // The example's own template, rendered in the context templates get.
    let compute = compiled
        .resolution
        .hosts
        .iter()
        .find(|h| h.labels.get("role").map(String::as_str) == Some("compute"))
        .expect("a compute host");
    let file = compute
        .model
        .resources
        .iter()
        .find(|r| r.name == "/etc/myapp/etcd.conf")
        .expect("the etcd.conf file resource");
    let template = file.str("content").expect("content");
    let text = Renderer::new()
        .user_template(
            template,
            minijinja::context! { services => services, host => compute.name },
        )
        .expect("renders");
    assert_eq!(text, "endpoints=10.20.1.10,10.20.2.11,10.20.3.12\n");
}

#[test]
fn control_hosts_roll_out_first_and_racks_one_host_at_a_time() {
    let compiled = compile();
    let waves = &compiled.release.waves;
    let role: HashMap<&str, &str> = compiled
        .release
        .hosts
        .iter()
        .map(|(n, h)| (n.as_str(), h.labels["role"].as_str()))
        .collect();
    let wave_of = |host: &str| waves.iter().position(|w| w.iter().any(|h| h == host));
    let last_control = role
        .iter()
        .filter(|(_, r)| **r == "control")
        .filter_map(|(h, _)| wave_of(h))
        .max()
        .expect("control waves");
    let first_compute = role
        .iter()
        .filter(|(_, r)| **r == "compute")
        .filter_map(|(h, _)| wave_of(h))
        .min()
        .expect("compute waves");
    assert!(last_control < first_compute, "{waves:#?}");
    // max-unavailable=1: no two hosts of a rack in one wave.
    for wave in waves {
        let racks: Vec<&str> = wave
            .iter()
            .map(|h| compiled.release.hosts[h].labels["rack"].as_str())
            .collect();
        let mut unique = racks.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), racks.len(), "{wave:?}");
    }
    let planned: usize = waves.iter().map(Vec::len).sum();
    assert_eq!(planned, compiled.release.hosts.len());
}

//! Runtime `uses` that go round (load balancers need the controllers up, controllers need the
//! load balancers up) leave no rollout order; the build says so and suggests `runtime=#false`.

use crate::common::spec_dir::{build, frontend};

fn fleet(lb_uses: &str) -> String {
    format!(
        r#"
fleet "t" target="ubuntu-24.04"
host "lb-1" address="10.0.0.1" role="lb"
host "lb-2" address="10.0.0.2" role="lb"
host "ctl-1" address="10.0.1.1" role="control"
host "ctl-2" address="10.0.1.2" role="control"
host "app-1" address="10.0.2.1" role="app"
override "lb" {{
    match role="lb"
    service "lb" port=443
    {lb_uses}
}}
override "control" {{
    match role="control"
    service "api" port=6443
    uses "lb" count=2
}}
override "app" {{
    match role="app"
    uses "api" count=2
}}
"#
    )
}

#[test]
fn a_runtime_cycle_shows_the_cycle_and_the_way_out() {
    let b = build(&[("bell.kdl", &fleet(r#"uses "api" count=2"#))]);
    assert!(b.compiled.is_none());
    let short = b.short();
    assert_eq!(short.len(), 1, "{short:#?}");
    assert!(
        short[0].contains("error[bell::services::runtime_cycle]: runtime `uses` form a cycle between services: `api` → `lb` → `api`"),
        "{short:#?}"
    );
    let text = b.rendered();
    // Both `uses` lines are labelled.
    assert!(text.contains("providers of `lb` wait for `api`"), "{text}");
    assert!(text.contains("providers of `api` wait for `lb`"), "{text}");
    assert!(text.contains("such as `lb-1`"), "{text}");
    assert!(text.contains("runtime=#false"), "{text}");
}

#[test]
fn data_only_uses_break_the_cycle_and_order_the_rest() {
    let (front, diags, _dir) = frontend(&fleet(r#"uses "api" count=2 runtime=#false"#));
    assert!(!diags.has_errors(), "{diags:?}");
    let layers = front.layers.expect("layers");
    let layer_of = |name: &str| {
        let i = front
            .resolution
            .hosts
            .iter()
            .position(|h| h.name == name)
            .expect("host");
        layers.host_layer[i]
    };
    // lb first, then the controllers that use it, then the apps that use the controllers.
    assert_eq!(layer_of("lb-1"), 0);
    assert_eq!(layer_of("lb-2"), 0);
    assert_eq!(layer_of("ctl-1"), 1);
    assert_eq!(layer_of("ctl-2"), 1);
    assert_eq!(layer_of("app-1"), 2);
}

#[test]
fn peers_that_use_their_own_service_are_not_a_cycle() {
    let spec = r#"
fleet "t" target="ubuntu-24.04"
host "etcd-1" address="10.0.0.1" role="etcd"
host "etcd-2" address="10.0.0.2" role="etcd"
host "etcd-3" address="10.0.0.3" role="etcd"
override "etcd" {
    match role="etcd"
    service "etcd" port=2380
    uses "etcd" count=3
}
"#;
    let (front, diags, _dir) = frontend(spec);
    assert!(!diags.has_errors(), "{diags:?}");
    assert_eq!(front.layers.expect("layers").host_layer, vec![0, 0, 0]);
}

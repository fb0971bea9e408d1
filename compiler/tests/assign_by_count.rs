//! `assign`: labels the build gives hosts by count (the first N that match, spec hosts in the
//! order written, then accepted hosts in the order accepted) or to every other host; the
//! labels drive overrides like any; every mistake at once with its place. Discovery end to end
//! is `enroll_and_assign.rs`'s.

use crate::common::in_memory::{build, errors};

fn roles(text: &str) -> Vec<(String, String)> {
    let b = build(text);
    let compiled = b
        .compiled
        .unwrap_or_else(|| panic!("the spec does not build: {:#?}", b.diagnostics));
    compiled
        .release
        .hosts
        .iter()
        .map(|(name, h)| {
            (
                name.clone(),
                h.labels.get("role").cloned().unwrap_or_default(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_first_hosts_that_match_in_the_order_written_and_every_other_a_node() {
    let spec = r#"fleet "f" target="debian-12"
host "z" disk="ssd"
host "a" disk="hdd"
host "m" disk="ssd"
host "b" disk="ssd" role="db"
host "c" disk="ssd" role="control"
assign role="control" count=2 {
    match disk="ssd"
}
assign role="etcd" count=1 {
    match role="control"
}
assign role="node"
override "control" {
    match role="control"
    sysctl { vm.swappiness 1 }
}
"#;
    // c carries the label already and counts; z is the first written that matches; b keeps
    // its own role; a matches nothing counted and is a node. The etcd assign sees the labels
    // the ones before it gave, but a host has one value of a label: no host is left for it.
    let errs = errors(spec);
    assert!(
        errs.iter().any(|e| e.starts_with("bell.kdl:10:1:")
            && e.contains("`assign role=\"etcd\" count=1` needs 1 hosts matching role=\"control\"; 0 do: 1 missing")),
        "{errs:#?}"
    );
    let spec = spec.replace(
        "assign role=\"etcd\" count=1 {\n    match role=\"control\"\n}\n",
        "",
    );
    assert_eq!(
        roles(&spec),
        pairs(&[
            ("a", "node"),
            ("b", "db"),
            ("c", "control"),
            ("m", "node"),
            ("z", "control")
        ])
    );
    // The override matched the assigned label: both control hosts have the sysctl.
    let b = build(&spec);
    let release = b.compiled.expect("builds").release;
    assert_eq!(release.hosts["z"].bundle, release.hosts["c"].bundle);
    assert_ne!(release.hosts["z"].bundle, release.hosts["m"].bundle);
    assert_eq!(
        release.assignments,
        [bell_bundle::Assignment {
            label: "role".into(),
            value: "control".into(),
            count: 2,
            hosts: vec!["z".into()],
        }]
    );
    // A host written later takes no role from one written before.
    let more = spec.replace("host \"b\"", "host \"y\" disk=\"ssd\"\nhost \"b\"");
    let got = roles(&more);
    assert!(got.contains(&("z".into(), "control".into())), "{got:?}");
    assert!(got.contains(&("y".into(), "node".into())), "{got:?}");
}

#[test]
fn every_assign_mistake_at_once_with_its_place() {
    let errs = errors(
        r#"fleet "f" target="debian-12"
host "a" role="control"
host "b" role="control"
assign count=2
assign role="control" count=1
assign role="x" count="three"
assign role="y" zone="z"
assign host="a"
assign role="node" {
    when disk="ssd"
}
assign role="w" count=1 {
    match disk="nvme"
}
assign role="w" count=1
assign role="spare"
"#,
    );
    let has = |at: &str, says: &str| {
        assert!(
            errs.iter().any(|e| e.starts_with(at) && e.contains(says)),
            "no `{says}` at {at} in {errs:#?}"
        );
    };
    has("bell.kdl:4:1:", "`assign` is missing its required label");
    has(
        "bell.kdl:5:1:",
        "2 hosts carry `role=\"control\"` already, more than `count=1`",
    );
    has(
        "bell.kdl:6:17:",
        "`assign count` expects a count from 1 to 1000000",
    );
    has("bell.kdl:7:17:", "`assign` takes one label");
    has("bell.kdl:8:8:", "`host` is the host's name");
    has("bell.kdl:10:5:", "unknown node `when` inside `assign`");
    has(
        "bell.kdl:12:1:",
        "needs 1 hosts matching disk=\"nvme\"; 0 do: 1 missing",
    );
    has("bell.kdl:15:1:", "assign `role=w` is declared twice");
    has("bell.kdl:16:1:", "assign `role=spare` is declared twice");
    // One report for each mistake: no node dropped for a bad property clashes with another.
    assert_eq!(errs.len(), 9, "{errs:#?}");
}

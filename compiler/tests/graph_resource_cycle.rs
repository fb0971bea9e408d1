//! `after` edges that go round are an error that prints the cycle as a path, labels the `after`
//! lines involved and explains the implicit edges in words; an `after` naming a resource the
//! host does not have points at the reference with a suggestion.

use crate::common;
use crate::common::spec_dir::build;

const HEAD: &str = r#"fleet "t" target="ubuntu-24.04"
host "h1" address="10.0.0.1" role="web"
"#;

#[test]
fn an_explicit_cycle_is_printed_as_a_path() {
    let spec = format!(
        r#"{HEAD}limit "a" domain="*" type="soft" item="nofile" value=1 {{
    after "limit:c"
}}
limit "b" domain="*" type="soft" item="nproc" value=1 {{
    after "limit:a"
}}
limit "c" domain="*" type="soft" item="core" value=1 {{
    after "limit:b"
}}
"#
    );
    let b = build(&[("bell.kdl", &spec)]);
    assert!(b.compiled.is_none());
    let short = b.short();
    assert_eq!(short.len(), 1, "{short:#?}");
    assert!(
        short[0].contains(
            "error[bell::graph::cycle]: resources wait for each other in a cycle: `limit:a` → `limit:b` → `limit:c` → `limit:a`"
        ),
        "{short:#?}"
    );
    let text = b.rendered();
    for label in [
        "`limit:b` after `limit:a`",
        "`limit:c` after `limit:b`",
        "`limit:a` after `limit:c`",
    ] {
        assert!(text.contains(label), "missing label {label:?} in\n{text}");
    }
    // Each label sits on its `after` line (lines 4, 7 and 10).
    for line in [" 4 │", " 7 │", "10 │"] {
        assert!(text.contains(line), "missing line {line:?} in\n{text}");
    }
}

#[test]
fn a_cycle_through_an_implicit_edge_explains_it() {
    let spec = format!(
        r##"{HEAD}exec "001-first" {{
    script "#!/bin/sh\ntrue\n"
    after "exec:002-second"
}}
exec "002-second" {{
    script "#!/bin/sh\ntrue\n"
}}
"##
    );
    let b = build(&[("bell.kdl", &spec)]);
    let text = b.rendered();
    assert!(
        text.contains("`exec:001-first` → `exec:002-second` → `exec:001-first`"),
        "{text}"
    );
    assert!(
        text.contains(
            "scripts run in name order, so `exec:001-first` runs before `exec:002-second`"
        ),
        "{text}"
    );
    assert!(
        text.contains("`exec:001-first` after `exec:002-second`"),
        "{text}"
    );
}

/// Each dependency a kind implies is explained in that kind's words when it closes a cycle
/// (a nested mount cannot: `graph::resources` tests its words).
#[test]
fn every_implied_dependency_explains_itself() {
    let cases = [
        (
            r#"user "app" {
    after "file:/etc/app.env"
}
file "/etc/app.env" owner="app" {
    content "A=1\n"
}
"#,
            "`file:/etc/app.env` is owned by `user:app`, which must exist first",
        ),
        (
            r#"file "/etc/app.env" {
    content "A=1\n"
    after "unit:app.service"
}
unit "app.service" {
    content "[Service]\nEnvironmentFile=/etc/app.env\nExecStart=/usr/bin/app\n"
}
"#,
            "`unit:app.service` names the path of `file:/etc/app.env`, so the file is written first",
        ),
    ];
    for (resources, words) in cases {
        let b = build(&[("bell.kdl", &format!("{HEAD}{resources}"))]);
        let text = b.rendered();
        assert!(text.contains("bell::graph::cycle"), "{text}");
        assert!(text.contains(words), "missing {words:?} in\n{text}");
    }
}

#[test]
fn an_unknown_after_points_at_the_reference_with_a_suggestion() {
    let spec = format!(
        r#"{HEAD}sysctl {{
    net.ipv4.ip_forward 1
}}
limit "a" domain="*" type="soft" item="nofile" value=1 {{
    after "sysctl:net.ipv4.ip_froward"
}}
"#
    );
    let b = build(&[("bell.kdl", &spec)]);
    assert!(b.compiled.is_none());
    let short = b.short();
    assert_eq!(short.len(), 1, "{short:#?}");
    assert!(
        short[0].starts_with("bell.kdl:7:5: error[bell::graph::unknown_after]: `after` names `sysctl:net.ipv4.ip_froward`, which host `h1` does not have"),
        "{short:#?}"
    );
    let text = b.rendered();
    assert!(
        text.contains("did you mean `sysctl:net.ipv4.ip_forward`?"),
        "{text}"
    );
}

#[test]
fn explicit_edges_reach_the_manifest_in_apply_order() {
    let spec = format!(
        r#"{HEAD}sysctl {{
    "net/ipv4/conf/eth0.100/rp_filter" 2
    vm.swappiness 10
}}
limit "z" domain="*" type="soft" item="nofile" value=1
limit "a" domain="*" type="soft" item="nproc" value=1 {{
    after "limit:z" "sysctl:vm/swappiness"
}}
"#
    );
    let b = build(&[("bell.kdl", &spec)]);
    let compiled = b.compiled.as_ref().expect("builds");
    let bundle = compiled.bundles.values().next().expect("one bundle");
    let keys: Vec<String> = bundle.manifest.resources.iter().map(|r| r.key()).collect();
    assert_eq!(
        keys,
        [
            "sysctl:net/ipv4/conf/eth0.100/rp_filter",
            "sysctl:vm.swappiness",
            "limit:z",
            "limit:a"
        ]
    );
    let a = &bundle.manifest.resources[3];
    assert_eq!(a.after, ["sysctl:vm.swappiness", "limit:z"]);
    assert!(bundle.manifest.resources[2].after.is_empty());
}

#[test]
fn ordering_one_model_without_sources_reports_instead_of_panicking() {
    let spec = format!(
        r#"{HEAD}limit "a" domain="*" type="soft" item="nofile" value=1 {{
    after "limit:b"
}}
limit "b" domain="*" type="soft" item="nproc" value=1 {{
    after "limit:a"
}}
"#
    );
    let (front, diags, _dir) = common::spec_dir::frontend(&spec);
    assert!(diags.has_errors());
    let mut local = bellc_core::diagnostic::Diagnostics::new();
    let host = &front.resolution.hosts[0];
    assert!(bellc_core::graph::order(&host.model, &host.name, None, &mut local).is_none());
    let help: Vec<String> = local
        .iter()
        .filter_map(|d| d.help().map(|h| h.to_string()))
        .collect();
    assert_eq!(help.len(), 1);
    assert!(
        help[0].contains("`limit:b` has `after \"limit:a\"`;"),
        "{help:?}"
    );
}

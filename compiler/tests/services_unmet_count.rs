//! `uses "NAME" count=N` fails the build when fewer than N hosts provide NAME, and says which
//! hosts need it and which provide it.

use crate::common::spec_dir::build;

const FLEET: &str = r#"
fleet "t" target="ubuntu-24.04"
host "ctl-1" address="10.0.0.1" role="control"
host "ctl-2" address="10.0.0.2" role="control"
host "cmp-1" address="10.0.1.1" role="compute"
host "cmp-2" address="10.0.1.2" role="compute"
override "control" {
    match role="control"
    service "etcd" port=2379
}
"#;

#[test]
fn too_few_providers_name_consumers_and_providers() {
    let spec = format!(
        "{FLEET}override \"compute\" {{\n    match role=\"compute\"\n    uses \"etcd\" count=3\n}}\n"
    );
    let b = build(&[("bell.kdl", &spec)]);
    assert!(b.compiled.is_none());
    let short = b.short();
    assert_eq!(short.len(), 1, "{short:#?}");
    assert!(
        short[0].contains("bell.kdl:13:5: error[bell::services::unmet_count]")
            && short[0].contains("`etcd` needs 3 provider(s) but 2 host(s) provide it"),
        "{short:#?}"
    );
    let text = b.rendered();
    assert!(text.contains("needed by `cmp-1`, `cmp-2`"), "{text}");
    assert!(text.contains("providers found: `ctl-1`, `ctl-2`"), "{text}");
}

#[test]
fn a_misspelt_service_gets_a_suggestion() {
    let spec = format!(
        "{FLEET}override \"compute\" {{\n    match role=\"compute\"\n    uses \"etdc\"\n}}\n"
    );
    let text = build(&[("bell.kdl", &spec)]).rendered();
    assert!(text.contains("but 0 host(s) provide it"), "{text}");
    assert!(text.contains("did you mean `etcd`?"), "{text}");
}

#[test]
fn enough_providers_build_and_count_zero_needs_none() {
    let spec = format!(
        "{FLEET}override \"compute\" {{\n    match role=\"compute\"\n    uses \"etcd\" count=2\n    uses \"metrics\" count=0\n}}\n"
    );
    let b = build(&[("bell.kdl", &spec)]);
    assert!(b.compiled.is_some(), "{:#?}", b.short());
}

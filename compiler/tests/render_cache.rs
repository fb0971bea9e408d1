//! A rebuild renders only the hosts whose inputs changed: the others keep the bundle the last
//! build rendered for the same inputs (`OUT/.bell-rendered`), and the result is what a build
//! from scratch writes. A change every host sees renders every host, and so does a rebuild of
//! an OUT changed by hand.
use crate::common::*;
use bell_fleetgen::{FleetGen, Inventory, Shape};
use std::collections::BTreeMap;
use std::path::Path;

/// `bellc build --timings`: the timings line.
fn build(dir: &Path) -> serde_json::Value {
    bellc_in(dir, &["build", "--timings", "bell.kdl", "-o", "out"]).timings()
}

/// Every file a build of the spec from scratch writes is in OUT as it would write it.
fn as_from_scratch(dir: &Path) {
    let scratch = dir.join("scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let run = bellc_in(dir, &["build", "bell.kdl", "-o", "scratch"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: BTreeMap<String, Vec<u8>> = tree(&dir.join("out")).into_iter().collect();
    let fresh = tree(&scratch);
    assert!(fresh.len() > 60);
    for (rel, bytes) in fresh {
        if rel == bellc_core::emit::out_dir::RECORD_FILE {
            continue;
        }
        assert!(
            out.get(&rel) == Some(&bytes),
            "{rel} differs from a fresh build"
        );
    }
}

#[test]
fn a_rebuild_renders_only_the_hosts_whose_inputs_changed() {
    let gen = FleetGen {
        hosts: 40,
        seed: 3,
        shape: Shape::Unique,
        inventory: Inventory::Json,
    };
    let mut fx = Fixture::new();
    for (path, text) in gen.generate() {
        fx = fx.file(&path, &text);
    }
    let dir = fx.path();
    let cold = build(dir);
    assert_eq!(cold["groups_unrendered"], 0);
    assert_eq!(cold["bundles_written"], 40);

    // One host's own override changes: one host renders.
    let spec = dir.join("bell.kdl");
    let original = std::fs::read_to_string(&spec).expect("spec");
    let one = format!(
        "{original}\noverride \"one\" {{\n    match host=\"node-0007\"\n    sysctl {{ kernel.panic 30 }}\n}}\n"
    );
    std::fs::write(&spec, &one).expect("spec");
    let t = build(dir);
    assert_eq!(t["groups_unrendered"], 39, "{t}");
    assert_eq!(t["bundles_written"], 1, "{t}");
    as_from_scratch(dir);

    // What every host has changes: every host renders.
    std::fs::write(
        &spec,
        format!("{one}\nsysctl {{\n    kernel.panic_on_oops 1\n}}\n"),
    )
    .expect("spec");
    let t = build(dir);
    assert_eq!(t["groups_unrendered"], 0, "{t}");
    assert_eq!(t["bundles_written"], 40, "{t}");
    as_from_scratch(dir);

    // A bundle changed by hand: OUT is not as the last build left it, so nothing of it is
    // taken unrendered, and the bundle is repaired.
    let release: bell_bundle::Release = serde_json::from_str(
        &std::fs::read_to_string(dir.join("out/release.json")).expect("release"),
    )
    .expect("json");
    let victim = &release.hosts["node-0003"].bundle;
    let host_file = dir
        .join("out/bundles")
        .join(victim)
        .join("root/etc/bell-host");
    std::fs::remove_file(&host_file).expect("rm");
    std::fs::write(&host_file, "changed by hand\n").expect("write");
    let t = build(dir);
    assert_eq!(t["groups_unrendered"], 0, "{t}");
    as_from_scratch(dir);
    assert_eq!(
        std::fs::read_to_string(&host_file).expect("read"),
        "host=node-0003\naddress=10.0.0.3\n"
    );
}

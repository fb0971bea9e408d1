//! Rendering and writing run on every core, yet a build is byte-identical to a serial one; and
//! a change to one host rewrites exactly that host's bundle, its pointer and release.json.
use crate::common::*;
use bell_fleetgen::{FleetGen, Inventory, Shape};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn fleet(shape: Shape, hosts: usize) -> Fixture {
    let gen = FleetGen {
        hosts,
        seed: 11,
        shape,
        inventory: Inventory::Json,
    };
    let mut fx = Fixture::new();
    for (path, text) in gen.generate() {
        fx = fx.file(&path, &text);
    }
    fx
}

fn build_with_threads(fx: &Fixture, out: &str, threads: &str) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
        .args(["build", "bell.kdl", "-o", out])
        .current_dir(fx.path())
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .expect("bellc");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn parallel_and_serial_builds_are_byte_identical() {
    for (shape, hosts) in [(Shape::Shared, 1_000), (Shape::Unique, 200)] {
        let fx = fleet(shape, hosts);
        build_with_threads(&fx, "serial", "1");
        build_with_threads(&fx, "parallel", "4");
        let serial = tree(&fx.path().join("serial"));
        assert!(serial.len() > hosts, "{} entries", serial.len());
        assert_eq!(serial, tree(&fx.path().join("parallel")), "{shape:?}");
    }
}

/// Inode and modification time of every entry: what a rewrite would change. (Not the change
/// time: a new hard link to a shared store file changes the inode's ctime, not its content.)
fn stamps(out: &Path) -> BTreeMap<String, (u64, i64, i64)> {
    walkdir::WalkDir::new(out)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| {
            !e.file_type().is_dir()
                && e.file_name() != bellc_core::emit::out_dir::RECORD_FILE
                && e.file_name() != bellc_core::emit::out_dir::FINGERPRINT_FILE
                && e.file_name() != bellc_core::emit::out_dir::RENDER_CACHE_FILE
        })
        .map(|e| {
            let m = std::fs::symlink_metadata(e.path()).expect("meta");
            let rel = e
                .path()
                .strip_prefix(out)
                .expect("prefix")
                .to_string_lossy()
                .into_owned();
            (rel, (m.ino(), m.mtime(), m.mtime_nsec()))
        })
        .collect()
}

#[test]
fn a_one_host_change_rewrites_only_its_bundle_pointer_and_release() {
    let fx = fleet(Shape::Shared, 500);
    build_with_threads(&fx, "out", "2");
    let out = fx.path().join("out");
    let before = stamps(&out);
    let release: bell_bundle::Release =
        serde_json::from_str(&std::fs::read_to_string(out.join("release.json")).unwrap()).unwrap();
    let (host, old) = release
        .hosts
        .iter()
        .next()
        .map(|(h, r)| (h.clone(), r.bundle.clone()))
        .unwrap();
    let sharing = release.hosts.values().filter(|r| r.bundle == old).count();
    let before_version = release.version.clone();
    assert!(
        sharing > 1,
        "the host should share its bundle before the change"
    );

    std::thread::sleep(std::time::Duration::from_millis(20));
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap();
    std::fs::write(
        fx.path().join("bell.kdl"),
        format!("{spec}\noverride \"one\" {{\n    match host=\"{host}\"\n    sysctl {{ kernel.panic 30 }}\n}}\n"),
    )
    .unwrap();
    build_with_threads(&fx, "out", "2");
    let after = stamps(&out);
    let release: bell_bundle::Release =
        serde_json::from_str(&std::fs::read_to_string(out.join("release.json")).unwrap()).unwrap();
    let new = release.hosts[&host].bundle.clone();
    assert_ne!(new, old);

    let mut touched: Vec<String> = after
        .iter()
        .filter(|(rel, stamp)| before.get(*rel) != Some(stamp))
        .map(|(rel, _)| rel.split('/').take(2).collect::<Vec<_>>().join("/"))
        .collect();
    touched.dedup();
    // The store may gain the few contents that are new (the changed sysctl file and scripts).
    touched.retain(|rel| !rel.starts_with(".store/"));
    // The first release was kept when it was built; the new one is kept beside it.
    assert!(before.contains_key(&format!("releases/{before_version}.json")));
    assert_eq!(
        touched,
        [
            format!("bundles/{new}"),
            format!("hosts/{host}"),
            "release.json".to_string(),
            format!("releases/{}.json", release.version),
            format!("values/{new}.json"),
        ],
        "only the new bundle (and its values), the host's pointer and the release (kept beside the previous one) \
         are written"
    );
    // Nothing else went away either: the old bundle is still used by the other hosts.
    let removed: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert!(removed.is_empty(), "{removed:?}");
}

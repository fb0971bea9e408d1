//! `bellc build` renders and writes a chunk of hosts at a time and drops their bundles: what it
//! writes is byte-identical to a build held whole in memory, for the examples and for generated
//! fleets that span several chunks; and a build that fails in a late chunk takes back what its
//! earlier chunks wrote.
use crate::common::*;
use bell_fleetgen::{FleetGen, Inventory, Shape};
use std::path::Path;

/// OUT without the incremental record and fingerprint, which only `bellc build` writes.
fn output(dir: &Path) -> Vec<(String, Vec<u8>)> {
    tree(dir)
        .into_iter()
        .filter(|(rel, _)| rel != bellc_core::emit::out_dir::RECORD_FILE)
        .collect()
}

/// The key both builds seal with (the examples' own).
fn seal_key_file() -> std::path::PathBuf {
    repo_root().join("examples/keys/seal.key")
}

/// The whole fleet in memory, then written: the build as it was before it streamed.
fn build_in_memory(spec: &Path, out: &Path) {
    let mut sources = bellc_core::source::Sources::new();
    sources.open_secrets_with(example_secrets_identities());
    let mut diags = bellc_core::diagnostic::Diagnostics::new();
    // As `bellc build --seal-key FILE` takes the file's bytes.
    let key = bell_seal::SealKey::derive(
        &std::fs::read(seal_key_file()).unwrap(),
        "bellc secrets, from --seal-key",
    );
    let front = bellc_core::frontend(spec, &mut sources, &mut diags).expect("front end");
    let mut compiled =
        bellc_core::compile_frontend_sealed(front, &sources, &mut diags, Some(key.clone()))
            .expect("compiles");
    let sealed: bellc_core::emit::secrets::SealedContents = compiled
        .bundles
        .values()
        .filter(|b| !b.sealed.is_empty())
        .map(|b| (b.id.clone(), b.sealed.clone()))
        .collect();
    bellc_core::emit::secrets::write(out, &mut compiled.release, &sealed, &key, false)
        .expect("sealed");
    bellc_core::emit::write(out, &compiled.bundles, &compiled.release).expect("written");
}

/// `bellc build` on one thread: the smallest chunks, so a few hundred hosts are several.
fn build_streamed(dir: &Path, spec: &str, out: &str) -> Run {
    let key = seal_key_file();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
        .args(["build", spec, "-o", out, "--seal-key"])
        .arg(&key)
        .arg("--secrets-key")
        .arg(example_secrets_key())
        .current_dir(dir)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .expect("bellc");
    Run::from(output)
}

fn generated(shape: Shape, hosts: usize) -> Fixture {
    let gen = FleetGen {
        hosts,
        seed: 5,
        shape,
        inventory: Inventory::Json,
    };
    let mut fx = Fixture::new();
    for (path, text) in gen.generate() {
        fx = fx.file(&path, &text);
    }
    fx
}

#[test]
fn streamed_builds_equal_builds_in_memory() {
    let examples = repo_root().join("examples");
    let scratch = tempfile::tempdir().expect("tmp");
    for example in ["divingbell", "three-role"] {
        let streamed = scratch.path().join(format!("{example}-streamed"));
        let whole = scratch.path().join(format!("{example}-whole"));
        let run = build_streamed(
            &examples,
            &format!("{example}.kdl"),
            &streamed.to_string_lossy(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        build_in_memory(&examples.join(format!("{example}.kdl")), &whole);
        let streamed = output(&streamed);
        assert!(streamed.len() > 10, "{example}: {} entries", streamed.len());
        assert!(streamed == output(&whole), "{example}");
    }
    // 520 hosts of a bundle each are three chunks on one thread (256 groups each); the shared
    // fleet's few bundles are one.
    for (shape, hosts) in [
        (Shape::Unique, 520),
        (Shape::Templated, 520),
        (Shape::Shared, 2_000),
    ] {
        let fx = generated(shape, hosts);
        let run = build_streamed(fx.path(), "bell.kdl", "streamed");
        assert_eq!(run.code, 0, "{}", run.stderr);
        build_in_memory(&fx.path().join("bell.kdl"), &fx.path().join("whole"));
        let streamed = output(&fx.path().join("streamed"));
        assert!(
            streamed.len() > hosts,
            "{shape:?}: {} entries",
            streamed.len()
        );
        assert!(streamed == output(&fx.path().join("whole")), "{shape:?}");
    }
}

#[test]
fn a_build_that_fails_in_a_late_chunk_leaves_out_as_it_was() {
    let fx = generated(Shape::Unique, 520);
    let run = build_streamed(fx.path(), "bell.kdl", "out");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let before = output(&fx.path().join("out"));

    // Every host's bundle changes, and the last host's template fails: the chunks before it
    // were written by then.
    let spec = fx.path().join("bell.kdl");
    let original = std::fs::read_to_string(&spec).expect("spec");
    std::fs::write(
        &spec,
        format!(
            "{original}\nsysctl {{\n    kernel.panic 17\n}}\noverride \"late\" {{\n    match host=\"node-0520\"\n    file \"/etc/late\" {{\n        content \"{{{{ no_such_thing.at_all }}}}\"\n    }}\n}}\n"
        ),
    )
    .expect("spec");
    let run = build_streamed(fx.path(), "bell.kdl", "out");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("bell::render::template") && run.stderr.contains("node-0520"),
        "{}",
        run.stderr
    );
    assert!(
        output(&fx.path().join("out")) == before,
        "a failed build changed OUT"
    );
    // Into a new OUT, the earlier chunks' hosts were linked as they were written (on a
    // thread of their own): the failed build takes those links back with the bundles.
    let run = build_streamed(fx.path(), "bell.kdl", "cold");
    assert_eq!(run.code, 1, "{}", run.stderr);
    let cold = fx.path().join("cold");
    assert!(
        cold.join("hosts").is_dir(),
        "the earlier chunks were written"
    );
    let left: Vec<String> = output(&cold)
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|rel| rel.starts_with("hosts/") || rel.starts_with("bundles/"))
        .collect();
    assert!(left.is_empty(), "a failed cold build left {left:?}");

    // Without the mistake, the same change builds, and OUT holds what a build in memory
    // writes (and the release it replaced, with its bundles).
    std::fs::write(
        &spec,
        format!("{original}\nsysctl {{\n    kernel.panic 17\n}}\n"),
    )
    .expect("spec");
    let run = build_streamed(fx.path(), "bell.kdl", "out");
    assert_eq!(run.code, 0, "{}", run.stderr);
    build_in_memory(&spec, &fx.path().join("whole"));
    let out: std::collections::BTreeMap<String, Vec<u8>> =
        output(&fx.path().join("out")).into_iter().collect();
    let whole = output(&fx.path().join("whole"));
    assert!(whole.len() > 520);
    for (rel, bytes) in whole {
        assert!(out.get(&rel) == Some(&bytes), "{rel} differs");
    }
}

/// The templated shape gives every host the file the unique shape writes into its host
/// override, from one template: every bundle differs, and each host's file is the same text.
#[test]
fn templated_hosts_get_the_files_unique_hosts_are_given() {
    let file_by_host = |shape| {
        let fx = generated(shape, 60);
        let (compiled, lines) = compile_path(&fx.path().join("bell.kdl"), Some(fx.path()));
        let compiled = compiled.unwrap_or_else(|| panic!("{shape:?}: {}", lines.join("\n")));
        assert_eq!(compiled.bundles.len(), 60, "{shape:?}: a bundle per host");
        compiled
            .release
            .hosts
            .iter()
            .map(|(name, host)| {
                let bundle = &compiled.bundles[&host.bundle];
                (name.clone(), file(bundle, "/etc/bell-host"))
            })
            .collect::<Vec<_>>()
    };
    let templated = file_by_host(Shape::Templated);
    assert_eq!(templated, file_by_host(Shape::Unique));
    let (name, text) = &templated[7];
    assert!(
        text.starts_with(&format!("host={name}\naddress=10.")),
        "{text:?}"
    );
}

//! A spec given as text, built in memory (as `bell.kdl`, no directory), for tests of rendered
//! bundles and diagnostics; and the examples, built from disk.

use bellc_core::diagnostic::Diagnostics;
use bellc_core::render::RenderedBundle;
use bellc_core::source::Sources;
use std::path::{Path, PathBuf};

pub struct Build {
    pub compiled: Option<bellc_core::Compiled>,
    /// `bell.kdl:LINE:COL: severity[code]: message`, one per diagnostic.
    pub diagnostics: Vec<String>,
}

impl Build {
    /// The lines that hold an error, in line order, each once.
    #[allow(dead_code)] // Not every test binary that shares this module asks.
    pub fn error_lines(&self) -> Vec<usize> {
        let mut lines: Vec<usize> = self
            .diagnostics
            .iter()
            .filter(|d| d.contains(": error["))
            .filter_map(|d| d.split(':').nth(1)?.parse().ok())
            .collect();
        lines.sort_unstable();
        lines.dedup();
        lines
    }
}

/// Builds `text` as a trial does, with secrets in the bundle in the clear, unless it says
/// `secrets=`: these tests read rendered scripts and files, and their hosts have no identities
/// (sealing has tests of its own).
pub fn build(text: &str) -> Build {
    let mut sources = Sources::new();
    let file = sources.add(Path::new("bell.kdl"), text.to_string());
    let mut diags = Diagnostics::new();
    let mut spec = bellc_core::front::lower::lower_root(file, &mut sources, &mut diags);
    let trial = !text.contains("secrets=");
    if trial && spec.fleet.secrets_plaintext.is_none() {
        spec.fleet.secrets_plaintext = spec.fleet.span;
    }
    let front = bellc_core::analyse(spec, &sources, &mut diags);
    let compiled = if diags.has_errors() {
        None
    } else {
        bellc_core::compile_frontend_sealed(
            front,
            &sources,
            &mut diags,
            Some(super::test_seal_key()),
        )
    };
    Build {
        compiled,
        diagnostics: diags.to_short_lines(&sources),
    }
}

/// The bundle of `host`, failing the test with the diagnostics when the spec does not build.
pub fn bundle(text: &str, host: &str) -> RenderedBundle {
    let b = build(text);
    let Some(compiled) = b.compiled else {
        panic!("the spec does not build: {:#?}", b.diagnostics);
    };
    let id = &compiled.release.hosts[host].bundle;
    compiled.bundles[id].clone()
}

/// The diagnostics of a spec that must not build.
pub fn errors(text: &str) -> Vec<String> {
    let b = build(text);
    assert!(b.compiled.is_none(), "the spec builds, but it should not");
    b.diagnostics
}

/// The text of a bundle file by its path in the bundle (`scripts/user/alice.apply`).
pub fn text(bundle: &RenderedBundle, path: &str) -> String {
    let bytes = bundle
        .contents
        .get(path)
        .unwrap_or_else(|| panic!("no {path} in the bundle: {:?}", bundle.contents.keys()));
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// Whether the test runs as root (needed to chown files in a temp root); under CI it must.
pub fn is_root() -> bool {
    bell_testkit::root()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&path, text).expect("write");
    path
}

/// Every bundle of an example, compiled from disk.
pub fn example(name: &str) -> bellc_core::Compiled {
    let path = super::repo_root().join("examples").join(name);
    let (compiled, lines) = super::compile_path(&path, None);
    compiled.unwrap_or_else(|| panic!("{name} does not build: {lines:#?}"))
}

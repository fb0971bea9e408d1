//! A spec written into a temporary directory and compiled from there, with the diagnostics the
//! way a user sees them (for the graph, services and rollout tests).

use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;
use std::path::{Path, PathBuf};

pub struct Build {
    pub dir: tempfile::TempDir,
    pub sources: Sources,
    pub diags: Diagnostics,
    pub compiled: Option<bellc_core::Compiled>,
}

impl Build {
    /// `file:line:col: severity[code]: message` per diagnostic.
    pub fn short(&self) -> Vec<String> {
        self.diags.to_short_lines(&self.sources)
    }

    /// Every diagnostic rendered as miette prints it, without colours, on long lines (so that assertions do not depend on wrapping).
    pub fn rendered(self) -> String {
        let handler =
            miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
                .with_width(1000);
        let mut out = String::new();
        for report in self.diags.into_reports(&self.sources) {
            handler
                .render_report(&mut out, report.as_ref())
                .expect("rendering into a string cannot fail");
        }
        out
    }
}

pub fn spec_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, text) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("spec directory");
        }
        std::fs::write(path, text).expect("spec file");
    }
    dir
}

/// Compiles `bell.kdl` (and any other files) written into a fresh directory.
pub fn build(files: &[(&str, &str)]) -> Build {
    let dir = spec_dir(files);
    let mut sources = Sources::with_base(dir.path().to_path_buf());
    let mut diags = Diagnostics::new();
    let compiled = bellc_core::compile(&dir.path().join("bell.kdl"), &mut sources, &mut diags);
    Build {
        dir,
        sources,
        diags,
        compiled,
    }
}

/// Only lowering, resolution, the graphs and the service checks.
pub fn frontend(text: &str) -> (bellc_core::Frontend, Diagnostics, tempfile::TempDir) {
    let dir = spec_dir(&[("bell.kdl", text)]);
    let mut sources = Sources::with_base(dir.path().to_path_buf());
    let mut diags = Diagnostics::new();
    let front = bellc_core::frontend(&dir.path().join("bell.kdl"), &mut sources, &mut diags)
        .expect("the spec lowers");
    (front, diags, dir)
}

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

pub fn bellc() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
}

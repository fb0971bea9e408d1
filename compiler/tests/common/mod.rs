//! Shared test harness: specs written into temporary directories, and the real `bellc`
//! binary run on them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory holding a spec and whatever files it refers to.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A fixture with `bell.kdl` holding `spec`.
    pub fn spec(spec: &str) -> Fixture {
        Fixture::new().file("bell.kdl", spec)
    }

    pub fn file(self, path: &str, content: &str) -> Fixture {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, content).expect("write");
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `bellc ARGS` in the fixture directory.
    pub fn bellc(&self, args: &[&str]) -> Run {
        bellc_in(self.path(), args)
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Diagnostic lines of `--short` output (`file:line:col: severity[code]: message`).
    pub fn diagnostics(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(": error[") || l.contains(": warning["))
            .collect()
    }
}

pub fn bellc_in(dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_bellc"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .output()
        .expect("run bellc");
    let run = Run::from(output);
    assert!(
        !run.stderr.contains("panicked"),
        "bellc panicked:\n{}",
        run.stderr
    );
    run
}

/// The repository root (for examples/ and snapshots/).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every file under `dir` with its bytes, symlinks as their targets, for tree comparisons.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.expect("walk");
        let rel = entry
            .path()
            .strip_prefix(dir)
            .expect("prefix")
            .to_string_lossy()
            .into_owned();
        let ft = entry.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(entry.path()).expect("readlink");
            out.push((rel, format!("-> {}", target.display()).into_bytes()));
        } else if ft.is_file() {
            out.push((rel, std::fs::read(entry.path()).expect("read")));
        }
    }
    out
}

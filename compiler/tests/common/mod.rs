//! The one helper module of the compiler's tests: specs written into temporary directories and
//! the real `bellc` binary run on them; compiling a spec and reaching into its bundles; running
//! a rendered script the way bell-run does; and finding the real tools (a missing tool skips the
//! test with a note, and fails it when `CI=true`). Beside it, by what a test builds from:
//! [`in_memory`] (spec text, no directory), [`spec_dir`] (files in a temporary directory, with
//! rendered diagnostics) and [`fleet`] (bell-run and a real etcd).
#![allow(dead_code)]

pub mod alerting;
pub mod enrolling;
pub mod fleet;
pub mod in_memory;
pub mod netns;
pub mod pulling;
pub mod sealing;
pub mod serving;
pub mod spec_dir;

use bellc_core::diagnostic::Diagnostics;
use bellc_core::render::RenderedBundle;
use bellc_core::source::Sources;
use bellc_core::Compiled;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory holding a spec and whatever files it refers to.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    /// Given to every `bellc` run after the test's own (the examples' `--secrets-key`).
    pub global_args: Vec<&'static str>,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
            global_args: Vec::new(),
        }
    }

    /// The example `name` as `spec` in a fixture of its own (see [`copy_example`]); every
    /// `bellc` run is given its build key.
    pub fn example(name: &str, spec: &str) -> Fixture {
        let mut fx = Fixture::new();
        copy_example(fx.path(), name, spec);
        fx.global_args = EXAMPLE_KEY.to_vec();
        fx
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
        bellc_in(self.path(), &[args, &self.global_args].concat())
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The `timings: {...}` line of a successful `bellc build --timings`, parsed.
    pub fn timings(&self) -> serde_json::Value {
        assert_eq!(self.code, 0, "{}", self.stderr);
        let line = self
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("timings: "))
            .expect("a timings line");
        serde_json::from_str(line).expect("the timings line is JSON")
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
        // Reports are compared as text: no colour, 80 columns, and a UTF-8 terminal pinned so
        // miette's unicode detection reads the same on every machine.
        .env("NO_COLOR", "1")
        .env("COLUMNS", "80")
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("LC_CTYPE", "C.UTF-8")
        // What bellc remembers of the reports it verified stays with the test.
        .env("BELLC_STATE_DIR", dir.join("bellc-state"))
        .env_remove("CI")
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

/// The value a test driver printed as `LABEL=VALUE` (a script run under `unshare` that echoes
/// each step's exit status), failing the test with the whole output when it has none.
pub fn value_of(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{label}=")))
        .unwrap_or_else(|| panic!("no {label} in:\n{out}"))
        .to_string()
}

/// Runs `driver` (sh) in `dir` inside a private mount namespace (`unshare --mount`), so what
/// it mounts is gone when it ends; its output, the test failed with all of it when it fails.
pub fn in_mount_namespace(dir: &Path, driver: &str) -> String {
    std::fs::write(dir.join("driver.sh"), driver).expect("write driver");
    let out = Command::new("unshare")
        .args(["--mount", "sh", "driver.sh"])
        .current_dir(dir)
        .output()
        .expect("run unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "driver failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The lines a test driver printed as `LABEL: LINE`, each without its label.
pub fn labelled(out: &str, label: &str) -> Vec<String> {
    let prefix = format!("{label}: ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_string)
        .collect()
}

/// The repository root (for examples/ and snapshots/).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every file under `dir` with its bytes, symlinks as their targets, for tree comparisons.
/// The incremental-build record (absolute paths of this machine) is not part of the output.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    // Everything, the record of inputs (`.bell-inputs.json`) included: OUT must not depend on
    // where the spec lives. The fingerprint of OUT's inodes and times, and the render cache
    // (which names bellc's build), are the exceptions.
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.expect("walk");
        if entry.file_name() == bellc_core::emit::out_dir::FINGERPRINT_FILE
            || entry.file_name() == bellc_core::emit::out_dir::RENDER_CACHE_FILE
        {
            continue;
        }
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

/// Whether `tool` is installed; under CI a missing tool fails the test (see `bell_testkit`).
pub fn have(tool: &str) -> bool {
    bell_testkit::tool(tool)
}

/// Compiles `spec` (written as `bell.kdl` in a temp dir) and returns the result and the
/// diagnostics as `file:line:col: severity[code]: message` lines. Unless it says `secrets=`,
/// it is built as a trial is, secrets in the bundle in the clear (these tests read rendered
/// scripts; their hosts have no identities).
pub fn compile(spec: &str) -> (Option<Compiled>, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bell.kdl");
    std::fs::write(&path, spec).expect("write spec");
    compile_with(&path, Some(dir.path()), !spec.contains("secrets="))
}

/// Compiles the spec at `path` as `bellc build` does, its secrets named and sealed with
/// [`test_seal_key`].
pub fn compile_path(path: &Path, base: Option<&Path>) -> (Option<Compiled>, Vec<String>) {
    compile_with(path, base, false)
}

/// The examples' build key (`examples/keys/secrets.key`, public like every example key), as a
/// file only its owner can read: `--secrets-key` takes no other, and git keeps no modes.
pub fn example_secrets_key() -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    static KEY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let text = std::fs::read(repo_root().join("examples/keys/secrets.key")).expect("key");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join("example-secrets.key");
        // Written aside and renamed: test processes run at once and share the file.
        let aside = dir.join(format!("example-secrets.key.{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&aside)
            .expect("write the key");
        std::io::Write::write_all(&mut file, &text).expect("write the key");
        std::fs::rename(&aside, &path).expect("rename the key");
        path
    })
    .clone()
}

/// The examples' build key as the core's builds take it.
pub fn example_secrets_identities() -> Vec<bell_seal::at_rest::Identity> {
    let text = std::fs::read_to_string(repo_root().join("examples/keys/secrets.key")).unwrap();
    bell_seal::at_rest::Identity::parse_file(&text).expect("the example key parses")
}

/// Copies the example `name` (`three-role`, `divingbell`) into `dir` as `spec`, with what it
/// reads: its inventory, `secrets.kdl` and the encrypted files, and its build key as
/// `secrets.key` (owner-only): give `--secrets-key secrets.key`.
pub fn copy_example(dir: &Path, name: &str, spec: &str) {
    let examples = repo_root().join("examples");
    let mut files = vec![
        (format!("{name}.kdl"), spec.to_string()),
        ("secrets.kdl".into(), "secrets.kdl".into()),
    ];
    if name == "three-role" {
        let inventory = "inventory/three-role.json".to_string();
        files.push((inventory.clone(), inventory));
    }
    for entry in std::fs::read_dir(examples.join("secrets")).expect("examples/secrets") {
        let name = format!(
            "secrets/{}",
            entry.expect("entry").file_name().to_string_lossy()
        );
        files.push((name.clone(), name));
    }
    for (from, to) in files {
        let to = dir.join(to);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(examples.join(from), to).expect("copy");
    }
    std::fs::copy(example_secrets_key(), dir.join("secrets.key")).expect("copy the key");
}

/// What opens the examples' secrets from a directory [`copy_example`] wrote.
pub const EXAMPLE_KEY: [&str; 2] = ["--secrets-key", "secrets.key"];

/// The key tests seal with: the same for every build, as a CI's is.
pub fn test_seal_key() -> bell_seal::SealKey {
    bell_seal::SealKey::derive(b"bellc's tests", "the key tests seal with")
}

fn compile_with(path: &Path, base: Option<&Path>, trial: bool) -> (Option<Compiled>, Vec<String>) {
    let mut sources = match base {
        Some(b) => Sources::with_base(b.to_path_buf()),
        None => Sources::new(),
    };
    // The examples' secrets open; other specs' encrypted files are for their own tests.
    sources.open_secrets_with(example_secrets_identities());
    let mut diags = Diagnostics::new();
    let compiled = bellc_core::frontend(path, &mut sources, &mut diags).and_then(|mut front| {
        if diags.has_errors() {
            bellc_core::template_errors(front, &sources, &mut diags);
            return None;
        }
        if trial && front.spec.fleet.secrets_plaintext.is_none() {
            front.spec.fleet.secrets_plaintext = front.spec.fleet.span;
        }
        bellc_core::compile_frontend_sealed(front, &sources, &mut diags, Some(test_seal_key()))
    });
    (compiled, diags.to_short_lines(&sources))
}

pub fn compile_ok(spec: &str) -> Compiled {
    let (compiled, lines) = compile(spec);
    match compiled {
        Some(c) => c,
        None => panic!("spec does not compile:\n{}", lines.join("\n")),
    }
}

/// The only bundle of a one-host fleet.
pub fn only_bundle(c: &Compiled) -> &RenderedBundle {
    assert_eq!(c.bundles.len(), 1, "expected one bundle");
    c.bundles.values().next().expect("one bundle")
}

/// The text of a bundle's script for `kind:name`'s `role` (`apply`/`revert`).
/// The `role` script (check or apply) of batch `name`.
pub fn batch_script(b: &RenderedBundle, name: &str, role: &str) -> String {
    let batch = b.manifest.batches.iter().find(|x| x.name == name);
    let batch = batch.unwrap_or_else(|| panic!("no batch {name}"));
    let s = match role {
        "apply" => batch.apply.as_ref(),
        _ => Some(&batch.check),
    };
    let s = s.unwrap_or_else(|| panic!("batch {name} has no {role} script"));
    String::from_utf8(b.contents[&s.path].to_vec()).expect("utf-8 script")
}

pub fn script(b: &RenderedBundle, kind: &str, name: &str, role: &str) -> String {
    let r = b
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == kind && r.name == name)
        .unwrap_or_else(|| panic!("no resource {kind}:{name}"));
    // A resource of a batch is checked by the batch's one script.
    let batch = r.batch.as_ref().and_then(|name| {
        let batches = &b.manifest.batches;
        batches.iter().find(|x| &x.name == name).map(|x| &x.check)
    });
    let s = match role {
        "apply" => r.apply.as_ref(),
        "check" => r.check.as_ref().or(batch),
        _ => r.revert.as_ref(),
    }
    .unwrap_or_else(|| panic!("{kind}:{name} has no {role} script"));
    String::from_utf8(b.contents[&s.path].to_vec()).expect("utf-8 script")
}

/// The content of a managed file.
pub fn file(b: &RenderedBundle, path: &str) -> String {
    String::from_utf8(b.contents[&format!("root{path}")].to_vec()).expect("utf-8 file")
}

/// Runs a script as bell-run does: `sh SCRIPT` with BELL_ROOT, BELL_STATE and BELL_OFFLINE.
pub fn run(text: &str, root: &Path, state: &Path, offline: bool) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    run_in(text, root, state, offline, dir.path())
}

/// [`run`] with the script in `dir`, its working directory (as bell-run runs a script in its
/// bundle): where a command a hostile name smuggled in would leave its traces.
pub fn run_in(text: &str, root: &Path, state: &Path, offline: bool, dir: &Path) -> Output {
    let path = dir.join("script");
    std::fs::write(&path, text).expect("write script");
    Command::new("sh")
        .arg(&path)
        .current_dir(dir)
        .env("BELL_ROOT", root)
        .env("BELL_STATE", state)
        .env("BELL_OFFLINE", if offline { "1" } else { "0" })
        .output()
        .expect("run sh")
}

pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "script failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Every file under `dir` with its content, for asserting that a step changed nothing.
pub fn snapshot_tree(dir: &Path) -> Vec<(String, Vec<u8>, Option<std::time::SystemTime>)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.expect("walk");
        let meta = entry.path().symlink_metadata().expect("metadata");
        let content = if meta.is_file() {
            std::fs::read(entry.path()).expect("read")
        } else {
            Vec::new()
        };
        out.push((
            entry.path().display().to_string(),
            content,
            meta.modified().ok(),
        ));
    }
    out
}

/// The row of `host` in a `bellc status --json` answer (its `hosts` array); fails naming the
/// host when there is none.
pub fn row(status: &serde_json::Value, host: &str) -> serde_json::Value {
    status["hosts"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["host"] == host))
        .unwrap_or_else(|| panic!("no row for {host} in {status:#}"))
        .clone()
}

/// Runs a batch's script as bell-run does: `BELL_STATE` the batch's, and two arguments per
/// resource, its `KIND:NAME` and its own state directory.
pub fn run_batch(
    text: &str,
    root: &Path,
    state: &Path,
    resources: &[(&str, &Path)],
    offline: bool,
) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("script");
    std::fs::write(&path, text).expect("write script");
    let mut cmd = Command::new("sh");
    cmd.arg(&path);
    for (key, state) in resources {
        cmd.arg(key).arg(state);
    }
    cmd.current_dir(dir.path())
        .env("BELL_ROOT", root)
        .env("BELL_STATE", state)
        .env("BELL_OFFLINE", if offline { "1" } else { "0" })
        .output()
        .expect("run sh")
}

/// Makes every host labelled `role="web"` a provider of `web` (port 8080) whose health probe
/// fails while `$BELL_ROOT/sick` exists: the providers of the live layer's tests.
pub const WEB_PROVIDERS: &str = r##"override "web" {
    match role="web"
    service "web" port=8080
    health "http" retries=1 offline="root" {
        run "test ! -e \"$BELL_ROOT/sick\""
    }
}
"##;

//! Test helpers: temporary directories, a bundle builder on bell-bundle's own types, a runner
//! for the real binary, and tree snapshots.
#![allow(dead_code)]

use bell_bundle::{sha256_hex, ExecPolicy, File, Manifest, Resource, Script, Trigger};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bell-run under test: this build's, or the one `BELL_RUN_BIN` names (`.ci/test` runs
/// every test with the static release binary that hosts get).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("BELL_RUN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_bell-run").into())
    })
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn tempdir() -> TempDir {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir =
        std::env::temp_dir().join(format!("bell-run-test-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir.canonicalize().unwrap())
}

/// A test world: a root with the account databases (etc/passwd, group, shadow), a place for
/// bundles, and an event log
/// that test scripts append to.
pub struct World {
    pub tmp: TempDir,
}

impl World {
    pub fn new() -> World {
        let tmp = tempdir();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1001::/home/alice:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            root.join("etc/group"),
            "root:x:0:\nstaff:x:1001:\nadm:x:4:\n",
        )
        .unwrap();
        std::fs::write(
            root.join("etc/shadow"),
            "root:*:19000:0:99999:7:::\nalice:!:19000:0:99999:7:::\n",
        )
        .unwrap();
        std::fs::create_dir_all(tmp.path().join("bundles")).unwrap();
        World { tmp }
    }

    pub fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub fn events_path(&self) -> PathBuf {
        self.tmp.path().join("events")
    }

    /// Lines the test scripts appended with `event`.
    pub fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.events_path())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    pub fn clear_events(&self) {
        let _ = std::fs::remove_file(self.events_path());
    }

    /// A shell line that appends `text` to the event log.
    pub fn event(&self, text: &str) -> String {
        format!("echo '{text}' >> '{}'\n", self.events_path().display())
    }

    pub fn build(&self, bundle: &BundleSpec) -> PathBuf {
        bundle.write(&self.tmp.path().join("bundles"))
    }

    /// `build` for a bundle that does not verify.
    pub fn build_unverified(&self, bundle: &BundleSpec) -> PathBuf {
        bundle.write_unverified(&self.tmp.path().join("bundles"))
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        // Under `timeout`, so that a bell-run that hangs (on a FIFO, say) fails its test with
        // exit 124 instead of hanging the suite.
        let mut cmd = Command::new("timeout");
        cmd.arg("120").arg(bin()).args(args);
        cmd.env_remove("BELL_RUN_FAILPOINT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// `bell-run apply BUNDLE --root ROOT` plus `extra`.
    pub fn apply(&self, bundle: &Path, extra: &[&str]) -> Output {
        self.apply_env(bundle, extra, &[])
    }

    pub fn apply_env(&self, bundle: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let root = self.root();
        let mut args = vec![
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.run_env(&args, env)
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// Asserts an exit code, showing the output when it is not.
pub fn expect_code(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// How a test script starts to be marked `live_only` in the manifest.
pub const LIVE_ONLY: &str = "#!/bin/sh\n# live only\n";

#[derive(Clone)]
pub struct FileSpec {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: String,
    pub owner: String,
    pub group: String,
}

#[derive(Clone, Default)]
pub struct ResourceSpec {
    pub kind: String,
    pub name: String,
    pub files: Vec<String>,
    pub after: Vec<String>,
    /// Ordering-only edges: a failure there does not skip this one.
    pub order_after: Vec<String>,
    pub apply: Option<String>,
    pub revert: Option<String>,
    pub check: Option<String>,
    /// The batch whose check reads it back (see `BundleSpec::batch`).
    pub batch: Option<String>,
    pub exec: Option<ExecPolicy>,
    /// Takes effect at the next boot: checked after its apply too.
    pub at_boot: bool,
}

impl ResourceSpec {
    pub fn new(kind: &str, name: &str) -> ResourceSpec {
        ResourceSpec {
            kind: kind.to_string(),
            name: name.to_string(),
            ..ResourceSpec::default()
        }
    }
    pub fn files(mut self, files: &[&str]) -> Self {
        self.files = files.iter().map(|s| s.to_string()).collect();
        self
    }
    pub fn after(mut self, after: &[&str]) -> Self {
        self.after = after.iter().map(|s| s.to_string()).collect();
        self
    }
    pub fn apply(mut self, script: &str) -> Self {
        self.apply = Some(script.to_string());
        self
    }
    pub fn revert(mut self, script: &str) -> Self {
        self.revert = Some(script.to_string());
        self
    }
    pub fn check(mut self, script: &str) -> Self {
        self.check = Some(script.to_string());
        self
    }
    pub fn at_boot(mut self) -> Self {
        self.at_boot = true;
        self
    }
    pub fn in_batch(mut self, batch: &str) -> Self {
        self.batch = Some(batch.to_string());
        self
    }
    pub fn exec(mut self, script: &str, policy: ExecPolicy) -> Self {
        self.apply = Some(script.to_string());
        self.exec = Some(policy);
        self
    }
}

#[derive(Clone, Default)]
pub struct BundleSpec {
    pub files: Vec<FileSpec>,
    pub resources: Vec<ResourceSpec>,
    pub triggers: Vec<(String, Vec<String>, String)>,
    /// Health probes: name, script, retries, interval and timeout in seconds.
    pub probes: Vec<(String, String, u32, u64, u64)>,
    /// Batches: name and check script.
    pub batches: Vec<(String, String)>,
    /// Batches' apply scripts, by batch name.
    pub batch_applies: Vec<(String, String)>,
    /// Repository snapshots by apt source name.
    pub snapshots: bell_bundle::Snapshots,
    /// How the host reboots (without hooks: this builder ships no scripts for them).
    pub reboot: Option<bell_bundle::Reboot>,
}

impl BundleSpec {
    pub fn new() -> BundleSpec {
        BundleSpec::default()
    }

    pub fn file(self, path: &str, content: &str, mode: &str) -> Self {
        self.file_owned(path, content, mode, "root", "root")
    }

    pub fn file_owned(
        mut self,
        path: &str,
        content: &str,
        mode: &str,
        owner: &str,
        group: &str,
    ) -> Self {
        self.files.push(FileSpec {
            path: path.to_string(),
            content: content.as_bytes().to_vec(),
            mode: mode.to_string(),
            owner: owner.to_string(),
            group: group.to_string(),
        });
        self
    }

    pub fn resource(mut self, resource: ResourceSpec) -> Self {
        self.resources.push(resource);
        self
    }

    /// Records that apt source `source` reads repository snapshot `snapshot`.
    pub fn snapshot(mut self, source: &str, snapshot: &str) -> Self {
        self.snapshots
            .insert(source.to_string(), snapshot.to_string());
        self
    }

    /// A check shared by the resources `in_batch(name)`.
    pub fn batch(mut self, name: &str, check: &str) -> Self {
        self.batches.push((name.to_string(), check.to_string()));
        self
    }

    /// An apply for the due resources of batch `name` together.
    pub fn batch_apply(mut self, name: &str, apply: &str) -> Self {
        self.batch_applies
            .push((name.to_string(), apply.to_string()));
        self
    }

    pub fn trigger(mut self, name: &str, paths: &[&str], script: &str) -> Self {
        self.triggers.push((
            name.to_string(),
            paths.iter().map(|s| s.to_string()).collect(),
            script.to_string(),
        ));
        self
    }

    /// A health probe with a 10 s timeout.
    pub fn probe(self, name: &str, script: &str, retries: u32, interval: u64) -> Self {
        self.probe_timeout(name, script, retries, interval, 10)
    }

    pub fn probe_timeout(
        mut self,
        name: &str,
        script: &str,
        retries: u32,
        interval: u64,
        timeout: u64,
    ) -> Self {
        let probe = (
            name.to_string(),
            script.to_string(),
            retries,
            interval,
            timeout,
        );
        self.probes.push(probe);
        self
    }

    pub fn manifest_and_scripts(&self) -> (Manifest, BTreeMap<String, Vec<u8>>) {
        let mut scripts = BTreeMap::new();
        let mut script = |rel: String, text: &str| {
            scripts.insert(rel.clone(), text.as_bytes().to_vec());
            Script {
                path: rel,
                sha256: sha256_hex(text.as_bytes()),
                size: Some(text.len() as u64),
                secret: false,
                sealed: false,
                // As bellc marks its stdlib scripts: said on the second line.
                live_only: text.starts_with(LIVE_ONLY),
            }
        };
        let mut files: Vec<File> = self
            .files
            .iter()
            .map(|f| File {
                path: f.path.clone(),
                sha256: sha256_hex(&f.content),
                size: Some(f.content.len() as u64),
                mode: f.mode.clone(),
                owner: f.owner.clone(),
                group: f.group.clone(),
                secret: false,
                sealed: false,
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut resources = Vec::new();
        for (i, r) in self.resources.iter().enumerate() {
            let mut resource = Resource {
                kind: r.kind.clone(),
                name: r.name.clone(),
                hash: String::new(),
                files: r.files.clone(),
                lines_in: Vec::new(),
                after: r.after.clone(),
                order_after: r.order_after.clone(),
                apply: r
                    .apply
                    .as_ref()
                    .map(|t| script(format!("scripts/{i}-{}/apply", r.kind), t)),
                revert: r
                    .revert
                    .as_ref()
                    .map(|t| script(format!("scripts/{i}-{}/revert", r.kind), t)),
                check: r
                    .check
                    .as_ref()
                    .map(|t| script(format!("scripts/{i}-{}/check", r.kind), t)),
                batch: r.batch.clone(),
                exec: r.exec.clone(),
                at_boot: r.at_boot,
                wait_for: Vec::new(),
            };
            resource.hash = resource.compute_hash(&files);
            resources.push(resource);
        }
        let triggers = self
            .triggers
            .iter()
            .map(|(name, paths, text)| Trigger {
                name: name.clone(),
                paths: paths.clone(),
                script: script(format!("scripts/trigger-{name}"), text),
            })
            .collect();
        let manifest = Manifest {
            format: bell_bundle::FORMAT,
            target: "debian-12".to_string(),
            fleet: "test".to_string(),
            resources,
            files,
            triggers,
            probes: self
                .probes
                .iter()
                .map(
                    |(name, text, retries, interval, timeout)| bell_bundle::Probe {
                        name: name.clone(),
                        script: script(format!("scripts/health/{name}.sh"), text),
                        timeout: *timeout,
                        retries: *retries,
                        interval: *interval,
                        // A test plays a host with a temporary root: its probes look at
                        // `$BELL_ROOT` from the test machine.
                        offline: bell_bundle::Offline::Root,
                    },
                )
                .collect(),
            batches: self
                .batches
                .iter()
                .map(|(name, text)| bell_bundle::Batch {
                    name: name.clone(),
                    check: script(format!("scripts/batch/{name}.check"), text),
                    apply: self
                        .batch_applies
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, text)| script(format!("scripts/batch/{name}.apply"), text)),
                })
                .collect(),
            snapshots: self.snapshots.clone(),
            reboot: self.reboot.clone(),
            confirm: None,
            live: Vec::new(),
            provides: Vec::new(),
            providers: Default::default(),
        };
        (manifest, scripts)
    }

    /// Writes the bundle as `<dir>/<id>` and returns that directory.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let bundle = self.write_unverified(dir);
        assert!(
            bell_bundle::verify_dir(&bundle).is_ok(),
            "test bundle must verify"
        );
        bundle
    }

    /// Writes the bundle as `write` does, without requiring it to verify: for bundles that
    /// bell-run must refuse.
    pub fn write_unverified(&self, dir: &Path) -> PathBuf {
        let (manifest, scripts) = self.manifest_and_scripts();
        let bundle = dir.join(manifest.id());
        if bundle.exists() {
            return bundle;
        }
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::write(bundle.join("bundle.json"), manifest.to_json()).unwrap();
        for f in &self.files {
            let path = bundle.join("root").join(f.path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &f.content).unwrap();
        }
        for (rel, text) in scripts {
            let path = bundle.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        bundle
    }
}

pub fn exec_policy(rerun: bell_bundle::Rerun) -> ExecPolicy {
    ExecPolicy {
        rerun,
        rerun_interval: None,
        retry_interval: None,
        rerun_interval_persist: true,
        retry_interval_persist: true,
        rerun_max_count: None,
        retry_max_count: None,
        timeout: 30,
        on_failure: bell_bundle::OnFailure::Continue,
        background: false,
        args: Vec::new(),
        env: BTreeMap::new(),
        // A test plays a host with a temporary root: its scripts write under `$BELL_ROOT`
        // from the test machine.
        offline: bell_bundle::Offline::Root,
        reboot: false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: &'static str,
    pub content: Vec<u8>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime_ns: i128,
}

/// Every entry under `dir`, by relative path; `skip` prefixes are left out.
pub fn snapshot(
    dir: &Path,
    skip: &[&str],
    with_mtime: bool,
    with_dirs: bool,
) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if skip
                .iter()
                .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
            {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mtime_ns = if with_mtime {
                meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128
            } else {
                0
            };
            let (kind, content) = if meta.file_type().is_symlink() {
                (
                    "symlink",
                    std::fs::read_link(&path)
                        .unwrap()
                        .as_os_str()
                        .as_encoded_bytes()
                        .to_vec(),
                )
            } else if meta.is_dir() {
                stack.push(path.clone());
                if !with_dirs {
                    continue;
                }
                ("dir", Vec::new())
            } else {
                ("file", std::fs::read(&path).unwrap())
            };
            out.insert(
                rel,
                Entry {
                    kind,
                    content,
                    mode: meta.permissions().mode() & 0o7777,
                    uid: meta.uid(),
                    gid: meta.gid(),
                    mtime_ns,
                },
            );
        }
    }
    out
}

pub fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

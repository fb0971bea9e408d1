//! For the pull tests: a four-host fleet built and signed by the real bellc, build outputs
//! copied one over another as a mirror is filled, image roots, and a fingerprint of everything
//! under a root (a refused pull must leave it exactly as it was).

use super::fleet::{run_bin, text};
use super::Fixture;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const HOSTS: [&str; 4] = ["h1", "h2", "h3", "h4"];

/// A fleet of four hosts; h1 has a file of its own, so that bundles differ between hosts.
pub fn spec(motd: &str) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for host in HOSTS {
        spec.push_str(&format!("host \"{host}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n\
         override \"one\" {{\n    match host=\"h1\"\n    file \"/etc/role\" {{\n        content \"first\\n\"\n    }}\n}}\n"
    ));
    spec
}

/// Builds `spec(motd)` into `out`, signed with `key` (and `extra` arguments).
pub fn build(fx: &Fixture, motd: &str, out: &str, key: &str, extra: &[&str]) {
    std::fs::write(fx.path().join("bell.kdl"), spec(motd)).unwrap();
    let mut args = vec!["build", "bell.kdl", "-o", out, "--sign-key", key];
    args.extend_from_slice(extra);
    let run = fx.bellc(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// Where every pull test starts: keys `ci` (the hosts trust it) and `other`, releases 1 and 2
/// built and signed with `ci` into `out1` and `out2`, and `served` holding release 1.
pub struct TwoReleases {
    pub fx: Fixture,
    pub served: PathBuf,
    /// The trusted public key, for `--trust`.
    pub trust: String,
}

impl TwoReleases {
    pub fn new() -> TwoReleases {
        let fx = Fixture::new();
        for key in ["ci", "other"] {
            assert_eq!(fx.bellc(&["keygen", key]).code, 0);
        }
        build(&fx, "release 1", "out1", "ci.key", &[]);
        build(&fx, "release 2", "out2", "ci.key", &[]);
        let served = fx.path().join("served");
        copy_over(&fx.path().join("out1"), &served);
        let trust = fx.path().join("ci.pub").to_string_lossy().to_string();
        TwoReleases { fx, served, trust }
    }

    /// A path in the fixture's directory.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.fx.path().join(name)
    }
}

/// Where a fleet test starts its releases: a fixture with the signing key `ci` (`ci.key`,
/// `ci.pub`) and `served/`, which a real nginx serves.
pub struct Mirrored {
    pub fx: Fixture,
    pub served: PathBuf,
    pub nginx: super::fleet::Nginx,
}

impl Mirrored {
    /// `None` where nginx cannot start here.
    pub fn start() -> Option<Mirrored> {
        let fx = Fixture::new();
        let served = fx.path().join("served");
        std::fs::create_dir_all(&served).unwrap();
        let nginx = super::fleet::Nginx::serve(&served)?;
        assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
        Some(Mirrored { fx, served, nginx })
    }

    /// `spec` written as `bell.kdl` and built into `out`, signed with `ci`.
    pub fn build(&self, spec: &str, out: &str) {
        std::fs::write(self.fx.path().join("bell.kdl"), spec).unwrap();
        let run = self
            .fx
            .bellc(&["build", "bell.kdl", "-o", out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
}

/// `cp -a FROM/. TO/`: build outputs copied one over another, as a mirror is filled.
pub fn copy_over(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

pub fn image_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    image_root_of(root.path());
    root
}

/// What an image root starts with: the machine's user and group databases (bell-run resolves
/// owners in the root, never on the machine).
pub fn image_root_of(root: &Path) {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    for db in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(db), root.join("etc").join(db)).unwrap();
    }
}

/// Where a test's offline script or probe leaves a mark: in its own root, the only place
/// outside a private `/tmp` it may write (`offline="root"`). A shell word, quoted.
pub const MARKS: &str = "\\\"$BELL_ROOT/marks\\\"";

/// The marks every root's scripts left, in the order of their timestamp (the last word of
/// each line, nanoseconds).
pub fn marks(roots: &[PathBuf]) -> String {
    let mut lines: Vec<(u128, String)> = roots
        .iter()
        .flat_map(|r| {
            std::fs::read_to_string(r.join("marks"))
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    let at = l.rsplit(' ').next().and_then(|w| w.parse().ok());
                    (at.unwrap_or(0), format!("{l}\n"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    lines.sort();
    lines.into_iter().map(|(_, l)| l).collect()
}

/// Everything under a root: type, mode, owner, content or link target, modification time.
pub fn fingerprint(root: &Path) -> BTreeMap<PathBuf, String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .map(|e| {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(e.path()).unwrap())
            } else if meta.is_file() {
                bell_bundle::sha256_hex(&std::fs::read(e.path()).unwrap())
            } else {
                "dir".to_string()
            };
            let stamp = if meta.is_dir() {
                0
            } else {
                meta.mtime_nsec() + meta.mtime()
            };
            let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
            (
                rel,
                format!(
                    "{what} {:o} {} {stamp}",
                    meta.permissions().mode(),
                    meta.uid()
                ),
            )
        })
        .collect()
}

pub fn pull(bin: &Path, source: &str, root: &Path, host: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "pull",
        "--source",
        source,
        "--root",
        root.to_str().unwrap(),
        "--host",
        host,
    ];
    args.extend_from_slice(extra);
    run_bin(bin, &args, &[])
}

/// A pull that must be refused with `reason` and leave the root exactly as it was.
pub fn refused(bin: &Path, source: &str, root: &Path, host: &str, extra: &[&str], reason: &str) {
    let before = fingerprint(root);
    let out = pull(bin, source, root, host, extra);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(reason),
        "wanted `{reason}`:\n{}",
        text(&out)
    );
    assert_eq!(fingerprint(root), before, "a refused pull changed the root");
}

pub fn motd(root: &Path) -> String {
    std::fs::read_to_string(root.join("etc/motd")).unwrap_or_default()
}

pub fn release_of(out: &Path) -> bell_bundle::Release {
    serde_json::from_str(&std::fs::read_to_string(out.join("release.json")).unwrap()).unwrap()
}

/// The host path inside a served bundle whose content is `motd`.
pub fn served_motd(served: &Path, host: &str) -> PathBuf {
    let bundle = &release_of(served).hosts[host].bundle;
    served.join("bundles").join(bundle).join("root/etc/motd")
}

/// The most of `spans` (from, until: nanoseconds; open to the end without an until) that are
/// open at one moment: how many hosts of a group were changing at once.
pub fn most_at_once(spans: &[(u128, Option<u128>)]) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for (start, end) in spans {
        edges.push((*start, 1));
        edges.push((end.unwrap_or(u128::MAX), -1));
    }
    // An end and a start at the same nanosecond do not overlap.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        open += step;
        most = most.max(open);
    }
    most as usize
}

/// Twelve hosts in three racks of four: `h01`..`h04` in `a`, `h05`..`h08` in `b`, the rest in `c`.
pub fn racked_hosts() -> Vec<(String, &'static str)> {
    (1..=12)
        .map(|i| (format!("h{i:02}"), ["a", "b", "c"][(i - 1) / 4]))
        .collect()
}

/// Every host's timer, as a rollout test runs it: a pull (trusting `trust`, taking its
/// release from the etcd at `url` and reporting there, fleet `f`) every half second, whatever
/// the last one said, until `stop`.
pub fn keep_pulling<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    (bin, source, url, trust): (&'env Path, &'env str, &'env str, &'env str),
    hosts: impl IntoIterator<Item = (&'env str, &'env Path)>,
    stop: &'env std::sync::atomic::AtomicBool,
) {
    for (host, root) in hosts {
        scope.spawn(move || {
            let args = [
                "--trust",
                trust,
                "--store",
                url,
                "--report",
                url,
                "--fleet",
                "f",
                "--offline",
            ];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                pull(bin, source, root, host, &args);
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        });
    }
}

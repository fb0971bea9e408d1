//! The bundles of `examples/` (as checked in under `snapshots/`) apply offline into an image
//! root: every managed file lands with its content and mode, units are enabled through `wants`
//! symlinks, a re-apply changes nothing, and a bundle without them restores the root.
//! bell-run depends on no compiler code; the snapshots are its input here, as rsync would ship.
//! Each bundle is applied as one of its hosts (`OUT/hosts/NAME`, its sealed secrets beside it
//! in `OUT/secrets/NAME/`), opened with that host's example key (`examples/keys/NAME`).

use crate::common;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One host of every bundle of the snapshots: `(OUT/hosts/NAME, NAME)`.
fn hosts() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for example in ["divingbell", "three-role"] {
        let dir = repo().join("snapshots").join(example);
        let release: bell_bundle::Release = serde_json::from_str(
            &std::fs::read_to_string(dir.join("release.json")).expect("release"),
        )
        .expect("release");
        let mut first: std::collections::BTreeMap<String, String> = Default::default();
        for (name, host) in &release.hosts {
            first
                .entry(host.bundle.clone())
                .or_insert_with(|| name.clone());
        }
        out.extend(
            first
                .into_values()
                .map(|name| (dir.join("hosts").join(&name), name)),
        );
    }
    out
}

/// The example key of `host`, copied 0600 (git keeps no modes; bell-run refuses a key others
/// can read), with `--identity` before it.
fn identity(host: &str, dir: &Path) -> [String; 2] {
    let key = dir.join(format!("{host}.key"));
    std::fs::copy(repo().join("examples/keys").join(host), &key).expect("example key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    ["--identity".into(), key.to_string_lossy().into_owned()]
}

/// An image root with the account databases user scripts edit (useradd --root).
fn image_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("etc")).expect("etc");
    for f in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(f), root.path().join("etc").join(f)).expect("copy");
    }
    root
}

fn bell_run(args: &[&str], root: &Path) -> (i32, String) {
    let out = Command::new(common::bin())
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .expect("bell-run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn sha256(bytes: &[u8]) -> String {
    bell_bundle::sha256_hex(bytes)
}

/// Every path under the root that is not bell-run's own state, with content and mode.
fn image(root: &Path) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
        let entry = entry.expect("walk");
        let rel = entry
            .path()
            .strip_prefix(root)
            .expect("prefix")
            .to_string_lossy()
            .into_owned();
        if rel.starts_with("var/lib/bell") {
            continue;
        }
        let meta = std::fs::symlink_metadata(entry.path()).expect("meta");
        let content = if meta.file_type().is_symlink() {
            format!(
                "-> {}",
                std::fs::read_link(entry.path()).expect("link").display()
            )
        } else if meta.is_file() {
            sha256(&std::fs::read(entry.path()).expect("read"))
        } else {
            String::from("dir")
        };
        out.push((rel, content, meta.permissions().mode() & 0o7777));
    }
    out
}

#[test]
fn every_example_bundle_applies_offline_then_reapplies_as_a_no_op() {
    let keys = tempfile::tempdir().expect("tempdir");
    for (bundle, host) in hosts() {
        let root = image_root();
        let [flag, key] = identity(&host, keys.path());
        let apply = ["apply", bundle.to_str().expect("utf-8"), &flag, &key];
        let (code, text) = bell_run(&apply, root.path());
        assert_eq!(code, 0, "{}:\n{text}", bundle.display());
        let manifest: bell_bundle::Manifest = bell_bundle::Manifest::from_json(
            &std::fs::read_to_string(bundle.join("bundle.json")).expect("manifest"),
        )
        .expect("manifest");
        for file in &manifest.files {
            let on_host = root.path().join(file.path.trim_start_matches('/'));
            let bytes =
                std::fs::read(&on_host).unwrap_or_else(|e| panic!("{}: {e}", on_host.display()));
            // A sealed file is named by a keyed digest: what lands is its opened plaintext,
            // which the re-apply below finds unchanged.
            if file.sealed {
                assert!(!bytes.starts_with(b"age-encryption.org"), "{}", file.path);
            } else {
                assert_eq!(sha256(&bytes), file.sha256, "{}", file.path);
            }
            let mode = std::fs::metadata(&on_host)
                .expect("meta")
                .permissions()
                .mode()
                & 0o7777;
            assert_eq!(format!("{mode:04o}"), file.mode, "{}", file.path);
        }
        // Mount units are enabled for local-fs.target, offline, by the `wants` symlink.
        for file in manifest.files.iter().filter(|f| f.path.ends_with(".mount")) {
            let unit = Path::new(&file.path).file_name().expect("name");
            let wants = root
                .path()
                .join("etc/systemd/system/local-fs.target.wants")
                .join(unit);
            let target =
                std::fs::read_link(&wants).unwrap_or_else(|e| panic!("{}: {e}", wants.display()));
            assert_eq!(target, Path::new(&file.path), "{}", wants.display());
        }
        let before = image(root.path());
        let (code, text) = bell_run(&apply, root.path());
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains("result: 0 changed"),
            "re-apply of {}:\n{text}",
            bundle.display()
        );
        assert_eq!(before, image(root.path()), "a re-apply changed the root");
    }
}

#[test]
fn a_bundle_without_the_examples_resources_restores_the_root() {
    // Start from a root with a file bell will manage (limits.d/60-bell.conf) already there,
    // apply an example bundle, then an almost empty bundle: the root is as it was, the
    // pre-existing file back in place.
    let root = image_root();
    let limits = root.path().join("etc/security/limits.d");
    std::fs::create_dir_all(&limits).expect("mkdir");
    std::fs::write(
        limits.join("60-bell.conf"),
        "# the admin's own\n* soft nofile 2048\n",
    )
    .expect("write");
    std::fs::write(limits.join("90-local.conf"), "# never touched\n").expect("write");
    let pristine = image(root.path());

    let bundle = repo().join("snapshots/three-role/hosts/sto-01");
    let keys = tempfile::tempdir().expect("tempdir");
    let [flag, key] = identity("sto-01", keys.path());
    let (code, text) = bell_run(
        &["apply", bundle.to_str().expect("utf-8"), &flag, &key],
        root.path(),
    );
    assert_eq!(code, 0, "{text}");
    assert_ne!(pristine, image(root.path()));

    // The next bundle manages nothing: everything of the first leaves.
    let empty = tempfile::tempdir().expect("tempdir");
    let manifest = bell_bundle::Manifest {
        format: bell_bundle::FORMAT,
        target: "ubuntu-24.04".into(),
        fleet: "lab-east".into(),
        resources: Vec::new(),
        files: Vec::new(),
        triggers: Vec::new(),
        probes: Vec::new(),
        batches: Vec::new(),
        snapshots: Default::default(),
        reboot: None,
        confirm: None,
        live: Vec::new(),
        provides: Vec::new(),
        providers: Default::default(),
    };
    let json = manifest.to_json();
    let dir = empty
        .path()
        .join("bundles")
        .join(bell_bundle::sha256_hex(json.as_bytes()));
    std::fs::create_dir_all(&dir).expect("bundle dir");
    std::fs::write(dir.join("bundle.json"), json).expect("manifest");
    let (code, text) = bell_run(&["apply", dir.to_str().expect("utf-8")], root.path());
    assert_eq!(code, 0, "{text}");
    // The account bell created is expired and locked, not deleted (`purge-expired=#false`,
    // Divingbell's rule), so the account databases and its home differ; everything else is as
    // it was. Directories bell created may stay, empty.
    let accounts = |rel: &str| {
        rel.starts_with("etc/passwd")
            || rel.starts_with("etc/shadow")
            || rel.starts_with("etc/group")
            || rel.starts_with("etc/gshadow")
            || rel == "etc/.pwd.lock"
            || rel.starts_with("home")
    };
    let after: Vec<_> = image(root.path())
        .into_iter()
        .filter(|(rel, content, _)| {
            !accounts(rel) && (content != "dir" || pristine.iter().any(|(p, _, _)| p == rel))
        })
        .collect();
    let before: Vec<_> = pristine
        .into_iter()
        .filter(|(rel, _, _)| !accounts(rel))
        .collect();
    assert_eq!(before, after);
    let shadow = std::fs::read_to_string(root.path().join("etc/shadow")).expect("shadow");
    let ops = shadow
        .lines()
        .find(|l| l.starts_with("ops:"))
        .expect("ops kept");
    assert_eq!(ops.split(':').nth(7), Some("1"), "expired: {ops}");
    assert!(
        ops.split(':').nth(1).is_some_and(|h| h.starts_with('!')),
        "locked: {ops}"
    );
}

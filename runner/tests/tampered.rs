//! Bundles that do not verify, or that would write outside the root, are refused with a clear
//! message and nothing under the root changes (full tree snapshot, mtimes included).
use crate::common::*;
use bell_bundle::Manifest;
use std::path::{Path, PathBuf};

fn good(w: &World) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/sysctl.d/60-bell.conf", "vm.swappiness = 10\n", "0644")
        .resource(
            ResourceSpec::new("sysctl", "swappiness")
                .files(&["/etc/sysctl.d/60-bell.conf"])
                .apply(&w.event("apply")),
        )
}

/// A world where a first good bundle is applied, so that state, lock and generations exist.
fn applied() -> (World, PathBuf) {
    let w = World::new();
    let bundle = w.build(&good(&w));
    expect_code(&w.apply(&bundle, &[]), 0);
    (w, bundle)
}

/// A writable copy of `bundle` under a new name.
fn copy_of(w: &World, bundle: &Path, name: &str) -> PathBuf {
    let dest = w.tmp.path().join(name);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(bundle)
        .arg(&dest)
        .status()
        .unwrap();
    assert!(status.success());
    dest
}

fn assert_refused(w: &World, bundle: &Path, needle: &str) {
    let before = snapshot(&w.root(), &[], true, true);
    w.clear_events();
    let out = w.apply(bundle, &[]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains(needle),
        "expected {needle:?} in:\n{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("help:"), "{}", stderr(&out));
    assert_eq!(
        snapshot(&w.root(), &[], true, true),
        before,
        "the root changed"
    );
    assert!(w.events().is_empty());
    // `verify` says the same without a root.
    let out = w.run(&["verify", bundle.to_str().unwrap()]);
    if !needle.contains("outside the root") && !needle.contains("symbolic link") {
        expect_code(&out, 1);
    }
}

/// Rewrites `bundle.json` with `edit` applied and moves the bundle to its new id, so that the
/// id check passes and the edit itself is what must be caught.
fn edited(w: &World, bundle: &Path, edit: impl Fn(&mut Manifest)) -> PathBuf {
    let dir = copy_of(w, bundle, "edited");
    let text = std::fs::read_to_string(dir.join("bundle.json")).unwrap();
    let mut manifest = Manifest::from_json(&text).unwrap();
    edit(&mut manifest);
    let text = manifest.to_json();
    std::fs::write(dir.join("bundle.json"), &text).unwrap();
    let id = bell_bundle::sha256_hex(text.as_bytes());
    let named = w.tmp.path().join("bundles").join(id);
    std::fs::rename(&dir, &named).unwrap();
    named
}

#[test]
fn one_byte_changed_in_a_file_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "flipped");
    let path = dir.join("root/etc/sysctl.d/60-bell.conf");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert_refused(&w, &dir, "does not match the sha256");
}

#[test]
fn one_byte_changed_in_a_script_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "script");
    let path = dir.join("scripts/0-sysctl/apply");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert_refused(&w, &dir, "does not match the sha256");
}

#[test]
fn a_file_longer_or_shorter_than_listed_is_refused_by_its_size() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "grown");
    let path = dir.join("scripts/0-sysctl/apply");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let listed = text.len();
    text.push('#');
    std::fs::write(&path, &text).unwrap();
    assert_refused(
        &w,
        &dir,
        &format!(
            "holds {} bytes, not the {listed} the manifest lists",
            listed + 1
        ),
    );
    std::fs::write(&path, &text[..listed - 2]).unwrap();
    assert_refused(&w, &dir, "the manifest lists");
}

#[test]
fn a_file_added_to_the_bundle_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "added");
    std::fs::write(dir.join("root/etc/sysctl.d/99-evil.conf"), "kernel.x = 1\n").unwrap();
    assert_refused(&w, &dir, "not in its manifest");
}

#[test]
fn an_edited_manifest_no_longer_matches_its_id() {
    let (w, bundle) = applied();
    // Reached through a host symlink, as `out/hosts/node-001` is.
    let text = std::fs::read_to_string(bundle.join("bundle.json")).unwrap();
    std::fs::write(bundle.join("bundle.json"), text.replace("0644", "4755")).unwrap();
    let link = w.tmp.path().join("node-001");
    std::os::unix::fs::symlink(&bundle, &link).unwrap();
    assert_refused(&w, &link, "not to the bundle id");
}

#[test]
fn a_reformatted_manifest_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "spaced");
    let text = std::fs::read_to_string(dir.join("bundle.json")).unwrap();
    std::fs::write(dir.join("bundle.json"), format!(" {text}")).unwrap();
    assert_refused(&w, &dir, "not in canonical form");
}

#[test]
fn a_newer_manifest_format_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "newer");
    let text = std::fs::read_to_string(dir.join("bundle.json")).unwrap();
    std::fs::write(
        dir.join("bundle.json"),
        text.replace("\"format\": 1", "\"format\": 2"),
    )
    .unwrap();
    assert_refused(&w, &dir, "has format 2");
}

/// A field a newer bellc added within the format is named, with who is too old, not taken
/// for damage.
#[test]
fn a_field_of_a_newer_bellc_is_refused_naming_it() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "newer-field");
    let text = std::fs::read_to_string(dir.join("bundle.json")).unwrap();
    let added = text.replacen(
        "\"format\": 1,",
        "\"format\": 1,\n  \"rollback_hooks\": [],",
        1,
    );
    assert_ne!(added, text);
    std::fs::write(dir.join("bundle.json"), added).unwrap();
    assert_refused(
        &w,
        &dir,
        "has a field this bell-run does not know (`rollback_hooks`): the bundle was built by a newer bellc",
    );
    let out = w.apply(&dir, &[]);
    assert!(
        stderr(&out).contains("install the bell-run of the bellc release"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_file_path_with_dotdot_is_refused() {
    let (w, bundle) = applied();
    let dir = edited(&w, &bundle, |m| {
        m.files[0].path = "/etc/../../outside".to_string();
    });
    assert_refused(&w, &dir, "not a normalised path");
}

#[test]
fn a_script_path_with_dotdot_is_refused() {
    let (w, bundle) = applied();
    let dir = edited(&w, &bundle, |m| {
        let r = &mut m.resources[0];
        r.apply.as_mut().unwrap().path = "scripts/../../../bin/sh".to_string();
        r.hash = r.compute_hash(&m.files);
    });
    assert_refused(&w, &dir, "not a normalised path");
}

#[test]
fn a_symlink_inside_the_bundle_is_refused() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "linked");
    std::os::unix::fs::symlink("/etc/shadow", dir.join("root/etc/shadow")).unwrap();
    assert_refused(&w, &dir, "not a regular file");
}

#[test]
fn a_symlinked_directory_under_the_root_pointing_outside_is_refused() {
    let w = World::new();
    let outside = w.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(w.root().join("etc")).unwrap();
    std::os::unix::fs::symlink(&outside, w.root().join("etc/sysctl.d")).unwrap();
    let bundle = w.build(&good(&w));
    let outside_before = snapshot(&outside, &[], true, true);
    assert_refused(&w, &bundle, "outside the root");
    assert_eq!(snapshot(&outside, &[], true, true), outside_before);
    assert!(!outside.join("60-bell.conf").exists());
}

#[test]
fn a_symlinked_state_directory_pointing_outside_is_refused() {
    let w = World::new();
    let outside = w.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(w.root().join("var/lib")).unwrap();
    std::os::unix::fs::symlink(&outside, w.root().join("var/lib/bell")).unwrap();
    let bundle = w.build(&good(&w));
    assert_refused(&w, &bundle, "var/lib/bell is a symbolic link");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn a_resource_hash_that_does_not_match_its_content_is_refused() {
    let (w, bundle) = applied();
    let dir = edited(&w, &bundle, |m| {
        m.resources[0].files.clear();
    });
    assert_refused(&w, &dir, "does not match its content");
}

#[test]
fn a_manifest_that_is_a_link_to_dev_zero_is_refused_not_read() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "zero");
    std::fs::remove_file(dir.join("bundle.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("bundle.json")).unwrap();
    assert_refused(&w, &dir, "a symlink, not a plain file");
}

#[test]
fn a_manifest_that_is_a_fifo_is_refused_without_blocking() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "fifo");
    fifo_in_place_of(&dir.join("bundle.json"));
    assert_refused(&w, &dir, "not a plain file");
}

#[test]
fn a_bundle_file_that_is_a_fifo_is_refused_without_blocking() {
    let (w, bundle) = applied();
    let dir = copy_of(&w, &bundle, "fifo-file");
    let file = dir.join("root/etc/sysctl.d/60-bell.conf");
    fifo_in_place_of(&file);
    assert_refused(&w, &dir, "not a regular file");
}

#[test]
fn fifos_in_the_root_are_never_read() {
    // A hostile root: the account database and a managed file's place are FIFOs. bell-run
    // must finish (it runs under a 120 s `timeout`), not wait for a writer.
    let w = World::new();
    let bundle = w.build(&good(&w));
    for rel in ["etc/passwd", "etc/group", "etc/sysctl.d/60-bell.conf"] {
        let path = w.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        fifo_in_place_of(&path);
    }
    let out = w.apply(&bundle, &["--dry-run"]);
    assert_ne!(
        out.status.code(),
        Some(124),
        "bell-run hung: {}",
        stderr(&out)
    );
    // Where the managed file goes there is a FIFO: the apply stops there, saying so.
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 1);
    assert!(
        stderr(&out).contains("not a plain file: bell-run replaces only files and symlinks"),
        "{}",
        stderr(&out)
    );
    let root = w.root();
    let out = w.run(&[
        "check",
        bundle.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_ne!(
        out.status.code(),
        Some(124),
        "bell-run check hung: {}",
        stderr(&out)
    );
}

/// A FIFO where `path` was (or nothing was): a reader that opens it waits for a writer forever.
fn fifo_in_place_of(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

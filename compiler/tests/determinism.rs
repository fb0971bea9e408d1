//! The same spec built twice, in two different directories, gives identical bundle ids and
//! bytes; hosts with identical configuration share one bundle; rebuilds rewrite nothing that
//! did not change, keep the release they replace, and `prune` removes what no kept release
//! names.
use crate::common::*;

/// The three-role example, with the key its secrets are named and sealed with: the same for
/// two checkouts, as CI's is for every build.
fn example_fixture() -> Fixture {
    let seal = std::fs::read_to_string(repo_root().join("examples/keys/seal.key")).unwrap();
    Fixture::example("three-role", "bell.kdl").file("seal.key", &seal)
}

#[test]
fn two_builds_in_two_directories_are_byte_identical() {
    let a = example_fixture();
    let b = example_fixture();
    let seal = ["--seal-key", "seal.key"];
    assert_eq!(
        a.bellc(&[&["build", "bell.kdl", "-o", "out"][..], &seal].concat())
            .code,
        0
    );
    let run = b.bellc(&[&["build", "bell.kdl", "-o", "elsewhere/out"][..], &seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ta = tree(&a.path().join("out"));
    let tb = tree(&b.path().join("elsewhere/out"));
    assert!(!ta.is_empty());
    assert_eq!(ta, tb);
}

/// With an include glob and an inventory, the record of inputs too: a second checkout, even
/// one reached through a symlink, builds the same OUT, and each rebuild checks its own files.
#[test]
fn out_does_not_depend_on_where_the_spec_lives() {
    let spec =
        "fleet \"f\" target=\"debian-12\"\ninclude \"parts/*.kdl\"\ninventory \"inv/hosts.json\"\n";
    let fixture = || {
        Fixture::spec(spec)
            .file("parts/a.kdl", "sysctl { net.ipv4.ip_forward 1 }\n")
            .file("parts/b.kdl", "package \"htop\"\n")
            .file("inv/hosts.json", "[{\"name\": \"h1\"}, {\"name\": \"h2\"}]")
    };
    let a = fixture();
    let b = fixture();
    let link = tempfile::tempdir().unwrap();
    let via = link.path().join("checkout");
    std::os::unix::fs::symlink(b.path(), &via).unwrap();
    assert_eq!(a.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    let run = bellc_in(&via, &["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ta = tree(&a.path().join("out"));
    assert!(ta.iter().any(|(p, _)| p == ".bell-inputs.json"));
    assert_eq!(ta, tree(&b.path().join("out")));
    let record = std::fs::read_to_string(a.path().join("out/.bell-inputs.json")).unwrap();
    assert!(!record.contains(&*a.path().to_string_lossy()), "{record}");

    // Each checkout's rebuild reads its own files: unchanged skips, a changed part rebuilds.
    let again = a.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert!(again.stderr.contains("up to date"), "{}", again.stderr);
    std::fs::write(b.path().join("parts/b.kdl"), "package \"tmux\"\n").unwrap();
    std::fs::write(b.path().join("parts/c.kdl"), "package \"jq\"\n").unwrap();
    let rebuilt = b.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert!(!rebuilt.stderr.contains("up to date"), "{}", rebuilt.stderr);
    assert_ne!(ta, tree(&b.path().join("out")));
    let again = a.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert!(again.stderr.contains("up to date"), "{}", again.stderr);
}

#[test]
fn hosts_with_identical_configuration_share_a_bundle() {
    let fx = example_fixture();
    assert_eq!(fx.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    let release: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fx.path().join("out/release.json")).unwrap())
            .unwrap();
    let hosts = release["hosts"].as_object().unwrap();
    let bundle = |h: &str| hosts[h]["bundle"].as_str().unwrap().to_string();
    // Same role, same configuration, one bundle.
    assert_eq!(bundle("cmp-01"), bundle("cmp-06"));
    assert_eq!(bundle("ctl-01"), bundle("ctl-03"));
    assert_ne!(bundle("ctl-01"), bundle("cmp-01"));
    let dirs = std::fs::read_dir(fx.path().join("out/bundles"))
        .unwrap()
        .count();
    let distinct: std::collections::BTreeSet<String> = hosts.keys().map(|h| bundle(h)).collect();
    assert_eq!(dirs, distinct.len());
    // Each bundle id is the sha256 of its manifest, and each host link points at its bundle.
    for id in &distinct {
        let manifest =
            std::fs::read(fx.path().join("out/bundles").join(id).join("bundle.json")).unwrap();
        assert_eq!(&bell_bundle::sha256_hex(&manifest), id);
    }
    for host in hosts.keys() {
        let link = std::fs::read_link(fx.path().join("out/hosts").join(host)).unwrap();
        assert_eq!(link, std::path::Path::new("../bundles").join(bundle(host)));
    }
}

#[test]
fn a_rebuild_rewrites_nothing_and_keeps_the_previous_release_until_pruned() {
    let fx = example_fixture();
    assert_eq!(fx.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    let before = tree(&fx.path().join("out"));
    // Unchanged inputs: the build stops after hashing them.
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert!(
        run.stderr.contains("up to date (inputs unchanged"),
        "{}",
        run.stderr
    );
    assert_eq!(before, tree(&fx.path().join("out")));
    // Forced through the whole pipeline, it still writes nothing.
    let run = fx.bellc(&["build", "--force", "bell.kdl", "-o", "out"]);
    assert!(run.stderr.contains("0 bundles written"), "{}", run.stderr);
    assert_eq!(before, tree(&fx.path().join("out")));

    let first = read_release(&fx.path().join("out/release.json"));

    // Storage hosts lose their override: the new release no longer names their bundle, which
    // stays with the first release (kept under releases/, since hosts may still run it).
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap();
    let spec = spec.replace("match role=\"storage\"", "match role=\"storage-gone\"");
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("0 removed"), "{}", run.stderr);
    let second = read_release(&fx.path().join("out/release.json"));
    assert_ne!(first.version, second.version);
    let kept_first = fx
        .path()
        .join(format!("out/releases/{}.json", first.version));
    assert_eq!(read_release(&kept_first), first);
    assert_eq!(bundles_on_disk(&fx), bundles_of(&[&first, &second]));

    // Pruning to one release removes the first and the bundle only it named.
    let run = fx.bellc(&["prune", "out", "--keep", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("removed 1 release(s) and 1 bundle(s)"),
        "{}",
        run.stdout
    );
    assert!(!kept_first.exists());
    assert_eq!(bundles_on_disk(&fx), bundles_of(&[&second]));
    // The rebuilt output still checks clean after the prune.
    let run = fx.bellc(&["build", "--check", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

fn read_release(path: &std::path::Path) -> bell_bundle::Release {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn bundles_of(releases: &[&bell_bundle::Release]) -> std::collections::BTreeSet<String> {
    releases
        .iter()
        .flat_map(|r| r.hosts.values().map(|h| h.bundle.clone()))
        .collect()
}

fn bundles_on_disk(fx: &Fixture) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(fx.path().join("out/bundles"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn build_check_names_every_host_whose_bundle_differs() {
    let fx = example_fixture();
    assert_eq!(fx.bellc(&["build", "bell.kdl", "-o", "out"]).code, 0);
    assert_eq!(
        fx.bellc(&["build", "--check", "bell.kdl", "-o", "out"])
            .code,
        0
    );
    let spec = std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap();
    std::fs::write(
        fx.path().join("bell.kdl"),
        spec.replace("sysctl { vm.swappiness 1 }", "sysctl { vm.swappiness 2 }"),
    )
    .unwrap();
    let run = fx.bellc(&["build", "--check", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let named: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert_eq!(
        named,
        ["cmp-01", "cmp-02", "cmp-03", "cmp-04", "cmp-05", "cmp-06"]
    );
}

#[test]
fn a_host_that_manages_nothing_gets_an_empty_bundle() {
    let fx = Fixture::spec("fleet \"f\" target=\"debian-12\"\nhost \"bare\"\n");
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let manifest = std::fs::read_to_string(fx.path().join("out/hosts/bare/bundle.json")).unwrap();
    let manifest = bell_bundle::Manifest::from_json(&manifest).unwrap();
    assert!(manifest.resources.is_empty() && manifest.files.is_empty());
}

/// A rebuild skipped because nothing changed prints the warnings of the build it skips (long
/// and `--short`), and `--deny-warnings` never skips a build that had one.
#[test]
fn a_skipped_rebuild_prints_the_warnings_again() {
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"h1\"\noverride \"nobody\" {\n    \
         match role=\"none\"\n    sysctl { net.ipv4.ip_forward 1 }\n}\n",
    );
    let first = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.stderr.contains("2 warnings"), "{}", first.stderr);
    let warnings = |stderr: &str| -> String {
        stderr
            .lines()
            .filter(|l| !l.starts_with("built ") && !l.contains("up to date"))
            .collect::<Vec<_>>()
            .join("\n")
    };

    let again = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("up to date"), "{}", again.stderr);
    assert_eq!(warnings(&again.stderr), warnings(&first.stderr));

    let short = fx.bellc(&["build", "bell.kdl", "-o", "out", "--short"]);
    assert!(short.stderr.contains("up to date"), "{}", short.stderr);
    assert!(
        short.stderr.contains(
            "bell.kdl:3:1: warning[bell::resolve::unmatched_override]: override `nobody` \
             matches no host"
        ),
        "{}",
        short.stderr
    );
    assert!(
        short.stderr.contains("bell.kdl:4:11: warning"),
        "{}",
        short.stderr
    );

    let denied = fx.bellc(&["build", "bell.kdl", "-o", "out", "--deny-warnings"]);
    assert_ne!(denied.code, 0, "{}", denied.stderr);
    assert!(!denied.stderr.contains("up to date"), "{}", denied.stderr);
    assert!(denied.stderr.contains("2 warnings"), "{}", denied.stderr);
}

/// What the machine running the build may differ in does not reach OUT: the number of
/// threads, the time zone, the locale (Turkish lowercases `I` to a dotless `ı`) and the umask
/// give the same bytes and ids. (The files' modes follow the umask, as any build tool's
/// output does: a mirror that serves OUT is its owner's to open.)
#[test]
fn threads_time_zone_locale_and_umask_do_not_reach_out() {
    let a = example_fixture();
    let b = example_fixture();
    let seal = ["--seal-key", "seal.key"];
    let run = a.bellc(&[&["build", "bell.kdl", "-o", "out"][..], &seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "umask 077 && exec \"$0\" build bell.kdl -o out --seal-key seal.key --secrets-key secrets.key",
            env!("CARGO_BIN_EXE_bellc"),
        ])
        .current_dir(b.path())
        .env("RAYON_NUM_THREADS", "1")
        .env("TZ", "Pacific/Chatham")
        .env("LANG", "tr_TR.UTF-8")
        .env("LC_ALL", "tr_TR.UTF-8")
        .env("BELLC_STATE_DIR", b.path().join("bellc-state"))
        .env_remove("CI")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ta, tb) = (tree(&a.path().join("out")), tree(&b.path().join("out")));
    assert!(!ta.is_empty());
    assert_eq!(ta, tb);
}

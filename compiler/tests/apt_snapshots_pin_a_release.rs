//! `apt-source snapshot="ID"`: a source pinned to a repository snapshot. The id is filled into
//! the url's `{snapshot}`, recorded in the bundle's manifest and, signed, in the release, and
//! apt then reads the release's own sources only, so `apt upgrade=#true` goes to that snapshot
//! and nothing newer.

use crate::common;
use crate::common::in_memory::{build, bundle, errors, text};

const PINNED: &str = r#"fleet "f" target="debian-12"
host "h"
apt upgrade=#true
apt-source "debian" url="http://snapshot.debian.org/archive/debian/{snapshot}/" snapshot="20261120T000000Z" suites="bookworm" components="main"
apt-source "vendor" url="https://deb.example/apt" suites="./"
package "htop"
"#;

#[test]
fn the_snapshot_fills_the_url_and_apt_keeps_reading_it_after_it_expires() {
    let b = bundle(PINNED, "h");
    assert_eq!(
        text(&b, "root/etc/apt/sources.list.d/bell-debian.sources"),
        "# Managed by bell: apt source debian. Changes here are overwritten by the next apply.\n\
         # Pinned to the repository snapshot 20261120T000000Z, recorded in the release.\n\
         Types: deb\n\
         URIs: http://snapshot.debian.org/archive/debian/20261120T000000Z/\n\
         Suites: bookworm\n\
         Components: main\n\
         Check-Valid-Until: no\n"
    );
    // An unpinned source is as it was: no snapshot, and its Release file's expiry is checked.
    let vendor = text(&b, "root/etc/apt/sources.list.d/bell-vendor.sources");
    assert!(!vendor.contains("Check-Valid-Until"), "{vendor}");
    assert!(!vendor.contains("Pinned"), "{vendor}");
}

#[test]
fn the_manifest_and_the_signed_release_record_every_pinned_source() {
    let built = build(&PINNED.replace("host \"h\"", "host \"h\"\nhost \"g\""));
    let compiled = built.compiled.expect("builds");
    let want =
        std::collections::BTreeMap::from([("debian".to_string(), "20261120T000000Z".to_string())]);
    for host in ["g", "h"] {
        let entry = &compiled.release.hosts[host];
        assert_eq!(*entry.snapshots, want, "{host}");
        assert_eq!(compiled.bundles[&entry.bundle].manifest.snapshots, want);
    }
    // Hosts of one configuration share one map, whatever the size of the fleet.
    assert!(std::sync::Arc::ptr_eq(
        &compiled.release.hosts["g"].snapshots,
        &compiled.release.hosts["h"].snapshots
    ));
    let json = compiled.release.unsigned_json();
    assert!(
        json.contains("\"snapshots\": {\n        \"debian\": \"20261120T000000Z\"\n      }"),
        "{json}"
    );
    // Without a pinned source, neither says a word (and bundle ids stay as they were).
    let plain = build("fleet \"f\" target=\"debian-12\"\nhost \"h\"\npackage \"htop\"\n");
    let plain = plain.compiled.expect("builds");
    assert!(!plain.release.unsigned_json().contains("snapshots"));
    let id = &plain.release.hosts["h"].bundle;
    assert!(!plain.bundles[id].manifest_json.contains("snapshots"));
}

#[test]
fn pinned_apt_reads_the_release_sources_only_and_a_new_snapshot_upgrades_again() {
    let b = bundle(PINNED, "h");
    let upgrade = text(&b, "scripts/apt/upgrade.apply");
    assert!(
        upgrade.contains("#   apt-source debian: 20261120T000000Z\n"),
        "{upgrade}"
    );
    for script in [
        upgrade.clone(),
        text(&b, "scripts/package/htop.apply"),
        text(&b, "scripts/trigger/apt-update.sh"),
    ] {
        assert!(
            script.contains(
                "for bell_apt_source in /etc/apt/sources.list.d/bell-debian.sources \
                 /etc/apt/sources.list.d/bell-vendor.sources; do"
            ),
            "{script}"
        );
        assert!(
            script.contains("-o Dir::Etc::SourceList=/dev/null"),
            "{script}"
        );
        assert!(script.contains("-o APT::Get::List-Cleanup=0"), "{script}");
    }
    assert!(upgrade.contains("bell_apt_get -q update"), "{upgrade}");
    assert!(upgrade.contains("bell_apt_get -y -q"), "{upgrade}");

    // A new snapshot: the upgrade is another resource (applied again), a package is not.
    let later = bundle(&PINNED.replace("20261120T000000Z", "20261125T000000Z"), "h");
    let hash = |b: &bellc_core::render::RenderedBundle, key: &str| {
        b.manifest
            .resources
            .iter()
            .find(|r| r.key() == key)
            .map(|r| r.hash.clone())
            .expect(key)
    };
    assert_ne!(hash(&b, "apt:upgrade"), hash(&later, "apt:upgrade"));
    assert_eq!(hash(&b, "package:htop"), hash(&later, "package:htop"));

    // Nothing pinned: apt reads every source, as before.
    let plain = bundle(
        &PINNED
            .replace(" snapshot=\"20261120T000000Z\"", "")
            .replace("{snapshot}/", "current/"),
        "h",
    );
    let script = text(&plain, "scripts/apt/upgrade.apply");
    assert!(script.contains("\napt-get -q update"), "{script}");
    assert!(!script.contains("bell_apt_get"), "{script}");
}

#[test]
fn snapshot_mistakes_are_reported_at_the_value_all_at_once() {
    let spec = r#"fleet "f" target="debian-12"
host "h"
apt-source "a" url="http://snap.example/{snapshot}" suites="./"
apt-source "b" url="http://snap.example/debian" snapshot="20261120" suites="./"
apt-source "c" url="http://snap.example/{snapshot}" snapshot="2026/11/20" suites="./"
apt-source "d" url="http://snap.example/{snapshot}" snapshot=".." suites="./"
apt-source "e" url="http://snap.example/{snapshot}/{snapshot}" snapshot="1" suites="./"
apt-source "f" url="http://snap.example/{snapshot}" snapshot="" suites="./"
apt-source "g" url="http://snap.example/{release}" snapshot="1" suites="./"
"#;
    let diags = errors(spec);
    let want = [
        (
            "bell.kdl:3:16:",
            "the url of `apt-source:a` holds `{snapshot}`, but no snapshot is given",
        ),
        (
            "bell.kdl:4:49:",
            "`apt-source:b` has a snapshot, but its url has no `{snapshot}`",
        ),
        ("bell.kdl:5:53:", "a snapshot cannot hold `/`"),
        ("bell.kdl:6:53:", "`..` is not a snapshot"),
        ("bell.kdl:7:16:", "holds `{snapshot}` more than once"),
        (
            "bell.kdl:8:53:",
            "a snapshot is a word of 1 to 64 characters",
        ),
        (
            "bell.kdl:9:16:",
            "`{release}` is not a placeholder of an apt URL",
        ),
    ];
    for (at, message) in want {
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with(at) && d.contains(message)),
            "no `{message}` at {at}:\n{diags:#?}"
        );
    }
    assert_eq!(diags.len(), want.len(), "{diags:#?}");
}

#[test]
fn diff_says_a_new_snapshot_as_such() {
    let f = common::Fixture::spec(PINNED);
    let run = f.bellc(&["build", "bell.kdl", "-o", "old"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let spec = PINNED
        .replace("20261120T000000Z", "20261125T000000Z")
        .replace(
            " url=\"https://deb.example/apt\"",
            " url=\"https://deb.example/{snapshot}\" snapshot=\"r7\"",
        );
    std::fs::write(f.path().join("bell.kdl"), spec).unwrap();
    let run = f.bellc(&["build", "bell.kdl", "-o", "new"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = f.bellc(&["diff", "old", "new"]);
    assert!(
        run.stdout.contains(
            "  ~ manifest: apt-source debian: snapshot 20261120T000000Z → 20261125T000000Z\n  \
             ~ manifest: apt-source vendor: pinned to snapshot r7\n"
        ),
        "{}",
        run.stdout
    );
    let run = f.bellc(&["diff", "new", "old", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&run.stdout).expect(&run.stderr);
    assert_eq!(
        value["changes"][0]["manifest"],
        serde_json::json!([
            "apt-source debian: snapshot 20261125T000000Z → 20261120T000000Z",
            "apt-source vendor: no longer pinned (was snapshot r7)"
        ])
    );
}

//! `apt-source`: a deb822 `bell-NAME.sources` file and its `bell-NAME.asc` keyring as managed
//! files of the source's resource, and an `apt-get update` trigger on their directories.

use crate::common::in_memory::{bundle, text};

const KEY: &str =
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGV\n-----END PGP PUBLIC KEY BLOCK-----";

#[test]
fn a_source_is_a_deb822_file_signed_by_its_own_keyring() {
    let b = bundle(
        &format!(
            "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\napt-source \"ubuntu\" url=\"http://archive.ubuntu.com/ubuntu\" suites=\"noble  noble-updates\" components=\"main universe\" {{\n    key \"{}\"\n}}\napt-source \"local\" url=\"file:/srv/repo\" suites=\"./\"\n",
            KEY.replace('\n', "\\n")
        ),
        "h",
    );
    assert_eq!(
        text(&b, "root/etc/apt/sources.list.d/bell-ubuntu.sources"),
        "# Managed by bell: apt source ubuntu. Changes here are overwritten by the next apply.\n\
         Types: deb\n\
         URIs: http://archive.ubuntu.com/ubuntu\n\
         Suites: noble noble-updates\n\
         Components: main universe\n\
         Signed-By: /etc/apt/keyrings/bell-ubuntu.asc\n"
    );
    assert_eq!(
        text(&b, "root/etc/apt/keyrings/bell-ubuntu.asc"),
        format!("{KEY}\n")
    );
    assert_eq!(
        text(&b, "root/etc/apt/sources.list.d/bell-local.sources"),
        "# Managed by bell: apt source local. Changes here are overwritten by the next apply.\n\
         Types: deb\n\
         URIs: file:/srv/repo\n\
         Suites: ./\n"
    );
    let ubuntu = b
        .manifest
        .resources
        .iter()
        .find(|r| r.key() == "apt-source:ubuntu")
        .unwrap();
    assert_eq!(
        ubuntu.files,
        [
            "/etc/apt/sources.list.d/bell-ubuntu.sources",
            "/etc/apt/keyrings/bell-ubuntu.asc"
        ]
    );
    // Only bell's own files: sources.list and other keyrings are never in a bundle.
    assert!(b.manifest.files.iter().all(|f| f
        .path
        .rsplit('/')
        .next()
        .unwrap()
        .starts_with("bell-")));
    assert_eq!(b.manifest.triggers.len(), 1);
    let trigger = &b.manifest.triggers[0];
    assert_eq!(trigger.name, "apt-update");
    assert_eq!(
        trigger.paths,
        ["/etc/apt/sources.list.d/", "/etc/apt/keyrings/"]
    );
    assert!(text(&b, &trigger.script.path).contains("apt-get -q update"));
}

#[test]
fn no_source_no_trigger() {
    let b = bundle(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\npackage \"htop\"\n",
        "h",
    );
    assert!(b.manifest.triggers.is_empty());
}

#[test]
fn upgrade_is_a_resource_after_the_sources() {
    let b = bundle(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\napt upgrade=#true\napt-source \"s\" url=\"file:/srv/repo\" suites=\"./\"\n",
        "h",
    );
    let upgrade = b
        .manifest
        .resources
        .iter()
        .find(|r| r.key() == "apt:upgrade")
        .expect("apt upgrade=#true renders apt:upgrade");
    assert_eq!(upgrade.after, ["apt-source:s"]);
    let plain = bundle(
        "fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\napt upgrade=#false\n",
        "h",
    );
    assert!(plain.manifest.resources.is_empty());
}

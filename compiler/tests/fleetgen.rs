//! The fleet generator: determinism, proportions, labels, and output that the real parsers
//! and tools accept (kdl-rs, serde_json, ssh-keygen, openssl, shellcheck, apparmor_parser).
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use bell_fleetgen::{FleetGen, Inventory, Shape, INVENTORY_PATH, NIC_EVERY, RACKS};
use kdl::{KdlDocument, KdlNode};

type Labels = BTreeMap<String, String>;

const ALL: [(Shape, Inventory); 10] = [
    (Shape::Shared, Inventory::Inline),
    (Shape::Shared, Inventory::Json),
    (Shape::Unique, Inventory::Inline),
    (Shape::Unique, Inventory::Json),
    (Shape::Overridden, Inventory::Inline),
    (Shape::Overridden, Inventory::Json),
    (Shape::Templated, Inventory::Inline),
    (Shape::Templated, Inventory::Json),
    (Shape::Sealed, Inventory::Inline),
    (Shape::Sealed, Inventory::Json),
];

fn fleet(hosts: usize, seed: u64, shape: Shape, inventory: Inventory) -> FleetGen {
    FleetGen {
        hosts,
        seed,
        shape,
        inventory,
    }
}

fn parse_kdl(files: &BTreeMap<String, String>) -> KdlDocument {
    let text = files.get("bell.kdl").expect("bell.kdl is generated");
    KdlDocument::parse_v2(text).unwrap_or_else(|e| panic!("bell.kdl is not KDL 2.0: {e:?}"))
}

fn str_arg(node: &KdlNode, index: usize) -> String {
    node.get(index)
        .and_then(|v| v.as_string())
        .unwrap_or_else(|| panic!("`{}` has no string argument {index}", node.name().value()))
        .to_owned()
}

fn child_str(node: &KdlNode, name: &str) -> String {
    let child = node
        .children()
        .and_then(|c| c.get(name))
        .unwrap_or_else(|| panic!("`{}` has no `{name}` child", node.name().value()));
    str_arg(child, 0)
}

fn top<'a>(doc: &'a KdlDocument, name: &'a str) -> impl Iterator<Item = &'a KdlNode> + 'a {
    doc.nodes().iter().filter(move |n| n.name().value() == name)
}

/// (name, address, labels) of every host, read back from whichever inventory was generated.
fn hosts_of(files: &BTreeMap<String, String>) -> Vec<(String, String, Labels)> {
    let doc = parse_kdl(files);
    if let Some(json) = files.get(INVENTORY_PATH) {
        assert_eq!(top(&doc, "host").count(), 0);
        let inventory = top(&doc, "inventory").next().expect("an inventory node");
        assert_eq!(str_arg(inventory, 0), INVENTORY_PATH);
        let value: serde_json::Value = serde_json::from_str(json).expect("the inventory is JSON");
        let entries = value.as_array().expect("the inventory is a JSON array");
        entries
            .iter()
            .map(|e| {
                let labels = e["labels"]
                    .as_object()
                    .expect("labels is an object")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("a string label").to_owned()))
                    .collect();
                (
                    e["name"].as_str().expect("a name").to_owned(),
                    e["address"].as_str().expect("an address").to_owned(),
                    labels,
                )
            })
            .collect()
    } else {
        top(&doc, "host")
            .map(|node| {
                let mut address = None;
                let mut labels = Labels::new();
                for entry in node.entries().iter().skip(1) {
                    let key = entry.name().expect("a property").value().to_owned();
                    let value = entry.value().as_string().expect("a string").to_owned();
                    if key == "address" {
                        address = Some(value);
                    } else {
                        labels.insert(key, value);
                    }
                }
                (str_arg(node, 0), address.expect("an address"), labels)
            })
            .collect()
    }
}

/// The hosts named by `override … { match host=… }` blocks.
fn host_overrides(doc: &KdlDocument) -> Vec<(String, &KdlNode)> {
    top(doc, "override")
        .filter_map(|o| {
            let m = o.children()?.get("match")?;
            let host = m.get("host")?.as_string()?.to_owned();
            Some((host, o))
        })
        .collect()
}

/// `files` written into a new directory and built there into `out` with `bellc build` and
/// `args`, which must succeed.
fn built(files: &BTreeMap<String, String>, args: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_bellc"))
        .args(["build", "bell.kdl", "-o", "out"])
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn same_seed_gives_the_same_fleet() {
    for (shape, inventory) in ALL {
        let a = fleet(500, 42, shape, inventory).generate();
        let b = fleet(500, 42, shape, inventory).generate();
        assert_eq!(a, b, "{shape:?} {inventory:?}");
        let c = fleet(500, 43, shape, inventory).generate();
        assert_ne!(a, c, "seed 43 must deal roles differently from seed 42");
    }
}

#[test]
fn roles_come_in_ten_seventy_twenty_proportions() {
    for (hosts, control, compute, storage) in [(1000, 100, 700, 200), (37, 4, 26, 7), (1, 0, 1, 0)]
    {
        for (shape, inventory) in ALL {
            let mut counts = BTreeMap::new();
            for (_, _, labels) in hosts_of(&fleet(hosts, 7, shape, inventory).generate()) {
                *counts.entry(labels["role"].clone()).or_insert(0) += 1;
            }
            assert_eq!(counts.get("control").copied().unwrap_or(0), control);
            assert_eq!(counts.get("compute").copied().unwrap_or(0), compute);
            assert_eq!(counts.get("storage").copied().unwrap_or(0), storage);
        }
    }
}

#[test]
fn roles_are_shuffled_not_dealt_in_blocks() {
    let hosts = hosts_of(&fleet(1000, 7, Shape::Shared, Inventory::Inline).generate());
    let first_hundred: BTreeSet<_> = hosts[..100].iter().map(|h| h.2["role"].clone()).collect();
    assert_eq!(
        first_hundred.len(),
        3,
        "all roles among the first 100 hosts"
    );
}

#[test]
fn every_ninth_host_and_only_it_has_the_nic_label() {
    for (shape, inventory) in ALL {
        let hosts = hosts_of(&fleet(100, 1, shape, inventory).generate());
        assert_eq!(hosts.len(), 100);
        for (i, (name, _, labels)) in hosts.iter().enumerate() {
            let expected = (i + 1) % NIC_EVERY == 0;
            assert_eq!(
                labels.get("nic").map(String::as_str) == Some("mlx5"),
                expected,
                "{name}"
            );
            if !expected {
                assert!(!labels.contains_key("nic"), "{name}");
            }
        }
    }
}

#[test]
fn hosts_fill_sixty_four_racks_with_unique_names_and_addresses() {
    let hosts = hosts_of(&fleet(1000, 3, Shape::Shared, Inventory::Json).generate());
    let mut per_rack: BTreeMap<String, usize> = BTreeMap::new();
    for (_, _, labels) in &hosts {
        *per_rack.entry(labels["rack"].clone()).or_insert(0) += 1;
    }
    assert_eq!(per_rack.len(), RACKS);
    assert_eq!(per_rack.keys().next().map(String::as_str), Some("r00"));
    assert_eq!(per_rack.keys().last().map(String::as_str), Some("r63"));
    assert!(
        per_rack.values().all(|&n| n == 15 || n == 16),
        "{per_rack:?}"
    );
    let names: BTreeSet<_> = hosts.iter().map(|h| &h.0).collect();
    let addresses: BTreeSet<_> = hosts.iter().map(|h| &h.1).collect();
    assert_eq!(names.len(), 1000);
    assert_eq!(addresses.len(), 1000);
    for (_, address, _) in &hosts {
        let octets: Vec<u8> = address
            .split('.')
            .map(|o| o.parse().expect("an octet"))
            .collect();
        assert_eq!(octets.len(), 4, "{address}");
        assert_eq!(octets[0], 10, "{address}");
    }
}

#[test]
fn base_configuration_has_the_documented_resources() {
    for (shape, inventory) in ALL {
        let doc = parse_kdl(&fleet(50, 9, shape, inventory).generate());
        let fleet_node = top(&doc, "fleet").next().expect("a fleet node");
        assert_eq!(
            fleet_node.get("target").and_then(|v| v.as_string()),
            Some("debian-12")
        );
        let sysctl = top(&doc, "sysctl").next().expect("a sysctl block");
        assert_eq!(sysctl.children().map(|c| c.nodes().len()), Some(20));
        assert_eq!(top(&doc, "limit").count(), 4);
        let mounts: Vec<_> = top(&doc, "mount").collect();
        assert_eq!(mounts.len(), 2);
        for m in mounts {
            assert_eq!(m.get("type").and_then(|v| v.as_string()), Some("tmpfs"));
        }
        assert_eq!(top(&doc, "ethtool").count(), 1);
        assert_eq!(top(&doc, "user").count(), 3);
        assert_eq!(top(&doc, "exec").count(), 2);
        assert_eq!(top(&doc, "apparmor").count(), 1);
        let label_overrides: Vec<_> = top(&doc, "override")
            .map(|o| o.children().and_then(|c| c.get("match")).expect("a match"))
            .filter(|m| m.get("host").is_none())
            .collect();
        assert_eq!(label_overrides.len(), 4, "three roles and one NIC label");
    }
}

#[test]
fn one_percent_of_hosts_get_a_host_sysctl_override() {
    for (hosts, expected) in [(1000, 10), (250, 3), (20, 1)] {
        let files = fleet(hosts, 5, Shape::Shared, Inventory::Inline).generate();
        let doc = parse_kdl(&files);
        let overrides = host_overrides(&doc);
        assert_eq!(overrides.len(), expected, "{hosts} hosts");
        let names: BTreeSet<_> = hosts_of(&files).into_iter().map(|h| h.0).collect();
        for (host, node) in overrides {
            assert!(names.contains(&host), "override for unknown host {host}");
            let sysctl = node.children().and_then(|c| c.get("sysctl"));
            assert!(sysctl.is_some(), "{host}: no sysctl in its override");
        }
    }
}

#[test]
fn unique_shape_gives_every_host_its_own_file() {
    for inventory in [Inventory::Inline, Inventory::Json] {
        let files = fleet(300, 11, Shape::Unique, inventory).generate();
        // The host overrides are in an included file, a thousand hosts to a file.
        assert!(files["bell.kdl"].contains("include \"overrides/*.kdl\""));
        let parts: Vec<&String> = files
            .keys()
            .filter(|f| f.starts_with("overrides/"))
            .collect();
        assert_eq!(parts, ["overrides/00000.kdl"]);
        let mut all = files.clone();
        all.insert(
            "bell.kdl".into(),
            format!("{}\n{}", files["bell.kdl"], files["overrides/00000.kdl"]),
        );
        let doc = parse_kdl(&all);
        let hosts = hosts_of(&files);
        let overrides = host_overrides(&doc);
        assert_eq!(overrides.len(), hosts.len());
        let mut contents = BTreeSet::new();
        for ((name, _, _), (host, node)) in hosts.iter().zip(&overrides) {
            assert_eq!(name, host);
            let file = node
                .children()
                .and_then(|c| c.get("file"))
                .expect("a file resource");
            let content = child_str(file, "content");
            assert!(
                content.starts_with(&format!("host={name}\n")),
                "{content:?}"
            );
            assert!(!content.contains("{{"), "no templating: {content:?}");
            contents.insert(content);
        }
        assert_eq!(contents.len(), hosts.len(), "contents must all differ");
        let with_sysctl = overrides
            .iter()
            .filter(|(_, n)| n.children().and_then(|c| c.get("sysctl")).is_some())
            .count();
        assert_eq!(with_sysctl, 3, "1 % of 300 hosts");
    }
    let files = fleet(2_500, 11, Shape::Unique, Inventory::Json).generate();
    let parts: Vec<(&String, usize)> = files
        .iter()
        .filter(|(f, _)| f.starts_with("overrides/"))
        .map(|(f, text)| (f, text.matches("\noverride ").count() + 1))
        .collect();
    assert_eq!(
        parts,
        [
            (&"overrides/00000.kdl".to_string(), 1000),
            (&"overrides/00001.kdl".to_string(), 1000),
            (&"overrides/00002.kdl".to_string(), 500)
        ]
    );
}

#[test]
fn overridden_shape_gives_one_host_in_a_hundred_a_bundle_of_its_own() {
    let gen = fleet(2_000, 5, Shape::Overridden, Inventory::Json);
    let files = gen.generate();
    let part = &files["overrides/00000.kdl"];
    let doc: KdlDocument = part.parse().expect("the overrides parse");
    let overrides = host_overrides(&doc);
    assert_eq!(overrides.len(), 20, "1 % of 2,000 hosts");
    for (host, node) in &overrides {
        let children = node.children().expect("a body");
        assert!(children.get("sysctl").is_some(), "{host}: no sysctl");
        let file = children.get("file").expect("a file resource");
        assert!(child_str(file, "content").starts_with(&format!("host={host}\n")));
    }
    // The shared shape's overrides are the same hosts with the same sysctls, without files.
    let shared = fleet(2_000, 5, Shape::Shared, Inventory::Json).generate();
    let shared_doc = parse_kdl(&shared);
    let shared_hosts: Vec<String> = host_overrides(&shared_doc)
        .into_iter()
        .map(|(h, _)| h)
        .collect();
    let hosts: Vec<String> = overrides.iter().map(|(h, _)| h.clone()).collect();
    assert_eq!(hosts, shared_hosts);

    // Built, each of those hosts has a bundle no other host has, and the others share.
    let dir = built(&files, &[]);
    let release: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/release.json")).unwrap(),
    )
    .unwrap();
    let mut users: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (host, entry) in release["hosts"].as_object().unwrap() {
        let bundle = entry["bundle"].as_str().unwrap().to_string();
        users.entry(bundle).or_default().push(host.clone());
    }
    let alone: BTreeSet<String> = users
        .values()
        .filter(|h| h.len() == 1)
        .map(|h| h[0].clone())
        .collect();
    assert_eq!(alone, hosts.into_iter().collect::<BTreeSet<_>>());
    assert!(users.len() < 60, "{} bundles for 2,000 hosts", users.len());
}

#[test]
fn sealed_shape_gives_every_host_an_identity_and_builds_with_its_secrets_sealed() {
    for inventory in [Inventory::Inline, Inventory::Json] {
        let gen = fleet(40, 3, Shape::Sealed, inventory);
        let files = gen.generate();
        assert!(
            !files["bell.kdl"].contains("secrets="),
            "sealed is the default"
        );
        let identities: BTreeSet<String> =
            gen.hosts().into_iter().filter_map(|h| h.identity).collect();
        assert_eq!(identities.len(), 40, "one identity per host, none shared");
        assert_eq!(gen.generate(), files, "drawn from the seed");
        let mut files = files;
        files.insert("seal.key".into(), "k".repeat(32));
        let dir = built(&files, &["--seal-key", "seal.key"]);
        let sealed_to = std::fs::read_dir(dir.path().join("out/secrets"))
            .unwrap()
            .count();
        assert_eq!(sealed_to, 40, "every host has its secrets sealed to it");
    }
    // The other shapes ship them in the clear, as a trial does.
    let files = fleet(5, 3, Shape::Shared, Inventory::Inline).generate();
    assert!(files["bell.kdl"].contains("secrets=\"plaintext\""));
}

#[test]
fn zero_hosts_is_an_empty_but_valid_fleet() {
    for (shape, inventory) in ALL {
        let files = fleet(0, 1, shape, inventory).generate();
        assert!(hosts_of(&files).is_empty());
        assert!(host_overrides(&parse_kdl(&files)).is_empty());
    }
}

/// A tool the test drives for real; `None` (skip) only outside CI.
fn tool(name: &str) -> Option<PathBuf> {
    if !bell_testkit::tool(name) {
        return None;
    }
    bell_testkit::find(name)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the tool runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn users_have_real_ssh_keys_and_sha512_crypt_hashes() {
    let doc = parse_kdl(&fleet(10, 1, Shape::Shared, Inventory::Inline).generate());
    let dir = tempfile::tempdir().expect("a temp dir");
    let users: Vec<_> = top(&doc, "user").collect();
    assert_eq!(users.len(), 3);
    let keygen = tool("ssh-keygen");
    let openssl = tool("openssl");
    for user in users {
        let name = str_arg(user, 0);
        let key = child_str(user, "ssh-key");
        assert!(key.starts_with("ssh-ed25519 "), "{key}");
        if let Some(keygen) = &keygen {
            let file = dir.path().join(format!("{name}.pub"));
            std::fs::write(&file, format!("{key}\n")).expect("write the key");
            let fingerprint = run(Command::new(keygen).arg("-l").arg("-f").arg(&file));
            assert!(fingerprint.contains("(ED25519)"), "{fingerprint}");
        }
        let hash = child_str(user, "password");
        let parts: Vec<&str> = hash.split('$').collect();
        assert_eq!(parts.len(), 4, "{hash}");
        assert_eq!(parts[1], "6", "SHA-512 crypt: {hash}");
        assert_eq!(parts[3].len(), 86, "{hash}");
        if let Some(openssl) = &openssl {
            // The hashes were made from `fleetgen-NAME-password`; recomputing one proves it is
            // a well-formed crypt string and not a look-alike.
            let again = run(Command::new(openssl)
                .args(["passwd", "-6", "-salt", parts[2]])
                .arg(format!("fleetgen-{name}-password")));
            assert_eq!(again.trim_end(), hash);
        }
    }
}

#[test]
fn exec_scripts_pass_shellcheck_and_the_profile_parses() {
    let doc = parse_kdl(&fleet(10, 1, Shape::Shared, Inventory::Inline).generate());
    let dir = tempfile::tempdir().expect("a temp dir");
    if let Some(shellcheck) = tool("shellcheck") {
        for exec in top(&doc, "exec") {
            let script = child_str(exec, "script");
            assert!(script.starts_with("#!/bin/sh\n"), "{script:?}");
            let file = dir.path().join(str_arg(exec, 0));
            std::fs::write(&file, script).expect("write the script");
            run(Command::new(&shellcheck).arg(&file));
        }
    }
    if let Some(parser) = tool("apparmor_parser") {
        let profile = child_str(top(&doc, "apparmor").next().expect("a profile"), "profile");
        let file = dir.path().join("fleet-agent");
        std::fs::write(&file, profile).expect("write the profile");
        // -Q: parse and compile only, never load into the kernel; -K: no cache.
        run(Command::new(parser).args(["-Q", "-K"]).arg(&file));
    }
}

//! `bellc diff OLD NEW --values` and `build --diff OLD --values`: what a release changes, value
//! by value. Between two builds of the three-role example (and of two generated fleets) the
//! diff names exactly the values that differ and the hosts they differ on, as `bellc explain
//! --json` of each spec says them host by host, and where the new spec sets each new value;
//! a changed secret shows as a changed bundle, never as its value; OUT keeps a bundle's values
//! as long as the bundle, and `build --check` finds them missing.

use crate::common::{bellc_in, repo_root, Run, EXAMPLE_KEY};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SEAL_KEY: &str = "keys/seal.key";

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr))
}

/// A copy of `examples/` in `dir`.
fn examples_in(dir: &Path) {
    let status = std::process::Command::new("cp")
        .args(["-r"])
        .arg(repo_root().join("examples"))
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    crate::common::copy_example(&dir.join("examples"), "three-role", "three-role.kdl");
}

/// `bellc build SPEC -o OUT --seal-key … EXTRA…` in `dir`.
fn build_with(dir: &Path, spec: &str, out: &str, extra: &[&str]) -> Run {
    let mut args = vec!["build", spec, "-o", out, "--seal-key", SEAL_KEY];
    args.extend_from_slice(&EXAMPLE_KEY);
    args.extend_from_slice(extra);
    bellc_in(dir, &args)
}

fn build(dir: &Path, spec: &str, out: &str) {
    let run = build_with(dir, spec, out, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// A sysctl key as the values file writes it: dotted unless a segment holds a dot.
fn dotted(key: &str) -> String {
    match key.strip_prefix("sysctl:") {
        Some(path) if !path.split('/').any(|s| s.contains('.')) => {
            format!("sysctl:{}", path.replace('/', "."))
        }
        _ => key.to_string(),
    }
}

/// Every host's values as `bellc explain --json` says them: key → (value, layer, at), and the
/// target under `target`.
type Said = BTreeMap<String, BTreeMap<String, (String, String, String)>>;

fn explained(dir: &Path, spec: &str) -> Said {
    let run = bellc_in(dir, &["explain", spec, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut said = Said::new();
    for group in json(&run)["groups"].as_array().unwrap() {
        let mut values = BTreeMap::new();
        let target = group["target"].as_str().unwrap().to_string();
        values.insert("target".to_string(), (target, String::new(), String::new()));
        for value in group["values"].as_array().unwrap() {
            let text = |k: &str| value[k].as_str().unwrap().to_string();
            // As the values file keeps it: a long value as its size and digest.
            let value = bellc_core::render::values::kept(text("value"));
            values.insert(dotted(&text("key")), (value, text("layer"), text("at")));
        }
        for host in group["hosts"].as_array().unwrap() {
            said.insert(host.as_str().unwrap().to_string(), values.clone());
        }
    }
    said
}

type Changes = BTreeMap<(String, Option<String>, Option<String>), BTreeSet<String>>;

/// What should change, host by host, from what explain says of each spec: each value that
/// differs, and a resource only one side has as one change of all its fields.
fn expected(old: &Said, new: &Said) -> Changes {
    use bellc_core::render::values::split_key;
    let mut changes = Changes::new();
    for (host, after) in new {
        let Some(before) = old.get(host) else {
            continue;
        };
        let heads = |said: &BTreeMap<String, (String, String, String)>| -> BTreeSet<String> {
            said.keys()
                .filter_map(|k| split_key(k).map(|(head, _)| head.to_string()))
                .collect()
        };
        let (heads_before, heads_after) = (heads(before), heads(after));
        let mut whole: BTreeMap<(String, bool), Vec<String>> = BTreeMap::new();
        let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        for key in keys {
            let a = before.get(key).map(|v| v.0.clone());
            let b = after.get(key).map(|v| v.0.clone());
            if a == b {
                continue;
            }
            match (split_key(key), &a, &b) {
                (Some((head, field)), None, Some(v)) if !heads_before.contains(head) => whole
                    .entry((head.to_string(), true))
                    .or_default()
                    .push(format!("{field}={v}")),
                (Some((head, field)), Some(v), None) if !heads_after.contains(head) => whole
                    .entry((head.to_string(), false))
                    .or_default()
                    .push(format!("{field}={v}")),
                _ => {
                    changes
                        .entry((key.clone(), a, b))
                        .or_default()
                        .insert(host.clone());
                }
            }
        }
        for ((head, added), fields) in whole {
            let line = Some(fields.join(" "));
            let change = if added {
                (head, None, line)
            } else {
                (head, line, None)
            };
            changes.entry(change).or_default().insert(host.clone());
        }
    }
    changes
}

/// What the diff says changed.
fn reported(diff: &serde_json::Value) -> Changes {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let hosts = c["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap().to_string())
                .collect();
            (
                (text(&c["key"]).unwrap(), text(&c["old"]), text(&c["new"])),
                hosts,
            )
        })
        .collect()
}

/// Each change's `set_at` is where the new spec sets the value on each of its hosts.
fn check_set_at(diff: &serde_json::Value, new: &Said) {
    for c in diff["changes"].as_array().unwrap() {
        let key = c["key"].as_str().unwrap();
        if c["new"].is_null() || key == "target" {
            assert!(c.get("set_at").is_none(), "{c}");
            continue;
        }
        let mut located = BTreeSet::new();
        for place in c["set_at"].as_array().unwrap() {
            for host in place["hosts"].as_array().unwrap() {
                let host = host.as_str().unwrap();
                // A resource added whole is where its first field's origin says it was declared
                // (explain names the resource's place on its first line).
                let (layer, at) = match new[host].get(key) {
                    Some((_, layer, at)) => (layer.clone(), at.clone()),
                    None => declared(new, host, key),
                };
                assert_eq!(
                    place["layer"].as_str(),
                    Some(layer.as_str()),
                    "{key} {host}"
                );
                assert_eq!(place["at"].as_str(), Some(at.as_str()), "{key} {host}");
                located.insert(host.to_string());
            }
        }
        let hosts: BTreeSet<String> = c["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        assert_eq!(located, hosts, "{key}: every host located once");
    }
}

/// Where explain says the fields of resource `head` were set on `host`: in these specs a
/// resource added whole is declared on one line, which sets every field.
fn declared(said: &Said, host: &str, head: &str) -> (String, String) {
    let places: BTreeSet<(String, String)> = said[host]
        .iter()
        .filter(|(k, _)| k.strip_prefix(head).is_some_and(|f| f.starts_with('.')))
        .map(|(_, (_, layer, at))| (layer.clone(), at.clone()))
        .collect();
    assert_eq!(places.len(), 1, "{host} {head}: {places:?}");
    places.into_iter().next().unwrap()
}

/// `bellc diff OLD NEW --values --json --spec SPEC` in `dir`: exit 1, every change explain's
/// views of the two specs make (and no other), each new value placed where explain says.
fn checked_diff(
    dir: &Path,
    old: &str,
    new: &str,
    spec: &str,
    said: (&Said, &Said),
) -> serde_json::Value {
    let run = bellc_in(
        dir,
        &["diff", old, new, "--values", "--json", "--spec", spec],
    );
    assert_eq!(run.code, 1, "a change exits 1: {}", run.stderr);
    let diff = json(&run);
    assert_eq!(reported(&diff), expected(said.0, said.1));
    check_set_at(&diff, said.1);
    diff
}

#[test]
fn a_value_diff_names_exactly_the_values_changed_and_their_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("examples");
    examples_in(tmp.path());
    let spec = dir.join("three-role.kdl");
    build(&dir, "three-role.kdl", "old");
    let old_said = explained(&dir, "three-role.kdl");

    // A value changed in an override, one in another, a resource added and one removed, and
    // a host gone.
    edit(
        &spec,
        "sysctl { vm.swappiness 1 }",
        "sysctl { vm.swappiness 5 }",
    );
    edit(
        &spec,
        "limit \"nofile\" value=1048576",
        "limit \"nofile\" value=2097152",
    );
    edit(
        &spec,
        "    package \"etcd-server\"\n",
        "    package \"etcd-server\"\n    limit \"nproc\" domain=\"*\" type=\"hard\" item=\"nproc\" value=4096\n",
    );
    edit(
        &spec,
        "    mount \"data\" target=\"/srv/data\" device=\"tmpfs\" type=\"tmpfs\" options=\"size=8G\"\n",
        "",
    );
    // A file's content grown long: kept as its size and digest.
    edit(
        &spec,
        "content \"endpoints=",
        &format!(
            "content \"# {}\\nendpoints=",
            "endpoints of etcd, ".repeat(10)
        ),
    );
    let inventory = dir.join("inventory/three-role.json");
    let mut hosts: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&inventory).unwrap()).unwrap();
    let gone = hosts.pop().unwrap()["name"].as_str().unwrap().to_string();
    std::fs::write(&inventory, serde_json::to_string_pretty(&hosts).unwrap()).unwrap();
    build(&dir, "three-role.kdl", "new");
    let new_said = explained(&dir, "three-role.kdl");

    let diff = checked_diff(&dir, "old", "new", "three-role.kdl", (&old_said, &new_said));
    let want = expected(&old_said, &new_said);
    // What the edit made, in the diff's words (the check above is exhaustive; this says what
    // it was exhaustive about).
    let keys: BTreeSet<&str> = want.keys().map(|(k, _, _)| k.as_str()).collect();
    assert!(keys.contains("sysctl:vm.swappiness"), "{keys:?}");
    assert!(keys.contains("limit:nofile.value"), "{keys:?}");
    assert!(keys.contains("limit:nproc"), "{keys:?}");
    assert!(keys.contains("mount:data"), "{keys:?}");
    let content = want
        .keys()
        .find(|(k, _, _)| k == "file:/etc/myapp/etcd.conf.content")
        .unwrap();
    assert!(
        content
            .2
            .as_ref()
            .unwrap()
            .starts_with("(266 bytes, sha256 "),
        "{content:?}"
    );
    assert_eq!(diff["hosts_removed"], serde_json::json!([gone]));
    assert_eq!(diff["hosts_added"], serde_json::json!([]));
    assert_eq!(diff["bundle_only"], serde_json::json!([]));

    // The same in text: one entry per change, with the place that set it.
    let text = bellc_in(
        &dir,
        &["diff", "old", "new", "--values", "--spec", "three-role.kdl"],
    );
    assert_eq!(text.code, 1);
    assert!(
        text.stdout.contains(
            "~ sysctl:vm.swappiness  1 → 5\n    on cmp-01 cmp-02 cmp-03 cmp-04 cmp-05 cmp-06\n    set by compute  three-role.kdl:33\n"
        ),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!("hosts removed: {gone}\n")),
        "{}",
        text.stdout
    );

    // `build --diff OLD --values` says the same before it writes.
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(dir.join("old"))
        .arg(dir.join("rebuilt"))
        .status()
        .unwrap();
    assert!(status.success());
    let rebuilt = build_with(
        &dir,
        "three-role.kdl",
        "rebuilt",
        &["--diff", "rebuilt", "--values"],
    );
    assert_eq!(rebuilt.code, 1, "{}", rebuilt.stderr);
    assert_eq!(rebuilt.stdout, text.stdout);
    // And the other way round, the host gone is a host added; without the spec, no places.
    let back = json(&bellc_in(
        &dir,
        &["diff", "new", "old", "--values", "--json"],
    ));
    assert_eq!(back["hosts_added"], serde_json::json!([gone]));
    assert_eq!(reported(&back), expected(&new_said, &old_said));
    assert!(back["changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c.get("set_at").is_none()));

    // No change: exit 0.
    let same = bellc_in(&dir, &["diff", "new", "new", "--values"]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert!(same.stdout.starts_with("release "), "{}", same.stdout);
    assert!(
        same.stdout.contains(": 0 value change(s) on 0 host(s)"),
        "{}",
        same.stdout
    );

    // A spec with a mistake says so, with its place, and places nothing.
    std::fs::write(
        dir.join("broken.kdl"),
        "fleet \"lab-east\"\nsysctl { vm.swappiness }\n",
    )
    .unwrap();
    let broken = bellc_in(
        &dir,
        &["diff", "old", "new", "--values", "--spec", "broken.kdl"],
    );
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    assert!(broken.stdout.is_empty(), "{}", broken.stdout);
    assert!(broken.stderr.contains("broken.kdl:2:"), "{}", broken.stderr);
    // --spec is for --values only.
    let usage = bellc_in(&dir, &["diff", "old", "new", "--spec", "three-role.kdl"]);
    assert_eq!(usage.code, 64, "{}", usage.stderr);

    let mut redacted = diff.clone();
    redacted["old_version"] = "[version]".into();
    redacted["new_version"] = "[version]".into();
    insta::assert_json_snapshot!("three_role_value_diff", redacted);
}

#[test]
fn a_changed_secret_is_a_changed_bundle_and_never_its_value() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("examples");
    examples_in(tmp.path());
    build(&dir, "three-role.kdl", "old");
    let before = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8";
    let after = "$6$bellsalt4567$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8";
    // The example's hash is in its encrypted file: encrypted again, changed.
    let file = dir.join("secrets/ops.hash.age");
    let keys = crate::common::example_secrets_identities();
    let hash = bell_seal::at_rest::decrypt(&std::fs::read(&file).unwrap(), &keys).unwrap();
    let hash = String::from_utf8(hash).unwrap().replace(before, after);
    let sealed = bell_seal::at_rest::encrypt(hash.as_bytes(), &[keys[0].recipient()]).unwrap();
    std::fs::write(&file, bell_seal::at_rest::armor(&sealed)).unwrap();
    build(&dir, "three-role.kdl", "new");
    for args in [
        &["diff", "old", "new", "--values", "--json"][..],
        &["diff", "old", "new", "--values", "--spec", "three-role.kdl"][..],
    ] {
        let run = bellc_in(&dir, args);
        assert_eq!(run.code, 1, "{}", run.stderr);
        for hash in [before, after, "bellsalt"] {
            assert!(!run.stdout.contains(hash), "{}", run.stdout);
        }
    }
    // The secret that changed is named, by the keyed digests of the build's seal key, on
    // every host it changed on, with where the spec sets it.
    let diff = json(&bellc_in(
        &dir,
        &[
            "diff",
            "old",
            "new",
            "--values",
            "--json",
            "--spec",
            "three-role.kdl",
        ],
    ));
    let changes = diff["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{diff:#}");
    assert_eq!(changes[0]["key"], "user:ops.password");
    assert_eq!(changes[0]["hosts"].as_array().unwrap().len(), 12);
    assert_eq!(changes[0]["set_at"][0]["at"], "three-role.kdl:15");
    let named = |side: &str| -> String {
        let shown = changes[0][side].as_str().unwrap();
        let digest = shown
            .strip_prefix("\"<secret ")
            .and_then(|d| d.strip_suffix(">\""))
            .unwrap_or_else(|| panic!("{shown}"));
        assert!(digest.len() == 16 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
        digest.to_string()
    };
    assert_ne!(named("old"), named("new"));
    assert_eq!(diff["bundle_only"], serde_json::json!([]));
    // The digest is keyed: another seal key names the same hash otherwise.
    let other = bellc_in(
        &dir,
        &[
            &[
                "build",
                "three-role.kdl",
                "-o",
                "other",
                "--seal-key",
                "three-role.kdl",
            ][..],
            &EXAMPLE_KEY,
        ]
        .concat(),
    );
    assert_eq!(other.code, 0, "{}", other.stderr);
    let keyed = |out: &str| -> BTreeSet<String> {
        std::fs::read_dir(dir.join(out).join("values"))
            .unwrap()
            .map(|entry| {
                let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
                assert!(!text.contains("bellsalt"), "{text}");
                let line = text
                    .lines()
                    .find(|l| l.contains("user:ops.password"))
                    .unwrap();
                line.trim().to_string()
            })
            .collect()
    };
    assert_eq!(keyed("new").len(), 1, "one hash, one name");
    assert!(keyed("new").iter().all(|l| l.contains(&named("new"))));
    assert!(keyed("other").is_disjoint(&keyed("new")));
    // The file-level diff names the sealed script by its keyed digests too.
    let files = bellc_in(&dir, &["diff", "old", "new"]);
    assert!(
        files.stdout.contains("(secret content changed: keyed "),
        "{}",
        files.stdout
    );
}

#[test]
fn out_keeps_a_bundles_values_as_long_as_the_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("examples");
    examples_in(tmp.path());
    let spec = dir.join("three-role.kdl");
    let ids = |out: &str| -> BTreeSet<String> {
        std::fs::read_dir(dir.join(out).join("bundles"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let valued = |out: &str| -> BTreeSet<String> {
        std::fs::read_dir(dir.join(out).join("values"))
            .unwrap()
            .map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json").unwrap().to_string()
            })
            .collect()
    };
    build(&dir, "three-role.kdl", "out");
    let first = ids("out");
    assert_eq!(valued("out"), first);
    edit(
        &spec,
        "sysctl { vm.swappiness 1 }",
        "sysctl { vm.swappiness 5 }",
    );
    build(&dir, "three-role.kdl", "out");
    // The old release is kept, and its bundles' values with it.
    assert!(ids("out").len() > first.len());
    assert_eq!(valued("out"), ids("out"));
    let pruned = bellc_in(&dir, &["prune", "out", "--keep", "0"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(ids("out").len() < first.len() + 1 || ids("out") != first);
    assert_eq!(
        valued("out"),
        ids("out"),
        "prune takes the values with the bundle"
    );

    // A values file gone missing is found by `build --check`, and put back by a build.
    let id = ids("out").into_iter().next().unwrap();
    let values = dir.join("out/values").join(format!("{id}.json"));
    std::fs::remove_file(&values).unwrap();
    let check = build_with(&dir, "three-role.kdl", "out", &["--check"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    let diff = bellc_in(&dir, &["diff", "out", "out", "--values"]);
    assert_eq!(
        diff.code, 0,
        "no bundle changed, so no values are read: {}",
        diff.stderr
    );
    let run = build_with(&dir, "three-role.kdl", "out", &["--force"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(values.is_file());

    // A values directory that is a link out of OUT is refused before anything is written, and
    // a link planted as a values file is replaced, not written through.
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::rename(dir.join("out/values"), tmp.path().join("kept-values")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("out/values")).unwrap();
    edit(
        &spec,
        "sysctl { vm.swappiness 5 }",
        "sysctl { vm.swappiness 4 }",
    );
    let run = build_with(&dir, "three-role.kdl", "out", &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("is not a directory (a symlink or a file)"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    std::fs::remove_file(dir.join("out/values")).unwrap();
    std::fs::rename(tmp.path().join("kept-values"), dir.join("out/values")).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    // The bundles the next build writes are those a build elsewhere makes that OUT lacks.
    let mut planted = 0;
    build(&dir, "three-role.kdl", "probe");
    for id in ids("probe").difference(&ids("out")) {
        let link = dir.join("out/values").join(format!("{id}.json"));
        std::os::unix::fs::symlink(&victim, link).unwrap();
        planted += 1;
    }
    assert!(planted > 0);
    build(&dir, "three-role.kdl", "out");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    assert_eq!(valued("out"), ids("out"));
    edit(
        &spec,
        "sysctl { vm.swappiness 4 }",
        "sysctl { vm.swappiness 5 }",
    );

    // An output without values (an older bellc's) says which file and what to do.
    build(&dir, "three-role.kdl", "other");
    edit(
        &spec,
        "sysctl { vm.swappiness 5 }",
        "sysctl { vm.swappiness 6 }",
    );
    build(&dir, "three-role.kdl", "newer");
    std::fs::remove_dir_all(dir.join("other/values")).unwrap();
    let run = bellc_in(&dir, &["diff", "other", "newer", "--values"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("other/values/"), "{}", run.stderr);
    assert!(run.stderr.contains("build other again"), "{}", run.stderr);

    // A values file that is a symlink is not followed.
    std::fs::create_dir(dir.join("other/values")).unwrap();
    let secret = tmp.path().join("outside.json");
    std::fs::write(&secret, "{\"format\":1,\"target\":\"x\",\"values\":{}}").unwrap();
    for id in ids("other") {
        std::os::unix::fs::symlink(&secret, dir.join("other/values").join(format!("{id}.json")))
            .unwrap();
    }
    let run = bellc_in(&dir, &["diff", "other", "newer", "--values"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("is not a regular file"),
        "{}",
        run.stderr
    );
}

#[test]
fn between_two_generated_fleets_the_diff_is_what_explain_says_host_by_host() {
    use bell_fleetgen::{FleetGen, Inventory, Shape};
    let tmp = tempfile::tempdir().unwrap();
    let mut said = Vec::new();
    for (side, seed) in [("old", 11), ("new", 12)] {
        let fleet = FleetGen {
            hosts: 300,
            seed,
            shape: Shape::Shared,
            inventory: Inventory::Json,
        };
        let dir = tmp.path().join(side);
        for (path, text) in fleet.generate() {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let run = bellc_in(&dir, &["build", "bell.kdl", "-o", "out"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        said.push(explained(&dir, "bell.kdl"));
    }
    let dir = tmp.path().join("new");
    let old_out = tmp.path().join("old/out");
    let diff = checked_diff(
        &dir,
        old_out.to_str().unwrap(),
        "out",
        "bell.kdl",
        (&said[0], &said[1]),
    );
    assert!(
        diff["changes"].as_array().unwrap().len() > 10,
        "the seeds make different fleets: {diff}"
    );
}

//! `bellc query`: one value across the hosts of the three-role example. Its groups say what
//! `bellc explain` says host by host (value, layer, `file:line`), every selected host is in one
//! group or among those without; `--where` selects what `match` would and a glob what it
//! names; secrets stay hidden; mistakes are usage errors that say what would be right.

use crate::common::{bellc_in, example_secrets_key, repo_root, Run};
use std::collections::BTreeMap;

/// `bellc ARGS` in `examples/`, with the key that opens its secrets.
fn examples(args: &[&str]) -> Run {
    let key = example_secrets_key();
    bellc_in(
        &repo_root().join("examples"),
        &[args, &["--secrets-key", &key.to_string_lossy()]].concat(),
    )
}

fn json(run: &Run) -> serde_json::Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// Every host of the example with its labels, as `bellc hosts --json` lists them.
fn hosts() -> BTreeMap<String, BTreeMap<String, String>> {
    let listed = json(&examples(&["hosts", "three-role.kdl", "--json"]));
    listed
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, h)| {
            let labels = h["labels"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            (name.clone(), labels)
        })
        .collect()
}

/// What `bellc explain HOST` says of the line that starts with `starts`: (value, comment).
fn explained(host: &str, starts: &str) -> Option<(String, String)> {
    let run = examples(&["explain", host, "three-role.kdl"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix(starts)?;
        let (value, comment) = rest.split_once("//")?;
        Some((value.trim().to_string(), comment.trim().to_string()))
    })
}

#[test]
fn a_sysctl_across_the_fleet_is_what_explain_says_host_by_host() {
    let all = hosts();
    let answer = json(&examples(&[
        "query",
        "sysctl:vm.swappiness",
        "three-role.kdl",
        "--json",
    ]));
    assert_eq!(answer["format"], 1);
    assert_eq!(answer["hosts"], all.len());
    let item = &answer["items"][0];
    assert_eq!(item["key"], "sysctl:vm.swappiness");
    let mut seen = Vec::new();
    for group in item["groups"].as_array().unwrap() {
        for host in group["hosts"].as_array().unwrap() {
            let host = host.as_str().unwrap();
            let (value, comment) = explained(host, "vm.swappiness ").expect("explain has it");
            assert_eq!(value, group["value"].as_str().unwrap(), "{host}");
            assert_eq!(
                comment,
                format!(
                    "{}  {}",
                    group["layer"].as_str().unwrap(),
                    group["at"].as_str().unwrap()
                ),
                "{host}"
            );
            seen.push(host.to_string());
        }
    }
    seen.extend(
        item["without"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string()),
    );
    seen.sort();
    assert_eq!(seen, all.keys().cloned().collect::<Vec<_>>());
    // The compute override sets 1; everything else has the base's 10.
    let values: Vec<(&str, &str)> = item["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["value"].as_str().unwrap(), g["layer"].as_str().unwrap()))
        .collect();
    assert!(values.contains(&("10", "base")), "{values:?}");
    assert!(values.contains(&("1", "compute")), "{values:?}");
    insta::assert_snapshot!(
        "query_swappiness_json",
        serde_json::to_string_pretty(&answer).unwrap()
    );
    let text = examples(&["query", "sysctl:vm.swappiness", "three-role.kdl"]);
    insta::assert_snapshot!("query_swappiness_text", text.stdout);
}

#[test]
fn where_selects_what_match_would_and_a_glob_what_it_names() {
    let all = hosts();
    let compute: Vec<&String> = all
        .iter()
        .filter(|(_, labels)| labels.get("role").map(String::as_str) == Some("compute"))
        .map(|(name, _)| name)
        .collect();
    assert!(!compute.is_empty());
    let answer = json(&examples(&[
        "query",
        "mount:scratch.target",
        "three-role.kdl",
        "--where",
        "role=compute",
        "--json",
    ]));
    assert_eq!(answer["hosts"], compute.len());
    let group = &answer["items"][0]["groups"][0];
    assert_eq!(group["value"], "\"/srv/scratch\"");
    assert_eq!(group["layer"], "compute");
    assert_eq!(group["hosts"].as_array().unwrap().len(), compute.len());
    assert!(answer["items"][0]["without"].as_array().unwrap().is_empty());

    // A glob: the first host's name with its last character a `?`.
    let first = all.keys().next().unwrap();
    let glob = format!("{}?", &first[..first.len() - 1]);
    let named: Vec<&String> = all
        .keys()
        .filter(|h| h.len() == first.len() && h.starts_with(&first[..first.len() - 1]))
        .collect();
    let answer = json(&examples(&[
        "query",
        "limit:nofile.value",
        &glob,
        "three-role.kdl",
        "--json",
    ]));
    assert_eq!(answer["hosts"], named.len(), "{answer:#}");

    // A limit: the base's 65536, the storage hosts' 1048576; both on one line each.
    let answer = json(&examples(&[
        "query",
        "limit:nofile.value",
        "--json",
        "three-role.kdl",
    ]));
    let values: Vec<&str> = answer["items"][0]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["65536", "1048576"]);

    // Every mount: scratch on compute hosts, data on storage hosts, each without the others.
    let answer = json(&examples(&["query", "mount:*", "three-role.kdl", "--json"]));
    let keys: Vec<&str> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["mount:data", "mount:scratch"]);
    for item in answer["items"].as_array().unwrap() {
        let with: usize = item["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["hosts"].as_array().unwrap().len())
            .sum();
        assert_eq!(with + item["without"].as_array().unwrap().len(), all.len());
    }
}

#[test]
fn secrets_stay_hidden_and_mistakes_say_what_is_right() {
    let answer = json(&examples(&[
        "query",
        "user:ops.password",
        "three-role.kdl",
        "--json",
    ]));
    let hidden = "\"<secret from secrets/ops.hash.age>\"";
    assert_eq!(answer["items"][0]["groups"][0]["value"], hidden);
    let whole = examples(&["query", "user:ops", "three-role.kdl"]);
    assert!(
        whole.stdout.contains(&format!("password={hidden}")),
        "{}",
        whole.stdout
    );
    assert!(!whole.stdout.contains("$6$"), "{}", whole.stdout);
    // A reviewer who holds no key reads the same: the secret was never needed to say where
    // it comes from.
    for args in [
        &["query", "user:ops", "three-role.kdl"][..],
        &["explain", "cmp-01", "three-role.kdl"],
    ] {
        let without = bellc_in(&repo_root().join("examples"), args);
        assert_eq!(without.code, 0, "{}", without.stderr);
        assert!(without.stdout.contains(hidden), "{}", without.stdout);
        assert_eq!(
            without.stdout,
            examples(args).stdout,
            "with and without the key"
        );
    }
    // A build is not a review: it fails without the key, naming the file.
    let build = bellc_in(&repo_root().join("examples"), &["hosts", "three-role.kdl"]);
    assert_eq!(build.code, 1);
    assert!(
        build.stderr.contains("secrets/ops.hash.age") && build.stderr.contains("--secrets-key"),
        "{}",
        build.stderr
    );

    // A setting's field; a field left to its default is said so, where its resource is.
    let answer = json(&examples(&[
        "query",
        "users.purge-expired",
        "three-role.kdl",
        "--json",
    ]));
    assert_eq!(
        answer["items"][0]["groups"][0]["value"], "#false",
        "{answer:#}"
    );
    assert_eq!(answer["items"][0]["groups"][0]["at"], "three-role.kdl:13");
    let answer = json(&examples(&[
        "query",
        "file:/etc/myapp/etcd.conf.mode",
        "three-role.kdl",
        "--json",
    ]));
    let item = &answer["items"][0];
    assert_eq!(item["groups"][0]["value"], "(default)", "{answer:#}");
    assert_eq!(item["groups"][0]["layer"], "compute", "{answer:#}");
    assert_eq!(item["without"].as_array().unwrap().len(), 6, "{answer:#}");

    for (args, says) in [
        (vec!["query", "nosuch:x", "three-role.kdl"], "is not a kind"),
        (
            vec!["query", "user", "three-role.kdl"],
            "`user:NAME[.FIELD]`",
        ),
        (
            vec!["query", "apt.nosuch", "three-role.kdl"],
            "has no field `nosuch`",
        ),
        (
            vec![
                "query",
                "sysctl:vm.swappiness",
                "nobody-*",
                "three-role.kdl",
            ],
            "no host of the spec is selected by nobody-*",
        ),
        (
            vec![
                "query",
                "sysctl:vm.swappiness",
                "--where",
                "role",
                "three-role.kdl",
            ],
            "is not LABEL=VALUE",
        ),
    ] {
        let run = examples(&args);
        assert_eq!(run.code, 64, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn explain_groups_hosts_that_share_a_configuration_and_names_what_was_overridden() {
    let all = hosts();
    let role = |name: &str| all[name]["role"].clone();
    // Every host: one group per role (the layers differ), each with its hosts.
    let answer = json(&examples(&[
        "explain",
        "three-role.kdl",
        "--json",
        "--overridden",
    ]));
    let groups = answer["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 3, "{answer:#}");
    let mut seen: Vec<String> = Vec::new();
    for group in groups {
        let names: Vec<&str> = group["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        assert!(names.iter().all(|h| role(h) == role(names[0])), "{names:?}");
        seen.extend(names.iter().map(|h| h.to_string()));
        // Each value is what `query` says for the group's hosts.
        let values = group["values"].as_array().unwrap();
        let swappiness = values
            .iter()
            .find(|v| v["key"] == "sysctl:vm.swappiness")
            .unwrap();
        let asked = json(&examples(&[
            "query",
            "sysctl:vm.swappiness",
            names[0],
            "three-role.kdl",
            "--json",
        ]));
        let one = &asked["items"][0]["groups"][0];
        assert_eq!(
            (
                &swappiness["value"],
                &swappiness["layer"],
                &swappiness["at"]
            ),
            (&one["value"], &one["layer"], &one["at"])
        );
        // What an override changed names every lower value.
        let overridden = swappiness.get("overridden");
        if role(names[0]) == "compute" {
            assert_eq!(
                overridden.unwrap(),
                &serde_json::json!([{"value": "10", "layer": "base", "at": "three-role.kdl:10"}])
            );
        } else {
            assert!(overridden.is_none(), "{swappiness}");
        }
        let nofile = values
            .iter()
            .find(|v| v["key"] == "limit:nofile.value")
            .unwrap();
        if role(names[0]) == "storage" {
            assert_eq!(nofile["value"], "1048576");
            assert_eq!(nofile["overridden"][0]["value"], "65536", "{nofile}");
        }
    }
    seen.sort();
    assert_eq!(seen, all.keys().cloned().collect::<Vec<_>>());

    // As text, a group is one configuration after its hosts' lines.
    let text = examples(&["explain", "cmp-*", "three-role.kdl", "--overridden"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("// 6 hosts with this configuration\n"),
        "{}",
        text.stdout
    );
    assert_eq!(
        text.stdout.matches("// layers:").count(),
        1,
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("// compute  three-role.kdl:32 · over 10  base  three-role.kdl:10"),
        "{}",
        text.stdout
    );
    insta::assert_snapshot!(
        "explain_storage_overridden",
        examples(&[
            "explain",
            "--where",
            "role=storage",
            "three-role.kdl",
            "--overridden",
        ])
        .stdout
    );

    insta::assert_snapshot!(
        "explain_storage_json",
        examples(&[
            "explain",
            "sto-0*",
            "three-role.kdl",
            "--json",
            "--overridden"
        ])
        .stdout
    );

    // The hosts an override applies to, and `hosts` with the same selectors.
    let compute: Vec<&str> = all
        .keys()
        .filter(|h| role(h) == "compute")
        .map(String::as_str)
        .collect();
    let matched = json(&examples(&[
        "explain",
        "--override",
        "compute",
        "three-role.kdl",
        "--json",
    ]));
    assert_eq!(matched["hosts"], serde_json::json!(compute));
    assert_eq!(matched["at"], "three-role.kdl:30");
    insta::assert_snapshot!(
        "explain_override_json",
        serde_json::to_string_pretty(&matched).unwrap()
    );
    let listed = json(&examples(&[
        "hosts",
        "three-role.kdl",
        "--where",
        "role=compute",
        "--json",
    ]));
    let listed: Vec<&String> = listed.as_object().unwrap().keys().collect();
    assert_eq!(listed, compute);
    let typo = examples(&["explain", "--override", "compte", "three-role.kdl"]);
    assert_eq!(typo.code, 64);
    assert!(
        typo.stderr.contains("did you mean `compute`?"),
        "{}",
        typo.stderr
    );
}

#[test]
fn on_a_generated_fleet_query_agrees_with_explain_and_where_with_match() {
    use bell_fleetgen::{FleetGen, Inventory, Shape};
    let fleet = FleetGen {
        hosts: 300,
        seed: 11,
        shape: Shape::Shared,
        inventory: Inventory::Json,
    };
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in fleet.generate() {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let run = |args: &[&str]| json(&bellc_in(dir.path(), args));

    // What explain says of every sysctl, host by host.
    let explained = run(&["explain", "bell.kdl", "--json"]);
    let mut said: BTreeMap<(String, String), serde_json::Value> = BTreeMap::new();
    for group in explained["groups"].as_array().unwrap() {
        for host in group["hosts"].as_array().unwrap() {
            for value in group["values"].as_array().unwrap() {
                let key = value["key"].as_str().unwrap();
                if key.starts_with("sysctl:") {
                    let one = serde_json::json!([value["value"], value["layer"], value["at"]]);
                    said.insert((host.as_str().unwrap().into(), key.into()), one);
                }
            }
        }
    }
    // Every sysctl of every host, asked across the fleet: the same, and nothing more.
    let asked = run(&["query", "sysctl:*", "bell.kdl", "--json"]);
    assert_eq!(asked["hosts"], 300);
    let mut answered = 0;
    for item in asked["items"].as_array().unwrap() {
        let key = item["key"].as_str().unwrap();
        for group in item["groups"].as_array().unwrap() {
            let one = serde_json::json!([group["value"], group["layer"], group["at"]]);
            for host in group["hosts"].as_array().unwrap() {
                let host = host.as_str().unwrap().to_string();
                assert_eq!(
                    said.get(&(host.clone(), key.into())),
                    Some(&one),
                    "{host} {key}"
                );
                answered += 1;
            }
        }
        for host in item["without"].as_array().unwrap() {
            let host = host.as_str().unwrap().to_string();
            assert!(!said.contains_key(&(host, key.into())), "{key}");
        }
    }
    assert_eq!(answered, said.len());

    // Each label override's `match`, given as `--where`, selects the hosts it applies to.
    let spec = std::fs::read_to_string(dir.path().join("bell.kdl")).unwrap();
    let doc = kdl::KdlDocument::parse_v2(&spec).unwrap();
    let mut checked = 0;
    for node in doc
        .nodes()
        .iter()
        .filter(|n| n.name().value() == "override")
    {
        let name = node.get(0).and_then(|v| v.as_string()).unwrap();
        let matches: Vec<&kdl::KdlNode> = node
            .children()
            .map(|c| {
                c.nodes()
                    .iter()
                    .filter(|n| n.name().value() == "match")
                    .collect()
            })
            .unwrap_or_default();
        let [only] = matches.as_slice() else { continue };
        let condition: Vec<String> = only
            .entries()
            .iter()
            .filter_map(|e| Some(format!("{}={}", e.name()?.value(), e.value().as_string()?)))
            .collect();
        if condition.iter().any(|c| c.starts_with("host=")) {
            continue;
        }
        let selected = run(&[
            "hosts",
            "bell.kdl",
            "--where",
            &condition.join(","),
            "--json",
        ]);
        let selected: Vec<&String> = selected.as_object().unwrap().keys().collect();
        let applied = run(&["explain", "--override", name, "bell.kdl", "--json"]);
        let mut applied: Vec<&str> = applied["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        applied.sort();
        assert_eq!(selected, applied, "override {name}");
        assert!(!applied.is_empty(), "override {name}");
        checked += 1;
    }
    assert!(checked >= 3, "{checked} label overrides checked");
}

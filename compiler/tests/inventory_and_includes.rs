//! Hosts from inline nodes, JSON inventories (plain lists and `kubectl get nodes -o json`),
//! and spec files pulled in with `include` globs, with include cycles reported.
use crate::common::*;

const KUBECTL: &str = r#"{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"metadata": {"name": "k8s-a", "labels": {"node-role.kubernetes.io/worker": "", "rack": "r1"}},
     "status": {"addresses": [{"type": "Hostname", "address": "k8s-a"}, {"type": "InternalIP", "address": "10.1.0.1"}]}},
    {"metadata": {"name": "k8s-b", "labels": {"rack": "r2"}},
     "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.2"}]}}
  ]
}"#;

#[test]
fn kubectl_nodes_become_hosts_with_labels_and_internal_ip() {
    let fx = Fixture::spec(
        "fleet \"k\" target=\"debian-12\"\ninventory \"nodes.json\"\nhost \"inline\" rack=\"r3\"\n",
    )
    .file("nodes.json", KUBECTL);
    let run = fx.bellc(&["hosts", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hosts: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(hosts["k8s-a"]["address"], "10.1.0.1");
    assert_eq!(hosts["k8s-a"]["labels"]["rack"], "r1");
    assert_eq!(
        hosts["k8s-a"]["labels"]["node-role.kubernetes.io/worker"],
        ""
    );
    assert_eq!(hosts["k8s-b"]["address"], "10.1.0.2");
    assert_eq!(hosts["inline"]["address"], serde_json::Value::Null);
}

#[test]
fn a_host_in_the_spec_and_in_the_inventory_is_a_duplicate() {
    let fx = Fixture::spec(
        "fleet \"k\" target=\"debian-12\"\nhost \"k8s-b\"\ninventory \"nodes.json\"\n",
    )
    .file("nodes.json", KUBECTL);
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1);
    assert!(
        run.diagnostics()
            .iter()
            .any(|d| d.starts_with("nodes.json:7:27: error[bell::lower::duplicate]: host `k8s-b`")),
        "{}",
        run.stderr
    );
}

#[test]
fn a_broken_inventory_points_into_the_json() {
    let fx = Fixture::spec("fleet \"k\" target=\"debian-12\"\ninventory \"hosts.json\"\n").file(
        "hosts.json",
        "[\n  {\"name\": \"a\"},\n  {\"name\": \"b\", \"adress\": \"x\"}\n]\n",
    );
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1);
    let diags = run.diagnostics();
    assert!(diags[0].starts_with("hosts.json:3:"), "{}", run.stderr);
    assert!(
        diags[0].contains("unknown field `adress`"),
        "{}",
        run.stderr
    );
}

#[test]
fn include_globs_are_relative_to_the_including_file_and_sorted() {
    let fx = Fixture::spec("fleet \"g\" target=\"debian-12\"\ninclude \"conf.d/*.kdl\"\n")
        .file(
            "conf.d/20-hosts.kdl",
            "host \"b\"\ninclude \"../more/*.kdl\"\n",
        )
        .file("conf.d/10-hosts.kdl", "host \"a\"\n")
        .file("conf.d/ignored.txt", "not kdl")
        .file("more/x.kdl", "host \"c\"\nsysctl { vm.swappiness 5 }\n");
    let run = fx.bellc(&["hosts"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names: Vec<&str> = run
        .stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let explain = fx.bellc(&["explain", "a"]);
    assert!(
        explain.stdout.contains("    vm.swappiness 5 "),
        "{}",
        explain.stdout
    );
    assert!(
        explain.stdout.contains("more/x.kdl:2"),
        "{}",
        explain.stdout
    );
}

#[test]
fn an_include_cycle_is_reported_with_its_chain() {
    let fx = Fixture::spec("fleet \"c\" target=\"debian-12\"\nhost \"a\"\ninclude \"one.kdl\"\n")
        .file("one.kdl", "include \"two.kdl\"\n")
        .file("two.kdl", "include \"bell.kdl\"\n");
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 1, "{}", run.stderr);
    assert!(
        diags[0].starts_with("two.kdl:1:9: error[bell::load::include_cycle]: include cycle: bell.kdl → one.kdl → two.kdl → bell.kdl"),
        "{}",
        diags[0]
    );
}

#[test]
fn an_include_glob_that_matches_nothing_is_a_warning() {
    let fx =
        Fixture::spec("fleet \"c\" target=\"debian-12\"\nhost \"a\"\ninclude \"none/*.kdl\"\n");
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.diagnostics()[0].contains("warning[bell::load::empty_glob]"),
        "{}",
        run.stderr
    );
    assert_eq!(fx.bellc(&["--deny-warnings", "check"]).code, 1);
}

#[test]
fn duplicates_are_told_against_the_first_host_that_was_kept() {
    // `a` in the inventory is dropped as a duplicate, so its address is no one's: `d` may have
    // it. `c` shares the address of `a` in the spec, which `b` shared first.
    let fx = Fixture::spec(
        "fleet \"k\" target=\"debian-12\"\nhost \"a\" address=\"10.0.0.1\"\ninventory \"hosts.json\"\n",
    )
    .file(
        "hosts.json",
        r#"[
  {"name": "b", "address": "10.0.0.1"},
  {"name": "a", "address": "10.0.0.9"},
  {"name": "c", "address": "10.0.0.1"},
  {"name": "d", "address": "10.0.0.9"}
]
"#,
    );
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let told = run.diagnostics();
    let expected = [
        "hosts.json:2:12: warning[bell::lower::duplicate_address]: address 10.0.0.1 is given to `b` and to `a`",
        "hosts.json:3:12: error[bell::lower::duplicate]: host `a`",
        "hosts.json:4:12: warning[bell::lower::duplicate_address]: address 10.0.0.1 is given to `c` and to `a`",
    ];
    for line in expected {
        assert!(
            told.iter().any(|d| d.starts_with(line)),
            "{line}\n{}",
            run.stderr
        );
    }
    assert_eq!(told.len(), 3, "{}", run.stderr);
}

//! `bellc diff OLD NEW` and `bellc build --diff OLD`: two builds of examples/three-role.kdl
//! that differ in one label override name exactly the hosts of that label, once, with the
//! changed line; identical builds are no change (exit 0).
use crate::common::*;

/// A copy of the example (spec, inventory and secrets) in a temporary directory.
fn example() -> Fixture {
    Fixture::example("three-role", "three-role.kdl")
}

fn edit(f: &Fixture, from: &str, to: &str) {
    let path = f.path().join("three-role.kdl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(from).count(), 1, "the example changed: {from}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

fn compute_hosts(f: &Fixture) -> Vec<String> {
    let inventory: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(f.path().join("inventory/three-role.json")).unwrap(),
    )
    .unwrap();
    let mut hosts: Vec<String> = inventory
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["labels"]["role"] == "compute")
        .map(|h| h["name"].as_str().unwrap().to_string())
        .collect();
    hosts.sort();
    hosts
}

#[test]
fn one_label_override_changes_exactly_its_hosts() {
    let f = example();
    let run = f.bellc(&["build", "three-role.kdl", "-o", "old"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    edit(
        &f,
        "sysctl { vm.swappiness 1 }",
        "sysctl { vm.swappiness 7 }",
    );
    let run = f.bellc(&["build", "three-role.kdl", "-o", "new"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let run = f.bellc(&["diff", "old", "new", "--json"]);
    assert_eq!(run.code, 1, "changes exit 1: {}", run.stderr);
    let d: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let changes = d["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "one bundle change: {}", run.stdout);
    let change = &changes[0];
    let hosts: Vec<String> = change["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect();
    let expected = compute_hosts(&f);
    assert!(!expected.is_empty());
    assert_eq!(hosts, expected);
    assert!(d["added"].as_object().unwrap().is_empty());
    assert!(d["removed"].as_object().unwrap().is_empty());
    assert_eq!(
        d["unchanged"].as_array().unwrap().len(),
        12 - expected.len()
    );

    let files = change["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{}", run.stdout);
    assert_eq!(files[0]["path"], "/etc/sysctl.d/60-bell.conf");
    assert_eq!(files[0]["change"], "changed");
    let diff = files[0]["diff"].as_str().unwrap();
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .collect();
    assert_eq!(changed, ["-vm.swappiness = 1", "+vm.swappiness = 7"]);
    let resources: Vec<&str> = change["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["sysctl:vm.swappiness"]);

    // The text form names the same hosts once and ends with the summary.
    let run = f.bellc(&["diff", "old", "new"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains(&format!("  hosts: {}", expected.join(", "))),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("      -vm.swappiness = 1\n      +vm.swappiness = 7\n"),
        "{}",
        run.stdout
    );
    let last = run.stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "{} host(s) changed in 1 bundle change(s), 0 added, 0 removed",
            expected.len()
        )),
        "{last}"
    );

    // No change: exit 0.
    let run = f.bellc(&["diff", "new", "new"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.starts_with("no change: 12 hosts"),
        "{}",
        run.stdout
    );
}

#[test]
fn build_diff_compares_before_overwriting_and_sees_hosts_come_and_go() {
    let f = example();
    let run = f.bellc(&["build", "three-role.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Rebuilding into the same directory with --diff against itself: no change.
    let run = f.bellc(&["build", "three-role.kdl", "-o", "out", "--diff", "out"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("no change"), "{}", run.stdout);

    // A host leaves the inventory and the storage override changes a limit: the diff is taken
    // against OUT as it was, before the build replaced it.
    let path = f.path().join("inventory/three-role.json");
    let mut inv: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let gone = inv.pop().unwrap()["name"].as_str().unwrap().to_string();
    std::fs::write(&path, serde_json::to_string_pretty(&inv).unwrap()).unwrap();
    edit(
        &f,
        "limit \"nofile\" value=1048576",
        "limit \"nofile\" value=524288",
    );
    let run = f.bellc(&["build", "three-role.kdl", "-o", "out", "--diff", "out"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(&format!("removed hosts: {gone}")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("~ file /etc/security/limits.d/60-bell.conf"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("524288"), "{}", run.stdout);
    // And OUT is the new build.
    let run = f.bellc(&["build", "three-role.kdl", "-o", "out", "--check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn diff_of_something_that_is_not_a_build_is_an_error() {
    let f = example();
    std::fs::create_dir_all(f.path().join("empty")).unwrap();
    let run = f.bellc(&["diff", "empty", "empty"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("the output of `bellc build`"),
        "{}",
        run.stderr
    );
}

//! A spec with ten different mistakes reports all ten in one run, each with its line and
//! column, and exits 1.
use crate::common::*;

const SPEC: &str = r#"fleet "typos" target="debian-12"
host "a" address="10.0.0.1" role="web"
host "a" address="10.0.0.2" role="web"
sysctll { net.ipv4.ip_forward 1 }
sysctl { net..ipv4.ip_forward 1 }
mount "m" taget="/mnt" device="tmpfs" type="tmpfs"
users purge-expired="false"
package "htop"
package "htop"
limit "nofile" domain="root" type="soft" value=10
include "missing.kdl"
inventory "nodes.json"
include "broken.kdl"
override "web" {
    match role="web"
    remove "mount:mnt"
}
override "db" {
    match role="db"
    sysctl { vm.swappiness 1 }
}
"#;

#[test]
fn ten_mistakes_are_reported_in_one_run() {
    let fx = Fixture::spec(SPEC).file("broken.kdl", "sysctl {\n  vm.swappiness 1\n");
    let run = fx.bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    let expected = [
        ("bell.kdl:3:6:", "error[bell::lower::duplicate]: host `a` is declared twice"),
        ("bell.kdl:4:1:", "error[bell::lower::unknown_node]: unknown node `sysctll` at the top level"),
        ("bell.kdl:5:10:", "error[bell::lower::invalid_value]:"),
        ("bell.kdl:6:11:", "error[bell::lower::unknown_property]: unknown property `taget` on `mount`"),
        ("bell.kdl:7:7:", "error[bell::lower::wrong_type]: `users purge-expired` expects a boolean"),
        ("bell.kdl:9:9:", "error[bell::lower::duplicate]: resource `package:htop` is declared twice"),
        ("bell.kdl:10:7:", "error[bell::resolve::missing_property]: `limit:nofile` is missing its required `item`"),
        ("bell.kdl:11:9:", "error[bell::load::unreadable]: cannot read included file `missing.kdl`: no such file"),
        ("bell.kdl:12:11:", "error[bell::load::unreadable]: cannot read inventory `nodes.json`: no such file"),
        ("bell.kdl:16:12:", "error[bell::resolve::unknown_removal]: `remove` names `mount:mnt`, which no layer declares"),
        ("bell.kdl:19:11:", "warning[bell::resolve::unknown_label]: no host carries the label `role=db`"),
        ("bell.kdl:18:1:", "warning[bell::resolve::unmatched_override]: override `db` matches no host"),
        ("broken.kdl:", "error[bell::parse::syntax]:"),
    ];
    for (location, message) in expected {
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with(location) && d.contains(message)),
            "missing `{location} {message}` in:\n{}",
            diags.join("\n")
        );
    }
    let errors = diags.iter().filter(|d| d.contains(": error[")).count();
    assert!(errors >= 10, "{}", diags.join("\n"));
}

#[test]
fn every_error_has_a_help_line_and_points_at_the_source() {
    let fx = Fixture::spec(SPEC).file("broken.kdl", "sysctl {\n  vm.swappiness 1\n");
    let run = fx.bellc(&["check"]);
    let reports: Vec<&str> = run
        .stderr
        .split("\n\n")
        .filter(|r| r.contains("×") || r.contains("⚠"))
        .collect();
    assert!(reports.len() >= 10, "{}", run.stderr);
    for report in reports {
        assert!(report.contains("help:"), "no help line in:\n{report}");
        assert!(report.contains("╭─["), "no source excerpt in:\n{report}");
    }
}

#[test]
fn did_you_mean_suggests_the_closest_name() {
    let fx = Fixture::spec(SPEC).file("broken.kdl", "");
    let run = fx.bellc(&["check"]);
    assert!(
        run.stderr.contains("did you mean `sysctl`?"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("did you mean `target`?"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("booleans are written `#false`, without quotes"),
        "{}",
        run.stderr
    );
}

/// The reports as a user sees them (no colour, 80 columns), reviewed as a snapshot.
#[test]
fn the_reports_read_well() {
    let fx = Fixture::spec(SPEC).file("broken.kdl", "sysctl {\n  vm.swappiness 1\n");
    let run = fx.bellc(&["check"]);
    insta::assert_snapshot!(run.stderr);
}

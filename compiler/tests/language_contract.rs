//! Every snippet of LANGUAGE.md is accepted, as one file and split across includes.
use crate::common::*;

/// The contract's snippet, verbatim (tests/fixtures/language/bell.kdl), with an inventory and
/// an included file so that its `inventory` and `include` nodes resolve.
fn contract() -> std::path::PathBuf {
    repo_root().join("compiler/tests/fixtures/language")
}

#[test]
fn the_verbatim_snippet_only_trips_on_its_elided_placeholders() {
    // The snippet elides the password hash and the SSH key with "....", and the same contract
    // says both are checked at build time; those two are the only complaints (besides that the
    // hash, being written in the spec, would be in the clear in its repository).
    let run = bellc_in(&contract(), &["--short", "check"]);
    let diags: Vec<&str> = run
        .diagnostics()
        .into_iter()
        .filter(|d| !d.contains("warning[bell::lower::plaintext_secret_in_spec]"))
        .collect();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(diags.len(), 2, "{}", run.stderr);
    assert!(
        diags[0].starts_with("bell.kdl:25:14: error[bell::lower::invalid_value]: password hash"),
        "{}",
        diags[0]
    );
    assert!(
        diags[1].starts_with("bell.kdl:26:13: error[bell::lower::invalid_value]:"),
        "{}",
        diags[1]
    );
}

/// The snippet with real values where it elides them; its hosts have no identities, so it
/// ships its password hash as a trial does (`secrets="plaintext"`).
fn completed_snippet() -> String {
    let text = std::fs::read_to_string(contract().join("bell.kdl")).unwrap();
    text.replacen(
        "fleet \"lab-east\" target=\"ubuntu-24.04\"",
        "fleet \"lab-east\" target=\"ubuntu-24.04\" secrets=\"plaintext\"",
        1,
    )
    .replace(
        "$6$rounds=5000$saltsaltsalt$....",
        "$6$rounds=5000$saltsaltsalt$kDyYp1vRkTsW64cyoTQmPsKQjpmR/gJOw5YvJ4.XSXAfHb6a5T9L4WrEyB3DBbpcjLGHVZr0YFkqTLHTL93ha/",
    )
    .replace(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA... ops@example",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example",
    )
}

fn completed_fixture(spec: &str) -> Fixture {
    let inventory = std::fs::read_to_string(contract().join("inventory/nodes.json")).unwrap();
    let common = std::fs::read_to_string(contract().join("common/base.kdl")).unwrap();
    Fixture::spec(spec)
        .file("inventory/nodes.json", &inventory)
        .file("common/base.kdl", &common)
}

#[test]
fn the_completed_snippet_checks_clean() {
    let fx = completed_fixture(&completed_snippet());
    let run = fx.bellc(&["--short", "check"]);
    let errors: Vec<_> = run
        .diagnostics()
        .into_iter()
        .filter(|d| d.contains("error["))
        .collect();
    assert!(errors.is_empty(), "{}", run.stderr);
}

#[test]
fn the_snippet_split_across_includes_resolves_identically() {
    let text = completed_snippet();
    // Split at the section comments: the head and the inventory section stay in the root
    // (their paths are relative to it); every later section goes into its own included file.
    let sections: Vec<&str> = text.split("// ---- ").collect();
    let main = format!("{}// ---- {}", sections[0], sections[1]);
    let parts: Vec<String> = sections[2..]
        .iter()
        .map(|s| format!("// ---- {s}"))
        .collect();
    let mut fx = completed_fixture(&main);
    for (i, part) in parts.iter().enumerate() {
        fx = fx.file(&format!("parts/{i:02}.kdl"), part);
    }
    // `include "parts/*.kdl"` in the root, after the head (fleet + hosts + inventory + include).
    let root = format!("{main}\ninclude \"parts/*.kdl\"\n");
    let fx = fx.file("bell.kdl", &root);
    let whole = completed_fixture(&text);
    let split_explain = fx.bellc(&["explain", "superhost"]);
    let whole_explain = whole.bellc(&["explain", "superhost"]);
    assert_eq!(split_explain.code, 0, "{}", split_explain.stderr);
    assert_eq!(whole_explain.code, 0, "{}", whole_explain.stderr);
    let values = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split("  // ").next().unwrap_or("").trim_end().to_string())
            .collect()
    };
    assert_eq!(values(&split_explain.stdout), values(&whole_explain.stdout));
    let a = fx.bellc(&["hosts", "--json"]);
    let b = whole.bellc(&["hosts", "--json"]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(a.stdout, b.stdout, "same hosts, same bundles");
}

#[test]
fn explain_shows_which_override_and_line_set_a_value() {
    let fx = completed_fixture(&completed_snippet());
    let run = fx.bellc(&["explain", "superhost"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("    fs.file-max"))
        .expect("fs.file-max in explain output");
    assert!(line.starts_with("    fs.file-max 12345 "), "{line}");
    assert!(line.ends_with("// superhost  bell.kdl:90"), "{line}");
    // The key removed with #null by the same override is gone.
    assert!(
        !run.stdout.contains("net.ipv6.conf.all.forwarding"),
        "{}",
        run.stdout
    );
    // And its `remove` took the mount and the package away.
    assert!(!run.stdout.contains("mount \"mnt\""), "{}", run.stdout);
    assert!(!run.stdout.contains("package \"htop\""), "{}", run.stdout);
}

//! `bellc explain` prints a spec: every host of the examples, explained, is a spec that builds
//! (with a `fleet` line before it) to the same configuration, and, where the host needs no
//! other host (no `uses`), to the very same bundle. Secrets show as `"<secret>"` (`"<secret from
//! secrets/ops.hash.age>"` when an encrypted file held them); the test puts the password back
//! before building, as a reader pasting the output would.
use crate::common::*;
use bellc_core::diagnostic::Diagnostics;
use bellc_core::resolve::ResolvedHost;
use bellc_core::source::Sources;
use bellc_core::spec::Value;
use std::collections::BTreeMap;

type Facts = (
    BTreeMap<String, String>,
    Vec<(String, String, BTreeMap<String, Value>)>,
);

/// What a host is configured with, without where it was said.
fn facts(host: &ResolvedHost) -> Facts {
    let sysctl = host
        .model
        .sysctl
        .iter()
        .map(|(k, v)| (k.clone(), v.value.clone()))
        .collect();
    let resources = host
        .model
        .resources
        .iter()
        .map(|r| {
            let fields = r
                .fields
                .iter()
                .map(|(k, (v, _))| (k.to_string(), v.clone()))
                .collect();
            (r.kind.keyword().to_string(), r.name.clone(), fields)
        })
        .collect();
    (sysctl, resources)
}

#[test]
fn every_explained_host_of_the_examples_builds_back_to_itself() {
    let examples = repo_root().join("examples");
    let mut hosts_seen = 0;
    let mut bundles_compared = 0;
    for name in ["three-role.kdl", "divingbell.kdl"] {
        let path = examples.join(name);
        let (compiled, lines) = compile_path(&path, Some(&examples));
        let compiled = compiled.unwrap_or_else(|| panic!("{name}: {lines:#?}"));
        let mut sources = Sources::with_base(examples.clone());
        sources.open_secrets_with(example_secrets_identities());
        let mut diags = Diagnostics::new();
        let front = bellc_core::frontend(&path, &mut sources, &mut diags).expect("front end");
        for host in &front.resolution.hosts {
            hosts_seen += 1;
            let explained = bellc_core::review::explain::explain(&front.spec, host, &sources);
            // The examples' password comes from an encrypted file, and explain says which.
            let hidden = "password \"<secret from secrets/";
            assert!(explained.contains(hidden) == explained.contains("password "));
            let mut text = format!(
                "fleet {:?} target={:?}\n{explained}",
                front.spec.fleet.name, host.target
            );
            if let Some(r) = host
                .model
                .resources
                .iter()
                .find(|r| r.fields.contains_key("password"))
            {
                let Some((Value::Str(hash), _)) = r.fields.get("password") else {
                    panic!("a password is a string");
                };
                let line = text
                    .lines()
                    .find(|l| l.trim_start().starts_with(hidden))
                    .expect("the password line")
                    .to_string();
                text = text.replace(&line, &format!("    password {hash:?}"));
            }
            let dir = tempfile::tempdir().unwrap();
            let spec = dir.path().join("bell.kdl");
            std::fs::write(&spec, &text).unwrap();
            let (again, lines) = compile_path(&spec, Some(dir.path()));
            let uses = !host.model.uses.is_empty();
            let errors: Vec<&String> = lines.iter().filter(|l| l.contains(": error[")).collect();
            if !uses {
                assert!(errors.is_empty(), "{}:\n{text}\n{errors:#?}", host.name);
            }
            // Facts from the front end alone (a host with `uses` cannot build without its peers).
            let mut sources2 = Sources::with_base(dir.path().to_path_buf());
            let mut diags2 = Diagnostics::new();
            let front2 =
                bellc_core::frontend(&spec, &mut sources2, &mut diags2).expect("front end");
            assert_eq!(front2.resolution.hosts.len(), 1);
            assert_eq!(
                facts(&front2.resolution.hosts[0]),
                facts(host),
                "{}:\n{text}",
                host.name
            );
            if !uses {
                let again = again.expect("builds");
                assert_eq!(
                    again.release.hosts[&host.name].bundle,
                    compiled.release.hosts[&host.name].bundle,
                    "{}: the bundle differs:\n{text}",
                    host.name
                );
                bundles_compared += 1;
            }
        }
    }
    assert!(hosts_seen >= 6, "{hosts_seen}");
    assert!(bundles_compared >= 3, "{bundles_compared}");
}

//! `--verify`: every host resolved under Divingbell's rules, straight from the values, against
//! what the written spec resolves to for it.
//!
//! Divingbell's side is a spec of one host with no overrides at all: each module's values as
//! Divingbell's rule picks and merges them for that host. Both specs go through bellc's own
//! lowering and resolution, so what is compared is what bellc would build, field by field.

use super::accounts;
use super::modules::Module;
use super::values::Values;
use super::write::write_decls;
use bellc_core::diagnostic::Diagnostics;
use bellc_core::front::inventory::Entry;
use bellc_core::kdl_text::{ident, string};
use bellc_core::render::values::scalar;
use bellc_core::resolve::{Model, Resolution};
use bellc_core::source::Sources;
use bellc_core::spec::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One way a host's resolved configuration differs from Divingbell's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub host: String,
    pub module: String,
    pub key: String,
    pub divingbell: Option<String>,
    pub spec: Option<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "nothing".into());
        write!(
            f,
            "host `{}`, module {}, `{}`: Divingbell gives {}, the spec gives {}",
            self.host,
            self.module,
            self.key,
            show(&self.divingbell),
            show(&self.spec)
        )
    }
}

/// Hosts that exercise every override when no inventory is given: one with no labels, one per
/// label value, one with the first value of every label (several overrides at once), and every
/// host an override names, with those labels too.
pub fn probe_hosts(values: &Values) -> Vec<Entry> {
    let mut labels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in values.selectors.values() {
        labels
            .entry(s.key.clone())
            .or_default()
            .push(s.value.clone());
    }
    let mut names = Vec::new();
    for overrides in values.overrides.values() {
        for l in &overrides.labels {
            let known = labels.entry(l.key.clone()).or_default();
            for v in &l.values {
                if !known.contains(v) {
                    known.push(v.clone());
                }
            }
        }
        names.extend(overrides.hosts.iter().map(|h| h.name.clone()));
    }
    let all: BTreeMap<String, String> = labels
        .iter()
        .filter_map(|(k, vs)| Some((k.clone(), vs.first()?.clone())))
        .collect();
    let entry = |name: String, labels: BTreeMap<String, String>| Entry {
        name,
        address: None,
        labels: labels.into(),
        identity: None,
        accepted: None,
        offset: 0,
    };
    let mut hosts = vec![entry("probe-plain".into(), BTreeMap::new())];
    for (k, vs) in &labels {
        for (i, v) in vs.iter().enumerate() {
            hosts.push(entry(
                format!("probe-{}-{i}", hosts.len()),
                BTreeMap::from([(k.clone(), v.clone())]),
            ));
        }
    }
    hosts.push(entry("probe-all".into(), all.clone()));
    names.sort();
    names.dedup();
    for name in names {
        if !hosts.iter().any(|h| h.name == name) {
            hosts.push(entry(name, all.clone()));
        }
    }
    hosts
}

/// What a verification compared, and what differs.
#[derive(Debug, Default)]
pub struct Verified {
    pub differences: Vec<Difference>,
    pub hosts: usize,
    /// Resources (and sysctl keys) compared, summed over hosts.
    pub compared: usize,
}

/// Compares every host of `hosts` (the spec's own hosts when it has them, appended to its text
/// when not); `target` is the spec's.
pub fn verify(
    values: &Values,
    spec: &str,
    hosts: &[Entry],
    with_hosts: bool,
    target: &str,
) -> Result<Verified, String> {
    let mut text = spec.to_string();
    if !with_hosts {
        for h in hosts {
            text.push_str(&host_line(h));
        }
    }
    let written = resolve_text(&text, "the written spec")?;
    let mut verified = Verified::default();
    let mut references: BTreeMap<Vec<String>, Model> = BTreeMap::new();
    for resolved in &written.hosts {
        let Some(host) = hosts.iter().find(|h| h.name == resolved.name) else {
            continue;
        };
        let mut reference = format!(
            "fleet \"divingbell\" target={}\n{}",
            string(target),
            host_line(&Entry {
                name: "h".into(),
                ..host.clone()
            })
        );
        let mut chosen = Vec::new();
        for module in Module::ALL {
            if !values.base.contains_key(&module) && !values.overrides.contains_key(&module) {
                continue;
            }
            if !values.runs_on(module, &host.labels) {
                chosen.push(format!("{module:?}-not-here"));
                continue;
            }
            let choice = values.choice(module, &host.name, &host.labels);
            chosen.push(format!("{module:?}{choice:?}"));
            let decls = values
                .declarations(module, &values.conf(module, choice), "")
                .decls;
            write_decls(&mut reference, "", &decls, &[], &mut Vec::new());
        }
        let expected = match references.get(&chosen) {
            Some(model) => model.clone(),
            None => {
                let resolution = resolve_text(&reference, "Divingbell's configuration")?;
                let Some(h) = resolution.hosts.first() else {
                    return Err("Divingbell's configuration resolves to no host".into());
                };
                let model = (*h.model).clone();
                references.insert(chosen, model.clone());
                model
            }
        };
        let (compared, differences) = compare(&host.name, &expected, &resolved.model);
        verified.hosts += 1;
        verified.compared += compared;
        verified.differences.extend(differences);
        // What lands beyond the declarations, each side worked out on its own: Divingbell's
        // from the values by uamlite's rules, the spec's from what bellc builds of it.
        let (compared, differences) = compare_outcomes(
            &host.name,
            &divingbell_outcomes(values, host),
            &spec_outcomes(&resolved.model, &resolved.target),
        );
        verified.compared += compared;
        verified.differences.extend(differences);
    }
    Ok(verified)
}

/// Effects on a host beyond its declared resources, by what they touch: `default-account:ubuntu`
/// (whether the image's account is expired) and `user:NAME authorized_keys`.
type Outcomes = BTreeMap<String, String>;

fn divingbell_outcomes(values: &Values, host: &Entry) -> Outcomes {
    let mut outcomes = Outcomes::new();
    let module = Module::Uamlite;
    let runs = (values.base.contains_key(&module) || values.overrides.contains_key(&module))
        && values.runs_on(module, &host.labels);
    // What uamlite reads on this host, when it runs here at all.
    let conf = runs.then(|| values.conf(module, values.choice(module, &host.name, &host.labels)));
    let account = &values.account;
    if !account.is_empty() {
        let expired = conf
            .as_ref()
            .is_some_and(|c| accounts::divingbell_expires(c, values.rules, account));
        let declared = conf
            .as_ref()
            .is_some_and(|c| user_entries(c).any(|(n, _)| n == account));
        if !declared {
            outcomes.insert(format!("default-account:{account}"), expired_text(expired));
        }
    }
    for (name, user) in conf.iter().flat_map(user_entries) {
        outcomes.insert(
            format!("user:{name} authorized_keys"),
            accounts::keys(user, values.rules).to_string(),
        );
    }
    outcomes
}

fn user_entries(conf: &crate::yaml::Node) -> impl Iterator<Item = (&str, &crate::yaml::Node)> {
    conf.get("users")
        .and_then(|u| u.items())
        .unwrap_or_default()
        .iter()
        .filter_map(|u| Some((u.get("user_name")?.scalar()?, u)))
}

fn expired_text(expired: bool) -> String {
    if expired { "expired" } else { "left as it is" }.to_string()
}

fn spec_outcomes(model: &Model, target: &str) -> Outcomes {
    let mut outcomes = Outcomes::new();
    if let Some(target) = bellc_core::targets::get(target) {
        let account = &target.default_account;
        let managed = model
            .of_kind(bellc_core::spec::Kind::USER)
            .any(|u| &u.name == account);
        if !account.is_empty() && !managed {
            let implied = bellc_core::kinds::implied(model, target);
            let key = format!("default-account:{account}");
            let expired = implied.iter().any(|i| i.key == key);
            outcomes.insert(key, expired_text(expired));
        }
    }
    for user in model.of_kind(bellc_core::spec::Kind::USER) {
        let keys = if user.str("ssh-keys") == Some("unmanaged") {
            accounts::Keys::Unmanaged
        } else if user.list("ssh-key").is_empty() {
            accounts::Keys::Emptied
        } else {
            accounts::Keys::Written(user.list("ssh-key").to_vec())
        };
        outcomes.insert(
            format!("user:{} authorized_keys", user.name),
            keys.to_string(),
        );
    }
    outcomes
}

fn compare_outcomes(
    host: &str,
    divingbell: &Outcomes,
    spec: &Outcomes,
) -> (usize, Vec<Difference>) {
    let mut keys: Vec<&String> = divingbell.keys().chain(spec.keys()).collect();
    keys.sort();
    keys.dedup();
    let differences = keys
        .iter()
        .filter(|k| divingbell.get(**k) != spec.get(**k))
        .map(|k| Difference {
            host: host.to_string(),
            module: "uamlite".into(),
            key: (*k).clone(),
            divingbell: divingbell.get(*k).cloned(),
            spec: spec.get(*k).cloned(),
        })
        .collect();
    (keys.len(), differences)
}

/// What bellc's checks say of the written spec, pointed back at the values it came from.
pub struct Finding {
    /// An error (bellc refuses the spec) or a warning.
    pub error: bool,
    /// The values' span; `None` for what no declaration holds.
    pub span: Option<bellc_core::source::Span>,
    pub message: String,
    pub help: Option<String>,
}

/// What bellc refuses or warns of in the written spec, each once however many hosts meet it.
/// That the spec has no hosts is the import's to say, not a finding.
pub fn refusals(
    spec: &str,
    map: &super::write::SourceMap,
    hosts: &[Entry],
    with_hosts: bool,
    secrets_moved: bool,
) -> Vec<Finding> {
    // What the import moves into encrypted files is not written in the spec it leaves.
    let moved = match secrets_moved {
        true => bellc_core::front::lower::movable_secrets(spec),
        false => Vec::new(),
    };
    let mut text = spec.to_string();
    if !with_hosts {
        for h in hosts {
            text.push_str(&host_line(h));
        }
    }
    let mut sources = Sources::new();
    let file = sources.add(Path::new("bell.kdl"), text);
    let mut diags = Diagnostics::new();
    let lowered = bellc_core::front::lower::lower_root(file, &mut sources, &mut diags);
    // The checks of `bellc check` short of services: resolution, each kind's, the graph.
    let resolution =
        bellc_core::resolve::resolve(&lowered, &bellc_core::targets::names(), &mut diags);
    bellc_core::kinds::check_hosts(&resolution.hosts, &sources, &mut diags);
    let _ =
        bellc_core::graph::order_hosts(&resolution.hosts, &lowered.rejected, &sources, &mut diags);
    let mut seen = std::collections::BTreeSet::new();
    diags
        .iter()
        .filter(|d| {
            !matches!(
                d.downcast_ref::<bellc_core::resolve::ResolveError>(),
                Some(bellc_core::resolve::ResolveError::NoHosts { .. })
            )
        })
        .filter(|d| {
            let code = d.code().map(|c| c.to_string());
            let at = d.labels().and_then(|mut l| l.next()).map(|l| l.offset());
            !(code.as_deref() == Some("bell::lower::plaintext_secret_in_spec")
                && at.is_some_and(|at| moved.contains(&at)))
        })
        .filter_map(|d| {
            let at = d.labels().and_then(|mut l| l.next()).map(|l| l.offset());
            let span = at.and_then(|at| super::write::source_at(map, at));
            let message = d.to_string();
            let error = bellc_core::diagnostic::is_error(d);
            let key = (error, span.map(|s| (s.file.0, s.offset)), message.clone());
            seen.insert(key).then(|| Finding {
                error,
                span,
                message,
                help: d.help().map(|h| h.to_string()),
            })
        })
        .collect()
}

fn host_line(h: &Entry) -> String {
    let mut line = format!("host {}", string(&h.name));
    for (k, v) in h.labels.iter() {
        line.push_str(&format!(" {}={}", ident(k), string(v)));
    }
    line.push('\n');
    line
}

fn resolve_text(text: &str, what: &str) -> Result<Resolution, String> {
    let mut sources = Sources::new();
    let file = sources.add(Path::new("bell.kdl"), text.to_string());
    let mut diags = Diagnostics::new();
    let spec = bellc_core::front::lower::lower_root(file, &mut sources, &mut diags);
    let resolution = bellc_core::resolve::resolve(&spec, &bellc_core::targets::names(), &mut diags);
    if diags.has_errors() {
        let lines = diags.to_short_lines(&sources);
        return Err(format!("{what} does not resolve:\n{}", lines.join("\n")));
    }
    Ok(resolution)
}

/// `sysctl net/ipv4/ip_forward` or `mount:mnt target`, to what it holds.
fn facts(model: &Model) -> BTreeMap<(String, String), String> {
    let mut facts = BTreeMap::new();
    for (path, v) in model.sysctl.iter() {
        facts.insert(("sysctl".to_string(), path.clone()), v.value.clone());
    }
    for r in &model.resources {
        let module = match r.kind.keyword() {
            "limit" => "limits",
            "mount" => "mounts",
            "user" | "users" => "uamlite",
            "package" | "apt" | "apt-source" => "apt",
            other => other,
        };
        facts.insert((module.to_string(), r.key()), "declared".into());
        for (field, value) in defaults(r.kind.keyword()) {
            facts.insert(
                (module.to_string(), format!("{} {field}", r.key())),
                scalar(&value),
            );
        }
        for (field, (value, _)) in &r.fields {
            facts.insert(
                (module.to_string(), format!("{} {field}", r.key())),
                scalar(value),
            );
        }
    }
    facts
}

/// A property left out is its default: `sudo=#false` written is `user_sudo` left out.
fn defaults(kind: &str) -> Vec<(&'static str, Value)> {
    let text = |s: &str| Value::Str(s.to_string());
    match kind {
        "user" => vec![("sudo", Value::Bool(false))],
        "exec" => vec![
            ("rerun", text("always")),
            ("timeout", Value::Int(1800)),
            ("on-failure", text("continue")),
            ("background", Value::Bool(false)),
        ],
        "apparmor" => vec![("mode", text("enforce"))],
        "apt" => vec![
            ("upgrade", Value::Bool(false)),
            ("allow-downgrade", Value::Bool(false)),
        ],
        "users" => vec![
            ("purge-expired", Value::Bool(false)),
            ("default-account", text("auto")),
        ],
        _ => Vec::new(),
    }
}

/// How many resources either side holds, and how the two differ.
fn compare(host: &str, divingbell: &Model, spec: &Model) -> (usize, Vec<Difference>) {
    let (want, got) = (facts(divingbell), facts(spec));
    let mut keys: Vec<&(String, String)> = want.keys().chain(got.keys()).collect();
    keys.sort();
    keys.dedup();
    // A resource is one fact without a field (`mount:mnt`); a sysctl key is one fact.
    let compared = keys
        .iter()
        .filter(|(module, key)| module == "sysctl" || !key.contains(' '))
        .count();
    let differences = keys
        .into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .map(|(module, key)| {
            // Password hashes and debconf answers are compared, never shown.
            let secret = key.ends_with(" password") || key.ends_with(" debconf");
            let show = |facts: &BTreeMap<(String, String), String>| {
                facts.get(&(module.clone(), key.clone())).map(|v| {
                    if secret {
                        "a secret (not shown)".to_string()
                    } else {
                        v.clone()
                    }
                })
            };
            Difference {
                host: host.to_string(),
                module: module.clone(),
                key: key.clone(),
                divingbell: show(&want),
                spec: show(&got),
            }
        })
        .collect();
    (compared, differences)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::divingbell::values;
    use crate::divingbell::write::{spec, Options};
    use bellc_core::source::FileId;

    const VALUES: &str = "conf:\n  sysctl:\n    net.ipv4.ip_forward: 1\n  overrides:\n    divingbell_sysctl:\n      labels:\n      - label: {key: role, values: [edge]}\n        conf:\n          sysctl:\n            net.ipv4.ip_forward: 0\n";

    fn written(values: &Values) -> String {
        let options = Options {
            fleet: "f",
            target: "debian-12",
            source: "values.yaml",
            hosts: &[],
            all_labels: None,
        };
        spec(values, &options, &|_| "line 1".into(), &mut Vec::new()).text
    }

    #[test]
    fn a_spec_that_expires_the_image_account_where_divingbell_keeps_it_is_a_difference() {
        // Sudo and a key, no password: uamlite (since 77be358) keeps `debian`'s counterpart.
        let values = "conf:\n  uamlite:\n    users:\n    - user_name: op\n      user_sudo: true\n      user_sshkeys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 op\n";
        let root = crate::yaml::parse(FileId(0), values).unwrap();
        let values = values::read(&root, Default::default(), "debian");
        let text = written(&values);
        assert!(text.contains("users default-account=\"keep\""), "{text}");
        let hosts = probe_hosts(&values);
        let verified = verify(&values, &text, &hosts, false, "debian-12").unwrap();
        assert_eq!(verified.differences, []);
        // Two probe hosts, each: op, the `users` setting, op's keys and the image's account.
        assert_eq!((verified.hosts, verified.compared), (2, 8));
        let bellcs_rule = text.replace("users default-account=\"keep\"", "");
        let differences = verify(&values, &bellcs_rule, &hosts, false, "debian-12")
            .unwrap()
            .differences;
        let said: Vec<String> = differences.iter().map(ToString::to_string).collect();
        assert!(
            said.contains(&"host `probe-plain`, module uamlite, `default-account:debian`: Divingbell gives left as it is, the spec gives expired".to_string()),
            "{said:?}"
        );
    }

    #[test]
    fn a_spec_that_gives_a_host_another_value_is_a_difference() {
        let root = crate::yaml::parse(FileId(0), VALUES).unwrap();
        let values = values::read(&root, Default::default(), "debian");
        let text = written(&values);
        let hosts = probe_hosts(&values);
        assert_eq!(
            verify(&values, &text, &hosts, false, "debian-12")
                .unwrap()
                .differences,
            []
        );
        // The override forgotten: the edge host keeps forwarding on.
        let broken = text.replace("net.ipv4.ip_forward 0", "net.ipv4.ip_forward 1");
        let differences = verify(&values, &broken, &hosts, false, "debian-12")
            .unwrap()
            .differences;
        // The host with that label alone, and the one with every label.
        assert_eq!(differences.len(), 2, "{differences:?}");
        assert_eq!(
            differences[0].to_string(),
            "host `probe-1-0`, module sysctl, `net/ipv4/ip_forward`: Divingbell gives 0, the spec gives 1"
        );
    }
}

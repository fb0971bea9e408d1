//! The README's Prometheus alert rules, checked with Debian's `promtool`: that they load
//! (`promtool check rules`), that every metric a rule names is one `bellc serve` announces, and
//! which of them fire over what `/metrics` served, held for three hours (`promtool test rules`,
//! Prometheus's own rule evaluation, so a rule's `for:` counts).

use super::have;
use std::path::Path;
use std::process::Command;
use yaml_rust2::{Yaml, YamlLoader};

/// One alerting rule as the README gives it.
struct Alert {
    name: String,
    expr: String,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
}

/// The rules of the README's alert-rules block, written into a directory of their own.
pub struct Rules {
    dir: tempfile::TempDir,
    alerts: Vec<Alert>,
}

/// The first ```yaml block after the heading `heading` of the on-call chapter.
fn readme_block(heading: &str) -> String {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/on-call.md");
    let text = std::fs::read_to_string(&readme).expect("docs/on-call.md");
    let (_, after) = text
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/on-call.md has no heading `{heading}`"));
    let (_, block) = after.split_once("```yaml\n").expect("a yaml block");
    block
        .split_once("```")
        .expect("the block's end")
        .0
        .to_string()
}

fn pairs(yaml: &Yaml) -> Vec<(String, String)> {
    yaml.as_hash()
        .map(|hash| {
            hash.iter()
                .map(|(k, v)| {
                    let value = v
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| v.as_i64().map(|n| n.to_string()))
                        .expect("a string value");
                    (k.as_str().expect("a key").to_string(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Rules {
    /// The README's rules; `None` (a skip) only outside CI when promtool is not installed.
    pub fn from_readme() -> Option<Rules> {
        if !have("promtool") {
            return None;
        }
        let text = readme_block("### Alert rules");
        let docs = YamlLoader::load_from_str(&text).expect("the rules are YAML");
        let mut alerts = Vec::new();
        for group in docs[0]["groups"].as_vec().expect("groups") {
            for rule in group["rules"].as_vec().expect("rules") {
                alerts.push(Alert {
                    name: rule["alert"].as_str().expect("an alert name").to_string(),
                    expr: rule["expr"].as_str().expect("an expression").to_string(),
                    labels: pairs(&rule["labels"]),
                    annotations: pairs(&rule["annotations"]),
                });
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bell.rules.yml"), &text).expect("write rules");
        let rules = Rules { dir, alerts };
        let run = promtool(
            rules.dir.path(),
            &["check", "rules", "bell.rules.yml"],
            None,
        );
        assert!(run.0, "promtool check rules: {}", run.1);
        Some(rules)
    }

    pub fn names(&self) -> Vec<&str> {
        self.alerts.iter().map(|a| a.name.as_str()).collect()
    }

    /// Checks `metrics` with promtool's parser and linter, that every `bell_` metric a rule
    /// names is announced in it, then evaluates every rule over it and asserts that exactly
    /// `firing` fire: (alert name, the labels of the series that fires it).
    pub fn assert_firing(&self, metrics: &str, firing: &[(&str, &[(&str, &str)])]) {
        let (ok, said) = promtool(self.dir.path(), &["check", "metrics"], Some(metrics));
        assert!(ok, "promtool check metrics: {said}\n{metrics}");
        for alert in &self.alerts {
            for name in metric_names(&alert.expr) {
                assert!(
                    metrics.contains(&format!("# TYPE {name} ")),
                    "rule {} names {name}, which /metrics does not announce",
                    alert.name
                );
            }
        }
        for (name, _) in firing {
            assert!(self.names().contains(name), "no rule {name}");
        }
        std::fs::write(
            self.dir.path().join("test.yml"),
            self.test_file(metrics, firing),
        )
        .expect("write the test");
        let (ok, said) = promtool(self.dir.path(), &["test", "rules", "test.yml"], None);
        assert!(ok, "promtool test rules: {said}\n{metrics}");
    }

    fn test_file(&self, metrics: &str, firing: &[(&str, &[(&str, &str)])]) -> String {
        let mut out =
            String::from("rule_files: [bell.rules.yml]\nevaluation_interval: 1m\ntests:\n");
        out.push_str("  - interval: 1m\n    input_series:\n");
        for line in metrics.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').expect("a sample");
            out.push_str(&format!(
                "      - series: {}\n        values: '{value}+0x200'\n",
                yaml_quote(series)
            ));
        }
        out.push_str("    alert_rule_test:\n");
        for alert in &self.alerts {
            out.push_str(&format!(
                "      - eval_time: 3h\n        alertname: {}\n        exp_alerts:\n",
                alert.name
            ));
            let expected = firing.iter().filter(|(name, _)| *name == alert.name);
            for (_, labels) in expected {
                let mut all: Vec<(String, String)> = labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                all.extend(alert.labels.iter().cloned());
                out.push_str("          - exp_labels:\n");
                for (k, v) in &all {
                    out.push_str(&format!("              {k}: {}\n", yaml_quote(v)));
                }
                out.push_str("            exp_annotations:\n");
                for (k, template) in &alert.annotations {
                    let text = expand(template, &all);
                    out.push_str(&format!("              {k}: {}\n", yaml_quote(&text)));
                }
            }
            if !firing.iter().any(|(name, _)| *name == alert.name) {
                out.push_str("          []\n");
            }
        }
        out
    }
}

/// The `bell_` metrics an expression names.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("bell_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// An annotation as Prometheus renders it, for the templates the README's rules use: only
/// `{{ $labels.NAME }}` (anything else fails the test, so that the rules stay checkable).
fn expand(template: &str, labels: &[(String, String)]) -> String {
    let mut out = template.to_string();
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    assert!(
        !out.contains("{{"),
        "an annotation template beyond $labels: {template}"
    );
    out
}

fn yaml_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Runs promtool in `dir` (with `stdin` when given): whether it passed, and what it said.
fn promtool(dir: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("promtool ran");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

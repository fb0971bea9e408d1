//! `--metrics FILE`: the host's bell state in Prometheus text format, for node_exporter's
//! textfile collector. Written beside and renamed, so the collector never reads half a file.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct LastRun {
    /// Unix seconds.
    pub at: u64,
    pub ok: bool,
}

pub struct Metrics {
    pub host: String,
    pub fleet: String,
    pub bundle: Option<String>,
    pub release: Option<String>,
    pub applied_at: Option<u64>,
    pub apply_ok: Option<bool>,
    /// Out of sync with the bundle after this run; `None` when the run could not tell.
    pub drifted: Option<usize>,
    pub kinds: BTreeMap<String, usize>,
    /// Every command's last run, by command.
    pub runs: BTreeMap<String, LastRun>,
    /// Each health probe this run ran, and whether it passed.
    pub probes: Vec<(String, bool)>,
}

use bell_bundle::prometheus::label_value as label;

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

pub fn render(m: &Metrics) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "bell_generation_info",
        "The applied bundle (generation) and the release it came with.",
    );
    let _ = writeln!(
        out,
        "bell_generation_info{{host=\"{}\",fleet=\"{}\",bundle=\"{}\",release=\"{}\"}} 1",
        label(&m.host),
        label(&m.fleet),
        label(m.bundle.as_deref().unwrap_or("")),
        label(m.release.as_deref().unwrap_or(""))
    );
    if let Some(at) = m.applied_at {
        family(
            &mut out,
            "bell_last_apply_timestamp_seconds",
            "When the applied generation was last applied (unix seconds).",
        );
        let _ = writeln!(out, "bell_last_apply_timestamp_seconds {at}");
    }
    if let Some(ok) = m.apply_ok {
        family(
            &mut out,
            "bell_last_apply_success",
            "1 when the last apply succeeded for every resource, 0 when something failed.",
        );
        let _ = writeln!(out, "bell_last_apply_success {}", u8::from(ok));
    }
    if let Some(drifted) = m.drifted {
        family(
            &mut out,
            "bell_drifted_resources",
            "Managed files and resources out of sync with the bundle after the last run.",
        );
        let _ = writeln!(out, "bell_drifted_resources {drifted}");
    }
    family(
        &mut out,
        "bell_resources",
        "Resources of the applied generation, by kind.",
    );
    for (kind, count) in &m.kinds {
        let _ = writeln!(out, "bell_resources{{kind=\"{}\"}} {count}", label(kind));
    }
    family(
        &mut out,
        "bell_last_run_timestamp_seconds",
        "When bell-run last ran the command (unix seconds).",
    );
    for (command, run) in &m.runs {
        let _ = writeln!(
            out,
            "bell_last_run_timestamp_seconds{{command=\"{}\"}} {}",
            label(command),
            run.at
        );
    }
    family(
        &mut out,
        "bell_last_run_success",
        "1 when the command's last run succeeded (applied, or found no drift).",
    );
    for (command, run) in &m.runs {
        let _ = writeln!(
            out,
            "bell_last_run_success{{command=\"{}\"}} {}",
            label(command),
            u8::from(run.ok)
        );
    }
    if !m.probes.is_empty() {
        family(
            &mut out,
            "bell_health_probe_success",
            "1 when the health probe passed on the last run that ran it, 0 when it failed.",
        );
        for (probe, ok) in &m.probes {
            let _ = writeln!(
                out,
                "bell_health_probe_success{{probe=\"{}\"}} {}",
                label(probe),
                u8::from(*ok)
            );
        }
    }
    out
}

pub fn write(path: &Path, text: &str) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write the metrics to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

//! `bellc plan`: the waves a rollout of the spec would take, against the release it replaces,
//! and the run-once scripts it would run again.

use crate::args::Cli;
use crate::keys::{load_seal_key, own_seal_key_if_made};
use crate::{frontend, read_check, read_release, Failure};
use bellc::diagnostic::Diagnostics;
use bellc::source::Sources;
use std::path::Path;

pub fn plan(
    cli: &Cli,
    spec: &Path,
    against: Option<&Path>,
    json: bool,
    seal_key: Option<&Path>,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    read_check(spec)?;
    let old = match against {
        Some(dir) => Some(read_release(dir)?),
        None => None,
    };
    let seal = match seal_key {
        Some(path) => Some(load_seal_key(path)?),
        None => own_seal_key_if_made(),
    };
    let Some(front) = frontend(cli, spec, sources, diags) else {
        return Ok(1);
    };
    if diags.has_errors() {
        bellc::template_errors(front, sources, diags);
        return Ok(1);
    }
    let Some(compiled) = bellc::compile_frontend_sealed(front, sources, diags, seal) else {
        return Ok(1);
    };
    let policy = bellc::graph::waves::Policy::from_spec(compiled.spec.rollout.as_ref());
    let new = &compiled.release.hosts;
    let changed = |h: &bellc::resolve::ResolvedHost| match &old {
        None => true,
        Some(old) => {
            old.hosts.get(&h.name).map(|o| &o.bundle) != new.get(&h.name).map(|n| &n.bundle)
        }
    };
    let waves = bellc::graph::waves::plan(
        &compiled.resolution.hosts,
        &compiled.layers,
        &policy,
        changed,
    );
    if json {
        let text = serde_json::to_string_pretty(&waves).map_err(|e| e.to_string())?;
        outjson!(text);
    } else if waves.is_empty() {
        println!("nothing to roll out: no host's bundle changed");
    } else {
        print!("{}", bellc::review::plan::table(&waves, &policy));
    }
    let planned: usize = waves.iter().map(|w| w.hosts.len()).sum();
    eprintln!("{planned} of {} hosts in {} waves", new.len(), waves.len());
    if let Some(dir) = against {
        // Run-once scripts this rollout runs again, so that nobody learns it on a host.
        let old = bellc::review::diff::DirSide::open(dir)?;
        let new = bellc::review::diff::MemorySide {
            release: &compiled.release,
            bundles: &compiled.bundles,
        };
        let diff = bellc::review::diff::diff(&old, &new)?;
        for change in &diff.changes {
            for r in change.resources.iter().filter(|r| r.runs_again) {
                eprintln!(
                    "{} runs again on {}: its script, arguments, environment or policy \
                             changed",
                    r.key,
                    change.hosts.join(",")
                );
            }
        }
    }
    Ok(0)
}

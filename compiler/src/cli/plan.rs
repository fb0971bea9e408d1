//! `bellc plan`: the waves a rollout of the spec would take, against the release it replaces,
//! and the run-once scripts it would run again.

use crate::args::{Cli, SealedBy};
use crate::keys::{sealed_by as seal_key_of, warn_ids_of_sealed_hosts};
use crate::{read_check, read_release, Failure};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;
use std::path::Path;

pub fn plan(
    cli: &Cli,
    spec: &Path,
    against: Option<&Path>,
    json: bool,
    sealed_by: &SealedBy,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    read_check(spec)?;
    let old = match against {
        Some(dir) => Some(read_release(dir)?),
        None => None,
    };
    let seal = seal_key_of(sealed_by)?;
    let known = seal.is_some();
    let Some(compiled) = crate::compile(cli, spec, sources, diags, seal) else {
        return Ok(1);
    };
    if against.is_some() {
        warn_ids_of_sealed_hosts(&compiled, sealed_by, known);
    }
    let policy = bellc_core::graph::waves::Policy::from_spec(compiled.spec.rollout.as_ref());
    let new = &compiled.release.hosts;
    let changed = |h: &bellc_core::resolve::ResolvedHost| match &old {
        None => true,
        Some(old) => {
            old.hosts.get(&h.name).map(|o| &o.bundle) != new.get(&h.name).map(|n| &n.bundle)
        }
    };
    let waves = bellc_core::graph::waves::plan(
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
        print!("{}", bellc_core::review::plan::table(&waves, &policy));
    }
    let planned: usize = waves.iter().map(|w| w.hosts.len()).sum();
    eprintln!("{planned} of {} hosts in {} waves", new.len(), waves.len());
    if let Some(dir) = against {
        // Run-once scripts this rollout runs again, so that nobody learns it on a host.
        let old = bellc_core::review::diff::DirSide::open(dir)?;
        let new = bellc_core::review::diff::MemorySide {
            release: &compiled.release,
            bundles: &compiled.bundles,
        };
        let diff = bellc_core::review::diff::diff(&old, &new)?;
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

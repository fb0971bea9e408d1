//! Health probes: after an apply and after a check, every probe of the bundle runs until it
//! passes or has failed `retries` attempts. The host is healthy when every one passes. Probes
//! change nothing, so they run on an image root too (`BELL_OFFLINE=1`): inside the image, as
//! `exec` scripts do, unless the probe says otherwise (`offline=`).

use crate::context::{Ctx, Placement};
use crate::scripts::{self, Exit, Invocation};
use crate::state;
use bell_bundle::{Manifest, Probe};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct ProbeOutcome {
    pub name: String,
    pub healthy: bool,
    /// Attempts made: 1 when it passed at once.
    pub attempts: u32,
    /// Why the last attempt failed: its exit and the last line it printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Where the last attempt's output is, under the root.
    pub log: String,
    /// Why the probe did not run on this (offline) run: `offline="defer"`, or an image root
    /// it could not be confined to. Such a probe does not make the host unhealthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

/// Runs every probe of `manifest` from the bundle directory `bundle`.
pub fn run_probes(
    ctx: &Ctx,
    manifest: &Manifest,
    bundle: &Path,
    generation: &str,
) -> Vec<ProbeOutcome> {
    manifest
        .probes
        .iter()
        .map(|probe| run_probe(ctx, "health", probe, bundle, generation))
        .collect()
}

/// Runs one probe (or a probe-shaped script of `kind`, such as a reboot hook).
pub(crate) fn run_probe(
    ctx: &Ctx,
    kind: &str,
    probe: &Probe,
    bundle: &Path,
    generation: &str,
) -> ProbeOutcome {
    let log = state::resource_log_dir(ctx.root, kind, &probe.name).join("probe.log");
    let not_run = |why: String| ProbeOutcome {
        name: probe.name.clone(),
        healthy: true,
        attempts: 0,
        detail: None,
        log: log.display().to_string(),
        not_run: Some(why),
    };
    let confine = match ctx.place(probe.offline, Some("/bin/sh")) {
        Placement::Run(confine) => confine,
        Placement::Defer(why) | Placement::Skip(why) => return not_run(why),
    };
    let attempts = probe.retries.max(1);
    let mut detail = None;
    for attempt in 1..=attempts {
        if attempt > 1 {
            std::thread::sleep(Duration::from_secs(probe.interval));
        }
        let exit = scripts::run(&Invocation {
            program: PathBuf::from("sh"),
            args: vec![probe.script.path.clone().into()],
            cwd: bundle.to_path_buf(),
            env: ctx.env(kind, &probe.name, generation),
            timeout: Duration::from_secs(probe.timeout.max(1)),
            log: log.clone(),
            confine: confine.clone(),
        });
        if let Exit::NotEntered(_) = exit {
            return not_run(format!(
                "{}; it runs at the first live apply",
                exit.describe()
            ));
        }
        if exit.ok() {
            return ProbeOutcome {
                name: probe.name.clone(),
                healthy: true,
                attempts: attempt,
                detail: None,
                log: log.display().to_string(),
                not_run: None,
            };
        }
        detail = Some(describe(&exit, &log));
    }
    ProbeOutcome {
        name: probe.name.clone(),
        healthy: false,
        attempts,
        detail,
        log: log.display().to_string(),
        not_run: None,
    }
}

/// `exit 7: connection refused`: the exit and the last line the probe printed, bounded.
fn describe(exit: &Exit, log: &Path) -> String {
    let said = crate::rootfs::read_tail(log, 4096).unwrap_or_default();
    match said.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => format!(
            "{}: {}",
            exit.describe(),
            line.chars().take(300).collect::<String>()
        ),
        None => exit.describe(),
    }
}

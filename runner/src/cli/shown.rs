//! What a person reads: `status`, `check`, and how a run's report and health are printed.

use super::*;
use bell_store::Status;

/// One line per probe, then whether the host is healthy.
pub(super) fn print_health(health: &[crate::health::ProbeOutcome]) {
    if health.is_empty() {
        return;
    }
    let width = health.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for probe in health {
        let attempts = match probe.attempts {
            1 => "1 attempt".to_string(),
            n => format!("{n} attempts"),
        };
        match (&probe.detail, probe.healthy) {
            _ if probe.not_run.is_some() => outln!(
                "  health {:width$}  not run: {}",
                probe.name,
                probe.not_run.as_deref().unwrap_or_default()
            ),
            (_, true) => outln!("  health {:width$}  healthy ({attempts})", probe.name),
            (detail, false) => outln!(
                "  health {:width$}  unhealthy after {attempts}: {} (output in {})",
                probe.name,
                detail.as_deref().unwrap_or("failed"),
                probe.log
            ),
        }
    }
    let failing: Vec<&str> = health
        .iter()
        .filter(|p| !p.healthy)
        .map(|p| p.name.as_str())
        .collect();
    let ran = health.iter().filter(|p| p.not_run.is_none()).count();
    if failing.is_empty() && ran < health.len() {
        outln!(
            "health: {ran} probes pass, {} not run offline",
            health.len() - ran
        );
    } else if failing.is_empty() {
        outln!("health: {} probes pass", health.len());
    } else {
        outln!(
            "health: unhealthy, {} of {} probes fail: {}",
            failing.len(),
            health.len(),
            failing.join(", ")
        );
    }
}

pub(super) fn cmd_status(args: &Args) -> i32 {
    let (root, state) = match root_and_state(args) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let interrupted = journal::load(&root).ok().flatten().is_some();
    if args.json {
        let mut value = serde_json::to_value(&state).unwrap_or_default();
        value["interrupted_switch"] = interrupted.into();
        // A secret file's sha256 would confirm a guessed password: the applied manifest says
        // which files are secret, and when it cannot be read, every digest is withheld.
        let applied = state.generation.as_ref().and_then(|id| {
            let path = crate::state::generation_dir(&root, id).join(bell_bundle::MANIFEST_FILE);
            crate::rootfs::read_record(&path)
                .ok()
                .flatten()
                .and_then(|text| bell_bundle::Manifest::from_json(&text).ok())
        });
        if let Some(files) = value["files"].as_object_mut() {
            for (path, file) in files.iter_mut() {
                let secret = match applied.as_ref().and_then(|m| m.file(path)) {
                    Some(file) => file.is_secret(),
                    None => true,
                };
                if secret {
                    file["sha256"] = bell_bundle::REDACTED.into();
                }
            }
        }
        outjson!(value);
        return OK;
    }
    let Some(generation) = &state.generation else {
        outln!("no generation applied under {}", root.dir.display());
        return OK;
    };
    let at = state.applied_at.unwrap_or(0);
    outln!(
        "generation {generation}\napplied {} ({at}), result {}",
        bell_bundle::utc(at),
        state.result.as_deref().unwrap_or("unknown")
    );
    if interrupted {
        outln!("an interrupted file switch is pending: run `bell-run recover`");
    }
    let width = state.resources.keys().map(String::len).max().unwrap_or(0);
    for (key, rec) in &state.resources {
        let detail = rec
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        outln!("  {key:width$}  {}{detail}", rec.result);
    }
    for pending in &state.pending_reverts {
        outln!("  revert of {} is still owed", pending.name);
    }
    for pending in &state.pending_triggers {
        outln!("  trigger {} is still owed", pending.name);
    }
    OK
}

pub(super) fn print_outcome(prefix: &str, outcome: &Outcome, width: usize) {
    let mut line = format!("  {prefix} {:width$}  {}", outcome.key, outcome.status);
    if let Some(detail) = &outcome.detail {
        line.push_str(&format!(": {detail}"));
    }
    if outcome.failed() {
        if let Some(log) = &outcome.log {
            line.push_str(&format!(" (output in {log})"));
        }
    }
    outln!("{line}");
}

/// `2 changed, 1 drifted and put back, 9 unchanged, 1 failed (user:ops), 2 skipped (exec:a,
/// exec:b), 1 deferred to the first live apply`: each resource counted once, under what happened to it. A resource
/// skipped because one it depends on failed is not a failure of its own.
pub(super) fn summary(report: &Report) -> String {
    let (mut changed, mut unchanged, mut repaired) = (0, 0, 0);
    let (mut failed, mut skipped, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
    for outcome in report.reverts.iter().chain(&report.triggers) {
        match &outcome.status {
            Status::Failed => failed.push(outcome.key.as_str()),
            Status::Skipped | Status::Halted => skipped.push(outcome.key.as_str()),
            _ if report.reverts.iter().any(|r| r.key == outcome.key) => changed += 1,
            _ => {}
        }
    }
    for (planned, outcome) in report.plan.resources.iter().zip(&report.resources) {
        match &outcome.status {
            Status::Failed => failed.push(outcome.key.as_str()),
            // Not run because another failed (a dependency, or an exec that halts the rest).
            Status::Skipped | Status::Halted => skipped.push(outcome.key.as_str()),
            Status::Deferred => {}
            Status::Waiting => waiting.push(outcome.key.as_str()),
            _ if planned.change == Change::Unchanged => unchanged += 1,
            Status::Ok if planned.change == Change::Drifted => repaired += 1,
            _ => changed += 1,
        }
    }
    let mut parts = vec![format!("{changed} changed")];
    if repaired > 0 {
        parts.push(format!("{repaired} drifted and put back"));
    }
    parts.push(format!("{unchanged} unchanged"));
    if !failed.is_empty() {
        parts.push(format!("{} failed ({})", failed.len(), failed.join(", ")));
    }
    if !skipped.is_empty() {
        parts.push(format!(
            "{} skipped after a failure ({})",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    if !waiting.is_empty() {
        parts.push(format!(
            "{} waiting for providers ({})",
            waiting.len(),
            waiting.join(", ")
        ));
    }
    if report.deferred > 0 {
        parts.push(format!(
            "{} deferred to the first live apply",
            report.deferred
        ));
    }
    parts.join(", ")
}

pub(super) fn print_report(report: &Report) {
    let mode = if report.offline { "offline" } else { "live" };
    let verb = if report.dry_run {
        "plan for"
    } else {
        "applied"
    };
    outln!(
        "bell-run: {verb} {} to {} ({mode})",
        bell_bundle::short_id(&report.bundle),
        report.root
    );
    if report.generation != report.bundle {
        outln!(
            "  without the host's key: as generation {}, the bundle less {} resource(s) that \
             need its secrets",
            bell_bundle::short_id(&report.generation),
            report.needs_secrets.len()
        );
    }
    print_report_body(report);
}

/// Every line of an apply's report but the first.
pub(super) fn print_report_body(report: &Report) {
    let plan = &report.plan;
    if let Some(recovered) = &report.recovered {
        outln!("  {recovered}");
    }
    for key in &report.needs_secrets {
        outln!(
            "  {key}: left for the first apply with the host's key (its secrets are sealed to it)"
        );
    }
    let width = plan
        .resources
        .iter()
        .map(|r| r.key.len())
        .chain(plan.departed.iter().map(|d| d.key.len()))
        .max()
        .unwrap_or(0);
    if report.dry_run {
        for departed in &plan.departed {
            outln!("  - {:width$}  revert", departed.key);
        }
        for file in &plan.files {
            let what = match file {
                FileAction::Write { created: true, .. } => "create",
                FileAction::Write { backup: true, .. } => "take over (backed up)",
                FileAction::Write { .. } => "rewrite",
                FileAction::Restore { .. } => "restore the file from before bell",
                FileAction::Remove { .. } => "remove",
                FileAction::Leave { .. } => "leave in place (changed since bell wrote it)",
            };
            outln!("  file {}: {what}", file.path());
        }
        for r in &plan.resources {
            outln!(
                "  {} {:width$}  {}",
                r.change.symbol(),
                r.key,
                r.change.word()
            );
        }
        outln!(
            "plan: {} created, {} changed, {} departed, {} retried, {} drifted, {} unchanged; {} files to switch",
            plan.count(Change::Created),
            plan.count(Change::Changed),
            plan.departed.len(),
            plan.count(Change::Retry),
            plan.count(Change::Drifted),
            plan.count(Change::Unchanged),
            plan.files.iter().filter(|f| !matches!(f, FileAction::Leave { .. })).count()
        );
        return;
    }
    for outcome in &report.reverts {
        print_outcome("-", outcome, width);
    }
    let files = &report.files;
    outln!(
        "  files: {} written, {} restored, {} removed, {} unchanged",
        files.written.len(),
        files.restored.len(),
        files.removed.len(),
        plan.unchanged_files
    );
    for path in &files.left {
        outln!("  left {path} in place: it changed since bell wrote it");
    }
    for outcome in &report.triggers {
        print_outcome("^", outcome, width);
    }
    for outcome in &report.resources {
        let symbol = outcome.change.map(Change::symbol).unwrap_or(' ');
        print_outcome(&symbol.to_string(), outcome, width);
    }
    for live in &report.live {
        print_live(live);
    }
    outln!("result: {}", summary(report));
    print_health(&report.health);
    print_reboot(&report.reboot_required);
}

/// A live file and who it lists: `live /etc/haproxy/backends.cfg (web): web-1, web-2; out:
/// web-3 (probe http fails)`. Host names are the bundle's; a reason may quote a provider's
/// report, so it is shown on one line with what a terminal acts on escaped.
fn print_live(live: &crate::live::Rendered) {
    let ready = match live.ready.is_empty() {
        true => "none ready".to_string(),
        false => live.ready.join(", "),
    };
    let out: Vec<String> = live
        .out
        .iter()
        .map(|(host, why)| format!("{host} ({})", bell_bundle::one_line(why)))
        .collect();
    let out = match out.is_empty() {
        true => String::new(),
        false => format!("; {}", out.join(", ")),
    };
    let from = match live.from {
        "kept" => " [the store was not read: as last rendered]",
        _ => "",
    };
    outln!(
        "  live {} ({}): {ready}{out}{from}",
        live.path,
        live.service
    );
    if let Some(error) = &live.error {
        outln!("  live {}: {}", live.path, bell_bundle::one_line(error));
    }
}

/// The reasons the host needs a reboot, one per line, after the result they do not change.
pub(super) fn print_reboot(reasons: &[String]) {
    for reason in reasons {
        outln!("reboot required: {reason}");
    }
}

pub(super) fn cmd_check(args: &Args) -> i32 {
    let opts = options(args);
    let started = state::now();
    let result = (|| {
        let root = statedir::open_root(&opts.root)?;
        let state = state::load(&root).map_err(Refusal::new)?;
        // A check during an apply would see half-applied values as drift. A root never applied
        // to has nothing to check and gets no lock file: a check changes nothing.
        let _lock = if root.bell_dir().exists() {
            Some(apply::lock(&root)?)
        } else {
            None
        };
        let ctx = Ctx {
            root: &root,
            offline: opts.offline,
            timeout: std::time::Duration::from_secs(opts.script_timeout),
            now: started,
            boot: state::boot_id(),
            clock: None,
            store: None,
        };
        check::check(&ctx, &state)
    })();
    let run = match &result {
        Ok(rep) => report::from_check(&opts.root, started, rep),
        Err(refusal) => report::from_refusal("check", &opts.root, started, None, refusal),
    };
    report::emit(&args.sinks(), run);
    let rep = match result {
        Ok(rep) => rep,
        Err(refusal) => return refused(&refusal, args.json),
    };
    let code = if !rep.drift.is_empty() {
        DRIFTED
    } else if !rep.errors.is_empty() {
        REFUSED
    } else if rep.health.iter().any(|p| !p.healthy) {
        UNHEALTHY
    } else {
        OK
    };
    if args.json {
        let mut value = serde_json::to_value(&rep).unwrap_or_default();
        value["result"] = match code {
            OK => "in-sync",
            DRIFTED => "drifted",
            UNHEALTHY => "unhealthy",
            _ => "error",
        }
        .into();
        outjson!(value);
        return code;
    }
    for drift in &rep.drift {
        outln!("drifted {}: {}", drift.name, drift.detail);
    }
    for c in rep.resources.iter().filter(|c| c.result == Status::Error) {
        outln!(
            "error {}: {}",
            c.key,
            c.detail.as_deref().unwrap_or("the check failed")
        );
    }
    for key in &rep.deferred {
        outln!("deferred {key}: its apply needs a live host; the first live apply does it");
    }
    let checked = rep
        .resources
        .iter()
        .filter(|c| {
            !matches!(
                c.result,
                Status::NoCheck | Status::Deferred | Status::DriftedFiles
            )
        })
        .count();
    let deferred = match rep.deferred.len() {
        0 => String::new(),
        n => format!(", {n} deferred"),
    };
    outln!(
        "check of {}: {} drifted, {} errors{deferred} ({} files, {checked} resource checks)",
        bell_bundle::short_id(&rep.generation),
        rep.drift.len(),
        rep.errors.len(),
        rep.manifest.as_ref().map_or(0, |m| m.files.len()),
    );
    print_health(&rep.health);
    print_reboot(&rep.reboot_required);
    if code == DRIFTED {
        outln!("`bell-run apply` of the same bundle puts the drifted resources back");
    }
    code
}

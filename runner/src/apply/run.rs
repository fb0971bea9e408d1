//! Running the resources' scripts in dependency order: each resource's check, apply or revert,
//! and `exec` scripts with their rerun policy, recorded as they finish.

use super::batch::{due_together, run_batch_apply, BatchApplied};
use super::*;
use crate::context::notes;
use bell_store::Status;

pub(super) fn run_resources(
    ctx: &Ctx,
    checked: &Checked,
    bundle: &Path,
    plan: &Plan,
    state: &State,
    rep: &mut Report,
) -> BTreeMap<String, ResourceRecord> {
    let mut records = BTreeMap::new();
    let mut broken: BTreeSet<String> = BTreeSet::new();
    // Resources waiting for providers (`wait-for`): what comes after one waits with it.
    let mut held: BTreeSet<String> = BTreeSet::new();
    // Resources whose wait a run without the store leaves to the first run with it (an image
    // bake): what comes after one is left with it.
    let mut postponed: BTreeSet<String> = BTreeSet::new();
    let mut halted: Option<String> = None;
    // Each batch's apply runs once, for all of its due resources (see `batch`).
    let mut batches: BTreeMap<String, BatchApplied> = BTreeMap::new();
    for (resource, planned) in checked.manifest.resources.iter().zip(&plan.resources) {
        let key = resource.key();
        let change = planned.change;
        let previous = state.resources.get(&key);
        let mut record = ResourceRecord {
            kind: resource.kind.clone(),
            name: resource.name.clone(),
            hash: resource.hash.clone(),
            result: Status::Ok,
            at: ctx.now,
            message: None,
            log: previous.and_then(|p| p.log.clone()),
            exec: previous.and_then(|p| p.exec.clone()),
        };
        // Only what is about to run waits, and not behind a dependency that did not apply.
        let behind = resource.after.iter().find(|d| held.contains(*d));
        let left = resource.after.iter().find(|d| postponed.contains(*d));
        let runs = change != Change::Unchanged
            && behind.is_none()
            && left.is_none()
            && !resource.after.iter().any(|d| broken.contains(d));
        let wait = runs
            .then(|| crate::live::wait_for(ctx, &checked.manifest, resource))
            .flatten();
        let outcome = if let Some(dep) = resource.after.iter().find(|d| broken.contains(*d)) {
            Outcome::new(
                &key,
                Some(change),
                Status::Skipped,
                Some(format!("`{dep}` did not apply")),
            )
        } else if let Some(dep) = behind {
            Outcome::new(
                &key,
                Some(change),
                Status::Waiting,
                Some(format!("after `{dep}`, which waits")),
            )
        } else if let Some(dep) = left.filter(|_| change != Change::Unchanged) {
            postponed.insert(key.clone());
            Outcome::new(
                &key,
                Some(change),
                Status::Deferred,
                Some(format!(
                    "after `{dep}`, left to the first run with the store"
                )),
            )
        } else if let Some(wait) = wait {
            match wait {
                crate::live::Wait::Deferred(why) => {
                    postponed.insert(key.clone());
                    Outcome::new(&key, Some(change), Status::Deferred, Some(why))
                }
                crate::live::Wait::Waiting(why) => {
                    Outcome::new(&key, Some(change), Status::Waiting, Some(why))
                }
            }
        } else if let Some(policy) = &resource.exec {
            if let Some(halter) = &halted {
                Outcome::new(
                    &key,
                    Some(change),
                    Status::Halted,
                    Some(format!("`{halter}` failed with on-failure halt")),
                )
            } else {
                let outcome = run_exec(ctx, checked, bundle, resource, policy, change, &mut record);
                if outcome.status == Status::Failed
                    && policy.on_failure == bell_bundle::OnFailure::Halt
                {
                    halted = Some(key.clone());
                }
                outcome
            }
        } else if change == Change::Unchanged {
            if let Some(prev) = previous {
                record = prev.clone();
            }
            Outcome::new(&key, Some(change), Status::Unchanged, None)
        } else if let Some(applied) = resource
            .batch
            .as_ref()
            .and_then(|b| batches.get(b))
            .filter(|applied| applied.ran(resource))
        {
            applied.outcome(resource, change, &mut record)
        } else if let Some(run) = due_together(ctx, &checked.manifest, plan, resource) {
            let applied = run_batch_apply(ctx, bundle, &checked.id, &run);
            let outcome = applied.outcome(resource, change, &mut record);
            batches.insert(run.name.to_string(), applied);
            outcome
        } else if let Some(script) = resource.apply.as_ref().filter(|s| !ctx.skips(s)) {
            let (exit, log_path) = run_apply(
                ctx,
                &checked.manifest,
                bundle,
                &checked.id,
                resource,
                script,
            );
            let log = log_path.display().to_string();
            let mut outcome = if exit.ok() {
                // Read only when there is output: most applies print nothing.
                let said = std::fs::metadata(&log_path).is_ok_and(|m| m.len() > 0);
                let notes = said
                    .then(|| crate::rootfs::read_tail(&log_path, 64 * 1024).unwrap_or_default())
                    .and_then(|output| notes(&output));
                // Kept for `bell-run status`, as a failure's reason is.
                record.message = notes.clone();
                Outcome::new(&key, Some(change), Status::Ok, notes)
            } else if ctx.offline && exit == Exit::Code(bell_bundle::EXIT_DEFERRED) {
                // Work only a live host can do; not a failure of the bake, and not done either:
                // the result is not `ok`, so the next run plans it again.
                Outcome::new(
                    &key,
                    Some(change),
                    Status::Deferred,
                    Some("needs a live host; applied on the next live run".to_string()),
                )
            } else {
                // The end of the log, read once: why the script said it failed, and a link
                // under the root it tripped on.
                let output = crate::rootfs::read_tail(&log_path, 64 * 1024).unwrap_or_default();
                let mut detail = match last_reason(&output) {
                    Some(reason) => format!("{}: {reason}", exit.describe()),
                    None => exit.describe(),
                };
                if let Some(link) = ctx.root.dangling_link_in(&output) {
                    detail.push_str(&format!("; {link}"));
                }
                Outcome::new(&key, Some(change), Status::Failed, Some(detail))
            };
            outcome.log = Some(log);
            // Recorded as the host will see it once the image boots.
            record.log = Some(ctx.rel(&log_path));
            outcome
        } else {
            Outcome::new(&key, Some(change), Status::Ok, None)
        };
        let mut outcome = outcome;
        if change == Change::Drifted && outcome.status == Status::Ok {
            // Said on the line, not only by the `*`: a reviewer reading the output after an
            // incident must see that this apply undid a change made on the host.
            let put_back = "drifted → put back";
            outcome.detail = Some(match outcome.detail.take() {
                Some(note) => format!("{put_back}; {note}"),
                None => put_back.to_string(),
            });
        }
        match &outcome.status {
            Status::Failed | Status::Skipped | Status::Halted => {
                broken.insert(key.clone());
                record.result = outcome.status.clone();
                record.message = outcome.detail.clone();
            }
            Status::NotDue => {
                let last = record.exec.as_ref();
                record.result = match (
                    last.and_then(|e| e.running.as_ref()),
                    last.and_then(|e| e.last_ok),
                ) {
                    (Some(_), _) => Status::Started,
                    (None, Some(false)) => Status::Failed,
                    _ => Status::Ok,
                };
                record.message = previous.and_then(|p| p.message.clone());
                // A not-due exec whose last run failed keeps its dependents waiting.
                if record.result == Status::Failed {
                    broken.insert(key.clone());
                }
            }
            Status::Started => record.result = Status::Started,
            Status::Deferred => {
                record.result = Status::Deferred;
                record.message = outcome.detail.clone();
            }
            // Not in place: what comes after it waits with it, and the next run tries again.
            Status::Waiting => {
                held.insert(key.clone());
                record.result = Status::Waiting;
                record.message = outcome.detail.clone();
            }
            _ => {}
        }
        records.insert(key, record);
        rep.resources.push(outcome);
    }
    records
}

fn run_exec(
    ctx: &Ctx,
    checked: &Checked,
    bundle: &Path,
    resource: &Resource,
    policy: &bell_bundle::ExecPolicy,
    change: Change,
    record: &mut ResourceRecord,
) -> Outcome {
    let key = resource.key();
    let mut rec: ExecRecord = record.exec.clone().unwrap_or_default();
    let collected = exec::collect_background(&mut rec, &ctx.root.dir);
    if collected.is_some() {
        record.result = if rec.last_ok == Some(true) {
            Status::Ok
        } else {
            Status::Failed
        };
    }
    let identity = resource.exec_identity();
    let boot = ctx.boot.as_deref();
    let reason = exec::due(policy, &rec, &identity, ctx.now, boot);
    let Ok(reason) = reason else {
        let detail = reason.err();
        record.exec = Some(rec);
        return Outcome::new(&key, Some(change), Status::NotDue, detail);
    };
    let Some(script) = &resource.apply else {
        return Outcome::new(
            &key,
            Some(change),
            Status::Failed,
            Some("no script".to_string()),
        );
    };
    let program = bundle.join(&script.path);
    let confine = match ctx.place(policy.offline, confine::interpreter(&program).as_deref()) {
        Placement::Run(confine) => confine,
        Placement::Defer(why) => {
            record.exec = Some(rec);
            return Outcome::new(&key, Some(change), Status::Deferred, Some(why));
        }
        Placement::Skip(why) => {
            record.exec = Some(rec);
            return Outcome::new(&key, Some(change), Status::NotDue, Some(why));
        }
    };
    let log_dir = state::resource_log_dir(ctx.root, &resource.kind, &resource.name);
    // The resource's own variables first, so that bell-run's (`BELL_ROOT`, `BELL_OFFLINE`, ...)
    // win: an exec must not be told it runs on a live host while an image is baked.
    let mut env: Vec<(String, String)> = policy
        .env
        .iter()
        .filter(|(k, _)| !k.starts_with("BELL_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend(ctx.env(&resource.kind, &resource.name, &checked.id));
    let inv = Invocation {
        program,
        args: policy.args.iter().map(Into::into).collect(),
        cwd: bundle.to_path_buf(),
        env,
        timeout: Duration::from_secs(policy.timeout),
        log: log_dir.join("exec.log"),
        confine,
    };
    let before = rec.clone();
    exec::count_start(&mut rec, &identity, boot);
    rec.ran_hash = Some(identity);
    rec.last_start = Some(ctx.now);
    rec.runs += 1;
    record.log = Some(ctx.rel(&inv.log));
    let mut outcome = if policy.background {
        let result_file = log_dir.join("background.json");
        match scripts::spawn_background(&inv, &result_file) {
            Ok(pid) => {
                rec.running = Some(Running {
                    pid,
                    started: ctx.now,
                    result_file: ctx.rel(&result_file),
                });
                Outcome::new(
                    &key,
                    Some(change),
                    Status::Started,
                    Some(format!("{reason}; in the background, pid {pid}")),
                )
            }
            Err(e) => {
                rec.last_ok = Some(false);
                rec.last_finish = Some(ctx.now);
                Outcome::new(&key, Some(change), Status::Failed, Some(e))
            }
        }
    } else {
        let exit = ctx.run_timed(&resource.kind, &inv);
        if let Exit::NotEntered(_) = exit {
            // It ran nowhere: the record stays as it was, and a live apply runs it.
            record.exec = Some(before);
            let mut outcome = Outcome::new(
                &key,
                Some(change),
                Status::Deferred,
                Some(format!(
                    "{}; it runs at the first live apply",
                    exit.describe()
                )),
            );
            outcome.log = Some(inv.log.display().to_string());
            return outcome;
        }
        let finished = state::now();
        rec.last_finish = Some(finished.max(ctx.now));
        rec.last_ok = Some(exit.ok());
        exec::count_finish(&mut rec, exit.ok());
        if exit.ok() {
            rec.last_success = rec.last_finish;
            Outcome::new(&key, Some(change), Status::Ok, Some(reason))
        } else {
            Outcome::new(&key, Some(change), Status::Failed, Some(exit.describe()))
        }
    };
    outcome.log = Some(inv.log.display().to_string());
    record.exec = Some(rec);
    outcome
}

/// Runs one resource's apply script and says how it ended and where its output is: the one
/// way an apply runs, whether a whole run or `bell-run live` for one live file asked for it.
pub(crate) fn run_apply(
    ctx: &Ctx,
    manifest: &bell_bundle::Manifest,
    bundle: &std::path::Path,
    generation: &str,
    resource: &bell_bundle::Resource,
    script: &bell_bundle::Script,
) -> (Exit, std::path::PathBuf) {
    let log = state::resource_log_dir(ctx.root, &resource.kind, &resource.name).join("apply.log");
    let mut env = ctx.env(&resource.kind, &resource.name, generation);
    let exit = match reloads_offline(ctx, manifest, resource) {
        // A live file whose reload runs on the image root: the whole apply confined to it, as
        // an exec with offline="root".
        Some(confine) => {
            env.push((bell_bundle::live::RELOAD_OFFLINE_ENV.into(), "1".into()));
            let mut inv = ctx.sh_invocation(bundle, &script.path, &[], env, log.clone());
            inv.confine = confine;
            ctx.run_timed(&resource.kind, &inv)
        }
        None => {
            ctx.run_sh(bundle, &script.path, &resource.kind, env, log.clone())
                .0
        }
    };
    (exit, log)
}

/// How a live file's apply is confined when it runs its reload on an image root
/// (`offline="root"`); `None` for every other apply, run as usual.
fn reloads_offline(
    ctx: &Ctx,
    manifest: &bell_bundle::Manifest,
    resource: &bell_bundle::Resource,
) -> Option<crate::confine::Confine> {
    if !ctx.offline || resource.kind != bell_bundle::live::KIND {
        return None;
    }
    let live = manifest.live.iter().find(|l| l.path == resource.name)?;
    if live.offline != bell_bundle::Offline::Root {
        return None;
    }
    match ctx.place(live.offline, Some("/bin/sh")) {
        crate::context::Placement::Run(confine) => Some(confine),
        _ => None,
    }
}

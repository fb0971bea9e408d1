//! A batch's apply: several due resources of one batch brought live by one process (see
//! [`bell_bundle::Batch::apply`]), each taking its own line of what it printed as its outcome.

use super::*;
use bell_store::Status;

use crate::check::{batch_timing_kind, BATCH_KIND};

/// The outcome of each resource of a batch's apply, by `KIND:NAME`, from its one run.
pub(super) struct BatchApplied {
    said: BTreeMap<String, (Status, Option<String>)>,
    /// The resources it was run for.
    ran: BTreeSet<String>,
    /// The detail of a due resource it gave no line for.
    unanswered: String,
    /// Where its output is, for the report, and relative to the root, for the record.
    log: String,
    log_rel: String,
}

impl BatchApplied {
    /// Whether `resource` was one of those the batch was run for.
    pub(super) fn ran(&self, resource: &Resource) -> bool {
        self.ran.contains(&resource.key())
    }

    /// The outcome of `resource`, one of the resources the batch was run for.
    pub(super) fn outcome(
        &self,
        resource: &Resource,
        change: Change,
        record: &mut ResourceRecord,
    ) -> Outcome {
        let key = resource.key();
        let (status, detail) = match self.said.get(&key) {
            Some((status, detail)) => (status.clone(), detail.clone()),
            None => (Status::Failed, Some(self.unanswered.clone())),
        };
        if status == Status::Ok {
            // A note of the resource's (see `bell_bundle::NOTE_PREFIX`), kept for `status`.
            record.message = detail.clone();
        }
        let mut outcome = Outcome::new(&key, Some(change), status, detail);
        outcome.log = Some(self.log.clone());
        record.log = Some(self.log_rel.clone());
        outcome
    }
}

/// The resources of `resource`'s batch that this run applies together, when its batch has an
/// apply that this run starts and two or more of them are due; `None` to apply it by itself.
/// A resource ordered after another (`after`, `order_after`) is never run together: it runs
/// its own apply in its place in the order.
pub(super) fn due_together<'m>(
    ctx: &Ctx,
    manifest: &'m Manifest,
    plan: &Plan,
    resource: &Resource,
) -> Option<BatchRun<'m>> {
    let together = |r: &Resource| r.after.is_empty() && r.order_after.is_empty();
    if !together(resource) {
        return None;
    }
    let name = resource.batch.as_deref()?;
    let batch = manifest.batches.iter().find(|b| b.name == name)?;
    let script = batch.apply.as_ref()?;
    if ctx.skips(script) {
        return None;
    }
    let due: Vec<&Resource> = manifest
        .resources
        .iter()
        .zip(&plan.resources)
        .filter(|(r, planned)| {
            r.batch.as_deref() == Some(name) && planned.change != Change::Unchanged && together(r)
        })
        .map(|(r, _)| r)
        .collect();
    (due.len() >= 2).then_some(BatchRun {
        name: &batch.name,
        script,
        due,
    })
}

/// A batch's apply to run, and the resources it runs for.
pub(super) struct BatchRun<'m> {
    pub(super) name: &'m str,
    script: &'m bell_bundle::Script,
    due: Vec<&'m Resource>,
}

/// Runs a batch's apply once for its due resources and reads its lines.
pub(super) fn run_batch_apply(
    ctx: &Ctx,
    bundle: &Path,
    generation: &str,
    run: &BatchRun,
) -> BatchApplied {
    let BatchRun { name, script, due } = run;
    let log_path = state::resource_log_dir(ctx.root, BATCH_KIND, name).join("apply.log");
    let mut args = Vec::with_capacity(due.len() * 2 + 1);
    args.push(script.path.clone().into());
    for resource in due {
        args.push(resource.key().into());
        args.push(ctx.state_dir(&resource.kind, &resource.name).into());
    }
    let inv = Invocation {
        program: PathBuf::from("sh"),
        args,
        cwd: bundle.to_path_buf(),
        env: ctx.env(BATCH_KIND, name, generation),
        timeout: ctx.timeout,
        log: log_path.clone(),
        confine: confine::Confine::Not,
    };
    let exit = ctx.run_timed(&batch_timing_kind(name), &inv);
    let output = crate::rootfs::read_tail(&log_path, 4 << 20).unwrap_or_default();
    let mut said = BTreeMap::new();
    for line in output.lines() {
        let mut fields = line.splitn(3, '\t');
        let (Some(key), Some(status)) = (fields.next(), fields.next()) else {
            continue;
        };
        let status = Status::parse(status);
        if !matches!(status, Status::Ok | Status::Failed) || !due.iter().any(|r| r.key() == key) {
            continue;
        }
        let detail = fields.next().filter(|d| !d.is_empty()).map(str::to_string);
        said.insert(key.to_string(), (status, detail));
    }
    let unanswered = match (exit.ok(), last_reason(&output)) {
        (true, _) => format!("the apply of batch {name} gave no answer for it"),
        (false, Some(reason)) => format!("apply of batch {name} {}: {reason}", exit.describe()),
        (false, None) => format!("apply of batch {name} {}", exit.describe()),
    };
    BatchApplied {
        said,
        ran: due.iter().map(|r| r.key()).collect(),
        unanswered,
        log: log_path.display().to_string(),
        log_rel: ctx.rel(&log_path),
    }
}

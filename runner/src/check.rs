//! Drift: does the host still match the generation bell applied? Managed files are compared by
//! bell-run itself (content, mode, owner, group); live values only the bundle knows how to read
//! back, so each resource may ship a `check` script (exit 0 in sync, 2 drifted, printing what
//! differs). `bell-run check` reports both; `apply` runs the same checks on resources it would
//! otherwise leave alone, so that applying the same bundle again repairs live drift too.

use crate::accounts::Accounts;
use crate::context::{Ctx, Refusal, ScriptRun};
use crate::plan::{Change, Plan};
use crate::rootfs::Root;
use crate::scripts::Exit;
use crate::state::{self, State};
use bell_bundle::{Batch, Manifest, Resource};
use bell_store::Drift;
use bell_store::Status;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One resource's check.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub key: String,
    /// `in-sync`, `drifted`, `reboot-required` (in place, in effect after the next boot),
    /// `error` (the check itself failed), `deferred` (its apply waits
    /// for a live host), `drifted-files` (no check of its own, but a file it owns is out of
    /// sync: the file is in the drift list) or `no-check`.
    pub result: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The result of `bell-run check`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub generation: String,
    pub fleet: String,
    pub resources: Vec<Checked>,
    pub drift: Vec<Drift>,
    /// Resources whose check could not run or did not answer 0 or 2.
    pub errors: Vec<String>,
    /// Why the host needs a reboot (see `reboot`); empty when it does not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reboot_required: Vec<String>,
    /// Resources whose apply waits for a live host (deferred during an image bake): not
    /// checked, and not drift.
    pub deferred: Vec<String>,
    /// The applied bundle's health probes, run after the check scripts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<crate::health::ProbeOutcome>,
    /// The manifest of the applied generation, for metrics.
    #[serde(skip)]
    pub manifest: Option<Manifest>,
}

/// What the logs of a batch's scripts are filed under, as a resource's under its kind.
pub(crate) const BATCH_KIND: &str = "batch";

/// What `--timings` counts a batch's scripts under: `batch:mount`, not `batch`, so a slow batch
/// can be told from the others.
pub(crate) fn batch_timing_kind(batch: &str) -> String {
    format!("{BATCH_KIND}:{batch}")
}

/// A resource's answer, from how its check script ended and what it wrote to `log`.
fn answer_of(key: String, exit: &Exit, log: &Path) -> Checked {
    let said = crate::rootfs::read_tail(log, 64 * 1024).unwrap_or_default();
    let said = said.trim();
    let (result, detail) = match exit {
        Exit::Code(0) => (Status::InSync, None),
        Exit::Code(bell_bundle::EXIT_REBOOT_REQUIRED) => (
            Status::RebootRequired,
            (!said.is_empty()).then(|| said.lines().collect::<Vec<_>>().join("; ")),
        ),
        Exit::Code(2) => (
            Status::Drifted,
            Some(if said.is_empty() {
                "its check reports drift".to_string()
            } else {
                said.lines().collect::<Vec<_>>().join("; ")
            }),
        ),
        other => (
            Status::Error,
            Some(match said.lines().last() {
                Some(line) => format!("check {}: {line}", other.describe()),
                None => format!("check {}", other.describe()),
            }),
        ),
    };
    Checked {
        key,
        result,
        detail,
    }
}

/// Checks the resources of `manifest` at `which` (indexes), in that order: each by its own
/// check script, and those of a batch by one run of the batch's check for all of them. Live,
/// every check runs in one shell (see [`crate::scripts::run_in_one_shell`]).
pub fn run_checks(
    ctx: &Ctx,
    manifest: &Manifest,
    bundle: &Path,
    generation: &str,
    which: &[usize],
) -> Vec<Checked> {
    // The scripts to run, in order: each batch once, before the first resource it answers for.
    let mut batches: BTreeMap<&str, Option<usize>> = BTreeMap::new();
    let mut own: BTreeMap<usize, usize> = BTreeMap::new();
    let mut runs: Vec<ScriptRun> = Vec::new();
    for &i in which {
        let resource = &manifest.resources[i];
        match &resource.batch {
            Some(name) => {
                if batches.contains_key(name.as_str()) {
                    continue;
                }
                let Some(batch) = manifest.batches.iter().find(|b| &b.name == name) else {
                    continue; // verification makes every batch a resource names present
                };
                let started = !ctx.skips(&batch.check);
                let asked: Vec<&Resource> = which
                    .iter()
                    .map(|&j| &manifest.resources[j])
                    .filter(|r| r.batch.as_ref() == Some(name))
                    .collect();
                let at = started.then(|| {
                    runs.push(batch_run(ctx, bundle, generation, batch, &asked));
                    runs.len() - 1
                });
                batches.insert(name, at);
            }
            None => {
                if let Some(script) = resource.check.as_ref().filter(|s| !ctx.skips(s)) {
                    let log = state::resource_log_dir(ctx.root, &resource.kind, &resource.name)
                        .join("check.log");
                    let env = ctx.env(&resource.kind, &resource.name, generation);
                    own.insert(i, runs.len());
                    runs.push(ScriptRun {
                        kind: resource.kind.clone(),
                        inv: ctx.sh_invocation(bundle, &script.path, &[], env, log),
                    });
                }
            }
        }
    }
    let exits = ctx.run_check_scripts(&runs);
    let mut answers: BTreeMap<&str, Option<BatchAnswers>> = batches
        .into_iter()
        .map(|(name, at)| {
            (
                name,
                at.map(|at| batch_answers(name, &exits[at], &runs[at].inv.log)),
            )
        })
        .collect();
    which
        .iter()
        .map(|&i| {
            let resource = &manifest.resources[i];
            let key = resource.key();
            let Some(name) = &resource.batch else {
                return match own.get(&i) {
                    Some(&at) => answer_of(key, &exits[at], &runs[at].inv.log),
                    None if resource.check.is_none() => Checked {
                        key,
                        result: Status::NoCheck,
                        detail: None,
                    },
                    // Live only, offline: counts as having run and exited 0.
                    None => Checked {
                        key,
                        result: Status::InSync,
                        detail: None,
                    },
                };
            };
            let (result, detail) = match answers.get_mut(name.as_str()) {
                // Offline, a live-only check is not started: nothing live has drifted.
                Some(None) => (Status::InSync, None),
                Some(Some(said)) => said
                    .by_key
                    .remove(&key)
                    .unwrap_or_else(|| (Status::Error, Some(said.unanswered.clone()))),
                None => (Status::Error, None),
            };
            Checked {
                key,
                result,
                detail,
            }
        })
        .collect()
}

/// What one run of a batch's check said.
struct BatchAnswers {
    /// Result and detail by resource key.
    by_key: BTreeMap<String, (Status, Option<String>)>,
    /// The detail of a resource it gave no line for: how the script failed, or that it was
    /// not answered.
    unanswered: String,
}

/// How a batch's check runs once for the resources `asked` about.
fn batch_run(
    ctx: &Ctx,
    bundle: &Path,
    generation: &str,
    batch: &Batch,
    asked: &[&Resource],
) -> ScriptRun {
    let log = state::resource_log_dir(ctx.root, BATCH_KIND, &batch.name).join("check.log");
    let mut args = Vec::with_capacity(asked.len() * 2);
    // Where each resource's state is, not made when missing: a check only reads it, and a
    // resource never applied has nothing there to read.
    for resource in asked {
        args.push(resource.key());
        let state = state::resource_state_dir(ctx.root, &resource.kind, &resource.name);
        args.push(state.display().to_string());
    }
    let env = ctx.env(BATCH_KIND, &batch.name, generation);
    ScriptRun {
        kind: batch_timing_kind(&batch.name),
        inv: ctx.sh_invocation(bundle, &batch.check.path, &args, env, log),
    }
}

/// Reads the lines of a run of batch `name`'s check.
fn batch_answers(name: &str, exit: &Exit, log: &Path) -> BatchAnswers {
    let said = crate::rootfs::read_tail(log, 4 << 20).unwrap_or_default();
    let mut by_key = BTreeMap::new();
    let mut other = None;
    for line in said.lines() {
        let mut fields = line.splitn(3, '\t');
        let key = fields.next().filter(|k| !k.is_empty());
        let result = fields
            .next()
            .map(Status::parse)
            .filter(|r| matches!(r, Status::InSync | Status::Drifted | Status::Error));
        let (Some(key), Some(result)) = (key, result) else {
            if !line.trim().is_empty() {
                other = Some(line);
            }
            continue;
        };
        let detail = fields.next().filter(|d| !d.is_empty()).map(str::to_string);
        by_key.insert(key.to_string(), (result, detail));
    }
    let unanswered = match (*exit == Exit::Code(0), other) {
        (true, _) => format!("the check of batch {name} gave no answer for it"),
        (false, Some(line)) => format!("check of batch {name} {}: {line}", exit.describe()),
        (false, None) => format!("check of batch {name} {}", exit.describe()),
    };
    BatchAnswers { by_key, unanswered }
}

/// For `apply`: checks every resource the plan would leave alone, and marks the drifted ones
/// `Drifted` so that they are applied again. Returns what was found drifted, and what else.
pub fn mark_drifted(
    ctx: &Ctx,
    manifest: &Manifest,
    bundle: &Path,
    generation: &str,
    plan: &mut Plan,
    only: Option<&std::collections::BTreeSet<String>>,
) -> Found {
    let which: Vec<usize> = manifest
        .resources
        .iter()
        .zip(plan.resources.iter())
        .enumerate()
        .filter(|(_, (resource, planned))| {
            planned.change == Change::Unchanged
                && resource.exec.is_none()
                && match only {
                    Some(keys) => keys.contains(&resource.key()),
                    None => true,
                }
        })
        .map(|(i, _)| i)
        .collect();
    let checked = run_checks(ctx, manifest, bundle, generation, &which);
    let mut found = Found::default();
    for (i, checked) in which.into_iter().zip(checked) {
        if checked.result == Status::Drifted {
            plan.resources[i].change = Change::Drifted;
            found.drift.push(Drift {
                name: checked.key,
                detail: checked.detail.unwrap_or_default(),
            });
        } else if checked.result != Status::InSync {
            found.other.push(checked);
        }
    }
    found
}

/// What [`mark_drifted`] found: the drift it marked, and every other answer that was not
/// `in-sync` (a change that waits for a reboot, a check that failed).
#[derive(Default)]
pub struct Found {
    pub drift: Vec<Drift>,
    pub other: Vec<Checked>,
}

/// Lines of a drifted text file shown at most, from each side.
const DIFF_LINES: usize = 5;
/// Files larger than this are said to differ, not diffed.
const DIFF_MAX_BYTES: usize = 256 * 1024;

/// The lines where `want` (the bundle's) and `have` (the host's) part: the common head and
/// tail are skipped, and what is left is shown as `-` the bundle's, `+` the host's, a few
/// lines each. Enough to see an edit by hand; the whole file is in the bundle for more.
fn short_diff(want: &str, have: &str) -> String {
    let want: Vec<&str> = want.lines().collect();
    let have: Vec<&str> = have.lines().collect();
    let head = want.iter().zip(&have).take_while(|(a, b)| a == b).count();
    let tail = want[head..]
        .iter()
        .rev()
        .zip(have[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = &want[head..want.len() - tail];
    let added = &have[head..have.len() - tail];
    let mut out = format!("content differs from line {} (- bundle, + host):", head + 1);
    for (sign, lines) in [('-', removed), ('+', added)] {
        for line in lines.iter().take(DIFF_LINES) {
            out.push_str(&format!("\n    {sign} {}", line.escape_debug()));
        }
        if lines.len() > DIFF_LINES {
            out.push_str(&format!(
                "\n    {sign} … {} more lines",
                lines.len() - DIFF_LINES
            ));
        }
    }
    if removed.is_empty() && added.is_empty() {
        // Only line endings or a final newline differ.
        out = "content differs in line endings or the final newline".to_string();
    }
    out
}

/// How the content of a managed file differs: a short diff for a text file that is no
/// secret, otherwise only that it differs. A secret's lines are never printed, and what the
/// host holds counts too: a file someone made private on the host (`chmod 600` after adding
/// a password to it) or a private key written over it stays out of the report.
fn content_drift(
    bundle: &Path,
    file: &bell_bundle::File,
    on_host: &[u8],
    host_mode: u32,
) -> String {
    let plain = "content differs".to_string();
    if file.is_secret()
        || bell_bundle::private_mode(host_mode)
        || bell_bundle::looks_like_private_key(on_host)
        || on_host.len() > DIFF_MAX_BYTES
    {
        return plain;
    }
    let ours = bundle.join("root").join(file.path.trim_start_matches('/'));
    let Ok(want) = fs::read(ours) else {
        return plain;
    };
    match (std::str::from_utf8(&want), std::str::from_utf8(on_host)) {
        (Ok(want), Ok(have)) if want.len() <= DIFF_MAX_BYTES => short_diff(want, have),
        _ => plain,
    }
}

/// How a managed file on disk differs from the bundle, if it does.
fn file_drift(
    root: &Root,
    accounts: &Accounts,
    bundle: &Path,
    file: &bell_bundle::File,
) -> Option<String> {
    let target = root.host(&file.path);
    let meta = match fs::symlink_metadata(&target) {
        Ok(meta) => meta,
        Err(_) => return Some("missing".to_string()),
    };
    if !meta.file_type().is_file() {
        return Some("no longer a regular file".to_string());
    }
    let mut diffs = Vec::new();
    // Hashed in pieces and never through a FIFO: a host file may be anything.
    match bell_bundle::file_sha256(&target) {
        Ok(sha) if sha == file.sha256 => {}
        Ok(_) => match bell_bundle::read_regular(&target, DIFF_MAX_BYTES as u64) {
            Ok(bytes) => diffs.push(content_drift(bundle, file, &bytes, meta.mode())),
            Err(_) => diffs.push("content differs".to_string()),
        },
        Err(_) => diffs.push("content differs".to_string()),
    }
    let mode = bell_bundle::parse_mode(&file.mode).unwrap_or(0o644);
    if meta.mode() & 0o7777 != mode {
        diffs.push(format!(
            "mode {:04o}, the bundle sets {}",
            meta.mode() & 0o7777,
            file.mode
        ));
    }
    let uid = accounts.uid(&file.owner).ok();
    let gid = accounts.gid(&file.group).ok();
    if uid != Some(meta.uid()) || gid != Some(meta.gid()) {
        diffs.push(format!(
            "owner {}:{}, the bundle sets {}:{}",
            meta.uid(),
            meta.gid(),
            file.owner,
            file.group
        ));
    }
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

/// `bell-run check`: the applied generation against the host.
pub fn check(ctx: &Ctx, state: &State) -> Result<CheckReport, Refusal> {
    let Some(generation) = state.generation.clone() else {
        return Err(Refusal::new(format!(
            "no generation has been applied under {}",
            ctx.root.dir.display()
        ))
        .help("there is nothing to check until `bell-run apply` has run"));
    };
    let bundle = state::generation_dir(ctx.root, &generation);
    let manifest = bell_bundle::verify_opened(&bundle).map_err(|e| {
        Refusal::new(format!(
            "bell-run's copy of the applied generation does not verify: {e}"
        ))
        .help("apply the bundle again from its source")
    })?;
    let accounts = Accounts::load(&ctx.root.dir);
    let mut drift = Vec::new();
    for file in &manifest.files {
        if ctx.root.check_contained(&file.path).is_err() {
            drift.push(Drift {
                name: format!("file:{}", file.path),
                detail: "a directory on its path now leads outside the root".to_string(),
            });
            continue;
        }
        if let Some(detail) = file_drift(ctx.root, &accounts, &bundle, file) {
            drift.push(Drift {
                name: format!("file:{}", file.path),
                detail,
            });
        }
    }
    let mut resources = Vec::new();
    let mut errors = Vec::new();
    let mut deferred = Vec::new();
    // Work only a live host can do (an image bake deferred it): not done yet is not drift.
    let is_deferred = |resource: &Resource| {
        let record = state.resources.get(&resource.key());
        record.is_some_and(|r| r.result == Status::Deferred && r.hash == resource.hash)
    };
    let which: Vec<usize> = (0..manifest.resources.len())
        .filter(|&i| !is_deferred(&manifest.resources[i]))
        .collect();
    let mut results = run_checks(ctx, &manifest, &bundle, &generation, &which).into_iter();
    for resource in &manifest.resources {
        let key = resource.key();
        if is_deferred(resource) {
            deferred.push(key.clone());
            resources.push(Checked {
                key,
                result: Status::Deferred,
                detail: Some("deferred to the first live apply".to_string()),
            });
            continue;
        }
        let Some(mut checked) = results.next() else {
            break;
        };
        // A resource without a check of its own is out of sync when one of its files is.
        if checked.result == Status::NoCheck {
            let files: Vec<&str> = drift
                .iter()
                .filter_map(|d| d.name.strip_prefix("file:"))
                .filter(|path| {
                    let mut owned = resource.files.iter().chain(&resource.lines_in);
                    owned.any(|f| f == path)
                })
                .collect();
            if !files.is_empty() {
                checked.result = Status::DriftedFiles;
                checked.detail = Some(files.join(", "));
            }
        }
        match checked.result {
            Status::Drifted => drift.push(Drift {
                name: checked.key.clone(),
                detail: checked.detail.clone().unwrap_or_default(),
            }),
            Status::Error => errors.push(checked.key.clone()),
            _ => {}
        }
        resources.push(checked);
    }
    let mut reboot_required = reboot_reasons(ctx, &resources);
    reboot_required.extend(crate::reboot::exec_reasons(
        &manifest,
        state,
        ctx.boot.as_deref(),
    ));
    let marked: Vec<&str> = drift
        .iter()
        .filter(|d| !d.name.starts_with("file:"))
        .map(|d| d.name.as_str())
        .collect();
    let marks = state::drift_marks_path(ctx.root);
    if marked.is_empty() {
        let _ = std::fs::remove_file(&marks);
    } else {
        // Best effort: without the marks an offline apply repairs the files but not these.
        let _ = std::fs::write(&marks, marked.join("\n") + "\n");
    }
    let health = crate::health::run_probes(ctx, &manifest, &bundle, &generation);
    Ok(CheckReport {
        health,
        deferred,
        generation,
        fleet: manifest.fleet.clone(),
        resources,
        drift,
        errors,
        reboot_required,
        manifest: Some(manifest),
    })
}

/// Why the host needs a reboot: every check that says its change waits for the next boot,
/// then what the host itself says (see `reboot`).
pub fn reboot_reasons<'a>(
    ctx: &Ctx,
    checked: impl IntoIterator<Item = &'a Checked>,
) -> Vec<String> {
    checked
        .into_iter()
        .filter(|c| c.result == Status::RebootRequired)
        .map(|c| match &c.detail {
            Some(detail) => format!("{}: {detail}", c.key),
            None => format!("{}: takes effect at the next boot", c.key),
        })
        .chain(crate::reboot::host_reasons(ctx))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::short_diff;

    #[test]
    fn a_short_diff_shows_only_the_lines_that_part() {
        let want = "a\nb\nswappiness=10\nc\n";
        let have = "a\nb\nswappiness=60\nc\n";
        assert_eq!(
            short_diff(want, have),
            "content differs from line 3 (- bundle, + host):\n    - swappiness=10\n    + swappiness=60"
        );
        let long: String = (0..20).map(|i| format!("x{i}\n")).collect();
        let d = short_diff("", &long);
        assert!(d.ends_with("    + … 15 more lines"), "{d}");
        assert_eq!(
            short_diff("a\n", "a"),
            "content differs in line endings or the final newline"
        );
    }
}

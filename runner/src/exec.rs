//! The schedule of `exec` resources: whether the user's script is due under its policy
//! (rerun always / never / once-successfully, rerun and retry intervals, a background run
//! still going), and folding a finished background run's result into the record.

use crate::scripts::BackgroundResult;
use crate::state::ExecRecord;
use crate::sys;
use bell_bundle::{ExecPolicy, Rerun};
use std::path::Path;

/// Whether the script last ran in an earlier boot than `boot` (a boot that cannot be read is
/// never taken for a new one).
pub fn booted_since(rec: &ExecRecord, boot: Option<&str>) -> bool {
    matches!((rec.boot_id.as_deref(), boot), (Some(last), Some(now)) if last != now)
}

/// `Ok(why)` when the script should run now, `Err(why not)` otherwise. `identity` is the
/// script's [`bell_bundle::Resource::exec_identity`]; `boot` the running kernel's boot id.
pub fn due(
    policy: &ExecPolicy,
    rec: &ExecRecord,
    identity: &str,
    now: u64,
    boot: Option<&str>,
) -> Result<String, String> {
    if let Some(running) = &rec.running {
        return Err(format!(
            "still running in the background (pid {}) since {}",
            running.pid, running.started
        ));
    }
    match rec.ran_hash.as_deref() {
        None => return Ok("first run of this script".to_string()),
        // A script that ran before is never called a first run: a reviewer reading the
        // output after a failure must see that this is the fix being tried.
        Some(ran) if ran != identity => {
            let last = match rec.last_ok {
                Some(true) => ", which succeeded",
                Some(false) => ", which failed",
                None => "",
            };
            return Ok(format!("the script changed since its last run{last}"));
        }
        Some(_) => {}
    }
    let booted = booted_since(rec, boot);
    // Counts are per boot: a boot starts them again.
    let (reruns, retries) = if booted {
        (0, 0)
    } else {
        (rec.reruns, rec.retries)
    };
    let succeeded = rec.last_ok == Some(true);
    match policy.rerun {
        Rerun::Never => Err("ran once; rerun is `never`".to_string()),
        Rerun::OnceSuccessfully if succeeded => {
            Err("succeeded once; rerun is `once-successfully`".to_string())
        }
        Rerun::Always if succeeded => match (policy.rerun_max_count, policy.rerun_interval) {
            (Some(max), _) if reruns >= max => Err(format!(
                "reran {reruns} times since boot (rerun-max-count {max}); a boot starts the count again"
            )),
            (_, Some(_)) if booted && !policy.rerun_interval_persist => Ok(
                "first apply since a boot (rerun-interval-persist is false)".to_string(),
            ),
            (_, Some(interval)) => match rec.last_start {
                Some(last) if now < last.saturating_add(interval) => Err(format!(
                    "next run at {} (rerun-interval {interval}s)",
                    last.saturating_add(interval)
                )),
                _ => Ok("rerun is `always`".to_string()),
            },
            (_, None) => Ok("rerun is `always`".to_string()),
        },
        _ => match (policy.retry_max_count, policy.retry_interval) {
            (Some(max), _) if retries >= max => Err(format!(
                "failed; retried {retries} times since boot (retry-max-count {max}); a boot \
                 starts the count again"
            )),
            (_, Some(_)) if booted && !policy.retry_interval_persist => Ok(
                "first apply since a boot (retry-interval-persist is false)".to_string(),
            ),
            (_, Some(interval)) => match rec.last_finish.or(rec.last_start) {
                Some(last) if now < last.saturating_add(interval) => Err(format!(
                    "failed; retry at {} (retry-interval {interval}s)",
                    last.saturating_add(interval)
                )),
                _ => Ok("retrying after a failure".to_string()),
            },
            (_, None) => Ok("retrying after a failure".to_string()),
        },
    }
}

/// Counts the run that starts now into the record: a rerun of a script that succeeded, or a
/// retry of one that failed, in this boot.
pub fn count_start(rec: &mut ExecRecord, identity: &str, boot: Option<&str>) {
    if booted_since(rec, boot) || rec.ran_hash.as_deref() != Some(identity) {
        rec.reruns = 0;
        rec.retries = 0;
    }
    if rec.ran_hash.as_deref() == Some(identity) {
        match rec.last_ok {
            Some(true) => rec.reruns += 1,
            Some(false) => rec.retries += 1,
            None => {}
        }
    }
    rec.boot_id = boot.map(str::to_string);
}

/// A run that succeeded ends the failures it was retrying.
pub fn count_finish(rec: &mut ExecRecord, ok: bool) {
    if ok {
        rec.retries = 0;
    }
}

/// Folds a background run's result into the record once its supervisor has written it; a
/// supervisor that died without a result counts as a failed run.
pub fn collect_background(rec: &mut ExecRecord, root_dir: &Path) -> Option<String> {
    let running = rec.running.clone()?;
    let file = root_dir.join(running.result_file.trim_start_matches('/'));
    let text = crate::rootfs::read_record(&file).ok().flatten();
    let result: Option<BackgroundResult> = text.and_then(|t| serde_json::from_str(&t).ok());
    match result {
        Some(result) => {
            let ok = result.exit.ok();
            rec.last_ok = Some(ok);
            count_finish(rec, ok);
            rec.last_finish = Some(result.finished);
            if ok {
                rec.last_success = Some(result.finished);
            }
            rec.running = None;
            let _ = std::fs::remove_file(&file);
            Some(format!(
                "background run finished: {}",
                result.exit.describe()
            ))
        }
        None if sys::pid_alive(running.pid) => None,
        None => {
            rec.last_ok = Some(false);
            rec.running = None;
            Some("background run ended without a result".to_string())
        }
    }
}

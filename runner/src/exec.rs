//! The schedule of `exec` resources: whether the user's script is due under its policy
//! (rerun always / never / once-successfully, rerun and retry intervals, a background run
//! still going), and folding a finished background run's result into the record.

use crate::scripts::BackgroundResult;
use crate::state::ExecRecord;
use crate::sys;
use bell_bundle::{ExecPolicy, Rerun};
use std::path::Path;

/// `Ok(why)` when the script should run now, `Err(why not)` otherwise.
/// `identity` is the script's [`bell_bundle::Resource::exec_identity`].
pub fn due(
    policy: &ExecPolicy,
    rec: &ExecRecord,
    identity: &str,
    now: u64,
) -> Result<String, String> {
    if let Some(running) = &rec.running {
        return Err(format!(
            "still running in the background (pid {}) since {}",
            running.pid, running.started
        ));
    }
    if rec.ran_hash.as_deref() != Some(identity) {
        return Ok("first run of this script".to_string());
    }
    let succeeded = rec.last_ok == Some(true);
    match policy.rerun {
        Rerun::Never => Err("ran once; rerun is `never`".to_string()),
        Rerun::OnceSuccessfully if succeeded => {
            Err("succeeded once; rerun is `once-successfully`".to_string())
        }
        Rerun::Always if succeeded => match (policy.rerun_interval, rec.last_start) {
            (Some(interval), Some(last)) if now < last.saturating_add(interval) => Err(format!(
                "next run at {} (rerun-interval {interval}s)",
                last.saturating_add(interval)
            )),
            _ => Ok("rerun is `always`".to_string()),
        },
        _ => match (policy.retry_interval, rec.last_finish.or(rec.last_start)) {
            (Some(interval), Some(last)) if now < last.saturating_add(interval) => Err(format!(
                "failed; retry at {} (retry-interval {interval}s)",
                last.saturating_add(interval)
            )),
            _ => Ok("retrying after a failure".to_string()),
        },
    }
}

/// Folds a background run's result into the record once its supervisor has written it; a
/// supervisor that died without a result counts as a failed run.
pub fn collect_background(rec: &mut ExecRecord, root_dir: &Path) -> Option<String> {
    let running = rec.running.clone()?;
    let file = root_dir.join(running.result_file.trim_start_matches('/'));
    let text = std::fs::read_to_string(&file).ok();
    let result: Option<BackgroundResult> = text.and_then(|t| serde_json::from_str(&t).ok());
    match result {
        Some(result) => {
            let ok = result.exit.ok();
            rec.last_ok = Some(ok);
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

//! Reverting a departed resource: one the new bundle no longer has is taken back with the
//! revert script of the generation that applied it, read from bell-run's own copy of it.

use crate::context::{load_generation, Ctx, Outcome};
use crate::state;
use bell_bundle::Manifest;
use bell_store::Status;
use std::collections::BTreeMap;
use std::fs;

fn split_key(key: &str) -> (&str, &str) {
    key.split_once(':').unwrap_or((key, ""))
}

pub(crate) fn revert(
    ctx: &Ctx,
    cache: &mut BTreeMap<String, Option<Manifest>>,
    key: &str,
    generation: &str,
) -> Outcome {
    let (kind, name) = split_key(key);
    let Some(manifest) = load_generation(ctx, cache, generation) else {
        return Outcome::new(
            key,
            None,
            Status::Failed,
            Some(format!(
                "cannot revert: bell-run's copy of generation {} is missing or damaged",
                bell_bundle::short_id(generation)
            )),
        );
    };
    let script = manifest
        .resources
        .iter()
        .find(|r| r.key() == key)
        .and_then(|r| r.revert.clone());
    let state_dir = state::resource_state_dir(ctx.root, kind, name);
    // A departed resource is reverted whatever its last apply did: a failed apply may still
    // have left things behind.
    let Some(script) = script else {
        let _ = fs::remove_dir_all(&state_dir);
        return Outcome::new(
            key,
            None,
            Status::Reverted,
            Some("no revert script".to_string()),
        );
    };
    if ctx.skips(&script) {
        let _ = fs::remove_dir_all(&state_dir);
        return Outcome::new(key, None, Status::Reverted, None);
    }
    let bundle = state::generation_dir(ctx.root, generation);
    let log = state::resource_log_dir(ctx.root, kind, name).join("revert.log");
    let (exit, log) = ctx.run_sh(
        &bundle,
        &script.path,
        kind,
        ctx.env(kind, name, generation),
        log,
    );
    let mut outcome = if exit.ok() {
        let _ = fs::remove_dir_all(&state_dir);
        Outcome::new(key, None, Status::Reverted, None)
    } else {
        Outcome::new(
            key,
            None,
            Status::Failed,
            Some(format!("revert {}", exit.describe())),
        )
    };
    outcome.log = Some(log);
    outcome
}

//! Triggers: the scripts that run once per apply when a managed path under them changed
//! (`systemctl daemon-reload` after a unit file, ...), including a trigger only the previous
//! generation has, for the paths the new one stopped managing.

use crate::context::{load_generation, Ctx, Outcome};
use crate::plan::{self, Plan};
use crate::state::{self, Pending};
use bell_bundle::Manifest;
use std::collections::BTreeMap;

fn matches_prefix(path: &str, prefix: &str) -> bool {
    if prefix.ends_with('/') {
        path.starts_with(prefix)
    } else {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Triggers of the new generation whose paths saw a change, and triggers that only the
/// previous generation has, for paths it managed and the new one removed (dropping the last
/// unit must still `daemon-reload`).
pub(crate) fn fired_triggers(
    manifest: &Manifest,
    id: &str,
    previous: Option<&(String, &Manifest)>,
    plan: &Plan,
) -> Vec<Pending> {
    let touched: Vec<&str> = plan
        .files
        .iter()
        .filter(|f| !matches!(f, plan::FileAction::Leave { .. }))
        .map(|f| f.path())
        .collect();
    let hits = |t: &bell_bundle::Trigger, paths: &[&str]| {
        t.paths
            .iter()
            .any(|p| paths.iter().any(|path| matches_prefix(path, p)))
    };
    let mut fired: Vec<Pending> = manifest
        .triggers
        .iter()
        .filter(|t| hits(t, &touched))
        .map(|t| Pending {
            name: t.name.clone(),
            generation: id.to_string(),
        })
        .collect();
    if let Some((id, prev)) = previous {
        let removed: Vec<&str> = plan
            .files
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    plan::FileAction::Remove { .. } | plan::FileAction::Restore { .. }
                )
            })
            .map(|f| f.path())
            .collect();
        for trigger in &prev.triggers {
            let known = manifest.triggers.iter().any(|t| t.name == trigger.name);
            if !known && hits(trigger, &removed) {
                fired.push(Pending {
                    name: trigger.name.clone(),
                    generation: id.clone(),
                });
            }
        }
    }
    fired
}

pub(crate) fn run_trigger(
    ctx: &Ctx,
    cache: &mut BTreeMap<String, Option<Manifest>>,
    pending: &Pending,
) -> Outcome {
    let key = format!("trigger:{}", pending.name);
    let script = load_generation(ctx, cache, &pending.generation).and_then(|m| {
        m.triggers
            .iter()
            .find(|t| t.name == pending.name)
            .map(|t| t.script.clone())
    });
    let Some(script) = script else {
        return Outcome::new(
            &key,
            None,
            "failed",
            Some("the generation holding this trigger is missing".to_string()),
        );
    };
    if ctx.skips(&script) {
        return Outcome::new(&key, None, "ok", None);
    }
    let bundle = state::generation_dir(ctx.root, &pending.generation);
    let log = state::resource_log_dir(ctx.root, "trigger", &pending.name).join("trigger.log");
    let env = ctx.env("trigger", &pending.name, &pending.generation);
    let (exit, log) = ctx.run_sh(&bundle, &script.path, "trigger", env, log);
    let mut outcome = if exit.ok() {
        Outcome::new(&key, None, "ok", None)
    } else {
        Outcome::new(&key, None, "failed", Some(exit.describe()))
    };
    outcome.log = Some(log);
    outcome
}

//! Triggers: the scripts that run once per apply when a managed path under them changed
//! (`systemctl daemon-reload` after a unit file, ...), including a trigger only the previous
//! generation has, for the paths the new one stopped managing.

use crate::context::{load_generation, Ctx, Outcome};
use crate::plan::{self, Plan};
use crate::state::{self, Pending};
use bell_bundle::Manifest;
use bell_store::Status;
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

/// How a fired path is given to the trigger: `created=PATH` for a file that was not there,
/// `changed=PATH` for new content (or an original put back), `removed=PATH`.
fn describe(action: &plan::FileAction) -> Option<String> {
    let word = match action {
        plan::FileAction::Write { created: true, .. } => "created",
        plan::FileAction::Write { .. } | plan::FileAction::Restore { .. } => "changed",
        plan::FileAction::Remove { .. } => "removed",
        plan::FileAction::Leave { .. } => return None,
    };
    Some(format!("{word}={}", action.path()))
}

/// A trigger fired by `actions`, told which of them fired it (when they fit).
fn fire(
    trigger: &bell_bundle::Trigger,
    generation: &str,
    actions: &[&plan::FileAction],
) -> Option<Pending> {
    let paths: Vec<String> = actions
        .iter()
        .filter(|a| trigger.paths.iter().any(|p| matches_prefix(a.path(), p)))
        .filter_map(|a| describe(a))
        .collect();
    if paths.is_empty() {
        return None;
    }
    Some(Pending {
        name: trigger.name.clone(),
        generation: generation.to_string(),
        paths: state::capped(paths),
    })
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
    let touched: Vec<&plan::FileAction> = plan
        .files
        .iter()
        .filter(|f| !matches!(f, plan::FileAction::Leave { .. }))
        .collect();
    let mut fired: Vec<Pending> = manifest
        .triggers
        .iter()
        .filter_map(|t| fire(t, id, &touched))
        .collect();
    if let Some((id, prev)) = previous {
        let removed: Vec<&plan::FileAction> = plan
            .files
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    plan::FileAction::Remove { .. } | plan::FileAction::Restore { .. }
                )
            })
            .collect();
        for trigger in &prev.triggers {
            let known = manifest.triggers.iter().any(|t| t.name == trigger.name);
            if !known {
                fired.extend(fire(trigger, id, &removed));
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
            Status::Failed,
            Some("the generation holding this trigger is missing".to_string()),
        );
    };
    if ctx.skips(&script) {
        return Outcome::new(&key, None, Status::Ok, None);
    }
    let bundle = state::generation_dir(ctx.root, &pending.generation);
    let log = state::resource_log_dir(ctx.root, "trigger", &pending.name).join("trigger.log");
    let env = ctx.env("trigger", &pending.name, &pending.generation);
    let paths = pending.paths.as_deref().unwrap_or_default();
    let (exit, log) = ctx.run_sh_with(&bundle, &script.path, paths, "trigger", env, log);
    let mut outcome = if exit.ok() {
        Outcome::new(&key, None, Status::Ok, None)
    } else {
        Outcome::new(&key, None, Status::Failed, Some(exit.describe()))
    };
    outcome.log = Some(log);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger() -> bell_bundle::Trigger {
        bell_bundle::Trigger {
            name: "reload".into(),
            paths: vec!["/etc/u/".into()],
            script: bell_bundle::Script {
                path: "scripts/t".into(),
                sha256: String::new(),
                size: None,
                secret: false,
                sealed: false,
                live_only: false,
            },
        }
    }

    fn created(path: String) -> plan::FileAction {
        plan::FileAction::Write {
            path,
            created: true,
            backup: false,
            uid: 0,
            gid: 0,
            mode: 0o644,
            drifted: false,
        }
    }

    #[test]
    fn too_many_paths_are_not_passed_and_the_trigger_takes_everything_as_changed() {
        let few: Vec<plan::FileAction> = (0..10).map(|i| created(format!("/etc/u/{i}"))).collect();
        let few: Vec<&plan::FileAction> = few.iter().collect();
        let fired = fire(&trigger(), "g", &few).expect("fired");
        assert_eq!(fired.paths.as_ref().map(Vec::len), Some(10));

        let name = "x".repeat(100);
        let many: Vec<plan::FileAction> = (0..1000)
            .map(|i| created(format!("/etc/u/{name}{i}")))
            .collect();
        let many: Vec<&plan::FileAction> = many.iter().collect();
        assert_eq!(fire(&trigger(), "g", &many).expect("fired").paths, None);

        let outside = created("/etc/other".into());
        assert!(fire(&trigger(), "g", &[&outside]).is_none());
    }

    #[test]
    fn paths_of_two_firings_add_up_and_not_knowing_either_wins() {
        let mut owed = Pending {
            name: "reload".into(),
            generation: "g".into(),
            paths: Some(vec!["created=/a".into()]),
        };
        owed.add_paths(Some(&["created=/a".into(), "changed=/b".into()]));
        assert_eq!(
            owed.paths,
            Some(vec!["created=/a".to_string(), "changed=/b".to_string()])
        );
        let long = "x".repeat(state::MAX_TRIGGER_PATHS_BYTES / 2);
        let mut near_cap = owed.clone();
        near_cap.add_paths(Some(&[format!("created=/{long}")]));
        assert_eq!(near_cap.paths.as_ref().map(Vec::len), Some(3));
        near_cap.add_paths(Some(&[format!("changed=/{long}")]));
        assert_eq!(near_cap.paths, None, "a union past the cap is not passed");
        owed.add_paths(None);
        assert_eq!(owed.paths, None);
        owed.add_paths(Some(&["created=/c".into()]));
        assert_eq!(owed.paths, None);
    }
}

//! The generations bell-run keeps a copy of: what `bell-run generations` lists and what
//! `rollback` chooses from.
//!
//! A generation is a bundle this root has applied. They are ordered by when each was *first*
//! applied, as NixOS numbers its generations: a rollback from the newest to the one before is
//! applied again but keeps its place, so a second rollback goes further back instead of
//! bringing the newest back.

use crate::context::Refusal;
use crate::rootfs::Root;
use crate::state::{self, State};
use bell_bundle::short_id;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    /// The bundle id.
    pub id: String,
    /// Unix seconds of its first and of its last apply that history remembers.
    pub first_applied: u64,
    pub last_applied: u64,
    /// `ok` or `failed`: how its last apply ended.
    pub result: String,
    /// The release its last apply was for, when that run knew it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The generation applied now.
    pub current: bool,
}

/// The generations whose bundle copy is kept, oldest (first applied) first.
pub fn kept(root: &Root, state: &State) -> Vec<Generation> {
    let mut list: Vec<Generation> = Vec::new();
    for entry in &state.history {
        match list.iter_mut().find(|g| g.id == entry.generation) {
            Some(g) => {
                g.last_applied = entry.applied_at;
                g.result = entry.result.clone();
                g.release = entry.release.clone();
            }
            None => list.push(Generation {
                id: entry.generation.clone(),
                first_applied: entry.applied_at,
                last_applied: entry.applied_at,
                result: entry.result.clone(),
                release: entry.release.clone(),
                current: false,
            }),
        }
    }
    // A state written before history was kept still names its generation.
    if let Some(current) = &state.generation {
        if !list.iter().any(|g| &g.id == current) {
            let at = state.applied_at.unwrap_or(0);
            list.push(Generation {
                id: current.clone(),
                first_applied: at,
                last_applied: at,
                result: state.result.clone().unwrap_or_else(|| "unknown".into()),
                release: state.release.clone(),
                current: false,
            });
        }
    }
    for g in &mut list {
        g.current = state.generation.as_ref() == Some(&g.id);
    }
    list.retain(|g| state::generation_dir(root, &g.id).is_dir());
    list
}

/// The kept generation `wanted` names: its whole id or a prefix only it has.
pub fn find<'g>(kept: &'g [Generation], wanted: &str) -> Result<&'g Generation, Refusal> {
    let listed = || "`bell-run generations` lists the kept ones".to_string();
    if wanted.is_empty() || !wanted.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Refusal::new(format!(
            "`--to {wanted}` is not a generation: a generation is named by its bundle id, or \
             the first characters of it"
        ))
        .help(listed()));
    }
    let wanted = wanted.to_ascii_lowercase();
    let matches: Vec<&Generation> = kept.iter().filter(|g| g.id.starts_with(&wanted)).collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(Refusal::new(format!(
            "no kept generation starts with `{wanted}` (bell-run keeps the copies of the last {} \
             besides the applied one)",
            state::KEEP_GENERATIONS
        ))
        .help(listed())),
        many => Err(Refusal::new(format!(
            "`{wanted}` begins {} kept generations: {}",
            many.len(),
            many.iter()
                .map(|g| short_id(&g.id))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .help("give more of the id")),
    }
}

/// Where a plain `rollback` goes: the kept generation first applied before the current one.
pub fn previous(kept: &[Generation]) -> Result<&Generation, Refusal> {
    let Some(at) = kept.iter().position(|g| g.current) else {
        return match kept.last() {
            Some(last) => Ok(last),
            None => Err(
                Refusal::new("there is no previous generation to roll back to")
                    .help("`bell-run status` shows what is applied"),
            ),
        };
    };
    match at.checked_sub(1) {
        Some(before) => Ok(&kept[before]),
        None => Err(Refusal::new(format!(
            "{} is the oldest generation kept: there is none before it",
            short_id(&kept[at].id)
        ))
        .help(match kept.get(at + 1) {
            Some(newer) => format!(
                "`bell-run generations` lists them; `bell-run rollback --to {}` goes to a newer one",
                short_id(&newer.id)
            ),
            None => "`bell-run generations` lists them".to_string(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::HistoryEntry;

    fn state_of(applies: &[&str], current: &str) -> State {
        State {
            generation: Some(current.to_string()),
            history: applies
                .iter()
                .enumerate()
                .map(|(i, g)| HistoryEntry {
                    generation: g.to_string(),
                    applied_at: 100 + i as u64,
                    result: "ok".into(),
                    release: Some(format!("r{i}")),
                })
                .collect(),
            ..State::default()
        }
    }

    fn kept_in(dir: &std::path::Path, state: &State, ids: &[&str]) -> Vec<Generation> {
        let root = Root::open(dir).unwrap();
        for id in ids {
            std::fs::create_dir_all(state::generation_dir(&root, id)).unwrap();
        }
        kept(&root, state)
    }

    #[test]
    fn rollback_goes_further_back_each_time() {
        let dir = tempfile::tempdir().unwrap();
        // a, b, c applied; then a rollback to b: b keeps its place, so the next goes to a.
        let state = state_of(&["aaa1", "bbb2", "ccc3", "bbb2"], "bbb2");
        let kept = kept_in(dir.path(), &state, &["aaa1", "bbb2", "ccc3"]);
        let ids: Vec<&str> = kept.iter().map(|g| g.id.as_str()).collect();
        assert_eq!(ids, ["aaa1", "bbb2", "ccc3"]);
        assert_eq!(kept[1].last_applied, 103);
        assert_eq!(kept[1].release.as_deref(), Some("r3"));
        assert_eq!(previous(&kept).unwrap().id, "aaa1");
        let state = state_of(&["aaa1", "bbb2", "ccc3", "bbb2", "aaa1"], "aaa1");
        let kept = kept_in(dir.path(), &state, &[]);
        let refusal = previous(&kept).unwrap_err();
        assert!(
            refusal.message.contains("oldest generation kept"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_generation_is_named_by_a_prefix_only_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let state = state_of(&["abc1", "abd2", "f003"], "f003");
        let kept = kept_in(dir.path(), &state, &["abc1", "abd2", "f003"]);
        assert_eq!(find(&kept, "abc").unwrap().id, "abc1");
        assert_eq!(find(&kept, "F0").unwrap().id, "f003");
        assert!(find(&kept, "ab")
            .unwrap_err()
            .message
            .contains("begins 2 kept"));
        assert!(find(&kept, "9")
            .unwrap_err()
            .message
            .contains("no kept generation"));
        assert!(find(&kept, "../x")
            .unwrap_err()
            .message
            .contains("not a generation"));
        assert!(find(&kept, "").is_err());
        // A generation whose copy was pruned is not kept.
        std::fs::remove_dir_all(dir.path().join("var/lib/bell/generations/abd2")).unwrap();
        let state = state_of(&["abc1", "abd2", "f003"], "f003");
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(find(&super::kept(&root, &state), "ab").unwrap().id, "abc1");
    }
}

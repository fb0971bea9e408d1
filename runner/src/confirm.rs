//! Confirm or revert: after a live apply of a bundle with `confirm`, the host must reach its
//! fleet again (a real request to the store and one to the mirror, each on a new connection,
//! as the next pull would make them) and have its health probes pass, by a deadline; else it
//! applies the generation before again (the ordinary rollback: reverts of what is new, files
//! given back), and remembers the release as one it does not take again.
//!
//! The deadline is in the state before the wait begins, so a bell-run killed while it waits,
//! or a host that reboots into the new generation and never reaches its network, goes back all
//! the same: the next run of bell-run (the timer's, the one at boot) settles the confirmation
//! before anything else, and needs no network to go back. A generation that needs a reboot to
//! be in force is confirmed again in the next boot ([`due`]).

use crate::context::Refusal;
use crate::rootfs::Root;
use crate::state::{self, Confirming, Reverted, State};
use std::time::Duration;

/// How long one try to reach the fleet may take, and the pause between tries.
const TRY_FOR: Duration = Duration::from_secs(10);
const PAUSE: Duration = Duration::from_secs(2);

/// How a wait for the confirmation ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Confirmed,
    /// The deadline passed: why the last try failed.
    TimedOut(String),
}

/// Records that `confirming` waits to be confirmed (before the wait, so that a run killed
/// while waiting leaves it behind for the next).
pub fn begin(root: &Root, confirming: Confirming) -> Result<(), Refusal> {
    edit(root, |state| state.confirming = Some(confirming))
}

/// The wait `state` holds that is due in this run: none while it waits for another boot than
/// `boot`; in another boot, that boot's wait, begun now (and recorded). A wait left for a
/// generation the host no longer runs (rolled back by hand) is dropped.
pub fn due(root: &Root, state: &State, boot: Option<&str>) -> Result<Option<Confirming>, Refusal> {
    let Some(waiting) = &state.confirming else {
        return Ok(None);
    };
    let replace = |with: Option<Confirming>| {
        edit(root, |s| {
            if s.confirming.as_ref() == Some(waiting) {
                s.confirming = with.clone();
            }
        })
    };
    if state.generation.as_deref() != Some(waiting.generation.as_str()) {
        replace(None)?;
        return Ok(None);
    }
    if !waiting.after_boot {
        return Ok(Some(waiting.clone()));
    }
    if boot.is_none() || boot == waiting.reboots_from.as_deref() {
        return Ok(None);
    }
    let now = waiting.in_this_boot(state::now());
    errln!(
        "bell-run: generation {} is running in a new boot: it must reach its fleet within {} s, \
         or it is taken back",
        bell_bundle::short_id(&waiting.generation),
        waiting.timeout
    );
    replace(Some(now.clone()))?;
    Ok(Some(now))
}

/// Tries `reach` until it succeeds or `confirming`'s deadline passes; confirmed, the state
/// forgets the wait.
pub fn wait(
    root: &Root,
    confirming: &Confirming,
    reach: &dyn Fn(Duration) -> Result<(), String>,
) -> Result<Ended, Refusal> {
    let settling = confirming.tries_from.saturating_sub(state::now());
    if settling > 0 {
        errln!(
            "bell-run: generation {} applied; it must reach its fleet between {settling} s and \
             {} s from now, or it is taken back",
            bell_bundle::short_id(&confirming.generation),
            confirming.deadline.saturating_sub(state::now())
        );
        std::thread::sleep(Duration::from_secs(settling));
    }
    loop {
        let left = confirming.deadline.saturating_sub(state::now());
        let why = match reach(TRY_FOR.min(Duration::from_secs(left.max(1)))) {
            Ok(()) => {
                edit(root, |state| {
                    if state.confirming.as_ref() == Some(confirming) {
                        state.confirming = confirming.once_confirmed();
                    }
                })?;
                return Ok(Ended::Confirmed);
            }
            Err(why) => why,
        };
        let left = confirming.deadline.saturating_sub(state::now());
        if left == 0 {
            return Ok(Ended::TimedOut(why));
        }
        errln!(
            "bell-run: generation {} is not confirmed yet ({why}); {left} s left before it is \
             taken back",
            bell_bundle::short_id(&confirming.generation)
        );
        std::thread::sleep(PAUSE.min(Duration::from_secs(left)));
    }
}

/// What the state records once the host went back from `confirming` (the apply of the
/// generation before has been made): the release refused from now on, the wait over.
pub fn reverted(root: &Root, confirming: &Confirming, reason: &str) -> Result<(), Refusal> {
    edit(root, |state| {
        state.confirming = None;
        state.reverted.push(Reverted {
            release: confirming.release.clone(),
            generation: confirming.generation.clone(),
            reason: reason.to_string(),
            at: state::now(),
        });
        let extra = state.reverted.len().saturating_sub(state::KEEP_REVERTED);
        state.reverted.drain(..extra);
    })
}

/// The revert this host made of `release`, if it made one.
pub fn refused<'s>(state: &'s State, release: &str) -> Option<&'s Reverted> {
    state
        .reverted
        .iter()
        .rev()
        .find(|r| r.release.as_deref() == Some(release))
}

fn edit(root: &Root, change: impl FnOnce(&mut State)) -> Result<(), Refusal> {
    let _lock = crate::apply::lock(root)?;
    let mut state = state::load(root).map_err(Refusal::new)?;
    change(&mut state);
    state::save(root, &state).map_err(Refusal::new)
}

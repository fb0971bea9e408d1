//! Named crash points for the crash tests: when `BELL_RUN_FAILPOINT` names a point, bell-run
//! kills itself with SIGKILL there. Always compiled in (the tests run the real binary); the
//! cost is one cached environment lookup.
//!
//! The points, in the order an apply reaches them: before-revert, after-revert,
//! staging-journal, mid-stage, staged, committed, mid-switch, switched, switch-recorded,
//! before-apply, after-apply.

use std::sync::OnceLock;

pub fn hit(name: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("BELL_RUN_FAILPOINT").ok());
    if armed.as_deref() == Some(name) {
        crate::sys::kill_self();
    }
}

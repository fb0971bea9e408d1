//! Named crash points for the crash tests: when `BELL_ROLLOUT_FAILPOINT` names a point, the
//! controller dies there at once, as a killed one would: no lease let go, nothing flushed.
//! Always compiled in (the tests run the real binary); the cost is one cached environment
//! lookup.
//!
//! The points: record-saved (a new rollout's record signed into OUT, the store not yet told).

use std::sync::OnceLock;

pub(super) fn hit(name: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("BELL_ROLLOUT_FAILPOINT").ok());
    if armed.as_deref() == Some(name) {
        // No destructor runs: the lease lapses on its own, as after a SIGKILL.
        std::process::abort();
    }
}

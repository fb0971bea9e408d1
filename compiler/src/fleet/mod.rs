//! The fleet: what happens to a release after it is built.
//!
//! - [`status`]: the release against the reports hosts filed in the store (what they ran and
//!   how it went), and the gate a rollout waits on.
//!
//! Publishing lives in the binary today (`bellc publish` copies OUT into a store). Signed
//! releases, the disruption lock and the rollout controller belong here.

pub mod status;

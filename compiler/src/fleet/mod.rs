//! The fleet: what happens to a release after it is built.
//!
//! - [`status`]: the release against the reports hosts filed in the store (what they ran and
//!   how it went), and the gate a rollout waits on.
//! - [`signing`]: minisign keys and signed releases (a sequence that only grows, an expiry).
//!
//! Publishing lives in the binary today (`bellc publish` copies OUT into a store). The
//! disruption lock and the rollout controller belong here.

pub mod signing;
pub mod status;

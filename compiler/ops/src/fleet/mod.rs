//! The fleet: what happens to a release after it is built.
//!
//! - [`status`]: the release against the reports hosts filed in the store (what they ran and
//!   how it went), and the gate a rollout waits on.
//!   Releases are signed by the build (`bellc_core::emit::signing`), and what the key gave
//!   last is recorded in OUT ([`record`]).
//!
//! - [`rollout`]: the controller that moves a release through the fleet wave by wave, and
//!   [`rollout::history`], what each rollout did.
//! - [`store_roles`]: the etcd users and roles that let each part of the fleet write only
//!   its own keys.
//! - [`enroll`]: the registrations of hosts not in the inventory yet, for an operator to
//!   accept.
//! - [`trusted`]: the releases a reader takes the word of (`--trust`).
//! - [`witness`]: what a reader has seen each host sign, so that an old report put back is
//!   refused.

pub mod enroll;
pub mod follow;
pub mod record;
pub mod rollout;
pub mod status;
pub mod store_roles;
pub mod trusted;
pub mod witness;

/// Whether OUT's releases are signed: its release.json, a release it keeps, or the rollout
/// record of `fleet` (when given). Then nothing may write a release into it without the key.
pub fn out_is_signed(out: &std::path::Path, fleet: Option<&str>) -> bool {
    bellc_core::emit::signing::releases_are_signed(out)
        || fleet.is_some_and(|fleet| record::is_signed(out, fleet))
}

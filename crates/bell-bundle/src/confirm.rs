//! `confirm` of the spec: after a live apply of a new generation, the host must reach the
//! fleet again (a real request to its store and one to its mirror) and see its health probes
//! pass within `timeout`, or it puts itself back on the generation it ran before, by itself.
//! A change that cuts the host off the fleet (a route, a firewall file, a sysctl) then undoes
//! itself instead of waiting for a console, as deploy-rs's "magic rollback" and Junos's
//! `commit confirmed` do.

use serde::{Deserialize, Serialize};

/// The shortest and the longest wait the spec may ask for: a host needs a few seconds to
/// reach its store once its network is up again, and an hour cut off is already a console.
pub const SHORTEST: u64 = 5;
pub const LONGEST: u64 = 3600;

/// deploy-rs's default.
pub const DEFAULT: u64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirm {
    /// Seconds from the end of the apply (from the boot, after a reboot the release asked for).
    pub timeout: u64,
}

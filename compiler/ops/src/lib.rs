//! The fleet side of bellc: what runs after a build, against the fleet's store and its
//! served directory. `fleet` holds the rollout controller, status and its judgement, the
//! store's roles, enrollment, holds, signing and the signed records of what the key gave;
//! `serve` is the status page and its JSON API over `fleet`'s status; `gateway` the hosts'
//! door to the store; `watch` the cache of the store that follows it through an etcd watch
//! (the gateway answers from one, the page and the controller follow the fleet with theirs).
//!
//! It depends on the compiler's pipeline (`bellc-core`) for the build output's layout and the
//! review of two builds, never the other way: a build knows nothing of a fleet.

pub mod fleet;
pub mod gateway;
pub mod serve;
pub mod watch;

//! The graph stage: the order of things, inside a host and across the fleet.
//!
//! - [`resources`]: per host configuration, the resource DAG (`after`, and the implicit edges a
//!   careful operator would write anyway) and its apply order.
//! - [`services`]: who provides which service, whether every consumer finds enough providers,
//!   and the rollout layers that keep a consumer from restarting before its providers.
//! - [`waves`]: layers × the `rollout` policy → waves of hosts that may change together.
//!
//! Depends on the resolved hosts only; nothing here renders or writes.

pub mod resources;
pub mod services;
pub mod waves;

pub use resources::{order, order_hosts, GraphError, Reason, ResourceOrder};

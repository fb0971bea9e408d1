//! The front end: spec files on disk → one typed [`Spec`](crate::spec::Spec).
//!
//! Reads the root file and everything it includes (only inside the spec's own tree), parses
//! the KDL, loads JSON inventories, and lowers every node into the spec types, checking each
//! value whose syntax another tool defines (sysctl keys, SSH keys, crypt hashes, …) at its span.
//! Every mistake is reported, not only the first; lowering never stops at one.
//!
//! Public surface: [`load`] (a spec from a path), [`lower_root`] (a spec from a file already in
//! [`Sources`](crate::source::Sources)), the value checks in [`validate`] and the inventory
//! reader in [`inventory`].

pub mod assign;
pub mod inventory;
pub mod lower;
pub mod read;
pub mod recipients;
pub mod validate;

pub use lower::{load, lower_root};

//! Emission: the only stage that writes to disk.
//!
//! - [`release`]: the release (host → bundle id, rollout waves, version) from the rendered fleet.
//! - [`bundles`]: bundles in memory → the output directory ([`write()`]), or compared with it
//!   ([`check`], for `build --check`).
//! - [`releases`]: every release OUT held, kept by version, and `prune`.
//! - [`out_dir`]: which directories a build may write into and remove from, and the names of
//!   bellc's own files there.
//! - [`files`]: the error every writer of OUT shares, and removing what a build no longer names.
//! - [`incremental`]: the record of a build's inputs that lets an unchanged rebuild stop early.
//! - [`secrets`]: each host's secrets, sealed to its identity, beside the bundles.
//! - [`values`]: the values each bundle was rendered from, for value diffs.

pub mod bundles;
pub mod files;
pub mod incremental;
pub mod out_dir;
pub mod release;
pub mod releases;
pub mod secrets;
pub mod signing;
pub mod values;

pub use bundles::{check, write, write_with, BundleWriter, WriteStats, STORE_DIR};
pub use files::EmitError;
pub use out_dir::Trust;

//! Review: what a build says to the people who read it before it ships.
//!
//! - [`diff`]: a release against another (on disk or still in memory), grouped by bundle change.
//! - [`explain`]: one host's resolved configuration, every value with its layer and line.
//! - [`plan`]: the rollout waves as the table `bellc plan` prints.
//! - [`query`]: one value across many hosts, grouped by value, with where each was set.
//! - [`select`]: which hosts a command is about (names, globs, `--where LABEL=VALUE`).
//! - [`value_diff`]: a release against another value by value, with where new values were set.
//!
//! Everything here returns data or text; `main.rs` prints it.

pub mod diff;
pub mod explain;
pub mod plan;
pub mod query;
pub mod select;
pub mod value_diff;

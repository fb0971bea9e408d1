//! bellc-core: compiles a fleet spec into content-addressed per-host bundles.
//!
//! The pipeline, one folder per stage, in order; a stage uses only the stages before it and
//! the shared modules beside this file (spec types, sources, diagnostics, escaping, targets):
//!
//! ```text
//! front    KDL files (includes, inventories) → typed Spec          front/
//! resolve  Spec × hosts → per-host Model with provenance            resolve/
//! graph    Model → resource order; services → layers → waves        graph/
//! render   Model → bundle in memory (manifest, files, scripts)      render/
//! emit     release; bundles → OUT/ on disk; the incremental cache   emit/
//! review   diff, explain, the plan table                            review/
//! build    one build into OUT as `bellc build` runs it: a session       build/
//! ```
//!
//! What comes after a build lives in crates of its own that depend on this one: `bell-ops`
//! (the fleet: rollout, status, roles, enrollment; the status page) and `bell-import`
//! (another tool's configuration written as a spec). The library never prints or exits; the
//! `bellc` binary owns the terminal and exit codes.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
pub mod diagnostic;
pub mod escape;
pub mod kdl_text;
pub mod source;
pub mod spec;
pub mod targets;

pub mod build;
pub mod emit;
pub mod front;
pub mod graph;
pub mod kinds;
pub mod render;
pub mod resolve;
pub mod review;

pub use build::pipeline::{
    analyse, compile, compile_checked, compile_frontend, compile_frontend_sealed, compile_streamed,
    frontend, frontend_checked, resolved, template_errors, Checks, Compiled, Frontend, Streamed,
};

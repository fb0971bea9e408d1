//! bellc: compiles a fleet spec into per-host bundles.
pub mod escape;
pub mod fleetgen;
pub mod validate;

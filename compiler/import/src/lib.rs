//! Specs written from another tool's configuration, so that a fleet moves to bellc in one
//! command: `bellc import divingbell VALUES.yaml` reads an Airship Divingbell values file, and
//! `bellc import known-hosts` turns `ssh-keyscan` output into host identities.
//!
//! An import writes KDL text, the same a person would write, and reads nothing but the file it
//! is given; what it cannot express it keeps as a comment and reports as a warning.

pub mod divingbell;
pub mod known_hosts;
mod yaml;

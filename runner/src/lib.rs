//! The part of bell-run that is data others read: its command line's definition ([`spec`]),
//! from which runner/manual makes the man pages and shell completions. Everything else is the
//! binary's (src/main.rs).

pub mod spec;

//! bell-run: applies a bundle built by bellc on a host. See runner/README.md.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
mod accounts;
mod apply;
mod budget;
mod check;
mod cli;
mod confine;
mod context;
mod exec;
mod failpoint;
mod fetch;
mod generations;
mod health;
mod help;
mod identity;
mod journal;
mod metrics;
mod one_shell;
mod plan;
mod pull;
mod reboot;
mod rebooting;
mod register;
mod remove;
mod report;
mod revert;
mod rootfs;
mod scripts;
mod sealed;
mod state;
mod statedir;
mod sys;
mod timer;
mod timings;
mod triggers;
mod trust;

fn main() {
    // What bell-run creates gets the modes it means, whatever mask it was started with.
    sys::set_umask(0o022);
    std::process::exit(cli::main());
}

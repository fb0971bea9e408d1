//! bell-run: applies a bundle built by bellc on a host. See runner/README.md.

mod accounts;
mod apply;
mod check;
mod cli;
mod exec;
mod failpoint;
mod journal;
mod metrics;
mod plan;
mod report;
mod rootfs;
mod scripts;
mod state;
mod sys;
mod timer;

fn main() {
    std::process::exit(cli::main());
}

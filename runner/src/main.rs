//! bell-run: applies a bundle built by bellc on a host. See runner/README.md.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// A byte index into a string read from a host, a store or a mirror panics on a multibyte
// character: strings are cut with `get` or at a found character boundary.
#![cfg_attr(not(test), deny(clippy::string_slice))]

/// `println!` that never panics: a reader that went away (`bell-run --help | head -1`) or a
/// closed descriptor must not stop bell-run between two steps of an apply, as a panic in
/// `println!` would, nor kill it as a default SIGPIPE would. What could not be written is lost;
/// the exit code still says how the command ended.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!`, never panicking (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!`, never panicking (see [`outln!`]).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

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

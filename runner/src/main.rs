//! bell-run: applies a bundle built by bellc on a host. See runner/README.md.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// A byte index into a string read from a host, a store or a mirror panics on a multibyte
// character: strings are cut with `get` or at a found character boundary.
#![cfg_attr(not(test), deny(clippy::string_slice))]

/// `println!` that never panics and prints nothing a terminal acts on. A reader that went
/// away (`bell-run --help | head -1`) or a closed descriptor must not stop bell-run between two
/// steps of an apply, as a panic in `println!` would, nor kill it as a default SIGPIPE would:
/// what could not be written is lost, and the exit code still says how the command ended.
/// What a store or a mirror wrote is printed with its control characters and bidirectional
/// overrides escaped (`bell_bundle::shown::lines`: line breaks and tabs stay).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = bell_bundle::shown::lines(&format!($($arg)*));
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }};
}

/// `print!`, as [`outln!`] prints.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = bell_bundle::shown::lines(&format!($($arg)*));
        let _ = write!(std::io::stdout().lock(), "{text}");
    }};
}

/// A JSON value, pretty, never panicking; what JSON leaves raw in a string (C1 controls,
/// bidirectional overrides) escaped as `\uXXXX` ([`bell_bundle::shown::json`]).
macro_rules! outjson {
    ($value:expr) => {{
        use std::io::Write as _;
        let text = format!("{:#}", $value);
        let _ = writeln!(
            std::io::stdout().lock(),
            "{}",
            bell_bundle::shown::json(&text)
        );
    }};
}

/// `eprintln!`, as [`outln!`] prints.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = bell_bundle::shown::lines(&format!($($arg)*));
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    }};
}

mod accounts;
mod apply;
mod budget;
mod check;
mod cli;
mod confine;
mod confirm;
mod context;
mod exec;
mod failpoint;
mod fetch;
mod generations;
mod health;
mod help;
mod identity;
mod journal;
mod live;
mod live_mode;
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

//! The `bellc` command line. Owns the terminal: printing, colours and exit codes
//! (the table in `EXIT_CODES`: 0 ok, 1 spec errors or differences, 2 I/O errors, 64 usage).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// `println!` of one line that may hold what a host, the store or a mirror wrote (a report's
/// error, a registration's name, a lock holder): the whole line escaped by
/// [`bell_bundle::one_line`], so that no value moves the cursor, recolours the terminal or
/// starts a line of its own. JSON and multi-line text are printed otherwise.
macro_rules! outln {
    ($($arg:tt)*) => {
        println!("{}", bell_bundle::one_line(&format!($($arg)*)))
    };
}

/// `eprintln!` of one line, escaped as [`outln!`] escapes.
macro_rules! errln {
    ($($arg:tt)*) => {
        eprintln!("{}", bell_bundle::one_line(&format!($($arg)*)))
    };
}

/// `println!` of JSON text, with what JSON leaves raw in a string (C1 controls, bidirectional
/// overrides) escaped as `\uXXXX`: the same value to a JSON reader, nothing a terminal acts on.
macro_rules! outjson {
    ($text:expr) => {
        println!("{}", bell_bundle::shown::json(&$text))
    };
}

mod args;
mod build;
mod enroll;
mod gateway;
mod hosts;
mod import;
mod keys;
mod manual;
mod operator;
mod plan;
mod query;
mod review;
mod rollout;
mod secrets;
mod serve;
mod store_roles;

use args::{Cli, Command};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::source::Sources;
use clap::Parser;
use keys::{load_sign_key, sign_out};
use std::path::Path;
use std::process::ExitCode;

/// sysexits' EX_USAGE, apart from the codes a run decides.
const USAGE_ERROR: u8 = 64;

/// Why a command could not run: the command line itself, or what it named.
enum Failure {
    Usage(String),
    Io(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Io(message)
    }
}

/// Counts what a rendering template holds, so that a template that would exhaust memory stops
/// bellc with a diagnostic instead of an abort (see `bellc_core::render::budget`).
#[global_allocator]
static ALLOCATOR: bellc_core::render::budget::Budgeted = bellc_core::render::budget::Budgeted;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(USAGE_ERROR)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if !matches!(cli.command, Command::Serve { .. } | Command::Gateway(_)) {
        quiet_on_a_closed_pipe();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut sources = Sources::with_base(cwd);
    let mut diags = Diagnostics::new();
    let code = match cli.secrets_key.as_deref().map(secrets_key) {
        Some(Err(e)) => Err(e),
        Some(Ok(keys)) => {
            sources.open_secrets_with(keys);
            run(&cli, &mut sources, &mut diags)
        }
        None => run(&cli, &mut sources, &mut diags),
    };
    let warnings_fail = cli.deny_warnings && diags.warning_count() > 0;
    let has_errors = diags.has_errors();
    let ok_line = match &cli.command {
        Command::Check { spec, .. } if code.is_ok() => Some(format!("{}: ok", spec.display())),
        _ => None,
    };
    print_diagnostics(diags, &sources, cli.short, ok_line);
    match code {
        Ok(code) if has_errors || warnings_fail => ExitCode::from(code.max(1)),
        Ok(code) => ExitCode::from(code),
        // An error may quote what the store or a mirror holds: each of its lines escaped.
        Err(Failure::Usage(message)) => {
            let message = bell_bundle::shown::lines(&message);
            eprintln!("error: {message}\n\nFor more information, try '--help'.");
            ExitCode::from(USAGE_ERROR)
        }
        Err(Failure::Io(message)) => {
            eprintln!("error: {}", bell_bundle::shown::lines(&message));
            ExitCode::from(2)
        }
    }
}

/// Prints the diagnostics and the line that ends the run: `1 error and 2 warnings`, or, when a
/// check found no error, `SPEC: ok, 2 warnings` (never a bare "ok" above warnings).
fn print_diagnostics(
    mut diags: Diagnostics,
    sources: &Sources,
    short: bool,
    ok_line: Option<String>,
) {
    if diags.is_empty() {
        if let Some(ok) = ok_line {
            eprintln!("{ok}");
        }
        return;
    }
    diags.sort();
    let (errors, warnings) = (diags.error_count(), diags.warning_count());
    if short {
        for (line, help) in diags.to_short(sources) {
            eprintln!("{line}");
            if let Some(help) = help {
                eprintln!("  help: {help}");
            }
        }
    } else {
        for report in diags.into_reports(sources) {
            eprintln!("{report:?}");
        }
    }
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if errors > 0 {
        eprintln!(
            "{} and {}",
            plural(errors, "error"),
            plural(warnings, "warning")
        );
    } else if let Some(ok) = ok_line {
        eprintln!("{ok}, {}", plural(warnings, "warning"));
    } else {
        eprintln!("{}", plural(warnings, "warning"));
    }
}

/// The process's peak resident set (VmHWM), from /proc; 0 where there is no /proc.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn read_check(spec: &Path) -> Result<(), String> {
    match std::fs::metadata(spec) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("{} is not a file", spec.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "no spec at {} (bellc reads ./bell.kdl when no spec is named)",
            spec.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", spec.display())),
    }
}

/// `bellc status | head -1`: when the reader goes away, end as `ls` does (killed by SIGPIPE,
/// quietly) instead of panicking in `println!`. Rust ignores SIGPIPE so that a write to a
/// closed pipe returns an error; the commands print with `println!`, which panics on one.
/// Not for `serve`, whose clients may hang up at any time.
#[allow(unsafe_code)]
fn quiet_on_a_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn read_release(dir: &Path) -> Result<bell_bundle::Release, String> {
    let path = dir.join("release.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a release: {e}", path.display()))
}

/// The identities of `--secrets-key FILE`: a private key, so one others can read is refused
/// (as ssh refuses such a key).
fn secrets_key(path: &Path) -> Result<Vec<bell_seal::at_rest::Identity>, Failure> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let fail = |why: String| Failure::Io(format!("cannot use --secrets-key {shown}: {why}"));
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(fail(format!(
            "others can read it (mode {:04o}): a key that opens the fleet's secrets is its \
             owner's alone; `chmod 600 {shown}`",
            meta.mode() & 0o7777
        )));
    }
    if meta.len() > 1 << 20 {
        return Err(fail("larger than a key file (1 MiB)".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    bell_seal::at_rest::Identity::parse_file(&text).map_err(fail)
}

/// The front end's checks as the global flags chose them.
fn checks(cli: &Cli) -> bellc_core::build::Checks {
    bellc_core::build::Checks {
        allow_unknown_sysctl: cli.allow_unknown_sysctl,
        deny_warnings: cli.deny_warnings,
    }
}

/// Loads and analyses a spec with the checks the command line chose.
fn frontend(
    cli: &Cli,
    path: &Path,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Option<bellc_core::Frontend> {
    bellc_core::frontend_checked(path, checks(cli), sources, diags)
}

/// [`frontend`], then rendering and the release, when the front end found no error.
/// Compiles into memory, naming sealed secrets with `seal` (see [`keys::sealed_by`]).
fn compile(
    cli: &Cli,
    path: &Path,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal: Option<bell_seal::SealKey>,
) -> Option<bellc_core::Compiled> {
    bellc_core::compile_checked(path, checks(cli), sources, diags, seal)
}

/// `bellc check`: the whole pipeline in memory, nothing written; `--strict` adds
/// `apparmor_parser` on every profile.
fn check(
    cli: &Cli,
    spec: &Path,
    strict: bool,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    read_check(spec)?;
    if let Some(front) = frontend(cli, spec, sources, diags) {
        if strict {
            bellc_core::kinds::apparmor::check_profiles_with_parser(&front.spec, sources, diags)?;
        }
        if diags.has_errors() {
            bellc_core::template_errors(front, sources, diags);
        } else {
            bellc_core::compile_frontend(front, sources, diags);
        }
    }
    // "ok" is said by `print_diagnostics`, after the warnings, with their count.
    Ok(0)
}

fn run(cli: &Cli, sources: &mut Sources, diags: &mut Diagnostics) -> Result<u8, Failure> {
    match &cli.command {
        Command::Check { spec, strict } => check(cli, spec, *strict, sources, diags),
        Command::Diff {
            old,
            new,
            json,
            values: false,
            ..
        } => Ok(review::diff_dirs(old, new, *json)?),
        Command::Diff {
            old,
            new,
            json,
            values: true,
            spec,
        } => review::diff_values(
            old,
            new,
            *json,
            spec.as_deref(),
            checks(cli),
            sources,
            diags,
        ),
        Command::Publish {
            out,
            store,
            tls,
            signing,
        } => {
            if let Some(key) = load_sign_key(signing)? {
                sign_out(out, &key, signing.expires)?;
            }
            match store {
                Some(store) => Ok(review::publish(out, store, &tls.access())?),
                None => Ok(0),
            }
        }
        Command::Keygen { name, encrypt } => keys::keygen(name, *encrypt),
        Command::Releases { out, json } => Ok(review::releases(out, *json)?),
        Command::Prune { out, keep } => {
            bellc_core::emit::out_dir::check_writable(out)?;
            Ok(review::prune(out, *keep)?)
        }
        Command::Gateway(args) => gateway::exec(args),
        Command::Store { command } => store_roles::exec(command),
        Command::Secrets { command } => secrets::exec(cli, command, sources, diags),
        Command::Lock { command } => review::lock(command),
        Command::Rollout(args) => rollout::exec(args),
        Command::Status(args) => review::exec_status(args),
        Command::Serve {
            out,
            store,
            tls,
            trust,
            listen,
            spec,
            refresh,
        } => serve::serve(
            cli,
            out,
            trust.as_deref(),
            store,
            &tls.access(),
            listen,
            spec.as_deref(),
            *refresh,
            sources,
            diags,
        ),
        Command::Build(args) => build::build(cli, args, sources, diags),
        Command::Explain {
            selection,
            overridden,
            override_name,
            json,
        } => {
            let (spec, patterns, selector) = selection.parse()?;
            // Reading a spec needs no key: a secret no key opens shows as where it came from.
            sources.review_without_secrets();
            let Some(front) = frontend(cli, &spec, sources, diags) else {
                return Ok(1);
            };
            let selected =
                query::selected(&front, &selector, &patterns, &spec).map_err(Failure::Usage)?;
            match override_name {
                Some(name) => query::print_override(&front, sources, &selected, name, *json)
                    .map_err(Failure::Usage)?,
                None => query::print_explain(&front, sources, &selected, *overridden, *json)?,
            }
            Ok(0)
        }
        Command::Query {
            what,
            selection,
            json,
        } => {
            let target = bellc_core::review::query::Target::parse(what).map_err(Failure::Usage)?;
            let (spec, _, selector) = selection.parse()?;
            sources.review_without_secrets();
            let Some(front) = frontend(cli, &spec, sources, diags) else {
                return Ok(1);
            };
            query::print(&front, sources, what, &target, &selector, *json)
                .map_err(Failure::Usage)?;
            Ok(0)
        }
        Command::Plan {
            spec,
            against,
            json,
            sealed_by,
        } => plan::plan(
            cli,
            spec,
            against.as_deref(),
            *json,
            sealed_by,
            sources,
            diags,
        ),
        Command::Import { from } => import::exec(cli, from, sources, diags),
        Command::Hold { hosts, reason, by } => Ok(enroll::hold(
            &hosts.etcd()?,
            &hosts.fleet,
            &hosts.selected()?,
            reason.as_deref(),
            by.as_deref(),
        )?),
        Command::Unhold { hosts } => Ok(enroll::unhold(
            &hosts.etcd()?,
            &hosts.fleet,
            &hosts.selected()?,
        )?),
        Command::Hosts(args) => hosts::exec(cli, args, sources, diags),
        Command::Completions { shell } => {
            manual::completions(*shell);
            Ok(0)
        }
        Command::ManPages { dir } => manual::man_pages(dir),
    }
}

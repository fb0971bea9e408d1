//! The command line: raw arguments become validated options here, and this is the only module
//! that prints or decides exit codes (the table in `USAGE`: 0 done, 1 refused with nothing
//! changed, 2 drift found, 3 applied with failures, 4 applied but unhealthy, 10 a new release
//! is pending, 64 usage).

use crate::apply::{self, Options, Report};
use crate::context::{Ctx, Outcome, Refusal};
use crate::help::{MARKERS, USAGE};
use crate::plan::{Change, FileAction};
use crate::{check, generations, journal, report, state, statedir};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const OK: i32 = 0;
const REFUSED: i32 = 1;
/// sysexits' EX_USAGE: never confused with `check`'s "drift found".
const USAGE_ERROR: i32 = 64;
const FAILURES: i32 = 3;
const DRIFTED: i32 = 2;
const PENDING: i32 = 10;
const UNHEALTHY: i32 = 4;

/// The exit of an apply that got through: failures first, then health.
fn applied_code(report: &Report) -> i32 {
    if !report.failed.is_empty() {
        FAILURES
    } else if report.health.iter().any(|p| !p.healthy) {
        UNHEALTHY
    } else {
        OK
    }
}

/// The `result` of an apply's JSON, matching [`applied_code`].
fn applied_result(report: &Report) -> &'static str {
    match applied_code(report) {
        FAILURES => "failed",
        UNHEALTHY => "unhealthy",
        _ => "ok",
    }
}

/// One line per probe, then whether the host is healthy.
fn print_health(health: &[crate::health::ProbeOutcome]) {
    if health.is_empty() {
        return;
    }
    let width = health.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for probe in health {
        let attempts = match probe.attempts {
            1 => "1 attempt".to_string(),
            n => format!("{n} attempts"),
        };
        match (&probe.detail, probe.healthy) {
            _ if probe.not_run.is_some() => println!(
                "  health {:width$}  not run: {}",
                probe.name,
                probe.not_run.as_deref().unwrap_or_default()
            ),
            (_, true) => println!("  health {:width$}  healthy ({attempts})", probe.name),
            (detail, false) => println!(
                "  health {:width$}  unhealthy after {attempts}: {} (output in {})",
                probe.name,
                detail.as_deref().unwrap_or("failed"),
                probe.log
            ),
        }
    }
    let failing: Vec<&str> = health
        .iter()
        .filter(|p| !p.healthy)
        .map(|p| p.name.as_str())
        .collect();
    let ran = health.iter().filter(|p| p.not_run.is_none()).count();
    if failing.is_empty() && ran < health.len() {
        println!(
            "health: {ran} probes pass, {} not run offline",
            health.len() - ran
        );
    } else if failing.is_empty() {
        println!("health: {} probes pass", health.len());
    } else {
        println!(
            "health: unhealthy, {} of {} probes fail: {}",
            failing.len(),
            health.len(),
            failing.join(", ")
        );
    }
}

#[derive(Default, Clone)]
struct Args {
    positional: Vec<PathBuf>,
    root: Option<PathBuf>,
    offline: bool,
    dry_run: bool,
    json: bool,
    timings: bool,
    timeout: Option<u64>,
    fetch_timeout: Option<u64>,
    exec: Option<String>,
    interval: Option<String>,
    report: Option<String>,
    metrics: Option<PathBuf>,
    host: Option<String>,
    release: Option<String>,
    store: Option<String>,
    fleet: Option<String>,
    source: Option<String>,
    source_ca: Option<PathBuf>,
    store_ca: Option<PathBuf>,
    store_cert: Option<PathBuf>,
    store_key: Option<PathBuf>,
    store_user: Option<String>,
    store_password_file: Option<PathBuf>,
    trust: Option<PathBuf>,
    identity: Option<PathBuf>,
    lock_prefix: Option<String>,
    alive_ttl: Option<u64>,
    to: Option<String>,
    yes: bool,
    init: bool,
}

impl Args {
    /// How to reach an `etcds://` store (`--store` and `--report`).
    fn access(&self) -> bell_store::Access {
        bell_store::Access {
            tls: bell_store::tls::TlsFiles {
                ca: self.store_ca.clone(),
                cert: self.store_cert.clone(),
                key: self.store_key.clone(),
            },
            user: self.store_user.clone(),
            password_file: self.store_password_file.clone(),
        }
    }

    fn sinks(&self) -> report::Sinks {
        report::Sinks {
            access: self.access(),
            report: self.report.clone(),
            metrics: self.metrics.clone(),
            host: self.host.clone(),
            release: self.release.clone(),
            alive_ttl: self.alive_ttl.unwrap_or(report::DEFAULT_ALIVE_TTL),
            read: None,
        }
    }
}

fn parse(args: &[OsString]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        let mut value = |flag: &str| {
            iter.next()
                .cloned()
                .ok_or_else(|| format!("`{flag}` needs a value"))
        };
        match text.as_ref() {
            "--root" => out.root = Some(PathBuf::from(value("--root")?)),
            "--offline" => out.offline = true,
            "--dry-run" => out.dry_run = true,
            "--json" => out.json = true,
            "--timings" => out.timings = true,
            "--timeout" => {
                let v = value("--timeout")?;
                out.timeout = Some(v.to_string_lossy().parse().map_err(|_| {
                    format!(
                        "`--timeout {}` is not a number of seconds",
                        v.to_string_lossy()
                    )
                })?);
            }
            "--fetch-timeout" => {
                let v = value("--fetch-timeout")?;
                let secs = v.to_string_lossy().parse::<u64>().ok().filter(|s| *s > 0);
                out.fetch_timeout = Some(secs.ok_or_else(|| {
                    format!(
                        "`--fetch-timeout {}` is not a number of seconds",
                        v.to_string_lossy()
                    )
                })?);
            }
            "--exec" => out.exec = Some(value("--exec")?.to_string_lossy().to_string()),
            "--interval" => out.interval = Some(value("--interval")?.to_string_lossy().to_string()),
            "--report" => out.report = Some(value("--report")?.to_string_lossy().to_string()),
            "--metrics" => out.metrics = Some(PathBuf::from(value("--metrics")?)),
            "--host" => out.host = Some(value("--host")?.to_string_lossy().to_string()),
            "--release" => out.release = Some(value("--release")?.to_string_lossy().to_string()),
            "--store" => out.store = Some(value("--store")?.to_string_lossy().to_string()),
            "--fleet" => out.fleet = Some(value("--fleet")?.to_string_lossy().to_string()),
            "--source" => out.source = Some(value("--source")?.to_string_lossy().to_string()),
            "--source-ca" => out.source_ca = Some(PathBuf::from(value("--source-ca")?)),
            "--store-ca" => out.store_ca = Some(PathBuf::from(value("--store-ca")?)),
            "--store-cert" => out.store_cert = Some(PathBuf::from(value("--store-cert")?)),
            "--store-key" => out.store_key = Some(PathBuf::from(value("--store-key")?)),
            "--store-user" => {
                out.store_user = Some(value("--store-user")?.to_string_lossy().to_string())
            }
            "--store-password-file" => {
                out.store_password_file = Some(PathBuf::from(value("--store-password-file")?))
            }
            "--trust" => out.trust = Some(PathBuf::from(value("--trust")?)),
            "--identity" => out.identity = Some(PathBuf::from(value("--identity")?)),
            "--alive-ttl" => {
                let v = value("--alive-ttl")?;
                let secs = v.to_string_lossy().parse::<u64>().ok().filter(|s| *s >= 10);
                out.alive_ttl = Some(secs.ok_or_else(|| {
                    format!(
                        "`--alive-ttl {}` is not a number of seconds (at least 10)",
                        v.to_string_lossy()
                    )
                })?);
            }
            "--to" => out.to = Some(value("--to")?.to_string_lossy().to_string()),
            "--yes" => out.yes = true,
            "--init" => out.init = true,
            "--lock-prefix" => {
                out.lock_prefix = Some(value("--lock-prefix")?.to_string_lossy().to_string())
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option `{flag}`")),
            _ => out.positional.push(PathBuf::from(arg)),
        }
    }
    Ok(out)
}

pub fn main() -> i32 {
    let all: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(command) = all.first().map(|c| c.to_string_lossy().to_string()) else {
        eprintln!("{USAGE}");
        return USAGE_ERROR;
    };
    if command == "__supervise" {
        return crate::scripts::supervise(&all[1..]);
    }
    let asks_help = |a: &OsString| matches!(a.to_str(), Some("--help" | "-h"));
    if matches!(command.as_str(), "help" | "--help" | "-h") || all[1..].iter().any(asks_help) {
        // `bell-run help CMD` and `bell-run CMD --help` explain CMD; anything else, all.
        let named = if matches!(command.as_str(), "help" | "--help" | "-h") {
            all.get(1).and_then(|c| c.to_str())
        } else {
            Some(command.as_str())
        };
        match named.and_then(crate::help::of) {
            Some(text) => println!("{text}"),
            None => println!("{USAGE}\n\n{MARKERS}"),
        }
        return OK;
    }
    if command == "--version" {
        println!("bell-run {}", env!("CARGO_PKG_VERSION"));
        return OK;
    }
    let args = match parse(&all[1..]) {
        Ok(args) => args,
        Err(e) => return usage(&e),
    };
    let wants = |n: usize| args.positional.len() == n;
    match command.as_str() {
        "apply" if wants(1) => cmd_apply(&args.positional[0], &args),
        "rollback" if wants(0) => cmd_rollback(&args),
        "generations" if wants(0) => cmd_generations(&args),
        "remove" if wants(0) => cmd_remove(&args),
        "identity" if wants(0) => cmd_identity(&args),
        "status" if wants(0) => cmd_status(&args),
        "check" if wants(0) => cmd_check(&args),
        "pending" if wants(0) => cmd_pending(&args),
        "register" if wants(0) => cmd_register(&args),
        "pull" if wants(0) => cmd_pull(&args),
        "verify" if wants(1) => cmd_verify(&args.positional[0], &args),
        "recover" if wants(0) => cmd_recover(&args),
        "install-timer" if wants(0) => cmd_install_timer(&args),
        "apply" | "verify" => usage(&format!("`{command}` takes one bundle directory")),
        "rollback" | "generations" | "remove" | "status" | "recover" | "install-timer"
        | "check" | "pending" | "pull" | "identity" | "register" => {
            usage(&format!("`{command}` takes no positional argument"))
        }
        other => usage(&format!("unknown command `{other}`")),
    }
}

fn usage(message: &str) -> i32 {
    eprintln!("error: {message}\n\n{USAGE}");
    USAGE_ERROR
}

/// Says why nothing was done: as JSON on stdout with `--json` (the one answer a script reads),
/// else as text on stderr.
fn refused(refusal: &Refusal, json: bool) -> i32 {
    if json {
        let value = serde_json::json!({
            "result": if refusal.partial { "failed" } else { "refused" },
            "error": refusal.message,
            "help": refusal.help,
        });
        println!("{value:#}");
    } else {
        eprintln!("error: {}", refusal.message);
        if let Some(help) = &refusal.help {
            eprintln!("help: {help}");
        }
    }
    if refusal.partial {
        FAILURES
    } else {
        REFUSED
    }
}

fn root_of(args: &Args) -> PathBuf {
    args.root.clone().unwrap_or_else(|| PathBuf::from("/"))
}

fn options(args: &Args) -> Options {
    let root = root_of(args);
    // An image root is never the running host: its scripts must not touch live kernel state.
    let offline = args.offline || root.canonicalize().ok().as_deref() != Some(Path::new("/"));
    Options {
        root,
        offline,
        dry_run: args.dry_run,
        script_timeout: args.timeout.unwrap_or(crate::apply::DEFAULT_SCRIPT_TIMEOUT),
        release: args.release.clone(),
        timings: args.timings,
        sealed: None,
        identity: args.identity.clone(),
        after_boot: false,
    }
}

fn cmd_apply(bundle: &Path, args: &Args) -> i32 {
    let opts = options(args);
    let started = state::now();
    let result = if let Some(refusal) = meant_for_another_host(bundle, args) {
        Err(refusal)
    } else if opts.dry_run {
        apply::dry_run(bundle, &opts)
    } else {
        apply::apply(bundle, &opts)
    };
    // A dry run changes nothing and reports nothing.
    if !opts.dry_run {
        let run = match &result {
            Ok(rep) => report::from_apply(&opts.root, started, rep),
            Err(refusal) => {
                report::from_refusal("apply", &opts.root, started, Some(bundle), refusal)
            }
        };
        report::emit(&args.sinks(), run);
    }
    match result {
        Err(refusal) => refused(&refusal, args.json),
        Ok(report) => {
            if args.json {
                let mut value = serde_json::to_value(&report).unwrap_or_default();
                let result = if report.dry_run {
                    "planned"
                } else {
                    applied_result(&report)
                };
                value["result"] = result.into();
                println!("{value:#}");
            } else {
                print_report(&report);
                if let Some(timings) = &report.timings {
                    print!("{}", timings.table());
                }
            }
            applied_code(&report)
        }
    }
}

/// A bundle given as `OUT/hosts/NAME` is NAME's: applying it to a root that says it is another
/// host (its `etc/hostname`) is a wrong path or a wrong `--root`, unless `--host` says the root
/// is NAME.
fn meant_for_another_host(bundle: &Path, args: &Args) -> Option<Refusal> {
    let name = bundle.file_name()?.to_str()?;
    if bundle.parent()?.file_name()? != "hosts" {
        return None;
    }
    let (this, said_by) = match &args.host {
        Some(host) => (host.clone(), "`--host`".to_string()),
        None => {
            let path = root_of(args).join("etc/hostname");
            let text = crate::rootfs::read_record(&path).ok()??;
            (text.trim().to_string(), path.display().to_string())
        }
    };
    (!this.is_empty() && this != name).then(|| {
        Refusal::new(format!(
            "{} is the bundle of host `{name}`, but this root is `{this}` ({said_by})",
            bundle.display()
        ))
        .help(format!(
            "apply OUT/hosts/{this}; or, if this root is to become `{name}`, pass `--host {name}`"
        ))
    })
}

/// The root's checked state directory and its state, or the exit of the refusal (said).
fn root_and_state(args: &Args) -> Result<(crate::rootfs::Root, state::State), i32> {
    let root = statedir::open_root(&root_of(args)).map_err(|r| refused(&r, args.json))?;
    let state = state::load(&root).map_err(|e| refused(&Refusal::new(e), args.json))?;
    Ok((root, state))
}

fn cmd_rollback(args: &Args) -> i32 {
    let (root, state) = match root_and_state(args) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let kept = generations::kept(&root, &state);
    let chosen = match &args.to {
        Some(wanted) => generations::find(&kept, wanted),
        None => generations::previous(&kept),
    };
    let chosen = match chosen {
        Ok(chosen) => chosen,
        Err(refusal) => return refused(&refusal, args.json),
    };
    if chosen.current {
        return refused(
            &Refusal::new(format!(
                "generation {} is the one applied: there is nothing to roll back",
                journal::short(&chosen.id)
            ))
            .help("`bell-run generations` lists the others"),
            args.json,
        );
    }
    // The generation comes back with the release it was applied for, unless told otherwise.
    let mut args = args.clone();
    if args.release.is_none() {
        args.release = chosen.release.clone();
    }
    cmd_apply(&state::generation_dir(&root, &chosen.id), &args)
}

fn cmd_generations(args: &Args) -> i32 {
    let (root, state) = match root_and_state(args) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let kept = generations::kept(&root, &state);
    if args.json {
        let value =
            serde_json::json!({ "root": root.dir.display().to_string(), "generations": kept });
        println!("{value:#}");
        return OK;
    }
    if kept.is_empty() {
        println!("no generation kept under {}", root.dir.display());
        return OK;
    }
    println!(
        "generations kept under {}, oldest first (`bell-run rollback --to ID` applies one again):",
        root.dir.display()
    );
    println!(
        "  {:12}  {:23}  {:6}  release",
        "id", "last applied", "result"
    );
    for g in &kept {
        let release = g.release.as_deref().map_or("-", |r| r);
        let current = if g.current { "  (applied now)" } else { "" };
        println!(
            "  {:12}  {:23}  {:6}  {release}{current}",
            journal::short(&g.id),
            bell_bundle::utc(g.last_applied),
            g.result
        );
    }
    OK
}

/// Prints the host's identity as one line of OpenSSH's format, the line its `host` entry
/// takes as `identity=`.
fn cmd_identity(args: &Args) -> i32 {
    let root = match crate::rootfs::Root::open(&root_of(args)) {
        Ok(root) => root,
        Err(e) => return refused(&Refusal::new(e), args.json),
    };
    let loaded = if args.init {
        crate::identity::load_or_make(&root).map(|(key, made)| Some((key, made)))
    } else {
        crate::identity::load(&root).map(|key| key.map(|key| (key, false)))
    };
    let (key, made) = match loaded {
        Ok(Some(found)) => found,
        Ok(None) => {
            let refusal = Refusal::new(format!(
                "this host has no identity: neither {} nor {} is under {}",
                crate::identity::SSH_HOST_KEY,
                crate::identity::BELL_KEY,
                root.dir.display()
            ))
            .help("`bell-run identity --init` makes bell's own key (0600, root's alone)");
            return refused(&refusal, args.json);
        }
        Err(e) => return refused(&Refusal::new(e), args.json),
    };
    let identity = key.key.identity();
    let file = crate::identity::host_path(&root, &key.file).to_string();
    // The host's name as the comment, as ssh-keygen names a key by user@host.
    let name = report::host_name(args.host.as_deref(), &root.dir).ok();
    if args.json {
        let value = serde_json::json!({
            "identity": identity.to_openssh(),
            "fingerprint": identity.fingerprint(),
            "host": name,
            "file": file,
            "made": made,
        });
        println!("{value:#}");
        return OK;
    }
    if made {
        eprintln!("made {file}: this host's identity from now on");
    }
    match name {
        Some(name) => println!("{} {name}", identity.to_openssh()),
        None => println!("{}", identity.to_openssh()),
    }
    OK
}

fn cmd_remove(args: &Args) -> i32 {
    if !args.yes && !args.dry_run {
        return usage(
            "`remove` reverts everything bell manages and deletes bell's state: say `--yes`, \
             or see what it would do with `--dry-run`",
        );
    }
    let opts = options(args);
    let removal = match crate::remove::remove(&opts) {
        Ok(removal) => removal,
        Err(refusal) => return refused(&refusal, args.json),
    };
    let report = &removal.report;
    if args.json {
        let mut value = serde_json::to_value(report).unwrap_or_default();
        value["result"] = if report.dry_run {
            "planned"
        } else if report.failed.is_empty() {
            "removed"
        } else {
            "failed"
        }
        .into();
        value["removed_generation"] = removal.generation.clone().into();
        value["accounts_left"] = removal.accounts.clone().into();
        value["units_removed"] = removal.units.clone().into();
        value["state_removed"] = removal.state_dir.clone().into();
        println!("{value:#}");
        return applied_code(report);
    }
    let verb = if report.dry_run {
        "plan to remove"
    } else {
        "removing"
    };
    println!(
        "bell-run: {verb} bell from {} (generation {} is applied)",
        report.root,
        journal::short(&removal.generation)
    );
    print_report_body(report);
    if report.dry_run {
        println!(
            "then: the timer's units and {}/var/lib/bell (state, logs, kept generations, \
             originals) go; accounts bell created are expired and locked, not deleted",
            report.root.trim_end_matches('/')
        );
        return OK;
    }
    if !report.failed.is_empty() {
        println!("bell's state is kept: fix what failed and run `bell-run remove --yes` again");
        return applied_code(report);
    }
    for unit in &removal.units {
        println!("  removed {unit}");
    }
    if let Some(dir) = &removal.state_dir {
        println!("  removed {dir}");
    }
    if !removal.accounts.is_empty() {
        println!(
            "accounts bell created stay, expired and locked (a home may hold someone's work): {}; \
             `userdel -r NAME` deletes one",
            removal.accounts.join(", ")
        );
    }
    println!("result: bell is removed");
    OK
}

fn cmd_verify(bundle: &Path, args: &Args) -> i32 {
    match bell_bundle::verify_dir(bundle) {
        Ok(manifest) => {
            if args.json {
                let value = serde_json::json!({
                    "result": "ok",
                    "id": manifest.id(),
                    "resources": manifest.resources.len(),
                    "files": manifest.files.len(),
                });
                println!("{value:#}");
            } else {
                println!(
                    "bundle {} verifies: {} resources, {} files",
                    manifest.id(),
                    manifest.resources.len(),
                    manifest.files.len()
                );
            }
            OK
        }
        Err(e) => refused(
            &Refusal::new(format!(
                "the bundle {} does not verify: {e}",
                bundle.display()
            ))
            .help("rebuild the bundle with `bellc build` and copy it again"),
            args.json,
        ),
    }
}

fn cmd_recover(args: &Args) -> i32 {
    let root = match statedir::open_root(&root_of(args)) {
        Ok(root) => root,
        Err(r) => return refused(&r, false),
    };
    let _lock = match apply::lock(&root) {
        Ok(lock) => lock,
        Err(r) => return refused(&r, false),
    };
    let mut state = match state::load(&root) {
        Ok(state) => state,
        Err(e) => return refused(&Refusal::new(e), false),
    };
    match journal::recover(&root, &mut state) {
        Ok(Some(done)) => {
            println!("bell-run: {done}");
            OK
        }
        Ok(None) => {
            println!("bell-run: no interrupted switch");
            OK
        }
        Err(e) => refused(&Refusal::new(format!("cannot recover: {e}")), false),
    }
}

fn cmd_pull(args: &Args) -> i32 {
    let Some(source) = &args.source else {
        return usage("`pull` needs `--source http://HOST[:PORT]/PATH/` or `--source DIR`");
    };
    let source = match crate::fetch::Source::open(source, args.source_ca.as_deref()) {
        Ok(source) => source,
        Err(e) => return usage(&e),
    };
    let fetch_timeout = args.fetch_timeout.map_or(
        crate::fetch::DEFAULT_FETCH_TIMEOUT,
        std::time::Duration::from_secs,
    );
    crate::fetch::set_deadline(std::time::Instant::now() + fetch_timeout);
    let opts = crate::pull::PullOptions {
        source,
        host: args.host.clone(),
        trust: args.trust.clone(),
        store: args.store.clone(),
        access: args.access(),
        fleet: args.fleet.clone(),
        lock_prefix: args.lock_prefix.clone(),
        apply: options(args),
    };
    let started = state::now();
    let mut found = crate::pull::Established::default();
    let result = crate::pull::pull(&opts, &mut found);
    let mut run = match &result {
        Ok(pulled) => report::from_apply(&opts.apply.root, started, &pulled.report),
        Err(refusal) => report::from_refusal("apply", &opts.apply.root, started, None, refusal),
    };
    run.signature = found.signature.clone();
    if let Ok(pulled) = &result {
        run.rebooting = pulled.reboot.plan.as_ref().map(|p| p.describe());
    }
    if run.fleet.is_none() {
        run.fleet = found.fleet.clone();
    }
    if let Err(refusal) = &result {
        if refusal.waiting {
            // Not a failure: the host stays on what it runs until a slot is free.
            run.result = bell_store::State::Waiting;
            run.status = [("apply".to_string(), bell_store::State::Waiting)].into();
        }
    }
    let mut sinks = args.sinks();
    if sinks.release.is_none() {
        sinks.release = found.release.clone();
    }
    sinks.read = found.read.take();
    report::emit(&sinks, run);
    let pulled = match result {
        Ok(pulled) => pulled,
        Err(refusal) => {
            if let Some(signature) = &found.signature {
                if !args.json {
                    eprintln!("release: {signature}");
                }
            }
            let code = refused(&refusal, args.json);
            return if refusal.waiting { PENDING } else { code };
        }
    };
    let release = found.release.as_deref().unwrap_or("?");
    let signature = found.signature.as_deref().unwrap_or("?");
    if args.json {
        let mut value = serde_json::to_value(&pulled.report).unwrap_or_default();
        value["result"] = applied_result(&pulled.report).into();
        value["release"] = release.into();
        value["signature"] = signature.into();
        value["fetched"] = pulled.fetched.into();
        value["reused"] = pulled.reused.into();
        value["already_applied"] = pulled.already_applied.into();
        value["slot"] = pulled.slot.clone().into();
        value["reboot"] = pulled.reboot.note.clone().into();
        println!("{value:#}");
    } else {
        println!("release {release} ({signature})");
        if pulled.already_applied {
            println!(
                "bundle {} is applied already: applying it again",
                pulled.report.generation
            );
        } else {
            println!(
                "bundle {}: {} files fetched, {} taken from the applied generation",
                pulled.report.generation, pulled.fetched, pulled.reused
            );
        }
        print_report(&pulled.report);
        if let Some(slot) = &pulled.slot {
            println!("slot: {slot}");
        }
        if let Some(note) = &pulled.reboot.note {
            println!("reboot: {note}");
        }
    }
    // Last, with the report filed: the host goes down.
    if let Some(plan) = &pulled.reboot.plan {
        if let Err(e) = crate::rebooting::execute(plan) {
            return refused(
                &Refusal::new(format!("cannot reboot: {e}"))
                    .help("the slot stays held; the next pull in the window tries again"),
                args.json,
            );
        }
    }
    applied_code(&pulled.report)
}

fn cmd_install_timer(args: &Args) -> i32 {
    let job = match timer_job(args) {
        Ok(job) => job,
        Err(e) => return usage(&e),
    };
    let root = match statedir::open_root(&root_of(args)) {
        Ok(root) => root,
        Err(r) => return refused(&r, false),
    };
    if let crate::timer::Job::Pull(_) = &job {
        let trust = args
            .trust
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::trust::DEFAULT_TRUST_FILE));
        let trust = trust.to_string_lossy();
        if root.check_contained(&trust).is_err() || !root.host(&trust).is_file() {
            if args.trust.is_some() {
                eprintln!(
                    "warning: `{trust}` does not exist under the root yet: every pull is refused \
                     until it does"
                );
            } else {
                eprintln!(
                    "warning: no `--trust FILE` and no `{trust}`: the timer applies whatever the \
                     source serves, unverified (its reports say so)"
                );
            }
        }
    }
    for (flag, file) in [
        ("--source-ca", &args.source_ca),
        ("--store-ca", &args.store_ca),
        ("--store-cert", &args.store_cert),
        ("--store-key", &args.store_key),
        ("--store-password-file", &args.store_password_file),
    ] {
        let Some(file) = file else { continue };
        let file = file.to_string_lossy();
        if root.check_contained(&file).is_err() || !root.host(&file).is_file() {
            eprintln!(
                "warning: `{flag} {file}` does not exist under the root yet: every pull fails \
                 until it does"
            );
        }
    }
    let exe = args.exec.as_deref().unwrap_or("/usr/local/sbin/bell-run");
    let interval = args.interval.as_deref().unwrap_or("15min");
    match crate::timer::install(&root, exe, interval, &job) {
        Ok(paths) => {
            for path in &paths {
                println!("wrote {path}");
            }
            println!(
                "enable with: systemctl daemon-reload && systemctl enable --now bell-run.timer"
            );
            if let crate::timer::Job::Pull(_) = job {
                println!(
                    "and, for the pull at boot that sees a reboot through: systemctl enable \
                     bell-run.service"
                );
            }
            if paths
                .iter()
                .any(|p| p.ends_with("/bell-run-register.service"))
            {
                println!(
                    "and, to register this machine at boot for an operator to accept: \
                     systemctl enable bell-run-register.service"
                );
            }
            OK
        }
        Err(e) => refused(&Refusal::new(e), false),
    }
}

/// What the timer's service runs: with `--source`, `pull` with the options given here, each
/// checked now rather than failing on every tick; without, a re-apply of the current generation.
fn timer_job(args: &Args) -> Result<crate::timer::Job, String> {
    let Some(source) = &args.source else {
        let pull_only = [
            ("--store", args.store.is_some()),
            ("--trust", args.trust.is_some()),
            ("--fleet", args.fleet.is_some()),
            ("--host", args.host.is_some()),
            ("--report", args.report.is_some()),
            ("--metrics", args.metrics.is_some()),
            ("--timeout", args.timeout.is_some()),
            ("--fetch-timeout", args.fetch_timeout.is_some()),
            ("--lock-prefix", args.lock_prefix.is_some()),
            ("--alive-ttl", args.alive_ttl.is_some()),
            ("--source-ca", args.source_ca.is_some()),
            ("--store-ca", args.store_ca.is_some()),
            ("--store-cert", args.store_cert.is_some()),
            ("--store-key", args.store_key.is_some()),
            ("--store-user", args.store_user.is_some()),
            ("--store-password-file", args.store_password_file.is_some()),
        ];
        if let Some((flag, _)) = pull_only.iter().find(|(_, given)| *given) {
            return Err(format!(
                "`{flag}` is an option of the pulling timer: give `--source` as well"
            ));
        }
        return Ok(crate::timer::Job::ApplyCurrent);
    };
    if let crate::fetch::Source::Dir(dir) =
        crate::fetch::Source::check(source, args.source_ca.as_deref())?
    {
        if !dir.is_absolute() {
            return Err(format!("`--source {source}` must be an absolute directory"));
        }
    }
    let mut options = vec![("--source", source.clone())];
    // Checked, not opened: the TLS files are the image's, and may not be there yet.
    for dest in [&args.store, &args.report].into_iter().flatten() {
        bell_store::Store::check(dest, &args.access())?;
    }
    if let Some(store) = &args.store {
        options.push(("--store", store.clone()));
    }
    let paths = [
        ("--trust", &args.trust),
        ("--metrics", &args.metrics),
        ("--source-ca", &args.source_ca),
        ("--store-ca", &args.store_ca),
        ("--store-cert", &args.store_cert),
        ("--store-key", &args.store_key),
        ("--store-password-file", &args.store_password_file),
    ];
    for (flag, path) in paths {
        if let Some(path) = path {
            let text = path
                .to_str()
                .filter(|_| path.is_absolute())
                .ok_or_else(|| {
                    format!("`{flag} {}` must be an absolute UTF-8 path", path.display())
                })?;
            options.push((flag, text.to_string()));
        }
    }
    for (flag, value) in [
        ("--fleet", &args.fleet),
        ("--host", &args.host),
        ("--report", &args.report),
        ("--lock-prefix", &args.lock_prefix),
        ("--store-user", &args.store_user),
    ] {
        if let Some(value) = value {
            options.push((flag, value.clone()));
        }
    }
    if let Some(timeout) = args.timeout {
        options.push(("--timeout", timeout.to_string()));
    }
    if let Some(secs) = args.fetch_timeout {
        options.push(("--fetch-timeout", secs.to_string()));
    }
    if let Some(ttl) = args.alive_ttl {
        options.push(("--alive-ttl", ttl.to_string()));
    }
    Ok(crate::timer::Job::Pull(options))
}

fn cmd_status(args: &Args) -> i32 {
    let (root, state) = match root_and_state(args) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let interrupted = journal::load(&root).ok().flatten().is_some();
    if args.json {
        let mut value = serde_json::to_value(&state).unwrap_or_default();
        value["interrupted_switch"] = interrupted.into();
        // A secret file's sha256 would confirm a guessed password: the applied manifest says
        // which files are secret, and when it cannot be read, every digest is withheld.
        let applied = state.generation.as_ref().and_then(|id| {
            let path = crate::state::generation_dir(&root, id).join(bell_bundle::MANIFEST_FILE);
            crate::rootfs::read_record(&path)
                .ok()
                .flatten()
                .and_then(|text| bell_bundle::Manifest::from_json(&text).ok())
        });
        if let Some(files) = value["files"].as_object_mut() {
            for (path, file) in files.iter_mut() {
                let secret = match applied.as_ref().and_then(|m| m.file(path)) {
                    Some(file) => file.is_secret(),
                    None => true,
                };
                if secret {
                    file["sha256"] = bell_bundle::REDACTED.into();
                }
            }
        }
        println!("{value:#}");
        return OK;
    }
    let Some(generation) = &state.generation else {
        println!("no generation applied under {}", root.dir.display());
        return OK;
    };
    let at = state.applied_at.unwrap_or(0);
    println!(
        "generation {generation}\napplied {} ({at}), result {}",
        bell_bundle::utc(at),
        state.result.as_deref().unwrap_or("unknown")
    );
    if interrupted {
        println!("an interrupted file switch is pending: run `bell-run recover`");
    }
    let width = state.resources.keys().map(String::len).max().unwrap_or(0);
    for (key, rec) in &state.resources {
        let detail = rec
            .message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        println!("  {key:width$}  {}{detail}", rec.result);
    }
    for pending in &state.pending_reverts {
        println!("  revert of {} is still owed", pending.name);
    }
    for pending in &state.pending_triggers {
        println!("  trigger {} is still owed", pending.name);
    }
    OK
}

fn print_outcome(prefix: &str, outcome: &Outcome, width: usize) {
    let mut line = format!("  {prefix} {:width$}  {}", outcome.key, outcome.status);
    if let Some(detail) = &outcome.detail {
        line.push_str(&format!(": {detail}"));
    }
    if outcome.failed() {
        if let Some(log) = &outcome.log {
            line.push_str(&format!(" (output in {log})"));
        }
    }
    println!("{line}");
}

/// `2 changed, 1 drifted and put back, 9 unchanged, 1 failed (user:ops), 2 skipped (exec:a,
/// exec:b), 1 deferred to the first live apply`: each resource counted once, under what happened to it. A resource
/// skipped because one it depends on failed is not a failure of its own.
fn summary(report: &Report) -> String {
    let (mut changed, mut unchanged, mut repaired) = (0, 0, 0);
    let (mut failed, mut skipped) = (Vec::new(), Vec::new());
    for outcome in report.reverts.iter().chain(&report.triggers) {
        match outcome.status.as_str() {
            "failed" => failed.push(outcome.key.as_str()),
            "skipped" | "halted" => skipped.push(outcome.key.as_str()),
            _ if report.reverts.iter().any(|r| r.key == outcome.key) => changed += 1,
            _ => {}
        }
    }
    for (planned, outcome) in report.plan.resources.iter().zip(&report.resources) {
        match outcome.status.as_str() {
            "failed" => failed.push(outcome.key.as_str()),
            // Not run because another failed (a dependency, or an exec that halts the rest).
            "skipped" | "halted" => skipped.push(outcome.key.as_str()),
            "deferred" => {}
            _ if planned.change == Change::Unchanged => unchanged += 1,
            "ok" if planned.change == Change::Drifted => repaired += 1,
            _ => changed += 1,
        }
    }
    let mut parts = vec![format!("{changed} changed")];
    if repaired > 0 {
        parts.push(format!("{repaired} drifted and put back"));
    }
    parts.push(format!("{unchanged} unchanged"));
    if !failed.is_empty() {
        parts.push(format!("{} failed ({})", failed.len(), failed.join(", ")));
    }
    if !skipped.is_empty() {
        parts.push(format!(
            "{} skipped after a failure ({})",
            skipped.len(),
            skipped.join(", ")
        ));
    }
    if report.deferred > 0 {
        parts.push(format!(
            "{} deferred to the first live apply",
            report.deferred
        ));
    }
    parts.join(", ")
}

fn print_report(report: &Report) {
    let mode = if report.offline { "offline" } else { "live" };
    let verb = if report.dry_run {
        "plan for"
    } else {
        "applied"
    };
    println!(
        "bell-run: {verb} {} to {} ({mode})",
        journal::short(&report.generation),
        report.root
    );
    print_report_body(report);
}

/// Every line of an apply's report but the first.
fn print_report_body(report: &Report) {
    let plan = &report.plan;
    if let Some(recovered) = &report.recovered {
        println!("  {recovered}");
    }
    for key in &report.needs_secrets {
        println!(
            "  {key}: left for the first apply with the host's key (its secrets are sealed to it)"
        );
    }
    let width = plan
        .resources
        .iter()
        .map(|r| r.key.len())
        .chain(plan.departed.iter().map(|d| d.key.len()))
        .max()
        .unwrap_or(0);
    if report.dry_run {
        for departed in &plan.departed {
            println!("  - {:width$}  revert", departed.key);
        }
        for file in &plan.files {
            let what = match file {
                FileAction::Write { created: true, .. } => "create",
                FileAction::Write { backup: true, .. } => "take over (backed up)",
                FileAction::Write { .. } => "rewrite",
                FileAction::Restore { .. } => "restore the file from before bell",
                FileAction::Remove { .. } => "remove",
                FileAction::Leave { .. } => "leave in place (changed since bell wrote it)",
            };
            println!("  file {}: {what}", file.path());
        }
        for r in &plan.resources {
            println!(
                "  {} {:width$}  {}",
                r.change.symbol(),
                r.key,
                r.change.word()
            );
        }
        println!(
            "plan: {} created, {} changed, {} departed, {} retried, {} drifted, {} unchanged; {} files to switch",
            plan.count(Change::Created),
            plan.count(Change::Changed),
            plan.departed.len(),
            plan.count(Change::Retry),
            plan.count(Change::Drifted),
            plan.count(Change::Unchanged),
            plan.files.iter().filter(|f| !matches!(f, FileAction::Leave { .. })).count()
        );
        return;
    }
    for outcome in &report.reverts {
        print_outcome("-", outcome, width);
    }
    let files = &report.files;
    println!(
        "  files: {} written, {} restored, {} removed, {} unchanged",
        files.written.len(),
        files.restored.len(),
        files.removed.len(),
        plan.unchanged_files
    );
    for path in &files.left {
        println!("  left {path} in place: it changed since bell wrote it");
    }
    for outcome in &report.triggers {
        print_outcome("^", outcome, width);
    }
    for outcome in &report.resources {
        let symbol = outcome.change.map(Change::symbol).unwrap_or(' ');
        print_outcome(&symbol.to_string(), outcome, width);
    }
    println!("result: {}", summary(report));
    print_health(&report.health);
    print_reboot(&report.reboot_required);
}

/// The reasons the host needs a reboot, one per line, after the result they do not change.
fn print_reboot(reasons: &[String]) {
    for reason in reasons {
        println!("reboot required: {reason}");
    }
}

fn cmd_check(args: &Args) -> i32 {
    let opts = options(args);
    let started = state::now();
    let result = (|| {
        let root = statedir::open_root(&opts.root)?;
        let state = state::load(&root).map_err(Refusal::new)?;
        // A check during an apply would see half-applied values as drift. A root never applied
        // to has nothing to check and gets no lock file: a check changes nothing.
        let _lock = if root.bell_dir().exists() {
            Some(apply::lock(&root)?)
        } else {
            None
        };
        let ctx = Ctx {
            root: &root,
            offline: opts.offline,
            timeout: std::time::Duration::from_secs(opts.script_timeout),
            now: started,
            boot: state::boot_id(),
            clock: None,
        };
        check::check(&ctx, &state)
    })();
    let run = match &result {
        Ok(rep) => report::from_check(&opts.root, started, rep),
        Err(refusal) => report::from_refusal("check", &opts.root, started, None, refusal),
    };
    report::emit(&args.sinks(), run);
    let rep = match result {
        Ok(rep) => rep,
        Err(refusal) => return refused(&refusal, args.json),
    };
    let code = if !rep.drift.is_empty() {
        DRIFTED
    } else if !rep.errors.is_empty() {
        REFUSED
    } else if rep.health.iter().any(|p| !p.healthy) {
        UNHEALTHY
    } else {
        OK
    };
    if args.json {
        let mut value = serde_json::to_value(&rep).unwrap_or_default();
        value["result"] = match code {
            OK => "in-sync",
            DRIFTED => "drifted",
            UNHEALTHY => "unhealthy",
            _ => "error",
        }
        .into();
        println!("{value:#}");
        return code;
    }
    for drift in &rep.drift {
        println!("drifted {}: {}", drift.name, drift.detail);
    }
    for c in rep.resources.iter().filter(|c| c.result == "error") {
        println!(
            "error {}: {}",
            c.key,
            c.detail.as_deref().unwrap_or("the check failed")
        );
    }
    for key in &rep.deferred {
        println!("deferred {key}: its apply needs a live host; the first live apply does it");
    }
    let checked = rep
        .resources
        .iter()
        .filter(|c| !matches!(c.result.as_str(), "no-check" | "deferred" | "drifted-files"))
        .count();
    let deferred = match rep.deferred.len() {
        0 => String::new(),
        n => format!(", {n} deferred"),
    };
    println!(
        "check of {}: {} drifted, {} errors{deferred} ({} files, {checked} resource checks)",
        journal::short(&rep.generation),
        rep.drift.len(),
        rep.errors.len(),
        rep.manifest.as_ref().map_or(0, |m| m.files.len()),
    );
    print_health(&rep.health);
    print_reboot(&rep.reboot_required);
    if code == DRIFTED {
        println!("`bell-run apply` of the same bundle puts the drifted resources back");
    }
    code
}

fn cmd_register(args: &Args) -> i32 {
    let (Some(store), Some(fleet)) = (&args.store, &args.fleet) else {
        return usage("`register` needs `--store etcd://HOST:PORT` and `--fleet NAME`");
    };
    let root = root_of(args);
    match crate::register::register(&root, args.host.as_deref(), store, &args.access(), fleet) {
        Ok(done) => {
            if args.json {
                let value = serde_json::json!({
                    "host": done.host,
                    "fleet": done.fleet,
                    "key": done.key,
                    "fingerprint": done.fingerprint,
                    "filed": done.filed,
                    "facts": done.facts,
                });
                println!("{value:#}");
            } else if done.filed {
                println!(
                    "registered `{}` in fleet `{}` ({}) at {}: accept it with `bellc hosts accept {0}`",
                    done.host, done.fleet, done.fingerprint, done.key
                );
            } else {
                println!(
                    "`{}` is registered in fleet `{}` already, with the same facts and identity",
                    done.host, done.fleet
                );
            }
            OK
        }
        Err(refusal) => refused(&refusal, args.json),
    }
}

fn cmd_pending(args: &Args) -> i32 {
    let root = match statedir::open_root(&root_of(args)) {
        Ok(root) => root,
        Err(refusal) => return refused(&refusal, args.json),
    };
    // What is not given comes from the pulling timer's configuration, if it is installed.
    let timer = |flag: &str| crate::timer::configured(&root, flag);
    let Some(dest) = args.store.clone().or_else(|| timer("--store")) else {
        return usage("`pending` needs `--store etcd://HOST:PORT` (no pulling timer names one)");
    };
    let fleet_given = args.fleet.clone().or_else(|| timer("--fleet"));
    let host_given = args.host.clone().or_else(|| timer("--host"));
    // The timer's TLS files go with the timer's store; given ones with a given store.
    let access = match &args.store {
        Some(_) => args.access(),
        None => {
            let file = |flag: &str| timer(flag).map(PathBuf::from);
            bell_store::Access {
                tls: bell_store::tls::TlsFiles {
                    ca: file("--store-ca"),
                    cert: file("--store-cert"),
                    key: file("--store-key"),
                },
                user: timer("--store-user"),
                password_file: file("--store-password-file"),
            }
        }
    };
    let result = (|| {
        let store = bell_store::Store::open(&dest, &access).map_err(Refusal::new)?;
        let state = state::load(&root).map_err(Refusal::new)?;
        let applied = state.generation.clone();
        let fleet = match (&fleet_given, &applied) {
            (Some(fleet), _) => fleet.clone(),
            (None, Some(id)) => {
                let path = state::generation_dir(&root, id).join(bell_bundle::MANIFEST_FILE);
                crate::rootfs::read_record(&path)
                    .ok()
                    .flatten()
                    .and_then(|t| bell_bundle::Manifest::from_json(&t).ok())
                    .map(|m| m.fleet)
                    .ok_or_else(|| {
                        Refusal::new(format!("cannot read the fleet from {}", path.display()))
                            .help("pass `--fleet NAME`")
                    })?
            }
            (None, None) => {
                return Err(
                    Refusal::new("nothing is applied yet, so the fleet is unknown")
                        .help("pass `--fleet NAME`"),
                )
            }
        };
        let host = report::host_name(host_given.as_deref(), &root.dir).map_err(Refusal::new)?;
        let desired = store.desired(&fleet, &host).map_err(Refusal::new)?;
        Ok((fleet, host, applied, desired))
    })();
    let (fleet, host, applied, desired) = match result {
        Ok(found) => found,
        Err(refusal) => return refused(&refusal, args.json),
    };
    let Some(want) = desired.bundle else {
        return refused(
            &Refusal::new(format!(
                "the store has no desired bundle for host `{host}` of fleet `{fleet}`"
            ))
            .help("check `--fleet` and `--host`, or publish a release that has this host with `bellc publish`"),
            args.json,
        );
    };
    let pending = applied.as_deref() != Some(want.as_str());
    if args.json {
        let value = serde_json::json!({
            "host": host,
            "applied": applied,
            "desired": want,
            "version": desired.version,
            "pending": pending,
        });
        println!("{value:#}");
    } else if pending {
        println!(
            "update pending for {host}: applied {}, desired {} (release {})",
            applied.as_deref().map_or("nothing", journal::short),
            journal::short(&want),
            desired.version.as_deref().map_or("unknown", journal::short)
        );
    } else {
        println!(
            "{host} is up to date with release {}",
            desired.version.as_deref().map_or("unknown", journal::short)
        );
    }
    if pending {
        PENDING
    } else {
        OK
    }
}

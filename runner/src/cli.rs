//! The command line: raw arguments become validated options here, and this is the only module
//! that prints or decides exit codes (the table in `USAGE`: 0 done, 1 refused with nothing
//! changed, 2 drift found, 3 applied with failures, 4 applied but unhealthy, 10 a new release
//! is pending, 64 usage).

use crate::apply::{self, Options, Report};
use crate::context::{Ctx, Outcome, Refusal};
use crate::help::{MARKERS, USAGE};
use crate::plan::{Change, FileAction};
use crate::{check, generations, journal, report, state, statedir};
use bell_run::spec::Command;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

mod fleet;
mod shown;
use fleet::{cmd_install_timer, cmd_pending, cmd_pull, cmd_register};
use shown::{cmd_check, cmd_status, print_report, print_report_body};

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
    } else if report.waiting() {
        PENDING
    } else {
        OK
    }
}

/// The `result` of an apply's JSON, matching [`applied_code`].
fn applied_result(report: &Report) -> &'static str {
    match applied_code(report) {
        FAILURES => "failed",
        UNHEALTHY => "unhealthy",
        PENDING => "waiting",
        _ => "ok",
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
    /// `pull --gateway --wait SECS`: long-poll for a change this long after the pull.
    wait: Option<u64>,
    /// `live --every SECS`.
    every: Option<u64>,
    exec: Option<String>,
    interval: Option<String>,
    report: Option<String>,
    metrics: Option<PathBuf>,
    host: Option<String>,
    release: Option<String>,
    store: Option<String>,
    /// `--gateway https://…`: the store as the fleet's gateway, each request signed.
    gateway: Option<String>,
    signer: Option<bell_wire::etcd::RequestSigner>,
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
            tls: bell_wire::tls::TlsFiles {
                ca: self.store_ca.clone(),
                cert: self.store_cert.clone(),
                key: self.store_key.clone(),
            },
            user: self.store_user.clone(),
            password_file: self.store_password_file.clone(),
            signer: self.signer.clone(),
        }
    }

    /// `--report`: with `--gateway`, an https:// report goes to the gateway as the store does.
    fn report_destination(&self) -> Option<String> {
        let report = self.report.clone()?;
        match report.strip_prefix("https://") {
            Some(rest) if self.gateway.is_some() => Some(format!("etcds://{rest}")),
            _ => Some(report),
        }
    }

    fn sinks(&self) -> report::Sinks {
        report::Sinks {
            access: self.access(),
            report: self.report_destination(),
            metrics: self.metrics.clone(),
            host: self.host.clone(),
            release: self.release.clone(),
            alive_ttl: self.alive_ttl.unwrap_or(report::DEFAULT_ALIVE_TTL),
            read: None,
            identity: self.identity.clone(),
            until: None,
        }
    }
}

/// `args` of `command`: an option is taken only when the command's definition lists it
/// (`bell_run::spec`), which is also what its help, man page and completions say.
fn parse(command: &Command, args: &[OsString]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if let Some(long) = text.strip_prefix("--") {
            if command.flag(long).is_none() {
                let elsewhere = bell_run::spec::COMMANDS
                    .iter()
                    .any(|c| c.flag(long).is_some());
                return Err(if elsewhere {
                    format!(
                        "`{text}` is not an option of `bell-run {}` (`bell-run {} --help` lists its options)",
                        command.name, command.name
                    )
                } else {
                    format!("unknown option `{text}`")
                });
            }
        }
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
            "--wait" => {
                let v = value("--wait")?;
                out.wait = Some(v.to_string_lossy().parse::<u64>().map_err(|_| {
                    format!(
                        "`--wait {}` is not a number of seconds",
                        v.to_string_lossy()
                    )
                })?);
            }
            "--every" => {
                let v = value("--every")?;
                let secs = v
                    .to_string_lossy()
                    .parse::<u64>()
                    .ok()
                    .filter(|s| (1..=3600).contains(s));
                out.every = Some(secs.ok_or_else(|| {
                    format!(
                        "`--every {}` is not a number of seconds from 1 to 3600",
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
            "--gateway" => out.gateway = Some(value("--gateway")?.to_string_lossy().to_string()),
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
    if let Some(gateway) = out.gateway.clone() {
        gateway_store(&mut out, &gateway)?;
    } else if out.wait.is_some_and(|w| w > 0) {
        return Err(
            "`--wait` long-polls the fleet's gateway: give `--gateway` (a direct `--store` \
             is pulled on the timer)"
                .into(),
        );
    }
    Ok(out)
}

pub fn main() -> i32 {
    let all: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(command) = all.first().map(|c| c.to_string_lossy().to_string()) else {
        errln!("{USAGE}");
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
            Some(text) => outln!("{text}"),
            None => outln!("{USAGE}\n\n{MARKERS}"),
        }
        return OK;
    }
    if command == "--version" {
        outln!("bell-run {}", env!("CARGO_PKG_VERSION"));
        return OK;
    }
    let Some(spec) = bell_run::spec::command(&command) else {
        return usage(&format!("unknown command `{command}`"));
    };
    let mut args = match parse(spec, &all[1..]) {
        Ok(args) => args,
        Err(e) => return usage(&e),
    };
    if command != "install-timer" {
        if let Err(e) = sign_for_gateway(&mut args, command == "register") {
            return usage(&e);
        }
    }
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
        "live" if wants(0) => cmd_live(&args),
        "apply" | "verify" => usage(&format!("`{command}` takes one bundle directory")),
        "rollback" | "generations" | "remove" | "status" | "recover" | "install-timer"
        | "check" | "pending" | "pull" | "identity" | "register" | "live" => {
            usage(&format!("`{command}` takes no positional argument"))
        }
        other => usage(&format!("unknown command `{other}`")),
    }
}

fn cmd_live(args: &Args) -> i32 {
    let Some(store) = args.store.clone() else {
        return usage(
            "`live` needs the fleet's store: `--store etcd[s]://HOST:PORT` or `--gateway URL`",
        );
    };
    let opts = crate::live_mode::Options {
        root: root_of(args),
        host: args.host.clone(),
        store,
        access: args.access(),
        gateway: args.gateway.is_some(),
        every: std::time::Duration::from_secs(
            args.every.unwrap_or(crate::live_mode::DEFAULT_EVERY),
        ),
        identity: args.identity.clone(),
    };
    match crate::live_mode::run(&opts) {
        Ok(()) => OK,
        Err(e) => {
            errln!("error: {e}");
            REFUSED
        }
    }
}

fn usage(message: &str) -> i32 {
    errln!("error: {message}\n\n{USAGE}");
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
        outjson!(value);
    } else {
        errln!("error: {}", refusal.message);
        if let Some(help) = &refusal.help {
            errln!("help: {help}");
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
        // The store the run reports to is the fleet's: live files read their providers there.
        live_store: args
            .report_destination()
            .filter(|dest| dest.contains("://"))
            .and_then(|dest| bell_store::Store::open(&dest, &args.access()).ok())
            .map(|store| std::sync::Arc::new(store.with_limits(bell_wire::etcd::Limits::HOST))),
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
                outjson!(value);
            } else {
                print_report(&report);
                if let Some(timings) = &report.timings {
                    out!("{}", timings.table());
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
                bell_bundle::short_id(&chosen.id)
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
        outjson!(value);
        return OK;
    }
    if kept.is_empty() {
        outln!("no generation kept under {}", root.dir.display());
        return OK;
    }
    outln!(
        "generations kept under {}, oldest first (`bell-run rollback --to ID` applies one again):",
        root.dir.display()
    );
    outln!(
        "  {:12}  {:23}  {:6}  release",
        "id",
        "last applied",
        "result"
    );
    for g in &kept {
        let release = g.release.as_deref().map_or("-", |r| r);
        let current = if g.current { "  (applied now)" } else { "" };
        outln!(
            "  {:12}  {:23}  {:6}  {release}{current}",
            bell_bundle::short_id(&g.id),
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
        outjson!(value);
        return OK;
    }
    if made {
        // Where it is on this machine: in an image root, not the machine's own /etc.
        errln!(
            "made {}: this host's identity from now on",
            key.file.display()
        );
    }
    match name {
        Some(name) => outln!("{} {name}", identity.to_openssh()),
        None => outln!("{}", identity.to_openssh()),
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
        outjson!(value);
        return applied_code(report);
    }
    let verb = if report.dry_run {
        "plan to remove"
    } else {
        "removing"
    };
    outln!(
        "bell-run: {verb} bell from {} (generation {} is applied)",
        report.root,
        bell_bundle::short_id(&removal.generation)
    );
    print_report_body(report);
    if report.dry_run {
        outln!(
            "then: the timer's units and {}/var/lib/bell (state, logs, kept generations, \
             originals) go; accounts bell created are expired and locked, not deleted",
            report.root.trim_end_matches('/')
        );
        return OK;
    }
    if !report.failed.is_empty() {
        outln!("bell's state is kept: fix what failed and run `bell-run remove --yes` again");
        return applied_code(report);
    }
    for unit in &removal.units {
        outln!("  removed {unit}");
    }
    if let Some(dir) = &removal.state_dir {
        outln!("  removed {dir}");
    }
    if !removal.accounts.is_empty() {
        outln!(
            "accounts bell created stay, expired and locked (a home may hold someone's work): {}; \
             `userdel -r NAME` deletes one",
            removal.accounts.join(", ")
        );
    }
    outln!("result: bell is removed");
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
                outjson!(value);
            } else {
                outln!(
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
            outln!("bell-run: {done}");
            OK
        }
        Ok(None) => {
            outln!("bell-run: no interrupted switch");
            OK
        }
        Err(e) => refused(&Refusal::new(format!("cannot recover: {e}")), false),
    }
}

/// `--gateway https://HOST:PORT[,HOST:PORT…]`: the store is the fleet's gateway, spoken to as
/// etcd is over TLS (`--store-ca` names the gateway's CA), each request signed with the host's
/// identity ([`sign_for_gateway`]) instead of a store user's password.
fn gateway_store(out: &mut Args, gateway: &str) -> Result<(), String> {
    if out.store.is_some() {
        return Err("give `--gateway` or `--store`, not both".into());
    }
    if out.store_user.is_some() || out.store_password_file.is_some() {
        return Err(
            "a host speaks to the gateway with its identity: drop `--store-user` and \
             `--store-password-file`"
                .into(),
        );
    }
    let Some(endpoints) = gateway.strip_prefix("https://") else {
        return Err(format!(
            "`--gateway {}`: the gateway is an https:// URL",
            gateway.escape_debug()
        ));
    };
    out.store = Some(format!("etcds://{endpoints}"));
    Ok(())
}

/// With `--gateway`, what signs each request: the host's identity, loaded now (a command that
/// only writes a timer, which runs later on the host, loads none); `make` makes it when there
/// is none (`register`, which a new machine runs first).
fn sign_for_gateway(out: &mut Args, make: bool) -> Result<(), String> {
    if out.gateway.is_none() {
        return Ok(());
    }
    let root = statedir::open_root(&root_of(out)).map_err(|r| r.message)?;
    let host = report::host_name(out.host.as_deref(), &root.dir)?;
    bell_store::check_name("host", &host)?;
    let made = match (make, out.identity.is_none()) {
        (true, true) => Some(crate::identity::load_or_make(&root)?.0),
        _ => crate::identity::signing_key(&root, out.identity.as_deref())?,
    };
    let key = made.ok_or_else(|| {
        format!(
            "`--gateway` signs each request with the host's identity, and there is none ({} or \
             {}): run `bell-run identity --init`, or give `--identity FILE`",
            crate::identity::SSH_HOST_KEY,
            crate::identity::BELL_KEY
        )
    })?;
    let key = std::sync::Arc::new(key.key);
    out.signer = Some(bell_wire::etcd::RequestSigner(std::sync::Arc::new(
        move |path, body| bell_store::gateway::authorization(&host, &key, path, body, state::now()),
    )));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse;
    use bell_run::spec::COMMANDS;

    /// The definition and the parser agree on every option of every command: a switch is taken
    /// alone, an option with a value takes the next argument (never left as a positional), and
    /// none the definition lists is unknown to the parser.
    #[test]
    fn every_option_of_the_definition_is_parsed_as_it_says() {
        let mut checked = 0;
        for command in COMMANDS {
            for flag in command.options() {
                let name = format!("--{}", flag.long);
                let alone = parse(command, &[name.clone().into()]);
                match flag.value {
                    None => assert!(alone.is_ok(), "{} {name}: {:?}", command.name, alone.err()),
                    Some(_) => {
                        assert_eq!(
                            alone.err(),
                            Some(format!("`{name}` needs a value")),
                            "{} {name}",
                            command.name
                        );
                        match parse(command, &[name.clone().into(), "/x".into()]) {
                            Ok(args) => assert!(args.positional.is_empty(), "{name}"),
                            Err(e) => assert!(!e.contains("unknown option"), "{name}: {e}"),
                        }
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 120, "{checked}");
    }

    #[test]
    fn an_option_of_another_command_is_named_as_such() {
        let status = bell_run::spec::command("status").expect("status");
        let err = parse(status, &["--source".into(), "x".into()]).err();
        assert_eq!(
            err.as_deref(),
            Some(
                "`--source` is not an option of `bell-run status` (`bell-run status --help` \
                 lists its options)"
            )
        );
        let err = parse(status, &["--bogus".into()]).err();
        assert_eq!(err.as_deref(), Some("unknown option `--bogus`"));
    }
}

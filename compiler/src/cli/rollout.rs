//! `bellc rollout`: the controller's front end, a progress display for people and one JSON
//! event per line for CI.

use crate::args::RolloutArgs;
use crate::keys::load_sign_key;
use crate::{read_release, Failure};
use bell_bundle::short_id;
use bell_ops::fleet::rollout::{
    self, Call, Controller, Event, Outcome, Progress, RolloutError, Trouble,
};
use bell_store::hold::one_line;
use bell_store::Etcd;
use bellc_core::emit::signing::SigningKey;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::Path;
use std::time::Duration;

pub struct Args<'a> {
    pub out: &'a Path,
    pub store: &'a str,
    pub access: &'a bell_store::Access,
    /// Where the key was read from, for the commands the hints print.
    pub key_path: Option<&'a Path>,
    pub key: Option<&'a SigningKey>,
    pub expires_in: Option<u64>,
    pub wave_timeout: u64,
    pub resume: bool,
    pub abort: bool,
    pub json: bool,
    /// Who starts it, for the history (`--by`).
    pub by: Option<&'a str>,
}

/// Exit 0 when the rollout (or abort) finished, 1 when it halted.
pub fn run(args: &Args) -> Result<u8, String> {
    let etcd = Etcd::open(args.store, args.access)?;
    let controller = Controller {
        by: bell_ops::fleet::rollout::history::started_by(args.by, super::operator::name),
        etcd,
        out: args.out.to_path_buf(),
        key: args.key,
        expires_in: args.expires_in,
        wave_timeout: Duration::from_secs(args.wave_timeout),
        poll: rollout::POLL,
        reading: Default::default(),
        who: format!(
            "{} pid {}",
            std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "localhost".to_string()),
            std::process::id()
        ),
    };
    if args.key.is_none() {
        errln!(
            "warning: the waves' releases are not signed (no --sign-key); hosts that trust a \
             key refuse them"
        );
    }
    let target = rollout::read_target(args.out).map_err(|e| explain_with(e, args, None))?;
    let mut display = Display::new(args.json);
    let outcome = if args.abort {
        controller.abort(&target.fleet, &mut |e| display.show(e))
    } else {
        controller.rollout(&target, args.resume, &mut |e| display.show(e))
    };
    display.finish();
    match outcome.map_err(|e| explain_with(e, args, Some(&target.fleet)))? {
        Outcome::Done { release, held } => {
            if !args.json && held.is_empty() {
                outln!("release {} rolled out", short_id(&release));
            } else if !args.json {
                outln!(
                    "release {} rolled out, but for the held {}",
                    short_id(&release),
                    held.join(", ")
                );
            }
            Ok(0)
        }
        Outcome::Aborted {
            release,
            back,
            kept,
        } => {
            if !args.json {
                match back.is_empty() {
                    true => outln!(
                        "aborted: no host taken back (release {})",
                        short_id(&release)
                    ),
                    false => outln!(
                        "aborted: {} host(s) back on their previous bundles: {} (release {})",
                        back.len(),
                        back.join(", "),
                        short_id(&release)
                    ),
                }
                for k in &kept {
                    outln!("  left as it is: {}: {}", k.host, k.why);
                }
            }
            Ok(0)
        }
        Outcome::Halted(halt) => {
            if !args.json {
                outln!("halted: {}", halt.reason);
                for t in &halt.hosts {
                    outln!("  {}", trouble(t));
                }
                outln!(
                    "later waves stay on their old bundles; fix the hosts and `{}`, or `{}` to \
                     take the rollout back",
                    command(args.out, args.store, args.access, args.key_path, "--resume"),
                    command(args.out, args.store, args.access, args.key_path, "--abort")
                );
            }
            Ok(1)
        }
    }
}

/// A complete `bellc rollout` command for a hint: OUT, the store and the key as given (none
/// for a fleet whose releases are not signed), then `what`.
pub fn command(
    out: &Path,
    store: &str,
    access: &bell_store::Access,
    key: Option<&Path>,
    what: &str,
) -> String {
    call(out, store, access, key, None).here(what)
}

/// A word as a shell reads it back: bare when it is plain, single-quoted otherwise.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:,@=+".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `bellc rollout --status`.
pub fn status(
    store: &str,
    access: &bell_store::Access,
    fleet: &str,
    json: bool,
) -> Result<u8, String> {
    let etcd = Etcd::open(store, access)?;
    let progress = rollout::load_progress(&etcd, fleet).map_err(explain)?;
    let holder = rollout::holder(&etcd, fleet).map_err(explain)?;
    // Halted or being aborted: someone is needed (the code `bellc status` uses for that).
    let code = match progress.as_ref().map(|p| p.phase) {
        Some(rollout::Phase::Halted | rollout::Phase::Aborting) => STOPPED,
        _ => 0,
    };
    if json {
        let value = serde_json::json!({ "progress": progress, "controller": holder });
        outjson!(value.to_string());
        return Ok(code);
    }
    let Some(p) = progress else {
        outln!("fleet {fleet}: no rollout");
        return Ok(0);
    };
    print!("{}", describe(&p, holder.as_deref()));
    if p.phase == rollout::Phase::Halted {
        outln!("  {}", rollout::next_after_halt(store, None));
    }
    Ok(code)
}

/// `bellc rollout --pause` (with who and why) or `--continue` (`None`).
pub fn pause(
    store: &str,
    access: &bell_store::Access,
    fleet: &str,
    pausing: Option<(Option<&str>, Option<&str>)>,
) -> Result<u8, String> {
    bell_store::check_name("fleet", fleet)?;
    let etcd = Etcd::open(store, access)?;
    match pausing {
        Some((reason, by)) => {
            let pause = rollout::Pause {
                by: by.map_or_else(super::operator::name, str::to_string),
                reason: reason.map(str::to_string),
                since: super::operator::now(),
            };
            rollout::pause(&etcd, fleet, &pause).map_err(explain)?;
            outln!(
                "fleet {fleet}: rollout paused by {} since {}: no new wave until `--continue`",
                pause.by,
                bell_bundle::utc(pause.since)
            );
        }
        None => {
            if rollout::unpause(&etcd, fleet).map_err(explain)? {
                outln!("fleet {fleet}: rollout continues");
            } else {
                outln!("fleet {fleet}: the rollout was not paused");
            }
        }
    }
    Ok(0)
}

/// `bellc rollout --status` exits with this when the rollout is halted or being aborted.
pub const STOPPED: u8 = 3;

fn describe(p: &Progress, holder: Option<&str>) -> String {
    let mut text = format!(
        "fleet {}: rollout of release {} {}\n",
        p.fleet,
        short_id(&p.target),
        p.phase.as_str()
    );
    text.push_str(&format!(
        "  from release {}\n",
        p.from
            .as_deref()
            .map_or("(none: the fleet's first)", short_id)
    ));
    let hosts: usize = p.waves.iter().map(Vec::len).sum();
    text.push_str(&format!(
        "  waves: {} converged, {} given, of {} ({hosts} hosts change)\n",
        p.converged,
        p.given,
        p.waves.len()
    ));
    if let Some(published) = &p.published {
        text.push_str(&format!(
            "  the store names release {} (published {})\n",
            short_id(published),
            bell_bundle::utc(p.published_at)
        ));
    }
    if let Some(pause) = &p.paused {
        text.push_str(&format!(
            "  paused by {} since {}{}: no new wave until `bellc rollout --continue`\n",
            one_line(&pause.by),
            bell_bundle::utc(pause.since),
            pause
                .reason
                .as_deref()
                .map(|r| format!(" ({})", one_line(r)))
                .unwrap_or_default()
        ));
    }
    if let Some(halt) = &p.halted {
        text.push_str(&format!("  halted: {}\n", one_line(&halt.reason)));
        for t in &halt.hosts {
            text.push_str(&format!("    {}\n", trouble(t)));
        }
    }
    text.push_str(&format!(
        "  controller: {}\n",
        holder.map_or_else(|| "none running".to_string(), one_line)
    ));
    text
}

/// `h06  failed: group `bellapp` is not a group …`, on one line whatever the host reported.
fn trouble(t: &Trouble) -> String {
    let line = match &t.detail {
        Some(d) => format!("{}  {}: {d}", t.host, t.state),
        None => format!("{}  {}", t.host, t.state),
    };
    one_line(&line)
}

/// A command line, for hints and remedies written as whole commands.
fn call(
    out: &Path,
    store: &str,
    access: &bell_store::Access,
    key: Option<&Path>,
    fleet: Option<&str>,
) -> Call {
    let mut store = format!("--store {}", shell_word(store));
    for (flag, value) in access.flags() {
        store.push_str(&format!(" {flag} {}", shell_word(&value)));
    }
    Call {
        out: shell_word(&out.display().to_string()),
        store,
        key: key.map_or_else(String::new, |key| {
            format!("--sign-key {}", shell_word(&key.display().to_string()))
        }),
        fleet: fleet.map(str::to_string),
    }
}

/// The error and its help, with every command in it complete for this OUT, store and key.
fn explain_with(e: RolloutError, args: &Args, fleet: Option<&str>) -> String {
    let command = |what: &str| command(args.out, args.store, args.access, args.key_path, what);
    let help = match &e {
        RolloutError::Busy { fleet, .. } => Some(format!(
            "wait for it, or follow it with `bellc rollout --status --store {} --fleet {fleet}`; \
             a controller that died lets go within {} s, then `{}` continues its rollout",
            shell_word(args.store),
            rollout::LEASE_TTL,
            command("--resume")
        )),
        RolloutError::LostLease => Some(format!("`{}` continues", command("--resume"))),
        RolloutError::Refused { remedy, .. } => Some(remedy.help(&call(
            args.out,
            args.store,
            args.access,
            args.key_path,
            fleet,
        ))),
        _ => e.help(),
    };
    match help {
        Some(help) => format!("{e}\n  help: {help}"),
        None => e.to_string(),
    }
}

fn explain(e: RolloutError) -> String {
    match e.help() {
        Some(help) => format!("{e}\n  help: {help}"),
        None => e.to_string(),
    }
}

/// A progress bar on a terminal (lines on stderr elsewhere), or JSON lines on stdout.
struct Display {
    json: bool,
    bar: Option<ProgressBar>,
}

impl Display {
    fn new(json: bool) -> Display {
        Display { json, bar: None }
    }

    fn show(&mut self, event: &Event) {
        if self.json {
            if !matches!(event, Event::Tick { .. }) {
                // Every event says when (unix milliseconds): a log of them is a timeline.
                if let Ok(mut value) = serde_json::to_value(event) {
                    value["at"] = now_ms().into();
                    outjson!(value.to_string());
                }
            }
            return;
        }
        match event {
            Event::WaveStarted {
                wave,
                waves,
                release,
                hosts,
                resumed,
            } => {
                self.finish();
                let bar = ProgressBar::new(hosts.len() as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {pos}/{len} hosts up to date, {msg} ({elapsed})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix(format!("wave {wave}/{waves}"));
                self.line(&format!(
                    "wave {wave} of {waves}: {} host{} on release {}{}",
                    hosts.len(),
                    if hosts.len() == 1 { "" } else { "s" },
                    short_id(release),
                    if *resumed { " (resumed)" } else { "" }
                ));
                self.bar = Some(bar);
            }
            Event::AbortStarted { release, hosts, .. } => {
                self.finish();
                let bar = ProgressBar::new(hosts.len() as u64);
                bar.set_prefix("abort");
                self.line(&format!(
                    "abort: {} host{} back, release {}",
                    hosts.len(),
                    if hosts.len() == 1 { "" } else { "s" },
                    short_id(release)
                ));
                self.bar = Some(bar);
            }
            Event::HostConverged { .. } => {}
            Event::Paused {
                wave,
                by,
                reason,
                since,
            } => {
                self.finish();
                self.line(&format!(
                    "paused by {} since {}{} (`bellc rollout --continue` gives wave {wave})",
                    one_line(by),
                    bell_bundle::utc(*since),
                    reason
                        .as_deref()
                        .map(|r| format!(": {}", one_line(r)))
                        .unwrap_or_default()
                ));
            }
            Event::Continued { wave } => self.line(&format!("continued: wave {wave} is given")),
            Event::LeftOut { wave, hosts } => self.line(&format!(
                "held since the rollout began, left out of wave {wave} and later: {}",
                hosts.join(", ")
            )),
            Event::Tick {
                converged,
                rebooting,
                hosts,
                ..
            } => {
                if let Some(bar) = &self.bar {
                    bar.set_position(*converged as u64);
                    bar.set_message(match rebooting {
                        0 => format!("{} waiting", hosts - converged),
                        n => format!("{} waiting ({n} rebooting)", hosts - converged),
                    });
                }
            }
            Event::HostFailed {
                wave,
                host,
                state,
                detail,
            }
            | Event::HostRebooting {
                wave,
                host,
                state,
                detail,
            } => self.line(&format!(
                "  {host} (wave {wave}): {state}{}",
                detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            )),
            Event::StoreTrouble { error } => {
                self.line(&format!("warning: cannot read the store: {error}"))
            }
            Event::Halted { .. } => self.finish(),
            Event::Done {
                waves,
                hosts,
                elapsed_ms,
                held,
                ..
            } => {
                self.finish();
                self.line(&format!(
                    "{waves} wave{}, {hosts} host{} changed, in {:.1} s",
                    if *waves == 1 { "" } else { "s" },
                    if *hosts == 1 { "" } else { "s" },
                    *elapsed_ms as f64 / 1000.0
                ));
                if !held.is_empty() {
                    self.line(&format!(
                        "left out, held: {} (still on their bundle; `bellc unhold` them and \
                         roll out again to move them)",
                        held.join(", ")
                    ));
                }
            }
            Event::Aborted { .. } => self.finish(),
        }
    }

    /// A line above the bar (on stderr, so that stdout holds only the outcome).
    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) if !bar.is_hidden() => bar.println(one_line(text)),
            _ => errln!("{text}"),
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `bellc rollout --history`: the fleet's rollouts, newest first.
pub fn history(
    store: &str,
    access: &bell_store::Access,
    fleet: &str,
    json: bool,
) -> Result<u8, String> {
    bell_store::check_name("fleet", fleet)?;
    let etcd = Etcd::open(store, access)?;
    let entries = bell_ops::fleet::rollout::history::list(&etcd, fleet)?;
    if json {
        outjson!(serde_json::to_string_pretty(&entries).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    if entries.is_empty() {
        outln!("fleet {fleet}: no rollout in the history");
        return Ok(0);
    }
    for e in &entries {
        let hosts: usize = e.waves.iter().map(|w| w.hosts.len()).sum();
        outln!(
            "{}  {} → {}  {} wave{}, {hosts} host{}  {} after {}  by {}{}",
            bell_bundle::utc(e.started_at),
            e.from.as_deref().map_or("(first)", short_id),
            short_id(&e.target),
            e.waves.len(),
            if e.waves.len() == 1 { "" } else { "s" },
            if hosts == 1 { "" } else { "s" },
            e.outcome,
            super::operator::duration(e.ended_at.saturating_sub(e.started_at)),
            one_line(&e.started_by),
            e.reason
                .as_deref()
                .map(|r| format!(": {}", one_line(r)))
                .unwrap_or_default()
        );
        for (i, w) in e.waves.iter().enumerate() {
            let took = match (w.started_at, w.converged_at) {
                (Some(a), Some(b)) => format!(
                    "converged in {}",
                    super::operator::duration(b.saturating_sub(a))
                ),
                (Some(_), None) => "did not converge".to_string(),
                _ => "not given".to_string(),
            };
            outln!("    wave {}: {} ({took})", i + 1, w.hosts.join(", "));
        }
        if !e.held.is_empty() {
            outln!("    held, left out: {}", e.held.join(", "));
        }
        for halt in &e.halts {
            let resumed = match (halt.resumed_at, &halt.resumed_by) {
                (Some(at), by) => format!(
                    "; resumed {}{}",
                    bell_bundle::utc(at),
                    by.as_deref()
                        .map(|b| format!(" by {}", one_line(b)))
                        .unwrap_or_default()
                ),
                (None, _) => String::new(),
            };
            outln!(
                "    halted {} at wave {}: {}{resumed}",
                bell_bundle::utc(halt.at),
                halt.wave,
                one_line(&halt.reason)
            );
        }
    }
    Ok(0)
}

/// `bellc rollout`: one of its modes (`--history`, `--pause`/`--continue`, `--status`), or the
/// controller itself.
pub fn exec(args: &RolloutArgs) -> Result<u8, Failure> {
    let RolloutArgs {
        out,
        store,
        tls,
        signing,
        wave_timeout,
        resume,
        abort,
        status,
        pause,
        unpause,
        reason,
        by,
        history,
        fleet,
        json,
    } = args;
    // `--history`, `--pause`, `--continue` and `--status` name the fleet by `--fleet`
    // or by OUT's release.
    let fleet_of = |what: &str| -> Result<String, Failure> {
        match (fleet, out) {
            (Some(fleet), _) => Ok(fleet.clone()),
            (None, Some(out)) => Ok(read_release(out)?.fleet),
            (None, None) => Err(Failure::Usage(format!("{what} OUT or `--fleet`"))),
        }
    };
    if *history {
        let fleet = fleet_of("`--history` needs")?;
        return Ok(self::history(store, &tls.access(), &fleet, *json)?);
    }
    if *pause || *unpause {
        let fleet = fleet_of("`--pause` and `--continue` need")?;
        return Ok(self::pause(
            store,
            &tls.access(),
            &fleet,
            pause.then_some((reason.as_deref(), by.as_deref())),
        )?);
    }
    if *status {
        let fleet = fleet_of("`--status` needs")?;
        return Ok(self::status(store, &tls.access(), &fleet, *json)?);
    }
    let Some(out) = out else {
        return Err(Failure::Usage("OUT is required".into()));
    };
    let key = load_sign_key(signing)?;
    if key.is_none() {
        let fleet = read_release(out)?.fleet;
        if bell_ops::fleet::out_is_signed(out, Some(&fleet)) {
            return Err(Failure::Usage(format!(
                "{} holds signed releases, and the waves' and the abort's releases \
                 must be signed as well: give `--sign-key KEY` (nothing was changed)\n  \
                 help: {}",
                out.display(),
                command(
                    out,
                    store,
                    &tls.access(),
                    Some(Path::new("KEY")),
                    if *abort {
                        "--abort"
                    } else if *resume {
                        "--resume"
                    } else {
                        ""
                    }
                )
            )));
        }
    }
    Ok(run(&Args {
        out,
        store,
        access: &tls.access(),
        key_path: signing.sign_key.as_deref(),
        key: key.as_ref(),
        expires_in: signing.expires,
        wave_timeout: *wave_timeout,
        resume: *resume,
        abort: *abort,
        json: *json,
        by: by.as_deref(),
    })?)
}

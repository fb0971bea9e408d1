//! The systemd service and timer that bring the host to its release periodically: either
//! re-apply the current generation, or pull the bundle the fleet names for this host and apply
//! it. The shipped unit files (runner/systemd/) are the source; `install-timer` writes them under
//! the root with the binary path, the pull options and the interval filled in.

use crate::rootfs::{write_atomic, Root};
use std::fmt::Write as _;

pub const SERVICE: &str = include_str!("../systemd/bell-run.service");
pub const PULL_SERVICE: &str = include_str!("../systemd/bell-run-pull.service");
pub const TIMER: &str = include_str!("../systemd/bell-run.timer");
pub const REGISTER_SERVICE: &str = include_str!("../systemd/bell-run-register.service");
pub const LIVE_SERVICE: &str = include_str!("../systemd/bell-run-live.service");

/// The pull's options that `register` takes too: the same store, fleet, host and credentials.
const REGISTER_OPTIONS: [&str; 9] = [
    "--store",
    "--gateway",
    "--fleet",
    "--host",
    "--store-ca",
    "--store-cert",
    "--store-key",
    "--store-user",
    "--store-password-file",
];

const UNIT_DIR: &str = "/etc/systemd/system";
/// Where the Debian package's units are: the package's files, which `remove` leaves to dpkg
/// (it takes away only the links that enabled them).
const PACKAGE_UNIT_DIR: &str = "/usr/lib/systemd/system";

/// The pulling timer's options, by flag, in bell-run's directory.
pub const PULL_RECORD: &str = "pull.json";

/// Where the Debian package's units take their options (`BELL_RUN_PULL=…`), a conffile.
pub const PACKAGE_DEFAULTS: &str = "/etc/default/bell-run";

/// The value the pulling timer was given for `flag` (`--fleet`), if any: from the record
/// `install-timer` leaves, or else from the package's `BELL_RUN_PULL` (a unit install-timer
/// wrote under /etc/systemd/system is the one systemd runs, so its record speaks first).
pub fn configured(root: &Root, flag: &str) -> Option<String> {
    match crate::rootfs::read_record(&root.bell_dir().join(PULL_RECORD)) {
        Ok(Some(text)) => {
            let map: std::collections::BTreeMap<String, String> =
                serde_json::from_str(&text).ok()?;
            map.get(flag).cloned()
        }
        Ok(None) => package_pull_options(root)?
            .into_iter()
            .find(|(f, _)| f == flag)
            .map(|(_, value)| value),
        Err(_) => None,
    }
}

/// The options with a value in the package's `BELL_RUN_PULL`, read as systemd reads an
/// `EnvironmentFile=` (the last assignment counts, one pair of quotes around the value) and
/// splits `$BELL_RUN_PULL` (at whitespace). `None` when the file is missing, is not a plain
/// file inside the root, or sets no pull options.
fn package_pull_options(root: &Root) -> Option<Vec<(String, String)>> {
    root.check_contained(PACKAGE_DEFAULTS).ok()?;
    let text = crate::rootfs::read_record(&root.host(PACKAGE_DEFAULTS)).ok()??;
    let value = pull_assignment(&text)?;
    let pull = bell_run::spec::command("pull")?;
    let mut words = value.split_whitespace();
    let mut options = Vec::new();
    while let Some(word) = words.next() {
        let Some(name) = word.strip_prefix("--") else {
            continue;
        };
        if pull.flag(name).is_some_and(|f| f.value.is_some()) {
            if let Some(value) = words.next() {
                options.push((word.to_string(), value.to_string()));
            }
        }
    }
    Some(options)
}

/// The value of the last `BELL_RUN_PULL=` line, without the quotes around it.
fn pull_assignment(text: &str) -> Option<&str> {
    let value = text
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("BELL_RUN_PULL="))
        .next_back()?
        .trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q));
    Some(unquoted.unwrap_or(value))
}

/// How long one pull may hold its unit (`TimeoutStartSec=`), from its fetch's bound and its
/// scripts' timeout. A pull that hangs must not hold the unit (and so every later tick) for
/// ever; what it may do is bounded piece by piece: its fetch, an apply (room for two scripts
/// that run to their limit), the longest confirmation a release may ask for, and going back
/// after it (another apply, and its report tried again for up to 30 s). systemd keeps no
/// `EXTEND_TIMEOUT_USEC` across a `daemon-reload` (it counts again from the start), and an
/// apply reloads it, so the whole of it is in the bound. Past it, systemd ends the run, and
/// bell-run's journal finishes or undoes a cut-off apply on the next run, whose confirmation
/// is settled at the deadline the state records.
pub fn pull_limit(fetch_timeout: u64, script_timeout: u64) -> u64 {
    let apply = 2 * script_timeout;
    fetch_timeout + apply + bell_bundle::confirm::LONGEST + apply + 60
}

/// A systemd time span (`15min`, `1h 30min`, `900`) in seconds; `None` for one this does not
/// read (`install-timer` then leaves the wait out rather than guess).
pub fn seconds(span: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut rest = span.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at_checked(digits)?;
        let number: u64 = number.parse().ok()?;
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at_checked(unit_len)?;
        let per = match unit {
            "" | "s" | "sec" | "second" | "seconds" => 1,
            "m" | "min" | "minute" | "minutes" => 60,
            "h" | "hr" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            _ => return None,
        };
        total = total.checked_add(number.checked_mul(per)?)?;
        rest = after.trim_start();
    }
    Some(total)
}

/// What the service runs.
pub enum Job {
    /// `bell-run apply /var/lib/bell/current`: a bundle that something else put in place.
    ApplyCurrent,
    /// `bell-run pull` with these options (flag, value), in this order.
    Pull(Vec<(&'static str, String)>),
}

pub fn install(root: &Root, exe: &str, interval: &str, job: &Job) -> Result<Vec<String>, String> {
    if !exe.starts_with('/')
        || exe
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '%' || c == '\\' || c == '$')
    {
        return Err(format!(
            "`--exec {exe}` must be an absolute path without spaces, `%`, `$` or `\\`"
        ));
    }
    if interval.is_empty()
        || !interval
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ' ')
    {
        return Err(format!(
            "`--interval {interval}` is not a systemd time span such as `15min`"
        ));
    }
    let service = match job {
        Job::ApplyCurrent => SERVICE.replace("/usr/sbin/bell-run", exe),
        Job::Pull(options) => {
            let mut exec_start = format!("ExecStart={exe} pull");
            for (flag, value) in options {
                let _ = write!(exec_start, " {flag} {}", unit_argument(value));
            }
            let option = |flag: &str, default: u64| {
                options
                    .iter()
                    .find(|(f, _)| *f == flag)
                    .and_then(|(_, v)| v.parse::<u64>().ok())
                    .unwrap_or(default)
            };
            let limit = pull_limit(
                option(
                    "--fetch-timeout",
                    crate::fetch::DEFAULT_FETCH_TIMEOUT.as_secs(),
                ),
                option("--timeout", crate::apply::DEFAULT_SCRIPT_TIMEOUT),
            );
            // A run that waits at the gateway pulls again within its wait: the wait, and one
            // more pull begun at its end.
            let limit = match option("--wait", 0) {
                0 => limit,
                wait => wait + 2 * limit,
            };
            let _ = write!(exec_start, "\nTimeoutStartSec={limit}");
            with_exec_start(PULL_SERVICE, &exec_start)
        }
    };
    let timer = TIMER.replace(
        "OnUnitActiveSec=15min",
        &format!("OnUnitActiveSec={interval}"),
    );
    let mut written = Vec::new();
    // What the pulling timer was told, for commands run by hand on the host (`pending`), so
    // that they ask the same store about the same fleet and host.
    let record = root.bell_dir().join(PULL_RECORD);
    match job {
        Job::Pull(options) => {
            let map: std::collections::BTreeMap<&str, &str> = options
                .iter()
                .map(|(flag, value)| (*flag, value.as_str()))
                .collect();
            let text = serde_json::to_string_pretty(&map).unwrap_or_default();
            write_atomic(&record, text.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", record.display()))?;
        }
        Job::ApplyCurrent => {
            let _ = std::fs::remove_file(&record);
        }
    }
    let register = register_service(exe, job);
    let live = live_service(exe, job);
    let units = [
        ("bell-run.service", Some(service)),
        ("bell-run.timer", Some(timer)),
        ("bell-run-register.service", register),
        ("bell-run-live.service", live),
    ];
    for (name, text) in units {
        let path = format!("{UNIT_DIR}/{name}");
        root.check_contained(&path)?;
        match text {
            Some(text) => {
                write_atomic(&root.host(&path), text.as_bytes())
                    .map_err(|e| format!("cannot write `{path}`: {e}"))?;
                written.push(path);
            }
            // One from an earlier install would run with options the pull no longer has.
            None => match std::fs::remove_file(root.host(&path)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("cannot remove `{path}`: {e}"))
                }
                _ => {}
            },
        }
    }
    Ok(written)
}

/// The unit that registers the machine at boot (`bell-run register`), when the pull reports to
/// an etcd store of a named fleet: a new machine announces itself on its first boot, and a
/// changed one again on the boot after the change.
fn register_service(exe: &str, job: &Job) -> Option<String> {
    let Job::Pull(options) = job else {
        return None;
    };
    let value = |flag: &str| options.iter().find(|(f, _)| *f == flag).map(|(_, v)| v);
    match (value("--store"), value("--gateway")) {
        (Some(store), _) if store.starts_with("etcd://") || store.starts_with("etcds://") => {}
        (_, Some(_)) => {}
        _ => return None,
    }
    value("--fleet")?;
    let mut exec_start = format!("ExecStart={exe} register");
    for (flag, value) in options {
        if REGISTER_OPTIONS.contains(flag) {
            let _ = write!(exec_start, " {flag} {}", unit_argument(value));
        }
    }
    Some(with_exec_start(REGISTER_SERVICE, &exec_start))
}

/// The unit of `bell-run live` (live files and a provider's health between pulls), when the
/// pull has an etcd store or a gateway to follow: written, not enabled.
fn live_service(exe: &str, job: &Job) -> Option<String> {
    let Job::Pull(options) = job else {
        return None;
    };
    let value = |flag: &str| options.iter().find(|(f, _)| *f == flag).map(|(_, v)| v);
    match (value("--store"), value("--gateway")) {
        (Some(store), _) if store.starts_with("etcd://") || store.starts_with("etcds://") => {}
        (_, Some(_)) => {}
        _ => return None,
    }
    let mut exec_start = format!("ExecStart={exe} live");
    for (flag, value) in options {
        if REGISTER_OPTIONS.contains(flag) && *flag != "--fleet" {
            let _ = write!(exec_start, " {flag} {}", unit_argument(value));
        }
    }
    Some(with_exec_start(LIVE_SERVICE, &exec_start))
}

/// A shipped unit with its `ExecStart=` line replaced by `exec_start` (one line or several).
/// What the packaged unit reads its options from (`EnvironmentFile=`) and its fixed bound go:
/// the options are on the line, and `exec_start` brings the bound they call for.
fn with_exec_start(unit: &str, exec_start: &str) -> String {
    unit.lines()
        .filter(|line| {
            !line.starts_with("EnvironmentFile=") && !line.starts_with("TimeoutStartSec=")
        })
        .map(|line| {
            if line.starts_with("ExecStart=") {
                exec_start
            } else {
                line
            }
        })
        .fold(String::new(), |text, line| text + line + "\n")
}

/// Stops the timer on a live host for as long as `remove` reverts (a tick would pull the
/// release back); whether it was stopped, so that [`resume`] starts it again when the removal
/// does not go through.
pub fn pause(root: &Root, live: bool) -> bool {
    live && has_timer(root) && systemctl(&["stop", "bell-run.timer"])
}

/// Whether the root has bell-run's timer: one install-timer wrote, or the Debian package's.
fn has_timer(root: &Root) -> bool {
    [UNIT_DIR, PACKAGE_UNIT_DIR]
        .iter()
        .any(|dir| root.host(&format!("{dir}/bell-run.timer")).exists())
}

pub fn resume() {
    systemctl(&["start", "bell-run.timer"]);
}

/// Best-effort: whether `systemctl ARGS` ran and succeeded.
fn systemctl(args: &[&str]) -> bool {
    std::process::Command::new("systemctl")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Takes away what [`install`] wrote, and the link `systemctl enable` made: the timer would
/// otherwise bring bell back on its next tick. On a live host the timer is stopped and disabled
/// first and systemd reloaded after. The unit paths removed, as host paths.
pub fn uninstall(root: &Root, live: bool) -> Result<Vec<String>, String> {
    let timer = format!("{UNIT_DIR}/bell-run.timer");
    if live && has_timer(root) {
        // Best-effort: a timer never enabled is not loaded, which is fine.
        systemctl(&["disable", "--now", "bell-run.timer"]);
        systemctl(&["disable", "bell-run.service"]);
        systemctl(&["disable", "bell-run-register.service"]);
        systemctl(&["disable", "--now", "bell-run-live.service"]);
    }
    let mut removed = Vec::new();
    for path in [
        format!("{UNIT_DIR}/timers.target.wants/bell-run.timer"),
        format!("{UNIT_DIR}/multi-user.target.wants/bell-run.service"),
        format!("{UNIT_DIR}/multi-user.target.wants/bell-run-register.service"),
        format!("{UNIT_DIR}/multi-user.target.wants/bell-run-live.service"),
        timer,
        format!("{UNIT_DIR}/bell-run.service"),
        format!("{UNIT_DIR}/bell-run-register.service"),
        format!("{UNIT_DIR}/bell-run-live.service"),
    ] {
        root.check_contained(&path)?;
        let at = root.host(&path);
        if std::fs::symlink_metadata(&at).is_ok() {
            std::fs::remove_file(&at).map_err(|e| format!("cannot remove `{path}`: {e}"))?;
            removed.push(path);
        }
    }
    let _ = std::fs::remove_file(root.bell_dir().join(PULL_RECORD));
    if live && !removed.is_empty() {
        systemctl(&["daemon-reload"]);
    }
    Ok(removed)
}

/// One argument of an `ExecStart=` line that systemd hands to the program exactly as `value`:
/// double-quoted (spaces, `;` and quotes stay inside it), `\` and `"` escaped, `%` and `$`
/// doubled so that systemd expands no specifier or variable, and control characters written
/// as `\xHH` so that none can end the line.
pub fn unit_argument(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{
        configured, pull_assignment, pull_limit, seconds, unit_argument, PACKAGE_DEFAULTS,
        PULL_SERVICE,
    };

    #[test]
    fn the_packaged_units_bound_is_the_one_install_timer_writes_for_the_defaults() {
        let written = pull_limit(
            crate::fetch::DEFAULT_FETCH_TIMEOUT.as_secs(),
            crate::apply::DEFAULT_SCRIPT_TIMEOUT,
        );
        assert!(
            PULL_SERVICE.contains(&format!("\nTimeoutStartSec={written}\n")),
            "{PULL_SERVICE}"
        );
    }
    use crate::rootfs::Root;

    #[test]
    fn the_packages_pull_options_are_read_as_systemd_reads_them() {
        // The last assignment counts; one pair of quotes comes off; comments are not values.
        let text = "# BELL_RUN_PULL=\"--fleet commented\"\nBELL_RUN_PULL=\"\"\n  BELL_RUN_PULL='--fleet lab'\n";
        assert_eq!(pull_assignment(text), Some("--fleet lab"));
        assert_eq!(pull_assignment("BELL_RUN_LIVE=--store x\n"), None);

        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(configured(&root, "--fleet"), None, "no file, no options");
        let defaults = root.host(PACKAGE_DEFAULTS);
        std::fs::create_dir_all(defaults.parent().unwrap()).unwrap();
        std::fs::write(
            &defaults,
            "BELL_RUN_PULL=\"--source https://m/ --offline --store etcd://e:2379 --fleet lab --host\"\n",
        )
        .unwrap();
        assert_eq!(
            configured(&root, "--store").as_deref(),
            Some("etcd://e:2379")
        );
        assert_eq!(configured(&root, "--fleet").as_deref(), Some("lab"));
        // A flag whose value is missing, and a switch, give nothing.
        assert_eq!(configured(&root, "--host"), None);
        assert_eq!(configured(&root, "--offline"), None);

        // install-timer's record speaks first: its unit is the one systemd runs.
        std::fs::create_dir_all(root.bell_dir()).unwrap();
        std::fs::write(
            root.bell_dir().join(super::PULL_RECORD),
            r#"{"--fleet":"recorded"}"#,
        )
        .unwrap();
        assert_eq!(configured(&root, "--fleet").as_deref(), Some("recorded"));
        assert_eq!(configured(&root, "--store"), None);
    }

    #[test]
    fn the_packages_defaults_are_not_read_through_a_link_out_of_the_root() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(
            outside.path().join("bell-run"),
            "BELL_RUN_PULL=\"--fleet outside\"\n",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("etc/default")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(configured(&root, "--fleet"), None);
        std::fs::remove_file(dir.path().join("etc/default")).unwrap();
        std::fs::create_dir(dir.path().join("etc/default")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("bell-run"),
            dir.path().join("etc/default/bell-run"),
        )
        .unwrap();
        assert_eq!(configured(&root, "--fleet"), None);
    }

    #[test]
    fn time_spans_are_read_as_systemd_reads_them_or_not_at_all() {
        assert_eq!(seconds("15min"), Some(900));
        assert_eq!(seconds("1h 30min"), Some(5400));
        assert_eq!(seconds("1h30m"), Some(5400));
        assert_eq!(seconds("900"), Some(900));
        assert_eq!(seconds("2 d"), Some(172_800));
        for unread in ["", "15 fortnights", "min", "1.5h", "99999999999999999999w"] {
            assert_eq!(seconds(unread), None, "{unread}");
        }
    }

    #[test]
    fn unit_arguments_expand_nothing_and_stay_on_their_line() {
        assert_eq!(unit_argument("/srv/bell"), "\"/srv/bell\"");
        assert_eq!(
            unit_argument("a b\"c\\d%i$HOME\n"),
            "\"a b\\\"c\\\\d%%i$$HOME\\x0a\""
        );
    }
}

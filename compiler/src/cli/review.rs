//! The binary's side of `bellc diff`, `build --diff`, `publish` and `status`: reading the
//! stores, passing the clock in, printing and exit codes. The logic is in `bellc_core::review::diff` and
//! `bell_ops::fleet::status`.

use crate::args::LockCommand;
use crate::args::StatusArgs;
use crate::Failure;
use bell_ops::fleet::rollout::{self, Phase};
use bell_ops::fleet::status::{self, FleetStatus, HostState};
use bell_ops::fleet::witness::Witness;
use bell_store::Store;
use bellc_core::diagnostic::Diagnostics;
use bellc_core::review::diff::{self, ReleaseDiff, Side};
use bellc_core::review::value_diff::{self, ValueDiff};
use bellc_core::source::Sources;
use std::path::Path;

/// How many host names a group prints before "and N more" (all of them are in `--json`).
const HOSTS_SHOWN: usize = 10;

/// Exit 0 without changes, 1 with.
pub fn diff_sides(old: &dyn Side, new: &dyn Side, json: bool) -> Result<u8, String> {
    show_diff(&diff::diff(old, new)?, json)
}

pub fn show_diff(d: &ReleaseDiff, json: bool) -> Result<u8, String> {
    if json {
        let text = serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        print_diff(d);
    }
    Ok(u8::from(!d.is_empty()))
}

pub fn diff_dirs(old: &Path, new: &Path, json: bool) -> Result<u8, String> {
    let old = diff::DirSide::open(old)?;
    let new = diff::DirSide::open(new)?;
    diff_sides(&old, &new, json)
}

/// What `build --diff` found: the file-level diff, or with `--values` the value diff.
pub enum Changes {
    Files(ReleaseDiff),
    Values(ValueDiff),
}

impl Changes {
    pub fn show(&self, json: bool) -> Result<u8, String> {
        match self {
            Changes::Files(d) => show_diff(d, json),
            Changes::Values(d) => show_values(d, json),
        }
    }
}

/// `bellc diff --values`: exit 0 when nothing changed, 1 when something did, as the file diff.
pub fn show_values(d: &ValueDiff, json: bool) -> Result<u8, String> {
    if json {
        let text = serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        print!("{}", value_diff::to_text(d));
    }
    Ok(u8::from(!d.is_empty()))
}

fn hosts_line(hosts: &[String]) -> String {
    let mut line = hosts
        .iter()
        .take(HOSTS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if hosts.len() > HOSTS_SHOWN {
        line.push_str(&format!(" and {} more", hosts.len() - HOSTS_SHOWN));
    }
    line
}

fn print_diff(d: &ReleaseDiff) {
    let total = d.changes.len();
    for (i, c) in d.changes.iter().enumerate() {
        outln!(
            "bundle change {}/{total}: {} host(s), {} → {}",
            i + 1,
            c.hosts.len(),
            bell_bundle::short_id(&c.old),
            bell_bundle::short_id(&c.new)
        );
        outln!("  hosts: {}", hosts_line(&c.hosts));
        for m in &c.manifest {
            outln!("  ~ manifest: {m}");
        }
        for r in &c.resources {
            let details = if r.details.is_empty() {
                String::new()
            } else {
                format!(": {}", r.details.join("; "))
            };
            outln!("  {} resource {}{details}", r.change.symbol(), r.key);
        }
        for (what, list) in [("file", &c.files), ("script", &c.scripts)] {
            for f in list {
                let details = if f.details.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.details.join("; "))
                };
                outln!("  {} {what} {}{details}", f.change.symbol(), f.path);
                if let Some(text) = &f.diff {
                    for line in text.lines() {
                        outln!("      {line}");
                    }
                }
            }
        }
    }
    if !d.added.is_empty() {
        let hosts: Vec<String> = d.added.keys().cloned().collect();
        outln!("added hosts: {}", hosts_line(&hosts));
    }
    if !d.removed.is_empty() {
        let hosts: Vec<String> = d.removed.keys().cloned().collect();
        outln!("removed hosts: {}", hosts_line(&hosts));
    }
    outln!("{}", d.summary());
}

pub fn publish(out: &Path, dest: &str, access: &bell_store::Access) -> Result<u8, String> {
    let side = diff::DirSide::open(out)?;
    let release = side.release();
    let store = Store::open(dest, access)?;
    if let Store::Etcd(etcd) = &store {
        // A rollout's controller owns the desired map until it is done or aborted.
        let progress = rollout::load_progress(etcd, &release.fleet).map_err(|e| e.to_string())?;
        if let Some(p) = progress.filter(|p| !matches!(p.phase, Phase::Done | Phase::Aborted)) {
            let key = bell_ops::fleet::out_is_signed(out, Some(&release.fleet))
                .then_some(Path::new("KEY"));
            return Err(format!(
                "the rollout of release {} stands {} in fleet {}: publishing would change the \
                 hosts' bundles under it\n  help: finish it with `{}`, or take it back with \
                 `{}`",
                bell_bundle::short_id(&p.target),
                p.phase.as_str(),
                release.fleet,
                crate::rollout::command(out, dest, access, key, "--resume"),
                crate::rollout::command(out, dest, access, key, "--abort"),
            ));
        }
    }
    store.publish(release)?;
    let hosts = release.hosts.len();
    outln!(
        "published release {} of fleet {} to {} ({hosts} hosts)",
        release.version,
        release.fleet,
        store.describe()
    );
    Ok(0)
}

/// `bellc releases OUT`: every kept release, oldest first.
pub fn releases(out: &Path, json: bool) -> Result<u8, String> {
    let kept = bellc_core::emit::releases::list(out).map_err(|e| e.to_string())?;
    if json {
        let rows: Vec<serde_json::Value> = kept
            .iter()
            .map(|r| {
                serde_json::json!({
                    "version": r.version,
                    "sequence": r.sequence,
                    "expires": r.expires,
                    "signed": r.signed,
                    "current": r.current,
                    "hosts": r.hosts,
                    "bundles": r.bundles.len(),
                })
            })
            .collect();
        outjson!(serde_json::Value::Array(rows).to_string());
        return Ok(0);
    }
    if kept.is_empty() {
        outln!("{} keeps no release (build into it first)", out.display());
        return Ok(0);
    }
    for r in &kept {
        let sequence = r.sequence.map_or("-".to_string(), |n| n.to_string());
        let expires = r.expires.map_or("never expires".to_string(), |at| {
            format!("expires {}", bell_bundle::utc(at))
        });
        outln!(
            "{}{}  sequence {sequence}  {}  {expires}  {} hosts, {} bundles",
            if r.current { "* " } else { "  " },
            &r.version[..16],
            if r.signed { "signed" } else { "unsigned" },
            r.hosts,
            r.bundles.len()
        );
    }
    outln!("(* release.json: the newest)");
    Ok(0)
}

/// `bellc prune OUT --keep N`.
pub fn prune(out: &Path, keep: usize) -> Result<u8, String> {
    let pruned = bellc_core::emit::releases::prune(out, keep).map_err(|e| e.to_string())?;
    outln!(
        "removed {} release(s) and {} bundle(s) from {}",
        pruned.releases.len(),
        pruned.bundles,
        out.display()
    );
    for version in &pruned.releases {
        outln!("  - {version}");
    }
    Ok(0)
}

pub struct StatusRequest<'a> {
    pub out: Option<&'a Path>,
    /// `--trust`: OUT's release only when one of these keys signed it.
    pub trust: Option<&'a Path>,
    /// `--source`: without OUT, where the release the store names is read from.
    pub mirror: Option<&'a str>,
    pub fleet: Option<&'a str>,
    pub source: &'a str,
    pub access: &'a bell_store::Access,
    pub stale_minutes: Option<u64>,
    pub json: bool,
    pub all: bool,
    pub fail_on: &'a [String],
    /// `--fail-on` was not given: `unverified` is added when nothing verified the reports.
    pub fail_on_default: bool,
    pub hosts: Option<&'a str>,
    pub version: Option<&'a str>,
}

/// `--fail-on`'s default; `unverified` joins it when no verified release is at hand and the
/// fleet's hosts sign their reports.
pub const DEFAULT_FAIL_ON: &str = "forged,failed,reverted,unhealthy,unaccounted,unreadable";

/// `bellc status` exits with this when a host is in a `--fail-on` state (or a gate fails): a
/// code of its own, apart from spec errors (1) and unusable inputs (2).
pub const FLEET_NEEDS_ATTENTION: u8 = 3;

/// The release to compare with: OUT's, or the one the store holds (with `--fleet`). An OUT
/// whose release is not the store's current one is compared all the same, with a warning
/// naming both.
/// With it, why nothing verified it (`None`: a directory OUT, the operator's own build, or a
/// release `--trust` verified).
/// And, when OUT's release is not the store's current one, the store's.
type Compared = (
    bell_bundle::Release,
    Option<String>,
    Option<bell_store::Published>,
);

fn release_of(args: &StatusRequest, store: &Store) -> Result<Compared, String> {
    let Some(out) = args.out else {
        let fleet = args.fleet.ok_or(
            "without OUT, give `--fleet NAME`: the store holds the releases of fleets by name",
        )?;
        if let Some(mirror) = args.mirror {
            let (release, why) = release_at_mirror(args, store, fleet, mirror)?;
            return Ok((release, why, None));
        }
        if args.trust.is_some() {
            return Err(
                "`--trust` checks a release: give OUT, or `--source URL` (the mirror \
                        that serves the release the store names)"
                    .into(),
            );
        }
        let bell_store::Published { version, hosts } =
            store.published(fleet)?.ok_or_else(|| {
                format!(
                "{} holds no published release of fleet `{fleet}`; give OUT, or `bellc publish` it",
                store.describe()
            )
            })?;
        let hosts = hosts
            .into_iter()
            .map(|(host, bundle)| {
                let entry = bell_bundle::ReleaseHost {
                    bundle,
                    address: None,
                    labels: Default::default(),
                    identity: None,
                    secrets: None,
                    ..Default::default()
                };
                (host, entry)
            })
            .collect();
        let why = format!(
            "no release was verified: the store names release {}, and the identities its \
             hosts' reports are checked against are in its release.json (give \
             `--source URL --trust KEY`, or OUT)",
            bell_bundle::short_id(&version)
        );
        let release = bell_bundle::Release {
            format: bell_bundle::FORMAT,
            fleet: fleet.to_string(),
            version,
            hosts,
            waves: Vec::new(),
            sequence: None,
            expires: None,
            rollout: None,
            identities_required: false,
            assignments: Vec::new(),
        };
        return Ok((release, Some(why), None));
    };
    let release = read_release_trusted(out, args.trust)?;
    let why = match (out.to_str().filter(|o| o.contains("://")), args.trust) {
        (Some(url), None) => Some(bell_ops::fleet::trusted::read_unverified(url)),
        _ => None,
    };
    let current = store
        .published(&release.fleet)?
        .filter(|p| p.version != release.version);
    Ok((release, why, current))
}

/// What is said when OUT's release is not the store's current one: a note when the store's
/// is OUT's but for hosts an operator holds (what a rollout past held hosts publishes), a
/// warning otherwise.
fn say_compared(
    out: &Path,
    release: &bell_bundle::Release,
    current: &bell_store::Published,
    holds: &std::collections::BTreeMap<String, bell_store::hold::Hold>,
) {
    let (ours, theirs) = (
        bell_bundle::short_id(&release.version),
        bell_bundle::short_id(&current.version),
    );
    match status::published_but_for_held(release, current, holds) {
        Some(held) => errln!(
            "{} holds release {ours}; the store names release {theirs}, the same but for the \
             held host(s) {} (each kept on its bundle until `bellc unhold` and a rollout)",
            out.display(),
            held.join(", ")
        ),
        None => errln!(
            "warning: {} holds release {ours}, but the store's current release of fleet `{}` is \
             {theirs}: hosts are compared with {0}'s (leave OUT out to compare with the store's)",
            out.display(),
            release.fleet,
        ),
    }
}

/// Without OUT, with `--source`: the release the store names, read from the mirror, verified
/// with `--trust` when it is given; a mirror that serves another release is refused.
fn release_at_mirror(
    args: &StatusRequest,
    store: &Store,
    fleet: &str,
    mirror: &str,
) -> Result<(bell_bundle::Release, Option<String>), String> {
    let published = store.published(fleet)?.ok_or_else(|| {
        format!(
            "{} holds no published release of fleet `{fleet}`; `bellc publish` it",
            store.describe()
        )
    })?;
    let mut release = read_release_trusted(Path::new(mirror), args.trust)?;
    // A rollout's wave, or its last past held hosts, is served beside the build's own as
    // `releases/VERSION.json`, signed as it is. The version is the store's word: only a name
    // of hex digits makes a path, and what is read must be that release.
    let wave = |version: &str| -> Result<Option<bell_bundle::Release>, String> {
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let file = format!("{}/{version}.json", bell_bundle::RELEASES_DIR);
        let out = bell_ops::serve::Out::parse(mirror)?;
        let Some(bytes) = out.read(&file)? else {
            return Ok(None);
        };
        match args.trust {
            Some(trust) => {
                let keys = bell_ops::fleet::trusted::load(trust)?;
                let read = |rel: &str| match rel == file {
                    true => Ok(Some(bytes.clone())),
                    false => out.read(rel),
                };
                bell_ops::fleet::trusted::verified_release_file(read, &out.describe(), &keys, &file)
                    .map(Some)
            }
            None => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}/{file} is not a release: {e}", out.describe())),
        }
    };
    if release.version != published.version {
        if let Some(served) = wave(&published.version)? {
            release = served;
        }
    }
    if release.version != published.version || release.fleet != fleet {
        return Err(format!(
            "{mirror} serves release {} of fleet `{}` (and not the store's among its \
             releases/), but the store names release {} of fleet `{fleet}`: refused (publish \
             the release the mirror serves, or fill the mirror)",
            bell_bundle::short_id(&release.version),
            release.fleet,
            bell_bundle::short_id(&published.version)
        ));
    }
    let why = args
        .trust
        .is_none()
        .then(|| bell_ops::fleet::trusted::read_unverified(mirror));
    Ok((release, why))
}

/// OUT's release, verified with the keys of `trust` when it is given (refused, naming OUT,
/// when none of them signed it).
fn read_release_trusted(out: &Path, trust: Option<&Path>) -> Result<bell_bundle::Release, String> {
    let Some(trust) = trust else {
        return read_release(out);
    };
    let keys = bell_ops::fleet::trusted::load(trust)?;
    // A directory or a URL alike: read through `Out`, as `serve` reads it.
    let out = match out.to_str() {
        Some(text) => bell_ops::serve::Out::parse(text)?,
        None => bell_ops::serve::Out::Dir(out.to_path_buf()),
    };
    bell_ops::fleet::trusted::verified_release(|rel| out.read(rel), &out.describe(), &keys)
}

/// OUT's release; OUT may be the http:// URL that serves it to hosts, as for `bellc serve`.
fn read_release(out: &Path) -> Result<bell_bundle::Release, String> {
    Ok(match out.to_str().filter(|o| o.contains("://")) {
        Some(url) => bell_ops::serve::Out::parse(url)?.release()?,
        None => diff::DirSide::open(out)?.release().clone(),
    })
}

/// Exit 3 when a host is in a `--fail-on` state (or, as a gate, when the named hosts are not
/// up to date on the version).
pub fn status(args: &StatusRequest) -> Result<u8, String> {
    let store = Store::open(args.source, args.access)?;
    let (release, unverified, current) = release_of(args, &store)?;
    let identities = bell_store::identities_of(&release);
    let mut views = store.load_fleet(&release.fleet, &identities)?;
    // Whether the fleet's hosts sign their reports: then a report nothing verified is a
    // problem by default, as one anyone with the store could have put.
    let mut signing = release.hosts.values().any(|h| h.identity.is_some())
        || views
            .values()
            .flat_map(|v| v.by_command.values())
            .any(|r| r.signer.is_some());
    let mut witness = Witness::open(&release.fleet)?;
    witness.judge(&release, &mut views);
    // Hosts this reader saw sign before: a store stripped of every signature does not make
    // the fleet one without identities.
    signing |= witness.has_seen_signatures();
    if let Err(e) = witness.save() {
        errln!("warning: {e}");
    }
    let mut fleet = status::fleet_status(
        &release,
        &views,
        super::operator::now(),
        args.stale_minutes.map(|m| m * 60),
    );
    let mut holds = Default::default();
    if let Store::Etcd(etcd) = &store {
        note_rollout(&mut fleet, etcd, &release);
        note_discovered(&mut fleet, etcd, &release);
        holds = bell_store::hold::list(etcd, &release.fleet).unwrap_or_else(|e| {
            errln!("warning: the holds cannot be read: {e}");
            Default::default()
        });
        fleet.note_holds(&holds);
    }
    if let (Some(current), Some(out)) = (&current, args.out) {
        say_compared(out, &release, current, &holds);
    }
    // Last: what the rollout and the holds make of a row stands, and an up-to-date row that
    // nothing verified is `unverified`.
    if let Some(why) = &unverified {
        fleet.mark_unverified(why);
    }
    if let Some(hosts) = args.hosts {
        let Some(version) = args.version else {
            return Err("`--hosts` needs `--version V`: the version the hosts must be on".into());
        };
        let names: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let gate = status::gate(&fleet, &names, version);
        if args.json {
            let text = serde_json::to_string_pretty(&gate).map_err(|e| e.to_string())?;
            outjson!(text);
        } else if gate.passed {
            outln!("all {} host(s) are up to date on {version}", names.len());
        } else {
            for entry in &gate.not_ready {
                outln!("{}: {}", entry.host, entry.reason);
            }
            outln!(
                "{} of {} host(s) are not up to date on {version}",
                gate.not_ready.len(),
                names.len()
            );
        }
        return Ok(if gate.passed {
            0
        } else {
            FLEET_NEEDS_ATTENTION
        });
    }
    if args.version.is_some() {
        return Err("`--version` goes with `--hosts A,B`".into());
    }
    if args.json {
        let text = serde_json::to_string_pretty(&fleet).map_err(|e| e.to_string())?;
        outjson!(text);
    } else {
        print_status(&fleet, args.all);
        if fleet.rollout.as_ref().is_some_and(|r| r.phase == "halted") {
            let out = args.out.map(|o| o.display().to_string());
            outln!("{}", rollout::next_after_halt(args.source, out.as_deref()));
        }
    }
    let mut fail_on = args.fail_on.to_vec();
    if args.fail_on_default && unverified.is_some() && signing {
        fail_on.push("unverified".to_string());
    }
    let failing = fleet.hosts_in(&fail_on).count();
    Ok(if failing > 0 {
        FLEET_NEEDS_ATTENTION
    } else {
        0
    })
}

/// An unfinished rollout shows in the header and the JSON (see [`rollout::note_progress`]). A
/// progress key that cannot be read is passed over: the rows stand without it.
/// Registrations never accepted, as `discovered` rows; a store that cannot list them says so
/// and the status goes on without them.
fn note_discovered(
    fleet: &mut FleetStatus,
    etcd: &bell_store::Etcd,
    release: &bell_bundle::Release,
) {
    match bell_store::discovery::read(etcd, &release.fleet) {
        Ok((filed, rejected)) => fleet.note_discovered(&bell_ops::fleet::enroll::pending(
            release, &filed, &rejected,
        )),
        Err(e) => errln!("warning: the registrations cannot be read: {e}"),
    }
}

fn note_rollout(fleet: &mut FleetStatus, etcd: &bell_store::Etcd, release: &bell_bundle::Release) {
    if let Ok(Some(p)) = rollout::load_progress(etcd, &release.fleet) {
        rollout::note_progress(fleet, &p);
    }
}

/// One row per host that is not up to date (every host with `--all`): state, its other
/// conditions, report age, release, applied and desired bundle, and why.
fn print_status(s: &FleetStatus, all: bool) {
    if let Some(line) = s.rollout_line() {
        outln!("{line}");
    }
    let rows: Vec<&status::HostStatus> = s
        .hosts
        .iter()
        .filter(|h| all || h.state != HostState::UpToDate)
        .collect();
    if !rows.is_empty() {
        let width = rows.iter().map(|h| h.host.len()).max().unwrap_or(0).max(4);
        let short = |id: &Option<String>| {
            id.as_deref().map_or("-".to_string(), |v| {
                bell_bundle::one_line(bell_bundle::short_id(v)).into_owned()
            })
        };
        let table: Vec<[String; 8]> = rows
            .iter()
            .map(|h| {
                let others: Vec<&str> = h
                    .flags
                    .iter()
                    // Told once under the table, for the whole fleet.
                    .filter(|f| **f != status::Flag::Unverified)
                    .map(|f| f.as_str())
                    .filter(|f| *f != h.state.as_str())
                    .collect();
                // Escaped cell by cell, so that the columns line up as printed.
                [
                    bell_bundle::one_line(&h.host).into_owned(),
                    h.state.as_str().to_string(),
                    if others.is_empty() {
                        "-".to_string()
                    } else {
                        others.join(",")
                    },
                    h.age_seconds.map_or("-".to_string(), status::age_short),
                    short(&h.version),
                    short(&h.reported),
                    short(&h.desired),
                    bell_bundle::one_line(&detail_of(h)).into_owned(),
                ]
            })
            .collect();
        let header = [
            "HOST", "STATE", "FLAGS", "AGE", "RELEASE", "APPLIED", "DESIRED", "DETAIL",
        ];
        let mut widths = header.map(str::len);
        widths[0] = width;
        for row in &table {
            for (w, cell) in widths.iter_mut().zip(row.iter()).take(7) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |cells: [&str; 8]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate().take(7) {
                text.push_str(&format!("{cell:w$}  ", w = widths[i]));
            }
            text.push_str(cells[7]);
            outln!("{}", text.trim_end());
        };
        line(header);
        for row in &table {
            line(std::array::from_fn(|i| row[i].as_str()));
        }
    }
    let versions: Vec<String> = s
        .versions
        .iter()
        .map(|(v, n)| format!("{} {n}", bell_bundle::short_id(v)))
        .collect();
    outln!("versions: {}", versions.join(", "));
    for (name, service) in &s.services {
        let out: Vec<&str> = service
            .providers
            .iter()
            .filter(|h| !service.ready.contains(h))
            .map(String::as_str)
            .collect();
        outln!(
            "service {}: {} of {} providers ready{}",
            bell_bundle::one_line(name),
            service.ready.len(),
            service.providers.len(),
            match out.is_empty() {
                true => String::new(),
                false => format!("; out: {}", bell_bundle::one_line(&out.join(", "))),
            }
        );
    }
    for (source, counts) in &s.snapshots {
        let counts: Vec<String> = counts.iter().map(|(id, n)| format!("{id} {n}")).collect();
        outln!("snapshots of apt-source {source}: {}", counts.join(", "));
    }
    let unverified: Vec<&str> = s
        .hosts
        .iter()
        .filter(|h| h.flags.contains(&status::Flag::Unverified))
        .map(|h| h.host.as_str())
        .collect();
    if !unverified.is_empty() {
        let named = if unverified.len() > 5 {
            format!("{}, …", unverified[..5].join(", "))
        } else {
            unverified.join(", ")
        };
        outln!(
            "unverified: {} host(s) ({named}): their reports cannot be checked (no identity in the \
             release, or not signed); `--json` says why for each",
            unverified.len()
        );
    }
    outln!("{}", s.summary());
}

/// Why the state, then what the other flags hold (a failed host's drift, a drifted host's
/// deferred work), so that a row hides nothing.
fn detail_of(h: &status::HostStatus) -> String {
    let mut parts: Vec<String> = h.detail.iter().cloned().collect();
    let others = [
        (HostState::Failed, "failed", &h.failures),
        (HostState::Unhealthy, "unhealthy", &h.unhealthy),
        (HostState::Drifted, "drifted", &h.drift),
        (HostState::Deferred, "deferred", &h.deferred),
    ];
    for (state, name, items) in others {
        // A reverted host's failures are its revert, which its detail tells.
        let told = state == HostState::Failed && h.state == HostState::Reverted;
        if h.state != state && !told && !items.is_empty() {
            parts.push(format!("{name}: {}", items.join(", ")));
        }
    }
    parts.extend(h.since_text());
    parts.join("; ")
}

/// `bellc lock status`: every group under `prefix`, with its holders and free slots.
pub fn lock_status(
    store: &str,
    access: &bell_store::Access,
    prefix: &str,
    fleet: Option<&str>,
    out: Option<&Path>,
    trust: Option<&Path>,
    json: bool,
) -> Result<u8, String> {
    if out.is_none() && trust.is_some() {
        return Err("`--trust` checks OUT's release: give OUT".into());
    }
    // The release first: one that is refused stops the command before the store is asked.
    let release = out
        .map(|out| read_release_trusted(out, trust))
        .transpose()?;
    let etcd = bell_store::Etcd::open(store, access)?;
    let mut groups = bell_store::semaphore::groups(&etcd, prefix)?;
    // The hosts an operator holds, beside the slots: both keep hosts where they are.
    let holds = match fleet.or(release.as_ref().map(|r| r.fleet.as_str())) {
        Some(fleet) => bell_store::hold::list(&etcd, fleet)?,
        None => Default::default(),
    };
    if let Some(release) = release {
        let identities = bell_store::identities_of(&release);
        let hosts = release
            .hosts
            .keys()
            .map(|host| (host.clone(), identities.get(host).cloned()))
            .collect();
        bell_store::semaphore::vouch(&mut groups, prefix, &hosts);
    }
    let now = super::operator::now();
    if json {
        let groups: Vec<serde_json::Value> = groups
            .iter()
            .map(|g| {
                let held_for = |since: Option<u64>| since.map(|s| now.saturating_sub(s));
                serde_json::json!({
                    "group": g.group,
                    "unreadable": g.unreadable,
                    "total_slots": g.total_slots,
                    "free": g.total_slots.saturating_sub(g.holders.len() as u64),
                    "holders": g.holders.iter().map(|h| serde_json::json!({
                        "host": h.host,
                        "since": h.since,
                        "held_seconds": held_for(h.since),
                        "standing": h.standing,
                        "why": h.why,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(
            &serde_json::json!({ "prefix": prefix, "groups": groups, "held": holds }),
        )
        .map_err(|e| e.to_string())?;
        outjson!(text);
        return Ok(0);
    }
    for (host, hold) in &holds {
        outln!("held: {host}, {}", hold.describe());
    }
    if groups.is_empty() {
        outln!("no rollout group under {prefix}/groups/ has a semaphore yet");
        return Ok(0);
    }
    for g in &groups {
        if let Some(why) = &g.unreadable {
            outln!("group {}: unreadable: {why}", g.group);
            continue;
        }
        let free = g.total_slots.saturating_sub(g.holders.len() as u64);
        outln!(
            "group {}: {} of {} slots held, {free} free",
            g.group,
            g.holders.len(),
            g.total_slots
        );
        for h in &g.holders {
            let standing = match (h.standing, &h.why) {
                (Some(s), Some(why)) => format!(" [{}: {why}]", s.as_str()),
                (Some(s), None) => format!(" [{}]", s.as_str()),
                (None, _) => String::new(),
            };
            match h.since {
                Some(since) => outln!(
                    "  {} for {} (since {}){standing}",
                    h.host,
                    super::operator::duration(now.saturating_sub(since)),
                    bell_bundle::utc(since)
                ),
                None => outln!(
                    "  {} (not taken by bell: since when is unknown){standing}",
                    h.host
                ),
            }
        }
    }
    Ok(0)
}

/// `bellc lock release HOST`: frees every slot HOST holds under `prefix`.
pub fn lock_release(
    store: &str,
    access: &bell_store::Access,
    prefix: &str,
    host: &str,
) -> Result<u8, String> {
    let etcd = bell_store::Etcd::open(store, access)?;
    let groups = bell_store::semaphore::groups(&etcd, prefix)?;
    let mut released = 0;
    for g in groups
        .iter()
        .filter(|g| g.holders.iter().any(|h| h.host == host))
    {
        if bell_store::semaphore::release(&etcd, prefix, &g.group, host)? {
            outln!("released the slot {host} held in group {}", g.group);
            released += 1;
        }
    }
    if released == 0 {
        let holders: Vec<&str> = groups
            .iter()
            .flat_map(|g| g.holders.iter().map(|h| h.host.as_str()))
            .collect();
        errln!(
            "error: {host} holds no slot under {prefix}/groups/ (holders: {})",
            if holders.is_empty() {
                "none".to_string()
            } else {
                holders.join(", ")
            }
        );
        return Ok(1);
    }
    Ok(0)
}

/// `bellc status`: the flags checked, then [`status`].
pub fn exec_status(args: &StatusArgs) -> Result<u8, Failure> {
    let StatusArgs {
        out,
        reports,
        store,
        tls,
        trust,
        source: mirror,
        fleet,
        stale,
        json,
        all,
        fail_on,
        hosts,
        version,
    } = args;
    let fail_on_default = fail_on.is_none();
    let fail_on: Vec<String> = fail_on
        .as_deref()
        .unwrap_or(DEFAULT_FAIL_ON)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    const NAMES: [&str; 14] = [
        "forged",
        "failed",
        "reverted",
        "unhealthy",
        "unaccounted",
        "unreadable",
        "stale",
        "drifted",
        "pending",
        "waiting",
        "deferred",
        "held",
        "unknown",
        "unverified",
    ];
    if let Some(bad) = fail_on.iter().find(|s| !NAMES.contains(&s.as_str())) {
        return Err(Failure::Usage(format!(
            "`--fail-on {bad}`: not a state or flag; use {}",
            NAMES.join(", ")
        )));
    }
    if out.is_none() && reports.is_some() {
        return Err(Failure::Usage(
            "a report directory holds no release: give OUT, the build output".into(),
        ));
    }
    let source = match (reports, store) {
        (Some(dir), _) => dir.display().to_string(),
        (None, Some(url)) => url.clone(),
        (None, None) => {
            return Err(Failure::Usage(
                "give `--reports DIR` or `--store etcd://…`".into(),
            ))
        }
    };
    Ok(status(&StatusRequest {
        out: out.as_deref(),
        trust: trust.as_deref(),
        mirror: mirror.as_deref(),
        fleet: fleet.as_deref(),
        source: &source,
        access: &tls.access(),
        stale_minutes: *stale,
        json: *json,
        all: *all,
        fail_on: &fail_on,
        fail_on_default,
        hosts: hosts.as_deref(),
        version: version.as_deref(),
    })?)
}

/// `bellc diff OLD NEW --values`: value by value; with `--spec`, where each new value was set.
pub fn diff_values(
    old: &Path,
    new: &Path,
    json: bool,
    spec: Option<&Path>,
    checks: bellc_core::Checks,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    let old = bellc_core::review::diff::DirSide::open(old)?;
    let new = bellc_core::review::diff::DirSide::open(new)?;
    // Where values were set needs the spec resolved, not its graph or its bundles.
    let resolved = match spec {
        Some(path) => {
            crate::read_check(path)?;
            // Where a value was set needs no secret: a reviewer without the key can ask.
            sources.review_without_secrets();
            match bellc_core::resolved(path, checks, sources, diags) {
                Some(resolved) => Some(resolved),
                None => return Ok(1),
            }
        }
        None => None,
    };
    let locator = resolved.as_ref().map(|(tree, resolution)| {
        bellc_core::review::value_diff::Locator::new(tree, resolution, sources)
    });
    let d = bellc_core::review::value_diff::diff(&old, &new, locator)?;
    Ok(show_values(&d, json)?)
}

/// `bellc lock status` and `bellc lock release`.
pub fn lock(command: &LockCommand) -> Result<u8, Failure> {
    match command {
        LockCommand::Status {
            out,
            trust,
            store,
            tls,
            scope,
            json,
        } => Ok(lock_status(
            store,
            &tls.access(),
            &scope.prefix(),
            scope.fleet.as_deref(),
            out.as_deref(),
            trust.as_deref(),
            *json,
        )?),
        LockCommand::Release {
            host,
            store,
            tls,
            scope,
        } => Ok(lock_release(store, &tls.access(), &scope.prefix(), host)?),
    }
}

//! Each host's view from the keys read out of a store: its reports by command, each checked
//! against the host's identity, its liveness, and the keys that are not what they claim.

use crate::keys::Key;
use crate::*;

/// Every host's view from keys read out of etcd: any range of the fleet's keys that holds its
/// `running/`, `reports/check/`, `alive/` and `status/` keys (one range of `/bell/FLEET/` does,
/// for a reader that wants the whole fleet in one request). Other keys are passed over.
pub fn views_from(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    identities: &Identities,
) -> Result<BTreeMap<String, HostView>, String> {
    views_from_parsed(fleet, kvs, &mut ParsedReports::default(), identities)
}

/// Reports parsed by an earlier reading, by key and the revision each was written at: a reader
/// that reads the fleet again and again (`bellc serve`) parses only the reports that changed
/// since (hosts write a report only when it says something new).
#[derive(Debug, Default)]
pub struct ParsedReports {
    pub(crate) by_key: std::collections::HashMap<String, Parsed>,
    /// Reports checked before, by a reader that kept their digests (see [`proof::Checked`]):
    /// one of them is not checked again.
    checked_before: Arc<std::collections::HashSet<proof::Checked>>,
}

/// One report as an earlier reading parsed and checked it.
#[derive(Debug)]
pub(crate) struct Parsed {
    revision: i64,
    report: Arc<Report>,
    /// Checked against this identity.
    identity: Option<proof::Identity>,
    proof: proof::Proof,
}

/// What one report key read as.
pub(crate) enum Reading {
    Report(Arc<Report>, proof::Proof),
    /// Not the host's (with an identity), or another host's or fleet's (without).
    Refused(String),
    /// Not a report at all.
    Unreadable(String),
}

/// Parses and checks every report not read before: on several threads when there are many
/// (checking a signature is most of a report's cost; a fleet's first reading checks them all),
/// [`BATCH`] at a time, their signatures together. A batch is parsed and checked on the thread
/// that took it, so that what it builds to be checked (each signed message is a copy of the
/// report) is freed before the next batch is parsed: memory the next batch takes again rather
/// than hundreds of MiB touched for the first time, which costs more than the parsing.
pub(crate) fn read_all(
    reports: &mut [(&etcd::KeyValue, &str, Option<Reading>)],
    fleet: &str,
    identities: &Identities,
    checked_before: &std::collections::HashSet<proof::Checked>,
) {
    let todo: Vec<(usize, &etcd::KeyValue, &str)> = reports
        .iter()
        .enumerate()
        .filter(|(_, r)| r.2.is_none())
        .map(|(at, r)| (at, r.0, r.1))
        .collect();
    let read = on_threads(in_parts(todo, BATCH), |batch| {
        read_batch(batch, fleet, identities, checked_before)
    });
    for (at, reading) in read.into_iter().flatten() {
        reports[at].2 = Some(reading);
    }
}

/// One batch of [`read_all`]: each report parsed and checked but for its signature, then the
/// signatures together; each one of a batch that fails alone.
fn read_batch(
    batch: Vec<(usize, &etcd::KeyValue, &str)>,
    fleet: &str,
    identities: &Identities,
    checked_before: &std::collections::HashSet<proof::Checked>,
) -> Vec<(usize, Reading)> {
    let mut done = Vec::with_capacity(batch.len());
    let mut unchecked = Vec::new();
    for (at, kv, host) in batch {
        match serde_json::from_slice::<Report>(&kv.value) {
            Ok(report) => {
                match checked_but_signature(&kv.value, report, host, fleet, identities.get(host)) {
                    Ok(reading) => done.push((at, reading)),
                    Err(left) => {
                        let checked = proof::checked(&left.1.identity, &kv.value);
                        if checked_before.contains(&checked) {
                            let sequence = left.1.sequence;
                            let proof = proof::Proof::Signed {
                                sequence,
                                checked: Some(checked),
                            };
                            done.push((at, reading(left.0, proof)));
                        } else {
                            unchecked.push((at, kv, checked, *left));
                        }
                    }
                }
            }
            Err(e) => done.push((at, Reading::Unreadable(e.to_string()))),
        }
    }
    let signed: Vec<(&[u8], &[u8], &proof::Identity)> = unchecked
        .iter()
        .map(|(_, _, _, (_, u))| (u.message.as_slice(), u.signature.as_slice(), &u.identity))
        .collect();
    let all_hold = bell_seal::identity::all_verify(&signed);
    drop(signed);
    for (at, kv, checked, (report, unchecked)) in unchecked {
        let proof = if all_hold {
            proof::Proof::Signed {
                sequence: unchecked.sequence,
                checked: Some(checked),
            }
        } else {
            unchecked.check_alone(&kv.value)
        };
        done.push((at, reading(report, proof)));
    }
    done
}

/// Reports parsed and checked together: past a few hundred signatures a larger batch saves
/// little (64: 29 µs a signature here, 256: 25 µs, 1,024: 22 µs), and a batch that fails is
/// checked again one by one.
const BATCH: usize = 256;

/// `f` of every item, in order, on every core when there are many.
fn on_threads<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if items.len() < 2 || threads == 1 {
        return items.into_iter().map(f).collect();
    }
    let per_thread = items.len().div_ceil(threads);
    let parts = in_parts(items, per_thread);
    let f = &f;
    std::thread::scope(|scope| {
        let running: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || part.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        running
            .into_iter()
            .flat_map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    })
}

/// `items` in order, `size` to a part (the last may hold fewer).
fn in_parts<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut parts = Vec::with_capacity(items.len().div_ceil(size.max(1)));
    let mut rest = items.into_iter().peekable();
    while rest.peek().is_some() {
        parts.push(rest.by_ref().take(size.max(1)).collect());
    }
    parts
}

/// A report read under `host`'s name, checked: the report and what proves it, or why it cannot
/// be the host's (with an identity to check against) or cannot be read as its (without).
pub(crate) fn checked(
    raw: &[u8],
    report: Report,
    host: &str,
    fleet: &str,
    identity: Option<&proof::Identity>,
) -> Result<(Report, proof::Proof), String> {
    match checked_but_signature(raw, report, host, fleet, identity) {
        Ok(Reading::Report(report, proof)) => Ok((Arc::unwrap_or_clone(report), proof)),
        Ok(Reading::Refused(why) | Reading::Unreadable(why)) => Err(why),
        Err(left) => match left.1.check_alone(raw) {
            proof::Proof::Forged(why) => Err(why),
            proof => Ok((left.0, proof)),
        },
    }
}

/// [`checked`], but for a signature left to check (`Err`): see
/// [`proof::check_but_signature`].
fn checked_but_signature(
    raw: &[u8],
    report: Report,
    host: &str,
    fleet: &str,
    identity: Option<&proof::Identity>,
) -> Result<Reading, Box<(Report, proof::Unchecked)>> {
    if identity.is_none() && (report.host != host || report.fleet != fleet) {
        return Ok(Reading::Refused(format!(
            "holds a report of host `{}` of fleet `{}`",
            report.host, report.fleet
        )));
    }
    if report.fleet != fleet {
        return Ok(Reading::Refused(format!(
            "a report of fleet `{}`",
            report.fleet.escape_debug()
        )));
    }
    match proof::check_but_signature(raw, &report, host, identity) {
        Ok(proof) => Ok(reading(report, proof)),
        Err(unchecked) => Err(Box::new((report, unchecked))),
    }
}

fn reading(report: Report, proof: proof::Proof) -> Reading {
    match proof {
        proof::Proof::Forged(why) => Reading::Refused(why),
        proof => Reading::Report(Arc::new(report), proof),
    }
}

/// [`views_from`], taking from `parsed` every report whose key and revision it holds, and
/// leaving in it the reports of this reading.
pub fn views_from_parsed(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    parsed: &mut ParsedReports,
    identities: &Identities,
) -> Result<BTreeMap<String, HostView>, String> {
    Ok(build_views(fleet, kvs, parsed, identities, true))
}

/// [`views_from_parsed`] for some hosts only: `kvs` holds every report, liveness and throttle
/// key those hosts have now. `parsed` keeps every other host's reports and takes these hosts'
/// of this reading (a report key deleted since is let go with [`ParsedReports::forget`]). A
/// reader that follows the store through a watch reads again only the hosts whose keys
/// changed.
pub fn some_views_from_parsed(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    parsed: &mut ParsedReports,
    identities: &Identities,
) -> BTreeMap<String, HostView> {
    build_views(fleet, kvs, parsed, identities, false)
}

impl ParsedReports {
    /// None yet, and each report whose [`proof::Checked`] digest is in `checked_before` taken
    /// as checked when it is read (a reader started again, with what it checked before).
    pub fn checked_before(
        checked_before: Arc<std::collections::HashSet<proof::Checked>>,
    ) -> ParsedReports {
        ParsedReports {
            by_key: Default::default(),
            checked_before,
        }
    }

    /// Lets go of what was parsed of the report at `key` (deleted).
    pub fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// How many reports it keeps.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Parses and checks the reports among `kvs` (some of a fleet's keys) ahead of the reading
    /// that takes them: a follower does this with each page of the range while etcd reads the
    /// next. A report is kept with the revision it was read at and the identity it was checked
    /// against, and taken by a reading only when both are still so; one that does not read as
    /// the host's report is left for the reading to tell.
    pub fn read_ahead(&mut self, fleet: &str, kvs: &[etcd::KeyValue], identities: &Identities) {
        let mut reports: Vec<(&etcd::KeyValue, &str, Option<Reading>)> = kvs
            .iter()
            .filter_map(|kv| match Key::parse(fleet, &kv.key) {
                Some(Key::Report { host, .. }) => Some((kv, host, None)),
                _ => None,
            })
            .collect();
        read_all(&mut reports, fleet, identities, &self.checked_before);
        for (kv, host, reading) in reports {
            if let Some(Reading::Report(report, proof)) = reading {
                self.by_key.insert(
                    kv.key.clone(),
                    Parsed {
                        revision: kv.mod_revision,
                        report,
                        identity: identities.get(host).cloned(),
                        proof,
                    },
                );
            }
        }
    }

    /// Takes in what `other` parsed (its report of a key, where both hold one).
    pub fn take_in(&mut self, other: ParsedReports) {
        self.by_key.extend(other.by_key);
    }
}

/// The views `kvs` make, taking from `parsed` each report it holds at the same revision and
/// against the same identity, and putting in it every report of this reading. With `all`,
/// `kvs` is the whole fleet and `parsed` keeps only this reading's reports.
fn build_views(
    fleet: &str,
    kvs: &[etcd::KeyValue],
    parsed: &mut ParsedReports,
    identities: &Identities,
    all: bool,
) -> BTreeMap<String, HostView> {
    // The hosts in a vector, put in a map at the end: a B-tree map filled in order leaves
    // its nodes half empty, one built from a sorted vector fills them.
    let mut hosts: Vec<(String, HostView)> = Vec::new();
    let mut at_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut living = std::collections::HashSet::new();
    // Reports first, an apply's before a check's: of two finished in the same second, the
    // check's is the newer (as `load_fleet` has always read them), whatever order `kvs` is in.
    // Each with what an earlier reading made of it, when its key was written at the same
    // revision and is checked against the same identity (0: not from etcd); `true` when so.
    let mut reports: Vec<(&etcd::KeyValue, &str, Option<Reading>)> = Vec::new();
    let mut known = Vec::new();
    let commands = crate::keys::REPORTED_COMMANDS.iter();
    for command in commands.chain(&crate::keys::SIDE_COMMANDS) {
        for kv in kvs {
            let host = match Key::parse(fleet, &kv.key) {
                Some(Key::Report { command: of, host }) if of == *command => host,
                _ => continue,
            };
            let identity = identities.get(host);
            let reading = parsed
                .by_key
                .get(&kv.key)
                .filter(|p| {
                    p.revision == kv.mod_revision
                        && p.revision != 0
                        && p.identity.as_ref() == identity
                })
                .map(|p| Reading::Report(Arc::clone(&p.report), p.proof.clone()));
            known.push(reading.is_some());
            reports.push((kv, host, reading));
        }
    }
    read_all(&mut reports, fleet, identities, &parsed.checked_before);
    let mut kept = 0;
    for ((kv, host, reading), known) in reports.into_iter().zip(known) {
        let identity = identities.get(host);
        let at = *at_of.entry(host).or_insert_with(|| {
            hosts.push((host.to_string(), HostView::default()));
            hosts.len() - 1
        });
        let view = &mut hosts[at].1;
        let (report, proof) = match reading {
            Some(Reading::Report(report, proof)) => (report, proof),
            Some(Reading::Refused(why)) => {
                parsed.by_key.remove(&kv.key);
                let why = format!("`{}`: {why}", kv.key);
                match identity {
                    Some(_) => view.forged.push(why),
                    None => view.unreadable = Some(why),
                }
                continue;
            }
            Some(Reading::Unreadable(why)) => {
                parsed.by_key.remove(&kv.key);
                view.unreadable = Some(format!("`{}` is not a report: {why}", kv.key));
                continue;
            }
            // `read_all` reads every one.
            None => continue,
        };
        kept += 1;
        if !known {
            parsed.by_key.insert(
                kv.key.clone(),
                Parsed {
                    revision: kv.mod_revision,
                    report: Arc::clone(&report),
                    identity: identity.cloned(),
                    proof: proof.clone(),
                },
            );
        }
        view.proofs.insert(report.command.clone(), proof);
        view.revisions
            .insert(report.command.clone(), kv.mod_revision);
        view.by_command.insert(report.command.clone(), report);
    }
    if all && parsed.by_key.len() != kept {
        let now: std::collections::HashSet<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
        parsed.by_key.retain(|key, _| now.contains(key.as_str()));
    }
    for kv in kvs {
        match Key::parse(fleet, &kv.key) {
            Some(Key::Alive { host }) => {
                living.insert(host);
            }
            Some(Key::Throttled { host }) => {
                if let Some(&at) = at_of.get(host) {
                    hosts[at].1.throttled = Some(String::from_utf8_lossy(&kv.value).into_owned());
                }
            }
            _ => {}
        }
    }
    for (host, view) in &mut hosts {
        view.settle();
        // Liveness is told for the hosts that filed a report; a lease alone is not a host.
        if view.report.is_some() {
            view.alive = Some(living.contains(host.as_str()));
        }
    }
    hosts.into_iter().collect()
}

/// The published release from keys read out of etcd (its version key and `desired/`), as
/// [`Store::published`] reads it; `None` without a version.
pub fn published_from(fleet: &str, kvs: &[etcd::KeyValue]) -> Option<Published> {
    let version_key = version_key(fleet);
    let version = kvs.iter().find(|kv| kv.key == version_key)?;
    let hosts = kvs
        .iter()
        .filter_map(|kv| {
            let Some(Key::Desired { host }) = Key::parse(fleet, &kv.key) else {
                return None;
            };
            let bundle = String::from_utf8_lossy(&kv.value).trim().to_string();
            Some((host.to_string(), bundle))
        })
        .collect();
    let version = String::from_utf8_lossy(&version.value).trim().to_string();
    Some(Published { version, hosts })
}

pub(crate) fn read_report(path: &Path) -> Result<Option<(Vec<u8>, Report)>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(|report| Some((bytes, report)))
            .map_err(|e| format!("{} is not a bell report: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

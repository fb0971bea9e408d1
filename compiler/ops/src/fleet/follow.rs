//! Following a fleet's part of the store through a watch ([`crate::watch::Cache`]), for the
//! readers that read it again and again: the status page at every refresh, the rollout
//! controller at every poll of a wave. The first reading takes every key; each later one
//! takes only the keys written or deleted since, parses and checks (signature, witness) only
//! the reports of the hosts they belong to, and keeps every other host's view as it was. So a
//! reading costs what changed, not the fleet: at 100,000 hosts the whole fleet is hundreds of
//! megabytes of reports, of which a refresh sees a few.
//!
//! What it holds is what etcd holds at a revision learned after the reading began, or what a
//! healthy watch holds half a second later (see [`Cache::settled`]); when etcd cannot say its
//! revision or the watch is broken, the reading fails and the reader says the store has not
//! answered, as it did when a range failed.

use super::witness::Witness;
use crate::watch::{Cache, Held, Kv};
use bell_bundle::Release;
use bell_store::keys::{self, Key};
use bell_store::{HostView, Identities, ParsedReports};
use bell_wire::etcd::{Etcd, KeyValue};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub struct Follower {
    fleet: String,
    cache: Arc<Cache>,
    /// The revision the views are of; 0 before the first reading.
    revision: i64,
    /// The hosts and identities of the release the views were judged by: a release that
    /// gives others has every host judged again (one that moves bundles only, as each wave
    /// of a rollout does, does not).
    judged_by: Option<u64>,
    parsed: ParsedReports,
    /// The reports of the first reading's pages, parsed and checked while etcd read the rest
    /// (see [`Follower::start_checking`]); taken in by the first reading.
    read_ahead: Option<std::thread::JoinHandle<ParsedReports>>,
    /// How many reports were checked ahead.
    checked_ahead: usize,
    views: BTreeMap<String, Arc<HostView>>,
    /// Every other key of the fleet's (not a host's report, liveness, throttle or status
    /// key: the published release, holds, semaphores, the rollout's keys, registrations), in
    /// key order.
    others: Vec<KeyValue>,
    last: Taken,
}

/// What the last reading took in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    /// Every key (the first reading, a re-read range, another release); else only changes.
    pub everything: bool,
    /// The hosts whose views were made again.
    pub hosts: usize,
    /// The keys written or deleted since the reading before (every key, for `everything`).
    pub keys: usize,
}

/// What one look at the cache copied out.
enum Look {
    Everything {
        revision: i64,
        kvs: Vec<KeyValue>,
    },
    Changes {
        revision: i64,
        /// The hosts with a changed key, and every key of theirs there is now.
        hosts: BTreeSet<String>,
        host_kvs: Vec<KeyValue>,
        /// Their report keys deleted since.
        gone_reports: Vec<String>,
        /// Other keys written (`Some`) or deleted since.
        others: Vec<(String, Option<KeyValue>)>,
        keys: usize,
    },
}

/// What a key is to a follower.
enum Role<'k> {
    /// A key a host's view is made of.
    Host {
        host: &'k str,
        report: bool,
    },
    /// A `status/` key: written beside each report, read by no one here (the report says it).
    Unread,
    Other,
}

fn role<'k>(fleet: &str, key: &'k str) -> Role<'k> {
    match Key::parse(fleet, key) {
        Some(Key::Report { host, .. }) => Role::Host { host, report: true },
        Some(Key::Alive { host } | Key::Throttled { host }) => Role::Host {
            host,
            report: false,
        },
        Some(Key::Status { .. } | Key::Sync) => Role::Unread,
        _ => Role::Other,
    }
}

/// The keys a host's view is made of.
fn host_keys(fleet: &str, host: &str) -> Vec<String> {
    let mut out: Vec<String> = keys::REPORTED_COMMANDS
        .iter()
        .chain(&keys::SIDE_COMMANDS)
        .map(|command| keys::report_key(fleet, command, host))
        .collect();
    out.push(keys::alive_key(fleet, host));
    out.push(keys::throttled_key(fleet, host));
    out
}

fn key_value(key: &[u8], kv: &Kv) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(key).into_owned(),
        value: kv.value.clone(),
        mod_revision: kv.mod_revision,
    }
}

impl Follower {
    /// Follows `fleet`'s keys in `etcd` from now on (a watch cache of its own: the range read
    /// over gRPC in pages, several times faster than etcd's JSON, or as JSON in one answer;
    /// then one watch).
    pub fn start(etcd: Etcd, fleet: &str) -> Result<Follower, String> {
        let (prefix, end) = fleet_range(fleet)?;
        Ok(Follower::over(
            Cache::start_following(etcd, prefix, end, Some(left_out(fleet)), None),
            fleet,
        ))
    }

    /// [`Follower::start`], parsing and checking each page of reports against `identities`
    /// (the release's the reader will read by) as it comes, on a thread of its own, while etcd
    /// reads the next page: at 100,000 hosts the first reading takes about as long as etcd
    /// takes to read the range, rather than that and then every report's check. A report is
    /// taken from there only when the reading finds it at the same revision and checks it
    /// against the same identity; any other is checked then. A report whose digest is in
    /// `checked_before` (what the reader's witness checked before it was started again, see
    /// [`Witness::checked_before`]) has its signature taken as checked.
    pub fn start_checking(
        etcd: Etcd,
        fleet: &str,
        identities: Arc<Identities>,
        checked_before: std::collections::HashSet<bell_store::proof::Checked>,
    ) -> Result<Follower, String> {
        let (prefix, end) = fleet_range(fleet)?;
        let (pages, taken) = std::sync::mpsc::channel::<Vec<KeyValue>>();
        let checker_fleet = fleet.to_string();
        let checker = std::thread::spawn(move || {
            let mut parsed = ParsedReports::checked_before(Arc::new(checked_before));
            // Until the cache's first reading ends (and drops its sender).
            for page in taken {
                parsed.read_ahead(&checker_fleet, &page, &identities);
            }
            parsed
        });
        let fleet_of_pages = fleet.to_string();
        // Only the reports go to the checker (a key that is not UTF-8 is left to the reading).
        let read_ahead = Box::new(move |entries: &[bell_wire::etcd::Entry]| {
            let page = entries
                .iter()
                .filter_map(|e| {
                    let key = std::str::from_utf8(&e.key).ok()?;
                    matches!(role(&fleet_of_pages, key), Role::Host { report: true, .. }).then(
                        || KeyValue {
                            key: key.to_string(),
                            value: e.value.clone(),
                            mod_revision: e.mod_revision,
                        },
                    )
                })
                .collect();
            let _ = pages.send(page);
        });
        let cache =
            Cache::start_following(etcd, prefix, end, Some(left_out(fleet)), Some(read_ahead));
        let mut follower = Follower::over(cache, fleet);
        follower.read_ahead = Some(checker);
        Ok(follower)
    }

    /// A follower of `fleet` through `cache` (which holds the fleet's keys).
    fn over(cache: Arc<Cache>, fleet: &str) -> Follower {
        Follower {
            fleet: fleet.to_string(),
            cache,
            revision: 0,
            judged_by: None,
            parsed: ParsedReports::default(),
            read_ahead: None,
            checked_ahead: 0,
            views: BTreeMap::new(),
            others: Vec::new(),
            last: Taken::default(),
        }
    }

    /// The fleet it follows.
    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    /// Every host's view as of the last reading, judged by the witness.
    pub fn views(&self) -> &BTreeMap<String, Arc<HostView>> {
        &self.views
    }

    /// The fleet's other keys as of the last reading (see [`Follower`]'s `others`).
    pub fn others(&self) -> &[KeyValue] {
        &self.others
    }

    /// How many times the whole range was read over etcd's gRPC interface (the rest, if
    /// any, were read as JSON: etcd did not speak gRPC to this client).
    pub fn listed_over_grpc(&self) -> u64 {
        self.cache
            .listings_over_grpc
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How long the last reading of the whole range from etcd took (zero: none yet).
    pub fn last_listing(&self) -> std::time::Duration {
        let ms = self
            .cache
            .last_listing_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        std::time::Duration::from_millis(ms)
    }

    /// How many reports were parsed and checked while the range was read (see
    /// [`Follower::start_checking`]), whether or not the first reading took them.
    pub fn checked_ahead(&self) -> usize {
        self.checked_ahead
    }

    /// The revision of the last reading (0: none yet).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// What the last reading took in.
    pub fn taken(&self) -> Taken {
        self.last
    }

    /// Reads what changed since the last reading (everything, the first time) and makes
    /// those hosts' views again: each report checked against the identity `identities` (of
    /// `release`) gives its host, then judged by `witness` at `now`.
    pub fn read(
        &mut self,
        release: &Release,
        identities: &Identities,
        witness: &mut Witness,
        now: u64,
    ) -> Result<Taken, String> {
        let judge_by = hosts_and_identities(release);
        let everything = self.judged_by != Some(judge_by);
        let after = self.revision;
        let fleet = self.fleet.clone();
        let look = self
            .cache
            .settled(|held| look(&fleet, held, after, everything))?;
        if let Some(checker) = self.read_ahead.take() {
            // The first reading of the range is done (the look saw it): the checker has its
            // last page.
            let ahead = checker
                .join()
                .map_err(|_| "checking the reports read ahead failed")?;
            self.checked_ahead = ahead.len();
            self.parsed.take_in(ahead);
        }
        self.last = match look {
            Look::Everything { revision, kvs } => {
                let keys = kvs.len();
                let (mut host_kvs, mut others) = (Vec::new(), Vec::new());
                for kv in kvs {
                    match role(&fleet, &kv.key) {
                        Role::Host { .. } => host_kvs.push(kv),
                        Role::Other => others.push(kv),
                        Role::Unread => {}
                    }
                }
                let mut views =
                    bell_store::views_from_parsed(&fleet, &host_kvs, &mut self.parsed, identities)?;
                witness.judge_at(release, &mut views, now);
                self.views = views.into_iter().map(|(h, v)| (h, Arc::new(v))).collect();
                self.others = others;
                self.revision = revision;
                Taken {
                    everything: true,
                    hosts: self.views.len(),
                    keys,
                }
            }
            Look::Changes {
                revision,
                hosts,
                host_kvs,
                gone_reports,
                others,
                keys,
            } => {
                for key in &gone_reports {
                    self.parsed.forget(key);
                }
                let mut views = bell_store::some_views_from_parsed(
                    &fleet,
                    &host_kvs,
                    &mut self.parsed,
                    identities,
                );
                witness.judge_some_at(release, &mut views, hosts.iter().map(String::as_str), now);
                for host in &hosts {
                    match views.remove(host) {
                        Some(view) => self.views.insert(host.clone(), Arc::new(view)),
                        None => self.views.remove(host),
                    };
                }
                for (key, kv) in others {
                    let at = self.others.binary_search_by(|o| o.key.as_str().cmp(&key));
                    match (at, kv) {
                        (Ok(i), Some(kv)) => self.others[i] = kv,
                        (Err(i), Some(kv)) => self.others.insert(i, kv),
                        (Ok(i), None) => {
                            self.others.remove(i);
                        }
                        (Err(_), None) => {}
                    }
                }
                self.revision = revision;
                Taken {
                    everything: false,
                    hosts: hosts.len(),
                    keys,
                }
            }
        };
        self.judged_by = Some(judge_by);
        Ok(self.last)
    }
}

/// The range of `fleet`'s keys: its prefix and where it ends.
/// A follower let go stops its cache's threads and its watch (see [`Cache::stop`]): a reader
/// of another fleet, or a controller that ends its run, would otherwise keep them and every
/// key they hold.
impl Drop for Follower {
    fn drop(&mut self) {
        self.cache.stop();
    }
}

fn fleet_range(fleet: &str) -> Result<(Vec<u8>, Vec<u8>), String> {
    bell_store::check_name("fleet", fleet)?;
    Ok(prefix_range(keys::fleet_prefix(fleet)))
}

/// The keys a follower leaves out of its cache: the hosts' `status/` keys, written for readers
/// outside bell beside each report (bell judges a host by its signed report alone). They are
/// one to three keys a host, which etcd would read and send at every reading of the range.
fn left_out(fleet: &str) -> (Vec<u8>, Vec<u8>) {
    prefix_range(keys::status_prefix(fleet))
}

/// Every key that begins with `prefix`: from it up to etcd's end of the prefix.
fn prefix_range(prefix: String) -> (Vec<u8>, Vec<u8>) {
    let prefix = prefix.into_bytes();
    let end = bell_wire::etcd::prefix_end(&prefix);
    (prefix, end)
}

/// A digest of which hosts `release` has and the identity it gives each: what the views are
/// checked and judged by.
fn hosts_and_identities(release: &Release) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (host, entry) in &release.hosts {
        (host, &entry.identity).hash(&mut hasher);
    }
    hasher.finish()
}

/// What a reading needs of the cache, copied out under its lock: everything, or the changes
/// since `after` and every key of the hosts they touch.
fn look(fleet: &str, held: &Held<'_>, after: i64, everything: bool) -> Look {
    let all = |held: &Held<'_>| Look::Everything {
        revision: held.revision(),
        kvs: held.all().map(|(key, kv)| key_value(key, kv)).collect(),
    };
    if everything || !held.knows_changes_since(after) {
        return all(held);
    }
    let mut hosts = BTreeSet::new();
    let mut gone_reports = Vec::new();
    let mut others = Vec::new();
    let mut keys = 0;
    for (key, kv) in held.changed_since(after) {
        keys += 1;
        // A key that is not UTF-8 is read as the whole range reads it (lossily), which a
        // host's keys built from its name would not find: read everything again.
        let Ok(text) = std::str::from_utf8(key) else {
            return all(held);
        };
        match role(fleet, text) {
            Role::Host { host, report } => {
                if report && kv.is_none() {
                    gone_reports.push(text.to_string());
                }
                hosts.insert(host.to_string());
            }
            Role::Unread => {}
            Role::Other => others.push((text.to_string(), kv.map(|kv| key_value(key, kv)))),
        }
    }
    let host_kvs = hosts
        .iter()
        .flat_map(|host| host_keys(fleet, host))
        .filter_map(|key| {
            held.get(key.as_bytes())
                .map(|kv| key_value(key.as_bytes(), kv))
        })
        .collect();
    Look::Changes {
        revision: held.revision(),
        hosts,
        host_kvs,
        gone_reports,
        others,
        keys,
    }
}

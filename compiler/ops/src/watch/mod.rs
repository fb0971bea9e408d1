//! The watch cache: every key of a range of the store (a fleet's part) in memory, read once
//! and kept current by an etcd watch from that revision (read again when etcd compacted past
//! it). The gateway answers hosts' reads from it, so that what hosts read costs etcd nothing;
//! the status page and the rollout controller follow the fleet through one of their own, so
//! that a reading costs what changed since the last, not the whole fleet again.
//!
//! A read is answered at a revision fresh enough, as the Kubernetes API server's consistent
//! reads from its cache are: etcd's current revision is learned after the read arrived (one
//! request shared by every read of the moment), and the read waits for the cache to reach it;
//! when the cache cannot, the read is refused, never sent to etcd instead.

mod grpc;

use bell_wire::base64;
use bell_wire::etcd::{Entry, Etcd, Event, WatchEnd};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A key as the cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    /// Shared: a reader takes it out without copying it.
    pub value: bell_wire::etcd::Bytes,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

#[derive(Default)]
struct State {
    kvs: BTreeMap<Vec<u8>, Kv>,
    /// The revision the cache holds the range at; 0 before the first reading.
    revision: i64,
    /// Why it cannot follow etcd now, if it cannot.
    trouble: Option<String>,
    /// Since when the current watch stands (etcd said it was made), if one does.
    standing_since: Option<Instant>,
    /// etcd's current revision as last learned; the learnings begun, and the last one done
    /// (by number); whether a read waits for a learning begun after it came.
    learned: i64,
    begun: u64,
    done: u64,
    wanted: bool,
    /// Why the last learning done failed (`None`: it did not): the reads waiting for it are
    /// refused, never answered from a cache that may have stopped following.
    failed: Option<String>,
    /// The revision at which each key deleted since the last reading went; deletions before
    /// `forgotten_before` are not known (a wait from before then is answered "changed").
    deleted: HashMap<Vec<u8>, i64>,
    forgotten_before: i64,
    /// The long-polls waiting on each key, by number.
    waiters: HashMap<Vec<u8>, HashMap<u64, Arc<Notify>>>,
    next_waiter: u64,
}

impl State {
    /// Whether any of `keys` was written or deleted after revision `after`, as far as the
    /// cache can tell now (a cache behind `after` has seen nothing after it yet).
    fn changed_after(&self, keys: &[Vec<u8>], after: i64) -> bool {
        if after < self.forgotten_before {
            return true;
        }
        keys.iter().any(|key| {
            let last = match self.kvs.get(key) {
                Some(kv) => kv.mod_revision,
                None => self.deleted.get(key).copied().unwrap_or(0),
            };
            last > after
        })
    }

    /// Wakes the long-polls of `key` (all of them, for `None`).
    fn wake(&self, key: Option<&[u8]>) {
        let wake_all = |waiters: &HashMap<u64, Arc<Notify>>| {
            waiters.values().for_each(|n| n.notify_one());
        };
        match key {
            Some(key) => self.waiters.get(key).into_iter().for_each(wake_all),
            None => self.waiters.values().for_each(wake_all),
        }
    }
}

/// What a read found: the revision it read at, and what each key holds (`None`: nothing).
pub type Found = (i64, Vec<Option<Kv>>);

/// The most deletions remembered: past it, they are forgotten at once, and the long-polls
/// from before are answered "changed" (a needless pull each, never a missed change).
const MAX_DELETED: usize = 200_000;

/// The cache of one range of keys.
pub struct Cache {
    key: Vec<u8>,
    range_end: Vec<u8>,
    /// Keys of the range neither read nor kept, from the first up to the second (see
    /// [`Cache::start_following`]).
    left_out: Option<(Vec<u8>, Vec<u8>)>,
    /// Keys per request when the range is read (0: all in one answer).
    page: usize,
    /// A key of the range the cache may write to learn that its watch caught up (see
    /// [`Cache::start_marking`]).
    mark: Option<Vec<u8>>,
    state: Mutex<State>,
    changed: Condvar,
    /// Wakes the reads that wait as tasks: the cache moved, or a learning ended.
    progress: Notify,
    /// Reads answered from memory.
    pub reads: AtomicU64,
    /// Writes of its mark (see [`Cache::start_marking`]).
    pub marks: AtomicU64,
    /// Readings of the whole range taken over etcd's gRPC interface (see [`grpc`]).
    pub listings_over_grpc: AtomicU64,
    /// How long the last reading of the whole range took, in milliseconds.
    pub last_listing_ms: AtomicU64,
    /// Given each page of the first reading of the range as it comes (see [`ReadAhead`]).
    read_ahead: Mutex<Option<ReadAhead>>,
    /// Set by [`Cache::stop`]: its threads end.
    stopping: std::sync::atomic::AtomicBool,
}

/// What a follower does with each page of the range while etcd reads the next: at 100,000
/// hosts etcd takes over a second to read the range, and the reader checking the reports of
/// the pages already read meanwhile has its first reading that much sooner.
pub type ReadAhead = Box<dyn FnMut(&[Entry]) + Send>;

/// The shortest time between two learnings of etcd's revision: reads that arrive within it
/// share one request.
const LEARN_EVERY: Duration = Duration::from_millis(50);

/// Keys per request when the gateway's cache reads the range: a replica never holds the whole
/// fleet as JSON at once (at 100,000 hosts that is over a GiB on top of the cache). Pages of
/// JSON cost time: etcd counts the rest of the range for each, and 100,000 hosts' keys took
/// 13–21 s in pages against about 5 s in one answer; a reader that follows the fleet
/// ([`crate::fleet::follow`]) reads it over gRPC instead.
pub const LIST_PAGE: usize = 2000;

/// Keys per request when a follower's cache reads the range over gRPC: pages small enough that
/// the reader checks the first while etcd reads the rest, and large enough that the range in
/// pages costs little more than in one answer (etcd walks its index of the rest of the range
/// for each page).
const GRPC_PAGE: usize = 20_000;

/// The longest a read waits for the cache to be fresh enough.
const FRESH_WITHIN: Duration = Duration::from_secs(3);

/// How long a follower's look waits for the cache to reach etcd's revision before it takes
/// what a healthy watch holds (see [`Cache::settled`]), and how long a watch must have stood
/// to be healthy (etcd ends one whose start was compacted away within a tenth of a second).
const QUIET_GRACE: Duration = Duration::from_millis(500);

/// How long a learning waits for the watch to bring the revision it learned before it writes
/// the cache's mark (see [`Cache::start_marking`]): the fleet's own writes reach the cache
/// within milliseconds, so past this the revision is most likely another fleet's.
const MARK_AFTER: Duration = Duration::from_millis(100);

/// How long a follower's first look waits for the range to be read.
const FIRST_READING: Duration = Duration::from_secs(600);

impl Cache {
    /// A cache of the keys from `key` up to `range_end`, filled and followed by threads of its
    /// own from now on.
    pub fn start(etcd: Etcd, key: Vec<u8>, range_end: Vec<u8>) -> Arc<Cache> {
        Cache::start_paged(etcd, key, range_end, LIST_PAGE)
    }

    /// [`Cache::start`], reading the range `page` keys per request as JSON, or (0) as a
    /// follower reads it: over gRPC in pages, else as JSON in one answer.
    pub fn start_paged(etcd: Etcd, key: Vec<u8>, range_end: Vec<u8>, page: usize) -> Arc<Cache> {
        Cache::start_with(etcd, key, range_end, None, page, None, None)
    }

    /// [`Cache::start`] for a cache that answers reads which must be fresh (the gateway's)
    /// on an etcd other ranges share: when the watch has not brought the revision a learning
    /// read within [`MARK_AFTER`], the learner writes `mark` (a key of the range) and takes
    /// that write's revision instead. etcd's revision is the whole store's, and another
    /// fleet's writes move it with no event that this range's watch would send: reads would
    /// wait for a revision that never comes and be refused. The mark's write is an event of
    /// the range, and a watch's events come in revision order, so once the cache holds it, it
    /// holds everything written before. (etcd's own answer, a progress request on the watch,
    /// is not ordered with the watch's events before etcd 3.4.25 and 3.5.8 (etcd issue
    /// 15220), and Debian 12 has 3.4.23.) A fleet alone on its etcd never writes it.
    pub fn start_marking(
        etcd: Etcd,
        key: Vec<u8>,
        range_end: Vec<u8>,
        mark: Vec<u8>,
    ) -> Arc<Cache> {
        Cache::start_with(etcd, key, range_end, None, LIST_PAGE, None, Some(mark))
    }

    /// A follower's cache ([`Cache::start_paged`] with 0) that leaves out the keys from
    /// `left_out.0` up to `left_out.1` (what its reader never reads: etcd would read and send
    /// them at every reading of the range, and a watch's events of them are dropped), and
    /// gives each page of its first reading of the range to `read_ahead` as it comes.
    pub fn start_following(
        etcd: Etcd,
        key: Vec<u8>,
        range_end: Vec<u8>,
        left_out: Option<(Vec<u8>, Vec<u8>)>,
        read_ahead: Option<ReadAhead>,
    ) -> Arc<Cache> {
        Cache::start_with(etcd, key, range_end, left_out, 0, read_ahead, None)
    }

    fn start_with(
        etcd: Etcd,
        key: Vec<u8>,
        range_end: Vec<u8>,
        left_out: Option<(Vec<u8>, Vec<u8>)>,
        page: usize,
        read_ahead: Option<ReadAhead>,
        mark: Option<Vec<u8>>,
    ) -> Arc<Cache> {
        let cache = Arc::new(Cache {
            key,
            range_end,
            left_out,
            page,
            mark,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            progress: Notify::new(),
            reads: AtomicU64::new(0),
            marks: AtomicU64::new(0),
            listings_over_grpc: AtomicU64::new(0),
            last_listing_ms: AtomicU64::new(0),
            read_ahead: Mutex::new(read_ahead),
            stopping: Default::default(),
        });
        let follower = Arc::clone(&cache);
        let follower_etcd = etcd.clone();
        std::thread::spawn(move || follower.follow(&follower_etcd));
        let learner = Arc::clone(&cache);
        std::thread::spawn(move || learner.learn(&etcd));
        cache
    }

    /// A cache of the range that nothing fills or follows: tests give it its events.
    #[cfg(test)]
    pub(crate) fn detached(key: &[u8], range_end: &[u8], revision: i64) -> Arc<Cache> {
        Arc::new(Cache {
            key: key.to_vec(),
            range_end: range_end.to_vec(),
            left_out: None,
            page: LIST_PAGE,
            mark: None,
            state: Mutex::new(State {
                revision,
                ..State::default()
            }),
            changed: Condvar::new(),
            progress: Notify::new(),
            reads: AtomicU64::new(0),
            marks: AtomicU64::new(0),
            listings_over_grpc: AtomicU64::new(0),
            last_listing_ms: AtomicU64::new(0),
            read_ahead: Mutex::new(None),
            stopping: Default::default(),
        })
    }

    /// Whether `key` is in the cached range.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.key.as_slice() <= key && key < self.range_end.as_slice() && !self.leaves_out(key)
    }

    fn leaves_out(&self, key: &[u8]) -> bool {
        self.left_out
            .as_ref()
            .is_some_and(|(from, to)| from.as_slice() <= key && key < to.as_slice())
    }

    /// The parts of the range read: all of it, or what is around the part left out.
    fn parts(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        match &self.left_out {
            None => vec![(self.key.clone(), self.range_end.clone())],
            Some((from, to)) => [
                (self.key.clone(), from.clone().min(self.range_end.clone())),
                (to.clone().max(self.key.clone()), self.range_end.clone()),
            ]
            .into_iter()
            .filter(|(start, end)| start < end)
            .collect(),
        }
    }

    /// Ends the threads that fill and follow the cache: the one that learns etcd's revision
    /// at once, the one that reads the range between two pages or at the watch's next word
    /// (a change in the range, or etcd's progress notice on a quiet watch, every ten minutes).
    /// What is held stays as it was.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Ok(_state) = self.state.lock() {
            self.changed.notify_all();
        }
    }

    fn stopped(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Reads the range, then follows its changes, until it is stopped.
    fn follow(&self, etcd: &Etcd) {
        let mut from = None;
        while !self.stopped() {
            let start = match from {
                Some(start) => start,
                None => match self.list(etcd) {
                    Ok(revision) => revision + 1,
                    Err(e) => {
                        self.trouble(e);
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                },
            };
            let mut last = start - 1;
            let end = etcd.watch(
                &self.key,
                &self.range_end,
                start,
                &mut |revision, events| {
                    if self.stopped() {
                        return false;
                    }
                    let Some(revision) = self.apply(revision, events) else {
                        return false;
                    };
                    last = revision;
                    true
                },
            );
            if let Ok(mut state) = self.state.lock() {
                state.standing_since = None;
            }
            from = match end {
                WatchEnd::Compacted(_) => None,
                WatchEnd::Broken(e) => {
                    // A watch that broke resumes where it was; what was compacted meanwhile
                    // ends the next one as `Compacted`, and the range is read again.
                    self.trouble(e);
                    std::thread::sleep(Duration::from_millis(500));
                    Some(last + 1)
                }
                WatchEnd::Stopped => Some(last + 1),
            };
        }
    }

    /// Takes a watch's events at `revision` into the cache, and wakes the long-polls of their
    /// keys; the cache's revision then (`None` when it failed).
    fn apply(&self, revision: i64, events: Vec<Event>) -> Option<i64> {
        let mut state = self.state.lock().ok()?;
        if revision == 0 && events.is_empty() {
            // etcd made the watch; what it has to say about the start revision (compacted
            // away) comes after.
            state.standing_since = Some(Instant::now());
        }
        for event in events {
            if self.leaves_out(&event.key) {
                continue;
            }
            state.wake(Some(&event.key));
            if event.deleted {
                state.kvs.remove(&event.key);
                state.deleted.insert(event.key, event.mod_revision);
                if state.deleted.len() > MAX_DELETED {
                    state.deleted.clear();
                    state.forgotten_before = event.mod_revision;
                }
            } else {
                state.deleted.remove(&event.key);
                let create_revision = state
                    .kvs
                    .get(&event.key)
                    .filter(|_| event.version > 1)
                    .map_or(event.mod_revision, |kv| kv.create_revision);
                state.kvs.insert(
                    event.key,
                    Kv {
                        value: event.value.into(),
                        create_revision,
                        mod_revision: event.mod_revision,
                        version: event.version,
                        lease: event.lease,
                    },
                );
            }
        }
        state.revision = state.revision.max(revision);
        state.trouble = None;
        self.changed.notify_all();
        self.progress.notify_waiters();
        Some(state.revision)
    }

    /// Reads the whole range at one revision into the cache; that revision.
    fn list(&self, etcd: &Etcd) -> Result<i64, String> {
        // In pages at the first page's revision. A replica reads JSON pages of `page` keys:
        // it never holds the whole range as JSON at once (at 100,000 hosts that is over a GiB
        // on top of the cache). A follower reads pages over gRPC, handing each to its
        // read-ahead while etcd reads the next, or, when etcd does not speak gRPC to this
        // client, the whole range as JSON in one answer.
        let started = Instant::now();
        let mut read_ahead = self.read_ahead.lock().ok().and_then(|mut r| r.take());
        let mut over_grpc = self.page == 0;
        let mut revision = 0;
        let mut kvs = BTreeMap::new();
        for (mut from, range_end) in self.parts() {
            loop {
                if self.stopped() {
                    return Err("stopped".into());
                }
                let page = if over_grpc {
                    match grpc::range(etcd, &from, &range_end, GRPC_PAGE, revision) {
                        Ok(page) => page,
                        Err(e) if revision == 0 => {
                            eprintln!("warning: {e}; the range is read as JSON");
                            over_grpc = false;
                            etcd.range_page(&from, &range_end, 0, 0)?
                        }
                        Err(e) => return Err(e),
                    }
                } else {
                    etcd.range_page(&from, &range_end, self.page, revision)?
                };
                revision = page.revision;
                if let Some(read_ahead) = read_ahead.as_mut() {
                    read_ahead(&page.entries);
                }
                let Some(last) = page.entries.last().map(|e| e.key.clone()) else {
                    break;
                };
                for entry in page.entries {
                    let kv = Kv {
                        value: entry.value,
                        create_revision: entry.create_revision,
                        mod_revision: entry.mod_revision,
                        version: entry.version,
                        lease: entry.lease,
                    };
                    kvs.insert(entry.key, kv);
                }
                if !page.more {
                    break;
                }
                // The next page begins just after the last key of this one.
                from = last;
                from.push(0);
            }
        }
        if over_grpc {
            self.listings_over_grpc.fetch_add(1, Ordering::Relaxed);
        }
        let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_listing_ms.store(took, Ordering::Relaxed);
        let mut state = self.state.lock().map_err(|_| "the cache failed")?;
        state.kvs = kvs;
        state.revision = revision;
        state.trouble = None;
        // What was deleted before this reading is not known: every long-poll looks again.
        state.deleted.clear();
        state.forgotten_before = revision;
        state.wake(None);
        self.progress.notify_waiters();
        self.changed.notify_all();
        Ok(revision)
    }

    fn trouble(&self, why: String) {
        if let Ok(mut state) = self.state.lock() {
            state.trouble = Some(why);
        }
    }

    /// Learns etcd's current revision whenever a read waits for it, at most every
    /// [`LEARN_EVERY`].
    fn learn(&self, etcd: &Etcd) {
        loop {
            {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                while !state.wanted {
                    if self.stopped() {
                        return;
                    }
                    state = match self.changed.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                }
                state.wanted = false;
                state.begun += 1;
            }
            // A read of one key of the range (none is at the prefix itself): the answer's
            // header has the revision, and whoever reads the range may read it.
            let body = serde_json::json!({ "key": base64(&self.key), "keys_only": true });
            let learned = revision_after(etcd, "/v3/kv/range", &body);
            let learned = learned.map(|revision| self.caught_up(etcd, revision));
            if let Ok(mut state) = self.state.lock() {
                match learned {
                    Ok(revision) => {
                        state.learned = state.learned.max(revision);
                        state.failed = None;
                    }
                    Err(e) => {
                        state.failed = Some(e.clone());
                        state.trouble = Some(e);
                    }
                }
                state.done = state.begun;
                self.changed.notify_all();
                self.progress.notify_waiters();
            }
            std::thread::sleep(LEARN_EVERY);
        }
    }

    /// The revision a read that waits for `learned` may wait for instead: `learned` itself,
    /// or, with a mark (see [`Cache::start_marking`]), when the watch has not brought it
    /// within [`MARK_AFTER`], the revision of a write of the mark (later, and one the watch
    /// will bring). When the write fails, `learned`: reads wait for it as they would without.
    fn caught_up(&self, etcd: &Etcd, learned: i64) -> i64 {
        let Some(mark) = &self.mark else {
            return learned;
        };
        let until = Instant::now() + MARK_AFTER;
        {
            let Ok(mut state) = self.state.lock() else {
                return learned;
            };
            while state.revision < learned && !self.stopped() {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = match self.changed.wait_timeout(state, left) {
                    Ok((state, _)) => state,
                    Err(_) => return learned,
                };
            }
            // A watch that does not stand would not bring the mark either.
            if state.revision >= learned || state.standing_since.is_none() {
                return learned;
            }
        }
        let body = serde_json::json!({ "key": base64(mark), "value": "" });
        match revision_after(etcd, "/v3/kv/put", &body) {
            Ok(revision) => {
                self.marks.fetch_add(1, Ordering::Relaxed);
                revision.max(learned)
            }
            Err(e) => {
                self.trouble(format!("its mark could not be written: {e}"));
                learned
            }
        }
    }

    /// The keys, as etcd holds them now: each read waits for a revision learned after it
    /// came, and for the cache to reach it. `Err` when it cannot within [`FRESH_WITHIN`].
    pub fn read(&self, keys: &[Vec<u8>]) -> Result<Found, String> {
        self.fresh(|held| {
            let found = keys.iter().map(|k| held.get(k).cloned()).collect();
            (held.revision(), found)
        })
    }

    /// `look` at what the cache holds once it is as fresh as [`Cache::read`]'s reads are,
    /// waiting on this thread; what it returns. `look` runs under the cache's lock (the watch
    /// waits meanwhile): it copies out what it needs.
    pub fn fresh<T>(&self, look: impl FnOnce(&Held<'_>) -> T) -> Result<T, String> {
        self.look_when(Patience::Host, look)
    }

    /// [`Cache::fresh`] for a reader that follows the range (the page, the controller) rather
    /// than answering hosts. The first look waits for the range to be read however long that
    /// takes (a fleet of 100,000 hosts takes seconds), and is refused at once when reading it
    /// fails. A later one, once a learning begun after it succeeded and the watch is healthy,
    /// takes what the cache holds after [`QUIET_GRACE`] even when the cache has not reached
    /// etcd's revision: that revision is the whole store's, and writes outside the range
    /// (another fleet's) move it with no event that the watch would send.
    pub fn settled<T>(&self, look: impl FnOnce(&Held<'_>) -> T) -> Result<T, String> {
        self.look_when(Patience::Follower, look)
    }

    fn look_when<T>(
        &self,
        patience: Patience,
        look: impl FnOnce(&Held<'_>) -> T,
    ) -> Result<T, String> {
        let started = Instant::now();
        let mut state = self.state.lock().map_err(|_| "the cache failed")?;
        let arrived = self.arrive(&mut state);
        loop {
            match freshness(&state, arrived) {
                Some(Ok(())) => {
                    if patience == Patience::Host {
                        self.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(look(&Held { state: &state }));
                }
                Some(Err(why)) => return Err(why),
                None => {}
            }
            let waited = started.elapsed();
            let first = state.revision == 0;
            if patience == Patience::Follower && first {
                if state.trouble.is_some() || waited >= FIRST_READING {
                    return Err(behind(&state));
                }
            } else {
                // A watch stood long enough that etcd would have ended it by now had its
                // start been compacted away.
                let standing = state
                    .standing_since
                    .is_some_and(|since| since.elapsed() >= QUIET_GRACE);
                let healthy = standing
                    && state.done > arrived
                    && state.failed.is_none()
                    && state.trouble.is_none();
                if patience == Patience::Follower && healthy && waited >= QUIET_GRACE {
                    return Ok(look(&Held { state: &state }));
                }
                if waited >= FRESH_WITHIN {
                    return Err(behind(&state));
                }
            }
            // A follower looks again now and then, for its grace to pass.
            let nap = match patience {
                Patience::Host => FRESH_WITHIN.saturating_sub(waited),
                Patience::Follower => Duration::from_millis(100),
            };
            state = self
                .changed
                .wait_timeout(state, nap)
                .map_err(|_| "the cache failed")?
                .0;
        }
    }

    /// Asks the learner for etcd's revision now; the number of learnings begun before, which a
    /// read waits to see passed.
    fn arrive(&self, state: &mut State) -> u64 {
        state.wanted = true;
        self.changed.notify_all();
        state.begun
    }

    /// What `keys` hold, once the cache is fresh enough for a read that `arrived` (see
    /// [`freshness`]); `None` until then.
    fn fresh_read(
        &self,
        state: &State,
        arrived: u64,
        keys: &[Vec<u8>],
    ) -> Option<Result<Found, String>> {
        if let Err(why) = freshness(state, arrived)? {
            return Some(Err(why));
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let found = keys.iter().map(|k| state.kvs.get(k).cloned()).collect();
        Some(Ok((state.revision, found)))
    }

    /// [`Cache::read`], waiting as a task rather than on a thread.
    pub async fn read_when_fresh(&self, keys: &[Vec<u8>]) -> Result<Found, String> {
        let until = tokio::time::Instant::now() + FRESH_WITHIN;
        let arrived = {
            let mut state = self.state.lock().map_err(|_| "the cache failed")?;
            self.arrive(&mut state)
        };
        loop {
            // Listening before looking: a wake-up in between is not lost.
            let notified = self.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.lock().map_err(|_| "the cache failed")?;
                if let Some(read) = self.fresh_read(&state, arrived, keys) {
                    return read;
                }
                if tokio::time::Instant::now() >= until {
                    return Err(behind(&state));
                }
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// A long-poll of `keys`, for a write or a deletion of any of them after revision `after`.
    pub fn wait(self: &Arc<Self>, keys: Vec<Vec<u8>>, after: i64) -> Result<Wait, String> {
        let mut state = self.state.lock().map_err(|_| "the cache failed")?;
        let id = state.next_waiter;
        state.next_waiter += 1;
        let notify = Arc::new(Notify::new());
        for key in &keys {
            state
                .waiters
                .entry(key.clone())
                .or_default()
                .insert(id, Arc::clone(&notify));
        }
        Ok(Wait {
            cache: Arc::clone(self),
            id,
            keys,
            after,
            notify,
        })
    }

    /// How many keys it holds, and at which revision.
    pub fn size(&self) -> (usize, i64) {
        self.state
            .lock()
            .map(|s| (s.kvs.len(), s.revision))
            .unwrap_or((0, 0))
    }
}

/// How long a look waits for the cache to be fresh, and what it settles for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// A host's read: the cache at etcd's revision within [`FRESH_WITHIN`], or a refusal.
    Host,
    /// A follower's: see [`Cache::settled`].
    Follower,
}

/// Whether a read that `arrived` may be answered: once a learning of etcd's revision begun
/// after it is done and the cache has reached that revision, yes; when that learning failed,
/// no (etcd may have moved on without the cache); `None` while it has to wait.
fn freshness(state: &State, arrived: u64) -> Option<Result<(), String>> {
    if state.done <= arrived {
        return None;
    }
    if let Some(why) = &state.failed {
        return Some(Err(format!(
            "etcd's revision could not be learned to read fresh enough: {why}"
        )));
    }
    (state.revision >= state.learned && state.revision != 0).then_some(Ok(()))
}

/// etcd's revision after it answered `body` at `path` (its answer's header says it).
fn revision_after(etcd: &Etcd, path: &str, body: &serde_json::Value) -> Result<i64, String> {
    let answer = etcd.forward(path, body).map_err(|(_, e)| e)?;
    int(answer.get("header").and_then(|h| h.get("revision")))
        .ok_or_else(|| "etcd sent no revision".to_string())
}

/// What the cache holds at one revision, for [`Cache::fresh`]'s look.
pub struct Held<'s> {
    state: &'s State,
}

impl Held<'_> {
    /// The revision it holds the range at.
    pub fn revision(&self) -> i64 {
        self.state.revision
    }

    pub fn get(&self, key: &[u8]) -> Option<&Kv> {
        self.state.kvs.get(key)
    }

    /// Every key, in order.
    pub fn all(&self) -> impl Iterator<Item = (&[u8], &Kv)> {
        self.state.kvs.iter().map(|(k, kv)| (k.as_slice(), kv))
    }

    /// Whether [`Held::changed_since`] `after` is complete: not when the range was read again
    /// since `after` (what was deleted before that reading is not known), nor before a
    /// first look (`after` 0). A reader that follows the cache then takes [`Held::all`].
    pub fn knows_changes_since(&self, after: i64) -> bool {
        after > 0 && after >= self.state.forgotten_before
    }

    /// The keys written (with what they hold now) or deleted (`None`) after revision `after`.
    pub fn changed_since(&self, after: i64) -> impl Iterator<Item = (&[u8], Option<&Kv>)> {
        let written = self
            .state
            .kvs
            .iter()
            .filter(move |(_, kv)| kv.mod_revision > after)
            .map(|(k, kv)| (k.as_slice(), Some(kv)));
        let deleted = self
            .state
            .deleted
            .iter()
            .filter(move |(_, at)| **at > after)
            .map(|(k, _)| (k.as_slice(), None));
        written.chain(deleted)
    }
}

/// Why a read could not be answered fresh enough.
fn behind(state: &State) -> String {
    match &state.trouble {
        Some(why) => format!("the watch cache is behind etcd: {why}"),
        None => "the watch cache is behind etcd".to_string(),
    }
}

fn int(value: Option<&serde_json::Value>) -> Option<i64> {
    bell_wire::etcd::number(value)
}

/// A long-poll registered with the cache, until it is dropped.
pub struct Wait {
    cache: Arc<Cache>,
    id: u64,
    keys: Vec<Vec<u8>>,
    after: i64,
    notify: Arc<Notify>,
}

impl Wait {
    /// Whether one of its keys changed after its revision, and the cache's revision now.
    pub fn changed(&self) -> (bool, i64) {
        match self.cache.state.lock() {
            Ok(state) => (state.changed_after(&self.keys, self.after), state.revision),
            // A failed cache says "changed": the host pulls, and finds out.
            Err(_) => (true, 0),
        }
    }

    /// Waits until one of its keys changes, or `until`; what [`Wait::changed`] says then.
    pub async fn until(&self, until: tokio::time::Instant) -> (bool, i64) {
        loop {
            // A wake-up between this look and the await is kept by `Notify` as a permit.
            let seen = self.changed();
            if seen.0 {
                return seen;
            }
            tokio::select! {
                () = self.notify.notified() => {}
                () = tokio::time::sleep_until(until) => return self.changed(),
            }
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        let Ok(mut state) = self.cache.state.lock() else {
            return;
        };
        for key in &self.keys {
            if let Some(waiters) = state.waiters.get_mut(key) {
                waiters.remove(&self.id);
                if waiters.is_empty() {
                    state.waiters.remove(key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detached() -> Arc<Cache> {
        Cache::detached(b"/f/", b"/f0", 10)
    }

    fn event(key: &str, revision: i64, deleted: bool) -> Event {
        Event {
            key: key.as_bytes().to_vec(),
            value: if deleted { Vec::new() } else { b"v".to_vec() },
            mod_revision: revision,
            version: i64::from(!deleted),
            lease: 0,
            deleted,
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_part_left_out_is_neither_read_nor_kept() {
        let leaving_out = |from: &[u8], to: &[u8]| {
            let mut cache = Cache::detached(b"/f/", b"/f0", 10);
            Arc::get_mut(&mut cache).unwrap().left_out = Some((from.to_vec(), to.to_vec()));
            cache
        };
        let cache = leaving_out(b"/f/s/", b"/f/s0");
        let parts = |cache: &Cache| {
            cache
                .parts()
                .into_iter()
                .map(|(a, b)| {
                    format!(
                        "{}..{}",
                        String::from_utf8_lossy(&a),
                        String::from_utf8_lossy(&b)
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(parts(&cache), ["/f/../f/s/", "/f/s0../f0"]);
        cache.apply(
            11,
            vec![event("/f/a", 11, false), event("/f/s/a", 11, false)],
        );
        assert!(cache.holds(b"/f/a") && !cache.holds(b"/f/s/a"));
        let held: Vec<Vec<u8>> = cache.state.lock().unwrap().kvs.keys().cloned().collect();
        assert_eq!(held, [b"/f/a".to_vec()]);
        // A part left out at either end leaves one part; one past the range leaves it whole.
        assert_eq!(parts(&leaving_out(b"/", b"/f/b")), ["/f/b../f0"]);
        assert_eq!(parts(&leaving_out(b"/f/b", b"/g")), ["/f/../f/b"]);
        assert_eq!(parts(&leaving_out(b"/g", b"/h")), ["/f/../f0"]);
    }

    #[test]
    fn a_wait_sees_writes_and_deletions_after_its_revision_and_nothing_else() {
        let cache = detached();
        cache.apply(11, vec![event("/f/a", 11, false), event("/f/b", 11, false)]);
        let wait = |key: &str, after| cache.wait(vec![key.as_bytes().to_vec()], after).unwrap();
        assert!(!wait("/f/a", 11).changed().0);
        assert!(wait("/f/a", 10).changed().0, "written at 11");
        assert!(!wait("/f/never", 11).changed().0);
        cache.apply(12, vec![event("/f/b", 12, true)]);
        assert!(wait("/f/b", 11).changed().0, "deleted at 12");
        assert!(!wait("/f/b", 12).changed().0);
        // Written again: what counts is the last write.
        cache.apply(13, vec![event("/f/b", 13, false)]);
        assert!(wait("/f/b", 12).changed().0 && !wait("/f/b", 13).changed().0);
        // A wait from before the cache's first reading cannot be judged: it is answered at once.
        cache.state.lock().unwrap().forgotten_before = 13;
        assert!(wait("/f/a", 12).changed().0);
    }

    #[test]
    fn a_write_wakes_the_waits_of_its_key_and_a_wait_ends_at_its_time() {
        let cache = detached();
        let rt = runtime();
        let waiting = cache.wait(vec![b"/f/a".to_vec()], 10).unwrap();
        let other = cache.wait(vec![b"/f/b".to_vec()], 10).unwrap();
        let far = tokio::time::Instant::now() + Duration::from_secs(60);
        let writer = Arc::clone(&cache);
        let started = Instant::now();
        let (changed, revision) = rt.block_on(async {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                writer.apply(11, vec![event("/f/a", 11, false)]);
            });
            waiting.until(far).await
        });
        assert!(changed && revision == 11);
        assert!(started.elapsed() < Duration::from_secs(10));
        // The other key's wait is still waiting, and ends at its time unchanged.
        let soon = tokio::time::Instant::now() + Duration::from_millis(100);
        assert_eq!(rt.block_on(other.until(soon)), (false, 11));
        // Answered, the waits are gone from the cache.
        drop((waiting, other));
        assert!(cache.state.lock().unwrap().waiters.is_empty());
    }
}

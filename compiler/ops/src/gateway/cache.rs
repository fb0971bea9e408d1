//! The watch cache: every key of the fleet's part of the store in a replica's memory, read once
//! and kept current by an etcd watch from that revision (read again when etcd compacted past
//! it), so that what hosts read costs etcd nothing. A read is answered at a revision fresh
//! enough, as the Kubernetes API server's consistent reads from its cache are: etcd's current
//! revision is learned after the read arrived (one request shared by every read of the
//! moment), and the read waits for the cache to reach it; when the cache cannot, the read is
//! refused (429), never sent to etcd instead.

use bell_wire::etcd::{Etcd, WatchEnd};
use bell_wire::{base64, from_base64};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A key as the cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub value: Vec<u8>,
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
    /// etcd's current revision as last learned; the learnings begun, and the last one done
    /// (by number); whether a read waits for a learning begun after it came.
    learned: i64,
    begun: u64,
    done: u64,
    wanted: bool,
}

/// The cache of one range of keys.
pub struct Cache {
    key: Vec<u8>,
    range_end: Vec<u8>,
    state: Mutex<State>,
    changed: Condvar,
    /// Reads answered from memory.
    pub reads: AtomicU64,
}

/// The shortest time between two learnings of etcd's revision: reads that arrive within it
/// share one request.
const LEARN_EVERY: Duration = Duration::from_millis(50);

/// The longest a read waits for the cache to be fresh enough.
const FRESH_WITHIN: Duration = Duration::from_secs(3);

impl Cache {
    /// A cache of the keys from `key` up to `range_end`, filled and followed by threads of its
    /// own from now on.
    pub fn start(etcd: Etcd, key: Vec<u8>, range_end: Vec<u8>) -> Arc<Cache> {
        let cache = Arc::new(Cache {
            key,
            range_end,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            reads: AtomicU64::new(0),
        });
        let follower = Arc::clone(&cache);
        let follower_etcd = etcd.clone();
        std::thread::spawn(move || follower.follow(&follower_etcd));
        let learner = Arc::clone(&cache);
        std::thread::spawn(move || learner.learn(&etcd));
        cache
    }

    /// Whether `key` is in the cached range.
    pub fn holds(&self, key: &[u8]) -> bool {
        self.key.as_slice() <= key && key < self.range_end.as_slice()
    }

    /// Reads the range, then follows its changes, for ever.
    fn follow(&self, etcd: &Etcd) {
        let mut from = None;
        loop {
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
                    let Ok(mut state) = self.state.lock() else {
                        return false;
                    };
                    for event in events {
                        if event.deleted {
                            state.kvs.remove(&event.key);
                        } else {
                            let create_revision = state
                                .kvs
                                .get(&event.key)
                                .filter(|_| event.version > 1)
                                .map_or(event.mod_revision, |kv| kv.create_revision);
                            state.kvs.insert(
                                event.key,
                                Kv {
                                    value: event.value,
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
                    last = state.revision;
                    self.changed.notify_all();
                    true
                },
            );
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

    /// Reads the whole range at one revision into the cache; that revision.
    fn list(&self, etcd: &Etcd) -> Result<i64, String> {
        let body =
            serde_json::json!({ "key": base64(&self.key), "range_end": base64(&self.range_end) });
        let answer = etcd.forward("/v3/kv/range", &body).map_err(|(_, e)| e)?;
        let revision = int(answer.get("header").and_then(|h| h.get("revision")))
            .ok_or("etcd sent no revision")?;
        let mut kvs = BTreeMap::new();
        for kv in answer
            .get("kvs")
            .and_then(|k| k.as_array())
            .into_iter()
            .flatten()
        {
            let field = |name: &str| {
                kv.get(name)
                    .and_then(|v| v.as_str())
                    .map_or(Some(Vec::new()), from_base64)
            };
            let (Some(key), Some(value)) = (field("key"), field("value")) else {
                return Err("etcd sent bad base64".into());
            };
            kvs.insert(
                key,
                Kv {
                    value,
                    create_revision: int(kv.get("create_revision")).unwrap_or(0),
                    mod_revision: int(kv.get("mod_revision")).unwrap_or(0),
                    version: int(kv.get("version")).unwrap_or(0),
                    lease: int(kv.get("lease")).unwrap_or(0),
                },
            );
        }
        let mut state = self.state.lock().map_err(|_| "the cache failed")?;
        state.kvs = kvs;
        state.revision = revision;
        state.trouble = None;
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
                    state = match self.changed.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                }
                state.wanted = false;
                state.begun += 1;
            }
            // A read of one key of the range (none is at the prefix itself): the answer's
            // header has the revision, and the gateway's user may read it.
            let body = serde_json::json!({ "key": base64(&self.key), "keys_only": true });
            let learned = etcd
                .forward("/v3/kv/range", &body)
                .map_err(|(_, e)| e)
                .and_then(|answer| {
                    int(answer.get("header").and_then(|h| h.get("revision")))
                        .ok_or_else(|| "etcd sent no revision".to_string())
                });
            if let Ok(mut state) = self.state.lock() {
                match learned {
                    Ok(revision) => state.learned = state.learned.max(revision),
                    Err(e) => state.trouble = Some(e),
                }
                state.done = state.begun;
                self.changed.notify_all();
            }
            std::thread::sleep(LEARN_EVERY);
        }
    }

    /// The keys, as etcd holds them now: each read waits for a revision learned after it
    /// came, and for the cache to reach it. `Err` when it cannot within [`FRESH_WITHIN`].
    pub fn read(&self, keys: &[Vec<u8>]) -> Result<(i64, Vec<Option<Kv>>), String> {
        let until = Instant::now() + FRESH_WITHIN;
        let mut state = self.state.lock().map_err(|_| "the cache failed")?;
        let arrived = state.begun;
        state.wanted = true;
        self.changed.notify_all();
        loop {
            if state.done > arrived && state.revision >= state.learned && state.revision > 0 {
                break;
            }
            let now = Instant::now();
            if now >= until {
                return Err(match &state.trouble {
                    Some(why) => format!("the gateway's cache is behind etcd: {why}"),
                    None => "the gateway's cache is behind etcd".to_string(),
                });
            }
            state = self
                .changed
                .wait_timeout(state, until - now)
                .map_err(|_| "the cache failed")?
                .0;
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let found = keys.iter().map(|k| state.kvs.get(k).cloned()).collect();
        Ok((state.revision, found))
    }

    /// How many keys it holds, and at which revision.
    pub fn size(&self) -> (usize, i64) {
        self.state
            .lock()
            .map(|s| (s.kvs.len(), s.revision))
            .unwrap_or((0, 0))
    }
}

fn int(value: Option<&serde_json::Value>) -> Option<i64> {
    bell_wire::etcd::number(value)
}

/// A key as a range answer gives it.
pub fn kv_json(key: &[u8], kv: &Kv, keys_only: bool) -> serde_json::Value {
    let mut out = serde_json::json!({
        "key": base64(key),
        "create_revision": kv.create_revision.to_string(),
        "mod_revision": kv.mod_revision.to_string(),
        "version": kv.version.to_string(),
    });
    if !keys_only && !kv.value.is_empty() {
        out["value"] = base64(&kv.value).into();
    }
    if kv.lease != 0 {
        out["lease"] = kv.lease.to_string().into();
    }
    out
}

//! What a pull reads of the store in its first request, besides the desired release: the keys
//! that filing its report, renewing its liveness and giving back its slot would each read on
//! their own. A pull of a host that is up to date then costs one request (two when its lease
//! is renewed), where it cost seven on new connections; at a million hosts on a 15-minute
//! timer that is the difference between 1,100 and 7,800 requests a second on etcd.
//!
//! A read value decides nothing it would not have decided when read a moment later: each is
//! compared with what the host is about to write (its own report, its categories, its own
//! liveness key, whether it holds a slot), and every write stays guarded as before (the slot
//! by the semaphore's version, so a prefetched semaphore that changed since makes the
//! transaction fail and be read again).

use bell_wire::etcd::Held;
use std::collections::BTreeMap;

/// Keys read together at one revision, each with what it held (`None`: no such key), and the
/// store they were read from, so that a report filed elsewhere never takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prefetched {
    store: String,
    keys: BTreeMap<String, Option<Held>>,
}

impl Prefetched {
    pub(crate) fn new(store: String, keys: BTreeMap<String, Option<Held>>) -> Prefetched {
        Prefetched { store, keys }
    }

    /// What `key` held when it was read from `store`: `Some(None)` when it did not exist,
    /// `None` when it was not read (from that store).
    pub fn get(&self, store: &str, key: &str) -> Option<Option<&Held>> {
        if self.store != store {
            return None;
        }
        self.keys.get(key).map(Option::as_ref)
    }

    /// How many keys were read.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The keys a pull of `host` reads with its desired release: its `apply` report and the
/// categories that report sets, its liveness key, and the semaphore of the rollout group it
/// was in last (`slot`: the lock prefix and the group), when it knows one.
pub fn pull_keys(fleet: &str, host: &str, slot: Option<(&str, &str)>) -> Vec<String> {
    let mut keys = vec![crate::report_key(fleet, "apply", host)];
    keys.extend(
        crate::keys::STATUS_CATEGORIES
            .iter()
            .map(|category| crate::status_key(fleet, category, host)),
    );
    keys.push(crate::alive_key(fleet, host));
    if let Some((prefix, group)) = slot {
        keys.push(crate::keys::semaphore_key(prefix, group));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_read_from_another_store_is_not_known() {
        let held = Held {
            value: b"x".to_vec(),
            version: 3,
            lease: 0,
        };
        let read = Prefetched::new(
            "etcd://a:1".into(),
            [
                ("/k".to_string(), Some(held.clone())),
                ("/gone".to_string(), None),
            ]
            .into(),
        );
        assert_eq!(read.get("etcd://a:1", "/k"), Some(Some(&held)));
        assert_eq!(read.get("etcd://a:1", "/gone"), Some(None));
        assert_eq!(read.get("etcd://a:1", "/other"), None);
        assert_eq!(read.get("etcd://b:1", "/k"), None);
    }
}

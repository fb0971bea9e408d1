//! The gateway's reads from the watch cache ([`crate::watch`]): a host's read answered as
//! etcd would answer it, at a revision fresh enough, or refused with 429 (never sent to etcd
//! instead).

use super::Answer;
use bell_wire::base64;
use std::sync::Arc;

pub use crate::watch::{Cache, Found, Kv, Wait};

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

/// A host's read of keys the cache holds: the keys, each range's shape (`keys_only`,
/// `count_only`), and whether it came as a transaction.
pub struct CachedRead {
    pub cache: Arc<Cache>,
    pub keys: Vec<Vec<u8>>,
    pub shapes: Vec<(bool, bool)>,
    pub txn: bool,
}

impl CachedRead {
    /// The answer, waiting on this thread for the cache to be fresh enough.
    pub fn answer_blocking(&self) -> Answer {
        self.answer(self.cache.read(&self.keys))
    }

    /// The answer, waiting as a task (no thread is held) for the cache to be fresh enough.
    pub async fn answer_when_fresh(&self) -> Answer {
        self.answer(self.cache.read_when_fresh(&self.keys).await)
    }

    /// The answer etcd would give, from what the cache read; 429 when it could not.
    fn answer(&self, read: Result<Found, String>) -> Answer {
        let (revision, found) = match read {
            Ok(read) => read,
            Err(why) => {
                let mut answer = Answer::refusal(429, &why);
                answer.retry_after = Some(1);
                return answer;
            }
        };
        let header = serde_json::json!({ "revision": revision.to_string() });
        let range_answer = |(keys_only, count_only): (bool, bool), key: &[u8], kv: &Option<Kv>| {
            let mut out = serde_json::json!({ "header": header.clone() });
            if let Some(kv) = kv {
                out["count"] = "1".into();
                if !count_only {
                    out["kvs"] = serde_json::json!([kv_json(key, kv, keys_only)]);
                }
            }
            out
        };
        let answer = if self.txn {
            let responses: Vec<serde_json::Value> = self
                .shapes
                .iter()
                .zip(&self.keys)
                .zip(&found)
                .map(|((shape, key), kv)| {
                    serde_json::json!({ "response_range": range_answer(*shape, key, kv) })
                })
                .collect();
            serde_json::json!({ "header": header, "succeeded": true, "responses": responses })
        } else {
            match (self.shapes.first(), self.keys.first(), found.first()) {
                (Some(shape), Some(key), Some(kv)) => range_answer(*shape, key, kv),
                _ => return Answer::refusal(400, "a read of no key"),
            }
        };
        Answer::json(&answer)
    }
}

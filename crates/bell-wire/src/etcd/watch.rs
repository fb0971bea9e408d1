//! A watch: every change to a range of keys from a revision on, as etcd's gateway streams it
//! (one JSON object per line), for a cache kept current without reading the range again.

use super::*;

/// One change of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub key: Vec<u8>,
    /// Empty for a delete.
    pub value: Vec<u8>,
    pub mod_revision: i64,
    /// Writes since the key was created (0 for a delete).
    pub version: i64,
    /// The lease the key is bound to (0: none).
    pub lease: i64,
    pub deleted: bool,
}

/// Why a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEnd {
    /// The callback asked it to.
    Stopped,
    /// The revision asked for is compacted away: read the range again, and watch from there.
    Compacted(i64),
    /// The stream broke, or no member would start it: watch again from the last revision seen.
    Broken(String),
}

/// How long a watch may be silent before it is taken for dead: etcd sends a progress
/// notification every ten minutes (asked for below) on a watch that saw no change.
const SILENCE: Duration = Duration::from_secs(11 * 60);

impl Etcd {
    /// Watches the keys from `key` up to `range_end` (empty: `key` alone) from revision
    /// `start` on: `on(revision, events)` for each batch (after `on(0, [])` once the watch
    /// stands), until `on` returns false or the watch ends.
    pub fn watch(
        &self,
        key: &[u8],
        range_end: &[u8],
        start: i64,
        on: &mut dyn FnMut(i64, Vec<Event>) -> bool,
    ) -> WatchEnd {
        let body = serde_json::json!({ "create_request": {
            "key": base64(key),
            "range_end": base64(range_end),
            "start_revision": start.to_string(),
            "progress_notify": true,
        }})
        .to_string();
        let count = self.endpoints.len();
        let first = self.current.load(Ordering::Relaxed) % count;
        let mut failures = Vec::new();
        for step in 0..count {
            let at = (first + step) % count;
            let endpoint = &self.endpoints[at];
            let authorization = match self.authorization_for(at, "/v3/watch", &body) {
                Ok(authorization) => authorization,
                Err(Failure::Refused(e) | Failure::Unreachable(e) | Failure::Throttled(e, _)) => {
                    failures.push(format!("{endpoint}: {e}"));
                    continue;
                }
            };
            self.requests.fetch_add(1, Ordering::Relaxed);
            let bounds = crate::client::Bounds {
                deadline: crate::Deadline::after(
                    Duration::from_secs(24 * 3600),
                    "the watch ran a day",
                ),
                connect: CONNECT_TIMEOUT,
                read: SILENCE,
                max_bytes: self.limits.answer_bytes,
            };
            let lines = crate::client::post_lines(
                endpoint,
                self.tls.as_ref(),
                &bounds,
                "/v3/watch",
                authorization.as_deref(),
                &body,
            );
            let mut lines = match lines {
                Ok(lines) => lines,
                Err(e) => {
                    self.forget_token(at);
                    failures.push(format!("{endpoint}: {e}"));
                    continue;
                }
            };
            self.current.store(at, Ordering::Relaxed);
            return follow(&mut lines, on);
        }
        WatchEnd::Broken(format!(
            "no etcd endpoint would watch ({})",
            failures.join("; ")
        ))
    }
}

/// Reads a started watch's messages until it ends.
fn follow(
    lines: &mut crate::client::Lines,
    on: &mut dyn FnMut(i64, Vec<Event>) -> bool,
) -> WatchEnd {
    loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return WatchEnd::Broken("the member ended the watch".into()),
            Err(e) => return WatchEnd::Broken(e),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: serde_json::Value = match serde_json::from_slice(&line) {
            Ok(message) => message,
            Err(e) => return WatchEnd::Broken(format!("a watch message that is not JSON: {e}")),
        };
        if let Some(error) = message.get("error") {
            return WatchEnd::Broken(format!("the watch failed: {error}"));
        }
        let Some(result) = message.get("result") else {
            continue;
        };
        if result.get("canceled").and_then(|c| c.as_bool()) == Some(true) {
            return match number(result.get("compact_revision")).filter(|r| *r > 0) {
                Some(revision) => WatchEnd::Compacted(revision),
                None => WatchEnd::Broken(format!(
                    "the member canceled the watch: {}",
                    result
                        .get("cancel_reason")
                        .and_then(|r| r.as_str())
                        .unwrap_or("no reason")
                )),
            };
        }
        // The message that says the watch was made carries etcd's revision now, but the events
        // from the start revision up to it come after: a reader that took it as "seen up to
        // here" would think itself fresh before it is. It is told as revision 0: the watch
        // stands, nothing is seen yet.
        if result.get("created").and_then(|c| c.as_bool()) == Some(true) {
            if !on(0, Vec::new()) {
                return WatchEnd::Stopped;
            }
            continue;
        }
        let Some(revision) = number(result.get("header").and_then(|h| h.get("revision"))) else {
            return WatchEnd::Broken("a watch message without a revision".into());
        };
        let mut events = Vec::new();
        for event in result
            .get("events")
            .and_then(|e| e.as_array())
            .into_iter()
            .flatten()
        {
            let Some(kv) = event.get("kv") else { continue };
            let bytes = |field: &str| {
                kv.get(field)
                    .and_then(|v| v.as_str())
                    .map_or(Some(Vec::new()), from_base64)
            };
            let (Some(key), Some(value)) = (bytes("key"), bytes("value")) else {
                return WatchEnd::Broken("a watch event with bad base64".into());
            };
            events.push(Event {
                key,
                value,
                mod_revision: number(kv.get("mod_revision")).unwrap_or(revision),
                version: number(kv.get("version")).unwrap_or(0),
                lease: number(kv.get("lease")).unwrap_or(0),
                deleted: event.get("type").and_then(|t| t.as_str()) == Some("DELETE"),
            });
        }
        if !on(revision, events) {
            return WatchEnd::Stopped;
        }
    }
}

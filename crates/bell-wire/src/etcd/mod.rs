//! A minimal etcd v3 client over the server's HTTP/JSON gateway (`/v3/kv/...`): HTTP/1.1 on a
//! `std::net::TcpStream`, one request per connection, over TLS (rustls, see [`crate::tls`])
//! for `etcds://`. bell-run stays a small synchronous binary with no async runtime (the
//! maintained gRPC client, `etcd-client`, brings tokio and tonic).
//!
//! A cluster is given as several endpoints. A request goes to the endpoint that answered last
//! and moves on to the next when one cannot be reached, times out or answers with a server
//! error (a member that lost its leader, or quorum), so a dead member costs one refused
//! connection. Every request bell makes is safe to send twice: puts and deletes are
//! idempotent, and transactions compare versions.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const TIMEOUT: Duration = Duration::from_secs(10);
/// Pauses before the second and third round over every endpoint: a leader election after a
/// member died takes about a second (etcd's default election timeout).
const ROUND_PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1500)];

/// How long one request to the store may take, from its connection to the last byte of its
/// answer, and how large the answer may be. Whoever can write a key or answer in etcd's place
/// could otherwise hold a reader with a byte every few seconds, or fill its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Each request's own deadline, from its first connection.
    pub request: Duration,
    /// And none runs past this moment (`bell-run pull --fetch-timeout`: the whole pull's).
    pub until: Option<std::time::Instant>,
    /// The largest answer read: one larger is refused with what was read of it dropped.
    pub answer_bytes: u64,
    /// How long in all a request signed for the fleet's gateway waits, when the gateway
    /// answers 429 with a `Retry-After`, before it is signed and sent again (each request the
    /// gateway refuses in the meantime makes its wait longer).
    pub throttled_waits: Duration,
}

impl Limits {
    /// bellc's: the reports of a 100,000-host fleet are about 300 MiB, read in seconds.
    pub const READER: Limits = Limits {
        request: Duration::from_secs(120),
        until: None,
        answer_bytes: 1 << 30,
        throttled_waits: Duration::ZERO,
    };
    /// A host's: it reads a handful of its own keys and its group's semaphore.
    pub const HOST: Limits = Limits {
        request: Duration::from_secs(60),
        until: None,
        answer_bytes: 8 << 20,
        throttled_waits: Duration::from_secs(30),
    };

    /// These limits, with no request past `deadline`.
    pub fn until(self, deadline: crate::Deadline) -> Limits {
        Limits {
            until: Some(deadline.instant()),
            ..self
        }
    }

    /// How a request that starts now is bounded: its own deadline, or `until` when sooner,
    /// which passes with the words `late` (the store's, or a web server's in its place).
    pub fn bounds(&self, late: &'static str) -> crate::client::Bounds {
        let own = std::time::Instant::now() + self.request;
        let at = self.until.map_or(own, |until| until.min(own));
        crate::client::Bounds {
            deadline: crate::Deadline::at(at, late),
            connect: CONNECT_TIMEOUT,
            read: TIMEOUT,
            max_bytes: self.answer_bytes,
        }
    }
}

/// An etcd cluster: one or more `HOST:PORT` endpoints.
#[derive(Debug)]
pub struct Etcd {
    endpoints: Vec<String>,
    /// For `etcds://`: how every endpoint is spoken to.
    tls: Option<crate::tls::Tls>,
    /// For a store with users (`--store-user`): who this client is, shared by clones.
    auth: Option<Arc<Auth>>,
    /// For a host speaking to the fleet's gateway: what signs each request instead.
    signer: Option<RequestSigner>,
    /// The endpoint that answered last, where the next request starts.
    current: AtomicUsize,
    /// Requests sent (each endpoint tried, each login and each retry counts once), shared by
    /// clones: what a benchmark divides by the hosts it served.
    requests: Arc<AtomicU64>,
    limits: Limits,
}

impl Clone for Etcd {
    fn clone(&self) -> Etcd {
        Etcd {
            endpoints: self.endpoints.clone(),
            tls: self.tls.clone(),
            auth: self.auth.clone(),
            signer: self.signer.clone(),
            current: AtomicUsize::new(self.current.load(Ordering::Relaxed)),
            requests: Arc::clone(&self.requests),
            limits: self.limits,
        }
    }
}

impl PartialEq for Etcd {
    fn eq(&self, other: &Etcd) -> bool {
        self.endpoints == other.endpoints && self.tls.is_some() == other.tls.is_some()
    }
}

impl Eq for Etcd {}

/// What signs a host's every request to the gateway: the `Authorization` header for a request's
/// path and body (see `bell_store::gateway`).
#[derive(Clone)]
pub struct RequestSigner(pub Arc<SignRequest>);

/// The `Authorization` header for a request's path and body.
pub type SignRequest = dyn Fn(&str, &[u8]) -> String + Send + Sync;

/// One signer is equal only to itself.
impl PartialEq for RequestSigner {
    fn eq(&self, other: &RequestSigner) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RequestSigner {}

/// Never the key.
impl std::fmt::Debug for RequestSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestSigner")
    }
}

/// One write of a transaction.
pub enum Op<'a> {
    Put(&'a str, &'a [u8]),
    /// A put bound to a lease: the key goes when the lease does.
    PutWithLease(&'a str, &'a [u8], i64),
    Delete(&'a str),
}

impl Op<'_> {
    fn request(&self) -> serde_json::Value {
        match self {
            Op::Put(key, value) => serde_json::json!({
                "request_put": { "key": base64(key.as_bytes()), "value": base64(value) }
            }),
            Op::PutWithLease(key, value, lease) => serde_json::json!({
                "request_put": {
                    "key": base64(key.as_bytes()), "value": base64(value), "lease": lease.to_string()
                }
            }),
            Op::Delete(key) => serde_json::json!({
                "request_delete_range": { "key": base64(key.as_bytes()) }
            }),
        }
    }
}

/// The most operations etcd takes in one transaction (its `--max-txn-ops` default).
pub const MAX_TXN_OPS: usize = 128;

/// The fleet gateway's one request of its own: a host's long-poll for a change of the keys its
/// pull decided on (`{"keys": [BASE64…], "revision": "R", "timeout": "SECONDS"}`), answered
/// `{"header": {"revision": …}, "changed": BOOL}` when one is written or deleted after R, or
/// when the time is up.
pub const WAIT_PATH: &str = "/bell/v1/wait";

/// An int64 as the gateway sends it (a string; a number from some versions).
pub fn number(value: Option<&serde_json::Value>) -> Option<i64> {
    match value? {
        serde_json::Value::String(text) => text.parse().ok(),
        other => other.as_i64(),
    }
}

pub use bytes::Bytes;

/// One key and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    /// Shared with every other copy of the key (a clone copies no bytes).
    pub value: bytes::Bytes,
    /// The revision of the key's last write: what was written after a given moment.
    pub mod_revision: i64,
}

/// A key as [`Etcd::range_page`] reads it: everything etcd says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    /// Possibly a slice of the whole answer it came in (see [`KeyValue`]'s).
    pub value: bytes::Bytes,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    /// 0: none.
    pub lease: i64,
}

/// One page of a range: the revision it was read at, its keys, and whether more follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub revision: i64,
    pub entries: Vec<Entry>,
    pub more: bool,
}

/// A key's value as read, with its version (writes since it was created) and the lease it is
/// bound to (0: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub value: Vec<u8>,
    pub version: i64,
    pub lease: i64,
}

/// What a role may do with a key or a range of keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "READ",
            Access::Write => "WRITE",
            Access::ReadWrite => "READWRITE",
        }
    }
}

/// One permission of an etcd role: `key` alone when `range_end` is empty, else every key from
/// `key` up to (not including) `range_end`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    pub access: Access,
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
}

impl Permission {
    /// `key` and nothing else.
    pub fn key(access: Access, key: &str) -> Permission {
        Permission {
            access,
            key: key.as_bytes().to_vec(),
            range_end: Vec::new(),
        }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(access: Access, prefix: &str) -> Permission {
        Permission {
            access,
            key: prefix.as_bytes().to_vec(),
            range_end: prefix_end(prefix.as_bytes()),
        }
    }

    /// As `etcdctl role get` would show it: `READWRITE /bell/f/running/h1`, or
    /// `READ /bell/f/ (prefix)`.
    pub fn describe(&self) -> String {
        let key = String::from_utf8_lossy(&self.key);
        if self.range_end.is_empty() {
            format!("{} {key}", self.access.as_str())
        } else if self.range_end == prefix_end(&self.key) {
            format!("{} {key} (prefix)", self.access.as_str())
        } else {
            let end = String::from_utf8_lossy(&self.range_end);
            format!("{} [{key}, {end})", self.access.as_str())
        }
    }
}

/// Why one endpoint did not give an answer: worth asking another (`Unreachable`), or an
/// answer that another member would repeat (`Refused`).
enum Failure {
    Unreachable(String),
    Refused(String),
    /// Refused for now (HTTP 429), to be sent again after this many seconds.
    Throttled(String, u64),
}

impl Etcd {
    /// Parses `etcd://HOST:PORT[,HOST:PORT...]` (no path, no credentials), or `etcds://` for
    /// TLS with the system's CAs.
    pub fn parse(url: &str) -> Result<Etcd, String> {
        Etcd::open(url, &StoreAccess::default())
    }

    /// Parses the URL and loads what `access` names: `etcds://` speaks TLS, verifying the
    /// members against `--store-ca` (or the system's CAs) and presenting `--store-cert`.
    pub fn open(url: &str, access: &StoreAccess) -> Result<Etcd, String> {
        let (endpoints, tls) = Etcd::check(url, access)?;
        let count = endpoints.len();
        let mut etcd = Etcd::new(endpoints);
        if tls {
            etcd.tls = Some(crate::tls::Tls::load(
                &access.tls,
                ["--store-ca", "--store-cert", "--store-key"],
            )?);
        }
        etcd.signer = access.signer.clone();
        if let Some(user) = &access.user {
            let file = access
                .password_file
                .as_deref()
                .ok_or("`--store-user` needs `--store-password-file FILE`")?;
            etcd.auth = Some(Arc::new(Auth {
                user: user.clone(),
                password: read_password(file)?,
                password_file: file.to_path_buf(),
                tokens: std::sync::Mutex::new(vec![None; count]),
            }));
        }
        Ok(etcd)
    }

    /// The endpoints of the URL, and whether it asks for TLS; an error when it is not an
    /// etcd URL, or when `access` names TLS files for plain HTTP. Reads no file.
    pub fn check(url: &str, access: &StoreAccess) -> Result<(Vec<String>, bool), String> {
        let expected = "expected `etcd://HOST:PORT` (or `etcds://` for TLS), or several \
                        endpoints of one cluster separated by commas, such as \
                        `etcds://10.0.0.1:2379,10.0.0.2:2379`";
        let (rest, tls) = if let Some(rest) = url.strip_prefix("etcds://") {
            (rest, true)
        } else if let Some(rest) = url.strip_prefix("etcd://") {
            (rest, false)
        } else {
            return Err(format!("`{url}` is not an etcd URL; {expected}"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut endpoints = Vec::new();
        for endpoint in rest.split(',') {
            let port_ok = endpoint
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !port_ok || endpoint.contains(['/', '@']) || endpoint.contains(char::is_whitespace) {
                return Err(format!(
                    "`{url}` is not an etcd URL: `{endpoint}` is not HOST:PORT; {expected}"
                ));
            }
            if endpoints.iter().any(|e| e == endpoint) {
                return Err(format!("`{url}` names the endpoint `{endpoint}` twice"));
            }
            endpoints.push(endpoint.to_string());
        }
        if !tls && !access.tls.is_empty() {
            return Err(format!(
                "`--store-ca`, `--store-cert` and `--store-key` are for TLS: write `etcds://` \
                 instead of `{url}`"
            ));
        }
        if access.signer.is_some() {
            if !tls {
                return Err(format!(
                    "the gateway speaks HTTPS only: write `https://` instead of `{url}`"
                ));
            }
            if access.user.is_some() {
                return Err(
                    "a host speaks to the gateway with its identity: drop `--store-user` and \
                     `--store-password-file`"
                        .into(),
                );
            }
        }
        match (&access.user, &access.password_file) {
            (Some(_), _) if !tls => {
                return Err(format!(
                    "`--store-user` would send its password in the clear to `{url}`: write \
                     `etcds://` (etcd's users need TLS)"
                ))
            }
            (Some(user), _) if !is_user_name(user) => {
                return Err(format!(
                    "`--store-user {}` is not an etcd user name bell uses (letters, digits, \
                     `-`, `_`, `.` and `/`, as `host/FLEET/HOST`)",
                    user.escape_debug()
                ))
            }
            (Some(_), None) => {
                return Err("`--store-user` needs `--store-password-file FILE`".into())
            }
            (None, Some(_)) => {
                return Err("`--store-password-file` needs `--store-user NAME`".into())
            }
            _ => {}
        }
        Ok((endpoints, tls))
    }

    /// A client of the cluster at `endpoints` (`HOST:PORT` each, at least one), over plain
    /// HTTP.
    pub fn new(endpoints: Vec<String>) -> Etcd {
        assert!(!endpoints.is_empty(), "an etcd client needs an endpoint");
        Etcd {
            endpoints,
            tls: None,
            auth: None,
            signer: None,
            current: AtomicUsize::new(0),
            requests: Arc::new(AtomicU64::new(0)),
            limits: Limits::READER,
        }
    }

    /// This client with every request signed by `signer` (a host speaking to the gateway,
    /// which takes no etcd user).
    pub fn with_signer(mut self, signer: RequestSigner) -> Etcd {
        self.signer = Some(signer);
        self
    }

    /// One request as etcd's JSON gateway takes it, answered with its JSON: what the fleet's
    /// gateway forwards (each request checked by the gateway first).
    /// `Err((true, why))` when a member answered with a refusal (every member would say the
    /// same), `Err((false, why))` when none answered.
    pub fn forward(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, (bool, String)> {
        self.call_classified(path, body, &|bytes| {
            serde_json::from_slice(bytes).map_err(|e| e.to_string())
        })
        .map_err(|f| match f {
            Failure::Refused(e) | Failure::Throttled(e, _) => (true, e),
            Failure::Unreachable(e) => (false, e),
        })
    }

    /// This client with `limits` on every request (a host's: [`Limits::HOST`]).
    pub fn with_limits(mut self, limits: Limits) -> Etcd {
        self.limits = limits;
        self
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// `etcd://HOST:PORT[,...]` (`etcds://` over TLS), as it was given.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "etcds" } else { "etcd" };
        format!("{scheme}://{}", self.endpoints.join(","))
    }

    pub fn put(&self, key: &str, value: &[u8]) -> Result<(), String> {
        let body = serde_json::json!({ "key": base64(key.as_bytes()), "value": base64(value) });
        self.call("/v3/kv/put", &body).map(|_| ())
    }

    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        let body = serde_json::json!({ "key": base64(key.as_bytes()) });
        let kvs = kvs(&self.call("/v3/kv/range", &body)?)?;
        Ok(kvs.into_iter().next().map(|kv| kv.value.into()))
    }

    /// Every key starting with `prefix`, sorted by key.
    pub fn range_prefix(&self, prefix: &str) -> Result<Vec<KeyValue>, String> {
        let body = serde_json::json!({
            "key": base64(prefix.as_bytes()),
            "range_end": base64(&prefix_end(prefix.as_bytes())),
        });
        // A fleet's range can be hundreds of MiB: read it into its keys and values directly,
        // not through a tree of JSON values first.
        self.call_parsed("/v3/kv/range", &body, &range_kvs)
    }

    /// Up to `limit` keys from `key` (inclusive) up to `range_end`, in key order, at
    /// `revision` (0: now): a page of a range too large to read in one answer, read without a
    /// JSON tree. The next page starts just after the last key of this one, at the revision
    /// this one names.
    pub fn range_page(
        &self,
        key: &[u8],
        range_end: &[u8],
        limit: usize,
        revision: i64,
    ) -> Result<Page, String> {
        let mut body = serde_json::json!({
            "key": base64(key),
            "range_end": base64(range_end),
            "limit": limit.to_string(),
        });
        if revision > 0 {
            body["revision"] = revision.to_string().into();
        }
        self.call_parsed("/v3/kv/range", &body, &wire::range_page)
    }

    /// The value of `key` and its version (etcd's count of writes since the key was created;
    /// 0 when there is no key), for a transaction that compares it.
    pub fn get_versioned(&self, key: &str) -> Result<(Option<Vec<u8>>, i64), String> {
        let body = serde_json::json!({ "key": base64(key.as_bytes()) });
        let Some(kv) = self.range_one(&body)? else {
            return Ok((None, 0));
        };
        let version = number(kv.get("version")).ok_or("etcd sent a key without a version")?;
        let value = match kv.get("value").and_then(|v| v.as_str()) {
            None => Vec::new(),
            Some(text) => from_base64(text).ok_or("etcd sent a bad base64 value")?,
        };
        Ok((Some(value), version))
    }

    /// The version of `key` (0 when there is none) and the lease it is bound to (0: none).
    pub fn get_lease(&self, key: &str) -> Result<(i64, i64), String> {
        let body = serde_json::json!({ "key": base64(key.as_bytes()), "keys_only": true });
        let Some(kv) = self.range_one(&body)? else {
            return Ok((0, 0));
        };
        let version = number(kv.get("version")).ok_or("etcd sent a key without a version")?;
        Ok((version, number(kv.get("lease")).unwrap_or(0)))
    }

    /// The one key a range request for a single key answers with, if it exists.
    fn range_one(&self, body: &serde_json::Value) -> Result<Option<serde_json::Value>, String> {
        let answer = self.call("/v3/kv/range", body)?;
        Ok(answer
            .get("kvs")
            .and_then(|k| k.as_array())
            .and_then(|k| k.first())
            .cloned())
    }

    /// Applies `ops` in one transaction if `key` is still at `version` (0: it does not exist).
    /// `Ok(false)` when someone changed it first: read again and decide again.
    pub fn put_if_version(&self, key: &str, version: i64, ops: &[Op]) -> Result<bool, String> {
        let requests: Vec<serde_json::Value> = ops.iter().map(Op::request).collect();
        let body = serde_json::json!({
            "compare": [{
                "key": base64(key.as_bytes()),
                "result": "EQUAL",
                "target": "VERSION",
                "version": version.to_string(),
            }],
            "success": requests,
        });
        let answer = self.call("/v3/kv/txn", &body)?;
        Ok(answer.get("succeeded").and_then(|s| s.as_bool()) == Some(true))
    }

    /// Applies `ops` (at most [`MAX_TXN_OPS`]) in one transaction: a reader sees all or none.
    /// The revision it made.
    pub fn write_all(&self, ops: &[Op]) -> Result<i64, String> {
        let requests: Vec<serde_json::Value> = ops.iter().map(Op::request).collect();
        let answer = self.call("/v3/kv/txn", &serde_json::json!({ "success": requests }))?;
        number(answer.get("header").and_then(|h| h.get("revision")))
            .ok_or_else(|| "etcd sent no revision".to_string())
    }

    /// The values of `keys`, read at one revision (one transaction): two keys that are
    /// written together are never seen one old and one new.
    pub fn get_all(&self, keys: &[&str]) -> Result<Vec<Option<Vec<u8>>>, String> {
        Ok(self
            .read_all(keys)?
            .into_iter()
            .map(|held| held.map(|h| h.value))
            .collect())
    }

    /// [`Etcd::get_all`], with each key's version and lease: what a later transaction that
    /// compares the version, or a lease renewal, needs without reading the key again.
    pub fn read_all(&self, keys: &[&str]) -> Result<Vec<Option<Held>>, String> {
        Ok(self.read_all_at(keys)?.1)
    }

    /// [`Etcd::read_all`], with the revision it read at.
    pub fn read_all_at(&self, keys: &[&str]) -> Result<(i64, Vec<Option<Held>>), String> {
        let requests: Vec<serde_json::Value> = keys
            .iter()
            .map(|key| serde_json::json!({ "request_range": { "key": base64(key.as_bytes()) } }))
            .collect();
        let answer = self.call("/v3/kv/txn", &serde_json::json!({ "success": requests }))?;
        let responses = answer
            .get("responses")
            .and_then(|r| r.as_array())
            .cloned()
            .unwrap_or_default();
        if responses.len() != keys.len() {
            return Err(format!(
                "etcd answered {} of {} reads in a transaction",
                responses.len(),
                keys.len()
            ));
        }
        let revision = number(answer.get("header").and_then(|h| h.get("revision"))).unwrap_or(0);
        let held = responses
            .iter()
            .map(|r| {
                let kv = r
                    .get("response_range")
                    .and_then(|range| range.get("kvs"))
                    .and_then(|kvs| kvs.as_array())
                    .and_then(|kvs| kvs.first());
                let Some(kv) = kv else { return Ok(None) };
                let value = match kv.get("value").and_then(|v| v.as_str()) {
                    // The gateway leaves out empty fields (an empty value).
                    None => Vec::new(),
                    Some(text) => from_base64(text).ok_or("etcd sent a bad base64 value")?,
                };
                Ok(Some(Held {
                    value,
                    version: number(kv.get("version")).unwrap_or(0),
                    lease: number(kv.get("lease")).unwrap_or(0),
                }))
            })
            .collect::<Result<_, String>>()?;
        Ok((revision, held))
    }

    /// A long-poll at the fleet's gateway (`bell_store::gateway::WAIT_PATH`, no request of
    /// etcd's): whether one of `keys` was written or deleted after `revision`, answered as soon
    /// as one is or after `seconds` (and the request's own limit must outlast them).
    pub fn wait_for_change(
        &self,
        keys: &[&str],
        revision: i64,
        seconds: u64,
    ) -> Result<bool, String> {
        let keys: Vec<String> = keys.iter().map(|k| base64(k.as_bytes())).collect();
        let body = serde_json::json!({
            "keys": keys,
            "revision": revision.to_string(),
            "timeout": seconds.to_string(),
        });
        let answer = self.call(WAIT_PATH, &body)?;
        answer
            .get("changed")
            .and_then(|c| c.as_bool())
            .ok_or_else(|| "the gateway's answer to a wait says nothing of a change".to_string())
    }

    /// How many requests this client (and its clones) sent.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// A new lease of `ttl` seconds; its id.
    pub fn grant_lease(&self, ttl: u64) -> Result<i64, String> {
        let answer = self.call("/v3/lease/grant", &serde_json::json!({ "TTL": ttl }))?;
        number(answer.get("ID")).ok_or_else(|| "etcd granted a lease without an id".to_string())
    }

    /// Renews lease `id` (no revision: the key space does not change); `Ok(false)` when it
    /// expired or never existed.
    pub fn keep_alive(&self, id: i64) -> Result<bool, String> {
        let answer = self.call(
            "/v3/lease/keepalive",
            &serde_json::json!({ "ID": id.to_string() }),
        )?;
        let result = answer.get("result").unwrap_or(&answer);
        Ok(number(result.get("TTL")).is_some_and(|ttl| ttl > 0))
    }

    /// Ends lease `id` now, and with it every key bound to it.
    pub fn revoke_lease(&self, id: i64) -> Result<(), String> {
        self.call(
            "/v3/lease/revoke",
            &serde_json::json!({ "ID": id.to_string() }),
        )
        .map(|_| ())
    }

    /// Puts `key` bound to lease `id`: it goes when the lease expires.
    pub fn put_with_lease(&self, key: &str, value: &[u8], id: i64) -> Result<(), String> {
        let body = serde_json::json!({
            "key": base64(key.as_bytes()),
            "value": base64(value),
            "lease": id.to_string(),
        });
        self.call("/v3/kv/put", &body).map(|_| ())
    }

    /// The size of the answering member's database file in bytes (what etcd's quota counts).
    pub fn db_size(&self) -> Result<u64, String> {
        let answer = self.call("/v3/maintenance/status", &serde_json::json!({}))?;
        number(answer.get("dbSize"))
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| "etcd sent no database size".to_string())
    }

    /// The cluster's current revision: how many changes the key space has seen.
    pub fn revision(&self) -> Result<i64, String> {
        let body = serde_json::json!({ "key": base64(b"\0"), "count_only": true });
        let answer = self.call("/v3/kv/range", &body)?;
        number(answer.get("header").and_then(|h| h.get("revision")))
            .ok_or_else(|| "etcd sent no revision".to_string())
    }

    pub fn delete(&self, key: &str) -> Result<(), String> {
        let body = serde_json::json!({ "key": base64(key.as_bytes()) });
        self.call("/v3/kv/deleterange", &body).map(|_| ())
    }

    /// The etcd user's roles, or `None` when there is no such user (`/v3/auth/user/get`).
    pub fn user_roles(&self, user: &str) -> Result<Option<Vec<String>>, String> {
        match self.call("/v3/auth/user/get", &serde_json::json!({ "name": user })) {
            Ok(answer) => Ok(Some(
                answer
                    .get("roles")
                    .and_then(|r| r.as_array())
                    .map(|roles| {
                        roles
                            .iter()
                            .filter_map(|r| r.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            Err(e) if e.contains("user name not found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Adds a user with a password; the password is in no message.
    pub fn user_add(&self, user: &str, password: &str) -> Result<(), String> {
        let body = serde_json::json!({ "name": user, "password": password });
        self.call("/v3/auth/user/add", &body).map(|_| ())
    }

    pub fn user_grant_role(&self, user: &str, role: &str) -> Result<(), String> {
        let body = serde_json::json!({ "user": user, "role": role });
        self.call("/v3/auth/user/grant", &body).map(|_| ())
    }

    /// The role's permissions, or `None` when there is no such role.
    pub fn role_permissions(&self, role: &str) -> Result<Option<Vec<Permission>>, String> {
        let answer = match self.call("/v3/auth/role/get", &serde_json::json!({ "role": role })) {
            Ok(answer) => answer,
            Err(e) if e.contains("role name not found") => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for perm in answer
            .get("perm")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            let field = |name: &str| -> Result<Vec<u8>, String> {
                match perm.get(name).and_then(|v| v.as_str()) {
                    None => Ok(Vec::new()),
                    Some(text) => {
                        from_base64(text).ok_or_else(|| format!("etcd sent a bad base64 {name}"))
                    }
                }
            };
            // The gateway leaves out the enum's first value, READ.
            let access = match perm.get("permType").and_then(|t| t.as_str()) {
                None | Some("READ") => Access::Read,
                Some("WRITE") => Access::Write,
                Some("READWRITE") => Access::ReadWrite,
                Some(other) => return Err(format!("etcd sent a permission type `{other}`")),
            };
            out.push(Permission {
                access,
                key: field("key")?,
                range_end: field("range_end")?,
            });
        }
        out.sort();
        Ok(Some(out))
    }

    /// Every etcd user's name (`/v3/auth/user/list`).
    pub fn user_list(&self) -> Result<Vec<String>, String> {
        let answer = self.call("/v3/auth/user/list", &serde_json::json!({}))?;
        Ok(names(answer.get("users")))
    }

    /// Every etcd role's name (`/v3/auth/role/list`).
    pub fn role_list(&self) -> Result<Vec<String>, String> {
        let answer = self.call("/v3/auth/role/list", &serde_json::json!({}))?;
        Ok(names(answer.get("roles")))
    }

    pub fn user_delete(&self, user: &str) -> Result<(), String> {
        self.call("/v3/auth/user/delete", &serde_json::json!({ "name": user }))
            .map(|_| ())
    }

    pub fn role_delete(&self, role: &str) -> Result<(), String> {
        self.call("/v3/auth/role/delete", &serde_json::json!({ "role": role }))
            .map(|_| ())
    }

    pub fn role_add(&self, role: &str) -> Result<(), String> {
        self.call("/v3/auth/role/add", &serde_json::json!({ "name": role }))
            .map(|_| ())
    }

    pub fn role_grant(&self, role: &str, perm: &Permission) -> Result<(), String> {
        let body = serde_json::json!({
            "name": role,
            "perm": {
                "permType": perm.access.as_str(),
                "key": base64(&perm.key),
                "range_end": base64(&perm.range_end),
            }
        });
        self.call("/v3/auth/role/grant", &body).map(|_| ())
    }

    pub fn role_revoke(&self, role: &str, perm: &Permission) -> Result<(), String> {
        let body = serde_json::json!({
            "role": role,
            "key": base64(&perm.key),
            "range_end": base64(&perm.range_end),
        });
        self.call("/v3/auth/role/revoke", &body).map(|_| ())
    }

    /// The answer of endpoint `at` alone (no other member tried, no second round): how one
    /// member is asked about itself.
    pub fn call_member(
        &self,
        at: usize,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.call_endpoint(at, path, &body.to_string(), &|bytes| {
            serde_json::from_slice(bytes).map_err(|e| e.to_string())
        })
        .map_err(|failure| match failure {
            Failure::Unreachable(e) | Failure::Refused(e) | Failure::Throttled(e, _) => e,
        })
    }

    /// One request, to the first endpoint that answers it: starting where the last request was
    /// answered, around the list up to three times.
    fn call(&self, path: &str, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        self.call_parsed(path, body, &|bytes| {
            serde_json::from_slice(bytes).map_err(|e| e.to_string())
        })
    }

    /// [`Etcd::call`], with the answer's body read by `parse`.
    fn call_parsed<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        parse: &dyn Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, String> {
        self.call_classified(path, body, parse)
            .map_err(|f| match f {
                Failure::Refused(e) | Failure::Unreachable(e) | Failure::Throttled(e, _) => e,
            })
    }

    /// [`Etcd::call_parsed`], saying whether a failure was an answer (`Refused`) or none.
    fn call_classified<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        parse: &dyn Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let body = body.to_string();
        let count = self.endpoints.len();
        let first = self.current.load(Ordering::Relaxed) % count;
        let mut failures = Vec::new();
        for round in 0..=ROUND_PAUSES.len() {
            if round > 0 {
                std::thread::sleep(ROUND_PAUSES[round - 1]);
                failures.clear();
            }
            for step in 0..count {
                let at = (first + step) % count;
                let endpoint = &self.endpoints[at];
                self.requests.fetch_add(1, Ordering::Relaxed);
                match self.call_endpoint(at, path, &body, parse) {
                    Ok(value) => {
                        self.current.store(at, Ordering::Relaxed);
                        return Ok(value);
                    }
                    Err(Failure::Refused(e) | Failure::Throttled(e, _)) => {
                        return Err(Failure::Refused(format!("etcd at {endpoint}: {e}")))
                    }
                    Err(Failure::Unreachable(e)) => failures.push(format!("{endpoint}: {e}")),
                }
            }
            // A certificate refused (ours or theirs) is refused again after a pause: only a
            // member that could not be reached is worth another round.
            if failures.iter().all(|f| f.contains(": TLS: ")) {
                break;
            }
        }
        Err(Failure::Unreachable(if count == 1 {
            format!("etcd at {}", failures.join(""))
        } else {
            format!("no etcd endpoint answered ({})", failures.join("; "))
        }))
    }
}

mod auth;
mod watch;
mod wire;
pub use auth::GrpcAccess;
pub use watch::{Event, WatchEnd};
/// How a client reaches the fleet's store beyond its URL: what TLS trusts and presents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreAccess {
    pub tls: crate::tls::TlsFiles,
    /// The etcd user to log in as (`--store-user`), with its password's file.
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
    /// For a host speaking to the fleet's gateway (`bell-run --gateway`): what signs each
    /// request, in place of a user.
    pub signer: Option<RequestSigner>,
}

impl StoreAccess {
    /// The options that give this, as a command line spells them (for the commands that
    /// hints and timer units print).
    pub fn flags(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (flag, file) in [
            ("--store-ca", &self.tls.ca),
            ("--store-cert", &self.tls.cert),
            ("--store-key", &self.tls.key),
        ] {
            if let Some(file) = file {
                out.push((flag, file.display().to_string()));
            }
        }
        if let (Some(user), Some(file)) = (&self.user, &self.password_file) {
            out.push(("--store-user", user.clone()));
            out.push(("--store-password-file", file.display().to_string()));
        }
        out
    }
}

use crate::{base64, from_base64};
use auth::{is_user_name, read_password, Auth};
pub use wire::prefix_end;
use wire::{call_one, kvs, range_kvs};
pub use wire::{range_readings_agree, read_answer};

#[cfg(test)]
mod tests;

/// The strings of a JSON array (a list of names), none when it is missing.
fn names(list: Option<&serde_json::Value>) -> Vec<String> {
    list.and_then(|l| l.as_array())
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

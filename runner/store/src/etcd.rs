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

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const TIMEOUT: Duration = Duration::from_secs(10);
/// Pauses before the second and third round over every endpoint: a leader election after a
/// member died takes about a second (etcd's default election timeout).
const ROUND_PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1500)];

/// An etcd cluster: one or more `HOST:PORT` endpoints.
#[derive(Debug)]
pub struct Etcd {
    endpoints: Vec<String>,
    /// For `etcds://`: how every endpoint is spoken to.
    tls: Option<crate::tls::Tls>,
    /// For a store with users (`--store-user`): who this client is, shared by clones.
    auth: Option<Arc<Auth>>,
    /// The endpoint that answered last, where the next request starts.
    current: AtomicUsize,
    /// Requests sent (each endpoint tried, each login and each retry counts once), shared by
    /// clones: what a benchmark divides by the hosts it served.
    requests: Arc<AtomicU64>,
}

impl Clone for Etcd {
    fn clone(&self) -> Etcd {
        Etcd {
            endpoints: self.endpoints.clone(),
            tls: self.tls.clone(),
            auth: self.auth.clone(),
            current: AtomicUsize::new(self.current.load(Ordering::Relaxed)),
            requests: Arc::clone(&self.requests),
        }
    }
}

impl PartialEq for Etcd {
    fn eq(&self, other: &Etcd) -> bool {
        self.endpoints == other.endpoints && self.tls.is_some() == other.tls.is_some()
    }
}

impl Eq for Etcd {}

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
                "request_put": { "key": b64(key.as_bytes()), "value": b64(value) }
            }),
            Op::PutWithLease(key, value, lease) => serde_json::json!({
                "request_put": {
                    "key": b64(key.as_bytes()), "value": b64(value), "lease": lease.to_string()
                }
            }),
            Op::Delete(key) => serde_json::json!({
                "request_delete_range": { "key": b64(key.as_bytes()) }
            }),
        }
    }
}

/// The most operations etcd takes in one transaction (its `--max-txn-ops` default).
pub const MAX_TXN_OPS: usize = 128;

/// An int64 as the gateway sends it (a string; a number from some versions).
pub(crate) fn number(value: Option<&serde_json::Value>) -> Option<i64> {
    match value? {
        serde_json::Value::String(text) => text.parse().ok(),
        other => other.as_i64(),
    }
}

/// One key and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    /// The revision of the key's last write: what was written after a given moment.
    pub mod_revision: i64,
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
}

impl Etcd {
    /// Parses `etcd://HOST:PORT[,HOST:PORT...]` (no path, no credentials), or `etcds://` for
    /// TLS with the system's CAs.
    pub fn parse(url: &str) -> Result<Etcd, String> {
        Etcd::open(url, &crate::Access::default())
    }

    /// Parses the URL and loads what `access` names: `etcds://` speaks TLS, verifying the
    /// members against `--store-ca` (or the system's CAs) and presenting `--store-cert`.
    pub fn open(url: &str, access: &crate::Access) -> Result<Etcd, String> {
        let (endpoints, tls) = Etcd::check(url, access)?;
        let count = endpoints.len();
        let mut etcd = Etcd::new(endpoints);
        if tls {
            etcd.tls = Some(crate::tls::Tls::load(
                &access.tls,
                ["--store-ca", "--store-cert", "--store-key"],
            )?);
        }
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
    pub fn check(url: &str, access: &crate::Access) -> Result<(Vec<String>, bool), String> {
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
            current: AtomicUsize::new(0),
            requests: Arc::new(AtomicU64::new(0)),
        }
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
        let body = serde_json::json!({ "key": b64(key.as_bytes()), "value": b64(value) });
        self.call("/v3/kv/put", &body).map(|_| ())
    }

    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        let body = serde_json::json!({ "key": b64(key.as_bytes()) });
        let kvs = kvs(&self.call("/v3/kv/range", &body)?)?;
        Ok(kvs.into_iter().next().map(|kv| kv.value))
    }

    /// Every key starting with `prefix`, sorted by key.
    pub fn range_prefix(&self, prefix: &str) -> Result<Vec<KeyValue>, String> {
        let body = serde_json::json!({
            "key": b64(prefix.as_bytes()),
            "range_end": b64(&prefix_end(prefix.as_bytes())),
        });
        // A fleet's range can be hundreds of MiB: read it into its keys and values directly,
        // not through a tree of JSON values first.
        self.call_parsed("/v3/kv/range", &body, &range_kvs)
    }

    /// The value of `key` and its version (etcd's count of writes since the key was created;
    /// 0 when there is no key), for a transaction that compares it.
    pub fn get_versioned(&self, key: &str) -> Result<(Option<Vec<u8>>, i64), String> {
        let body = serde_json::json!({ "key": b64(key.as_bytes()) });
        let Some(kv) = self.range_one(&body)? else {
            return Ok((None, 0));
        };
        let version = number(kv.get("version")).ok_or("etcd sent a key without a version")?;
        let value = match kv.get("value").and_then(|v| v.as_str()) {
            None => Vec::new(),
            Some(text) => unb64(text).ok_or("etcd sent a bad base64 value")?,
        };
        Ok((Some(value), version))
    }

    /// The version of `key` (0 when there is none) and the lease it is bound to (0: none).
    pub fn get_lease(&self, key: &str) -> Result<(i64, i64), String> {
        let body = serde_json::json!({ "key": b64(key.as_bytes()), "keys_only": true });
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
                "key": b64(key.as_bytes()),
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
        let requests: Vec<serde_json::Value> = keys
            .iter()
            .map(|key| serde_json::json!({ "request_range": { "key": b64(key.as_bytes()) } }))
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
        responses
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
                    Some(text) => unb64(text).ok_or("etcd sent a bad base64 value")?,
                };
                Ok(Some(Held {
                    value,
                    version: number(kv.get("version")).unwrap_or(0),
                    lease: number(kv.get("lease")).unwrap_or(0),
                }))
            })
            .collect()
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
            "key": b64(key.as_bytes()),
            "value": b64(value),
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
        let body = serde_json::json!({ "key": b64(b"\0"), "count_only": true });
        let answer = self.call("/v3/kv/range", &body)?;
        number(answer.get("header").and_then(|h| h.get("revision")))
            .ok_or_else(|| "etcd sent no revision".to_string())
    }

    pub fn delete(&self, key: &str) -> Result<(), String> {
        let body = serde_json::json!({ "key": b64(key.as_bytes()) });
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
                        unb64(text).ok_or_else(|| format!("etcd sent a bad base64 {name}"))
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

    pub fn role_add(&self, role: &str) -> Result<(), String> {
        self.call("/v3/auth/role/add", &serde_json::json!({ "name": role }))
            .map(|_| ())
    }

    pub fn role_grant(&self, role: &str, perm: &Permission) -> Result<(), String> {
        let body = serde_json::json!({
            "name": role,
            "perm": {
                "permType": perm.access.as_str(),
                "key": b64(&perm.key),
                "range_end": b64(&perm.range_end),
            }
        });
        self.call("/v3/auth/role/grant", &body).map(|_| ())
    }

    pub fn role_revoke(&self, role: &str, perm: &Permission) -> Result<(), String> {
        let body = serde_json::json!({
            "role": role,
            "key": b64(&perm.key),
            "range_end": b64(&perm.range_end),
        });
        self.call("/v3/auth/role/revoke", &body).map(|_| ())
    }

    /// The answer of endpoint `at` alone (no other member tried, no second round): how one
    /// member is asked about itself.
    pub(crate) fn call_member(
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
            Failure::Unreachable(e) | Failure::Refused(e) => e,
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
                    Err(Failure::Refused(e)) => return Err(format!("etcd at {endpoint}: {e}")),
                    Err(Failure::Unreachable(e)) => failures.push(format!("{endpoint}: {e}")),
                }
            }
            // A certificate refused (ours or theirs) is refused again after a pause: only a
            // member that could not be reached is worth another round.
            if failures.iter().all(|f| f.contains(": TLS: ")) {
                break;
            }
        }
        Err(if count == 1 {
            format!("etcd at {}", failures.join(""))
        } else {
            format!("no etcd endpoint answered ({})", failures.join("; "))
        })
    }
}

impl Etcd {
    /// One request to endpoint `at`, as this client's user when it has one: logged in on that
    /// member first (etcd's simple tokens are the member's own), and again once when the
    /// member says the token expired.
    fn call_endpoint<T>(
        &self,
        at: usize,
        path: &str,
        body: &str,
        parse: &dyn Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let endpoint = &self.endpoints[at];
        let tls = self.tls.as_ref();
        let Some(auth) = &self.auth else {
            return call_one(endpoint, tls, None, path, body, parse);
        };
        for attempt in 0..2 {
            if attempt > 0 {
                self.requests.fetch_add(1, Ordering::Relaxed);
            }
            let token = match auth.token(at) {
                Some(token) => token,
                None => {
                    self.requests.fetch_add(1, Ordering::Relaxed);
                    let token = auth.log_in(endpoint, tls)?;
                    auth.keep(at, Some(token.clone()));
                    token
                }
            };
            let token = Some(token.as_str()).filter(|t| !t.is_empty());
            match call_one(endpoint, tls, token, path, body, parse) {
                Err(Failure::Refused(e)) if attempt == 0 && e.contains("auth token") => {
                    auth.keep(at, None);
                }
                Err(Failure::Refused(e)) if e.contains("permission denied") => {
                    return Err(Failure::Refused(format!(
                        "{e}: user `{}` may not {}",
                        auth.user,
                        what_was_asked(path, body)
                    )))
                }
                other => return other,
            }
        }
        Err(Failure::Refused(format!(
            "user `{}`: the member refused a token it had just given",
            auth.user
        )))
    }
}

/// What a request asked for, as a refusal names it: "write `/bell/f/running/h2`".
fn what_was_asked(path: &str, body: &str) -> String {
    let Ok(body) = serde_json::from_str::<serde_json::Value>(body) else {
        return format!("call `{path}`");
    };
    let key_of = |request: &serde_json::Value| {
        let key = request.get("key")?.as_str().and_then(unb64)?;
        Some(format!(
            "`{}`",
            String::from_utf8_lossy(&key).escape_debug()
        ))
    };
    // (verb, keys), in the order first asked.
    let mut asked: Vec<(&str, Vec<String>)> = Vec::new();
    let mut ask = |verb: &'static str, key: Option<String>| {
        let Some(key) = key else { return };
        match asked.iter_mut().find(|(v, _)| *v == verb) {
            Some((_, keys)) if !keys.contains(&key) => keys.push(key),
            Some(_) => {}
            None => asked.push((verb, vec![key])),
        }
    };
    match path {
        "/v3/kv/range" => ask("read", key_of(&body)),
        "/v3/kv/put" => ask("write", key_of(&body)),
        "/v3/kv/deleterange" => ask("delete", key_of(&body)),
        "/v3/kv/txn" => {
            for compare in body
                .get("compare")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
            {
                ask("read", key_of(compare));
            }
            for op in body
                .get("success")
                .and_then(|c| c.as_array())
                .into_iter()
                .flatten()
            {
                for (field, verb) in [
                    ("request_range", "read"),
                    ("request_put", "write"),
                    ("request_delete_range", "delete"),
                ] {
                    if let Some(request) = op.get(field) {
                        ask(verb, key_of(request));
                    }
                }
            }
        }
        _ => {}
    }
    if asked.is_empty() {
        return format!("call `{path}`");
    }
    let parts: Vec<String> = asked
        .into_iter()
        .map(|(verb, keys)| format!("{verb} {}", keys.join(", ")))
        .collect();
    let together = if path == "/v3/kv/txn" && parts.len() > 1 {
        " (in one transaction)"
    } else {
        ""
    };
    format!("{}{together}", parts.join(" and "))
}

/// An etcd user this client logs in as, and the token each member gave it.
struct Auth {
    user: String,
    password: String,
    password_file: PathBuf,
    /// Per endpoint; `""` where the member has authentication off.
    tokens: std::sync::Mutex<Vec<Option<String>>>,
}

/// Never the password.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("user", &self.user).finish()
    }
}

impl Auth {
    fn token(&self, at: usize) -> Option<String> {
        self.tokens.lock().ok()?.get(at).cloned().flatten()
    }

    fn keep(&self, at: usize, token: Option<String>) {
        if let Ok(mut tokens) = self.tokens.lock() {
            if let Some(slot) = tokens.get_mut(at) {
                *slot = token;
            }
        }
    }

    /// `/v3/auth/authenticate` on one member: its token, or `""` when it has authentication
    /// off (users are set up before `etcdctl auth enable`, and must keep working through it).
    fn log_in(&self, endpoint: &str, tls: Option<&crate::tls::Tls>) -> Result<String, Failure> {
        let body = serde_json::json!({ "name": self.user, "password": self.password }).to_string();
        let answer = call_one(
            endpoint,
            tls,
            None,
            "/v3/auth/authenticate",
            &body,
            &|bytes| serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| e.to_string()),
        );
        drop(body);
        match answer {
            Ok(answer) => {
                let token = answer.get("token").and_then(|t| t.as_str()).unwrap_or("");
                // It goes into a header line: nothing but printable ASCII.
                if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(Failure::Unreachable(format!(
                        "user `{}` logged in, but the member sent no usable token",
                        self.user
                    )));
                }
                Ok(token.to_string())
            }
            Err(Failure::Refused(e)) if e.contains("authentication is not enabled") => {
                Ok(String::new())
            }
            Err(Failure::Refused(e)) => Err(Failure::Refused(format!(
                "user `{}` could not log in ({e}); is the password in {} the one `bellc store \
                 roles --apply` wrote for it?",
                self.user,
                self.password_file.display()
            ))),
            Err(unreachable) => Err(unreachable),
        }
    }
}

fn is_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
}

/// A password file: one line, private as a key is ([`crate::tls::read_private`]).
fn read_password(path: &Path) -> Result<String, String> {
    let flag = "--store-password-file";
    let bytes = crate::tls::read_private(path, flag, 4096)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("`{flag}`: {} is not UTF-8 text", path.display()))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    if password.is_empty() || password.contains(['\n', '\r']) {
        return Err(format!(
            "`{flag}`: {} must hold the password on one line",
            path.display()
        ));
    }
    Ok(password.to_string())
}

fn call_one<T>(
    endpoint: &str,
    tls: Option<&crate::tls::Tls>,
    token: Option<&str>,
    path: &str,
    body: &str,
    parse: &dyn Fn(&[u8]) -> Result<T, String>,
) -> Result<T, Failure> {
    let authorization = token.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let response = exchange(endpoint, tls, request.as_bytes()).map_err(Failure::Unreachable)?;
    drop(request);
    let (status, body) = parse_response(&response).map_err(|e| {
        // A TLS alert record (type 21, version 3.x) or Go's answer to plain HTTP on a TLS port.
        let speaks_tls = response.starts_with(&[0x15, 0x03])
            || response.windows(12).any(|w| w == b"HTTPS server");
        Failure::Unreachable(match (tls, speaks_tls, response.is_empty()) {
            (None, true, _) => {
                "this endpoint speaks TLS: write `etcds://` (with `--store-ca`)".to_string()
            }
            // etcd closes a plain connection to its TLS port without a word.
            (None, _, true) => "the endpoint closed the connection without answering (an \
                                endpoint that speaks TLS does so to plain HTTP: write \
                                `etcds://`?)"
                .to_string(),
            (Some(_), _, true) => {
                "the endpoint closed the connection without answering".to_string()
            }
            _ => format!("{e} ({} bytes)", response.len()),
        })
    })?;
    drop(response);
    let invalid =
        |e: String| Failure::Unreachable(format!("`{path}` answered with invalid JSON: {e}"));
    if status != 200 {
        let value: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| invalid(e.to_string()))?;
        let message = value
            .get("message")
            .or_else(|| value.get("error"))
            .and_then(|m| m.as_str())
            .unwrap_or("no message");
        let e = format!("`{path}` failed with HTTP {status}: {message}");
        // A server error is this member's trouble (no leader, no quorum, a timeout); a client
        // error is the request's, and every member would say the same.
        return Err(if status >= 500 {
            Failure::Unreachable(e)
        } else {
            Failure::Refused(e)
        });
    }
    parse(&body).map_err(invalid)
}

/// The largest answer read from etcd: the reports of a 100,000-host fleet are about 300 MiB.
const MAX_ANSWER_BYTES: u64 = 1 << 30;

pub(crate) fn exchange(
    endpoint: &str,
    tls: Option<&crate::tls::Tls>,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    let addrs = crate::resolve::resolve_endpoint(endpoint)?;
    let mut last = "no address".to_string();
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(stream) => {
                let _ = stream.set_read_timeout(Some(TIMEOUT));
                let _ = stream.set_write_timeout(Some(TIMEOUT));
                return match tls {
                    None => send_and_read(stream, request),
                    Some(tls) => {
                        let host = endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h);
                        send_and_read(tls.connect(stream, host)?, request)
                    }
                };
            }
            Err(e) => last = format!("cannot connect: {e}"),
        }
    }
    Err(last)
}

fn send_and_read(mut stream: impl Read + Write, request: &[u8]) -> Result<Vec<u8>, String> {
    stream
        .write_all(request)
        .map_err(|e| format!("cannot send: {e}"))?;
    // Bounded: an endpoint that never stops sending is not etcd.
    let mut response = Vec::new();
    match (&mut stream)
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut response)
    {
        Ok(_) => Ok(response),
        // A TLS server that closes without `close_notify`: the answer counts only when its
        // head says how long it is and all of it came (`parse_response` checks the length).
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && is_framed(&response) => {
            Ok(response)
        }
        // A server that closes with our request unread resets the connection (Go's TLS
        // server does to a plain request longer than what it read): what came before the
        // reset, if anything, is judged as a closed connection's answer.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(response),
        Err(e) => Err(format!("cannot read the answer: {e}")),
    }
}

/// Whether a response's head gives its body's length (or chunks it), so that a cut is seen.
fn is_framed(response: &[u8]) -> bool {
    let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    crate::http::parse_head(&response[..split]).is_ok_and(|head| {
        head.content_length.is_some()
            || head
                .transfer_encoding
                .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    })
}

fn kvs(value: &serde_json::Value) -> Result<Vec<KeyValue>, String> {
    let mut out = Vec::new();
    let Some(list) = value.get("kvs").and_then(|k| k.as_array()) else {
        return Ok(out);
    };
    for kv in list {
        let field = |name: &str| -> Result<Vec<u8>, String> {
            match kv.get(name).and_then(|v| v.as_str()) {
                // The gateway leaves out empty fields (an empty value).
                None => Ok(Vec::new()),
                Some(text) => unb64(text).ok_or_else(|| format!("etcd sent a bad base64 {name}")),
            }
        };
        let key = String::from_utf8(field("key")?).map_err(|_| "etcd sent a non-UTF-8 key")?;
        out.push(KeyValue {
            key,
            value: field("value")?,
            mod_revision: number(kv.get("mod_revision")).unwrap_or(0),
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// A range's answer as the gateway sends it: base64 keys and values, int64s as strings. Read
/// by hand rather than derived: a derived struct also takes a JSON array (`[[...]]`), which
/// the gateway never sends and the tree reading does not take as keys.
#[derive(Default)]
struct RangeAnswer<'a> {
    kvs: Vec<RawKeyValue<'a>>,
}

#[derive(Default)]
struct RawKeyValue<'a> {
    // Base64 holds no escapes, so these borrow from the answer; a `Cow` still takes a
    // string that has some.
    key: std::borrow::Cow<'a, str>,
    value: std::borrow::Cow<'a, str>,
    mod_revision: Option<Int64<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Int64<'a> {
    Number(i64),
    Text(#[serde(borrow)] std::borrow::Cow<'a, str>),
}

/// A JSON object's fields, one at a time; a later field of the same name wins, as in a tree.
trait FromObject<'de>: Sized {
    fn field<A: serde::de::MapAccess<'de>>(
        &mut self,
        name: &str,
        map: &mut A,
    ) -> Result<(), A::Error>;
}

struct ObjectVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: FromObject<'de> + Default> serde::de::Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut out = T::default();
        while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            out.field(&name, &mut map)?;
        }
        Ok(out)
    }
}

impl<'de> FromObject<'de> for RangeAnswer<'de> {
    fn field<A: serde::de::MapAccess<'de>>(
        &mut self,
        name: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match name {
            "kvs" => self.kvs = map.next_value()?,
            _ => {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> FromObject<'de> for RawKeyValue<'de> {
    fn field<A: serde::de::MapAccess<'de>>(
        &mut self,
        name: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match name {
            "key" => self.key = map.next_value()?,
            "value" => self.value = map.next_value()?,
            "mod_revision" => self.mod_revision = map.next_value()?,
            _ => {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> serde::Deserialize<'de> for RangeAnswer<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

impl<'de> serde::Deserialize<'de> for RawKeyValue<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

/// The keys and values of a range's answer, as [`kvs`] reads them from a JSON tree.
fn range_kvs(body: &[u8]) -> Result<Vec<KeyValue>, String> {
    let answer: RangeAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(answer.kvs.len());
    for kv in answer.kvs {
        let key = unb64(&kv.key).ok_or("etcd sent a bad base64 key")?;
        let key = String::from_utf8(key).map_err(|_| "etcd sent a non-UTF-8 key")?;
        let value = unb64(&kv.value).ok_or("etcd sent a bad base64 value")?;
        let mod_revision = match kv.mod_revision {
            Some(Int64::Number(n)) => n,
            Some(Int64::Text(text)) => text.parse().unwrap_or(0),
            None => 0,
        };
        out.push(KeyValue {
            key,
            value,
            mod_revision,
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// The smallest key after every key that starts with `prefix` (etcd's `range_end`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the keyspace.
    vec![0]
}

/// What etcd's gateway answered, as the client reads it: the status, the JSON body and the
/// keys and values in it. Public for the fuzzer (`fuzz/`): an answer is not trusted.
#[doc(hidden)]
pub fn read_answer(bytes: &[u8]) -> Result<(u16, Vec<KeyValue>), String> {
    let (status, body) = parse_response(bytes)?;
    let value: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok((status, kvs(&value)?))
}

/// Whether the two readings of a range's answer agree: `range_prefix` reads it without a JSON
/// tree, the other calls through one. Where both take the answer they must give the same keys
/// and values (the typed reading refuses some answers the tree reads leniently, such as a
/// key that is not a string). For the fuzzer.
#[doc(hidden)]
pub fn range_readings_agree(bytes: &[u8]) -> bool {
    let Ok((_, body)) = parse_response(bytes) else {
        return true;
    };
    let tree = serde_json::from_slice::<serde_json::Value>(&body)
        .map_err(|e| e.to_string())
        .and_then(|value| kvs(&value));
    match (tree, range_kvs(&body)) {
        (Ok(tree), Ok(typed)) => tree == typed,
        _ => true,
    }
}

/// Splits an HTTP/1.1 response into status and body, undoing chunked transfer encoding.
pub(crate) fn parse_response(bytes: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer is not HTTP")?;
    let body = &bytes[split + 4..];
    let head = crate::http::parse_head(&bytes[..split])?;
    let status = head.status;
    let chunked = head
        .transfer_encoding
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let length = head.content_length.and_then(|n| usize::try_from(n).ok());
    if chunked {
        return dechunk(body).map(|b| (status, b));
    }
    let body = match length {
        Some(n) if n <= body.len() => body[..n].to_vec(),
        Some(_) => return Err("the answer was cut short".to_string()),
        None => body.to_vec(),
    };
    Ok((status, body))
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("bad chunked encoding")?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        match size.checked_add(2) {
            Some(need) if body.len() >= need => {}
            _ => return Err("the answer was cut short".to_string()),
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, which the gateway uses for `bytes` fields.
pub fn b64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn unb64(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = ALPHABET.iter().position(|a| *a == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits & 0xff) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_keys_it_asked_for() {
        let put = serde_json::json!({ "key": b64(b"/bell/f/running/h2"), "value": "" });
        assert_eq!(
            what_was_asked("/v3/kv/put", &put.to_string()),
            "write `/bell/f/running/h2`"
        );
        let ops = [
            Op::Put("/bell/f/running/h1", b"{}"),
            Op::Put("/bell/f/status/apply/h1", b"success"),
        ];
        let txn = serde_json::json!({
            "compare": [{ "key": b64(b"/bell/f/groups/default/v1/semaphore") }],
            "success": ops.iter().map(Op::request).collect::<Vec<_>>(),
        });
        assert_eq!(
            what_was_asked("/v3/kv/txn", &txn.to_string()),
            "read `/bell/f/groups/default/v1/semaphore` and write `/bell/f/running/h1`, \
             `/bell/f/status/apply/h1` (in one transaction)"
        );
        assert_eq!(
            what_was_asked("/v3/lease/grant", "{}"),
            "call `/v3/lease/grant`"
        );
    }

    #[test]
    fn a_range_reads_the_same_with_and_without_a_json_tree() {
        let answer = |body: &str| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let (k1, k2, v) = (b64(b"/bell/f/b"), b64(b"/bell/f/a"), b64(b"{\"x\":1}"));
        for body in [
            format!(
                r#"{{"header":{{"revision":"9"}},"kvs":[{{"key":"{k1}","value":"{v}","mod_revision":"7"}},{{"key":"{k2}","mod_revision":3}}],"count":"2"}}"#
            ),
            r#"{"header":{}}"#.to_string(),
            format!(r#"{{"kvs":[{{"key":"{k1}","value":"","mod_revision":"x"}}]}}"#),
            // An escaped slash is still base64 once read.
            r#"{"kvs":[{"key":"Pz8\/"}]}"#.to_string(),
            // Found by the fuzzer: arrays where the gateway sends objects.
            r#"[[[]]]"#.to_string(),
            r#"{"kvs":[["QQ=="]]}"#.to_string(),
            // A later field of the same name wins, as in a tree.
            format!(r#"{{"kvs":[{{"key":"{k2}","key":"{k1}"}}]}}"#),
        ] {
            let bytes = answer(&body);
            assert!(range_readings_agree(bytes.as_bytes()), "{body}");
            let (_, tree) = read_answer(bytes.as_bytes()).unwrap();
            let (_, body_bytes) = parse_response(bytes.as_bytes()).unwrap();
            match range_kvs(&body_bytes) {
                Ok(typed) => assert_eq!(typed, tree, "{body}"),
                // Only what the gateway never sends is refused.
                Err(e) => assert!(body.contains("[["), "{body}: {e}"),
            }
        }
        let (_, body) = parse_response(
            answer(&format!(
                r#"{{"kvs":[{{"key":"{k1}","value":"{v}","mod_revision":"7"}},{{"key":"{k2}"}}]}}"#
            ))
            .as_bytes(),
        )
        .unwrap();
        let read = range_kvs(&body).unwrap();
        assert_eq!(read[0].key, "/bell/f/a");
        assert_eq!(
            (read[1].value.as_slice(), read[1].mod_revision),
            (&b"{\"x\":1}"[..], 7)
        );
    }

    #[test]
    fn a_chunk_size_near_usize_max_is_a_short_answer_not_a_panic() {
        // `size + 2` overflowed and sliced past the end.
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx";
        assert_eq!(
            read_answer(answer),
            Err("the answer was cut short".to_string())
        );
        let ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n18\r\n{\"kvs\":[{\"key\":\"YQ==\"}]}\r\n0\r\n\r\n";
        let (status, kvs) = read_answer(ok).expect("a chunked answer");
        assert_eq!((status, kvs[0].key.as_str()), (200, "a"));
    }

    #[test]
    fn base64_round_trips_and_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(b64(plain.as_bytes()), coded);
            assert_eq!(unb64(coded).as_deref(), Some(plain.as_bytes()));
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unb64(&b64(&all)), Some(all));
        assert_eq!(unb64("Zm9v!"), None);
    }

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"/bell/a/"), b"/bell/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn urls_need_host_and_port() {
        assert_eq!(
            Etcd::parse("etcd://127.0.0.1:2379").map(|e| e.endpoints().to_vec()),
            Ok(vec!["127.0.0.1:2379".to_string()])
        );
        let cluster = Etcd::parse("etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379/").unwrap();
        assert_eq!(cluster.endpoints().len(), 3);
        assert_eq!(
            cluster.url(),
            "etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379"
        );
        assert!(Etcd::parse("etcd://h:1,h:1").is_err());
        assert!(Etcd::parse("etcd://h:1,").is_err());
        assert!(Etcd::parse("etcd://h:1, h:2").is_err());
        assert!(Etcd::parse("etcd://127.0.0.1").is_err());
        assert!(Etcd::parse("etcd://u:p@h:1").is_err());
        assert!(Etcd::parse("etcd://h:1/x").is_err());
        assert!(Etcd::parse("http://h:1").is_err());
    }

    #[test]
    fn responses_with_length_or_chunks_parse() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain), Ok((200, b"{}".to_vec())));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok((200, b"{}".to_vec())));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
    }
}

//! The requests a host may send through the gateway, read strictly: the part of etcd's JSON
//! API that `bell-run` speaks (a key read, a put, a delete, a transaction of those that
//! compares versions, and its liveness lease), each field known, written again from what was
//! read. A field the gateway does not know (`range_end`, `prev_kv`, `ignore_lease`, …) is
//! refused, never passed on, so a host cannot widen a request past the keys it names.

use bell_wire::{base64, from_base64};
use serde::{Deserialize, Serialize};

/// etcd's JSON gateway writes an int64 as a string; some clients send a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int(pub i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Int, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(i64),
        }
        match Either::deserialize(d)? {
            Either::Number(n) => Ok(Int(n)),
            Either::Text(t) => t
                .parse()
                .map(Int)
                .map_err(|_| serde::de::Error::custom("an int64 as a string")),
        }
    }
}

impl Serialize for Int {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    pub key: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub keys_only: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub count_only: bool,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Put {
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Int>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Delete {
    pub key: String,
}

/// `key`'s version is `version` (0: it does not exist): the only comparison bell makes.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Compare {
    pub key: String,
    pub result: CompareResult,
    pub target: CompareTarget,
    pub version: Int,
}

#[derive(Debug, Deserialize, Serialize)]
pub enum CompareResult {
    #[serde(rename = "EQUAL")]
    Equal,
}

#[derive(Debug, Deserialize, Serialize)]
pub enum CompareTarget {
    #[serde(rename = "VERSION")]
    Version,
}

/// One operation of a transaction.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub enum TxnOp {
    #[serde(rename = "request_range")]
    Range(Range),
    #[serde(rename = "request_put")]
    Put(Put),
    #[serde(rename = "request_delete_range")]
    Delete(Delete),
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Txn {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compare: Vec<Compare>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success: Vec<TxnOp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure: Vec<TxnOp>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseGrant {
    #[serde(rename = "TTL")]
    pub ttl: Int,
    /// Chosen by the gateway, never by the host: a random id no other host can guess.
    #[serde(rename = "ID", default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Int>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseId {
    #[serde(rename = "ID")]
    pub id: Int,
}

/// A long-poll: answer when one of `keys` is written or deleted after `revision` (the header
/// revision of the read the host decided on), or after `timeout` seconds. The gateway's own
/// request (`/bell/v1/wait`), answered from its watch cache: etcd has no long-poll of its own
/// over HTTP, and a watch per host is what the gateway is there to spare etcd.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    pub keys: Vec<String>,
    pub revision: Int,
    pub timeout: Int,
}

/// A request, by its path.
#[derive(Debug)]
pub enum Request {
    Wait(Wait),
    Range(Range),
    Put(Put),
    Delete(Delete),
    Txn(Txn),
    LeaseGrant(LeaseGrant),
    KeepAlive(LeaseId),
    Revoke(LeaseId),
}

/// What a request does with one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Read,
    Write,
}

/// The most operations (and comparisons) a host's transaction holds: etcd's own cap.
const MAX_OPS: usize = bell_wire::etcd::MAX_TXN_OPS;

impl Request {
    /// Reads `body` as the request `path` names.
    pub fn parse(path: &str, body: &[u8]) -> Result<Request, String> {
        fn read<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, String> {
            serde_json::from_slice(body)
                .map_err(|e| format!("the request is not one bell makes: {e}"))
        }
        let request = match path {
            "/v3/kv/range" => Request::Range(read(body)?),
            "/v3/kv/put" => Request::Put(read(body)?),
            "/v3/kv/deleterange" => Request::Delete(read(body)?),
            "/v3/kv/txn" => {
                let txn: Txn = read(body)?;
                if txn.compare.len() > MAX_OPS
                    || txn.success.len() > MAX_OPS
                    || txn.failure.len() > MAX_OPS
                {
                    return Err(format!("a transaction holds at most {MAX_OPS} operations"));
                }
                Request::Txn(txn)
            }
            "/v3/lease/grant" => Request::LeaseGrant(read(body)?),
            "/v3/lease/keepalive" => Request::KeepAlive(read(body)?),
            "/v3/lease/revoke" => Request::Revoke(read(body)?),
            bell_store::gateway::WAIT_PATH => {
                let wait: Wait = read(body)?;
                if wait.keys.is_empty() || wait.keys.len() > MAX_OPS {
                    return Err(format!("a wait names 1 to {MAX_OPS} keys"));
                }
                Request::Wait(wait)
            }
            _ => {
                return Err(format!(
                    "`{}` is not a request the gateway passes on",
                    path.escape_debug()
                ))
            }
        };
        Ok(request)
    }

    /// The keys the request reads and writes (decoded), each with what it does.
    pub fn keys(&self) -> Result<Vec<(Verb, Vec<u8>)>, String> {
        let mut out = Vec::new();
        let decode =
            |key: &str| from_base64(key).ok_or_else(|| "a key that is not base64".to_string());
        let op = |op: &TxnOp, out: &mut Vec<(Verb, Vec<u8>)>| -> Result<(), String> {
            match op {
                TxnOp::Range(r) => out.push((Verb::Read, decode(&r.key)?)),
                TxnOp::Put(p) => out.push((Verb::Write, decode(&p.key)?)),
                TxnOp::Delete(d) => out.push((Verb::Write, decode(&d.key)?)),
            }
            Ok(())
        };
        match self {
            Request::Range(r) => out.push((Verb::Read, decode(&r.key)?)),
            Request::Put(p) => out.push((Verb::Write, decode(&p.key)?)),
            Request::Delete(d) => out.push((Verb::Write, decode(&d.key)?)),
            Request::Txn(txn) => {
                for c in &txn.compare {
                    out.push((Verb::Read, decode(&c.key)?));
                }
                for o in txn.success.iter().chain(&txn.failure) {
                    op(o, &mut out)?;
                }
            }
            Request::Wait(wait) => {
                for key in &wait.keys {
                    out.push((Verb::Read, decode(key)?));
                }
            }
            Request::LeaseGrant(_) | Request::KeepAlive(_) | Request::Revoke(_) => {}
        }
        Ok(out)
    }

    /// The decoded size of the largest value the request writes.
    pub fn largest_value(&self) -> usize {
        // Base64's length bounds the decoded one: no need to decode twice.
        let size = |p: &Put| p.value.len() / 4 * 3;
        match self {
            Request::Put(p) => size(p),
            Request::Txn(txn) => txn
                .success
                .iter()
                .chain(&txn.failure)
                .map(|o| match o {
                    TxnOp::Put(p) => size(p),
                    _ => 0,
                })
                .max()
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// The leases the request binds keys to, renews or ends.
    pub fn leases(&self) -> Vec<i64> {
        let of_put = |p: &Put| p.lease.map(|l| l.0).filter(|l| *l != 0);
        match self {
            Request::Put(p) => of_put(p).into_iter().collect(),
            Request::Txn(txn) => txn
                .success
                .iter()
                .chain(&txn.failure)
                .filter_map(|o| match o {
                    TxnOp::Put(p) => of_put(p),
                    _ => None,
                })
                .collect(),
            Request::KeepAlive(l) | Request::Revoke(l) => vec![l.id.0],
            Request::Range(_) | Request::Delete(_) | Request::LeaseGrant(_) | Request::Wait(_) => {
                Vec::new()
            }
        }
    }

    /// The request as etcd is sent it: only what was read.
    pub fn to_json(&self) -> serde_json::Value {
        let value = match self {
            Request::Range(r) => serde_json::to_value(r),
            Request::Put(p) => serde_json::to_value(p),
            Request::Delete(d) => serde_json::to_value(d),
            Request::Txn(t) => serde_json::to_value(t),
            Request::LeaseGrant(g) => serde_json::to_value(g),
            Request::KeepAlive(l) | Request::Revoke(l) => serde_json::to_value(l),
            Request::Wait(w) => serde_json::to_value(w),
        };
        value.unwrap_or(serde_json::Value::Null)
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A key, for a refusal.
pub fn show_key(key: &[u8]) -> String {
    String::from_utf8_lossy(key).escape_debug().to_string()
}

/// A key as etcd's JSON takes it.
pub fn encode_key(key: &str) -> String {
    base64(key.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_bell_run_sends_reads_and_is_sent_on_as_it_was() {
        let k = encode_key("/bell/f/running/h1");
        let txn = format!(
            r#"{{"compare":[{{"key":"{k}","result":"EQUAL","target":"VERSION","version":"3"}}],
               "success":[{{"request_put":{{"key":"{k}","value":"aGk=","lease":"7"}}}},
                          {{"request_delete_range":{{"key":"{k}"}}}},
                          {{"request_range":{{"key":"{k}"}}}}]}}"#
        );
        let request = Request::parse("/v3/kv/txn", txn.as_bytes()).unwrap();
        assert_eq!(request.keys().unwrap().len(), 4);
        assert_eq!(request.leases(), vec![7]);
        let again = request.to_json().to_string();
        assert!(again.contains("\"version\":\"3\"") && again.contains("\"lease\":\"7\""));
        let range = format!(r#"{{"key":"{k}","keys_only":true}}"#);
        assert!(Request::parse("/v3/kv/range", range.as_bytes()).is_ok());
    }

    #[test]
    fn a_field_that_would_widen_a_request_is_refused() {
        let k = encode_key("/bell/f/running/h1");
        for (path, body) in [
            (
                "/v3/kv/range",
                format!(r#"{{"key":"{k}","range_end":"AA=="}}"#),
            ),
            (
                "/v3/kv/deleterange",
                format!(r#"{{"key":"{k}","range_end":"AA=="}}"#),
            ),
            (
                "/v3/kv/put",
                format!(r#"{{"key":"{k}","value":"","ignore_lease":true}}"#),
            ),
            (
                "/v3/kv/put",
                format!(r#"{{"key":"{k}","value":"","prev_kv":true}}"#),
            ),
            (
                "/v3/kv/txn",
                format!(
                    r#"{{"compare":[{{"key":"{k}","result":"GREATER","target":"VERSION","version":"0"}}]}}"#
                ),
            ),
            (
                "/v3/kv/txn",
                r#"{"success":[{"request_txn":{}}]}"#.to_string(),
            ),
            (
                "/v3/auth/user/add",
                r#"{"name":"x","password":"y"}"#.to_string(),
            ),
            ("/v3/maintenance/defragment", "{}".to_string()),
        ] {
            assert!(
                Request::parse(path, body.as_bytes()).is_err(),
                "{path} {body}"
            );
        }
    }
}

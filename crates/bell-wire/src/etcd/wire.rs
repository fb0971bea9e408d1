//! One request to the gateway (sent and bounded by `bell-wire`), its JSON read into keys and
//! values.

use super::*;

pub(super) fn call_one<T>(
    endpoint: &str,
    tls: Option<&crate::tls::Tls>,
    limits: Limits,
    token: Option<&str>,
    path: &str,
    body: &str,
    parse: &dyn Fn(&[u8]) -> Result<T, String>,
) -> Result<T, Failure> {
    let response = crate::client::post_json(
        endpoint,
        tls,
        &limits.bounds("the store did not answer in time"),
        path,
        token,
        body,
    )
    .map_err(Failure::Unreachable)?;
    let (head, body) = crate::client::parse_response_head(&response).map_err(|e| {
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
    let status = head.status;
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
        // error is the request's, and every member would say the same. A gateway that asks
        // for a pause says how long.
        return Err(match (status, head.retry_after) {
            (500.., _) => Failure::Unreachable(e),
            (429, Some(wait)) => Failure::Throttled(e, wait),
            _ => Failure::Refused(e),
        });
    }
    parse(&body).map_err(invalid)
}

/// A key as text. One that is not UTF-8 (anyone who may write under a prefix can put one) is
/// read with U+FFFD in place of its bad bytes: it then names no host or group a spec can have
/// (names are ASCII), so it spoils at most a row of its own instead of the whole answer.
fn key_text(key: Vec<u8>) -> String {
    String::from_utf8(key).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(super) fn kvs(value: &serde_json::Value) -> Result<Vec<KeyValue>, String> {
    let mut out = Vec::new();
    let Some(list) = value.get("kvs").and_then(|k| k.as_array()) else {
        return Ok(out);
    };
    for kv in list {
        let field = |name: &str| -> Result<Vec<u8>, String> {
            match kv.get(name).and_then(|v| v.as_str()) {
                // The gateway leaves out empty fields (an empty value).
                None => Ok(Vec::new()),
                Some(text) => {
                    from_base64(text).ok_or_else(|| format!("etcd sent a bad base64 {name}"))
                }
            }
        };
        let key = key_text(field("key")?);
        out.push(KeyValue {
            key,
            value: field("value")?.into(),
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
pub(super) struct RangeAnswer<'a> {
    header: Header<'a>,
    kvs: Vec<RawKeyValue<'a>>,
    more: Option<bool>,
}

#[derive(Default)]
pub(super) struct Header<'a> {
    revision: Option<Int64<'a>>,
}

#[derive(Default)]
pub(super) struct RawKeyValue<'a> {
    // Base64 holds no escapes, so these borrow from the answer; a `Cow` still takes a
    // string that has some.
    key: std::borrow::Cow<'a, str>,
    value: std::borrow::Cow<'a, str>,
    mod_revision: Option<Int64<'a>>,
    create_revision: Option<Int64<'a>>,
    version: Option<Int64<'a>>,
    lease: Option<Int64<'a>>,
}

impl Int64<'_> {
    fn of(value: Option<&Int64<'_>>) -> i64 {
        match value {
            Some(Int64::Number(n)) => *n,
            Some(Int64::Text(text)) => text.parse().unwrap_or(0),
            None => 0,
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
pub(super) enum Int64<'a> {
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

pub(super) struct ObjectVisitor<T>(std::marker::PhantomData<T>);

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
            "header" => self.header = map.next_value()?,
            "more" => self.more = map.next_value()?,
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
            "create_revision" => self.create_revision = map.next_value()?,
            "version" => self.version = map.next_value()?,
            "lease" => self.lease = map.next_value()?,
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

impl<'de> FromObject<'de> for Header<'de> {
    fn field<A: serde::de::MapAccess<'de>>(
        &mut self,
        name: &str,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match name {
            "revision" => self.revision = map.next_value()?,
            _ => {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> serde::Deserialize<'de> for Header<'de> {
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
pub(super) fn range_kvs(body: &[u8]) -> Result<Vec<KeyValue>, String> {
    let answer: RangeAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(answer.kvs.len());
    for kv in answer.kvs {
        let key = from_base64(&kv.key).ok_or("etcd sent a bad base64 key")?;
        let key = key_text(key);
        let value = from_base64(&kv.value).ok_or("etcd sent a bad base64 value")?;
        let mod_revision = match kv.mod_revision {
            Some(Int64::Number(n)) => n,
            Some(Int64::Text(text)) => text.parse().unwrap_or(0),
            None => 0,
        };
        out.push(KeyValue {
            key,
            value: value.into(),
            mod_revision,
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// One page of a range as [`super::Etcd::range_page`] reads it, without a JSON tree.
pub(super) fn range_page(body: &[u8]) -> Result<super::Page, String> {
    let answer: RangeAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let revision = Int64::of(answer.header.revision.as_ref());
    if revision <= 0 {
        return Err("etcd sent no revision".into());
    }
    let mut entries = Vec::with_capacity(answer.kvs.len());
    for kv in answer.kvs {
        entries.push(super::Entry {
            key: from_base64(&kv.key).ok_or("etcd sent a bad base64 key")?,
            value: from_base64(&kv.value)
                .ok_or("etcd sent a bad base64 value")?
                .into(),
            create_revision: Int64::of(kv.create_revision.as_ref()),
            mod_revision: Int64::of(kv.mod_revision.as_ref()),
            version: Int64::of(kv.version.as_ref()),
            lease: Int64::of(kv.lease.as_ref()),
        });
    }
    Ok(super::Page {
        revision,
        entries,
        more: answer.more == Some(true),
    })
}

/// The smallest key after every key that starts with `prefix` (etcd's `range_end`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
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
    let (status, body) = crate::client::parse_response(bytes)?;
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
    let Ok((_, body)) = crate::client::parse_response(bytes) else {
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

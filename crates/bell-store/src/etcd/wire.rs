//! One request on the wire: HTTP/1.1 over TCP (or TLS), the answer read whole and bounded, its
//! JSON read into keys and values, and the base64 the gateway speaks.

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
    let authorization = token.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let response =
        exchange(endpoint, tls, limits, request.as_bytes()).map_err(Failure::Unreachable)?;
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

pub(crate) fn exchange(
    endpoint: &str,
    tls: Option<&crate::tls::Tls>,
    limits: Limits,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    let deadline = limits.deadline();
    let addrs = crate::resolve::resolve_endpoint(endpoint)?;
    let mut last = "no address".to_string();
    for addr in addrs {
        let wait = time_left(deadline, CONNECT_TIMEOUT)?;
        match TcpStream::connect_timeout(&addr, wait) {
            Ok(stream) => {
                let _ = stream.set_write_timeout(Some(TIMEOUT));
                // A second handle on the socket: each read's timeout is set through it, as
                // what is left of the deadline, also under TLS.
                let socket = stream
                    .try_clone()
                    .map_err(|e| format!("cannot use the connection: {e}"))?;
                let _ = socket.set_read_timeout(Some(time_left(deadline, TIMEOUT)?));
                return match tls {
                    None => send_and_read(stream, socket, deadline, limits, request),
                    Some(tls) => {
                        let host = endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h);
                        let stream = tls.connect(stream, host)?;
                        send_and_read(stream, socket, deadline, limits, request)
                    }
                };
            }
            Err(e) => last = format!("cannot connect: {e}"),
        }
    }
    Err(last)
}

/// How long a step may wait: `limit`, or less when the deadline is nearer; an error once it
/// passed.
fn time_left(deadline: std::time::Instant, limit: Duration) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() {
        return Err(TIMED_OUT.to_string());
    }
    Ok(left.min(limit))
}

const TIMED_OUT: &str = "the store did not answer in time";

/// A stream whose every read waits at most what is left of the deadline.
struct Deadlined<S> {
    stream: S,
    socket: TcpStream,
    deadline: std::time::Instant,
}

impl<S: Read> Read for Deadlined<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let wait = time_left(self.deadline, TIMEOUT)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::TimedOut, e))?;
        self.socket.set_read_timeout(Some(wait))?;
        self.stream.read(buf)
    }
}

pub(super) fn send_and_read(
    mut stream: impl Read + Write,
    socket: TcpStream,
    deadline: std::time::Instant,
    limits: Limits,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    stream
        .write_all(request)
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut reader = Deadlined {
        stream,
        socket,
        deadline,
    };
    // Bounded: one byte past the limit tells an answer that is too large from one that fits.
    let mut response = Vec::new();
    let read = (&mut reader)
        .take(limits.answer_bytes + 1)
        .read_to_end(&mut response);
    if response.len() as u64 > limits.answer_bytes {
        return Err(format!(
            "the answer is larger than {} bytes: refused",
            limits.answer_bytes
        ));
    }
    match read {
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
        Err(e) if std::time::Instant::now() >= deadline => Err(format!(
            "{TIMED_OUT} ({} bytes of its answer came): {e}",
            response.len()
        )),
        Err(e) => Err(format!("cannot read the answer: {e}")),
    }
}

/// Whether a response's head gives its body's length (or chunks it), so that a cut is seen.
pub(super) fn is_framed(response: &[u8]) -> bool {
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
                Some(text) => unb64(text).ok_or_else(|| format!("etcd sent a bad base64 {name}")),
            }
        };
        let key = key_text(field("key")?);
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
pub(super) struct RangeAnswer<'a> {
    kvs: Vec<RawKeyValue<'a>>,
}

#[derive(Default)]
pub(super) struct RawKeyValue<'a> {
    // Base64 holds no escapes, so these borrow from the answer; a `Cow` still takes a
    // string that has some.
    key: std::borrow::Cow<'a, str>,
    value: std::borrow::Cow<'a, str>,
    mod_revision: Option<Int64<'a>>,
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
pub(super) fn range_kvs(body: &[u8]) -> Result<Vec<KeyValue>, String> {
    let answer: RangeAnswer = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(answer.kvs.len());
    for kv in answer.kvs {
        let key = unb64(&kv.key).ok_or("etcd sent a bad base64 key")?;
        let key = key_text(key);
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
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
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

pub(super) fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
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

pub(super) const ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

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

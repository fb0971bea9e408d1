//! A range read over etcd's gRPC interface, in pages: what a follower's first reading takes,
//! hundreds of MiB. Every other exchange with etcd goes through its JSON gateway
//! (`bell_wire::etcd`); this one does not because etcd's gateway turns the range into JSON
//! (every value in base64) several times slower than etcd reads it: 100,000 hosts' reports
//! came in 6.5 s as JSON and in about 1 s over gRPC on the same member. gRPC is HTTP/2 on the
//! same port (etcd tells the two apart by content type), with TLS (ALPN `h2`) when the store
//! is `etcds://`, and the user's token as the `token` metadata, as etcd's own clients send it.
//!
//! Only the messages a range needs are spoken, encoded and decoded here by hand from etcd's
//! `rpc.proto` and `kv.proto` (`RangeRequest`, `RangeResponse`, `ResponseHeader`, `KeyValue`).

use bell_wire::etcd::{Bytes, Entry, Etcd, GrpcAccess, Page};
use std::time::Duration;

/// The longest a range may take, connecting included.
const WITHIN: Duration = Duration::from_secs(300);

/// The largest answer taken (the JSON gateway's readers take up to 1 GiB of JSON).
const MAX_ANSWER: usize = 1 << 30;

/// Up to `limit` keys (0: every one) from `key` up to `range_end` at `revision` (0: etcd's
/// current one), in key order, read over gRPC from the first member that answers.
pub fn range(
    etcd: &Etcd,
    key: &[u8],
    range_end: &[u8],
    limit: usize,
    revision: i64,
) -> Result<Page, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("gRPC: {e}"))?;
    let request = range_request(key, range_end, limit, revision);
    let mut failures = Vec::new();
    for at in 0..etcd.endpoint_count() {
        let access = match etcd.grpc_access(at) {
            Ok(Some(access)) => access,
            Ok(None) => break,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let answer = runtime.block_on(async {
            tokio::time::timeout(WITHIN, call(&access, "/etcdserverpb.KV/Range", &request))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} s", WITHIN.as_secs())))
        });
        match answer.and_then(|framed| range_response(&unframe(framed.into())?)) {
            Ok(page) => return Ok(page),
            Err(e) => {
                // An expired token is refused as any other: the next reading logs in again.
                etcd.forget_token(at);
                failures.push(format!("{}: {e}", access.endpoint));
            }
        }
    }
    Err(format!(
        "no etcd member answered the range over gRPC ({})",
        failures.join("; ")
    ))
}

/// One unary call: `message` sent to `path`, the answer's message.
async fn call(access: &GrpcAccess, path: &str, message: &[u8]) -> Result<Vec<u8>, String> {
    let (host, port) = bell_wire::client::host_port(&access.endpoint)?;
    let addresses = bell_wire::resolve::resolve(host, port)?;
    let tcp = connect(&addresses).await?;
    let _ = tcp.set_nodelay(true);
    match &access.tls {
        None => exchange(tcp, access, path, message).await,
        Some(config) => {
            let mut config = (**config).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let name = rustls::pki_types::ServerName::try_from(
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
            )
            .map_err(|_| format!("`{host}` is not a name a certificate can be for"))?;
            let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(tls, access, path, message).await
        }
    }
}

async fn connect(addresses: &[std::net::SocketAddr]) -> Result<tokio::net::TcpStream, String> {
    let mut last = String::from("no address");
    for address in addresses {
        match tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(address),
        )
        .await
        {
            Ok(Ok(tcp)) => return Ok(tcp),
            Ok(Err(e)) => last = format!("{address}: {e}"),
            Err(_) => last = format!("{address}: no connection within 5 s"),
        }
    }
    Err(last)
}

async fn exchange<T>(
    io: T,
    access: &GrpcAccess,
    path: &str,
    message: &[u8],
) -> Result<Vec<u8>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Large windows: the answer is one message of up to hundreds of MiB, and HTTP/2's
    // default window (64 KiB) would have etcd wait for a window update every few frames.
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(32 << 20)
        .initial_connection_window_size(64 << 20)
        .max_frame_size(1 << 20)
        .handshake::<_, bytes::Bytes>(io)
        .await
        .map_err(|e| format!("HTTP/2: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}{path}", access.endpoint))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = &access.token {
        request = request.header("token", token.as_str());
    }
    let request = request.body(()).map_err(|e| format!("gRPC: {e}"))?;
    let mut client = client.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    let (answer, mut send) = client
        .send_request(request, false)
        .map_err(|e| format!("HTTP/2: {e}"))?;
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(message);
    send.send_data(framed.into(), true)
        .map_err(|e| format!("HTTP/2: {e}"))?;
    let answer = answer.await.map_err(|e| format!("HTTP/2: {e}"))?;
    let status = answer.status();
    // A refusal often comes as headers alone ("trailers-only").
    grpc_status(answer.headers())?;
    if status != http::StatusCode::OK {
        return Err(format!("HTTP {status} (is this etcd's client port?)"));
    }
    let mut body = answer.into_body();
    let mut bytes: Vec<u8> = Vec::new();
    let mut sized = false;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("HTTP/2: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if bytes.len() + chunk.len() > MAX_ANSWER + 5 {
            return Err(format!("an answer over {} MiB", MAX_ANSWER >> 20));
        }
        bytes.extend_from_slice(&chunk);
        // The message says its length up front: room for all of it at once, rather than
        // hundreds of MiB copied as the buffer doubles.
        if !sized && bytes.len() >= 5 {
            sized = true;
            let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
            bytes.reserve(length.min(MAX_ANSWER).saturating_sub(bytes.len() - 5));
        }
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| format!("HTTP/2: {e}"))?
        .ok_or("the answer ended without gRPC's status")?;
    grpc_status(&trailers)?;
    driver.abort();
    Ok(bytes)
}

/// The one message of a unary call's answer (gRPC frames it: a compression flag and its
/// length, then the message).
fn unframe(framed: Bytes) -> Result<Bytes, String> {
    let (Some(head), Some(message)) = (framed.get(..5), framed.get(5..)) else {
        return Err("an answer without a gRPC message".into());
    };
    if head[0] != 0 {
        return Err("a compressed gRPC message (none was asked for)".into());
    }
    let length = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if message.len() != length {
        return Err(format!(
            "a gRPC message of {} bytes that says {length}",
            message.len()
        ));
    }
    Ok(framed.slice(5..))
}

/// `Err` with etcd's words when `headers` carry a gRPC status other than OK.
fn grpc_status(headers: &http::HeaderMap) -> Result<(), String> {
    let Some(status) = headers.get("grpc-status") else {
        return Ok(());
    };
    if status.as_bytes() == b"0" {
        return Ok(());
    }
    let message = headers
        .get("grpc-message")
        .map(|m| percent_encoding::percent_decode(m.as_bytes()).decode_utf8_lossy())
        .unwrap_or_default();
    Err(format!(
        "etcd refused: {message} (gRPC status {})",
        String::from_utf8_lossy(status.as_bytes())
    ))
}

/// `RangeRequest { key = 1, range_end = 2, limit = 3, revision = 4 }` (a zero is left out,
/// as protobuf writes it).
fn range_request(key: &[u8], range_end: &[u8], limit: usize, revision: i64) -> Vec<u8> {
    let mut out = Vec::new();
    for (field, bytes) in [(1, key), (2, range_end)] {
        put_varint(&mut out, field << 3 | 2);
        put_varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    for (field, n) in [(3, limit as u64), (4, revision.max(0) as u64)] {
        if n != 0 {
            put_varint(&mut out, field << 3);
            put_varint(&mut out, n);
        }
    }
    out
}

/// `RangeResponse { header = 1, kvs = 2 (repeated), more = 3, count = 4 }`. Each value is
/// a slice of `message`, not a copy: at 100,000 hosts the answer is hundreds of MiB, and the
/// answer lives on until the last of its values is written anew (at most the range's size
/// again, held by a cache whose keys all changed since).
fn range_response(message: &Bytes) -> Result<Page, String> {
    let mut page = Page {
        revision: 0,
        entries: Vec::new(),
        more: false,
    };
    let mut fields = Fields(message);
    while let Some((field, value)) = fields.next_field()? {
        match (field, value) {
            (1, Value::Bytes(header)) => {
                let mut header = Fields(header);
                while let Some((field, value)) = header.next_field()? {
                    if let (3, Value::Int(revision)) = (field, value) {
                        page.revision = revision as i64;
                    }
                }
            }
            (2, Value::Bytes(kv)) => page.entries.push(key_value(message, kv)?),
            (3, Value::Int(more)) => page.more = more != 0,
            _ => {}
        }
    }
    if page.revision <= 0 {
        return Err("a range answer without a revision".into());
    }
    Ok(page)
}

/// `KeyValue { key = 1, create_revision = 2, mod_revision = 3, version = 4, value = 5,
/// lease = 6 }`.
fn key_value(whole: &Bytes, message: &[u8]) -> Result<Entry, String> {
    let mut entry = Entry {
        key: Vec::new(),
        value: Bytes::new(),
        create_revision: 0,
        mod_revision: 0,
        version: 0,
        lease: 0,
    };
    let mut fields = Fields(message);
    while let Some((field, value)) = fields.next_field()? {
        match (field, value) {
            (1, Value::Bytes(key)) => entry.key = key.to_vec(),
            (5, Value::Bytes(value)) => entry.value = whole.slice_ref(value),
            (2, Value::Int(n)) => entry.create_revision = n as i64,
            (3, Value::Int(n)) => entry.mod_revision = n as i64,
            (4, Value::Int(n)) => entry.version = n as i64,
            (6, Value::Int(n)) => entry.lease = n as i64,
            _ => {}
        }
    }
    Ok(entry)
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A protobuf message's fields, in order.
struct Fields<'m>(&'m [u8]);

enum Value<'m> {
    Int(u64),
    Bytes(&'m [u8]),
    /// Fixed-width: no field read here is one.
    Other,
}

impl<'m> Fields<'m> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first().ok_or("a cut protobuf varint")?;
            self.0 = rest;
            n |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(n);
            }
        }
        Err("a protobuf varint over 64 bits".into())
    }

    fn take(&mut self, n: usize) -> Result<&'m [u8], String> {
        let (taken, rest) = self
            .0
            .split_at_checked(n)
            .ok_or("a protobuf field longer than its message")?;
        self.0 = rest;
        Ok(taken)
    }

    fn next_field(&mut self) -> Result<Option<(u64, Value<'m>)>, String> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let value = match tag & 7 {
            0 => Value::Int(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Other
            }
            2 => {
                let length = usize::try_from(self.varint()?).map_err(|e| e.to_string())?;
                Value::Bytes(self.take(length)?)
            }
            5 => {
                self.take(4)?;
                Value::Other
            }
            other => return Err(format!("a protobuf field of wire type {other}")),
        };
        Ok(Some((tag >> 3, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
        put_varint(out, number << 3 | 2);
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    fn int(out: &mut Vec<u8>, number: u64, n: u64) {
        put_varint(out, number << 3);
        put_varint(out, n);
    }

    #[test]
    fn a_range_answer_is_read_field_by_field_and_unknown_fields_are_passed_over() {
        let mut header = Vec::new();
        int(&mut header, 1, 14841639068965178418);
        int(&mut header, 3, 100_002);
        let mut kv = Vec::new();
        field(&mut kv, 1, b"/bell/f/running/a");
        int(&mut kv, 2, 7);
        int(&mut kv, 3, 99_000);
        int(&mut kv, 4, 3);
        field(&mut kv, 5, &[0, 255, 10, 13]);
        int(&mut kv, 6, 1 << 40);
        // A fixed-width field of a later etcd.
        put_varint(&mut kv, 9 << 3 | 1);
        kv.extend_from_slice(&[1; 8]);
        let mut answer = Vec::new();
        field(&mut answer, 1, &header);
        field(&mut answer, 2, &kv);
        field(&mut answer, 2, &kv);
        int(&mut answer, 4, 2);
        let answer = Bytes::from(answer);
        let page = range_response(&answer).unwrap();
        assert_eq!(page.revision, 100_002);
        assert!(!page.more);
        assert_eq!(page.entries.len(), 2);
        let entry = &page.entries[0];
        assert_eq!(entry.key, b"/bell/f/running/a");
        assert_eq!(entry.value, [0, 255, 10, 13][..]);
        // A slice of the answer, not a copy of it.
        let inside = answer.as_ptr_range();
        assert!(inside.contains(&entry.value.as_ptr()));
        assert_eq!(
            (
                entry.create_revision,
                entry.mod_revision,
                entry.version,
                entry.lease
            ),
            (7, 99_000, 3, 1 << 40)
        );
    }

    #[test]
    fn a_cut_or_malformed_answer_is_an_error_not_a_panic() {
        let mut kv = Vec::new();
        field(&mut kv, 1, b"/bell/f/x");
        let mut answer = Vec::new();
        field(&mut answer, 2, &kv);
        for end in 0..answer.len() {
            let _ = range_response(&Bytes::copy_from_slice(&answer[..end]));
        }
        assert!(range_response(&Bytes::from(answer))
            .unwrap_err()
            .contains("revision"));
        assert!(
            range_response(&Bytes::from_static(&[0x0b])).is_err(),
            "wire type 3"
        );
        assert!(
            range_response(&Bytes::from_static(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f])).is_err()
        );
        assert!(
            range_response(&Bytes::from_static(&[0x08; 11])).is_err(),
            "a varint over 64 bits"
        );
    }

    #[test]
    fn an_answer_is_one_uncompressed_message_of_the_length_it_says() {
        assert_eq!(
            unframe(Bytes::from_static(&[0, 0, 0, 0, 2, 7, 8])).unwrap(),
            [7, 8][..]
        );
        assert!(unframe(Bytes::from_static(&[0, 0, 0])).is_err());
        assert!(unframe(Bytes::from_static(&[1, 0, 0, 0, 2, 7, 8]))
            .unwrap_err()
            .contains("compressed"));
        assert!(unframe(Bytes::from_static(&[0, 0, 0, 0, 3, 7, 8]))
            .unwrap_err()
            .contains("says 3"));
        assert!(
            unframe(Bytes::from_static(&[0, 0, 0, 0, 1, 7, 8])).is_err(),
            "two messages"
        );
    }

    #[test]
    fn a_request_names_the_range() {
        assert_eq!(
            range_request(b"/a/", b"/a0", 0, 0),
            [0x0a, 3, b'/', b'a', b'/', 0x12, 3, b'/', b'a', b'0']
        );
        // A page of 300 keys at revision 5: 300 as a varint is 0xac 0x02.
        assert_eq!(
            range_request(b"/a/", b"/a0", 300, 5)[10..],
            [0x18, 0xac, 0x02, 0x20, 5]
        );
    }
}

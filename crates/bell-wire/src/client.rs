//! bell's HTTP/1.1 client, for every server it reads: etcd's JSON gateway (`POST`, the answer
//! read whole) and a bundle source or a build output on a web server (`GET`, the body
//! streamed). One request per connection, on a `std::net::TcpStream` (through rustls for
//! `https://` and `etcds://`): bell-run stays one small synchronous binary without an async
//! runtime.
//!
//! None of these servers is trusted, so every exchange is bounded: a connection waits at most
//! [`Bounds::connect`], the server may be silent at most [`Bounds::read`], nothing runs past
//! the [`Deadline`] (a byte every few seconds never trips a read timeout), and an answer read
//! whole is at most [`Bounds::max_bytes`]. Heads are parsed by one small parser, fuzzed
//! (`fuzz/`).

use crate::deadline::Deadline;
use crate::tls::{Tls, TlsStream};
use std::io::{self, BufRead, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How one exchange is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Nothing of the exchange runs past it.
    pub deadline: Deadline,
    /// The longest wait for one connection (each address of a name is tried in turn).
    pub connect: Duration,
    /// The longest the server may be silent, or take to accept what is sent.
    pub read: Duration,
    /// The largest answer read whole: one byte more and it is refused, what was read dropped.
    pub max_bytes: u64,
}

/// The largest response head taken.
const MAX_HEAD_BYTES: usize = 64 << 10;
/// What a response's head says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// The first line, for messages (`HTTP/1.1 503 Service Unavailable`).
    pub status_line: String,
    pub content_length: Option<u64>,
    /// `Transfer-Encoding`, when the server sent one.
    pub transfer_encoding: Option<String>,
    /// `Retry-After` in seconds (its date form is not read).
    pub retry_after: Option<u64>,
}

/// Parses the head of a response (everything before the blank line).
pub fn parse_head(head: &[u8]) -> Result<Head, String> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default().to_string();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP response: `{}`", status_line.escape_debug()))?;
    let mut content_length = None;
    let mut transfer_encoding = None;
    let mut retry_after = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                content_length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("bad Content-Length `{}`", value.escape_debug()))?,
                )
            }
            "transfer-encoding" => transfer_encoding = Some(value.to_string()),
            "retry-after" => retry_after = value.parse::<u64>().ok(),
            _ => {}
        }
    }
    Ok(Head {
        status,
        status_line,
        content_length,
        transfer_encoding,
        retry_after,
    })
}

/// A connection, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(tcp) => tcp,
            Conn::Tls(tls) => tls.tcp(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.read(buf),
            Conn::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(tcp) => tcp.write(buf),
            Conn::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(tcp) => tcp.flush(),
            Conn::Tls(tls) => tls.flush(),
        }
    }
}

/// What the server sends, as a reader whose every read waits at most [`Bounds::read`] and
/// never past the deadline. A read that runs out of time fails with the deadline's words.
pub struct Body {
    conn: Conn,
    deadline: Deadline,
    read: Duration,
    /// The body's length, when the head gave one.
    pub length: Option<u64>,
}

impl Body {
    pub fn deadline(&self) -> Deadline {
        self.deadline
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let wait = self
            .deadline
            .wait(self.read)
            .map_err(|e| io::Error::new(io::ErrorKind::TimedOut, e))?;
        self.conn.tcp().set_read_timeout(Some(wait))?;
        self.conn.read(buf)
    }
}

/// `HOST:PORT` (an IPv6 literal in brackets), as an etcd endpoint is given.
pub fn host_port(endpoint: &str) -> Result<(&str, u16), String> {
    endpoint
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse().ok()?)))
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| format!("`{endpoint}` is not HOST:PORT"))
}

/// Connects to `host` (as a URL writes it) on `port`, trying each of its addresses, and
/// completes the TLS handshake when `tls` is given: a server whose certificate is not trusted
/// is refused here.
fn connect(host: &str, port: u16, tls: Option<&Tls>, bounds: &Bounds) -> Result<Conn, String> {
    let addrs = crate::resolve::resolve(host, port)?;
    let mut last = format!("{host} has no address");
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, bounds.deadline.wait(bounds.connect)?) {
            Ok(tcp) => {
                let io_failed = |e: io::Error| format!("cannot use the connection: {e}");
                tcp.set_write_timeout(Some(bounds.read))
                    .map_err(io_failed)?;
                // The handshake's reads wait no longer than the exchange's.
                tcp.set_read_timeout(Some(bounds.deadline.wait(bounds.read)?))
                    .map_err(io_failed)?;
                return Ok(match tls {
                    None => Conn::Plain(tcp),
                    Some(tls) => Conn::Tls(Box::new(tls.connect(tcp, host)?)),
                });
            }
            Err(e) => last = format!("cannot connect to {addr}: {e}"),
        }
    }
    Err(match addrs.len() {
        0 | 1 => last,
        n => format!("{last} (the last of {n} addresses of {host})"),
    })
}

/// `POST path` with a JSON `body` to `endpoint` (`HOST:PORT`), with `authorization` as its
/// header when given: how etcd's gateway is spoken to. The whole answer, at most
/// [`Bounds::max_bytes`], is returned as it came (see [`parse_response`]), so that a caller
/// can tell a TLS port from a plain one by it.
pub fn post_json(
    endpoint: &str,
    tls: Option<&Tls>,
    bounds: &Bounds,
    path: &str,
    authorization: Option<&str>,
    body: &str,
) -> Result<Vec<u8>, String> {
    if path.bytes().any(|b| b.is_ascii_control() || b == b' ')
        || authorization.is_some_and(|a| a.bytes().any(|b| b.is_ascii_control()))
    {
        return Err(format!(
            "`{}` is not a request to send",
            path.escape_debug()
        ));
    }
    let authorization = authorization.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // The request may hold a password (etcd's `authenticate`): it goes as soon as it is sent.
    exchange(endpoint, tls, bounds, request.as_bytes())
}

/// Sends `request` to `endpoint` (`HOST:PORT`) and reads the whole answer, at most
/// [`Bounds::max_bytes`].
fn exchange(
    endpoint: &str,
    tls: Option<&Tls>,
    bounds: &Bounds,
    request: &[u8],
) -> Result<Vec<u8>, String> {
    let (host, port) = host_port(endpoint)?;
    let mut conn = connect(host, port, tls, bounds)?;
    conn.write_all(request)
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut body = Body {
        conn,
        deadline: bounds.deadline,
        read: bounds.read,
        length: None,
    };
    // Bounded: one byte past the limit tells an answer that is too large from one that fits.
    let mut response = Vec::new();
    let read = (&mut body)
        .take(bounds.max_bytes + 1)
        .read_to_end(&mut response);
    if response.len() as u64 > bounds.max_bytes {
        return Err(format!(
            "the answer is larger than {} bytes: refused",
            bounds.max_bytes
        ));
    }
    match read {
        Ok(_) => Ok(response),
        // A TLS server that closes without `close_notify`: the answer counts only when its
        // head says how long it is and all of it came (`parse_response` checks the length).
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && is_framed(&response) => Ok(response),
        // A server that closes with our request unread resets the connection (Go's TLS
        // server does to a plain request longer than what it read): what came before the
        // reset, if anything, is judged as a closed connection's answer.
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(response),
        Err(e) if bounds.deadline.passed() => Err(format!(
            "{} ({} bytes of its answer came): {e}",
            bounds.deadline.says(),
            response.len()
        )),
        Err(e) => Err(format!("cannot read the answer: {e}")),
    }
}

/// Whether a response's head gives its body's length (or chunks it), so that a cut is seen.
pub fn is_framed(response: &[u8]) -> bool {
    let Some(split) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    parse_head(&response[..split]).is_ok_and(|head| {
        head.content_length.is_some()
            || head
                .transfer_encoding
                .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    })
}

/// Splits an HTTP/1.1 response into status and body, undoing chunked transfer encoding.
pub fn parse_response(bytes: &[u8]) -> Result<(u16, Vec<u8>), String> {
    parse_response_head(bytes).map(|(head, body)| (head.status, body))
}

/// [`parse_response`], with the whole head.
pub fn parse_response_head(bytes: &[u8]) -> Result<(Head, Vec<u8>), String> {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer is not HTTP")?;
    let body = &bytes[split + 4..];
    let head = parse_head(&bytes[..split])?;
    let chunked = head
        .transfer_encoding
        .as_ref()
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let length = head.content_length.and_then(|n| usize::try_from(n).ok());
    if chunked {
        return dechunk(body).map(|b| (head, b));
    }
    let body = match length {
        Some(n) if n <= body.len() => body[..n].to_vec(),
        Some(_) => return Err("the answer was cut short".to_string()),
        None => body.to_vec(),
    };
    Ok((head, body))
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

/// Why a `GET` did not give a body.
#[derive(Debug, PartialEq, Eq)]
pub enum GetError {
    /// The server has no such file (HTTP 404 or 410).
    NotFound,
    /// Anything else: unreachable, a server error, a head that is not HTTP.
    Failed(String),
}

/// Sends `GET path` to `host:port` and returns the body as a reader, with its length when the
/// server gave one. `path` is sent as given: the caller percent-encodes what needs it. A body
/// in a transfer encoding is refused: bell reads static files, served with their length.
pub fn get_stream(
    host: &str,
    port: u16,
    tls: Option<&Tls>,
    path: &str,
    user_agent: &str,
    bounds: &Bounds,
) -> Result<Body, GetError> {
    let failed = GetError::Failed;
    if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(failed(format!(
            "`{}` is not a path to ask for",
            path.escape_debug()
        )));
    }
    let mut conn = connect(host, port, tls, bounds).map_err(failed)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: {user_agent}\r\n\
         Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes())
        .map_err(|e| failed(e.to_string()))?;
    let mut body = Body {
        conn,
        deadline: bounds.deadline,
        read: bounds.read,
        length: None,
    };
    let head = read_head(&mut body).map_err(failed)?;
    if let Some(value) = head
        .transfer_encoding
        .filter(|t| !t.eq_ignore_ascii_case("identity"))
    {
        return Err(failed(format!(
            "the server sent `Transfer-Encoding: {value}`; serve the files as static files \
             (with a Content-Length)"
        )));
    }
    match head.status {
        200 => {
            body.length = head.content_length;
            Ok(body)
        }
        404 | 410 => Err(GetError::NotFound),
        _ => Err(failed(format!(
            "the server answered `{}`",
            head.status_line
        ))),
    }
}

/// The response's head, read byte by byte up to the blank line (small; the body is then
/// streamed from `body`).
fn read_head(body: &mut Body) -> Result<Head, String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEAD_BYTES {
            return Err("the response headers are too large".into());
        }
        match body.read(&mut byte) {
            Ok(0) => return Err("the server closed the connection early".into()),
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("no response: {e}")),
        }
    }
    parse_head(&head)
}

/// `POST path` with a JSON `body`, its answer read as a stream of lines: etcd's gateway
/// answers a watch with one JSON object per line, in chunked encoding, for as long as the
/// watch lasts. Every read waits at most [`Bounds::read`] and none past the deadline; a line
/// longer than [`Bounds::max_bytes`] ends the stream.
pub fn post_lines(
    endpoint: &str,
    tls: Option<&Tls>,
    bounds: &Bounds,
    path: &str,
    authorization: Option<&str>,
    body: &str,
) -> Result<Lines, String> {
    let (host, port) = host_port(endpoint)?;
    if authorization.is_some_and(|a| a.bytes().any(|b| b.is_ascii_control())) {
        return Err("an authorization with a control character".into());
    }
    let mut conn = connect(host, port, tls, bounds)?;
    let authorization = authorization.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         {authorization}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut body = Body {
        conn,
        deadline: bounds.deadline,
        read: bounds.read,
        length: None,
    };
    let head = read_head(&mut body)?;
    if head.status != 200 {
        return Err(format!("the server answered `{}`", head.status_line));
    }
    let chunked = head
        .transfer_encoding
        .as_deref()
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    Ok(Lines {
        reader: io::BufReader::new(Dechunk {
            body,
            chunked,
            left: 0,
            done: false,
        }),
        max: bounds.max_bytes,
    })
}

/// A streamed answer, line by line.
pub struct Lines {
    reader: io::BufReader<Dechunk>,
    max: u64,
}

impl Lines {
    /// The next line without its newline; `None` at the end of the stream.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut line = Vec::new();
        let read = (&mut self.reader)
            .take(self.max.saturating_add(1))
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Ok(None);
        }
        if line.len() as u64 > self.max {
            return Err(format!("a line of more than {} bytes", self.max));
        }
        if line.ends_with(b"\n") {
            line.pop();
        }
        Ok(Some(line))
    }
}

/// A body with chunked transfer encoding undone as it is read.
struct Dechunk {
    body: Body,
    chunked: bool,
    /// Bytes left of the current chunk.
    left: u64,
    done: bool,
}

impl Dechunk {
    /// One `\r\n`-ended line of the chunk framing (a size, or the empty line after data).
    fn framing_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if line.len() > 1024 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bad chunked encoding",
                ));
            }
            if self.body.read(&mut byte)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a chunk",
                ));
            }
            line.push(byte[0]);
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
}

impl Read for Dechunk {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.chunked {
            return self.body.read(buf);
        }
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let size = self.framing_line()?;
            let size = size.split(';').next().unwrap_or("").trim();
            self.left = u64::from_str_radix(size, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let got = self.body.read(&mut buf[..want])?;
        if got == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ended inside a chunk",
            ));
        }
        self.left -= got as u64;
        if self.left == 0 {
            self.framing_line()?;
        }
        Ok(got)
    }
}

/// `GET http://HOST[:PORT]/PATH`: the whole body, at most [`Bounds::max_bytes`], or `None`
/// when the server has no such file. Plain HTTP: how `bellc` reads a build output from the
/// web server that serves it to hosts. The path is sent as given.
pub fn get(url: &str, bounds: &Bounds) -> Result<Option<Vec<u8>>, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}`: only http:// URLs are read"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let (host, port) = match host_port(authority) {
        Ok(given) => given,
        Err(_) => (authority, 80),
    };
    if host.is_empty() || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!(
            "`{}` is not a URL bell can read",
            url.escape_debug()
        ));
    }
    let user_agent = concat!("bell/", env!("CARGO_PKG_VERSION"));
    let body = match get_stream(host, port, None, path, user_agent, bounds) {
        Ok(body) => body,
        Err(GetError::NotFound) => return Ok(None),
        Err(GetError::Failed(e)) => return Err(format!("{url}: {e}")),
    };
    let length = body.length;
    if length.is_some_and(|n| n > bounds.max_bytes) {
        return Err(format!(
            "{url}: the answer is larger than {} bytes: refused",
            bounds.max_bytes
        ));
    }
    let mut bytes = Vec::new();
    let read = body.take(bounds.max_bytes + 1).read_to_end(&mut bytes);
    if bytes.len() as u64 > bounds.max_bytes {
        return Err(format!(
            "{url}: the answer is larger than {} bytes: refused",
            bounds.max_bytes
        ));
    }
    match (read, length) {
        (Err(e), _) => Err(format!("{url}: cut short after {} bytes: {e}", bytes.len())),
        (Ok(_), Some(n)) if n != bytes.len() as u64 => Err(format!(
            "{url}: cut short: {} of {n} bytes arrived",
            bytes.len()
        )),
        (Ok(_), _) => Ok(Some(bytes)),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_read_as_servers_write_them() {
        let head = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nX: y").unwrap();
        assert_eq!((head.status, head.content_length), (200, Some(12)));
        let head = parse_head(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked").unwrap();
        assert_eq!(head.transfer_encoding.as_deref(), Some("chunked"));
        assert!(parse_head(b"SSH-2.0-OpenSSH").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1").is_err());
    }

    #[test]
    fn only_plain_http_urls_without_spaces_or_controls_are_fetched() {
        let bounds = Bounds {
            deadline: Deadline::after(Duration::from_secs(5), "out of time"),
            connect: Duration::from_secs(1),
            read: Duration::from_secs(1),
            max_bytes: 1 << 20,
        };
        let get = |url| get(url, &bounds);
        assert!(get("https://a/b").unwrap_err().contains("only http://"));
        assert!(get("http:///x").unwrap_err().contains("not a URL"));
        assert!(get("http://a/b c").unwrap_err().contains("not a URL"));
        assert!(get("http://a/b\r\nX: y").unwrap_err().contains("not a URL"));
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

    #[test]
    fn a_chunk_size_near_usize_max_is_a_short_answer_not_a_panic() {
        // `size + 2` overflowed and sliced past the end.
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nx";
        assert_eq!(
            parse_response(answer),
            Err("the answer was cut short".to_string())
        );
    }

    #[test]
    fn endpoints_are_host_and_port() {
        assert_eq!(host_port("127.0.0.1:2379"), Ok(("127.0.0.1", 2379)));
        assert_eq!(host_port("[::1]:2379"), Ok(("[::1]", 2379)));
        assert!(host_port("h").is_err());
        assert!(host_port(":1").is_err());
        assert!(host_port("h:x").is_err());
    }
}

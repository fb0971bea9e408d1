//! A small blocking HTTP/1.1 server: enough for a read-only status page on loopback. One
//! thread per connection, at most [`MAX_CONNECTIONS`] at once, `GET` and `HEAD` only, one
//! request per connection (`Connection: close`). A browser that refreshes a page every few
//! seconds needs no more, and it keeps bellc free of an async runtime.
//!
//! Everything a client sends is hostile: the request head is read with a time limit and a
//! size limit, the target is percent-decoded by the rules below and never touches the file
//! system.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::Deadline;

/// Connections served at once; the next one gets `503` at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A request head larger than this is refused (`431`).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a client has to send its whole request head, and then to take the whole answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A request as a handler sees it: the decoded path and the query's pairs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub path: String,
    pub query: Vec<(String, String)>,
}

impl Request {
    /// The first value of a query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a query parameter (`?label=a=b&label=c=d`).
    pub fn params<'r>(&'r self, name: &'r str) -> impl Iterator<Item = &'r str> + 'r {
        self.query
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    pub fn html(body: String) -> Response {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
        }
    }

    pub fn json(body: String) -> Response {
        Response {
            status: 200,
            content_type: "application/json",
            body: body.into_bytes(),
        }
    }

    pub fn with_status(mut self, status: u16) -> Response {
        self.status = status;
        self
    }

    /// Prometheus's text exposition format.
    pub fn metrics(body: String) -> Response {
        Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: body.into_bytes(),
        }
    }

    fn plain(status: u16, text: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{text}\n").into_bytes(),
        }
    }
}

/// Serves `handler` on `listener` until the process ends.
pub fn serve<H>(listener: TcpListener, handler: H)
where
    H: Fn(&Request) -> Response + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            // A connection that failed before it was accepted (reset, out of descriptors):
            // the next one may do better.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::SeqCst);
            let busy = Response::plain(503, "busy");
            let _ = write_response(&mut stream, &busy, false, Duration::from_secs(1));
            continue;
        }
        let (handler, slot) = (Arc::clone(&handler), Slot(Arc::clone(&busy)));
        // The slot is given back when the thread ends, however it ends (a handler that
        // panicked included), or at once when no thread could be started.
        let _ = std::thread::Builder::new()
            .name("bellc-serve".into())
            .spawn(move || {
                let _slot = slot;
                answer(stream, handler.as_ref());
            });
    }
}

/// One of the [`MAX_CONNECTIONS`], held while a connection is served.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn answer<H: Fn(&Request) -> Response>(mut stream: TcpStream, handler: &H) {
    let (response, head_only) = match read_head(&mut stream, CLIENT_TIMEOUT) {
        Ok(head) => match parse_head(&head) {
            Ok((method, request)) => {
                let head_only = method == "HEAD";
                (handler(&request), head_only)
            }
            Err(refusal) => (refusal, false),
        },
        Err(refusal) => (refusal, false),
    };
    let _ = write_response(&mut stream, &response, head_only, CLIENT_TIMEOUT);
}

/// The request head, up to the blank line, within `budget` for the whole head: a time limit
/// per read alone would let a client that sends a byte every few seconds hold its slot for hours.
fn read_head(stream: &mut TcpStream, budget: Duration) -> Result<Vec<u8>, Response> {
    let deadline = Deadline::after(budget, "the request head took too long");
    let timeout = || Response::plain(408, "request timeout");
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        let left = deadline.wait(budget).map_err(|_| timeout())?;
        stream.set_read_timeout(Some(left)).map_err(|_| timeout())?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(timeout()),
        };
        if n == 0 {
            return Err(Response::plain(
                400,
                "the request ended before its head did",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(Response::plain(431, "request head too large"));
        }
    }
}

/// `GET /hosts/a%20b?state=failed HTTP/1.1`: the method and the request. Headers are not
/// needed: every answer is the same whoever asks.
pub fn parse_head(head: &[u8]) -> Result<(String, Request), Response> {
    let bad = || Response::plain(400, "bad request");
    let text = std::str::from_utf8(head).map_err(|_| bad())?;
    let line = text.lines().next().ok_or_else(bad)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Response::plain(505, "HTTP/1.x only"));
    }
    if method != "GET" && method != "HEAD" {
        return Err(Response::plain(405, "read-only: GET and HEAD only"));
    }
    if !target.starts_with('/') {
        return Err(bad());
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = decode(path, false).ok_or_else(bad)?;
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((decode(k, true)?, decode(v, true)?))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    Ok((method.to_string(), Request { path, query }))
}

/// Percent-decoding (and, in a query, `+` as a space); `None` for text that is not UTF-8
/// once decoded, or holds a control character.
fn decode(text: &str, query: bool) -> Option<String> {
    let spaced;
    let text = if query {
        spaced = text.replace('+', " ");
        spaced.as_str()
    } else {
        text
    };
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(text).collect();
    let decoded = String::from_utf8(bytes).ok()?;
    (!decoded.chars().any(char::is_control)).then_some(decoded)
}

/// The answer, within `budget` for all of it (a client that reads a byte at a time would
/// otherwise hold its slot as long as it likes).
fn write_response(
    stream: &mut TcpStream,
    r: &Response,
    head_only: bool,
    budget: Duration,
) -> std::io::Result<()> {
    let deadline = Deadline::after(budget, "the client took too long to take the answer");
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    // No script runs on these pages and nothing is loaded from elsewhere: a host name or
    // label that slipped past escaping could still not run anything.
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n\
         Referrer-Policy: no-referrer\r\nConnection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    );
    write_within(stream, head.as_bytes(), deadline)?;
    if !head_only {
        write_within(stream, &r.body, deadline)?;
    }
    Ok(())
}

fn write_within(
    stream: &mut TcpStream,
    mut bytes: &[u8],
    deadline: Deadline,
) -> std::io::Result<()> {
    use std::io::ErrorKind;
    while !bytes.is_empty() {
        let left = deadline
            .wait(CLIENT_TIMEOUT)
            .map_err(|e| std::io::Error::new(ErrorKind::TimedOut, e))?;
        stream.set_write_timeout(Some(left))?;
        match stream.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_head;

    #[test]
    fn a_request_line_is_decoded() {
        let (method, r) = parse_head(
            b"GET /hosts/web%2D1?state=failed&label=rack%3Dr1&label=a+b HTTP/1.1\r\nHost: x",
        )
        .unwrap();
        assert_eq!(method, "GET");
        assert_eq!(r.path, "/hosts/web-1");
        assert_eq!(r.param("state"), Some("failed"));
        assert_eq!(r.params("label").collect::<Vec<_>>(), ["rack=r1", "a b"]);
    }

    #[test]
    fn hostile_requests_are_refused() {
        for (head, status) in [
            (&b"POST / HTTP/1.1"[..], 405),
            (b"DELETE /hosts/a HTTP/1.1", 405),
            (b"GET / HTTP/2", 505),
            (b"GET http://elsewhere/ HTTP/1.1", 400),
            (b"GET /a%0d%0aSet-Cookie:x HTTP/1.1", 400),
            (b"GET /%ff HTTP/1.1", 400),
            (b"GET / HTTP/1.1 extra", 400),
            (b"\xff\xfe", 400),
            (b"", 400),
        ] {
            let refused = parse_head(head).err().map(|r| r.status);
            assert_eq!(refused, Some(status), "{}", String::from_utf8_lossy(head));
        }
    }

    /// A client that sends its head a byte at a time, each within the read timeout, still has
    /// only the budget for the whole head: otherwise 64 of them would hold every slot for hours.
    #[test]
    fn a_head_sent_slowly_runs_out_of_time() {
        use std::io::Write;
        use std::time::{Duration, Instant};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // It would dribble for a minute; the bound below is far from both ends, so a loaded
        // machine does not fail the test and a server without the budget does.
        let dribbler = std::thread::spawn({
            let done = std::sync::Arc::clone(&done);
            move || {
                let mut client = std::net::TcpStream::connect(address).unwrap();
                for _ in 0..3000 {
                    if done.load(std::sync::atomic::Ordering::SeqCst)
                        || client.write_all(b"G").is_err()
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        let (mut stream, _) = listener.accept().unwrap();
        let started = Instant::now();
        let refused = super::read_head(&mut stream, Duration::from_millis(300)).err();
        assert_eq!(refused.map(|r| r.status), Some(408));
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(stream);
        dribbler.join().unwrap();
    }

    /// The same for the answer: a client that takes it a byte at a time gets the budget.
    #[test]
    fn an_answer_taken_slowly_runs_out_of_time() {
        use std::io::Read;
        use std::time::{Duration, Instant};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sipper = std::thread::spawn({
            let done = std::sync::Arc::clone(&done);
            move || {
                let mut client = std::net::TcpStream::connect(address).unwrap();
                let mut sip = [0u8; 4096];
                while !done.load(std::sync::atomic::Ordering::SeqCst)
                    && matches!(client.read(&mut sip), Ok(n) if n > 0)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        let (mut stream, _) = listener.accept().unwrap();
        let big = super::Response::html("x".repeat(64 << 20));
        let started = Instant::now();
        let written = super::write_response(&mut stream, &big, false, Duration::from_millis(300));
        assert!(written.is_err());
        // Sipped, the answer would take over a minute.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(stream);
        sipper.join().unwrap();
    }
}

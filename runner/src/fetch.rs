//! Where `bell-run pull` fetches releases and bundles from: a static web server
//! (`http://HOST[:PORT]/PATH/`, or `https://` verified against `--source-ca` or the system's
//! CAs) or a directory (an rsync or NFS mirror), laid out as `bellc build` writes OUT.
//!
//! HTTP/1.1 on a `std::net::TcpStream` (through rustls for https), one request per
//! connection, with connect and read timeouts: bell-run stays one small synchronous binary
//! without an async runtime. Nothing fetched is trusted for being fetched: a release is
//! checked against its signature and every file against the sha256 the verified chain names,
//! while it streams; TLS only hides what a host fetches.

use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default of `pull --fetch-timeout`: the whole fetch, from the first connection to the
/// last byte of the last file.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// When this process's fetching must be over (`pull --fetch-timeout`). Per process, as a
/// pull is: a server that sends a byte every 20 s never trips a read timeout, and without one
/// deadline for the whole it would hold the host's pull for ever.
static DEADLINE: Mutex<Option<Instant>> = Mutex::new(None);

pub fn set_deadline(at: Instant) {
    if let Ok(mut deadline) = DEADLINE.lock() {
        *deadline = Some(at);
    }
}

/// The limits of a host's every request to its store: a host's answer size, and no request
/// past this process's fetch deadline when it has one (`pull --fetch-timeout`).
pub fn store_limits() -> bell_store::etcd::Limits {
    bell_store::etcd::Limits {
        until: DEADLINE.lock().ok().and_then(|d| *d),
        ..bell_store::etcd::Limits::HOST
    }
}

/// How long a read (or a connection) may wait now: `limit`, or less when the deadline is
/// nearer; an error when it passed.
fn time_left(limit: Duration) -> Result<Duration, String> {
    let deadline = DEADLINE.lock().ok().and_then(|d| *d);
    let Some(deadline) = deadline else {
        return Ok(limit);
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err("the fetch ran out of time (`--fetch-timeout`)".to_string());
    }
    Ok(left.min(limit))
}

/// A connection, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<bell_store::tls::TlsStream>),
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

/// A connection whose every read waits at most as long as the deadline leaves.
struct Deadlined(Conn);

impl Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let wait = time_left(READ_TIMEOUT).map_err(io::Error::other)?;
        self.0.tcp().set_read_timeout(Some(wait))?;
        self.0.read(buf)
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A server that sends nothing for this long has stalled; the download is abandoned (and
/// resumed on the next pull).
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_HEADER_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Http {
        host: String,
        port: u16,
        /// Starts and ends with `/`.
        path: String,
        /// For `https://`.
        tls: Option<bell_store::tls::Tls>,
    },
    Dir(PathBuf),
}

/// Why a fetch did not give the file.
#[derive(Debug)]
pub enum FetchError {
    /// The source does not have it (HTTP 404, no such file).
    NotFound(String),
    /// Anything else: unreachable, cut short, too large, a server error.
    Failed(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::NotFound(m) | FetchError::Failed(m) => f.write_str(m),
        }
    }
}

impl Source {
    /// `http://HOST[:PORT]/PATH/`, `https://…` verified against `ca` (the system's CAs
    /// without it), or a directory path.
    pub fn open(text: &str, ca: Option<&Path>) -> Result<Source, String> {
        Source::read(text, ca, true)
    }

    /// [`Source::open`] without reading the CA file, to check what an image's timer will
    /// open (an https source it returns has no TLS configuration, and is not fetched from).
    pub fn check(text: &str, ca: Option<&Path>) -> Result<Source, String> {
        Source::read(text, ca, false)
    }

    fn read(text: &str, ca: Option<&Path>, load: bool) -> Result<Source, String> {
        let (rest, https) = match (text.strip_prefix("http://"), text.strip_prefix("https://")) {
            (Some(rest), _) => (Some(rest), false),
            (_, Some(rest)) => (Some(rest), true),
            _ => (None, false),
        };
        if ca.is_some() && !https {
            return Err(format!(
                "`--source-ca` is for an https:// source, not `{text}`"
            ));
        }
        if let Some(rest) = rest {
            let (authority, path) = match rest.find('/') {
                Some(at) => rest.split_at(at),
                None => (rest, "/"),
            };
            // `[IPv6]` keeps its brackets: they are part of the Host header.
            let (host, port) = match authority.find(']').filter(|_| authority.starts_with('[')) {
                Some(end) => {
                    let (host, after) = authority.split_at(end + 1);
                    (host, after.strip_prefix(':'))
                }
                None => match authority.rsplit_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (authority, None),
                },
            };
            let port = match port {
                Some(port) => port
                    .parse::<u16>()
                    .map_err(|_| format!("`{text}`: `{port}` is not a port"))?,
                None if host.len() == authority.len() => {
                    if https {
                        443
                    } else {
                        80
                    }
                }
                None => return Err(format!("`{text}`: expected `:PORT` after `{host}`")),
            };
            let bad = host.is_empty()
                || authority.contains('@')
                || path.contains(['?', '#'])
                || path.split('/').any(|part| part == "..")
                || path.bytes().any(|b| b.is_ascii_control() || b == b' ');
            if bad {
                return Err(format!(
                    "`{text}` is not a source URL; expected `http[s]://HOST[:PORT]/PATH/`"
                ));
            }
            let mut path = path.to_string();
            if !path.ends_with('/') {
                path.push('/');
            }
            let tls = if https && load {
                let files = bell_store::tls::TlsFiles {
                    ca: ca.map(Path::to_path_buf),
                    ..Default::default()
                };
                Some(bell_store::tls::Tls::load(
                    &files,
                    ["--source-ca", "--source-cert", "--source-key"],
                )?)
            } else {
                None
            };
            return Ok(Source::Http {
                host: host.to_string(),
                port,
                path,
                tls,
            });
        }
        if text.contains("://") {
            return Err(format!(
                "`{text}`: bell-run fetches over http://, https:// or from a directory"
            ));
        }
        if text.is_empty() {
            return Err("`--source` is empty".to_string());
        }
        Ok(Source::Dir(PathBuf::from(text)))
    }

    pub fn describe(&self, rel: &str) -> String {
        match self {
            Source::Http {
                host,
                port,
                path,
                tls,
            } => {
                let scheme = if tls.is_some() { "https" } else { "http" };
                format!("{scheme}://{host}:{port}{path}{rel}")
            }
            Source::Dir(dir) => dir.join(rel).display().to_string(),
        }
    }

    /// The whole of `rel`, at most `max` bytes.
    pub fn get(&self, rel: &str, max: u64) -> Result<Vec<u8>, FetchError> {
        let mut bytes = Vec::new();
        self.stream(rel, max, &mut bytes)?;
        Ok(bytes)
    }

    /// Streams `rel` into `out`, at most `max` bytes; returns the sha256 of what was written.
    pub fn stream(&self, rel: &str, max: u64, out: &mut dyn Write) -> Result<String, FetchError> {
        let what = self.describe(rel);
        let failed = |e: String| FetchError::Failed(format!("{what}: {e}"));
        let (mut body, length): (Box<dyn Read>, Option<u64>) = match self {
            Source::Dir(dir) => {
                let path = dir.join(rel);
                // O_NONBLOCK: a FIFO put where a file should be must not hold the pull until
                // someone writes to it; it is then refused as not a plain file.
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&path)
                    .map_err(|e| match e.kind() {
                        io::ErrorKind::NotFound => {
                            FetchError::NotFound(format!("{what}: not found"))
                        }
                        _ => failed(e.to_string()),
                    })?;
                let meta = file.metadata().map_err(|e| failed(e.to_string()))?;
                if !meta.is_file() {
                    return Err(failed("not a plain file".into()));
                }
                (Box::new(file), Some(meta.len()))
            }
            Source::Http {
                host,
                port,
                path,
                tls,
            } => {
                let (stream, length) =
                    http_get(host, *port, tls.as_ref(), &format!("{path}{}", encode(rel)))
                        .map_err(|e| match e {
                            FetchError::NotFound(_) => {
                                FetchError::NotFound(format!("{what}: not found"))
                            }
                            FetchError::Failed(m) => failed(m),
                        })?;
                (stream, length)
            }
        };
        if let Some(length) = length {
            if length > max {
                return Err(failed(format!(
                    "{length} bytes, more than the {max} bytes expected"
                )));
            }
        }
        let mut hasher = Sha256::new();
        let mut total: u64 = 0;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // A read whose timeout was the time left says so, not "temporarily
                    // unavailable".
                    let why = match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                            time_left(Duration::from_secs(1)).err()
                        }
                        _ => None,
                    }
                    .unwrap_or_else(|| e.to_string());
                    return Err(failed(format!("cut short after {total} bytes: {why}")));
                }
            };
            total += n as u64;
            if total > max {
                return Err(failed(format!("more than the {max} bytes expected")));
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| failed(format!("cannot store it: {e}")))?;
        }
        if let Some(length) = length {
            if total != length {
                return Err(failed(format!(
                    "cut short: {total} of {length} bytes arrived"
                )));
            }
        }
        Ok(hex(&hasher.finalize()))
    }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Percent-encodes a relative path for a request line: everything but unreserved characters
/// and `/` (bundle paths are host paths, which may hold spaces and worse).
fn encode(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len());
    for byte in rel.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Sends one GET and returns the body as a reader, with its length when the server gave one.
fn http_get(
    host: &str,
    port: u16,
    tls: Option<&bell_store::tls::Tls>,
    path: &str,
) -> Result<(Box<dyn Read>, Option<u64>), FetchError> {
    let failed = |m: String| FetchError::Failed(m);
    let addrs = bell_store::resolve::resolve(host, port).map_err(failed)?;
    let mut last = format!("{host} has no address");
    let mut connected = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, time_left(CONNECT_TIMEOUT).map_err(failed)?) {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(e) => last = format!("cannot connect to {addr}: {e}"),
        }
    }
    let tcp = connected.ok_or_else(|| match addrs.len() {
        0 | 1 => failed(last),
        n => failed(format!("{last} (the last of {n} addresses of {host})")),
    })?;
    let io_failed = |e: io::Error| FetchError::Failed(e.to_string());
    tcp.set_read_timeout(Some(READ_TIMEOUT))
        .map_err(io_failed)?;
    tcp.set_write_timeout(Some(READ_TIMEOUT))
        .map_err(io_failed)?;
    let mut stream = match tls {
        None => Conn::Plain(tcp),
        Some(tls) => Conn::Tls(Box::new(tls.connect(tcp, host).map_err(failed)?)),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: bell-run/{}\r\n\
         Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(request.as_bytes()).map_err(io_failed)?;

    // The head, byte by byte up to the blank line (small; the body is then streamed).
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEADER_BYTES {
            return Err(failed("the response headers are too large".into()));
        }
        let wait = time_left(READ_TIMEOUT).map_err(failed)?;
        stream
            .tcp()
            .set_read_timeout(Some(wait))
            .map_err(io_failed)?;
        match stream.read(&mut byte) {
            Ok(0) => return Err(failed("the server closed the connection early".into())),
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed(format!("no response: {e}"))),
        }
    }
    let head = bell_store::http::parse_head(&head).map_err(failed)?;
    if let Some(value) = head
        .transfer_encoding
        .filter(|t| !t.eq_ignore_ascii_case("identity"))
    {
        return Err(failed(format!(
            "the server sent `Transfer-Encoding: {value}`; serve the files as static files \
             (with a Content-Length)"
        )));
    }
    let (status, status_line, length) = (head.status, head.status_line, head.content_length);
    match status {
        200 => Ok((Box::new(Deadlined(stream)), length)),
        404 | 410 => Err(FetchError::NotFound(String::new())),
        _ => Err(failed(format!("the server answered `{status_line}`"))),
    }
}

/// Fetches `rel` into `path` (a new private file), through a `.part` file that is renamed into
/// place only when the download is complete and is what `want` says, and removed otherwise.
/// The listed size bounds the download; without one (an older manifest), `max` does.
pub fn fetch_verified(
    source: &Source,
    rel: &str,
    want: &bell_bundle::Expected,
    max: u64,
    path: &Path,
) -> Result<(), FetchError> {
    let sha256 = want.sha256.as_str();
    let max = want.size.unwrap_or(max);
    let part = path.with_file_name(format!(
        ".{}.part",
        path.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    ));
    let mut file = crate::rootfs::create_new(&part, 0o600)
        .map_err(|e| FetchError::Failed(format!("cannot write {}: {e}", part.display())))?;
    let got = source.stream(rel, max, &mut file);
    let got = got.and_then(|sha| {
        file.sync_all()
            .map_err(|e| FetchError::Failed(format!("cannot write {}: {e}", part.display())))?;
        Ok(sha)
    });
    match got {
        Ok(sha) if sha == sha256 => std::fs::rename(&part, path)
            .map_err(|e| FetchError::Failed(format!("cannot write {}: {e}", path.display()))),
        Ok(sha) => {
            let _ = std::fs::remove_file(&part);
            Err(FetchError::Failed(format!(
                "{}: its sha256 is {sha}, the bundle says {sha256}",
                source.describe(rel)
            )))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        assert_eq!(
            Source::open("http://mirror:8080/fleet", None),
            Ok(Source::Http {
                host: "mirror".into(),
                port: 8080,
                path: "/fleet/".into(),
                tls: None,
            })
        );
        assert_eq!(
            Source::open("http://mirror", None),
            Ok(Source::Http {
                host: "mirror".into(),
                port: 80,
                path: "/".into(),
                tls: None,
            })
        );
        for (url, port) in [
            ("http://[fd00::5]:8080/f/", 8080),
            ("http://[fd00::5]/f/", 80),
        ] {
            assert_eq!(
                Source::open(url, None),
                Ok(Source::Http {
                    host: "[fd00::5]".into(),
                    port,
                    path: "/f/".into(),
                    tls: None,
                })
            );
        }
        assert_eq!(
            Source::open("/srv/bell", None),
            Ok(Source::Dir("/srv/bell".into()))
        );
        for bad in [
            "ftp://x/",
            "http://:80/",
            "http://u@x/",
            "http://x:99999/",
            "http://[fd00::5]x/",
            "http://[fd00::5]:/",
            "http://x/a/../b",
            "http://x/a?b",
            "",
        ] {
            assert!(Source::open(bad, None).is_err(), "{bad}");
        }
        let ca = Some(Path::new("/nonexistent/ca.pem"));
        assert!(Source::open("http://x/", ca)
            .unwrap_err()
            .contains("is for an https:// source"));
        assert!(Source::open("https://x/", ca)
            .unwrap_err()
            .contains("`--source-ca`: cannot read /nonexistent/ca.pem"));
    }

    #[test]
    fn paths_are_encoded_for_the_request_line() {
        assert_eq!(encode("root/etc/a b%\r\n"), "root/etc/a%20b%25%0D%0A");
    }
}

//! Where `bell-run pull` fetches releases and bundles from: a static web server
//! (`http://HOST[:PORT]/PATH/`, or `https://` verified against `--source-ca` or the system's
//! CAs) or a directory (an rsync or NFS mirror), laid out as `bellc build` writes OUT.
//!
//! Over HTTP through `bell-wire`, under one deadline for the whole pull. Nothing fetched is trusted for being fetched: a release is
//! checked against its signature and every file against the sha256 the verified chain names,
//! while it streams; TLS only hides what a host fetches.

use bell_wire::client::{get_stream, GetError};
use bell_wire::Deadline;
use sha2::{Digest, Sha256};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default of `pull --fetch-timeout`: the whole fetch, from the first connection to the
/// last byte of the last file.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(300);

/// What a pull is told when its fetching ran past `--fetch-timeout`.
pub const FETCH_TIMED_OUT: &str = "the fetch ran out of time (`--fetch-timeout`)";

/// How a fetch from a web server is bounded, but for its deadline: a connection waits at most
/// 10 s, and a server that sends nothing for 30 s has stalled (the download is abandoned and
/// resumed on the next pull).
fn bounds(deadline: Deadline) -> bell_wire::client::Bounds {
    bell_wire::client::Bounds {
        deadline,
        connect: Duration::from_secs(10),
        read: Duration::from_secs(30),
        // Each file is bounded by its caller, as it streams.
        max_bytes: u64::MAX,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Http {
        host: String,
        port: u16,
        /// Starts and ends with `/`.
        path: String,
        /// For `https://`.
        tls: Option<bell_wire::tls::Tls>,
        /// When every fetch from it must be over (`pull --fetch-timeout`): a server that sends
        /// a byte every 20 s never trips a read timeout, and would otherwise hold the pull.
        deadline: Deadline,
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
    pub fn open(text: &str, ca: Option<&Path>, deadline: Deadline) -> Result<Source, String> {
        Source::read(text, ca, Some(deadline))
    }

    /// [`Source::open`] without reading the CA file, to check what an image's timer will
    /// open (an https source it returns has no TLS configuration, and is not fetched from).
    pub fn check(text: &str, ca: Option<&Path>) -> Result<Source, String> {
        Source::read(text, ca, None)
    }

    /// With a `deadline`, a source to fetch from (its CA file read); without, one to check.
    fn read(text: &str, ca: Option<&Path>, deadline: Option<Deadline>) -> Result<Source, String> {
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
            let tls = if https && deadline.is_some() {
                let files = bell_wire::tls::TlsFiles {
                    ca: ca.map(Path::to_path_buf),
                    ..Default::default()
                };
                Some(bell_wire::tls::Tls::load(
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
                // A checked source is never fetched from: its deadline is never asked.
                deadline: deadline
                    .unwrap_or_else(|| Deadline::after(DEFAULT_FETCH_TIMEOUT, FETCH_TIMED_OUT)),
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
                ..
            } => {
                let scheme = if tls.is_some() { "https" } else { "http" };
                format!("{scheme}://{host}:{port}{path}{rel}")
            }
            Source::Dir(dir) => dir.join(rel).display().to_string(),
        }
    }

    /// The same source, its fetches bounded by `deadline` instead.
    pub fn with_deadline(&self, deadline: Deadline) -> Source {
        match self {
            Source::Http {
                host,
                port,
                path,
                tls,
                ..
            } => Source::Http {
                host: host.clone(),
                port: *port,
                path: path.clone(),
                tls: tls.clone(),
                deadline,
            },
            Source::Dir(dir) => Source::Dir(dir.clone()),
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
        let mut deadline = None;
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
                deadline: until,
            } => {
                deadline = Some(*until);
                let user_agent = concat!("bell-run/", env!("CARGO_PKG_VERSION"));
                let path = format!("{path}{}", encode(rel));
                let body = get_stream(
                    host,
                    *port,
                    tls.as_ref(),
                    &path,
                    user_agent,
                    &bounds(*until),
                )
                .map_err(|e| match e {
                    GetError::NotFound => FetchError::NotFound(format!("{what}: not found")),
                    GetError::Failed(m) => failed(m),
                })?;
                let length = body.length;
                (Box::new(body), length)
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
                            deadline.and_then(|d| d.wait(Duration::from_secs(1)).err())
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
        Ok(bell_wire::hex(&hasher.finalize()))
    }
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
        let deadline = Deadline::after(DEFAULT_FETCH_TIMEOUT, FETCH_TIMED_OUT);
        assert_eq!(
            Source::open("http://mirror:8080/fleet", None, deadline),
            Ok(Source::Http {
                host: "mirror".into(),
                port: 8080,
                path: "/fleet/".into(),
                tls: None,
                deadline,
            })
        );
        assert_eq!(
            Source::open("http://mirror", None, deadline),
            Ok(Source::Http {
                host: "mirror".into(),
                port: 80,
                path: "/".into(),
                tls: None,
                deadline,
            })
        );
        for (url, port) in [
            ("http://[fd00::5]:8080/f/", 8080),
            ("http://[fd00::5]/f/", 80),
        ] {
            assert_eq!(
                Source::open(url, None, deadline),
                Ok(Source::Http {
                    host: "[fd00::5]".into(),
                    port,
                    path: "/f/".into(),
                    tls: None,
                    deadline,
                })
            );
        }
        assert_eq!(
            Source::open("/srv/bell", None, deadline),
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
            assert!(Source::open(bad, None, deadline).is_err(), "{bad}");
        }
        let ca = Some(Path::new("/nonexistent/ca.pem"));
        assert!(Source::open("http://x/", ca, deadline)
            .unwrap_err()
            .contains("is for an https:// source"));
        assert!(Source::open("https://x/", ca, deadline)
            .unwrap_err()
            .contains("`--source-ca`: cannot read /nonexistent/ca.pem"));
    }

    #[test]
    fn paths_are_encoded_for_the_request_line() {
        assert_eq!(encode("root/etc/a b%\r\n"), "root/etc/a%20b%25%0D%0A");
    }
}

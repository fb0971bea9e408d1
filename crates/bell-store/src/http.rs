//! The head of an HTTP/1.1 response, as both of bell's plain HTTP clients read it: etcd's
//! gateway (`etcd.rs`) and a bundle source (bell-run's `fetch.rs`). Neither server is trusted,
//! so this is one small parser, fuzzed (`fuzz/`), instead of two.

/// What a response's head says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// The first line, for messages (`HTTP/1.1 503 Service Unavailable`).
    pub status_line: String,
    pub content_length: Option<u64>,
    /// `Transfer-Encoding`, when the server sent one.
    pub transfer_encoding: Option<String>,
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
            _ => {}
        }
    }
    Ok(Head {
        status,
        status_line,
        content_length,
        transfer_encoding,
    })
}

/// `GET http://HOST:PORT/PATH`: the body, or `None` when the server has no such file (404).
/// Plain HTTP, one request per connection, with etcd's time and size limits: how `bellc`
/// reads a build output from the web server that serves it to hosts. `path` is sent as given:
/// the caller percent-encodes what needs it.
pub fn get(url: &str) -> Result<Option<Vec<u8>>, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("`{url}`: only http:// URLs are read"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let endpoint = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    if authority.is_empty() || path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!(
            "`{}` is not a URL bell can read",
            url.escape_debug()
        ));
    }
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let answer = crate::etcd::exchange(
        &endpoint,
        None,
        crate::etcd::Limits::READER,
        request.as_bytes(),
    )
    .map_err(|e| format!("{url}: {e}"))?;
    let (status, body) = crate::etcd::parse_response(&answer).map_err(|e| format!("{url}: {e}"))?;
    match status {
        200 => Ok(Some(body)),
        404 => Ok(None),
        _ => Err(format!("{url}: the server answered HTTP {status}")),
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
        assert!(get("https://a/b").unwrap_err().contains("only http://"));
        assert!(get("http:///x").unwrap_err().contains("not a URL"));
        assert!(get("http://a/b c").unwrap_err().contains("not a URL"));
        assert!(get("http://a/b\r\nX: y").unwrap_err().contains("not a URL"));
    }
}

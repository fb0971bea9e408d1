//! Host names to addresses, without the C library's resolver.
//!
//! bell-run ships as one static binary for every Debian and Ubuntu release. glibc's
//! `getaddrinfo` in a static binary still loads the NSS modules that `/etc/nsswitch.conf`
//! names (`libnss_resolve`, `libnss_mymachines`, …) from the host, built against another glibc
//! than the one linked in: at best the lookup fails, at worst the process crashes inside a pull.
//! So bell-run resolves a source's host the way musl does, from the same files: a numeric
//! address as it is; `localhost` and names under it as loopback (RFC 6761); `/etc/hosts`; then
//! the name servers of `/etc/resolv.conf` (A and AAAA over UDP, over TCP when an answer comes
//! back truncated), with its `search`/`domain`, `ndots`, `timeout` and `attempts`.

use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
const RCODE_NXDOMAIN: u8 = 3;
/// glibc's MAXNS: further `nameserver` lines are ignored, as there.
const MAX_SERVERS: usize = 3;
/// The longest a DNS answer is kept, whatever its TTL says (nscd's `positive-time-to-live`).
const MAX_TTL: Duration = Duration::from_secs(3600);

/// DNS answers of this process, by the name as written, until their TTL runs out: a pull asks
/// for its release, the signature and every file from one host, and the rollout controller
/// talks to etcd for hours, so each would otherwise wait for the name servers on every request
/// (a lost UDP packet costs a whole `timeout`). Only answers with addresses are kept; a name
/// that failed is asked again. `/etc/hosts` is read every time, as glibc does.
static DNS_CACHE: Mutex<Option<DnsCache>> = Mutex::new(None);

#[derive(Default)]
struct DnsCache {
    answers: HashMap<String, (Instant, Vec<IpAddr>)>,
}

impl DnsCache {
    fn get(&self, host: &str, now: Instant) -> Option<Vec<IpAddr>> {
        let (until, ips) = self.answers.get(&host.to_ascii_lowercase())?;
        (now < *until).then(|| ips.clone())
    }

    fn put(&mut self, host: &str, ips: &[IpAddr], ttl: Duration, now: Instant) {
        let key = host.to_ascii_lowercase();
        if ttl.is_zero() {
            self.answers.remove(&key);
        } else {
            self.answers
                .insert(key, (now + ttl.min(MAX_TTL), ips.to_vec()));
        }
    }
}

/// The addresses of `host` (as written in a URL: an IPv6 literal in brackets) with `port`.
pub fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    // Read only when a name server is asked: a numeric host, /etc/hosts and a cached answer
    // need neither file, and a pull resolves its server on every request.
    let conf = || {
        let conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        ResolvConf::parse(&conf, Some(machine.trim()))
    };
    // A panic elsewhere while holding the lock leaves a cache that is still whole.
    let mut cache = DNS_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(DnsCache::default);
    resolve_with(host, port, Path::new("/etc/hosts"), conf, cache)
}

fn resolve_with(
    host: &str,
    port: u16,
    hosts_file: &Path,
    conf: impl FnOnce() -> ResolvConf,
    cache: &mut DnsCache,
) -> Result<Vec<SocketAddr>, String> {
    let with_port = |ips: Vec<IpAddr>| {
        ips.into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect()
    };
    if let Some(ip) = numeric(host) {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let name = host_name(host).ok_or_else(|| format!("`{host}` is not a host name"))?;
    let lower = name.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return Ok(with_port(vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]));
    }
    let listed = from_hosts_file(hosts_file, &lower);
    if !listed.is_empty() {
        return Ok(with_port(listed));
    }
    let now = Instant::now();
    if let Some(ips) = cache.get(host, now) {
        return Ok(with_port(ips));
    }
    let (ips, ttl) = from_dns(host, name, &conf())?;
    cache.put(host, &ips, ttl, now);
    Ok(with_port(ips))
}

/// An IPv4 address, or an IPv6 address in brackets (or bare, as `to_socket_addrs` took it).
fn numeric(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// `host` without a final dot, when it is a name DNS can carry: labels of 1 to 63 letters,
/// digits, `-` or `_`, at most 253 bytes in all.
fn host_name(host: &str) -> Option<&str> {
    let name = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

/// Every address `/etc/hosts` gives `name` (lowercase), in file order (glibc's `multi on`,
/// Debian's default). A missing or unreadable file gives none.
fn from_hosts_file(path: &Path, name: &str) -> Vec<IpAddr> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for line in io::BufReader::new(file).split(b'\n') {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_ascii_whitespace();
        let Some(ip) = fields.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        if fields.any(|alias| alias.trim_end_matches('.').eq_ignore_ascii_case(name))
            && !found.contains(&ip)
        {
            found.push(ip);
        }
    }
    found
}

/// What bell-run takes from `/etc/resolv.conf`.
#[derive(Debug, Clone, PartialEq)]
struct ResolvConf {
    servers: Vec<SocketAddr>,
    search: Vec<String>,
    ndots: usize,
    timeout: Duration,
    attempts: u32,
}

impl ResolvConf {
    /// glibc's reading: `nameserver` (three at most; none means 127.0.0.1), the last of
    /// `search`/`domain` (none means the domain of this machine's name), `options ndots:N
    /// timeout:N attempts:N` with glibc's defaults (1, 5 s, 2) and bounds.
    fn parse(text: &str, host_name: Option<&str>) -> ResolvConf {
        let mut conf = ResolvConf {
            servers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        };
        let mut search = None;
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_ascii_whitespace();
            match words.next() {
                Some("nameserver") if conf.servers.len() < MAX_SERVERS => {
                    if let Some(server) = words.next().and_then(name_server) {
                        conf.servers.push(server);
                    }
                }
                Some("search") => search = Some(words.map(str::to_string).collect::<Vec<_>>()),
                Some("domain") => search = Some(words.take(1).map(str::to_string).collect()),
                Some("options") => {
                    for option in words {
                        let Some((key, value)) = option.split_once(':') else {
                            continue;
                        };
                        let Ok(n) = value.parse::<u32>() else {
                            continue;
                        };
                        match key {
                            "ndots" => conf.ndots = n.min(15) as usize,
                            "timeout" => conf.timeout = Duration::from_secs(n.clamp(1, 30).into()),
                            "attempts" => conf.attempts = n.clamp(1, 5),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if conf.servers.is_empty() {
            conf.servers
                .push(SocketAddr::from((Ipv4Addr::LOCALHOST, 53)));
        }
        conf.search = search.unwrap_or_else(|| {
            host_name
                .and_then(|h| h.split_once('.'))
                .map(|(_, domain)| vec![domain.to_string()])
                .unwrap_or_default()
        });
        conf.search
            .retain(|d| host_name_ok(d.trim_end_matches('.')));
        conf
    }

    /// The names to ask for, in order: as written first when it has at least `ndots` dots,
    /// else after the search domains; only as written when it ends with a dot.
    fn candidates(&self, host: &str, name: &str) -> Vec<String> {
        if host.ends_with('.') {
            return vec![name.to_string()];
        }
        let searched = self
            .search
            .iter()
            .map(|domain| format!("{name}.{}", domain.trim_end_matches('.')))
            .filter(|n| host_name_ok(n));
        if name.matches('.').count() >= self.ndots {
            std::iter::once(name.to_string()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(name.to_string())).collect()
        }
    }
}

fn host_name_ok(name: &str) -> bool {
    host_name(name) == Some(name)
}

/// `ADDR` of a `nameserver` line: IPv4, or IPv6 with an optional `%scope` (interface name
/// or index).
fn name_server(text: &str) -> Option<SocketAddr> {
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Some(SocketAddr::from((ip, 53)));
    }
    let (ip, scope) = match text.split_once('%') {
        Some((ip, scope)) => (ip, Some(scope)),
        None => (text, None),
    };
    let ip = ip.parse::<Ipv6Addr>().ok()?;
    let scope_id = match scope {
        None => 0,
        Some(s) => s.parse().ok().or_else(|| interface_index(s))?,
    };
    Some(SocketAddr::V6(SocketAddrV6::new(ip, 53, 0, scope_id)))
}

/// The index of network interface `name`, from sysfs (what `if_nametoindex` reads too).
fn interface_index(name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    let index = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok()?;
    index.trim().parse().ok()
}

/// A query id nobody off this machine can predict: std's hasher keys come from the kernel's
/// random source, and each `RandomState` is keyed anew.
fn random_id() -> [u8; 2] {
    use std::hash::{BuildHasher, Hasher};
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    [(bits >> 8) as u8, bits as u8]
}

/// Asks the name servers for each candidate name in turn; the first that has addresses wins,
/// with how long its records may be kept.
fn from_dns(host: &str, name: &str, conf: &ResolvConf) -> Result<(Vec<IpAddr>, Duration), String> {
    let mut unanswered = false;
    for candidate in conf.candidates(host, name) {
        match lookup(&candidate, conf) {
            Some(found) if !found.0.is_empty() => return Ok(found),
            Some(_) => {}
            None => unanswered = true,
        }
    }
    let servers: Vec<String> = conf.servers.iter().map(|s| s.ip().to_string()).collect();
    Err(if unanswered {
        format!(
            "cannot resolve {host}: no name server answered ({}, from /etc/resolv.conf)",
            servers.join(", ")
        )
    } else {
        format!("cannot resolve {host}: no such host in /etc/hosts or DNS")
    })
}

/// The A and AAAA records of `name` (IPv4 first) and the shortest TTL among them, `Some(empty)`
/// when DNS says it has none, `None` when no server gave an answer. Both questions go out
/// together, to one server after another, `attempts` rounds.
fn lookup(name: &str, conf: &ResolvConf) -> Option<(Vec<IpAddr>, Duration)> {
    let queries = [query(name, TYPE_A), query(name, TYPE_AAAA)];
    let mut answers: [Option<Answer>; 2] = [None, None];
    'rounds: for _ in 0..conf.attempts {
        for server in &conf.servers {
            let replies = exchange_udp(*server, &queries, &answers, conf.timeout);
            for (i, reply) in replies.into_iter().enumerate() {
                let Some(mut answer) = reply else { continue };
                if answer.truncated {
                    match exchange_tcp(*server, &queries[i], conf.timeout) {
                        Some(full) => answer = full,
                        None => continue,
                    }
                }
                if answer.usable() {
                    answers[i] = Some(answer);
                }
            }
            if answers.iter().all(Option::is_some) {
                break 'rounds;
            }
        }
    }
    if answers.iter().all(Option::is_none) {
        return None;
    }
    let found: Vec<Answer> = answers
        .into_iter()
        .flatten()
        .filter(|a| !a.addresses.is_empty())
        .collect();
    let ttl = found.iter().map(|a| a.ttl).min().unwrap_or(0);
    let mut addresses: Vec<IpAddr> = Vec::new();
    // A server may add the other family's records to an answer: each address once.
    for ip in found.into_iter().flat_map(|a| a.addresses) {
        if !addresses.contains(&ip) {
            addresses.push(ip);
        }
    }
    Some((addresses, Duration::from_secs(ttl.into())))
}

/// A query with a fresh random id and recursion desired.
fn query(name: &str, qtype: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 18);
    out.extend_from_slice(&random_id());
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out
}

/// One server's reply to one query.
#[derive(Debug, PartialEq)]
struct Answer {
    rcode: u8,
    truncated: bool,
    addresses: Vec<IpAddr>,
    /// The shortest TTL of the answer's records (a CNAME's too: the chain holds only as long
    /// as each link), in seconds.
    ttl: u32,
}

impl Answer {
    /// NOERROR and NXDOMAIN settle the question; SERVFAIL, REFUSED and the like send it to
    /// the next server.
    fn usable(&self) -> bool {
        self.rcode == 0 || self.rcode == RCODE_NXDOMAIN
    }
}

/// The reply to `query` in `msg`, or `None` when `msg` is not one (another id or question,
/// not a response) or is malformed. As in musl, every A and AAAA record of the answer section
/// counts, which takes a CNAME chain's end as the recursive server gave it.
fn parse_reply(msg: &[u8], query: &[u8]) -> Option<Answer> {
    let question = query.get(12..)?;
    let header = msg.get(..12)?;
    let same_question = msg
        .get(12..12 + question.len())
        .is_some_and(|q| q.eq_ignore_ascii_case(question));
    let is_response = header[2] & 0x80 != 0 && header[2] & 0x78 == 0;
    if header[..2] != query[..2] || !is_response || header[4..6] != [0, 1] || !same_question {
        return None;
    }
    let truncated = header[2] & 0x02 != 0;
    let rcode = header[3] & 0x0f;
    let count = u16::from_be_bytes([header[6], header[7]]);
    let mut at = 12 + question.len();
    let mut addresses = Vec::new();
    let mut ttl = u32::MAX;
    for _ in 0..count {
        at = skip_name(msg, at)?;
        let fixed = msg.get(at..at + 10)?;
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        let class = u16::from_be_bytes([fixed[2], fixed[3]]);
        // RFC 2181: a TTL with the top bit set is read as 0.
        let record_ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
        ttl = ttl.min(if record_ttl >> 31 == 1 { 0 } else { record_ttl });
        let len = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let data = msg.get(at + 10..at + 10 + len)?;
        at += 10 + len;
        let ip = match (rtype, class, data.len()) {
            (TYPE_A, CLASS_IN, 4) => IpAddr::from(<[u8; 4]>::try_from(data).ok()?),
            (TYPE_AAAA, CLASS_IN, 16) => IpAddr::from(<[u8; 16]>::try_from(data).ok()?),
            _ => continue,
        };
        if !addresses.contains(&ip) {
            addresses.push(ip);
        }
    }
    // A truncated reply may end mid-record; what it holds is fetched again over TCP.
    Some(Answer {
        rcode,
        truncated,
        addresses,
        ttl: if count == 0 { 0 } else { ttl },
    })
}

/// The offset after the (possibly compressed) name at `at`.
fn skip_name(msg: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *msg.get(at)?;
        match len & 0xc0 {
            0x00 if len == 0 => return Some(at + 1),
            0x00 => at += 1 + usize::from(len),
            0xc0 => return msg.get(at + 1).map(|_| at + 2),
            _ => return None,
        }
    }
}

/// Sends the queries still unanswered to `server` over UDP and collects replies until each
/// has one or `timeout` passes. A connected socket takes replies from that server only and
/// learns at once (ICMP) when nothing listens there.
fn exchange_udp(
    server: SocketAddr,
    queries: &[Vec<u8>; 2],
    done: &[Option<Answer>; 2],
    timeout: Duration,
) -> [Option<Answer>; 2] {
    let mut replies: [Option<Answer>; 2] = [None, None];
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let Ok(socket) = UdpSocket::bind(local) else {
        return replies;
    };
    if socket.connect(server).is_err() {
        return replies;
    }
    let wanted: Vec<usize> = (0..2).filter(|i| done[*i].is_none()).collect();
    for i in &wanted {
        if socket.send(&queries[*i]).is_err() {
            return replies;
        }
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 1232];
    while wanted.iter().any(|i| replies[*i].is_none()) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || socket.set_read_timeout(Some(left)).is_err() {
            break;
        }
        let len = match socket.recv(&mut buf) {
            Ok(len) => len,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        for i in &wanted {
            if replies[*i].is_none() {
                if let Some(answer) = parse_reply(&buf[..len], &queries[*i]) {
                    replies[*i] = Some(answer);
                    break;
                }
            }
        }
    }
    replies
}

/// The same question over TCP, for a reply too large for UDP.
fn exchange_tcp(server: SocketAddr, query: &[u8], timeout: Duration) -> Option<Answer> {
    let mut stream = TcpStream::connect_timeout(&server, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let len = u16::try_from(query.len()).ok()?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed).ok()?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).ok()?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut msg).ok()?;
    parse_reply(&msg, query).filter(|a| !a.truncated)
}

#[cfg(test)]
mod tests;

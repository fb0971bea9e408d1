use super::*;

fn conf(text: &str) -> ResolvConf {
    ResolvConf::parse(text, Some("node7.rack2.example.net"))
}

#[test]
fn numbers_and_localhost_need_no_lookup() {
    let none = conf("nameserver 192.0.2.1\noptions timeout:1 attempts:1");
    let no_file = Path::new("/nonexistent/hosts");
    let got = |h: &str| resolve_with(h, 8080, no_file, || none.clone(), &mut DnsCache::default());
    assert_eq!(
        got("10.1.2.3").unwrap(),
        vec!["10.1.2.3:8080".parse().unwrap()]
    );
    assert_eq!(
        got("[fd00::1]").unwrap(),
        vec!["[fd00::1]:8080".parse().unwrap()]
    );
    let local: Vec<SocketAddr> = vec![
        "127.0.0.1:8080".parse().unwrap(),
        "[::1]:8080".parse().unwrap(),
    ];
    assert_eq!(got("localhost").unwrap(), local);
    assert_eq!(got("Bundles.LOCALHOST.").unwrap(), local);
    for bad in [
        "",
        "a..b",
        "a b",
        "bad/name",
        "x\u{e9}",
        &"a".repeat(64),
        "[fd00::1",
    ] {
        let err = got(bad).unwrap_err();
        assert!(err.contains("is not a host name"), "{bad:?}: {err}");
    }
}

#[test]
fn etcd_endpoints_split_at_their_last_colon() {
    let got = |e: &str| {
        let (host, port) = crate::client::host_port(e)?;
        resolve(host, port)
    };
    assert_eq!(
        got("[fd00::1]:2379").unwrap(),
        vec!["[fd00::1]:2379".parse().unwrap()]
    );
    assert_eq!(
        got("10.0.0.1:2379").unwrap(),
        vec!["10.0.0.1:2379".parse().unwrap()]
    );
    for bad in ["10.0.0.1", "10.0.0.1:x", "[fd00::1]"] {
        assert!(got(bad).unwrap_err().contains("is not HOST:PORT"), "{bad}");
    }
}

#[test]
fn hosts_file_lines_are_read_as_glibc_reads_them() {
    let dir = std::env::temp_dir().join(format!("bell-resolve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hosts");
    std::fs::write(
        &path,
        "# comment bundles\n127.0.0.1\tlocalhost\n10.0.0.5 mirror.example Bundles # bundles2\n\
         fd00::5 bundles\nnot-an-address bundles\n10.0.0.5 bundles\n10.0.0.6\tbundles.\n",
    )
    .unwrap();
    let found = from_hosts_file(&path, "bundles");
    let want: Vec<IpAddr> = ["10.0.0.5", "fd00::5", "10.0.0.6"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(found, want);
    assert!(
        from_hosts_file(&path, "bundles2").is_empty(),
        "after # is a comment"
    );
    assert!(
        from_hosts_file(&path, "mirror").is_empty(),
        "a name matches whole"
    );
    let got = resolve_with(
        "MIRROR.example",
        80,
        &path,
        || conf(""),
        &mut DnsCache::default(),
    )
    .unwrap();
    assert_eq!(got, vec!["10.0.0.5:80".parse().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resolv_conf_is_read_with_glibcs_defaults_and_bounds() {
    let c = conf("");
    assert_eq!(c.servers, vec!["127.0.0.1:53".parse().unwrap()]);
    assert_eq!(
        c.search,
        vec!["rack2.example.net"],
        "the host name's domain"
    );
    assert_eq!(
        (c.ndots, c.timeout, c.attempts),
        (1, Duration::from_secs(5), 2)
    );

    let c = conf(
        "; comment\nnameserver 10.0.0.1 # trailing\nnameserver fe80::1%1\nnameserver nonsense\n\
         nameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch a.example b.example\n\
         domain only.example\noptions ndots:30 timeout:0 attempts:9 rotate\n",
    );
    let servers: Vec<SocketAddr> = vec![
        "10.0.0.1:53".parse().unwrap(),
        "[fe80::1%1]:53".parse().unwrap(),
        "10.0.0.2:53".parse().unwrap(),
    ];
    assert_eq!(c.servers, servers, "three at most; unreadable ones skipped");
    assert_eq!(
        c.search,
        vec!["only.example"],
        "the last of search/domain wins"
    );
    assert_eq!(
        (c.ndots, c.timeout, c.attempts),
        (15, Duration::from_secs(1), 5)
    );
    assert_eq!(
        conf("search x.example\ndomain y.example\nsearch").search,
        Vec::<String>::new()
    );
}

#[test]
fn search_domains_come_first_for_names_with_fewer_dots_than_ndots() {
    let c = conf("search a.example b.example\noptions ndots:2");
    assert_eq!(
        c.candidates("mirror", "mirror"),
        ["mirror.a.example", "mirror.b.example", "mirror"]
    );
    assert_eq!(
        c.candidates("m.x", "m.x"),
        ["m.x.a.example", "m.x.b.example", "m.x"]
    );
    assert_eq!(
        c.candidates("m.x.y", "m.x.y"),
        ["m.x.y", "m.x.y.a.example", "m.x.y.b.example"]
    );
    assert_eq!(
        c.candidates("m.x.", "m.x"),
        ["m.x"],
        "a final dot means as written only"
    );
}

/// A reply as a recursive server sends it: the question, then a CNAME whose target is
/// compressed against the question, then the target's records.
fn reply_to(query: &[u8], rcode: u8) -> Vec<u8> {
    reply_with_ttl(query, rcode, 60)
}

/// A reply with a CNAME and an A and an AAAA record, each with `ttl`.
fn reply_with_ttl(query: &[u8], rcode: u8, ttl: u32) -> Vec<u8> {
    let [t0, t1, t2, t3] = ttl.to_be_bytes();
    let mut msg = query[..2].to_vec();
    msg.extend_from_slice(&[0x81, 0x80 | rcode, 0, 1, 0, 3, 0, 0, 0, 0]);
    msg.extend_from_slice(&query[12..]);
    // CNAME: owner = the question's name (pointer to 12), target "cdn" + pointer to 12.
    msg.extend_from_slice(&[
        0xc0, 12, 0, 5, 0, 1, t0, t1, t2, t3, 0, 6, 3, b'c', b'd', b'n', 0xc0, 12,
    ]);
    let cname_at = msg.len() - 6;
    msg.extend_from_slice(&[
        0xc0,
        cname_at as u8,
        0,
        1,
        0,
        1,
        t0,
        t1,
        t2,
        t3,
        0,
        4,
        192,
        0,
        2,
        7,
    ]);
    msg.extend_from_slice(&[0xc0, cname_at as u8, 0, 28, 0, 1, t0, t1, t2, t3, 0, 16]);
    msg.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7).octets());
    msg
}

#[test]
fn queries_are_standard_and_replies_are_matched_to_them() {
    let q = query("Bundles.example", TYPE_AAAA);
    assert_eq!(&q[2..12], &[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&q[12..], b"\x07Bundles\x07example\x00\x00\x1c\x00\x01");

    let answer = parse_reply(&reply_to(&q, 0), &q).unwrap();
    let want: Vec<IpAddr> = vec!["192.0.2.7".parse().unwrap(), "2001:db8::7".parse().unwrap()];
    assert_eq!(
        answer,
        Answer {
            rcode: 0,
            truncated: false,
            addresses: want,
            ttl: 60,
        }
    );
    assert!(parse_reply(&reply_to(&q, 3), &q).unwrap().addresses.len() == 2);
    assert_eq!(
        parse_reply(&reply_to(&q, 2), &q).map(|a| a.usable()),
        Some(false)
    );

    let mut other_id = reply_to(&q, 0);
    other_id[1] ^= 1;
    assert_eq!(parse_reply(&other_id, &q), None, "another id");
    let mut other_name = reply_to(&q, 0);
    other_name[14] = b'x';
    assert_eq!(parse_reply(&other_name, &q), None, "another question");
    let mut a_query = reply_to(&q, 0);
    a_query[2] &= 0x7f;
    assert_eq!(parse_reply(&a_query, &q), None, "not a response");
    let mut shouted = reply_to(&q, 0);
    shouted[13..20].make_ascii_uppercase();
    assert!(
        parse_reply(&shouted, &q).is_some(),
        "names compare without case"
    );
}

#[test]
fn malformed_replies_are_refused_without_panicking() {
    let q = query("a.example", TYPE_A);
    let good = reply_to(&q, 0);
    for end in 0..good.len() {
        // A reply cut short anywhere is not read at all: its records are not all there.
        assert_eq!(parse_reply(&good[..end], &q), None, "cut at {end}");
    }
    let mut loop_ptr = good.clone();
    let first_answer = q.len();
    loop_ptr[first_answer] = 0x80; // a label length with the reserved top bits
    assert_eq!(parse_reply(&loop_ptr, &q), None);
    // Random corruption of every byte after the question, many times over.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..20_000 {
        let mut msg = good.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = first_answer + (state as usize) % (msg.len() - first_answer);
            msg[at] = (state >> 32) as u8;
        }
        let _ = parse_reply(&msg, &q);
    }
}

/// A name server on a loopback port that answers every query with `reply_with_ttl(ttl)`
/// and counts them.
fn fake_server(ttl: u32) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((len, from)) = socket.recv_from(&mut buf) {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = socket.send_to(&reply_with_ttl(&buf[..len], 0, ttl), from);
        }
    });
    (addr, seen)
}

#[test]
fn dns_answers_are_kept_for_their_ttl_and_no_longer() {
    use std::sync::atomic::Ordering;
    let no_file = Path::new("/nonexistent/hosts");
    let (server, asked) = fake_server(60);
    let conf = conf(&format!(
        "nameserver {}\noptions timeout:2 attempts:1",
        server.ip()
    ));
    let conf = ResolvConf {
        servers: vec![server],
        ..conf
    };
    let mut cache = DnsCache::default();
    let want: Vec<SocketAddr> = vec![
        "192.0.2.7:80".parse().unwrap(),
        "[2001:db8::7]:80".parse().unwrap(),
    ];
    let got = resolve_with("bundles.example.", 80, no_file, || conf.clone(), &mut cache).unwrap();
    assert_eq!(got, want);
    assert_eq!(asked.load(Ordering::SeqCst), 2, "an A and an AAAA question");
    // Again, with another port and in capitals: from the cache, no question asked.
    // A cached answer does not even read resolv.conf.
    let unread = || -> ResolvConf { panic!("resolv.conf read for a cached name") };
    let again = resolve_with("BUNDLES.example.", 81, no_file, unread, &mut cache).unwrap();
    assert_eq!(again[0], "192.0.2.7:81".parse().unwrap());
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    // Kept exactly as long as the TTL says.
    let now = Instant::now();
    assert!(cache
        .get("bundles.example.", now + Duration::from_secs(59))
        .is_some());
    assert!(cache
        .get("bundles.example.", now + Duration::from_secs(61))
        .is_none());
    // The cap holds for a TTL of days.
    cache.put("long.example.", &[], Duration::from_secs(86_400), now);
    assert!(cache
        .get("long.example.", now + MAX_TTL + Duration::from_secs(1))
        .is_none());

    // A TTL of 0 is never kept: every resolution asks.
    let (server, asked) = fake_server(0);
    let conf = ResolvConf {
        servers: vec![server],
        ..conf
    };
    for round in 1..=2 {
        resolve_with("zero.example.", 80, no_file, || conf.clone(), &mut cache).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2 * round);
    }
    // A failure is not kept either: the next attempt asks the (now answering) server.
    let dead = ResolvConf {
        servers: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 9))],
        timeout: Duration::from_secs(1),
        ..conf.clone()
    };
    assert!(resolve_with("later.example.", 80, no_file, || dead.clone(), &mut cache).is_err());
    resolve_with("later.example.", 80, no_file, || conf.clone(), &mut cache).unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 6);
}

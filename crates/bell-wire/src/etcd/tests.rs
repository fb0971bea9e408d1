use super::auth::what_was_asked;
use super::*;

#[test]
fn a_refusal_names_the_keys_it_asked_for() {
    let put = serde_json::json!({ "key": base64(b"/bell/f/running/h2"), "value": "" });
    assert_eq!(
        what_was_asked("/v3/kv/put", &put.to_string()),
        "write `/bell/f/running/h2`"
    );
    let ops = [
        Op::Put("/bell/f/running/h1", b"{}"),
        Op::Put("/bell/f/status/apply/h1", b"success"),
    ];
    let txn = serde_json::json!({
        "compare": [{ "key": base64(b"/bell/f/groups/default/v1/semaphore") }],
        "success": ops.iter().map(Op::request).collect::<Vec<_>>(),
    });
    assert_eq!(
        what_was_asked("/v3/kv/txn", &txn.to_string()),
        "read `/bell/f/groups/default/v1/semaphore` and write `/bell/f/running/h1`, \
         `/bell/f/status/apply/h1` (in one transaction)"
    );
    assert_eq!(
        what_was_asked("/v3/lease/grant", "{}"),
        "call `/v3/lease/grant`"
    );
}

#[test]
fn a_range_reads_the_same_with_and_without_a_json_tree() {
    let answer = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let (k1, k2, v) = (
        base64(b"/bell/f/b"),
        base64(b"/bell/f/a"),
        base64(b"{\"x\":1}"),
    );
    for body in [
        format!(
            r#"{{"header":{{"revision":"9"}},"kvs":[{{"key":"{k1}","value":"{v}","mod_revision":"7"}},{{"key":"{k2}","mod_revision":3}}],"count":"2"}}"#
        ),
        r#"{"header":{}}"#.to_string(),
        format!(r#"{{"kvs":[{{"key":"{k1}","value":"","mod_revision":"x"}}]}}"#),
        // An escaped slash is still base64 once read.
        r#"{"kvs":[{"key":"Pz8\/"}]}"#.to_string(),
        // Found by the fuzzer: arrays where the gateway sends objects.
        r#"[[[]]]"#.to_string(),
        r#"{"kvs":[["QQ=="]]}"#.to_string(),
        // A later field of the same name wins, as in a tree.
        format!(r#"{{"kvs":[{{"key":"{k2}","key":"{k1}"}}]}}"#),
    ] {
        let bytes = answer(&body);
        assert!(range_readings_agree(bytes.as_bytes()), "{body}");
        let (_, tree) = read_answer(bytes.as_bytes()).unwrap();
        let (_, body_bytes) = crate::client::parse_response(bytes.as_bytes()).unwrap();
        match range_kvs(&body_bytes) {
            Ok(typed) => assert_eq!(typed, tree, "{body}"),
            // Only what the gateway never sends is refused.
            Err(e) => assert!(body.contains("[["), "{body}: {e}"),
        }
    }
    let (_, body) = crate::client::parse_response(
        answer(&format!(
            r#"{{"kvs":[{{"key":"{k1}","value":"{v}","mod_revision":"7"}},{{"key":"{k2}"}}]}}"#
        ))
        .as_bytes(),
    )
    .unwrap();
    let read = range_kvs(&body).unwrap();
    assert_eq!(read[0].key, "/bell/f/a");
    assert_eq!(
        (&read[1].value[..], read[1].mod_revision),
        (&b"{\"x\":1}"[..], 7)
    );
}

#[test]
fn a_chunked_answer_is_read() {
    let ok = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n18\r\n{\"kvs\":[{\"key\":\"YQ==\"}]}\r\n0\r\n\r\n";
    let (status, kvs) = read_answer(ok).expect("a chunked answer");
    assert_eq!((status, kvs[0].key.as_str()), (200, "a"));
}

#[test]
fn prefix_end_is_the_next_key_after_the_prefix() {
    assert_eq!(prefix_end(b"/bell/a/"), b"/bell/a0".to_vec());
    assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
    assert_eq!(prefix_end(b""), vec![0]);
}

#[test]
fn urls_need_host_and_port() {
    assert_eq!(
        Etcd::parse("etcd://127.0.0.1:2379").map(|e| e.endpoints().to_vec()),
        Ok(vec!["127.0.0.1:2379".to_string()])
    );
    let cluster = Etcd::parse("etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379/").unwrap();
    assert_eq!(cluster.endpoints().len(), 3);
    assert_eq!(
        cluster.url(),
        "etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379"
    );
    assert!(Etcd::parse("etcd://h:1,h:1").is_err());
    assert!(Etcd::parse("etcd://h:1,").is_err());
    assert!(Etcd::parse("etcd://h:1, h:2").is_err());
    assert!(Etcd::parse("etcd://127.0.0.1").is_err());
    assert!(Etcd::parse("etcd://u:p@h:1").is_err());
    assert!(Etcd::parse("etcd://h:1/x").is_err());
    assert!(Etcd::parse("http://h:1").is_err());
}

/// A member that answers one watch with `body` (chunked as etcd's gateway sends it).
fn watch_server(chunks: Vec<String>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 4096];
        let _ = stream.read(&mut request);
        let mut answer = String::from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        for chunk in chunks {
            answer.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
        }
        answer.push_str("0\r\n\r\n");
        let _ = stream.write_all(answer.as_bytes());
    });
    address
}

#[test]
fn a_watch_reads_each_change_and_says_when_it_was_compacted() {
    let key = base64(b"/bell/f/a");
    let created = r#"{"result":{"header":{"revision":"1"},"created":true}}"#.to_string() + "\n";
    let put = format!(
        r#"{{"result":{{"header":{{"revision":"2"}},"events":[{{"kv":{{"key":"{key}","mod_revision":"2","version":"1","value":"MQ==","lease":"7"}}}}]}}}}"#
    ) + "\n";
    let delete = format!(
        r#"{{"result":{{"header":{{"revision":"3"}},"events":[{{"type":"DELETE","kv":{{"key":"{key}","mod_revision":"3"}}}}]}}}}"#
    ) + "\n";
    let canceled =
        r#"{"result":{"header":{},"canceled":true,"compact_revision":"3"}}"#.to_string() + "\n";
    // The put split across two chunks, as a stream may cut it anywhere.
    let (first, second) = put.split_at(20);
    let address = watch_server(vec![
        created,
        first.to_string(),
        second.to_string() + &delete,
        canceled,
    ]);
    let etcd = Etcd::new(vec![address]);
    let mut seen = Vec::new();
    let end = etcd.watch(b"/bell/f/", b"/bell/f0", 1, &mut |revision, events| {
        seen.push((revision, events));
        true
    });
    assert_eq!(end, WatchEnd::Compacted(3));
    // The message that says the watch was made is not a revision seen (the events up to the
    // revision it names come after it): it is told as 0.
    assert_eq!(seen.len(), 3);
    assert_eq!((seen[0].0, seen[0].1.len()), (0, 0));
    let put = &seen[1].1[0];
    assert_eq!(seen[1].0, 2);
    assert_eq!(
        (put.value.as_slice(), put.lease, put.deleted),
        (&b"1"[..], 7, false)
    );
    assert!(seen[2].1[0].deleted && seen[2].1[0].key == b"/bell/f/a");
}

/// A gateway that answers each request in turn with the next of `answers` (status line and
/// extra headers, body), and counts what it was sent.
fn answering(answers: Vec<(&'static str, &'static str)>) -> (String, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let asked = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&asked);
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for (head, body) in answers {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = format!(
                "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (address, asked)
}

fn signed_client(address: String, limits: Limits) -> (Etcd, Arc<AtomicU64>) {
    let signed = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&signed);
    let mut etcd = Etcd::new(vec![address]).with_limits(limits);
    etcd.signer = Some(RequestSigner(Arc::new(move |_, _| {
        format!("Bell-Host n={}", counted.fetch_add(1, Ordering::SeqCst))
    })));
    (etcd, signed)
}

#[test]
fn a_host_waits_as_long_as_the_gateway_asks_then_signs_its_request_again() {
    const OVER: &str = "429 Too Many Requests\r\nRetry-After: 1";
    let refusal = r#"{"message":"host `a` is over its rate at the gateway; wait 1 s"}"#;
    let (address, asked) = answering(vec![(OVER, refusal), ("200 OK", r#"{"kvs":[]}"#)]);
    let (etcd, signed) = signed_client(address, Limits::HOST);
    let started = std::time::Instant::now();
    assert_eq!(etcd.get("/bell/f/desired/a"), Ok(None));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert_eq!(
        signed.load(Ordering::SeqCst),
        2,
        "signed once for each sending"
    );

    // A wait longer than the host's allowance, or a client that does not wait: refused at
    // once, with the gateway's words.
    const LONG: &str = "429 Too Many Requests\r\nRetry-After: 3600";
    for (head, limits) in [
        (LONG, Limits::HOST),
        (
            OVER,
            Limits {
                throttled_waits: Duration::ZERO,
                ..Limits::HOST
            },
        ),
    ] {
        let (address, asked) = answering(vec![(head, refusal), ("200 OK", r#"{"kvs":[]}"#)]);
        let (etcd, _) = signed_client(address, limits);
        let started = std::time::Instant::now();
        let error = etcd.get("/bell/f/desired/a").unwrap_err();
        assert!(
            error.contains("HTTP 429") && error.contains("over its rate"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }
}

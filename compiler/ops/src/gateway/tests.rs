//! The gateway's decisions that come before etcd is asked: who signed, whether it may, how
//! fast. (What etcd then answers is tested with a real cluster, `compiler/tests/gateway.rs`.)

use super::*;
use bell_store::gateway::authorization;
use bell_store::proof::SigningKey;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_seed([seed; 32])
}

/// A gateway whose etcd is a closed port, that knows hosts h1 and h2.
fn gateway(limits: Limits) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let files = bellc_core::emit::signing::generate(&dir.path().join("fleet"), None).unwrap();
    let gateway = Gateway::new(Config {
        out: Out::Dir("/nonexistent".into()),
        trust: crate::fleet::trusted::load(&files.public).unwrap(),
        etcd: Etcd::new(vec!["127.0.0.1:1".into()]),
        lock_prefix: None,
        limits,
        cache: false,
        throttled_after: std::time::Duration::from_secs(60),
    });
    let mut members = HashMap::new();
    for (host, seed) in [("h1", 1), ("h2", 2)] {
        members.insert(
            host.to_string(),
            Member {
                identity: key(seed).identity(),
                grants: bell_store::keys::host_grants("f", host, "/bell/f/groups", "default")
                    .into(),
            },
        );
    }
    *gateway.fleet.write().unwrap() = Some(Arc::new(Fleet {
        name: "f".into(),
        version: "v1".into(),
        members,
    }));
    gateway
}

fn put(key: &str, value: &[u8]) -> Vec<u8> {
    serde_json::json!({ "key": bell_wire::base64(key.as_bytes()), "value": bell_wire::base64(value) })
        .to_string()
        .into_bytes()
}

const NOW: u64 = 1_800_000_000;

fn signed(gateway: &Gateway, host: &str, seed: u8, path: &str, body: &[u8]) -> Answer {
    let header = authorization(host, &key(seed), path, body, NOW);
    gateway.handle(path, Some(&header), body, NOW)
}

#[test]
fn only_the_host_the_release_names_with_that_key_gets_past_the_door() {
    let gateway = gateway(Limits::default());
    let body = put("/bell/f/running/h1", b"{}");
    let path = "/v3/kv/put";
    // Signed as h1 by h2's key; unsigned; a password.
    assert_eq!(signed(&gateway, "h1", 2, path, &body).status, 401);
    assert_eq!(gateway.handle(path, None, &body, NOW).status, 401);
    assert_eq!(
        gateway
            .handle(path, Some("Basic aDE6cHc="), &body, NOW)
            .status,
        401
    );
    // Signed for another body, or long ago.
    let header = authorization("h1", &key(1), path, b"{}", NOW);
    assert_eq!(gateway.handle(path, Some(&header), &body, NOW).status, 401);
    let old = authorization("h1", &key(1), path, &body, NOW - 600);
    let answer = gateway.handle(path, Some(&old), &body, NOW);
    assert_eq!(answer.status, 401);
    assert!(String::from_utf8_lossy(&answer.body).contains("clock"));
    // The real thing gets as far as etcd (a closed port here: 503), and once only.
    let header = authorization("h1", &key(1), path, &body, NOW);
    assert_eq!(gateway.handle(path, Some(&header), &body, NOW).status, 503);
    let again = gateway.handle(path, Some(&header), &body, NOW);
    assert_eq!(again.status, 401);
    assert!(String::from_utf8_lossy(&again.body).contains("replay"));
}

#[test]
fn a_host_touches_only_its_own_keys() {
    let gateway = gateway(Limits::default());
    for (path, body) in [
        ("/v3/kv/put", put("/bell/f/running/h2", b"{}")),
        ("/v3/kv/put", put("/bell/f/desired/h1", b"bundle")),
        ("/v3/kv/put", put("/bell/f/current_version", b"v2")),
        ("/v3/kv/put", put("/bell/f/discovery/h2", b"{}")),
        (
            "/v3/kv/range",
            serde_json::json!({ "key": bell_wire::base64(b"/bell/f/running/h2") })
                .to_string()
                .into_bytes(),
        ),
        (
            "/v3/kv/txn",
            serde_json::json!({ "success": [
                { "request_put": { "key": bell_wire::base64(b"/bell/f/running/h1"), "value": "" } },
                { "request_delete_range": { "key": bell_wire::base64(b"/bell/f/running/h2") } },
            ]})
            .to_string()
            .into_bytes(),
        ),
    ] {
        let answer = signed(&gateway, "h1", 1, path, &body);
        assert_eq!(answer.status, 403, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&answer.body).contains("may not"));
    }
    // What is its own passes the door (and meets the closed port).
    let own = put("/bell/f/status/health/h1", b"{}");
    assert_eq!(signed(&gateway, "h1", 1, "/v3/kv/put", &own).status, 503);
    // A request that is not one bell makes.
    let widened = serde_json::json!({
        "key": bell_wire::base64(b"/bell/f/running/h1"), "range_end": "AA=="
    })
    .to_string();
    assert_eq!(
        signed(&gateway, "h1", 1, "/v3/kv/range", widened.as_bytes()).status,
        400
    );
    assert_eq!(
        signed(&gateway, "h1", 1, "/v3/auth/user/add", b"{}").status,
        400
    );
}

fn wait(keys: &[&str]) -> Vec<u8> {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| bell_wire::base64(k.as_bytes()))
        .collect();
    serde_json::json!({ "keys": keys, "revision": "5", "timeout": "30" })
        .to_string()
        .into_bytes()
}

#[test]
fn a_host_waits_only_on_its_own_keys_and_only_twice_at_once() {
    let gateway = gateway(Limits::default());
    let path = bell_store::gateway::WAIT_PATH;
    let mine = wait(&["/bell/f/current_version", "/bell/f/desired/h1"]);
    // Another host's keys, or a wait widened past its keys, are refused before anything.
    let theirs = wait(&["/bell/f/desired/h2"]);
    assert_eq!(signed(&gateway, "h1", 1, path, &theirs).status, 403);
    let widened = String::from_utf8(mine.clone())
        .unwrap()
        .replace('}', r#","range_end":"AA=="}"#);
    assert_eq!(
        signed(&gateway, "h1", 1, path, widened.as_bytes()).status,
        400
    );
    // Without a cache, there is nothing to wait on.
    assert_eq!(signed(&gateway, "h1", 1, path, &mine).status, 501);

    let cache = cache::Cache::detached(b"/bell/f/", b"/bell/f0", 10);
    assert!(gateway.cache.set(cache).is_ok());
    let receive = |host: &str, seed: u8| {
        let header = authorization(host, &key(seed), path, &mine, NOW);
        gateway.receive(path, Some(&header), &mine, NOW)
    };
    let first = receive("h1", 1);
    let second = receive("h1", 1);
    assert!(matches!(
        (&first, &second),
        (Decision::Wait(_), Decision::Wait(_))
    ));
    // A third at once is one too many; another host's is its own.
    match receive("h1", 1) {
        Decision::Now(answer) => assert_eq!((answer.status, answer.retry_after), (429, Some(1))),
        _ => panic!("a third wait of h1's was taken"),
    }
    let h2 = wait(&["/bell/f/desired/h2"]);
    let header = authorization("h2", &key(2), path, &h2, NOW);
    assert!(matches!(
        gateway.receive(path, Some(&header), &h2, NOW),
        Decision::Wait(_)
    ));
    // `/metrics` counts the waits held: h1's two (h2's was let go as soon as it was made).
    assert!(gateway.metrics().contains("\nbell_gateway_waiting 2\n"));
    // Answered, a wait gives its place back.
    drop(first);
    assert!(gateway.metrics().contains("\nbell_gateway_waiting 1\n"));
    assert!(matches!(receive("h1", 1), Decision::Wait(_)));
    // Nothing changed after revision 5 in an empty cache: answered "not changed".
    let answer = signed(&gateway, "h2", 2, path, &h2);
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!((answer.status, &body["changed"]), (200, &false.into()));
}

#[test]
fn a_flood_fills_only_its_own_bucket() {
    let gateway = gateway(Limits {
        max_value: 1024,
        ..Limits::default()
    });
    let big = put("/bell/f/status/health/h1", &[b'x'; 4096]);
    assert_eq!(signed(&gateway, "h1", 1, "/v3/kv/put", &big).status, 413);
    // Refused at the keys (not sent on to etcd), and still counted against the host.
    let body = put("/bell/f/status/health/h2", b"{}");
    let mut waits = Vec::new();
    for _ in 0..200 {
        let answer = signed(&gateway, "h1", 1, "/v3/kv/put", &body);
        if answer.status == 429 {
            waits.push(answer.retry_after.unwrap());
        }
    }
    assert!(waits.len() > 100, "{}", waits.len());
    assert!(waits.windows(2).all(|w| w[0] <= w[1]) && waits.last() > waits.first());
    let other = put("/bell/f/status/health/h1", b"{}");
    assert_eq!(signed(&gateway, "h2", 2, "/v3/kv/put", &other).status, 403);
    let metrics = gateway.metrics();
    assert!(
        metrics.contains("bell_host_throttled{host=\"h1\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("host=\"h2\""), "{metrics}");
}

fn registration(host: &str, fleet: &str, seed: u8) -> Vec<u8> {
    let registration = bell_store::discovery::Registration {
        format: bell_store::discovery::REGISTRATION_FORMAT,
        host: host.into(),
        fleet: fleet.into(),
        facts: Default::default(),
        registered_at: NOW,
    };
    put(
        &format!("/bell/f/discovery/{host}"),
        bell_store::discovery::signed(&registration, &key(seed)).as_bytes(),
    )
}

#[test]
fn a_machine_not_in_the_fleet_may_only_file_its_own_registration() {
    let gateway = gateway(Limits::default());
    // Its registration, signed by the key it signs with, passes the door.
    let own = registration("h9", "f", 9);
    assert_eq!(signed(&gateway, "h9", 9, "/v3/kv/put", &own).status, 503);
    // Signed by another key than the request, for another fleet, or under another name.
    for (body, why) in [
        (registration("h9", "f", 8), "signed by the identity"),
        (registration("h9", "g", 9), "signed by the identity"),
        (registration("h8", "f", 9), "may not write"),
        (put("/bell/f/running/h1", b"{}"), "may not write"),
        (
            put("/bell/f/discovery/h9", b"not a registration"),
            "signed by the identity",
        ),
    ] {
        let answer = signed(&gateway, "h9", 9, "/v3/kv/put", &body);
        assert_eq!(answer.status, 403, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&answer.body).contains(why));
    }
    // Nothing but a read or a put.
    let answer = signed(&gateway, "h9", 9, "/v3/kv/txn", b"{}");
    assert_eq!(answer.status, 401);
    assert!(String::from_utf8_lossy(&answer.body).contains("may only register"));
    // A host the release names, with another key than the release gives it.
    assert_eq!(signed(&gateway, "h1", 9, "/v3/kv/put", &own).status, 401);
}

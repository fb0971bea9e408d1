//! The gateway's watch cache against a real etcd: the range is read in pages at one revision
//! (a replica never holds the whole fleet as JSON at once), followed by the watch from there,
//! and a long-poll of a key is woken by a write to it through etcd, not by one to another key.

use crate::common::fleet::Etcd;
use bell_ops::gateway::cache::Cache;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_cache_reads_its_range_in_pages_and_wakes_a_wait_on_a_write() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    for i in 0..25 {
        client.put(&format!("/bell/f/k{i:02}"), b"v").unwrap();
    }
    client.put("/bell/g/outside", b"v").unwrap();
    // Seven requests of four keys each: the range is read whole all the same.
    let cache = Cache::start_paged(
        client.clone(),
        b"/bell/f/".to_vec(),
        b"/bell/f0".to_vec(),
        4,
    );
    until("the cache read the range", || cache.size().0 == 25);
    let (revision, found) = cache
        .read(&[
            b"/bell/f/k00".to_vec(),
            b"/bell/f/k24".to_vec(),
            b"/bell/g/outside".to_vec(),
        ])
        .unwrap();
    assert!(found[0].is_some() && found[1].is_some() && found[2].is_none());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let wait = cache.wait(vec![b"/bell/f/k03".to_vec()], revision).unwrap();
    let soon = || tokio::time::Instant::now() + Duration::from_millis(300);
    client.put("/bell/f/k04", b"w").unwrap();
    assert!(
        !runtime.block_on(wait.until(soon())).0,
        "another key woke it"
    );
    let far = tokio::time::Instant::now() + Duration::from_secs(20);
    let writer = client.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        writer.put("/bell/f/k03", b"w").unwrap();
    });
    let started = Instant::now();
    let (changed, seen) = runtime.block_on(wait.until(far));
    assert!(changed && seen > revision);
    assert!(started.elapsed() < Duration::from_secs(10));
    // A deletion counts as a change too.
    let (revision, _) = cache.read(&[b"/bell/f/k05".to_vec()]).unwrap();
    let wait = cache.wait(vec![b"/bell/f/k05".to_vec()], revision).unwrap();
    client.delete("/bell/f/k05").unwrap();
    assert!(runtime.block_on(wait.until(far)).0);
    assert_eq!(cache.size().0, 24);
}

/// On an etcd another fleet shares, whose writes move etcd's revision with no event of this
/// range: reads are answered within a second all the same (the cache writes its mark and
/// waits for its watch to bring it), and each still sees every write to the range made
/// before it, a deletion too.
#[test]
fn another_fleets_writes_do_not_stall_fresh_reads_nor_make_them_stale() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let client = etcd.client();
    client.put("/bell/f/k", b"0").unwrap();
    let cache = Cache::start_marking(
        client.clone(),
        b"/bell/f/".to_vec(),
        b"/bell/f0".to_vec(),
        b"/bell/f/sync".to_vec(),
    );
    until("the cache read the range", || cache.size().0 == 1);
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (writing, client) = (Arc::clone(&writing), client.clone());
        std::thread::spawn(move || {
            for i in 0u64.. {
                if !writing.load(Ordering::SeqCst) {
                    break;
                }
                client.put("/bell/g/k", &i.to_be_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    for i in 1..=10u8 {
        let value = [b'0' + i % 10];
        let deleted = i % 3 == 0;
        if deleted {
            client.delete("/bell/f/k").unwrap();
        } else {
            client.put("/bell/f/k", &value).unwrap();
        }
        let started = Instant::now();
        let (_, found) = cache.read(&[b"/bell/f/k".to_vec()]).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        match &found[0] {
            Some(kv) => assert!(!deleted && kv.value[..] == value[..], "read {kv:?}"),
            None => assert!(deleted, "a write before the read was not seen"),
        }
    }
    writing.store(false, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(cache.marks.load(Ordering::Relaxed) > 0);
}

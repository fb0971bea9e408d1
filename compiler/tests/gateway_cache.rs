//! The gateway's watch cache against a real etcd: the range is read in pages at one revision
//! (a replica never holds the whole fleet as JSON at once), followed by the watch from there,
//! and a long-poll of a key is woken by a write to it through etcd, not by one to another key.

use crate::common::fleet::Etcd;
use bell_ops::gateway::cache::Cache;
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

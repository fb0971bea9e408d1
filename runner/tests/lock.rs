//! Two runs against one root never overlap: the second is refused clearly, changing nothing.
use crate::common::*;
use std::time::{Duration, Instant};

#[test]
fn a_second_concurrent_run_is_refused() {
    let w = World::new();
    let gate = w.tmp.path().join("gate");
    let slow = BundleSpec::new().resource(ResourceSpec::new("svc", "slow").apply(&format!(
        "{}while [ ! -e '{}' ]; do sleep 0.05; done\n",
        w.event("slow started"),
        gate.display()
    )));
    let bundle = w.build(&slow);
    let root = w.root();
    let mut first = std::process::Command::new(bin())
        .args([
            "apply",
            bundle.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.events().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the first run never started its script"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let other = w.build(&BundleSpec::new().file("/etc/other", "x\n", "0644"));
    let out = w.apply(&other, &[]);
    expect_code(&out, 1);
    let message = stderr(&out);
    assert!(
        message.contains(&format!(
            "another bell-run (pid {}) is applying",
            first.id()
        )),
        "{message}"
    );
    assert!(!root.join("etc/other").exists());

    std::fs::write(&gate, "").unwrap();
    assert!(first.wait().unwrap().success());
    // Once the first is done, the lock is free again.
    expect_code(&w.apply(&other, &[]), 0);
    assert!(root.join("etc/other").exists());
}

/// `bell-run live` holds the host only for a probe or a live file's reload: a run that meets
/// such a hold waits for it instead of being refused (a refused pull would halt its rollout).
#[test]
fn a_run_waits_for_the_live_services_short_hold() {
    let w = World::new();
    let root = w.root();
    let bell = root.join("var/lib/bell");
    std::fs::create_dir_all(&bell).unwrap();
    let lock = bell.join("lock");
    // A holder as the live service leaves it: its pid and `live`, under flock(2) for 1.5 s.
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sh", "-c", "echo \"$$ live\" >\"$1\"; sleep 1.5", "sh"])
        .arg(&lock)
        .spawn()
        .expect("flock(1) runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("live")) {
        assert!(Instant::now() < deadline, "the holder never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let bundle = w.build(&BundleSpec::new().file("/etc/other", "x\n", "0644"));
    let out = w.apply(&bundle, &[]);
    expect_code(&out, 0);
    assert!(root.join("etc/other").exists());
    assert!(holder.wait().unwrap().success());
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the run did not wait for the hold: {:?}",
        started.elapsed()
    );
}

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

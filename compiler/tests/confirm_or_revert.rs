//! Confirm or revert, with a real etcd and nginx: an image-root host in a network namespace of
//! its own, which reaches its store and its mirror only over its link (a veth pair; the
//! machine's end forwards to them). The namespace's network setup reads a file of the host's
//! root (`/etc/link`, as a host's networking reads its configuration) and takes the host's end
//! of the link down while it says `down`: a release writing that cuts the host off its fleet
//! the way a bad route or interface file would. Such a release is taken back within its
//! `confirm` timeout: the host ends on the generation before with its files, reports
//! `reverted` once its link is back, and the next pull does not apply that release again while
//! a newer one applies. A release that keeps the link is confirmed at once; a bell-run killed
//! while it waits is taken back by the next. The controller's wave halts on the host that
//! took its release back; a generation that needs a reboot is confirmed again in the next
//! boot; each try runs the health probes again.

use crate::common::fleet::{bell_run, Etcd};
use crate::common::netns::Netns;
use crate::common::pulling::{copy_over, image_root, Mirrored};
use crate::fleet_under_faults::mirror::Mirror;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the host has to reach its fleet again after an apply.
const TIMEOUT: u64 = 6;

fn spec(link: &str, motd: &str) -> String {
    format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"h1\"\nconfirm timeout=\"{TIMEOUT}s\"\n\
         file \"/etc/link\" {{\n    content \"{link}\\n\"\n}}\n\
         file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n"
    )
}

/// `upstream` (on the machine's loopback) where the host reaches it: the machine's end of its
/// link.
fn over_the_link(netns: &Netns, upstream: &str) -> Mirror {
    Mirror::on(&netns.outside_addr, upstream, Arc::new(|| true))
}

/// The host's network setup: its end of the link up or down as `root/etc/link` says, looked
/// at every 50 ms; down at once, up three seconds after the file says so (as networking
/// restarted takes a while: longer than the store client's own retries), so that the host's
/// report of going back must wait for its link.
struct Networking {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Networking {
    fn start(netns: Arc<Netns>, root: PathBuf) -> Networking {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let (mut up, mut wanted_since) = (true, Instant::now());
                while !stop.load(Ordering::Relaxed) {
                    let want = !std::fs::read_to_string(root.join("etc/link"))
                        .is_ok_and(|l| l.trim() == "down");
                    if want == up {
                        wanted_since = Instant::now();
                    } else if !want || wanted_since.elapsed() > Duration::from_secs(3) {
                        let how = if want { "up" } else { "down" };
                        assert!(netns.ip(&["link", "set", &netns.inside, how]));
                        up = want;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        Networking {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Networking {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn state(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join("var/lib/bell/state.json")).unwrap()).unwrap()
}

/// The release the store names for the fleet.
fn store_names(etcd: &Etcd) -> Option<String> {
    let bytes = etcd.client().get("/bell/f/current_version").ok()??;
    String::from_utf8(bytes).ok()
}

fn said(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_release_that_cuts_the_host_off_is_taken_back() {
    let bin = bell_run();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let Some(site) = Mirrored::start() else {
        return;
    };
    let (fx, served, nginx) = (&site.fx, &site.served, &site.nginx);
    let Some(netns) = Netns::make() else {
        return;
    };
    let netns = Arc::new(netns);
    let root = image_root();
    let root = root.path();
    let _networking = Networking::start(Arc::clone(&netns), root.to_path_buf());
    let store = over_the_link(&netns, &etcd.url.replace("etcd://", "http://"));
    let store_url = store.url.replace("http://", "etcd://");
    let store_url = store_url.trim_end_matches('/');
    let mirror = over_the_link(&netns, &nginx.url);
    let trust = fx.path().join("ci.pub");
    let publish_with = |n: u32, link: &str, motd: &str, more: &str| -> String {
        let out = format!("out{n}");
        site.build(&format!("{}{more}", spec(link, motd)), &out);
        copy_over(&fx.path().join(&out), served);
        let run = fx.bellc(&["publish", "served", "--store", &etcd.url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let release: serde_json::Value =
            serde_json::from_slice(&std::fs::read(served.join("release.json")).unwrap()).unwrap();
        release["version"].as_str().unwrap().to_string()
    };
    let publish = |n: u32, link: &str, motd: &str| publish_with(n, link, motd, "");
    let pull = || {
        let mut command = netns.enter(&bin);
        command
            .args(["pull", "--source", &mirror.url, "--store", store_url])
            .args([
                "--report",
                store_url,
                "--host",
                "h1",
                "--fleet",
                "f",
                "--offline",
            ])
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(root)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let report = || -> serde_json::Value {
        let bytes = etcd.client().get("/bell/f/running/h1").unwrap().unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let motd = || std::fs::read_to_string(root.join("etc/motd")).unwrap();
    // Release 1 keeps the link: confirmed at once, nothing left waiting.
    let one = publish(1, "up", "one");
    let out = pull().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let first = state(root);
    assert!(first["confirming"].is_null(), "{first}");
    assert_eq!(report()["result"], "success");

    // Release 2 cuts it, rolled out by the controller: taken back when the timeout passes,
    // with release 1's files, and the wave halts on it.
    site.build(&spec("down", "two"), "out2");
    copy_over(&fx.path().join("out2"), served);
    let rollout = |more: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args([
                "rollout",
                "served",
                "--store",
                &etcd.url,
                "--sign-key",
                "ci.key",
            ])
            .args(["--json", "--wave-timeout", "60s"])
            .args(more)
            .current_dir(fx.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let controller = rollout(&[]);
    // The controller names the wave's release in the store before the host can take it.
    let until = Instant::now() + Duration::from_secs(20);
    while store_names(&etcd) == Some(one.clone()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();
    let out = pull().output().unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    let halted = controller.wait_with_output().unwrap();
    assert_eq!(halted.status.code(), Some(1), "{}", said(&halted));
    let events = String::from_utf8_lossy(&halted.stdout).to_string();
    let halt: serde_json::Value = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "halted")
        .unwrap_or_else(|| panic!("no halt: {events}"));
    assert_eq!(halt["hosts"][0]["host"], "h1", "{halt}");
    assert_eq!(halt["hosts"][0]["state"], "reverted", "{halt}");
    // The release the host took back is the wave's.
    let two = state(root)["reverted"][0]["release"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(store_names(&etcd).as_deref(), Some(two.as_str()));
    assert!(
        took >= Duration::from_secs(TIMEOUT - 1) && took < Duration::from_secs(30),
        "{took:?}"
    );
    assert!(
        said(&out).contains("not confirmed in time"),
        "{}",
        said(&out)
    );
    // Its report waited for the link to come back.
    assert!(!said(&out).contains("not filed"), "{}", said(&out));
    assert_eq!(motd(), "one\n");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/link")).unwrap(),
        "up\n"
    );
    let back = state(root);
    assert_eq!(back["generation"], first["generation"], "{back}");
    assert_eq!(back["release"], one.as_str());
    assert_eq!(back["reverted"][0]["release"], two.as_str(), "{back}");
    let filed = report();
    assert_eq!(filed["result"], "reverted", "{filed}");
    assert!(
        filed["error"].as_str().unwrap().contains("cannot reach"),
        "{filed}"
    );
    // It names what it runs again, and the release it took back.
    assert_eq!(filed["release"], one.as_str(), "{filed}");
    assert_eq!(filed["bundle"], first["generation"], "{filed}");
    assert_eq!(filed["refused_release"], two.as_str(), "{filed}");
    // `bellc status`: a state of its own, naming the release, failing the default gate.
    let status = || {
        let args = ["status", "--store", &etcd.url, "--fleet", "f", "--json"];
        let run = fx.bellc(&[&args[..], &["--trust", "ci.pub", "--source", "served"]].concat());
        let value: serde_json::Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{e}: {} {}", run.stdout, run.stderr));
        (run.code, value["hosts"][0].clone())
    };
    let (code, row) = status();
    assert_eq!(code, 3, "{row}");
    assert_eq!(row["state"], "reverted", "{row}");
    assert_eq!(row["refused_release"], two.as_str(), "{row}");
    let short = &two[..12];
    let detail = row["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(&format!("took back release {short}: "))
            && detail.contains("not confirmed in time"),
        "{row}"
    );

    // The store still wants release 2: the next pull refuses it and changes nothing.
    let out = pull().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("was taken back on this host"),
        "{}",
        said(&out)
    );
    assert_eq!(motd(), "one\n");
    assert_eq!(report()["result"], "reverted");
    let (_, row) = status();
    assert_eq!(row["state"], "reverted", "{row}");
    assert_eq!(row["refused_release"], two.as_str(), "{row}");

    // The rollout is aborted (the host is on release 1's bundle already), and a newer release
    // that keeps the link applies, and is confirmed.
    let abort = rollout(&["--abort"]);
    let until = Instant::now() + Duration::from_secs(30);
    while store_names(&etcd) == Some(two.clone()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = pull().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let aborted = abort.wait_with_output().unwrap();
    assert_eq!(aborted.status.code(), Some(0), "{}", said(&aborted));
    assert_eq!(motd(), "one\n");
    publish(3, "up", "three");
    let out = pull().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(motd(), "three\n");
    let three = state(root);
    assert!(three["confirming"].is_null(), "{three}");

    // A bell-run killed while it waits: the next one takes the release back, at the
    // deadline the first one recorded.
    publish(4, "down", "four");
    let mut child = pull().spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while state(root)["confirming"].is_null() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!state(root)["confirming"].is_null(), "never waited");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(motd(), "four\n");
    let out = pull().output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    assert_eq!(motd(), "three\n");
    let back = state(root);
    assert_eq!(back["generation"], three["generation"], "{back}");
    assert!(back["confirming"].is_null(), "{back}");
    assert_eq!(report()["result"], "reverted");

    // A release whose work takes effect at the next boot (a firmware update: an `exec` with
    // `reboot=#true`) is confirmed in its boot, then again in the next, the one that runs it in
    // full. Release 5's next boot reaches the fleet: confirmed for good.
    let firmware = |n: u32| {
        format!(
            "exec \"firmware-{n}.sh\" reboot=#true rerun=\"once-successfully\" offline=\"root\" {{\n    \
             script \"#!/bin/sh\\ntrue\\n\"\n}}\n"
        )
    };
    let in_boot = |boot: &str| {
        let mut command = pull();
        command.env("BELL_RUN_BOOT_ID", boot);
        command.output().unwrap()
    };
    publish_with(5, "up", "five", &firmware(5));
    let out = in_boot("boot-1");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let five = state(root);
    assert_eq!(five["confirming"]["after_boot"], true, "{five}");
    assert_eq!(five["confirming"]["reboots_from"], "boot-1", "{five}");
    // Not rebooted yet: nothing to wait for.
    let started = Instant::now();
    let out = in_boot("boot-1");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        started.elapsed() < Duration::from_secs(TIMEOUT / 3),
        "it waited in the same boot"
    );
    let out = in_boot("boot-2");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        said(&out).contains("running in a new boot"),
        "{}",
        said(&out)
    );
    assert!(state(root)["confirming"].is_null(), "{}", state(root));
    assert_eq!(motd(), "five\n");

    // Release 6's next boot comes up without its network (the firmware's doing: the test
    // writes what the boot's networking reads): taken back there, to release 5.
    let six = publish_with(6, "up", "six", &firmware(6));
    let out = in_boot("boot-2");
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(motd(), "six\n");
    std::fs::write(root.join("etc/link"), "down\n").unwrap();
    let started = Instant::now();
    let out = in_boot("boot-3");
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(TIMEOUT - 1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(motd(), "five\n");
    let back = state(root);
    assert_eq!(back["generation"], five["generation"], "{back}");
    assert!(back["confirming"].is_null(), "{back}");
    let filed = report();
    assert_eq!(filed["result"], "reverted", "{filed}");
    assert_eq!(filed["refused_release"], six.as_str(), "{filed}");

    // A change that breaks a health probe a moment after the apply: each try runs the probes
    // again, so the fleet reached is not enough.
    std::fs::write(root.join("etc/link"), "up\n").unwrap();
    let probe =
        "health \"ok\" offline=\"root\" {\n    run \"test ! -e \\\"$BELL_ROOT/sick\\\"\"\n}\n";
    publish_with(7, "up", "seven", probe);
    let child = pull().spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while state(root)["confirming"].is_null() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(root.join("sick"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", said(&out));
    assert_eq!(motd(), "five\n");
    let filed = report();
    assert!(
        filed["error"]
            .as_str()
            .unwrap_or_default()
            .contains("health probe `ok` fails"),
        "{filed}"
    );
}

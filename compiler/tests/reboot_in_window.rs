//! Reboots inside the window and the disruption budget, on live roots: each pull runs as `/`
//! inside its own `unshare --mount`, with the host's own directories bound over /var/lib,
//! /etc/default, /run and /boot, a file over /proc/cmdline, an injected clock and boot id, and
//! stub `systemctl`, `kexec` and `update-grub` that record what they were asked (the stub
//! update-grub writes the command line grub.cfg would carry, sourcing the drop-ins as
//! grub-mkconfig does). A host "boots" when the test gives it a new boot id and the command
//! line of the way it went down: what the kexec stub was handed, or grub.cfg's. h1 kexecs, h2
//! reboots (an override by host).
//!
//! Two hosts share one slot. Outside the window a host that needs a reboot applies, reports
//! it and gives the slot back; inside, it keeps the slot across `before-reboot`, the report
//! and the kexec, so the other host waits; after the boot, an unhealthy host keeps the slot
//! (and runs `after-boot` again on its next pull), a healthy one gives it back. A reboot that
//! did not take effect keeps the slot and does not reboot again.

use crate::common::fleet::{bell_run, Etcd};
use crate::common::pulling::copy_over;
use crate::common::Fixture;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn spec(args: &[&str]) -> String {
    let mut spec = String::from(
        r#"fleet "f" target="debian-12"
host "h1" rack="a"
host "h2" rack="a"
rollout batch-by="rack" max-unavailable=1
file "/etc/default/bell-motd" { content "hi\n"; }
health "ok" { run "test ! -e /run/sick"; }
reboot method="kexec" {
    window "Sat 02:00-05:00"
    before-reboot "echo \"drained $BELL_RESOURCE\" >>/run/hooks.log"
    after-boot "echo uncordoned >>/run/hooks.log"
}
override "plain" {
    match host="h2"
    reboot method="reboot"
}
"#,
    );
    if !args.is_empty() {
        spec.push_str("kernel-args \"hugepages\" {\n");
        for arg in args {
            spec.push_str(&format!("    arg \"{arg}\"\n"));
        }
        spec.push_str("    remove \"quiet\"\n}\n");
    }
    spec
}

/// The next Saturday's midnight (UTC) after the real clock: the injected clock stays ahead of
/// the releases' signing time, which a host checks.
fn next_saturday() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let midnight = now - now % 86_400 + 86_400;
    // 1970-01-01 was a Thursday; Saturday is two days on.
    let day = (midnight / 86_400 + 3) % 7;
    midnight + ((5 + 7 - day) % 7) * 86_400
}

struct Host {
    name: &'static str,
    dir: PathBuf,
    boot: u32,
}

impl Host {
    fn new(base: &Path, name: &'static str, running: &str) -> Host {
        let dir = base.join(name);
        for sub in ["var-lib", "etc-default", "run", "boot"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(
            dir.join("etc-default/grub"),
            "GRUB_CMDLINE_LINUX=\"root=/dev/vda1 ro\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
        )
        .unwrap();
        std::fs::write(dir.join(format!("boot/vmlinuz-{running}")), "kernel").unwrap();
        std::fs::write(dir.join(format!("boot/initrd.img-{running}")), "initrd").unwrap();
        std::fs::write(
            dir.join("cmdline"),
            format!("BOOT_IMAGE=/vmlinuz-{running} root=/dev/vda1 ro quiet\n"),
        )
        .unwrap();
        Host { name, dir, boot: 1 }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// The next boot, the way the host went down: a kexec boots the command line the stub was
    /// handed, a reboot the one grub.cfg holds.
    fn boot_up(&mut self) {
        let systemctl = self.file("systemctl.log");
        let cmdline = match systemctl.lines().last() {
            Some("systemctl kexec") => {
                let kexec = self.file("kexec.log");
                let line = kexec.lines().last().unwrap().to_string();
                line.split("--command-line=").nth(1).unwrap().to_string()
            }
            Some("systemctl reboot") => self.file("grub.cfg").trim_end().to_string(),
            other => panic!("{}: went down by {other:?}", self.name),
        };
        std::fs::write(self.dir.join("cmdline"), format!("{cmdline}\n")).unwrap();
        self.boot += 1;
    }
}

struct Live {
    bin: PathBuf,
    stubs: PathBuf,
    driver: PathBuf,
    source: String,
    trust: String,
    store: String,
}

impl Live {
    fn pull(&self, host: &Host, now: u64) -> (Output, serde_json::Value) {
        let out = Command::new("unshare")
            .args(["--mount", "sh"])
            .arg(&self.driver)
            .env("HOST_DIR", &host.dir)
            .env("BELL", &self.bin)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.stubs.display(),
                    std::env::var("PATH").unwrap()
                ),
            )
            .env("BELL_RUN_NOW", now.to_string())
            .env(
                "BELL_RUN_BOOT_ID",
                format!("{}-boot-{}", host.name, host.boot),
            )
            .args([
                "pull",
                "--source",
                &self.source,
                "--trust",
                &self.trust,
                "--store",
                &self.store,
                "--report",
                &self.store,
                "--fleet",
                "f",
                "--host",
                host.name,
                "--json",
            ])
            .output()
            .unwrap();
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out, json)
    }
}

/// The running kernel, and whether this machine's own `/vmlinuz` would say another one is
/// installed for the next boot (a reason no test boot can clear).
fn running_kernel() -> Option<String> {
    let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let running = running.trim().to_string();
    for link in ["/vmlinuz", "/boot/vmlinuz"] {
        if let Ok(target) = std::fs::read_link(link) {
            if !target.to_string_lossy().ends_with(&running) {
                bell_testkit::machine_state(&format!(
                    "{link} points at another kernel than the running one"
                ));
                return None;
            }
        }
    }
    Some(running)
}

#[test]
fn reboots_inside_the_window_and_the_budget() {
    let Some(running) = running_kernel() else {
        return;
    };
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let fx = Fixture::new();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let build = |args: &[&str], out: &str| {
        std::fs::write(fx.path().join("bell.kdl"), spec(args)).unwrap();
        let run = fx.bellc(&["build", "bell.kdl", "-o", out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        copy_over(&fx.path().join(out), &fx.path().join("served"));
    };
    let publish = |out: &str| {
        let run = fx.bellc(&["publish", out, "--store", &etcd.url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    let stubs = fx.path().join("stubs");
    std::fs::create_dir(&stubs).unwrap();
    for (name, body) in [
        (
            "systemctl",
            "echo \"systemctl $*\" >>\"$HOST_DIR/systemctl.log\"",
        ),
        ("kexec", "echo \"kexec $*\" >>\"$HOST_DIR/kexec.log\""),
        (
            "update-grub",
            "set -e\n. /etc/default/grub\nfor f in /etc/default/grub.d/*.cfg; do [ ! -e \"$f\" ] || . \"$f\"; done\n\
             echo \"BOOT_IMAGE=/vmlinuz $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT\" >\"$HOST_DIR/grub.cfg\"\n\
             echo ran >>\"$HOST_DIR/update-grub.log\"",
        ),
    ] {
        let path = stubs.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    }
    let driver = fx.path().join("live.sh");
    std::fs::write(
        &driver,
        r#"set -eu
mount --bind "$HOST_DIR/var-lib" /var/lib
mount --bind "$HOST_DIR/etc-default" /etc/default
mount --bind "$HOST_DIR/run" /run
mount --bind "$HOST_DIR/boot" /boot
mount --bind "$HOST_DIR/cmdline" /proc/cmdline
exec "$BELL" "$@"
"#,
    )
    .unwrap();
    let live = Live {
        bin: bell_run(),
        stubs,
        driver,
        source: fx.path().join("served").display().to_string(),
        trust: fx.path().join("ci.pub").display().to_string(),
        store: etcd.url.clone(),
    };
    let saturday = next_saturday();
    let (inside, outside) = (saturday + 3 * 3600, saturday + 12 * 3600);
    let mut h1 = Host::new(fx.path(), "h1", &running);
    let mut h2 = Host::new(fx.path(), "h2", &running);
    let holders = || -> Vec<String> {
        bell_store::semaphore::groups(&etcd.client(), "/bell/f")
            .unwrap()
            .into_iter()
            .flat_map(|g| g.holders.into_iter().map(|h| h.host))
            .collect()
    };
    let stored_report = |host: &str| -> serde_json::Value {
        let key = bell_store::report_key("f", "apply", host);
        serde_json::from_slice(&etcd.client().get(&key).unwrap().unwrap()).unwrap()
    };

    // Release 1: nothing needs a reboot.
    build(&[], "out1");
    publish("out1");
    for host in [&h1, &h2] {
        let (out, json) = live.pull(host, outside);
        assert_eq!(out.status.code(), Some(0), "{json:#}");
        assert!(json["reboot"].is_null(), "{json:#}");
    }
    assert!(holders().is_empty());

    // Release 2 changes the command line. Outside the window h1 applies, says why it needs a
    // reboot and that it waits, and gives its slot back.
    build(&["hugepagesz=1G"], "out2");
    publish("out2");
    let (out, json) = live.pull(&h1, outside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(
        json["reboot"], "waits for its window (Sat 02:00-05:00)",
        "{json:#}"
    );
    let reasons = json["reboot_required"].to_string();
    assert!(reasons.contains("hugepagesz=1G"), "{json:#}");
    assert!(holders().is_empty(), "{:?}", holders());
    assert_eq!(h1.file("kexec.log"), "");
    assert_eq!(h1.file("update-grub.log"), "ran\n");

    // Inside the window: h1 takes the slot, drains, files a report that says it is rebooting,
    // and kexecs into the installed kernel with the new command line.
    let (out, json) = live.pull(&h1, inside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(
        json["slot"], "keeps its slot of group `a` across its reboot",
        "{json:#}"
    );
    assert!(json["reboot"]
        .as_str()
        .unwrap()
        .starts_with("rebooting: kexec into /boot/vmlinuz-"));
    assert_eq!(holders(), ["h1"]);
    assert_eq!(h1.file("run/hooks.log"), "drained reboot:before-reboot\n");
    assert_eq!(
        h1.file("kexec.log"),
        format!(
            "kexec -l /boot/vmlinuz-{running} --initrd=/boot/initrd.img-{running} \
             --command-line=root=/dev/vda1 ro hugepagesz=1G\n"
        )
    );
    assert_eq!(h1.file("systemctl.log"), "systemctl kexec\n");
    let report = stored_report("h1");
    assert!(
        report["rebooting"]
            .as_str()
            .unwrap()
            .starts_with("kexec into"),
        "{report:#}"
    );

    // h2, in the same rack, waits for the slot h1 holds across its reboot.
    let (out, json) = live.pull(&h2, inside);
    assert_eq!(out.status.code(), Some(10), "{json:#}");
    assert_eq!(holders(), ["h1"]);

    // h1 boots with the new command line but comes back unhealthy: it keeps the slot.
    h1.boot_up();
    std::fs::write(h1.dir.join("run/sick"), "").unwrap();
    let (out, json) = live.pull(&h1, inside);
    assert_eq!(out.status.code(), Some(4), "{json:#}");
    assert!(json["reboot_required"].is_null(), "{json:#}");
    assert_eq!(
        json["reboot"], "back from its reboot, not healthy yet",
        "{json:#}"
    );
    assert_eq!(holders(), ["h1"]);
    assert_eq!(
        h1.file("run/hooks.log"),
        "drained reboot:before-reboot\nuncordoned\n"
    );
    // Healthy on the next pull: after-boot again, then the slot goes back; no second reboot.
    std::fs::remove_file(h1.dir.join("run/sick")).unwrap();
    let (out, json) = live.pull(&h1, outside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(
        json["reboot"], "back from its reboot: the reasons are gone and it is healthy",
        "{json:#}"
    );
    assert!(holders().is_empty(), "{:?}", holders());
    assert_eq!(h1.file("systemctl.log"), "systemctl kexec\n");
    let report = stored_report("h1");
    assert!(report["rebooting"].is_null(), "{report:#}");
    assert!(report["reboot_required"].is_null(), "{report:#}");
    let (out, json) = live.pull(&h1, inside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert!(json["reboot"].is_null(), "{json:#}");
    assert_eq!(
        h1.file("run/hooks.log"),
        "drained reboot:before-reboot\nuncordoned\nuncordoned\n",
        "after-boot runs until the host is healthy, then no more"
    );

    // h2 applies and reboots in one pull, keeping the slot it took for the apply. Its reboot
    // does not take effect (the command line stays as it was): it keeps the slot, fails, and
    // does not reboot again for this bundle.
    let (out, json) = live.pull(&h2, inside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(holders(), ["h2"]);
    assert_eq!(h2.file("systemctl.log"), "systemctl reboot\n");
    assert_eq!(
        h2.file("kexec.log"),
        "",
        "h2 reboots through its boot loader"
    );
    h2.boot += 1;
    let (out, json) = live.pull(&h2, inside);
    assert_eq!(out.status.code(), Some(3), "{json:#}");
    assert!(
        json["reboot"]
            .as_str()
            .unwrap()
            .starts_with("rebooted, and still needs a reboot (kernel-args:hugepages:"),
        "{json:#}"
    );
    assert_eq!(holders(), ["h2"]);
    assert_eq!(h2.file("systemctl.log"), "systemctl reboot\n");

    // Booted right this time, h2 is back and gives the slot back.
    h2.boot_up();
    let (out, json) = live.pull(&h2, inside);
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert!(holders().is_empty(), "{:?}", holders());

    // Release 3 adds an argument, rolled out by `bellc rollout`: a wave converges only when
    // its hosts are back from their reboots and healthy, and the controller says who is
    // rebooting. Each host pulls as its timer would; one that kexeced boots once the
    // controller has seen it go down.
    build(&["hugepagesz=1G", "bell.test=1"], "out3");
    let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
        .args([
            "rollout",
            "served",
            "--store",
            &etcd.url,
            "--sign-key",
            "ci.key",
        ])
        .args(["--json", "--wave-timeout", "60s"])
        .current_dir(fx.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::<serde_json::Value>::new()));
    let reader = {
        let events = events.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let event = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
                events.lock().unwrap().push(event);
            }
        })
    };
    let seen = |host: &str, kind: &str, state: &str| {
        events.lock().unwrap().iter().any(|e| {
            e["event"] == kind && e["host"] == host && (state.is_empty() || e["state"] == state)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the rollout did not end"
        );
        for host in [&mut h1, &mut h2] {
            let downs = host.file("systemctl.log").lines().count();
            live.pull(host, inside);
            if host.file("systemctl.log").lines().count() > downs {
                while !seen(host.name, "host-rebooting", "rebooting") {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no host-rebooting event"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                host.boot_up();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    reader.join().unwrap();
    let status = child.wait().unwrap();
    let events = events.lock().unwrap().clone();
    assert!(status.success(), "{events:#?}");
    assert!(events.iter().any(|e| e["event"] == "done"), "{events:#?}");
    for host in ["h1", "h2"] {
        let at = |kind: &str| {
            events
                .iter()
                .position(|e| e["event"] == kind && e["host"] == host)
        };
        let (down, done) = (at("host-rebooting"), at("host-converged"));
        assert!(down.is_some() && down < done, "{host}: {events:#?}");
        let cmdline = std::fs::read_to_string(fx.path().join(host).join("cmdline")).unwrap();
        assert!(
            cmdline.ends_with("hugepagesz=1G bell.test=1\n"),
            "{cmdline}"
        );
    }
    assert!(holders().is_empty(), "{:?}", holders());
}

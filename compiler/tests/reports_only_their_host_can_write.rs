//! A host's word counts only about itself, tried as an attacker with the etcd write access every
//! host has: a real etcd, three image-root hosts whose identities are made by
//! `bell-run identity --root R --init` and listed in the spec, and reports written with
//! `etcdctl` for host `b` by someone else: copied from host `a`, edited after `b` signed it,
//! filed by a bell-run holding another key, and an old healthy one of `b`'s own put back after
//! `b` said it was unhealthy. Each makes `b` forged in `bellc status --json` (never up to
//! date), on the page and in the API, and `b`'s next honest report puts it right. Then a
//! rollout whose only healthy-looking report for `b` is forged waits for it and halts at the
//! wave's time, never counting it converged.

use crate::common;
use crate::common::fleet::{bell_run, etcdctl, run_bin, text, Etcd};
use crate::common::pulling::{image_root, release_of};
use crate::common::{row, Fixture};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["a", "b", "c"];

fn spec(motd: &str, identities: &[String]) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\" identities=\"required\"\n");
    spec.push_str("rollout max-unavailable=\"100%\"\n");
    for (host, identity) in HOSTS.iter().zip(identities) {
        spec.push_str(&format!("host \"{host}\" identity=\"{identity}\"\n"));
    }
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n\
         health \"up\" retries=1 offline=\"root\" {{\n    run \"test ! -e \\\"$BELL_ROOT/sick\\\"\"\n}}\n"
    ));
    spec
}

/// `bellc serve` on a free port, killed on drop.
struct Server(Child, String);

impl Server {
    fn start(dir: &Path, state: &Path, url: &str) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args(["serve", "out1", "--store", url])
            .args(["--listen", "127.0.0.1:0", "--refresh", "1"])
            .env("BELLC_STATE_DIR", state)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bellc serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("where it listens").unwrap();
            if let Some(rest) = line.split("on http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Server(child, address)
    }

    fn get(&self, path: &str) -> String {
        let mut stream = std::net::TcpStream::connect(&self.1).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.1
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.split_once("\r\n\r\n").unwrap().1.to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn only_a_host_can_speak_for_itself() {
    let bin = bell_run();
    let fx = Fixture::new();
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url.clone();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let root = |host: &str| roots[HOSTS.iter().position(|h| *h == host).unwrap()].path();
    let identity = |dir: &Path, host: &str, init: bool| -> String {
        let mut args = vec!["identity", "--root", dir.to_str().unwrap(), "--host", host];
        if init {
            args.push("--init");
        }
        let out = run_bin(&bin, &args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(line.starts_with("ssh-ed25519 ") && line.ends_with(&format!(" {host}")));
        // Made in an image root: said where it is on this machine, not as the host's /etc.
        let said = String::from_utf8_lossy(&out.stderr);
        let made = format!("made {}/etc/bell/identity.key: ", dir.display());
        assert_eq!(init, said.contains(&made), "{said}");
        line
    };
    let identities: Vec<String> = HOSTS.iter().map(|h| identity(root(h), h, true)).collect();
    // Made once: asked again, the same key.
    assert_eq!(identity(root("a"), "a", false), identities[0]);
    let key = root("a").join("etc/bell/identity.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    for (n, motd) in [(1, "one"), (2, "two")] {
        std::fs::write(fx.path().join("bell.kdl"), spec(motd, &identities)).unwrap();
        let out = format!("out{n}");
        let run = fx.bellc(&["build", "bell.kdl", "-o", &out, "--sign-key", "ci.key"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let release1 = release_of(&fx.path().join("out1"));
    assert_eq!(
        release1.hosts["b"].identity.as_deref(),
        identities[1].strip_suffix(" b")
    );
    let bundle = |out: &str, host: &str| -> PathBuf {
        let release = release_of(&fx.path().join(out));
        fx.path()
            .join(out)
            .join("bundles")
            .join(&release.hosts[host].bundle)
    };
    let report_args = ["--report", url.as_str()];
    let apply = |out: &str, host: &str, dir: &Path| {
        let bundle = bundle(out, host);
        let release = release_of(&fx.path().join(out)).version;
        let mut args = vec!["apply", bundle.to_str().unwrap(), "--root"];
        args.extend([dir.to_str().unwrap(), "--host", host, "--release", &release]);
        args.extend(report_args);
        run_bin(&bin, &args, &[])
    };
    let check = |host: &str, dir: &Path| {
        let mut args = vec!["check", "--root", dir.to_str().unwrap(), "--host", host];
        args.extend(report_args);
        run_bin(&bin, &args, &[])
    };
    let state = fx.path().join("bellc-state");
    let status = || -> serde_json::Value {
        let run = common::bellc_in(fx.path(), &["status", "out1", "--store", &url, "--json"]);
        assert!(matches!(run.code, 0 | 3), "{}", run.stderr);
        serde_json::from_str(&run.stdout).unwrap()
    };
    let b = |fleet: &serde_json::Value| row(fleet, "b");
    let forged = |fleet: &serde_json::Value, why: &str| {
        let b = b(fleet);
        assert_eq!(b["state"], "forged", "{b:#}");
        assert!(b["flags"].as_array().unwrap().contains(&"forged".into()));
        assert!(
            b["forged"].to_string().contains(why),
            "wanted `{why}`: {b:#}"
        );
    };
    let running = "/bell/f/running/b";
    let checked = "/bell/f/reports/check/b";
    let get = |key: &str| etcdctl(&etcd.endpoint, &["get", key, "--print-value-only"]);
    let put = |key: &str, value: &str| {
        etcdctl(&etcd.endpoint, &["put", key, value.trim_end()]);
    };

    for host in HOSTS {
        let out = apply("out1", host, root(host));
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
    }
    let honest = status();
    for host in HOSTS {
        let r = row(&honest, host);
        assert_eq!(r["state"], "up-to-date", "{r:#}");
        assert!(r.get("unverified").is_none(), "{r:#}");
    }
    let signed: serde_json::Value = serde_json::from_str(&get(running)).unwrap();
    assert_eq!(
        signed["signer"].as_str(),
        release1.hosts["b"].identity.as_deref()
    );
    assert!(signed["sequence"].as_u64().unwrap() > 0 && signed["proof"].is_string());
    // The memory of what was seen is bellc's own, in its state directory.
    assert!(state.join("seen-f.json").is_file());
    let healthy_check = {
        assert_eq!(check("b", root("b")).status.code(), Some(0));
        get(checked)
    };

    // 1. Copied from another host: a's own report, validly signed by a, under b's name.
    let server = Server::start(fx.path(), &state, &url);
    put(running, &get("/bell/f/running/a"));
    forged(&status(), "a report of host `a` filed under `b`");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let api: serde_json::Value = serde_json::from_str(&server.get("/api/v1/status")).unwrap();
        if b(&api)["state"] == "forged" {
            forged(&api, "a report of host `a`");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the API never said forged: {api:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let page = server.get("/hosts/b");
    assert!(page.contains("class=\"state forged\""), "{page}");
    assert!(page.contains("filed under `b`"), "{page}");
    let api_host = server.get("/api/v1/hosts/b");
    assert!(api_host.contains("forged"), "{api_host}");
    drop(server);
    // b's next run writes its own report over the copy (the same findings are not written
    // twice, unless what the store holds is not b's).
    assert_eq!(apply("out1", "b", root("b")).status.code(), Some(0));
    assert_eq!(b(&status())["state"], "up-to-date");

    // 2. b turns unhealthy; its old healthy report put back is a replay.
    std::fs::write(root("b").join("sick"), "").unwrap();
    assert_eq!(check("b", root("b")).status.code(), Some(4));
    assert_eq!(b(&status())["state"], "unhealthy");
    put(checked, &healthy_check);
    let replayed = status();
    forged(&replayed, "a replay");
    // What b last said for itself stands beside the flag.
    assert!(
        b(&replayed)["unhealthy"][0]
            .as_str()
            .unwrap()
            .starts_with("up"),
        "{:#}",
        b(&replayed)
    );

    // 3. Edited after b signed it: unhealthy made healthy.
    assert_eq!(check("b", root("b")).status.code(), Some(4));
    assert_eq!(b(&status())["state"], "unhealthy");
    let mut edited: serde_json::Value = serde_json::from_str(&get(checked)).unwrap();
    edited["result"] = "success".into();
    edited["status"]["health"] = "success".into();
    edited["health"][0]["healthy"] = true.into();
    put(checked, &edited.to_string());
    forged(&status(), "changed after it was signed");

    // 4. Another key: a copy of b's root with an identity of its own, reporting as b.
    let rogue = image_root();
    Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", root("b").display()))
        .arg(rogue.path())
        .status()
        .unwrap();
    std::fs::remove_file(rogue.path().join("etc/bell/identity.key")).unwrap();
    std::fs::remove_file(rogue.path().join("sick")).unwrap();
    identity(rogue.path(), "b", true);
    assert_eq!(check("b", rogue.path()).status.code(), Some(0));
    forged(&status(), "signed by another key");
    // And never up to date in the text form either.
    let text_status = common::bellc_in(fx.path(), &["status", "out1", "--store", &url]);
    assert!(
        text_status
            .stdout
            .lines()
            .any(|l| l.starts_with("b ") && l.contains("forged")),
        "{}",
        text_status.stdout
    );

    // 5. A rollout whose only healthy-looking report for b is forged: a and c take release 2
    // as their timers would, the rogue files b's new bundle as b's. The wave waits for b and
    // halts at its time.
    std::fs::remove_file(root("b").join("sick")).unwrap();
    let controller = std::thread::scope(|scope| {
        let rollout = scope.spawn(|| {
            Command::new(env!("CARGO_BIN_EXE_bellc"))
                .args(["rollout", "out2", "--store", &url, "--sign-key", "ci.key"])
                .args(["--json", "--wave-timeout", "8s"])
                .env("BELLC_STATE_DIR", &state)
                .current_dir(fx.path())
                .output()
                .unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let wave = release_of(&fx.path().join("out2")).version;
        while get("/bell/f/current_version").trim() != wave {
            assert!(Instant::now() < deadline, "the wave was never published");
            std::thread::sleep(Duration::from_millis(100));
        }
        for host in ["a", "c"] {
            assert_eq!(apply("out2", host, root(host)).status.code(), Some(0));
        }
        assert_eq!(apply("out2", "b", rogue.path()).status.code(), Some(0));
        rollout.join().unwrap()
    });
    let stdout = String::from_utf8_lossy(&controller.stdout);
    let stderr = String::from_utf8_lossy(&controller.stderr);
    assert_eq!(controller.status.code(), Some(1), "{stdout}\n{stderr}");
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let converged: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "host-converged")
        .map(|e| e["host"].as_str().unwrap())
        .collect();
    assert_eq!(converged, ["a", "c"], "{stdout}");
    let halted = events
        .iter()
        .find(|e| e["event"] == "halted")
        .expect(&stdout);
    let hosts = halted["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{halted}");
    assert_eq!(hosts[0]["host"], "b", "{halted}");
    assert_eq!(hosts[0]["state"], "forged", "{halted}");

    // 6. The semaphore: b itself pulls the wave's release, turns out unhealthy and keeps its
    // slot under a record it signed. Beside it, names put there with etcdctl: a with b's
    // record copied, c without any, and an airlock node.
    std::fs::write(root("b").join("sick"), "").unwrap();
    let trust = fx.path().join("ci.pub");
    let out2 = fx.path().join("out2");
    let pulled = run_bin(
        &bin,
        &[
            "pull",
            "--source",
            out2.to_str().unwrap(),
            "--root",
            root("b").to_str().unwrap(),
            "--host",
            "b",
            "--store",
            &url,
            "--trust",
            trust.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(pulled.status.code(), Some(4), "{}", text(&pulled));
    let groups = "/bell/f/groups/default/v1";
    let semaphore: serde_json::Value =
        serde_json::from_str(&get(&format!("{groups}/semaphore"))).unwrap();
    assert_eq!(semaphore["holders"], serde_json::json!(["b"]));
    let total = semaphore["total_slots"].as_u64().unwrap();
    put(
        &format!("{groups}/semaphore"),
        &serde_json::json!({"total_slots": total, "holders": ["a", "b", "c", "node-7"]})
            .to_string(),
    );
    put(
        &format!("{groups}/holders/a"),
        &get(&format!("{groups}/holders/b")),
    );
    let lock = common::bellc_in(
        fx.path(),
        &[
            "lock", "status", "out1", "--store", &url, "--fleet", "f", "--json",
        ],
    );
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    let lock: serde_json::Value = serde_json::from_str(&lock.stdout).unwrap();
    let standing: Vec<(String, String, String)> = lock["groups"][0]["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                h["standing"].as_str().unwrap().to_string(),
                h["why"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(standing[0].1, "claiming", "{standing:?}");
    // b's record under a's name: signed, but by b's key, not a's.
    assert!(
        standing[0].2.contains("signed by another key"),
        "{standing:?}"
    );
    assert_eq!(standing[1], ("b".into(), "proven".into(), String::new()));
    assert_eq!(standing[2].1, "claiming", "{standing:?}");
    assert!(standing[2].2.contains("no holder record"), "{standing:?}");
    assert_eq!(
        standing[3],
        ("node-7".into(), "foreign".into(), String::new())
    );
    let text_lock = common::bellc_in(
        fx.path(),
        &["lock", "status", "out1", "--store", &url, "--fleet", "f"],
    );
    assert!(
        text_lock.stdout.contains(" [proven]"),
        "{}",
        text_lock.stdout
    );

    // A bad key spoils only itself. A host writes garbage into a group's semaphore (its own
    // group's, say), and etcd's root a key that is not UTF-8 under the fleet's reports: the
    // lock view shows that group unreadable and every other as it was; status reads every
    // host's row and says nothing worse of them.
    put("/bell/f/groups/rack-x/v1/semaphore", "garbage\u{1b}[2J");
    common::fleet::etcdctl_put_bytes(&etcd.endpoint, b"/bell/f/running/\xff\xfe", "{}");
    let lock = common::bellc_in(
        fx.path(),
        &[
            "lock", "status", "out1", "--store", &url, "--fleet", "f", "--json",
        ],
    );
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    let lock: serde_json::Value = serde_json::from_str(&lock.stdout).unwrap();
    let groups = lock["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{lock:#}");
    assert_eq!(groups[0]["group"], "default", "{lock:#}");
    assert_eq!(
        groups[0]["holders"].as_array().unwrap().len(),
        4,
        "{lock:#}"
    );
    assert_eq!(groups[1]["group"], "rack-x", "{lock:#}");
    assert!(
        groups[1]["unreadable"]
            .as_str()
            .unwrap()
            .contains("is not a semaphore"),
        "{lock:#}"
    );
    let text_lock = common::bellc_in(
        fx.path(),
        &["lock", "status", "out1", "--store", &url, "--fleet", "f"],
    );
    assert_eq!(text_lock.code, 0, "{}", text_lock.stderr);
    assert!(
        text_lock.stdout.contains("group rack-x: unreadable: ")
            && text_lock.stdout.contains(" [proven]")
            && !text_lock.stdout.contains('\u{1b}'),
        "{}",
        text_lock.stdout
    );
    let after = status();
    for host in HOSTS {
        assert_ne!(row(&after, host)["state"], "unreadable", "{after:#}");
    }
}

//! Holding a host (issue 55, first part): a real etcd, nginx serving the build output the
//! controller rolls out, and four image-root hosts pulling every half second. Release 1 rolls
//! out to all; h2 is held (`bellc hold`, with who and why), and release 2's rollout completes
//! without it, names it, and leaves it on release 1 while `status` flags it `held`; after
//! `unhold` the same rollout, paused first, gives no wave (nor does the controller that takes
//! over from one killed while paused) until `--continue`, and then moves it. Then a hold forged with `etcdctl` on h1 and
//! release 3 published straight into the store: h1 applies nothing new and says why, the others
//! move — a forged hold delays a host and does nothing else. The etcd is a three-member
//! cluster: while the rollout is paused, `bellc serve`'s `/metrics` must count what
//! `status --json` counts, and after one member is killed the page, `/api/v1/store` and
//! `/metrics` must say which; each time the README's alert rules are evaluated by promtool over
//! what was served, and exactly the expected ones fire. Last, a hold placed while a fourth
//! rollout is paused: the controller leaves that host out when it gives the wave.

use crate::common::alerting::Rules;
use crate::common::fleet::{bell_run, etcdctl, EtcdCluster, Nginx};
use crate::common::pulling::{
    build, copy_over, image_root, keep_pulling, motd, TwoReleases, HOSTS,
};
use crate::common::serving::Server;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `/metrics` once it holds `line` (the server refreshes every second).
fn wait_for_metrics(server: &Server, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, metrics) = server.get("/metrics");
        assert_eq!(code, 200, "{metrics}");
        if metrics.lines().any(|l| l == line) {
            return metrics;
        }
        assert!(
            Instant::now() < deadline,
            "/metrics never said {line}:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value of the sample `series` (name and labels as served).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().unwrap())
    })
}

#[test]
fn a_held_host_stays_through_a_rollout_and_moves_after_unhold() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let Some(mut etcd) = EtcdCluster::start() else {
        return;
    };
    let rules = Rules::from_readme();
    let Some(nginx) = Nginx::serve(&setup.served) else {
        return;
    };
    let url = etcd.url.clone();
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let motds = || -> Vec<String> {
        roots
            .iter()
            .map(|r| motd(r.path()).trim().to_string())
            .collect()
    };
    let controller = |more: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args([
                "rollout",
                "served",
                "--store",
                &url,
                "--sign-key",
                "ci.key",
                "--json",
                "--wave-timeout",
                "60s",
            ])
            .args(more)
            .current_dir(fx.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A rollout run to its end: its `done` event.
    let rollout = || {
        let out = controller(&[]).wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(json)
            .find(|e| e["event"] == "done")
            .expect("a done event")
    };
    let kill = |mut child: std::process::Child| {
        child.kill().unwrap();
        child.wait().unwrap();
    };
    let status = || {
        let run = fx.bellc(&["status", "served", "--store", &url, "--json"]);
        let status = json(&run.stdout);
        let rows = status["hosts"].as_array().unwrap().clone();
        move |host: &str| {
            rows.iter()
                .find(|r| r["host"] == host)
                .unwrap_or_else(|| panic!("no row {host}"))
                .clone()
        }
    };
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let timer = (
            bin.as_path(),
            nginx.url.as_str(),
            url.as_str(),
            setup.trust.as_str(),
        );
        keep_pulling(
            scope,
            timer,
            HOSTS.iter().copied().zip(roots.iter().map(|r| r.path())),
            &stop,
        );
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rollout();
            assert!(motds().iter().all(|m| m == "release 1"), "{:?}", motds());

            let run = fx.bellc(&[
                "hold",
                "h2",
                "--store",
                &url,
                "--fleet",
                "f",
                "--reason",
                "disk swap",
                "--by",
                "alice",
            ]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert!(
                run.stdout.starts_with("h2: held by alice since ")
                    && run.stdout.contains(": disk swap"),
                "{}",
                run.stdout
            );
            let row = status()("h2");
            assert!(
                row["flags"].as_array().unwrap().contains(&"held".into()),
                "{row:#}"
            );
            assert_eq!(row["held"]["by"], "alice");
            let run = fx.bellc(&["lock", "status", "--store", &url, "--fleet", "f"]);
            assert!(
                run.stdout.starts_with("held: h2, held by alice since "),
                "{}",
                run.stdout
            );
            let run = fx.bellc(&["lock", "status", "--store", &url, "--fleet", "f", "--json"]);
            assert_eq!(json(&run.stdout)["held"]["h2"]["reason"], "disk swap");

            // Release 2 completes without h2 and names it; h2 stays on release 1.
            copy_over(&fx.path().join("out2"), &setup.served);
            let done = rollout();
            assert_eq!(done["held"], serde_json::json!(["h2"]), "{done:#}");
            assert_eq!(done["hosts"], 3, "{done:#}");
            assert_eq!(
                motds(),
                ["release 2", "release 1", "release 2", "release 2"]
            );
            // Against the build's release it is held (what the hold asked for, not trouble),
            // and says by whom and why.
            let row = status()("h2");
            assert_eq!(row["state"], "held", "{row:#}");
            assert!(
                row["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("held by alice since "),
                "{row:#}"
            );

            // The store names the build's release but for h2: said as that, not warned of;
            // a held host is no trouble (exit 0).
            let run = fx.bellc(&["status", "served", "--store", &url]);
            assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
            assert!(
                run.stderr
                    .contains("the same but for the held host(s) h2 (each kept on its bundle"),
                "{}",
                run.stderr
            );
            assert!(!run.stderr.contains("warning"), "{}", run.stderr);
            assert!(run.stdout.contains(", 1 held, "), "{}", run.stdout);
            // Without OUT, from the mirror: the release the store names is the rollout's last,
            // served signed as releases/VERSION.json beside the build's own, and on it h2 is
            // on the bundle it is given.
            let served = setup.served.to_str().unwrap();
            let run = fx.bellc(&[
                "status", "--store", &url, "--fleet", "f", "--source", served, "--trust", "ci.pub",
            ]);
            assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
            assert!(run.stdout.contains(", 4 up-to-date, "), "{}", run.stdout);
            {
                let server = Server::start(fx, &["served", "--store", &url]);
                let (code, page) = server.get("/");
                assert_eq!(code, 200, "{page}");
                assert!(
                    page.contains("(this release but for the held h2, each kept on its bundle)"),
                    "{page}"
                );
            }

            // Unheld, the same rollout run again moves it.
            let run = fx.bellc(&["unhold", "h2", "--store", &url, "--fleet", "f"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert_eq!(run.stdout, "h2: no longer held\n");
            // Paused first: the controller gives no wave, and a controller killed while it
            // waits leaves the rollout paused for the next one.
            let run = fx.bellc(&[
                "rollout",
                "--pause",
                "--store",
                &url,
                "--fleet",
                "f",
                "--by",
                "bob",
                "--reason",
                "change freeze",
            ]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let phase = || {
                let run = fx.bellc(&["rollout", "--status", "--store", &url, "--fleet", "f"]);
                run.stdout
            };
            let first = controller(&[]);
            wait_for("the rollout to stand paused", &|| {
                phase().contains("rollout of release") && phase().contains(" paused\n")
            });
            assert!(phase().contains("paused by bob since "), "{}", phase());
            std::thread::sleep(Duration::from_millis(1500));
            assert_eq!(motds()[1], "release 1");
            kill(first);
            // The next controller takes over once the dead one's lease lapses, and waits too.
            let second = loop {
                let mut child = controller(&["--resume"]);
                std::thread::sleep(Duration::from_millis(1500));
                match child.try_wait().unwrap() {
                    None => break child,
                    Some(_) => {
                        let mut err = String::new();
                        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err)
                            .unwrap();
                        assert!(err.contains("running already"), "{err}");
                    }
                }
            };
            std::thread::sleep(Duration::from_millis(1500));
            assert!(phase().contains("paused by bob"), "{}", phase());
            assert_eq!(motds()[1], "release 1");
            // What Prometheus would scrape now: the counts `status` gives, the rollout paused,
            // and of the README's alert rules only the paused rollout's fires.
            {
                let server = Server::start(fx, &["served", "--store", &url]);
                let metrics = wait_for_metrics(&server, "bell_rollout_phase{phase=\"paused\"} 1");
                let status = json(
                    &fx.bellc(&["status", "served", "--store", &url, "--json"])
                        .stdout,
                );
                for (state, count) in status["counts"].as_object().unwrap() {
                    assert_eq!(
                        sample(&metrics, &format!("bell_hosts{{state=\"{state}\"}}")),
                        count.as_f64(),
                        "{metrics}"
                    );
                }
                let rows = status["hosts"].as_array().unwrap();
                for flag in ["held", "pending", "stale", "failed", "waiting"] {
                    let flagged = rows
                        .iter()
                        .filter(|r| r["flags"].as_array().unwrap().contains(&flag.into()))
                        .count();
                    assert_eq!(
                        sample(&metrics, &format!("bell_hosts_flagged{{flag=\"{flag}\"}}")),
                        Some(flagged as f64),
                        "{metrics}"
                    );
                }
                assert_eq!(sample(&metrics, "bell_hosts{state=\"pending\"}"), Some(1.0));
                assert_eq!(sample(&metrics, "bell_rollout_waves"), Some(1.0));
                assert_eq!(sample(&metrics, "bell_rollout_waves_given"), Some(0.0));
                assert_eq!(sample(&metrics, "bell_rollout_wave"), Some(0.0));
                assert_eq!(sample(&metrics, "bell_store_reachable"), Some(1.0));
                for endpoint in &etcd.endpoints {
                    let up = format!("bell_store_member_up{{endpoint=\"{endpoint}\"}}");
                    assert_eq!(sample(&metrics, &up), Some(1.0), "{metrics}");
                }
                if let Some(rules) = &rules {
                    rules.assert_firing(&metrics, &[("BellRolloutPaused", &[("phase", "paused")])]);
                }
                // As a browser shows it: minijinja escapes `/` too.
                let page = server.get("/").1.replace("&#x2f;", "/");
                let command = format!("bellc rollout --continue --store {url} --fleet f");
                assert!(page.contains(&command), "{page}");
            }
            let run = fx.bellc(&["rollout", "--continue", "--store", &url, "--fleet", "f"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert_eq!(run.stdout, "fleet f: rollout continues\n");
            let out = second.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(json)
                .collect();
            let kinds: Vec<&str> = events
                .iter()
                .map(|e| e["event"].as_str().unwrap())
                .collect();
            assert_eq!(
                kinds,
                [
                    "paused",
                    "continued",
                    "wave-started",
                    "host-converged",
                    "done"
                ],
                "{events:#?}"
            );
            assert_eq!(events[0]["by"], "bob");
            let done = &events[4];
            assert_eq!(done["hosts"], 1, "{done:#}");
            assert!(done.get("held").is_none(), "{done:#}");
            assert!(motds().iter().all(|m| m == "release 2"), "{:?}", motds());
            // Every event says when.
            assert!(
                events.iter().all(|e| e["at"].as_u64().is_some()),
                "{events:#?}"
            );

            // The history: three rollouts, newest first, each wave with its hosts and times.
            let run = fx.bellc(&[
                "rollout",
                "--history",
                "--store",
                &url,
                "--fleet",
                "f",
                "--json",
            ]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let history = json(&run.stdout);
            let history = history.as_array().unwrap();
            assert_eq!(history.len(), 3, "{history:#?}");
            assert!(
                history.iter().all(|e| e["outcome"] == "done"),
                "{history:#?}"
            );
            assert_eq!(history[1]["held"], serde_json::json!(["h2"]));
            assert_eq!(history[0]["waves"][0]["hosts"], serde_json::json!(["h2"]));
            assert_eq!(history[0]["target"], history[1]["target"]);
            for entry in history {
                for wave in entry["waves"].as_array().unwrap() {
                    let (a, b) = (wave["started_at"].as_u64(), wave["converged_at"].as_u64());
                    assert!(a.is_some() && b >= a, "{entry:#}");
                }
            }
            assert!(history[2]["from"].is_null());
            let run = fx.bellc(&["rollout", "--history", "--store", &url, "--fleet", "f"]);
            assert!(
                run.stdout.contains("    held, left out: h2\n"),
                "{}",
                run.stdout
            );

            // A hold forged in the store on h1, and release 3 published without a controller:
            // h1 applies nothing new and says whose hold keeps it; the others move.
            etcdctl(
                &etcd.endpoints[0],
                &[
                    "put",
                    "/bell/f/holds/h1",
                    r#"{"by":"mallory\nforged line","since":1}"#,
                ],
            );
            build(fx, "release 3", "out3", "ci.key", &[]);
            copy_over(&fx.path().join("out3"), &setup.served);
            let run = fx.bellc(&["publish", "served", "--store", &url]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            wait_for("release 3 on h2..h4", &|| {
                motds()[1..].iter().all(|m| m == "release 3")
            });
            std::thread::sleep(Duration::from_millis(1500));
            assert_eq!(motds()[0], "release 2");
            let row = status()("h1");
            assert_eq!(row["state"], "held", "{row:#}");
            let detail = row["detail"].as_str().unwrap();
            assert!(
                detail.contains("held by mallory\\nforged line since"),
                "{detail}"
            );
            assert!(!detail.contains('\n'), "{detail}");

            // The page and its API: the history, the rollout, the locks, the held host.
            let server = Server::start(fx, &["served", "--store", &url]);
            let (code, api) = server.get("/api/v1/history");
            assert_eq!(code, 200, "{api}");
            assert_eq!(json(&api).as_array().unwrap().len(), 3, "{api}");
            let (code, api) = server.get("/api/v1/rollout");
            assert_eq!(code, 200, "{api}");
            assert_eq!(json(&api)["progress"]["phase"], "done", "{api}");
            let (code, api) = server.get("/api/v1/locks");
            assert_eq!(code, 200, "{api}");
            assert!(json(&api).is_array(), "{api}");
            let (_, page) = server.get("/");
            assert!(
                page.contains("Rollout history") && page.contains("held, left out: h2"),
                "{page}"
            );
            let (_, api) = server.get("/api/v1/status");
            let h1 = json(&api)["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["host"] == "h1")
                .cloned()
                .unwrap();
            assert!(
                h1["flags"].as_array().unwrap().contains(&"held".into()),
                "{h1:#}"
            );

            let page = server.get("/hosts/h1").1.replace("&#x2f;", "/");
            let command = format!("bellc unhold h1 --store {url} --fleet f");
            assert!(page.contains(&command), "{page}");

            // An etcd member killed: the fleet goes on with two, and the page, its API and
            // /metrics say which one is down; of the alert rules only the member's fires.
            let dead = etcd.endpoints[2].clone();
            etcd.kill(2);
            wait_for("the page to see the member down", &|| {
                let members = server.store()["members"].clone();
                members.as_array().is_some_and(|m| {
                    m.len() == 3 && m.iter().filter(|m| m["up"] == false).count() == 1
                })
            });
            let store = server.store();
            let down = store["members"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["up"] == false)
                .unwrap();
            assert_eq!(down["endpoint"], dead.as_str(), "{store:#}");
            assert!(!down["error"].as_str().unwrap().is_empty(), "{store:#}");
            assert_eq!(store["reachable"], true, "{store:#}");
            let (_, page) = server.get("/");
            assert!(page.contains("2 of 3 members up"), "{page}");
            let metrics = wait_for_metrics(
                &server,
                &format!("bell_store_member_up{{endpoint=\"{dead}\"}} 0"),
            );
            assert_eq!(sample(&metrics, "bell_store_reachable"), Some(1.0));
            assert_eq!(
                sample(&metrics, "bell_rollout_phase{phase=\"done\"}"),
                Some(1.0)
            );
            if let Some(rules) = &rules {
                rules.assert_firing(&metrics, &[("BellStoreMemberDown", &[("endpoint", &dead)])]);
            }

            // A hold placed while a rollout is paused (on two members now): the host is left
            // out when its wave is given, and the rollout ends naming it with h1.
            build(fx, "release 4", "out4", "ci.key", &[]);
            copy_over(&fx.path().join("out4"), &setup.served);
            let run = fx.bellc(&["rollout", "--pause", "--store", &url, "--fleet", "f"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let third = controller(&[]);
            wait_for("the third rollout to stand paused", &|| {
                phase().contains(" paused\n")
            });
            let run = fx.bellc(&["hold", "h3", "--store", &url, "--fleet", "f"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let run = fx.bellc(&["rollout", "--continue", "--store", &url, "--fleet", "f"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let out = third.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(json)
                .collect();
            let left_out = events
                .iter()
                .find(|e| e["event"] == "left-out")
                .unwrap_or_else(|| panic!("{events:#?}"));
            assert_eq!(left_out["hosts"], serde_json::json!(["h3"]), "{events:#?}");
            let done = events.iter().find(|e| e["event"] == "done").unwrap();
            assert_eq!(done["held"], serde_json::json!(["h1", "h3"]), "{done:#}");
            assert_eq!(done["hosts"], 2, "{done:#}");
            assert_eq!(
                motds(),
                ["release 2", "release 4", "release 3", "release 4"]
            );
        }));
        stop.store(true, Ordering::Relaxed);
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    });
}

//! Every side door of the trust model tried at once, from the attacker's side, on a fleet as
//! the README deploys one: a real etcd serving TLS with etcd's users on (each host's, the
//! controller's and serve's made by `bellc store roles --apply`), a mirror served by nginx,
//! and three image-root hosts with identities of their own and a sealed secret each.
//!
//! - No secret, nor its sha256, is in the served tree, in `bellc diff`, in the page or its
//!   API, in status, or in the build's warnings (one of which points at a password's user).
//! - The mirror's owner edits `release.json` (hides an unhealthy host): `status URL --trust`
//!   and `serve --trust` refuse it.
//! - etcd's root puts an unsigned "success" report over the unhealthy host's: never
//!   `up-to-date`, read with OUT and without.
//! - The compromised host signs a report of its own whose error paints a fake row: shown
//!   escaped, on its own row. It signs one numbered far in the future: `forged`, and not
//!   remembered, so its honest reports after it read as they are.
//! - etcd's root writes a key that is not UTF-8 and the compromised host garbage into its own
//!   group's semaphore: one row each is spoilt; status, the lock view and a rollout of the
//!   rest of the fleet go on.
//! - A host taken out of the release loses its etcd user and role to `store roles --apply`.
//!
//! Two doors need a store that misbehaves as etcd cannot be made to, and are tried against a
//! fake one: a trickling or huge answer (`runner/tests/store_answers_are_bounded.rs`) and a
//! closed pipe (`runner/tests/closed_pipe.rs`, `compiler/tests/exit_codes.rs`).

use crate::common::fleet::{bell_run, run_bin, text, Etcd, Nginx, Pki};
use crate::common::pulling::{copy_over, image_root, motd, release_of};
use crate::common::sealing::{assert_not_in, assert_nowhere, needles};
use crate::common::serving::Server;
use crate::common::{row, Fixture, Run};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

const HOSTS: [&str; 3] = ["a", "b", "c"];
const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const TOKEN: &str = "api-token-SUPERSECRET";
const ROOT_PASSWORD: &str = "r00t-Secret";

/// Release `version` of the fleet: `b` alone in rack r2. The `ops` user has a password and no
/// sudo, so the build warns at its `user` line, an excerpt that spans the password.
fn spec(version: u8, hosts: &[(&str, &str)]) -> String {
    let mut spec = String::from(
        "fleet \"f\" target=\"debian-12\" identities=\"required\"\n\
         rollout batch-by=\"rack\" max-unavailable=1\n",
    );
    for (host, identity) in hosts {
        let rack = if *host == "b" { "r2" } else { "r1" };
        spec.push_str(&format!(
            "host \"{host}\" rack=\"{rack}\" identity=\"{identity}\"\n"
        ));
    }
    spec.push_str(&format!(
        "user \"ops\" {{\n    password \"{HASH}\"\n}}\n\
         file \"/etc/app/token\" mode=\"0600\" {{\n    content \"{TOKEN}-{version}\\n\"\n}}\n\
         file \"/etc/motd\" {{\n    content \"release {version}\\n\"\n}}\n\
         health \"up\" retries=1 offline=\"root\" {{\n    run \"test ! -e \\\"$BELL_ROOT/sick\\\"\"\n}}\n"
    ));
    spec
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `etcdctl ARGS` against the TLS member, arguments as bytes (a key that is not UTF-8).
fn etcdctl(pki: &Pki, endpoint: &str, args: &[&[u8]]) -> Output {
    Command::new("etcdctl")
        .arg(format!("--endpoints=https://{endpoint}"))
        .arg(format!("--cacert={}", pki.path("ca.pem").display()))
        .args(args.iter().map(|a| OsStr::from_bytes(a)))
        .env("ETCDCTL_API", "3")
        .output()
        .expect("etcdctl")
}

/// `run`, its output kept in `shown`.
fn keep(shown: &mut String, run: Run) -> Run {
    shown.push_str(&run.stdout);
    shown.push_str(&run.stderr);
    run
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn every_side_door_is_shut_on_a_fleet_with_tls_users_and_sealed_secrets() {
    let bin = bell_run();
    let fx = Fixture::new().file("seal.key", "0123456789abcdef0123456789abcdef-example-only");
    let Some(pki) = Pki::new() else {
        return;
    };
    let Some(etcd) = Etcd::start_tls(&pki) else {
        return;
    };
    let served = fx.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let Some(nginx) = Nginx::serve(&served) else {
        return;
    };
    let mirror = nginx.url.trim_end_matches('/').to_string();
    let url = etcd.url.clone();
    let ca = pki.path("ca.pem").display().to_string();
    let trust = fx.path().join("ci.pub").display().to_string();
    // Everything any command showed, searched for secrets at the end.
    let mut shown = String::new();

    // The hosts' identities, made on them.
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let root = |host: &str| roots[HOSTS.iter().position(|h| *h == host).unwrap()].path();
    let identities: Vec<String> = HOSTS
        .iter()
        .map(|host| {
            let dir = root(host).to_str().unwrap();
            let out = run_bin(
                &bin,
                &["identity", "--root", dir, "--host", host, "--init"],
                &[],
            );
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    let fleet: Vec<(&str, &str)> = HOSTS
        .iter()
        .copied()
        .zip(identities.iter().map(String::as_str))
        .collect();

    // The builds. A warning points at `user "ops" {`: its excerpt masks the password.
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let build = |version: u8, hosts: &[(&str, &str)]| -> Run {
        std::fs::write(fx.path().join("bell.kdl"), spec(version, hosts)).unwrap();
        let out = format!("out{version}");
        let run = fx.bellc(&[
            "build",
            "bell.kdl",
            "-o",
            &out,
            "--sign-key",
            "ci.key",
            "--seal-key",
            "seal.key",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    };
    let built = keep(&mut shown, build(1, &fleet));
    assert!(
        built.stderr.contains("default_account_kept") && built.stderr.contains("****"),
        "{}",
        built.stderr
    );
    keep(&mut shown, build(2, &fleet));
    let secrets: Vec<String> = [1, 2]
        .iter()
        .flat_map(|v| [format!("{TOKEN}-{v}"), format!("{TOKEN}-{v}\n")])
        .chain([HASH.to_string()])
        .collect();
    let needles = needles(&strs(&secrets));
    for out in ["out1", "out2"] {
        assert_nowhere(&fx.path().join(out), &needles);
    }
    // What a release changes says a secret changed, and nothing of it.
    let diff = keep(&mut shown, fx.bellc(&["diff", "out1", "out2"]));
    assert_eq!(diff.code, 1, "{}", diff.stderr);
    assert!(
        diff.stdout
            .contains("file /etc/app/token (secret content changed: keyed "),
        "{}",
        diff.stdout
    );
    assert!(diff.stdout.contains("/etc/app/token"), "{}", diff.stdout);

    // etcd's users: root, then the fleet's from the release.
    for args in [
        &["user", "add", &format!("root:{ROOT_PASSWORD}")][..],
        &["auth", "enable"],
    ] {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let out = etcdctl(&pki, &etcd.endpoint, &args);
        assert!(out.status.success(), "{}", text(&out));
    }
    let root_password = fx.path().join("root.password");
    std::fs::write(&root_password, format!("{ROOT_PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&root_password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let passwords = fx.path().join("passwords");
    let roles = |out: &str| {
        fx.bellc(&[
            "store",
            "roles",
            out,
            "--apply",
            "--store",
            &url,
            "--store-ca",
            &ca,
            "--store-user",
            "root",
            "--store-password-file",
            root_password.to_str().unwrap(),
            "--passwords",
            passwords.to_str().unwrap(),
        ])
    };
    let made = roles("out1");
    assert_eq!(made.code, 0, "{}", made.stderr);
    let creds = |user: &str, file: &str| -> Vec<String> {
        [
            "--store",
            &url,
            "--store-ca",
            &ca,
            "--store-user",
            user,
            "--store-password-file",
            passwords.join(file).to_str().unwrap(),
        ]
        .map(str::to_string)
        .to_vec()
    };
    let password = |name: &str| {
        std::fs::read_to_string(passwords.join(name))
            .unwrap()
            .trim()
            .to_string()
    };
    let as_root = format!("root:{ROOT_PASSWORD}");
    let root_ctl = |args: &[&[u8]]| -> Output {
        let mut all: Vec<&[u8]> = vec![b"--user", as_root.as_bytes()];
        all.extend_from_slice(args);
        etcdctl(&pki, &etcd.endpoint, &all)
    };
    let get = |key: &str| -> String {
        let out = root_ctl(&[b"get", key.as_bytes(), b"--print-value-only"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    let put_as = |user: &[u8], key: &[u8], value: &str| {
        let out = etcdctl(
            &pki,
            &etcd.endpoint,
            &[b"--user", user, b"put", key, value.as_bytes()],
        );
        assert!(out.status.success(), "{}", text(&out));
    };
    let b_user = format!("host/f/b:{}", password("b"));

    // The controller publishes release 1; the mirror serves it; every host pulls it as
    // itself, over TLS, and reports signed.
    let mut publish = vec!["publish".to_string(), "out1".into()];
    publish.extend(creds("controller/f", "controller"));
    let run = fx.bellc(&strs(&publish));
    assert_eq!(run.code, 0, "{}", run.stderr);
    copy_over(&fx.path().join("out1"), &served);
    let host_args = |host: &str| -> Vec<String> {
        let mut args: Vec<String> = ["--trust", &trust, "--report", &url, "--fleet", "f"]
            .map(str::to_string)
            .to_vec();
        args.extend(creds(&format!("host/f/{host}"), host));
        args
    };
    let pull = |host: &str, source: &str| -> Output {
        let mut args = vec![
            "pull".to_string(),
            "--source".into(),
            source.into(),
            "--root".into(),
            root(host).display().to_string(),
            "--host".into(),
            host.into(),
        ];
        args.extend(host_args(host));
        run_bin(&bin, &strs(&args), &[])
    };
    for host in HOSTS {
        let out = pull(host, &mirror);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        assert_eq!(motd(root(host)), "release 1\n", "{host}");
        let token = root(host).join("etc/app/token");
        assert_eq!(
            std::fs::read_to_string(&token).unwrap(),
            format!("{TOKEN}-1\n")
        );
        shown.push_str(&text(&out));
    }
    // The tree the mirror serves, fetched as anyone would: no secret and no hash of one.
    assert_nowhere(&served, &needles);
    let release = release_of(&served);
    let script = format!(
        "{mirror}/bundles/{}/scripts/file/%252Fetc%252Fapp%252Ftoken.apply",
        release.hosts["a"].bundle
    );
    let fetched = Command::new("curl")
        .args(["-sf", &script])
        .output()
        .unwrap();
    assert!(fetched.status.success(), "{script}: {}", text(&fetched));
    assert_not_in(&script, &String::from_utf8_lossy(&fetched.stdout), &needles);

    // b turns unhealthy and says so.
    std::fs::write(root("b").join("sick"), "").unwrap();
    let mut check = vec![
        "check".to_string(),
        "--root".into(),
        root("b").display().to_string(),
        "--host".into(),
        "b".into(),
        "--report".into(),
        url.clone(),
    ];
    check.extend(creds("host/f/b", "b").into_iter().skip(2));
    let out = run_bin(&bin, &strs(&check), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));

    let serve_creds = creds("serve/f", "serve");
    let status = |out: &str, extra: &[&str]| -> Run {
        let mut args = vec!["status".to_string(), out.into()];
        args.extend(serve_creds.iter().cloned());
        args.extend(extra.iter().map(|a| a.to_string()));
        fx.bellc(&strs(&args))
    };
    let json = |run: &Run| -> serde_json::Value {
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stderr))
    };
    let verified = |extra: &[&str]| -> Run {
        let mut args = vec!["--trust", trust.as_str()];
        args.extend_from_slice(extra);
        status(&mirror, &args)
    };
    let run = keep(&mut shown, verified(&["--json"]));
    assert_eq!(run.code, 3, "{}", run.stderr);
    let value = json(&run);
    assert_eq!(row(&value, "a")["state"], "up-to-date", "{value:#}");
    assert_eq!(row(&value, "b")["state"], "unhealthy", "{value:#}");

    // The page and its API, read without a login: no secret there either.
    {
        let mut args = vec![mirror.clone(), "--trust".into(), trust.clone()];
        args.extend(serve_creds.iter().cloned());
        let server = Server::start(&fx, &strs(&args));
        for path in ["/hosts/a", "/api/v1/hosts/a", "/api/v1/status"] {
            let (code, body) = server.get(path);
            assert_eq!(code, 200, "{path}: {body}");
            assert_not_in(path, &body, &needles);
        }
    }

    // The mirror's owner hides the unhealthy host from release.json: refused by status and
    // serve, naming it.
    let file = served.join("release.json");
    let signed = std::fs::read_to_string(&file).unwrap();
    let mut edited: serde_json::Value = serde_json::from_str(&signed).unwrap();
    edited["hosts"].as_object_mut().unwrap().remove("b");
    std::fs::write(&file, serde_json::to_string_pretty(&edited).unwrap()).unwrap();
    let run = keep(&mut shown, verified(&[]));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("{mirror}/release.json: refused"))
            && run.stderr.contains("changed after signing"),
        "{}",
        run.stderr
    );
    let mut serve = vec![
        "serve".to_string(),
        mirror.clone(),
        "--trust".into(),
        trust.clone(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    serve.extend(serve_creds.iter().cloned());
    let run = keep(&mut shown, fx.bellc(&strs(&serve)));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("changed after signing"),
        "{}",
        run.stderr
    );
    std::fs::write(&file, &signed).unwrap();

    // etcd's root puts an unsigned "success" over each of b's reports and states: never up
    // to date, with the mirror's release verified and with no release at all.
    let running = "/bell/f/running/b";
    let checked = "/bell/f/reports/check/b";
    let honest = [get(running), get(checked)];
    for key in [running, checked] {
        let mut report: serde_json::Value = serde_json::from_str(&get(key)).unwrap();
        let object = report.as_object_mut().unwrap();
        for field in ["signer", "proof", "sequence", "error"] {
            object.remove(field);
        }
        report["result"] = "success".into();
        for state in report["status"].as_object_mut().unwrap().values_mut() {
            *state = "success".into();
        }
        for probe in report["health"].as_array_mut().into_iter().flatten() {
            probe["healthy"] = true.into();
        }
        put_as(as_root.as_bytes(), key.as_bytes(), &report.to_string());
    }
    for category in ["apply", "check", "health"] {
        let key = format!("/bell/f/status/{category}/b");
        let value = get(&key).replace("unhealthy", "success");
        put_as(as_root.as_bytes(), key.as_bytes(), &value);
    }
    let run = keep(&mut shown, verified(&["--json"]));
    assert_eq!(run.code, 3, "{}", run.stderr);
    let b = row(&json(&run), "b");
    assert_ne!(b["state"], "up-to-date", "{b:#}");
    let run = keep(&mut shown, status("--json", &["--fleet", "f"]));
    assert_eq!(run.code, 3, "{}", run.stderr);
    let b = row(&json(&run), "b");
    assert_eq!(b["state"], "unverified", "{b:#}");

    // b is the attacker now: its key, its etcd user. It signs a report whose error would
    // clear the line and print a failed row of `a`.
    let key = std::fs::read_to_string(root("b").join("etc/bell/identity.key")).unwrap();
    let key = bell_store::proof::SigningKey::from_seed(
        bell_seal::openssh::read_ed25519(&key).unwrap().seed,
    );
    let signed_as_b = |raw: &str, sequence: u64, edit: &dyn Fn(&mut bell_store::Report)| {
        let mut report: bell_store::Report = serde_json::from_str(raw).unwrap();
        edit(&mut report);
        bell_store::proof::sign(&mut report, &key, sequence);
        bell_store::proof::to_json(&report)
    };
    let sequence = now();
    for (key, raw) in [running, checked].iter().zip(&honest) {
        let painted = signed_as_b(raw, sequence, &|r| {
            r.result = bell_store::State::Failed;
            r.health.clear();
            for state in r.status.values_mut() {
                *state = bell_store::State::Failed;
            }
            r.error = Some("refused\r\u{1b}[2K\na    failed  -  1s  FAKE\u{202e}\u{9b}".into());
        });
        put_as(b_user.as_bytes(), key.as_bytes(), &painted);
    }
    let run = keep(&mut shown, verified(&["--all"]));
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        !said.contains(['\u{1b}', '\r', '\u{202e}', '\u{9b}']),
        "{said:?}"
    );
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("a ") && l.contains("FAKE")),
        "{said}"
    );
    assert!(
        said.lines()
            .any(|l| l.starts_with("b ") && l.contains("refused\\r\\u{1b}[2K\\na    failed")),
        "{said}"
    );
    assert!(
        said.lines()
            .any(|l| l.starts_with("a ") && l.contains("up-to-date")),
        "{said}"
    );

    // A report numbered in milliseconds, far beyond now: forged, and not remembered.
    let future = signed_as_b(&honest[0], now() * 1000, &|_| {});
    put_as(b_user.as_bytes(), running.as_bytes(), &future);
    let run = keep(&mut shown, verified(&["--json"]));
    let b = row(&json(&run), "b");
    assert_eq!(b["state"], "forged", "{b:#}");
    assert!(
        b["forged"].to_string().contains("beyond the time now"),
        "{b:#}"
    );
    // b, well again, reports honestly (a second on, past the painted report's number).
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::remove_file(root("b").join("sick")).unwrap();
    let out = pull("b", &mirror);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run_bin(&bin, &strs(&check), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let run = keep(&mut shown, verified(&["--json"]));
    let value = json(&run);
    assert_eq!(run.code, 0, "{value:#}");
    assert_eq!(row(&value, "b")["state"], "up-to-date", "{value:#}");

    // etcd's root writes a key that is not UTF-8 among the reports, and b garbage into its
    // own group's semaphore: status reads every host, the lock view every other group.
    let out = root_ctl(&[b"put", b"/bell/f/running/\xff\xfe", b"{}"]);
    assert!(out.status.success(), "{}", text(&out));
    put_as(
        b_user.as_bytes(),
        b"/bell/f/groups/r2/v1/semaphore",
        "garbage\u{1b}[2J",
    );
    let run = keep(&mut shown, verified(&["--json"]));
    let value = json(&run);
    for host in HOSTS {
        assert_eq!(row(&value, host)["state"], "up-to-date", "{value:#}");
    }
    let mut lock = vec![
        "lock".to_string(),
        "status".into(),
        mirror.clone(),
        "--trust".into(),
        trust.clone(),
        "--fleet".into(),
        "f".into(),
    ];
    lock.extend(serve_creds.iter().cloned());
    let run = keep(&mut shown, fx.bellc(&strs(&lock)));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("group r2: unreadable: ")
            && run.stdout.contains("group r1")
            && !run.stdout.contains('\u{1b}'),
        "{}",
        run.stdout
    );
    // An operator holds b, and release 2 rolls out to the rest: the controller neither
    // halts on the key nor on the semaphore.
    let controller = creds("controller/f", "controller");
    let mut hold = vec!["hold".to_string(), "b".into(), "--fleet".into(), "f".into()];
    hold.extend(controller.iter().cloned());
    let run = fx.bellc(&strs(&hold));
    assert_eq!(run.code, 0, "{}", run.stderr);
    // CI builds over what the mirror serves (every kept release and bundle stays servable)
    // and rolls out from there.
    copy_over(&fx.path().join("out2"), &served);
    let rolled = std::thread::scope(|scope| {
        let rollout = scope.spawn(|| {
            let mut args = vec!["rollout".to_string(), served.display().to_string()];
            args.extend(controller.iter().cloned());
            args.extend(
                ["--sign-key", "ci.key", "--json", "--wave-timeout", "30s"].map(String::from),
            );
            fx.bellc(&strs(&args))
        });
        // a and c pull as their timers would, until both have release 2.
        let deadline = Instant::now() + Duration::from_secs(60);
        while ["a", "c"].iter().any(|h| motd(root(h)) != "release 2\n") {
            assert!(Instant::now() < deadline, "release 2 never reached a and c");
            for host in ["a", "c"] {
                let out = pull(host, &mirror);
                assert!(
                    matches!(out.status.code(), Some(0 | 10)),
                    "{host}: {}",
                    text(&out)
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        rollout.join().unwrap()
    });

    assert_eq!(rolled.code, 0, "{}\n{}", rolled.stdout, rolled.stderr);
    let events: Vec<serde_json::Value> = rolled
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let converged: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "host-converged")
        .filter_map(|e| e["host"].as_str())
        .collect();
    assert_eq!(converged, ["a", "c"], "{}", rolled.stdout);
    let done = events.last().unwrap();
    assert_eq!(done["event"], "done", "{}", rolled.stdout);
    assert_eq!(done["held"], serde_json::json!(["b"]), "{}", rolled.stdout);
    assert_eq!(motd(root("b")), "release 1\n");

    // c leaves the fleet: its etcd user and role go with the release that no longer names it.
    let without_c: Vec<(&str, &str)> = fleet.iter().copied().filter(|(h, _)| *h != "c").collect();
    keep(&mut shown, build(3, &without_c));
    let kept = password("c");
    let removed = roles("out3");
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert!(
        removed
            .stdout
            .contains("host/f/c: user and role removed: the release no longer names host `c`"),
        "{}",
        removed.stdout
    );
    for what in [&b"user"[..], b"role"] {
        let out = root_ctl(&[what, b"list"]);
        assert!(out.status.success(), "{}", text(&out));
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(!listed.contains("host/f/c"), "{listed}");
        assert!(listed.contains("host/f/a"), "{listed}");
    }
    assert!(!passwords.join("c").exists());
    // c kept its password: etcd knows it no more.
    std::fs::write(passwords.join("c"), &kept).unwrap();
    std::fs::set_permissions(passwords.join("c"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = pull("c", &mirror);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("user `host/f/c` could not log in"),
        "{}",
        text(&out)
    );

    assert_not_in("what the commands showed", &shown, &needles);
}

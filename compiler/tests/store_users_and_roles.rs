//! The store refuses what a party may not write: a real etcd serving TLS (a certificate
//! `openssl` makes at test time) with etcd's users on, and the users and roles `bellc store
//! roles --apply` made, one per host, the controller's and serve's. Hosts pull, report and
//! take slots as themselves; the controller publishes and rolls a release out; serve reads. Host h1 writing h2's
//! report, the desired map or the rollout's progress is refused by etcd, and so is a pull of
//! h2's bundle with h1's password, with who was refused what; h1's own pull goes on. A wrong
//! password says so. No password is ever printed. A login token that expired is renewed, and
//! when a member dies every party logs in on the next.

use crate::common;
use crate::common::fleet::{bell_run, text, EtcdCluster, Pki};
use crate::common::pulling::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn each_party_writes_only_its_own_keys() {
    let bin = bell_run();
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let Some(pki) = Pki::new() else {
        return;
    };
    let Some(mut etcd) = EtcdCluster::start_tls_for_users(&pki) else {
        return;
    };
    let ca = pki.path("ca.pem").display().to_string();
    // etcdctl speaks to the last member, which stays up.
    let ep = etcd.endpoints[2].clone();
    let url = etcd.url.clone();

    // The admin: etcd's root, then users on.
    let root_password = fx.path().join("root.password");
    std::fs::write(&root_password, "r00t-Secret\n").unwrap();
    std::fs::set_permissions(&root_password, std::fs::Permissions::from_mode(0o600)).unwrap();
    for args in [
        &["user", "add", "root:r00t-Secret"][..],
        &["auth", "enable"],
    ] {
        let out = pki.etcdctl(&ep, args);
        assert!(out.status.success(), "etcdctl {args:?}: {}", text(&out));
    }
    let root_password = root_password.display().to_string();
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
            &root_password,
            "--passwords",
            passwords.to_str().unwrap(),
        ])
    };
    let made = roles("out1");
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert!(
        made.stdout.contains("host/f/h1: role created;"),
        "{}",
        made.stdout
    );
    let password = |name: &str| {
        let path = passwords.join(name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
        std::fs::read_to_string(&path).unwrap().trim().to_string()
    };
    let every: Vec<String> = HOSTS
        .iter()
        .chain(&["controller", "serve"])
        .map(|n| password(n))
        .collect();
    for secret in &every {
        assert!(secret.len() >= 40, "{secret}");
        assert!(!made.stdout.contains(secret) && !made.stderr.contains(secret));
    }
    // Again: nothing to do, and every password stays.
    let again = roles("out1");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("host/f/h1: as planned already"),
        "{}",
        again.stdout
    );
    assert_eq!(password("h1"), every[0]);

    let as_user = |user: &str, file: &str| -> Vec<String> {
        [
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
    // The controller publishes.
    let controller = as_user("controller/f", "controller");
    let mut publish = vec!["publish", "out1", "--store", &url];
    publish.extend(controller.iter().map(String::as_str));
    let run = fx.bellc(&publish);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // Every host pulls, reports and takes its slot as itself.
    let source = setup.served.to_str().unwrap().to_string();
    copy_over(&setup.dir("out2"), &setup.served);
    let roots: Vec<tempfile::TempDir> = HOSTS.iter().map(|_| image_root()).collect();
    let host_args = |host: &str, creds_of: &str| -> Vec<String> {
        let mut args: Vec<String> = [
            "--trust",
            setup.trust.as_str(),
            "--store",
            &url,
            "--report",
            &url,
            "--fleet",
            "f",
        ]
        .map(str::to_string)
        .to_vec();
        args.extend(as_user(&format!("host/f/{creds_of}"), creds_of));
        let _ = host;
        args
    };
    for (host, root) in HOSTS.iter().zip(&roots) {
        let args = host_args(host, host);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = pull(&bin, &source, root.path(), host, &args);
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        assert_eq!(motd(root.path()), "release 1\n", "{host}");
    }

    // serve reads: every host up to date.
    let serve = as_user("serve/f", "serve");
    let mut status = vec!["status", "out1", "--store", &url, "--json"];
    status.extend(serve.iter().map(String::as_str));
    let run = fx.bellc(&status);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["counts"]["up-to-date"], HOSTS.len(), "{report}");
    // ... and may not publish.
    let mut publish = vec!["publish", "out2", "--store", &url];
    publish.extend(serve.iter().map(String::as_str));
    let run = fx.bellc(&publish);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("permission denied"), "{}", run.stderr);
    assert!(run.stderr.contains("user `serve/f`"), "{}", run.stderr);

    // Host h1, with its own password, at what is not its own: etcd says no.
    let h1 = format!("host/f/h1:{}", every[0]);
    for (key, value) in [
        ("/bell/f/running/h2", "{}"),
        ("/bell/f/desired/h1", "another-bundle"),
        ("/bell/f/current_version", "v0"),
        ("/bell/f/rollout/progress", "{}"),
        ("/bell/f/status/apply/h2", "success"),
    ] {
        let out = pki.etcdctl(&ep, &["--user", &h1, "put", key, value]);
        assert!(!out.status.success(), "h1 wrote {key}");
        assert!(
            text(&out).contains("permission denied"),
            "{key}: {}",
            text(&out)
        );
    }
    // Pulling h2's bundle with h1's password: refused, h2's root as it was.
    let args = host_args("h2", "h1");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(
        &bin,
        &source,
        roots[1].path(),
        "h2",
        &args,
        "permission denied: user `host/f/h1` may not read",
    );
    // h1's own pull goes on.
    let args = host_args("h1", "h1");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = pull(&bin, &source, roots[0].path(), "h1", &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // A new machine registers as the shared `enroll` user, which can do nothing else.
    let fresh = image_root();
    let mut register = vec![
        "register".to_string(),
        "--store".into(),
        url.clone(),
        "--fleet".into(),
        "f".into(),
        "--host".into(),
        "new-1".into(),
        "--root".into(),
        fresh.path().display().to_string(),
    ];
    register.extend(as_user("enroll/f", "enroll"));
    let register: Vec<&str> = register.iter().map(String::as_str).collect();
    let out = common::fleet::run_bin(&bin, &register, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let enroll = bell_store::Etcd::open(
        &url,
        &bell_store::Access {
            user: Some("enroll/f".into()),
            password_file: Some(passwords.join("enroll")),
            signer: None,
            ..pki.server_access()
        },
    )
    .unwrap();
    assert!(enroll.get(&bell_store::version_key("f")).is_err());
    assert!(enroll.get(&bell_store::desired_key("f", "h1")).is_err());

    // A login token expires unused (two seconds here) and is renewed.
    let serve_client = bell_store::Etcd::open(
        &url,
        &bell_store::Access {
            user: Some("serve/f".into()),
            password_file: Some(passwords.join("serve")),
            signer: None,
            ..pki.server_access()
        },
    )
    .unwrap();
    let version = bell_store::version_key("f");
    let before = serve_client.requests();
    assert!(serve_client.get(&version).unwrap().is_some());
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(serve_client.get(&version).unwrap().is_some());
    // Log in, read; read refused (the token expired), log in, read.
    assert_eq!(serve_client.requests() - before, 5);

    // The first member dies: each process logs in on the next (tokens are a member's own).
    etcd.kill(0);
    // The controller rolls release 2 out while every host pulls as itself, as its timer would.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let served = setup.served.to_str().unwrap();
    let key = fx.path().join("ci.key").display().to_string();
    let mut rollout = vec![
        "rollout",
        served,
        "--sign-key",
        &key,
        "--wave-timeout",
        "120s",
        "--json",
        "--store",
        &url,
    ];
    rollout.extend(controller.iter().map(String::as_str));
    let run = std::thread::scope(|scope| {
        for (host, root) in HOSTS.iter().zip(&roots) {
            let (bin, source, stop) = (&bin, &source, &stop);
            let args = host_args(host, host);
            scope.spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    pull(bin, source, root.path(), host, &args);
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
            });
        }
        let run = fx.bellc(&rollout);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        run
    });
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for (host, root) in HOSTS.iter().zip(&roots) {
        assert_eq!(motd(root.path()), "release 2\n", "{host}");
    }

    // A host added to the fleet gets its user from the same command; the others keep theirs.
    let mut spec = common::pulling::spec("release 3");
    spec.push_str("host \"h5\"\n");
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out3", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let grown = roles("out3");
    assert_eq!(grown.code, 0, "{}", grown.stderr);
    assert!(
        grown.stdout.contains("host/f/h5: role created;")
            && grown.stdout.contains("host/f/h1: as planned already"),
        "{}",
        grown.stdout
    );
    assert!(password("h5").len() >= 40);
    assert_eq!(password("h1"), every[0]);
    let h5 = password("h5");

    // The host leaves the release again: its user, its role and its password file go, and
    // its password no longer logs in (it could have written its old group's semaphore).
    std::fs::write(
        fx.path().join("bell.kdl"),
        common::pulling::spec("release 4"),
    )
    .unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out4", "--sign-key", "ci.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let shrunk = roles("out4");
    assert_eq!(shrunk.code, 0, "{}", shrunk.stderr);
    assert!(
        shrunk
            .stdout
            .contains("host/f/h5: user and role removed: the release no longer names host `h5`")
            && shrunk.stdout.contains("host/f/h1: as planned already"),
        "{}",
        shrunk.stdout
    );
    assert!(!passwords.join("h5").exists());
    let listed = pki.etcdctl(&ep, &["--user", "root:r00t-Secret", "user", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("host/f/h1") && !listed.contains("host/f/h5"),
        "{listed}"
    );
    let listed = pki.etcdctl(&ep, &["--user", "root:r00t-Secret", "role", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(!listed.contains("host/f/h5"), "{listed}");
    let h5_login = pki.etcdctl(
        &ep,
        &[
            "--user",
            &format!("host/f/h5:{h5}"),
            "put",
            "/bell/f/groups/default/v1/semaphore",
            "{}",
        ],
    );
    assert!(!h5_login.status.success(), "{}", text(&h5_login));
    assert_eq!(password("h1"), every[0]);

    // A wrong password says so, and is not printed; a password file others may read is
    // refused before it is sent.
    let wrong = fx.path().join("wrong.password");
    std::fs::write(&wrong, "not-it\n").unwrap();
    for (mode, said) in [
        (0o600, "user `serve/f` could not log in"),
        (0o644, "may be read by others"),
    ] {
        std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(mode)).unwrap();
        let run = fx.bellc(&[
            "status",
            "out1",
            "--store",
            &url,
            "--store-ca",
            &ca,
            "--store-user",
            "serve/f",
            "--store-password-file",
            wrong.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(said), "{}", run.stderr);
        assert!(!run.stderr.contains("not-it"), "{}", run.stderr);
    }
    // Over plain etcd://, a password is never sent.
    let plain = url.replace("etcds://", "etcd://");
    let run = fx.bellc(&[
        "status",
        "out1",
        "--store",
        &plain,
        "--store-user",
        "serve/f",
        "--store-password-file",
        passwords.join("serve").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("in the clear"), "{}", run.stderr);
}

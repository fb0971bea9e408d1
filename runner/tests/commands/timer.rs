//! `bell-run install-timer`: units systemd accepts, with every argument quoted.

use super::*;

#[test]
fn install_timer_writes_units_that_systemd_accepts() {
    let w = World::new();
    let root = w.root();
    let out = w.run(&[
        "install-timer",
        "--root",
        root.to_str().unwrap(),
        "--exec",
        bin(),
        "--interval",
        "30min",
    ]);
    expect_code(&out, 0);
    // An image: enabled in its own tree, nothing started; its bell-run is not there yet.
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "enable with: systemctl --root {} enable bell-run.timer",
            root.display()
        )) && !said.contains("--now"),
        "{said}"
    );
    assert!(
        stderr(&out).contains(&format!(
            "warning: `{}` does not exist under the root yet",
            bin()
        )),
        "{}",
        stderr(&out)
    );
    let unit_dir = root.join("etc/systemd/system");
    let service = std::fs::read_to_string(unit_dir.join("bell-run.service")).unwrap();
    assert!(service.contains(&format!("ExecStart={} apply /var/lib/bell/current", bin())));
    let timer = std::fs::read_to_string(unit_dir.join("bell-run.timer")).unwrap();
    assert!(timer.contains("OnUnitActiveSec=30min"));

    systemd_accepts(&unit_dir);

    let out = w.run(&[
        "install-timer",
        "--root",
        root.to_str().unwrap(),
        "--exec",
        "bell run",
    ]);
    expect_code(&out, 1);
}

/// `systemd-analyze verify` accepts the service and the timer under `unit_dir`.
fn systemd_accepts(unit_dir: &std::path::Path) {
    systemd_accepts_units(unit_dir, &["bell-run.service", "bell-run.timer"]);
}

/// `systemd-analyze verify` accepts `units` under `unit_dir`.
/// The text of `unit` in `unit_dir`, and its `ExecStart=` line.
fn exec_start_of(unit_dir: &std::path::Path, unit: &str) -> (String, String) {
    let text = std::fs::read_to_string(unit_dir.join(unit)).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("{unit} has no ExecStart=:\n{text}"))
        .to_string();
    (text, line)
}

fn systemd_accepts_units(unit_dir: &std::path::Path, units: &[&str]) {
    if !bell_testkit::tool("systemd-analyze") {
        return;
    }
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .args(units.iter().map(|u| unit_dir.join(u)))
        .output()
        .expect("run systemd-analyze");
    assert!(
        out.status.success(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn install_timer_with_an_etcd_fleet_registers_the_machine_at_boot() {
    let w = World::new();
    let root = w.root();
    let root_arg = root.to_str().unwrap();
    let install = |options: &[&str]| {
        let mut args = vec!["install-timer", "--root", root_arg, "--exec", bin()];
        args.extend_from_slice(options);
        w.run(&args)
    };
    let out = install(&[
        "--source",
        "https://mirror.example/fleet/",
        "--store",
        "etcds://10.0.0.1:2379",
        "--fleet",
        "prod",
        "--host",
        "web-1",
        "--trust",
        "/etc/bell/keys.pub",
        "--store-user",
        "enroll/prod",
        "--store-password-file",
        "/etc/bell/enroll $pw",
    ]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains(" enable bell-run-register.service"),
        "{}",
        stdout(&out)
    );
    let unit_dir = root.join("etc/systemd/system");
    let (register, exec_start) = exec_start_of(&unit_dir, "bell-run-register.service");
    // The pull's store, fleet, host and credentials; nothing of the pull's own.
    assert_eq!(
        exec_start,
        format!(
            "ExecStart={bin} register --store \"etcds://10.0.0.1:2379\" \
             --store-password-file \"/etc/bell/enroll $$pw\" --fleet \"prod\" --host \"web-1\" \
             --store-user \"enroll/prod\"",
            bin = bin()
        )
    );
    assert!(register.contains("Before=bell-run.service"), "{register}");
    // And `bell-run live`, with the same store and credentials, written, not enabled.
    assert!(
        stdout(&out).contains(" enable bell-run-live.service"),
        "{}",
        stdout(&out)
    );
    let (live, exec_start) = exec_start_of(&unit_dir, "bell-run-live.service");
    assert_eq!(
        exec_start,
        format!(
            "ExecStart={bin} live --store \"etcds://10.0.0.1:2379\" \
             --store-password-file \"/etc/bell/enroll $$pw\" --host \"web-1\" \
             --store-user \"enroll/prod\"",
            bin = bin()
        )
    );
    assert!(live.contains("Restart=always"), "{live}");
    systemd_accepts_units(
        &unit_dir,
        &["bell-run-register.service", "bell-run-live.service"],
    );
    // Installed again without a fleet: nothing to register with, the unit goes; without a
    // store, nothing to follow.
    let out = install(&["--source", "https://mirror.example/fleet/"]);
    expect_code(&out, 0);
    assert!(!unit_dir.join("bell-run-register.service").exists());
    assert!(!unit_dir.join("bell-run-live.service").exists());
}

#[test]
fn install_timer_with_a_gateway_writes_no_password_and_needs_no_identity_yet() {
    let w = World::new();
    let root = w.root();
    let root_arg = root.to_str().unwrap();
    let mut args = vec!["install-timer", "--root", root_arg, "--exec", bin()];
    args.extend([
        "--source",
        "https://mirror.example/fleet/",
        "--gateway",
        "https://gw.example:8443,gw2.example:8443",
        "--report",
        "https://gw.example:8443,gw2.example:8443",
        "--store-ca",
        "/etc/bell/gateway-ca.pem",
        "--fleet",
        "prod",
        "--trust",
        "/etc/bell/keys.pub",
    ]);
    // The image has no identity yet: the host makes it on its first boot.
    let out = w.run(&args);
    expect_code(&out, 0);
    let unit_dir = root.join("etc/systemd/system");
    let (service, pull) = exec_start_of(&unit_dir, "bell-run.service");
    let (_, register) = exec_start_of(&unit_dir, "bell-run-register.service");
    for line in [&pull, &register] {
        assert!(
            line.contains(" --gateway \"https://gw.example:8443,gw2.example:8443\""),
            "{line}"
        );
        assert!(
            !line.contains("--store ") && !line.contains("password"),
            "{line}"
        );
    }
    assert!(
        pull.contains(" --report \"https://gw.example:8443,gw2.example:8443\""),
        "{pull}"
    );
    // Each run long-polls the gateway until a minute before the next tick (15 min), and the
    // unit's time limit leaves room for that wait.
    assert!(pull.contains(" --wait \"840\""), "{pull}");
    assert!(!register.contains("--wait"), "{register}");
    let limit: u64 = service
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStartSec="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(limit > 840 + 300, "{service}");
    systemd_accepts(&unit_dir);
    // A password beside the gateway is refused: the host has no use for one.
    let mut with_password = args.clone();
    with_password.extend([
        "--store-user",
        "host/prod/web-1",
        "--store-password-file",
        "/p",
    ]);
    let out = w.run(&with_password);
    expect_code(&out, 64);
    assert!(
        stderr(&out).contains("drop `--store-user`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn install_timer_with_a_source_writes_a_pulling_service_with_every_argument_quoted() {
    let w = World::new();
    let root = w.root();
    let root_arg = root.to_str().unwrap();
    // A mirror path that systemd would split, expand or cut if it were written as it is
    // (the VM test runs such a unit and checks what bell-run received).
    let hostile = "/srv/bell mirror/it's \"100%\" $HOME;\\x\tend";
    let install = |options: &[&str]| {
        let mut args = vec!["install-timer", "--root", root_arg, "--exec", bin()];
        args.extend_from_slice(options);
        w.run(&args)
    };
    let out = install(&[
        "--source",
        hostile,
        "--trust",
        "/etc/bell/fleet keys.pub",
        "--store",
        "etcd://127.0.0.1:2379",
        "--host",
        "web-1",
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("`/etc/bell/fleet keys.pub` does not exist under the root yet"),
        "{}",
        stderr(&out)
    );
    let unit_dir = root.join("etc/systemd/system");
    let (service, exec_start) = exec_start_of(&unit_dir, "bell-run.service");
    assert_eq!(
        exec_start,
        format!(
            "ExecStart={bin} pull --source \"/srv/bell mirror/it's \\\"100%%\\\" $$HOME;\\\\x\\x09end\" \
             --store \"etcd://127.0.0.1:2379\" --trust \"/etc/bell/fleet keys.pub\" --host \"web-1\"",
            bin = bin()
        )
    );
    // TLS for the store and the source: the files are the image's, named as given.
    let out = install(&[
        "--source",
        "https://mirror.example/fleet/",
        "--source-ca",
        "/etc/bell/mirror-ca.pem",
        "--store",
        "etcds://10.0.0.1:2379,10.0.0.2:2379",
        "--store-ca",
        "/etc/bell/etcd-ca.pem",
        "--store-cert",
        "/etc/bell/host.pem",
        "--store-key",
        "/etc/bell/host.key",
    ]);
    expect_code(&out, 0);
    assert!(
        stderr(&out).contains("`--store-key /etc/bell/host.key` does not exist under the root yet"),
        "{}",
        stderr(&out)
    );
    let tls_service = std::fs::read_to_string(unit_dir.join("bell-run.service")).unwrap();
    assert!(
        tls_service.contains(
            "--store \"etcds://10.0.0.1:2379,10.0.0.2:2379\" --source-ca \"/etc/bell/mirror-ca.pem\" \
             --store-ca \"/etc/bell/etcd-ca.pem\" --store-cert \"/etc/bell/host.pem\" \
             --store-key \"/etc/bell/host.key\""
        ),
        "{tls_service}"
    );
    systemd_accepts(&unit_dir);
    // The first install's unit again, for what follows.
    let out = install(&[
        "--source",
        hostile,
        "--trust",
        "/etc/bell/fleet keys.pub",
        "--store",
        "etcd://127.0.0.1:2379",
        "--host",
        "web-1",
    ]);
    expect_code(&out, 0);
    // A pull that hangs ends: the fetch's 300 s, an apply's two scripts of 900 s, the longest
    // confirmation (an hour) and going back after it (another apply, a minute to report).
    assert!(service.contains("\nTimeoutStartSec=7560\n"), "{service}");
    // The first pull has no current generation: the service must not wait for one.
    assert!(!service.contains("ConditionPathExists"), "{service}");
    assert!(service.contains("After=network-online.target"));
    systemd_accepts(&unit_dir);

    // Without any trusted key the timer would apply whatever is served: it says so.
    let out = install(&["--source", "http://10.0.0.1:8080/fleet/"]);
    expect_code(&out, 0);
    assert!(stderr(&out).contains("unverified"), "{}", stderr(&out));
    std::fs::create_dir_all(root.join("etc/bell")).unwrap();
    std::fs::write(
        root.join("etc/bell/trusted.pub"),
        "untrusted comment: k\nRWQ\n",
    )
    .unwrap();
    // (and bell-run where the service runs it, in the image).
    let exe = root.join(bin().trim_start_matches('/'));
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &exe).unwrap();
    let out = install(&["--source", "http://10.0.0.1:8080/fleet/"]);
    expect_code(&out, 0);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    // Options that would fail on every tick are refused now, and the units stay as they were.
    let before = std::fs::read(unit_dir.join("bell-run.service")).unwrap();
    for bad in [
        &["--source", "relative/mirror"][..],
        &["--source", "ftp://bundles.example/"],
        &["--source", "/srv/mirror", "--source-ca", "/etc/ca.pem"],
        &[
            "--source",
            "/srv/mirror",
            "--store",
            "etcd://h:1",
            "--store-ca",
            "/etc/ca.pem",
        ],
        &[
            "--source",
            "/srv/mirror",
            "--store-ca",
            "etc/ca.pem",
            "--store",
            "etcds://h:1",
        ],
        &["--source", "/srv/mirror", "--store", "consul://x"],
        &["--source", "/srv/mirror", "--trust", "keys.pub"],
        &["--store", "etcd://127.0.0.1:2379"],
        &["--trust", "/etc/bell/trusted.pub"],
    ] {
        let out = install(bad);
        expect_code(&out, 64);
        assert!(!stderr(&out).is_empty());
    }
    assert_eq!(
        std::fs::read(unit_dir.join("bell-run.service")).unwrap(),
        before
    );
}

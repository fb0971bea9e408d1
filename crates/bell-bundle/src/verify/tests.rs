use super::*;

#[test]
fn bundle_ids_are_64_lowercase_hex() {
    assert!(is_bundle_id(&sha256_hex(b"x")));
    assert!(!is_bundle_id(&sha256_hex(b"x").to_uppercase()));
    assert!(!is_bundle_id("node-001"));
}

#[test]
fn modes_are_four_octal_digits() {
    assert_eq!(parse_mode("0644"), Some(0o644));
    assert_eq!(parse_mode("4755"), Some(0o4755));
    assert_eq!(parse_mode("644"), None);
    assert_eq!(parse_mode("0689"), None);
    assert_eq!(parse_mode("+644"), None);
}

#[test]
fn verify_dir_refuses_a_missing_manifest() {
    let dir = std::env::temp_dir().join(format!("bell-bundle-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let result = verify_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(result, Err(VerifyError::Unreadable { .. })));
}

#[test]
fn a_sealed_entry_is_named_by_its_digest_and_need_not_be_in_the_bundle() {
    let dir = std::env::temp_dir().join(format!("bell-bundle-sealed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sealed = |sha256: String, size: Option<u64>| File {
        path: "/etc/app/secret.conf".into(),
        sha256,
        size,
        mode: "0600".into(),
        owner: "root".into(),
        group: "root".into(),
        secret: true,
        sealed: true,
    };
    let write = |file: File| {
        let mut resource = Resource {
            kind: "file".into(),
            name: file.path.clone(),
            hash: String::new(),
            files: vec![file.path.clone()],
            lines_in: Vec::new(),
            after: vec![],
            order_after: vec![],
            apply: None,
            revert: None,
            check: None,
            batch: None,
            exec: None,
            at_boot: false,
            wait_for: Vec::new(),
        };
        resource.hash = resource.compute_hash(std::slice::from_ref(&file));
        let manifest = Manifest {
            format: FORMAT,
            target: "debian-12".into(),
            fleet: "f".into(),
            resources: vec![resource],
            files: vec![file],
            triggers: vec![],
            probes: vec![],
            batches: vec![],
            snapshots: Default::default(),
            reboot: None,
            confirm: None,
            live: vec![],
            provides: vec![],
            providers: Default::default(),
        };
        std::fs::write(dir.join(MANIFEST_FILE), manifest.to_json()).unwrap();
        manifest
    };
    let manifest = write(sealed(sha256_hex(b"keyed"), None));
    assert!(manifest.files[0].is_secret());
    assert_eq!(
        manifest.sealed().into_keys().collect::<Vec<_>>(),
        ["root/etc/app/secret.conf"]
    );
    // As the mirror serves it: without the content.
    assert_eq!(verify_dir(&dir).unwrap(), manifest);
    // As bell-run keeps it: with the opened content in its place.
    std::fs::create_dir_all(dir.join("root/etc/app")).unwrap();
    std::fs::write(dir.join("root/etc/app/secret.conf"), "token=x\n").unwrap();
    assert_eq!(verify_dir(&dir).unwrap(), manifest);
    // A size would tell the secret's length; a digest must be one.
    write(sealed(sha256_hex(b"keyed"), Some(8)));
    assert!(matches!(
        verify_dir(&dir),
        Err(VerifyError::BadSealed { .. })
    ));
    write(sealed("not-a-digest".into(), None));
    assert!(matches!(
        verify_dir(&dir),
        Err(VerifyError::BadSealed { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reboot_window_that_does_not_parse_and_a_missing_hook_do_not_verify() {
    let hook = |path: &str| Probe {
        name: "before-reboot".into(),
        script: Script {
            path: path.into(),
            sha256: sha256_hex(b"echo drain\n"),
            size: Some(11),
            secret: false,
            sealed: false,
            live_only: false,
        },
        timeout: 300,
        retries: 1,
        interval: 1,
        offline: Offline::Skip,
    };
    let reboot = |window: &str| Reboot {
        policy: RebootPolicy::WhenRequired,
        method: RebootMethod::Reboot,
        windows: vec![window.into()],
        before_reboot: Some(hook("scripts/reboot/before-reboot.sh")),
        after_boot: None,
        kernel_args: vec![],
        kernel_args_removed: vec![],
    };
    let manifest = |reboot: Reboot| Manifest {
        format: FORMAT,
        target: "debian-12".into(),
        fleet: "f".into(),
        resources: vec![],
        files: vec![],
        triggers: vec![],
        probes: vec![],
        batches: vec![],
        snapshots: Default::default(),
        reboot: Some(reboot),
        confirm: None,
        live: vec![],
        provides: vec![],
        providers: Default::default(),
    };
    let files = expected_files(&manifest(reboot("Sat 02:00-05:00"))).unwrap();
    assert!(files.contains_key(Path::new("scripts/reboot/before-reboot.sh")));
    assert!(matches!(
        expected_files(&manifest(reboot("Sat 02:00-05:00 Mars/Olympus"))),
        Err(VerifyError::BadWindow { .. })
    ));
    let mut outside = reboot("Sat 02:00-05:00");
    outside.before_reboot = Some(hook("../../etc/passwd"));
    assert!(expected_files(&manifest(outside)).is_err());
}

#[test]
fn unsigned_json_is_the_unsigned_release() {
    let host = |bundle: &str, rack: &str| ReleaseHost {
        bundle: bundle.into(),
        address: Some("10.0.0.1".into()),
        labels: Labels::new(BTreeMap::from([("rack".to_string(), rack.to_string())])),
        identity: None,
        secrets: None,
        snapshots: Default::default(),
        reboots: false,
        provides: Default::default(),
    };
    let mut release = Release {
        format: 1,
        fleet: "f".into(),
        version: "v".into(),
        hosts: BTreeMap::from([("a".into(), host("x", "r1")), ("b".into(), host("y", "r2"))]),
        waves: vec![vec!["a".into()], vec!["b".into()]],
        sequence: Some(7),
        expires: Some(9),
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    };
    for rollout in [
        None,
        Some(Rollout {
            batch_by: Some("rack".into()),
            max_unavailable: "1".into(),
            slots: BTreeMap::from([("r1".into(), 1)]),
        }),
    ] {
        release.rollout = rollout;
        assert_eq!(release.unsigned_json(), release.unsigned().to_json());
        assert!(release.same_unsigned(&release.unsigned()));
        let mut other = release.unsigned();
        other.waves.reverse();
        assert!(!release.same_unsigned(&other));
    }
}

#[test]
fn without_sealed_leaves_out_what_needs_a_secret_and_what_depends_on_it() {
    let script = |path: &str, sealed: bool| Script {
        path: path.into(),
        sha256: sha256_hex(path.as_bytes()),
        size: (!sealed).then_some(1),
        secret: sealed,
        sealed,
        live_only: false,
    };
    let file = |path: &str, sealed: bool| File {
        path: path.into(),
        sha256: sha256_hex(path.as_bytes()),
        size: (!sealed).then_some(1),
        mode: if sealed { "0600" } else { "0644" }.into(),
        owner: "root".into(),
        group: "root".into(),
        secret: sealed,
        sealed,
    };
    let resource =
        |kind: &str, name: &str, files: &[&str], after: &[&str], apply: Option<Script>| Resource {
            kind: kind.into(),
            name: name.into(),
            hash: String::new(),
            files: files.iter().map(|f| f.to_string()).collect(),
            lines_in: Vec::new(),
            after: after.iter().map(|a| a.to_string()).collect(),
            order_after: vec!["user:ops".into()],
            apply,
            revert: None,
            check: None,
            batch: None,
            exec: None,
            at_boot: false,
            wait_for: Vec::new(),
        };
    let files = vec![file("/etc/motd", false), file("/etc/app/token", true)];
    let mut resources = vec![
        resource(
            "user",
            "ops",
            &[],
            &[],
            Some(script("scripts/user/ops.apply", true)),
        ),
        resource("file", "/etc/app/token", &["/etc/app/token"], &[], None),
        resource(
            "exec",
            "setup.sh",
            &[],
            &["user:ops"],
            Some(script("scripts/exec/setup.sh", false)),
        ),
        resource("file", "/etc/motd", &["/etc/motd"], &[], None),
    ];
    for r in &mut resources {
        r.hash = r.compute_hash(&files);
    }
    let manifest = Manifest {
        format: FORMAT,
        target: "debian-12".into(),
        fleet: "f".into(),
        resources,
        files,
        triggers: vec![
            Trigger {
                name: "reload".into(),
                paths: vec!["/etc/app/token".into()],
                script: script("scripts/trigger/reload.sh", false),
            },
            Trigger {
                name: "motd".into(),
                paths: vec!["/etc/motd".into(), "/etc/app/token".into()],
                script: script("scripts/trigger/motd.sh", false),
            },
        ],
        probes: vec![],
        batches: vec![],
        snapshots: Default::default(),
        reboot: None,
        confirm: None,
        live: vec![],
        provides: vec![],
        providers: Default::default(),
    };
    let (kept, out) = manifest.without_sealed().expect("something is sealed");
    assert_eq!(out, ["exec:setup.sh", "file:/etc/app/token", "user:ops"]);
    assert_eq!(kept.resources.len(), 1);
    // What stays is as it was: the whole bundle's apply finds it unchanged.
    assert_eq!(kept.resources[0].hash, manifest.resources[3].hash);
    assert!(kept.resources[0].order_after.is_empty());
    assert_eq!(kept.files, [manifest.files[0].clone()]);
    assert!(kept.sealed().is_empty());
    assert_eq!(kept.triggers.len(), 1);
    assert_eq!(kept.triggers[0].paths, ["/etc/motd"]);
    assert_ne!(kept.id(), manifest.id());
    assert!(kept.without_sealed().is_none());
}

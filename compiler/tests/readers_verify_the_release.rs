//! A reader given `--trust KEY` (the key the hosts trust) takes a release only when that key
//! signed it: a mirror that edits `release.json` (drops an unhealthy host, names another
//! identity) or serves it unsigned is refused by `bellc status URL`, `bellc serve` and `bellc
//! lock status`, naming what it refused, before anything is shown.
use crate::common::fleet::*;
use crate::common::pulling::TwoReleases;

#[test]
fn a_mirrors_edited_release_is_refused_by_every_reader_that_trusts_the_key() {
    let setup = TwoReleases::new();
    let fx = &setup.fx;
    let Some(nginx) = Nginx::serve(&setup.served) else {
        return;
    };
    let url = nginx.url.trim_end_matches('/').to_string();
    let other = fx.path().join("other.pub").display().to_string();
    let reports = fx.path().join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let reports = reports.display().to_string();
    let status = |trust: Option<&str>| {
        let mut args = vec!["status", url.as_str(), "--reports", reports.as_str()];
        if let Some(trust) = trust {
            args.extend(["--trust", trust]);
        }
        fx.bellc(&args)
    };
    // As built and signed: read (every host unaccounted, as none reported).
    let run = status(Some(&setup.trust));
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stdout.contains("h4"), "{}", run.stdout);
    let run = status(Some(&other));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("release.json: refused: the release is signed by key")
            && run.stderr.contains("does not trust"),
        "{}",
        run.stderr
    );

    // The mirror drops h4 from the release (an unhealthy host hidden).
    let file = setup.served.join("release.json");
    let mut release: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    release["hosts"].as_object_mut().unwrap().remove("h4");
    std::fs::write(&file, serde_json::to_string_pretty(&release).unwrap()).unwrap();
    let run = status(Some(&setup.trust));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{url}/release.json: refused"))
            && run.stderr.contains("changed after signing"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    // Without `--trust` it is read as the mirror serves it: what `--trust` is for.
    let run = status(None);
    assert!(!run.stdout.contains("h4"), "{}", run.stdout);

    // `serve` does not start on it; `lock status` refuses it before it asks the store.
    let serve = fx.bellc(&[
        "serve",
        &url,
        "--store",
        "etcd://127.0.0.1:9",
        "--trust",
        &setup.trust,
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(serve.code, 2, "{}", serve.stderr);
    assert!(
        serve.stderr.contains("changed after signing"),
        "{}",
        serve.stderr
    );
    let lock = fx.bellc(&[
        "lock",
        "status",
        &url,
        "--trust",
        &setup.trust,
        "--store",
        "etcd://127.0.0.1:9",
        "--fleet",
        "f",
    ]);
    assert_eq!(lock.code, 2, "{}", lock.stderr);
    assert!(
        lock.stderr.contains("changed after signing"),
        "{}",
        lock.stderr
    );

    // Unsigned: the signature taken away.
    std::fs::remove_file(setup.served.join("release.json.minisig")).unwrap();
    let run = status(Some(&setup.trust));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("it is not signed"), "{}", run.stderr);

    // A directory OUT is checked the same way.
    let out = fx.path().join("out1").display().to_string();
    let run = fx.bellc(&["status", &out, "--reports", &reports, "--trust", &other]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("refused"), "{}", run.stderr);
}

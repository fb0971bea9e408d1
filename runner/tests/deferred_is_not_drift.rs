//! Work an image bake deferred to the first live apply (a package install) is a state of its
//! own: `check` neither runs its check nor counts it as drift, so a baked image otherwise in
//! sync checks clean (exit 0) and CI can gate the image on it. A file changed behind bell's
//! back is drift, and its resource says so instead of `no-check`.
use crate::common::*;

fn image(w: &World) -> BundleSpec {
    BundleSpec::new()
        .file("/etc/chrony.conf", "pool ntp\n", "0644")
        .resource(ResourceSpec::new("file", "/etc/chrony.conf").files(&["/etc/chrony.conf"]))
        .resource(
            ResourceSpec::new("package", "chrony")
                .apply(&format!(
                    "{}[ \"$BELL_OFFLINE\" = 1 ] && exit 75\nexit 0\n",
                    w.event("apply chrony")
                ))
                .check("echo 'chrony is not installed (not-installed )'\nexit 2\n"),
        )
}

#[test]
fn a_baked_image_with_deferred_work_checks_clean() {
    let w = World::new();
    let reports = w.tmp.path().join("reports");
    let root = w.root();
    let out = w.apply(&w.build(&image(&w)), &["--offline"]);
    expect_code(&out, 0);
    assert!(
        stdout(&out).contains("1 deferred to the first live apply"),
        "{}",
        stdout(&out)
    );

    let check = |json: bool| {
        let mut args = vec![
            "check",
            "--root",
            root.to_str().unwrap(),
            "--offline",
            "--host",
            "img",
            "--report",
            reports.to_str().unwrap(),
        ];
        if json {
            args.push("--json");
        }
        w.run(&args)
    };
    let out = check(false);
    expect_code(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("deferred package:chrony: its apply needs a live host"),
        "{text}"
    );
    assert!(text.contains("0 drifted, 0 errors, 1 deferred"), "{text}");
    assert!(!text.contains("drifted package"), "{text}");

    let out = check(true);
    expect_code(&out, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["result"], "in-sync");
    assert_eq!(json["deferred"], serde_json::json!(["package:chrony"]));
    assert_eq!(json["drift"], serde_json::json!([]));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("img.json")).unwrap()).unwrap();
    assert_eq!(report["status"]["check"], "success", "{report}");

    // A managed file changed by hand is drift, and its resource says so.
    std::fs::write(root.join("etc/chrony.conf"), "pool evil\n").unwrap();
    let out = check(true);
    expect_code(&out, 2);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let file = json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "file:/etc/chrony.conf")
        .unwrap();
    assert_eq!(file["result"], "drifted-files", "{json}");
    assert_eq!(json["drift"][0]["name"], "file:/etc/chrony.conf");
}

//! What a host wrote reaches no terminal raw: a report whose `error` holds ESC, CR, LF and a
//! bidirectional override shows, under `bellc status --all`, as one escaped row of its own
//! host, not as a fake row of another (the page escapes for HTML; JSON escapes by itself).
use crate::common::fleet::*;
use crate::common::*;

#[test]
fn a_painted_report_is_one_escaped_row() {
    let f = Fixture::spec(
        "fleet \"lab\" target=\"debian-12\"\nhost \"h1\" address=\"10.0.0.1\"\nhost \"h2\" address=\"10.0.0.2\"\nsysctl {\n    vm.swappiness 10\n}\n",
    );
    let run = f.bellc(&["build", "bell.kdl", "-o", "out"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let release: bell_bundle::Release =
        serde_json::from_str(&std::fs::read_to_string(f.path().join("out/release.json")).unwrap())
            .unwrap();
    let root = f.path().join("root");
    let reports = f.path().join("reports");
    for host in ["h1", "h2"] {
        std::fs::create_dir_all(root.join(host)).unwrap();
        let bundle = f.path().join("out/hosts").join(host);
        let out = run_bin(
            &bell_run(),
            &[
                "apply",
                bundle.to_str().unwrap(),
                "--root",
                root.join(host).to_str().unwrap(),
                "--report",
                reports.to_str().unwrap(),
                "--host",
                host,
                "--release",
                &release.version,
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    // h1 paints: its error would clear the line and print a failed row for h2.
    let path = reports.join("h1.json");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    report["result"] = "failed".into();
    report["status"]["apply"] = "failed".into();
    report["error"] = "refused\r\u{1b}[2K\nh2    failed  -  1s  FAKE\u{202e}\u{9b}".into();
    std::fs::write(&path, report.to_string()).unwrap();

    let status = f.bellc(&[
        "status",
        "out",
        "--reports",
        reports.to_str().unwrap(),
        "--all",
    ]);
    let shown = format!("{}{}", status.stdout, status.stderr);
    assert!(
        !shown.contains(['\u{1b}', '\r', '\u{202e}', '\u{9b}']),
        "{shown:?}"
    );
    assert!(
        !shown
            .lines()
            .any(|l| l.starts_with("h2") && l.contains("FAKE")),
        "{shown}"
    );
    let h1 = shown
        .lines()
        .find(|l| l.starts_with("h1 "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(h1.contains("refused\\r\\u{1b}[2K\\nh2    failed"), "{h1}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("h2 ") && l.contains("up-to-date")),
        "{shown}"
    );

    // The JSON escapes what JSON itself leaves raw (the override, C1's CSI) as `\uXXXX`, and
    // reads back as what h1 wrote.
    let json = f.bellc(&[
        "status",
        "out",
        "--reports",
        reports.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        !json.stdout.contains(['\u{1b}', '\r', '\u{202e}', '\u{9b}']),
        "{:?}",
        json.stdout
    );
    assert!(json.stdout.contains("\\u202e"), "{}", json.stdout);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(row(&value, "h1")["detail"], report["error"], "{value:#}");
}

/// bell-run prints what the store holds escaped too (`outln!` and `errln!` escape every line,
/// a value quoted in a message is put on one line): a desired release version that paints is
/// quoted in the refusal as text, on the refusal's line.
#[test]
fn bell_run_quotes_a_painted_store_value_escaped() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let source = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    etcdctl(
        &etcd.endpoint,
        &[
            "put",
            "/bell/f/current_version",
            "v\u{1b}[2J\r\nFAKE\u{202e}",
        ],
    );
    etcdctl(&etcd.endpoint, &["put", "/bell/f/desired/h", "b"]);
    let mut args = vec![
        "pull",
        "--source",
        source.path().to_str().unwrap(),
        "--store",
        &etcd.url,
        "--fleet",
        "f",
        "--host",
        "h",
        "--root",
        root.path().to_str().unwrap(),
        "--offline",
    ];
    let out = run_bin(&bell_run(), &args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(!said.contains(['\u{1b}', '\r', '\u{202e}']), "{said:?}");
    assert!(said.contains("v\\u{1b}[2J\\r\\nFAKE"), "{said}");
    assert!(!said.lines().any(|l| l.starts_with("FAKE")), "{said}");

    // And in its JSON: the same refusal, nothing raw a terminal acts on.
    args.push("--json");
    let out = run_bin(&bell_run(), &args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(!json.contains(['\u{1b}', '\r', '\u{202e}']), "{json:?}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .contains("v\\u{1b}[2J\\r\\nFAKE\\u{202e}"),
        "{value}"
    );
}

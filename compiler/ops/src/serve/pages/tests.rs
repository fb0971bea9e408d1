use super::super::{Board, Snapshot};
use super::views::QUERY;
use super::*;
use crate::fleet::status::fleet_status;
use bell_bundle::{Release, ReleaseHost};
use std::sync::Arc;

const HOSTILE: &str = "<img src=x onerror=alert(1)>\"'&";

/// A board over a 250-host release that no host reported to, with one label value a
/// browser would run if it were not escaped.
fn board() -> (tempfile::TempDir, Board) {
    let hosts: BTreeMap<String, ReleaseHost> = (0..250)
        .map(|i| {
            let rack = if i % 2 == 0 { HOSTILE } else { "r2" };
            let labels = BTreeMap::from([("rack".to_string(), rack.to_string())]);
            let entry = ReleaseHost {
                bundle: "ab".repeat(32),
                address: None,
                labels: Arc::new(labels),
                identity: None,
                secrets: None,
                snapshots: Default::default(),
                reboots: false,
                provides: Default::default(),
            };
            (format!("host-{i:03}"), entry)
        })
        .collect();
    let release = Release {
        format: bell_bundle::FORMAT,
        fleet: "f".into(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: Vec::new(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    };
    let out = tempfile::tempdir().unwrap();
    std::fs::write(
        out.path().join("release.json"),
        serde_json::to_string(&release).unwrap(),
    )
    .unwrap();
    let etcd = bell_store::Etcd::new(vec!["127.0.0.1:9".into()]);
    let board = Board::new(
        super::super::Out::Dir(out.path().to_path_buf()),
        etcd,
        std::time::Duration::from_secs(5),
        None,
    )
    .unwrap();
    let views = BTreeMap::new();
    let status = fleet_status(&release, &views, 1000, None);
    let index = super::super::index(&status);
    *board.current.write().unwrap() = Some(Arc::new(Snapshot {
        release: Arc::new(release),
        signer: None,
        status,
        index,
        views,
        groups: Vec::new(),
        progress: None,
        controller: None,
        published: None,
        published_but_for_held: None,
        history: Vec::new(),
        read_at: 1000,
        warnings: Vec::new(),
    }));
    (out, board)
}

fn get(board: &Board, target: &str) -> Response {
    let head = format!("GET {target} HTTP/1.1");
    let (_, request) = bell_wire::server::parse_head(head.as_bytes()).unwrap();
    Pages::new().unwrap().answer(board, &request)
}

fn rows(r: &Response) -> usize {
    String::from_utf8_lossy(&r.body)
        .matches("data-host=")
        .count()
}

#[test]
fn hosts_are_paged() {
    let (_out, board) = board();
    let first = get(&board, "/");
    assert_eq!((first.status, rows(&first)), (200, PAGE_SIZE));
    let html = String::from_utf8_lossy(&first.body);
    assert!(
        html.contains("page 1 of 3") && html.contains("page=2"),
        "{html}"
    );
    let last = get(&board, "/?page=3");
    assert_eq!(rows(&last), 50);
    // Past the end: the last page; not a number: the first, and why.
    assert_eq!(rows(&get(&board, "/?page=99")), 50);
    let host = get(&board, "/hosts/host-001");
    assert_eq!(host.status, 200);
    let html = String::from_utf8_lossy(&host.body);
    assert!(
        html.contains("no report") && html.contains("--spec SPEC"),
        "{html}"
    );
    let bad = get(&board, "/?page=abc");
    assert!(String::from_utf8_lossy(&bad.body).contains("page `abc` is not a number"));
}

#[test]
fn a_label_filter_matches_and_every_value_is_escaped() {
    let (_out, board) = board();
    let r2 = get(&board, "/?label=rack%3Dr2");
    assert_eq!(rows(&r2), 100);
    let html = String::from_utf8_lossy(&r2.body);
    assert!(html.contains("125 of 250 hosts"), "{html}");
    let target = format!(
        "/?label={}",
        percent_encoding::utf8_percent_encode(&format!("rack={HOSTILE}"), QUERY)
    );
    let hostile = get(&board, &target);
    let html = String::from_utf8_lossy(&hostile.body);
    assert!(html.contains("125 of 250 hosts"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    // The JSON of one host carries the label as data.
    let api = get(&board, "/api/v1/hosts/host-000");
    let value: serde_json::Value = serde_json::from_slice(&api.body).unwrap();
    assert_eq!(value["labels"]["rack"], HOSTILE);
    assert_eq!(get(&board, "/api/v1/hosts/nobody").status, 404);
    assert_eq!(get(&board, "/nothing-here").status, 404);
}

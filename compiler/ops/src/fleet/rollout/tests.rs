use super::*;

fn release(hosts: &[(&str, &str)], waves: &[&[&str]]) -> Release {
    let hosts: BTreeMap<String, ReleaseHost> = hosts
        .iter()
        .map(|(h, b)| {
            (
                h.to_string(),
                ReleaseHost {
                    bundle: b.repeat(64),
                    address: None,
                    labels: Default::default(),
                    identity: None,
                    secrets: None,
                    snapshots: Default::default(),
                    reboots: false,
                    provides: Default::default(),
                },
            )
        })
        .collect();
    Release {
        format: bell_bundle::FORMAT,
        fleet: "f".into(),
        version: Release::compute_version(&hosts),
        hosts,
        waves: waves
            .iter()
            .map(|w| w.iter().map(|h| h.to_string()).collect())
            .collect(),
        sequence: None,
        expires: None,
        rollout: None,
        identities_required: false,
        assignments: Vec::new(),
    }
}

fn view(bundle: &str, result: bell_store::State, at: u64, alive: bool) -> HostView {
    let report = bell_store::Report {
        bundle: Some(bundle.repeat(64)),
        status: BTreeMap::from([("apply".to_string(), result)]),
        ..bell_store::Report::new("", "f", "apply", result, at)
    };
    let report = Arc::new(report);
    HostView {
        status: report.status.clone().into_iter().collect(),
        by_command: bell_store::SmallMap::from([("apply".to_string(), Arc::clone(&report))]),
        report: Some(report),
        alive: Some(alive),
        ..HostView::default()
    }
}

#[test]
fn a_host_that_reboots_itself_converges_once_it_is_back() {
    use bell_store::State::Success;
    let mut wave = release(
        &[("down", "2"), ("due", "2"), ("back", "2"), ("by-hand", "2")],
        &[],
    );
    for host in ["down", "due", "back"] {
        wave.hosts.get_mut(host).unwrap().reboots = true;
    }
    let needs = |mut v: HostView, rebooting: Option<&str>| {
        let report = Arc::make_mut(v.report.as_mut().unwrap());
        report.reboot_required = vec!["kernel-args:hp: not yet".into()];
        report.rebooting = rebooting.map(str::to_string);
        let report = v.report.clone().unwrap();
        v.by_command.insert("apply".into(), report);
        v
    };
    let views = BTreeMap::from([
        (
            "down".to_string(),
            needs(view("2", Success, 100, true), Some("reboot")),
        ),
        (
            "due".to_string(),
            needs(view("2", Success, 100, true), None),
        ),
        ("back".to_string(), view("2", Success, 100, true)),
        // Its bundle does not reboot it: the flag is for whoever reboots it by hand.
        (
            "by-hand".to_string(),
            needs(view("2", Success, 100, true), None),
        ),
    ]);
    let hosts: Vec<String> = ["down", "due", "back", "by-hand"]
        .map(String::from)
        .to_vec();
    let since = Since {
        revision: 8,
        started_at: 100,
    };
    let judged = judge(&wave, &hosts, &views, &since, 101);
    assert_eq!(judged.converged, ["back", "by-hand"]);
    assert!(judged.failed.is_empty());
    let states: Vec<(&str, &str)> = judged
        .waiting
        .iter()
        .map(|t| (t.host.as_str(), t.state.as_str()))
        .collect();
    assert_eq!(states, [("down", "rebooting"), ("due", "reboot-required")]);
    assert_eq!(
        judged.waiting[0].detail.as_deref(),
        Some("rebooting (reboot) for: kernel-args:hp: not yet")
    );
}

#[test]
fn a_failure_since_the_wave_began_halts_an_older_one_waits() {
    use bell_store::State::{Failed, Reverted, Success};
    let wave = release(
        &[
            ("done", "2"),
            ("new", "2"),
            ("old", "2"),
            ("quiet", "2"),
            ("gone", "2"),
            ("again", "2"),
            ("fresh", "2"),
            ("earlier", "2"),
            ("refused", "2"),
            ("refused-earlier", "2"),
            ("refused-this", "2"),
            ("reverted", "2"),
            ("reverted-earlier", "2"),
        ],
        &[],
    );
    // Written after the release (9 > 8) by a run that began in its second: `earlier` names
    // the release it applied, another one (it read the store just before); the refusals did
    // nothing and name the release they still run, `refused-earlier` and `refused-this` also
    // the one they refused (an earlier one, this one), `refused` not (an older bell-run).
    let of_release = |version: &str, error: Option<&str>, refused: Option<&str>| {
        let result = match error {
            Some(e) if e.contains("not confirmed") => Reverted,
            _ => Failed,
        };
        let mut v = view("1", result, 100, true);
        v.revisions.insert("apply".into(), 9);
        let report = Arc::make_mut(v.report.as_mut().unwrap());
        report.release = Some(version.to_string());
        report.error = error.map(str::to_string);
        report.refused_release = refused.map(str::to_string);
        let report = v.report.clone().unwrap();
        v.by_command.insert("apply".into(), report);
        v
    };
    let views = BTreeMap::from([
        ("done".to_string(), view("2", Success, 100, true)),
        ("new".to_string(), view("1", Failed, 100, true)),
        ("old".to_string(), view("1", Failed, 99, true)),
        ("quiet".to_string(), view("1", Success, 99, true)),
        ("gone".to_string(), view("1", Success, 100, false)),
        // In etcd: written at revision 7, before the release (8), so its time is no proof.
        ("again".to_string(), {
            let mut v = view("1", Failed, 100, true);
            v.revisions.insert("apply".into(), 7);
            v
        }),
        ("fresh".to_string(), {
            let mut v = view("1", Failed, 100, true);
            v.revisions.insert("apply".into(), 9);
            v
        }),
        (
            "earlier".to_string(),
            of_release(&"1".repeat(64), None, None),
        ),
        (
            "refused".to_string(),
            of_release(&"1".repeat(64), Some("the release is expired"), None),
        ),
        (
            "refused-earlier".to_string(),
            of_release(&"1".repeat(64), Some("no group"), Some(&"3".repeat(64))),
        ),
        (
            "refused-this".to_string(),
            of_release(&"1".repeat(64), Some("no group"), Some(&wave.version)),
        ),
        // Took this wave's release back (its confirmation timed out): the wave failed.
        (
            "reverted".to_string(),
            of_release(
                &"1".repeat(64),
                Some("generation 2 was not confirmed in time: back on 1"),
                Some(&wave.version),
            ),
        ),
        (
            "reverted-earlier".to_string(),
            of_release(
                &"1".repeat(64),
                Some("generation 3 was not confirmed in time: back on 1"),
                Some(&"3".repeat(64)),
            ),
        ),
    ]);
    let hosts: Vec<String> = [
        "done",
        "new",
        "old",
        "quiet",
        "gone",
        "never",
        "again",
        "fresh",
        "earlier",
        "refused",
        "refused-earlier",
        "refused-this",
        "reverted",
        "reverted-earlier",
    ]
    .map(String::from)
    .to_vec();
    let since = Since {
        revision: 8,
        started_at: 100,
    };
    let judged = judge(&wave, &hosts, &views, &since, 101);
    assert_eq!(judged.converged, ["done"]);
    let gone = judged.waiting.iter().find(|t| t.host == "gone");
    assert_eq!(
        gone.and_then(|t| t.detail.as_deref()),
        Some("its liveness lease lapsed")
    );
    let states = |list: &[Trouble]| -> Vec<(String, String)> {
        list.iter()
            .map(|t| (t.host.clone(), t.state.clone()))
            .collect()
    };
    assert_eq!(
        states(&judged.failed),
        [
            ("new".into(), "failed".into()),
            ("fresh".into(), "failed".into()),
            ("refused".into(), "failed".into()),
            ("refused-this".into(), "failed".into()),
            ("reverted".into(), "reverted".into())
        ]
    );
    assert_eq!(
        states(&judged.waiting),
        [
            ("old".into(), "failed".into()),
            ("quiet".into(), "silent".into()),
            ("gone".into(), "silent".into()),
            ("never".into(), "silent".into()),
            ("again".into(), "failed".into()),
            ("earlier".into(), "failed".into()),
            ("refused-earlier".into(), "failed".into()),
            ("reverted-earlier".into(), "reverted".into()),
        ]
    );
    let earlier = judged.waiting.iter().find(|t| t.host == "earlier");
    let detail = earlier.and_then(|t| t.detail.as_deref()).unwrap_or("");
    assert!(
        detail.starts_with("a failure of release 111111111111, from a run that began before"),
        "{detail}"
    );
}

#[test]
fn a_host_waiting_for_a_slot_is_waiting_not_silent() {
    use bell_store::State::Waiting;
    let wave = release(&[("w", "2"), ("gone", "2")], &[]);
    let waiting = |alive: bool| {
        let mut v = view("1", Waiting, 90, alive);
        let mut report = (**v.report.as_ref().unwrap()).clone();
        report.error = Some("waiting for a slot: all 1 of group `a` are held (h1)".into());
        let report = Arc::new(report);
        v.report = Some(Arc::clone(&report));
        v.by_command.insert("apply".into(), report);
        v
    };
    let views = BTreeMap::from([
        ("w".to_string(), waiting(true)),
        ("gone".to_string(), waiting(false)),
    ]);
    let hosts = vec!["w".to_string(), "gone".to_string()];
    let since = Since {
        revision: 0,
        started_at: 100,
    };
    let judged = judge(&wave, &hosts, &views, &since, 101);
    let w = judged.waiting.iter().find(|t| t.host == "w").unwrap();
    assert_eq!(w.state, "waiting");
    assert!(w.detail.as_deref().unwrap().contains("held (h1)"), "{w:?}");
    let gone = judged.waiting.iter().find(|t| t.host == "gone").unwrap();
    assert_eq!(gone.state, "silent", "its lease lapsed: {gone:?}");
}

#[test]
fn only_hosts_whose_bundle_changes_are_in_a_wave() {
    let old = release(
        &[("a", "1"), ("b", "1"), ("c", "1")],
        &[&["a", "b"], &["c"]],
    );
    let new = release(
        &[("a", "2"), ("b", "1"), ("c", "1"), ("d", "2")],
        &[&["a", "b"], &["c", "d"]],
    );
    let old_map = old
        .hosts
        .iter()
        .map(|(h, e)| (h.clone(), e.bundle.clone()))
        .collect();
    assert_eq!(
        changed_waves(&new, &old_map),
        vec![vec!["a".to_string()], vec!["d".to_string()]]
    );
}

#[test]
fn a_wave_release_moves_the_waves_given_and_the_last_is_the_target() {
    let old = release(&[("a", "1"), ("b", "1"), ("gone", "1")], &[]);
    let new = release(&[("a", "2"), ("b", "2"), ("new", "2")], &[]);
    let waves = vec![
        vec!["a".to_string()],
        vec!["b".to_string(), "new".to_string()],
    ];
    let first = wave_release(&new, Some(&old), &waves, 0, &[]);
    let bundle = |r: &Release, h: &str| r.hosts.get(h).map(|e| e.bundle[..1].to_string());
    assert_eq!(bundle(&first, "a").as_deref(), Some("2"));
    assert_eq!(bundle(&first, "b").as_deref(), Some("1"));
    assert_eq!(bundle(&first, "gone").as_deref(), Some("1"));
    assert_eq!(bundle(&first, "new"), None);
    assert_ne!(first.version, new.version);
    assert_eq!(first.version, Release::compute_version(&first.hosts));
    assert_eq!(
        wave_release(&new, Some(&old), &waves, 1, &[]),
        new.unsigned()
    );
    let back = abort_release(&new, &old, &BTreeSet::from(["a".to_string(), "new".into()]));
    assert_eq!(bundle(&back, "a").as_deref(), Some("1"));
    assert_eq!(bundle(&back, "new").as_deref(), Some("2"));
    assert_eq!(bundle(&back, "gone").as_deref(), Some("1"));
}

/// An abort says which hosts it leaves as they are, and why: never "the moved hosts are back"
/// over a host it did not take back.
#[test]
fn an_abort_names_each_host_it_leaves_and_why() {
    let from = release(&[("a", "1"), ("b", "1"), ("c", "1")], &[]);
    let target = release(
        &[("a", "2"), ("b", "2"), ("c", "1"), ("d", "2"), ("e", "2")],
        &[],
    );
    let back = vec!["a".to_string()];
    let kept = kept_by_abort(&target, &from, &back, &["b".to_string()]);
    let said: Vec<(&str, &str)> = kept
        .iter()
        .map(|k| (k.host.as_str(), k.why.split(':').next().unwrap_or("")))
        .collect();
    assert_eq!(
        said,
        [
            ("b", "held when the rollout began"),
            ("d", "new in this release"),
            ("e", "new in this release"),
        ]
    );
    let from = release(&[("a", "1"), ("f", "1")], &[]);
    let target = release(&[("a", "2"), ("f", "2")], &[]);
    let kept = kept_by_abort(&target, &from, &back, &[]);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].host, "f");
    assert!(kept[0].why.contains("no wave of this rollout"), "{kept:?}");
}

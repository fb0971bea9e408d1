use super::*;

#[test]
fn a_second_reading_parses_only_the_reports_that_changed() {
    let kv = |key: String, value: Vec<u8>, mod_revision: i64| etcd::KeyValue {
        key,
        value: value.into(),
        mod_revision,
    };
    let json = |r: &Report| serde_json::to_vec(r).unwrap();
    let (a, b) = (
        report("a", "apply", State::Success),
        report("b", "apply", State::Failed),
    );
    let mut kvs = vec![
        kv(running_key("f", "a"), json(&a), 5),
        kv(running_key("f", "b"), json(&b), 6),
        kv(alive_key("f", "a"), b"1".to_vec(), 7),
        kv(status_key("f", "apply", "b"), b"failed".to_vec(), 6),
    ];
    let mut parsed = ParsedReports::default();
    let first = views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
    assert_eq!(first, views_from("f", &kvs, &Identities::new()).unwrap());
    assert_eq!(first["a"].alive, Some(true));
    assert_eq!(first["b"].status["apply"], State::Failed);
    // b files a new report; a's is the same key at the same revision.
    let b2 = report("b", "apply", State::Success);
    kvs[1] = kv(running_key("f", "b"), json(&b2), 9);
    let second = views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
    let (a1, a2) = (first["a"].report.as_ref(), second["a"].report.as_ref());
    assert!(
        Arc::ptr_eq(a1.unwrap(), a2.unwrap()),
        "a's report was parsed again"
    );
    assert_eq!(second["b"].report.as_deref(), Some(&b2));
    assert_eq!(second, views_from("f", &kvs, &Identities::new()).unwrap());
    // A host that left is forgotten.
    kvs.remove(0);
    views_from_parsed("f", &kvs, &mut parsed, &Identities::new()).unwrap();
    assert_eq!(parsed.by_key.len(), 1);
}

#[test]
fn a_host_is_judged_by_its_report_not_by_a_category_key() {
    let kv = |key: String, value: &[u8]| etcd::KeyValue {
        key,
        value: value.to_vec().into(),
        mod_revision: 3,
    };
    let mut unhealthy = report("a", "apply", State::Unhealthy);
    unhealthy.status = BTreeMap::from([
        ("apply".to_string(), State::Success),
        ("health".to_string(), State::Unhealthy),
    ]);
    let json = serde_json::to_vec(&unhealthy).unwrap();
    // The category key still says what the host's run before said (or what someone wrote).
    let kvs = vec![
        kv(running_key("f", "a"), &json),
        kv(status_key("f", "health", "a"), b"success"),
        kv(status_key("f", "apply", "b"), b"success"),
    ];
    let views = views_from("f", &kvs, &Identities::new()).unwrap();
    assert_eq!(views["a"].status["health"], State::Unhealthy);
    assert!(!views.contains_key("b"), "a category key alone is no host");
}

#[test]
fn one_unreadable_key_spoils_only_its_own_host() {
    let kv = |key: String, value: &[u8]| etcd::KeyValue {
        key,
        value: value.to_vec().into(),
        mod_revision: 3,
    };
    let good = serde_json::to_vec(&report("a", "apply", State::Success)).unwrap();
    let other = serde_json::to_vec(&report("a", "apply", State::Success)).unwrap();
    let mut wrong_type = serde_json::to_value(report("d", "apply", State::Success)).unwrap();
    wrong_type["finished_at"] = serde_json::json!("yesterday");
    let kvs = vec![
        kv(running_key("f", "a"), &good),
        kv(running_key("f", "b"), b"bogus"),
        kv(running_key("f", "c"), &[0xff, 0xfe, b'{']),
        kv(running_key("f", "d"), wrong_type.to_string().as_bytes()),
        // A report of host `a`, filed under host `e`'s key.
        kv(running_key("f", "e"), &other),
        kv(status_key("f", "apply", "a"), b"\xff not a state"),
    ];
    let views = views_from("f", &kvs, &Identities::new()).unwrap();
    assert_eq!(views["a"].unreadable, None);
    assert_eq!(views["a"].status["apply"], State::Success);
    for host in ["b", "c", "d", "e"] {
        let why = views[host].unreadable.as_deref().unwrap_or_default();
        assert!(why.contains(&running_key("f", host)), "{host}: {why}");
        assert!(views[host].report.is_none(), "{host}");
    }
    assert!(views["e"]
        .unreadable
        .as_deref()
        .unwrap()
        .contains("of host `a`"));
}

/// A report of `host` in fleet `f`, one category set: for the tests of every module.
pub(crate) fn report(host: &str, command: &str, result: State) -> Report {
    Report {
        finished_at: 2,
        status: BTreeMap::from([(command.to_string(), result)]),
        ..Report::new(host, "f", command, result, 1)
    }
}

#[test]
fn a_directory_keeps_one_state_per_category() {
    let dir = std::env::temp_dir().join(format!("bell-store-{}", std::process::id()));
    let store = Store::Dir(dir.clone());
    store
        .record(&mut report("h1", "apply", State::Success), None)
        .unwrap();
    store
        .record(&mut report("h1", "check", State::Drifted), None)
        .unwrap();
    store
        .record(&mut report("h1", "check", State::Success), None)
        .unwrap();
    let fleet = store.load_fleet("f", &Identities::new()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let view = &fleet["h1"];
    assert_eq!(
        view.status,
        crate::SmallMap::from([
            ("apply".to_string(), State::Success),
            ("check".to_string(), State::Success)
        ])
    );
    assert_eq!(
        view.report.as_ref().map(|r| r.command.as_str()),
        Some("check")
    );
}

#[test]
fn runs_in_a_row_that_say_the_same_are_counted_from_the_first() {
    let dir = std::env::temp_dir().join(format!("bell-store-runs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::Dir(dir.clone());
    let at = |started: u64, result: State| {
        let mut r = report("h1", "apply", result);
        r.started_at = started;
        r.finished_at = started + 1;
        r
    };
    for started in [100, 200, 300] {
        store.record(&mut at(started, State::Failed), None).unwrap();
    }
    let read = |store: &Store| {
        let fleet = store.load_fleet("f", &Identities::new()).unwrap();
        let r = fleet["h1"].report.clone().unwrap();
        (r.since, r.attempts, r.finished_at)
    };
    assert_eq!(read(&store), (Some(100), Some(3), 301));
    // Something else said: the count starts again.
    store.record(&mut at(400, State::Success), None).unwrap();
    assert_eq!(read(&store), (Some(400), Some(1), 401));
    let mut failed = at(500, State::Failed);
    failed.error = Some("another failure".into());
    store.record(&mut failed, None).unwrap();
    store.record(&mut at(600, State::Failed), None).unwrap();
    assert_eq!(read(&store), (Some(600), Some(1), 601));

    // Repeats of a well host need not be written; a failing host's each are worth it.
    let mut well = at(1, State::Success);
    assert!(!well.follow(Some(&at(0, State::Success))) || !well.worth_repeating());
    let mut failing = at(1, State::Failed);
    assert!(failing.follow(Some(&at(0, State::Failed))) && failing.worth_repeating());
    assert_eq!((failing.since, failing.attempts), (Some(0), Some(2)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn names_that_would_escape_a_key_or_directory_are_refused() {
    for bad in ["", "..", ".h", "a/b", "a b", "h\n"] {
        assert!(check_name("host", bad).is_err(), "{bad:?}");
    }
    assert!(check_name("host", "node-001.rack_2").is_ok());
    let mut r = report("../x", "apply", State::Success);
    assert!(Store::Dir(PathBuf::from("/nonexistent"))
        .record(&mut r, None)
        .is_err());
}

#[test]
fn destinations_parse() {
    assert_eq!(
        Store::parse("reports"),
        Ok(Store::Dir(PathBuf::from("reports")))
    );
    assert!(matches!(
        Store::parse("etcd://127.0.0.1:2379"),
        Ok(Store::Etcd(_))
    ));
    assert!(Store::parse("https://x:1").is_err());
}

#[test]
fn signatures_checked_in_batches_find_exactly_the_forged_reports() {
    // More reports than a few batches on every thread; among them one changed after it was
    // signed, one signed by another host's key, one written with its members in another
    // order (by another serializer: signed as sorted, it holds), in batches of their own and
    // of others.
    let hosts = 1000;
    let keys: Vec<proof::SigningKey> = (0..hosts)
        .map(|i| {
            let mut seed = [9u8; 32];
            seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
            proof::SigningKey::from_seed(seed)
        })
        .collect();
    let name = |i: usize| format!("h{i:04}");
    let mut identities = Identities::new();
    for (i, key) in keys.iter().enumerate() {
        identities.insert(name(i), key.identity());
    }
    let (changed, other_key, reordered) = (130, 131, 777);
    let kvs: Vec<etcd::KeyValue> = (0..hosts)
        .map(|i| {
            let mut r = report(&name(i), "apply", State::Success);
            let signer = if i == other_key { &keys[0] } else { &keys[i] };
            proof::sign(&mut r, signer, 7);
            let mut value = proof::to_json(&r).into_bytes();
            if i == changed {
                let text = String::from_utf8(value).unwrap();
                value = text.replacen("\"success\"", "\"failed\"", 1).into_bytes();
            }
            if i == reordered {
                // serde_json's own order (the struct's), proof last: not as bell-run writes.
                value = serde_json::to_vec(&r).unwrap();
            }
            etcd::KeyValue {
                key: running_key("f", &name(i)),
                value: value.into(),
                mod_revision: i as i64 + 1,
            }
        })
        .collect();
    let views = views_from("f", &kvs, &identities).unwrap();
    let forged: Vec<&str> = views
        .iter()
        .filter(|(_, v)| !v.forged.is_empty())
        .map(|(h, _)| h.as_str())
        .collect();
    assert_eq!(forged, [name(changed), name(other_key)]);
    assert!(views[&name(changed)].forged[0].contains("changed after it was signed"));
    assert!(views[&name(other_key)].forged[0].contains("another key"));
    for i in [0, reordered, hosts - 1] {
        let view = &views[&name(i)];
        assert_eq!(
            view.proofs["apply"],
            proof::Proof::Signed {
                sequence: 7,
                checked: Some(proof::checked(&identities[&name(i)], &kvs[i].value))
            },
            "{i}"
        );
    }
    // The same, each report alone.
    for (i, kv) in kvs.iter().enumerate() {
        let report: Report = serde_json::from_slice(&kv.value).unwrap();
        let alone = proof::check(&kv.value, &report, &name(i), identities.get(&name(i)));
        assert_eq!(
            matches!(alone, proof::Proof::Forged(_)),
            i == changed || i == other_key,
            "{i}: {alone:?}"
        );
    }
}

/// A reader started again takes a report it checked before by its digest (the bytes and the
/// identity), and checks every other: the same report under another identity, or changed.
#[test]
fn reports_checked_before_are_taken_by_their_digest_and_no_others() {
    let (a_key, b_key) = (
        proof::SigningKey::from_seed([21; 32]),
        proof::SigningKey::from_seed([22; 32]),
    );
    let filed = |host: &str, key: &proof::SigningKey, edit: bool| {
        let mut r = report(host, "apply", State::Success);
        proof::sign(&mut r, key, 5);
        let text = proof::to_json(&r);
        let text = if edit {
            text.replacen("\"success\"", "\"failed\"", 1)
        } else {
            text
        };
        etcd::KeyValue {
            key: running_key("f", host),
            value: text.into_bytes().into(),
            mod_revision: 3,
        }
    };
    let kvs = vec![filed("a", &a_key, false), filed("b", &b_key, true)];
    let identities = Identities::from([
        ("a".to_string(), a_key.identity()),
        ("b".to_string(), b_key.identity()),
    ]);
    let digests = |identities: &Identities| -> std::collections::HashSet<proof::Checked> {
        kvs.iter()
            .zip(["a", "b"])
            .map(|(kv, host)| proof::checked(&identities[host], &kv.value))
            .collect()
    };
    let read = |identities: &Identities, before: std::collections::HashSet<proof::Checked>| {
        let mut parsed = ParsedReports::checked_before(Arc::new(before));
        views_from_parsed("f", &kvs, &mut parsed, identities).unwrap()
    };
    // Nothing known: b's report, changed after it was signed, is refused.
    let views = read(&identities, Default::default());
    assert!(views["b"].forged[0].contains("changed after"));
    assert!(matches!(
        views["a"].proofs["apply"],
        proof::Proof::Signed { .. }
    ));
    // Both known: neither signature is checked again, b's bad one included (a reader whose
    // state says it checked these bytes under this identity is believed: that state is the
    // reader's own, as what it saw signed is).
    let views = read(&identities, digests(&identities));
    assert!(views["b"].forged.is_empty());
    assert!(matches!(
        views["b"].proofs["apply"],
        proof::Proof::Signed { sequence: 5, .. }
    ));
    // b's identity changed in the release: the digest names another key, and b's report is
    // checked against the new one.
    let mut moved = identities.clone();
    moved.insert(
        "b".into(),
        proof::SigningKey::from_seed([23; 32]).identity(),
    );
    let views = read(&moved, digests(&identities));
    assert!(
        views["b"].forged[0].contains("another key"),
        "{:?}",
        views["b"].forged
    );
    assert!(matches!(
        views["a"].proofs["apply"],
        proof::Proof::Signed { .. }
    ));
}

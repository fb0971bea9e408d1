//! What a store does: file a host's report and keep it alive, read a fleet's reports, publish
//! a release and read back what is published and desired, in a report directory or in etcd.

use crate::*;

impl Store {
    /// `etcd://HOST:PORT`, `etcds://HOST:PORT` (TLS with the system's CAs) or a directory.
    pub fn parse(dest: &str) -> Result<Store, String> {
        Store::open(dest, &Access::default())
    }

    /// `etcd://`, `etcds://` with what `access` names, or a directory.
    pub fn open(dest: &str, access: &Access) -> Result<Store, String> {
        Store::check(dest, access)?;
        if dest.contains("://") {
            return Etcd::open(dest, access).map(Store::Etcd);
        }
        Ok(Store::Dir(PathBuf::from(dest)))
    }

    /// This store with `limits` on every request to etcd (a directory has none).
    pub fn with_limits(self, limits: etcd::Limits) -> Store {
        match self {
            Store::Etcd(etcd) => Store::Etcd(etcd.with_limits(limits)),
            dir => dir,
        }
    }

    /// Whether [`Store::open`] would take `dest` and `access`, reading no file (an image's
    /// timer names files of the image).
    pub fn check(dest: &str, access: &Access) -> Result<(), String> {
        // A directory has no use for TLS files, which a `--store` beside it may need.
        if dest.contains("://") {
            return Etcd::check(dest, access).map(|_| ());
        }
        if dest.is_empty() {
            return Err(
                "an empty report destination; give a directory or `etcd://HOST:PORT`".into(),
            );
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        match self {
            Store::Dir(dir) => dir.display().to_string(),
            Store::Etcd(etcd) => etcd.url(),
        }
    }

    /// Files a report: the host's running report, and its state in the report's categories
    /// (`report.status`, which the caller fills). In a directory the categories the report
    /// does not set are carried over from the host's previous report. With a `signer`, the
    /// report is signed as the host's next (see [`proof`]) when it is written.
    pub fn record(&self, report: &mut Report, signer: Option<Signer>) -> Result<(), String> {
        self.record_with(report, signer, None)
    }

    /// [`Store::record`], comparing with the keys `read` holds of this store (read with the
    /// pull's desired release) instead of reading them again.
    pub fn record_with(
        &self,
        report: &mut Report,
        signer: Option<Signer>,
        read: Option<&prefetch::Prefetched>,
    ) -> Result<(), String> {
        check_name("host", &report.host)?;
        check_name("fleet", &report.fleet)?;
        match self {
            Store::Dir(dir) => {
                let path = dir.join(format!("{}.json", report.host));
                let previous = read_report(&path)?
                    .map(|(_, previous)| previous)
                    .filter(|previous| previous.fleet == report.fleet);
                if let Some(previous) = &previous {
                    for (category, state) in &previous.status {
                        report.status.entry(category.clone()).or_insert(*state);
                    }
                }
                // A directory keeps one report, and every run writes it.
                report.follow(previous.as_ref());
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                if let Some(signer) = signer {
                    signer.sign(report)?;
                }
                let tmp = dir.join(format!(".{}.json.tmp", report.host));
                // Pretty for a reader of the directory, unless signed: then as signed.
                let mut text = match report.proof {
                    Some(_) => proof::to_json(report),
                    None => serde_json::to_string_pretty(report).unwrap_or_default(),
                };
                text.push('\n');
                std::fs::write(&tmp, text)
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))
            }
            Store::Etcd(etcd) => {
                // Every write is a revision that etcd keeps until it is compacted: a run that
                // found what the last one found writes nothing (liveness is a lease, renewed
                // without a revision: `keep_alive`).
                let key = report_key(&report.fleet, &report.command, &report.host);
                // The category keys, for readers outside bell: written in the same
                // transaction as the report, so that no reader sees one without the other.
                // bellc itself judges a host from the report alone (see `views_from`).
                let categories: Vec<(String, &'static str)> = report
                    .status
                    .iter()
                    .map(|(category, state)| {
                        (
                            status_key(&report.fleet, category, &report.host),
                            state.as_str(),
                        )
                    })
                    .collect();
                let mut names: Vec<&str> = vec![key.as_str()];
                names.extend(categories.iter().map(|(k, _)| k.as_str()));
                let url = etcd.url();
                let known: Option<Vec<Option<Vec<u8>>>> = read.and_then(|read| {
                    names
                        .iter()
                        .map(|name| read.get(&url, name).map(|h| h.map(|h| h.value.clone())))
                        .collect()
                });
                let mut held = match known {
                    Some(known) => known,
                    None => etcd.get_all(&names)?,
                }
                .into_iter();
                let previous = held.next().flatten().and_then(|raw| {
                    let report = serde_json::from_slice::<Report>(&raw).ok()?;
                    Some((raw, report))
                });
                // Only the host's own report counts as what it said last: a copy signed by
                // another key is written over. The same report again is not written, unless
                // the host is not well (each of its attempts is then counted).
                let identity = signer.as_ref().map(|s| s.key.identity());
                let own = previous.filter(|(raw, previous)| match &identity {
                    Some(identity) => matches!(
                        proof::check(raw, previous, &report.host, Some(identity)),
                        proof::Proof::Signed { .. }
                    ),
                    None => previous.proof.is_none(),
                });
                let same = report.follow(own.as_ref().map(|(_, previous)| previous))
                    && !report.worth_repeating();
                let mut ops = Vec::new();
                let text;
                if !same {
                    if let Some(signer) = signer {
                        signer.sign(report)?;
                    }
                    text = proof::to_json(report);
                    ops.push(etcd::Op::Put(&key, text.as_bytes()));
                }
                for ((key, state), held) in categories.iter().zip(held) {
                    if held.as_deref() != Some(state.as_bytes()) {
                        ops.push(etcd::Op::Put(key, state.as_bytes()));
                    }
                }
                if !ops.is_empty() {
                    etcd.write_all(&ops)?;
                }
                Ok(())
            }
        }
    }

    /// Keeps `host` alive in the store: its key under `/bell/<fleet>/alive/` is bound to a
    /// lease of `ttl` seconds, renewed on every run (a renewal writes no revision). `lease` is
    /// the one the host was given before; a new one is granted when it expired. Returns the
    /// lease to remember (`None` for a directory store, which has no liveness of its own).
    pub fn keep_alive(
        &self,
        fleet: &str,
        host: &str,
        lease: Option<i64>,
        ttl: u64,
    ) -> Result<Option<i64>, String> {
        let known = lease.map(|id| Lease { id, renewed_at: 0 });
        let kept = self.keep_alive_with(fleet, host, known, ttl, 0, None)?;
        Ok(kept.map(|lease| lease.id))
    }

    /// [`Store::keep_alive`], renewing the lease only once half its time is spent (at `now`,
    /// seconds since the epoch): while the host's liveness key is bound to it, as `read` (the
    /// pull's first request) says, a run sooner than that sends nothing. The lease to remember.
    pub fn keep_alive_with(
        &self,
        fleet: &str,
        host: &str,
        lease: Option<Lease>,
        ttl: u64,
        now: u64,
        read: Option<&prefetch::Prefetched>,
    ) -> Result<Option<Lease>, String> {
        check_name("host", host)?;
        check_name("fleet", fleet)?;
        let Store::Etcd(etcd) = self else {
            return Ok(None);
        };
        let key = alive_key(fleet, host);
        let value = ttl.to_string();
        let url = etcd.url();
        let alive = read.and_then(|read| read.get(&url, &key));
        if let Some(lease) = lease {
            let bound = alive.map(|held| held.is_some_and(|h| h.lease == lease.id));
            if bound == Some(true) && now < lease.renewed_at.saturating_add(ttl / 2) {
                return Ok(Some(lease));
            }
            if etcd.keep_alive(lease.id)? {
                let present = match bound {
                    Some(bound) => bound,
                    None => etcd.get(&key)?.is_some(),
                };
                if !present {
                    etcd.put_with_lease(&key, value.as_bytes(), lease.id)?;
                }
                return Ok(Some(Lease {
                    id: lease.id,
                    renewed_at: now,
                }));
            }
        }
        let id = etcd.grant_lease(ttl)?;
        etcd.put_with_lease(&key, value.as_bytes(), id)?;
        Ok(Some(Lease {
            id,
            renewed_at: now,
        }))
    }

    /// Every host the store has heard from in `fleet`, each report checked against the
    /// host's identity in `identities` (see [`HostView::proofs`]).
    pub fn load_fleet(
        &self,
        fleet: &str,
        identities: &Identities,
    ) -> Result<BTreeMap<String, HostView>, String> {
        check_name("fleet", fleet)?;
        let mut hosts: BTreeMap<String, HostView> = BTreeMap::new();
        match self {
            Store::Dir(dir) => {
                let entries = std::fs::read_dir(dir)
                    .map_err(|e| format!("cannot read the reports in {}: {e}", dir.display()))?;
                for entry in entries {
                    let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
                    let name = entry.file_name().to_string_lossy().to_string();
                    if name.starts_with('.') || !name.ends_with(".json") {
                        continue;
                    }
                    let filed_as = name.trim_end_matches(".json");
                    // A file that is not a report spoils its own row, never the fleet's reading.
                    let (raw, report) = match read_report(&entry.path()) {
                        Ok(Some(read)) => read,
                        Ok(None) => continue,
                        Err(why) => {
                            let view = hosts.entry(filed_as.to_string()).or_default();
                            view.unreadable = Some(why);
                            continue;
                        }
                    };
                    let identity = identities.get(filed_as);
                    if report.fleet != fleet && identity.is_none() {
                        continue;
                    }
                    let mut view = HostView::default();
                    // A file is named after its host; without an identity to check, the report
                    // is taken at its word, as it always was.
                    let host = match identity {
                        Some(_) => filed_as.to_string(),
                        None => report.host.clone(),
                    };
                    match checked(&raw, report, &host, fleet, identity) {
                        Ok((report, proof)) => {
                            view.proofs.insert(report.command.clone(), proof);
                            view.by_command
                                .insert(report.command.clone(), Arc::new(report));
                        }
                        Err(why) => view
                            .forged
                            .push(format!("{}: {why}", entry.path().display())),
                    }
                    view.settle();
                    hosts.insert(host, view);
                }
            }
            Store::Etcd(etcd) => {
                let mut kvs = Vec::new();
                let commands = crate::keys::REPORTED_COMMANDS.iter();
                let reports = commands
                    .chain(&crate::keys::SIDE_COMMANDS)
                    .map(|command| crate::keys::report_key(fleet, command, ""));
                let ranges = reports.chain([
                    crate::keys::alive_key(fleet, ""),
                    crate::keys::status_prefix(fleet),
                    crate::keys::throttled_key(fleet, ""),
                ]);
                for prefix in ranges {
                    kvs.extend(etcd.range_prefix(&prefix)?);
                }
                hosts = views_from_parsed(fleet, &kvs, &mut ParsedReports::default(), identities)?;
            }
        }
        Ok(hosts)
    }

    /// Makes `release` the fleet's desired version: every host's bundle, hosts that left the
    /// release removed, and the version. Only the keys that change are written, in one
    /// transaction when they fit (a host reads version and bundle together, see
    /// [`Store::desired`], and so never sees one without the other); a larger change is
    /// written in parts with the version in the last. The etcd revision of the last part: a
    /// report written later was written after the host could see the release.
    pub fn publish(&self, release: &Release) -> Result<i64, String> {
        let Store::Etcd(etcd) = self else {
            return Err("`publish` needs an etcd store (`--store etcd://HOST:PORT`)".to_string());
        };
        check_name("fleet", &release.fleet)?;
        for host in release.hosts.keys() {
            check_name("host", host)?;
        }
        let prefix = crate::keys::desired_prefix(&release.fleet);
        let mut now: BTreeMap<String, etcd::Bytes> = etcd
            .range_prefix(&prefix)?
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect();
        let keys: Vec<(String, &[u8])> = release
            .hosts
            .iter()
            .map(|(host, entry)| (desired_key(&release.fleet, host), entry.bundle.as_bytes()))
            .collect();
        let mut ops: Vec<etcd::Op> = Vec::new();
        for (key, bundle) in &keys {
            if now.remove(key).as_deref() != Some(*bundle) {
                ops.push(etcd::Op::Put(key, bundle));
            }
        }
        ops.extend(now.keys().map(|key| etcd::Op::Delete(key)));
        let version = version_key(&release.fleet);
        ops.push(etcd::Op::Put(&version, release.version.as_bytes()));
        let mut revision = 0;
        for part in ops.chunks(etcd::MAX_TXN_OPS) {
            revision = etcd.write_all(part)?;
        }
        Ok(revision)
    }

    /// The fleet's published release as the store holds it (`None` when nothing is
    /// published, or the store is a directory).
    pub fn published(&self, fleet: &str) -> Result<Option<Published>, String> {
        let Store::Etcd(etcd) = self else {
            return Ok(None);
        };
        check_name("fleet", fleet)?;
        let Some(version) = etcd.get(&version_key(fleet))? else {
            return Ok(None);
        };
        let mut kvs = etcd.range_prefix(&crate::keys::desired_prefix(fleet))?;
        kvs.push(etcd::KeyValue {
            key: version_key(fleet),
            value: version.into(),
            mod_revision: 0,
        });
        Ok(published_from(fleet, &kvs))
    }

    /// The published version, the bundle desired for `host` and its hold, read together.
    pub fn desired(&self, fleet: &str, host: &str) -> Result<Desired, String> {
        Ok(self.desired_with(fleet, host, &[])?.0)
    }

    /// [`Store::desired`], with the keys `also` read in the same request (see
    /// [`prefetch::pull_keys`]).
    pub fn desired_with(
        &self,
        fleet: &str,
        host: &str,
        also: &[String],
    ) -> Result<(Desired, prefetch::Prefetched), String> {
        let Store::Etcd(etcd) = self else {
            return Err("`pending` needs an etcd store (`--store etcd://HOST:PORT`)".to_string());
        };
        check_name("fleet", fleet)?;
        check_name("host", host)?;
        let text =
            |v: Option<etcd::Held>| v.map(|h| String::from_utf8_lossy(&h.value).trim().to_string());
        // One request: a hold, and whatever the rest of the pull reads, cost nothing more.
        let decides = Desired::keys(fleet, host);
        let mut keys: Vec<&str> = decides.iter().map(String::as_str).collect();
        keys.extend(also.iter().map(String::as_str));
        let (revision, all) = etcd.read_all_at(&keys)?;
        let mut all = all.into_iter();
        let wanted = Desired {
            version: text(all.next().flatten()),
            bundle: text(all.next().flatten()),
            hold: all.next().flatten().map(|held| hold::parse(&held.value)),
            revision,
        };
        let read = prefetch::Prefetched::new(etcd.url(), also.iter().cloned().zip(all).collect());
        Ok((wanted, read))
    }
}

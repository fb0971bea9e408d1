//! A bundle as the kinds build it: resources and files added one by one, then ordered, hashed
//! and written into the manifest bell-run reads.

use super::*;

/// Collects a bundle's resources and files as the kind modules add them.
pub struct BundleBuilder {
    target: String,
    fleet: String,
    resources: Vec<Resource>,
    files: BTreeMap<String, (File, String)>,
    contents: BTreeMap<String, Arc<[u8]>>,
    sha256: BTreeMap<String, String>,
    triggers: Vec<Trigger>,
    probes: Vec<bell_bundle::Probe>,
    batches: Vec<bell_bundle::Batch>,
    snapshots: bell_bundle::Snapshots,
    reboot: Option<bell_bundle::Reboot>,
    confirm: Option<bell_bundle::Confirm>,
    live: Vec<bell_bundle::live::Live>,
    provides: Vec<String>,
    providers: BTreeMap<String, Vec<bell_bundle::live::Provider>>,
    /// Values kinds declared secret (password hashes, debconf passwords): any file or script
    /// that holds one is marked secret in the manifest.
    secrets: Vec<String>,
}

/// A file a resource (or the bundle) puts on the host.
pub struct NewFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
    pub owner: String,
    pub group: String,
}

impl NewFile {
    pub fn root_owned(path: impl Into<String>, content: impl Into<Vec<u8>>, mode: u32) -> NewFile {
        NewFile {
            path: path.into(),
            content: content.into(),
            mode,
            owner: "root".into(),
            group: "root".into(),
        }
    }
}

/// What a bundle resource is listed as: a kind of the registry, or a KIND the registry does not
/// hold (a sysctl key, of the language's own node; a part of a kind's family that the spec does
/// not declare itself, such as the target's default account, which `user` expires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    Of(Kind),
    Named(&'static str),
}

impl BundleKind {
    /// The KIND of the resource's `KIND:NAME` in the manifest.
    pub fn keyword(self) -> &'static str {
        match self {
            BundleKind::Of(kind) => kind.keyword(),
            BundleKind::Named(keyword) => keyword,
        }
    }
}

/// How bell-run runs one health probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePolicy {
    pub timeout: u64,
    pub retries: u32,
    pub interval: u64,
    pub offline: bell_bundle::Offline,
}

/// A resource as a kind module describes it, before hashing.
pub struct NewResource {
    pub kind: BundleKind,
    pub name: String,
    pub files: Vec<String>,
    /// See [`Resource::lines_in`].
    pub lines_in: Vec<String>,
    pub after: Vec<String>,
    pub apply: Option<String>,
    pub revert: Option<String>,
    pub exec: Option<bell_bundle::ExecPolicy>,
    /// Reads the live state back for `bell-run check` (exit 0 in sync, 2 drifted).
    pub check: Option<String>,
}

impl BundleBuilder {
    pub fn new(target: &Target, fleet: &str) -> BundleBuilder {
        BundleBuilder::empty(target.name.clone(), fleet.to_string())
    }

    fn empty(target: String, fleet: String) -> BundleBuilder {
        BundleBuilder {
            target,
            fleet,
            resources: Vec::new(),
            files: BTreeMap::new(),
            contents: BTreeMap::new(),
            sha256: BTreeMap::new(),
            triggers: Vec::new(),
            probes: Vec::new(),
            batches: Vec::new(),
            snapshots: BTreeMap::new(),
            reboot: None,
            confirm: None,
            live: Vec::new(),
            provides: Vec::new(),
            providers: BTreeMap::new(),
            secrets: Vec::new(),
        }
    }

    /// An empty builder for one part of this bundle (see `render::parts`): the same target and
    /// fleet, and the secrets declared so far, so that what the part adds is marked as it
    /// would be if it were added here.
    pub(super) fn for_part(&self) -> BundleBuilder {
        BundleBuilder {
            secrets: self.secrets.clone(),
            ..BundleBuilder::empty(self.target.clone(), self.fleet.clone())
        }
    }

    /// The secrets declared so far, in the order they were.
    pub(super) fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// Roughly the memory the builder holds.
    pub(super) fn weight(&self) -> usize {
        256 * (self.resources.len() + self.contents.len() + self.triggers.len())
            + self
                .contents
                .iter()
                .map(|(path, bytes)| path.len() + bytes.len())
                .sum::<usize>()
    }

    /// Adds what a part rendered on its own (from [`Self::for_part`]) as if it had been
    /// rendered here. A trigger already here is not added again, as `add_trigger` would not;
    /// `Err` when a path of the part is taken here already: that is a conflict, whose
    /// diagnostic only rendering the part here can give.
    pub(super) fn merge(&mut self, part: &BundleBuilder) -> Result<(), ()> {
        if part.files.keys().any(|path| self.files.contains_key(path)) {
            return Err(());
        }
        let repeated: Vec<&str> = part
            .triggers
            .iter()
            .filter(|t| self.triggers.iter().any(|here| here.name == t.name))
            .map(|t| t.script.path.as_str())
            .collect();
        let added = || {
            part.contents
                .iter()
                .filter(|(path, _)| !repeated.contains(&path.as_str()))
        };
        if added().any(|(path, _)| self.contents.contains_key(path)) {
            return Err(());
        }
        for (path, bytes) in added() {
            self.contents.insert(path.clone(), bytes.clone());
            if let Some(sha) = part.sha256.get(path) {
                self.sha256.insert(path.clone(), sha.clone());
            }
        }
        for (path, entry) in &part.files {
            self.files.insert(path.clone(), entry.clone());
        }
        self.resources.extend(part.resources.iter().cloned());
        for trigger in &part.triggers {
            if !repeated.contains(&trigger.script.path.as_str()) {
                self.triggers.push(trigger.clone());
            }
        }
        self.probes.extend(part.probes.iter().cloned());
        self.batches.extend(part.batches.iter().cloned());
        for (source, snapshot) in &part.snapshots {
            self.snapshots.insert(source.clone(), snapshot.clone());
        }
        if let Some(reboot) = &part.reboot {
            self.reboot = Some(reboot.clone());
        }
        if let Some(confirm) = part.confirm {
            self.confirm = Some(confirm);
        }
        self.live.extend(part.live.iter().cloned());
        self.provides.extend(part.provides.iter().cloned());
        for (service, list) in &part.providers {
            self.providers.insert(service.clone(), list.clone());
        }
        for secret in &part.secrets {
            self.secret_value(secret);
        }
        Ok(())
    }

    /// Declares a value secret: every file and script added from now on that holds it is
    /// marked secret. Kinds call this before they add what carries the value.
    pub fn secret_value(&mut self, value: &str) {
        // A very short one would mark half the bundle; what carries it is private by mode.
        if value.len() >= 6 && !self.secrets.iter().any(|s| s == value) {
            self.secrets.push(value.to_string());
        }
    }

    fn holds_secret(&self, content: &[u8]) -> bool {
        self.secrets
            .iter()
            .any(|secret| memchr::memmem::find(content, secret.as_bytes()).is_some())
    }

    /// Adds a managed file; `owner_key` names the resource that writes it, for conflicts.
    /// Returns the key of the earlier writer when the path is taken.
    pub fn add_file(&mut self, file: NewFile, owner_key: &str) -> Result<(), String> {
        if let Some((_, first)) = self.files.get(&file.path) {
            return Err(first.clone());
        }
        let secret = bell_bundle::private_mode(file.mode)
            || looks_like_private_key(&file.content)
            || self.holds_secret(&file.content);
        let (bytes, sha256) = intern(file.content);
        let size = Some(bytes.len() as u64);
        let rel = format!("{}{}", bell_bundle::ROOT_DIR, file.path);
        self.sha256.insert(rel.clone(), sha256.clone());
        self.contents.insert(rel, bytes);
        let entry = File {
            path: file.path.clone(),
            sha256,
            size,
            mode: format!("{:04o}", file.mode),
            owner: file.owner,
            group: file.group,
            secret,
            sealed: false,
        };
        self.files.insert(file.path, (entry, owner_key.to_string()));
        Ok(())
    }

    /// Whether the file added at `path` is secret (its mode keeps it private, it holds a
    /// private key or a declared secret): what reads it back must not name its digest.
    pub fn file_is_secret(&self, path: &str) -> bool {
        self.files.get(path).is_some_and(|(file, _)| file.secret)
    }

    /// Adds a script; `from_stdlib` when bellc rendered it (not a user's `exec` script), and
    /// then it is live only when its second line says so.
    fn add_script(
        &mut self,
        kind: &str,
        name: &str,
        role: &str,
        text: String,
        from_stdlib: bool,
    ) -> Script {
        let path = format!("scripts/{kind}/{}.{role}", file_name_for(name));
        let secret = self.holds_secret(text.as_bytes());
        let live_only = from_stdlib && text.lines().nth(1) == Some(LIVE_ONLY_LINE);
        let (bytes, sha256) = intern(text.into_bytes());
        let size = Some(bytes.len() as u64);
        self.contents.insert(path.clone(), bytes);
        self.sha256.insert(path.clone(), sha256.clone());
        Script {
            path,
            sha256,
            size,
            secret,
            sealed: false,
            live_only,
        }
    }

    pub fn add_resource(&mut self, r: NewResource) {
        let kind = r.kind.keyword();
        let from_stdlib = r.exec.is_none();
        let apply = r
            .apply
            .map(|t| self.add_script(kind, &r.name, "apply", t, from_stdlib));
        let revert = r
            .revert
            .map(|t| self.add_script(kind, &r.name, "revert", t, from_stdlib));
        let check = r
            .check
            .map(|t| self.add_script(kind, &r.name, "check", t, from_stdlib));
        self.resources.push(Resource {
            kind: r.kind.keyword().to_string(),
            name: r.name,
            hash: String::new(),
            files: r.files,
            lines_in: r.lines_in,
            after: r.after,
            order_after: Vec::new(),
            apply,
            revert,
            check,
            batch: None,
            exec: r.exec,
            at_boot: false,
            wait_for: Vec::new(),
        });
    }

    /// Adds a resource that takes effect at the next boot (see [`Resource::at_boot`]): its
    /// check may say the host needs a reboot.
    pub fn add_boot_resource(&mut self, r: NewResource) {
        self.add_resource(r);
        if let Some(added) = self.resources.last_mut() {
            added.at_boot = true;
        }
    }

    /// Adds a resource that the check of the batch `batch` reads back (see [`Self::add_batch`]).
    pub fn add_batched_resource(&mut self, r: NewResource, batch: &str) {
        self.add_resource(r);
        if let Some(added) = self.resources.last_mut() {
            added.batch = Some(batch.to_string());
        }
    }

    /// Adds a check shared by several resources, and the apply that brings several of them
    /// live at once when there is one (see [`bell_bundle::Batch`]); each of them names it in
    /// its `batch`.
    pub fn add_batch(&mut self, name: &str, check: String, apply: Option<String>) {
        let check = self.add_script("batch", name, "check", check, true);
        let apply = apply.map(|text| self.add_script("batch", name, "apply", text, true));
        self.batches.push(bell_bundle::Batch {
            name: name.to_string(),
            check,
            apply,
        });
    }

    pub fn add_trigger(&mut self, name: &str, paths: Vec<String>, script: String) {
        if self.triggers.iter().any(|t| t.name == name) {
            return;
        }
        let script = self.add_script("trigger", name, "sh", script, true);
        self.triggers.push(Trigger {
            name: name.to_string(),
            paths,
            script,
        });
    }

    /// Records that apt source `source` reads the repository snapshot `snapshot`.
    pub fn add_snapshot(&mut self, source: &str, snapshot: &str) {
        self.snapshots
            .insert(source.to_string(), snapshot.to_string());
    }

    /// Adds a health probe; `script` is its shell text, `policy` its timeout, retries and
    /// interval (the fields of [`bell_bundle::Probe`] besides the name and script).
    pub fn add_probe(&mut self, name: &str, script: String, policy: ProbePolicy) {
        let script = self.add_script("health", name, "sh", script, false);
        self.probes.push(bell_bundle::Probe {
            name: name.to_string(),
            script,
            timeout: policy.timeout,
            retries: policy.retries,
            interval: policy.interval,
            offline: policy.offline,
        });
    }

    /// A `before-reboot` or `after-boot` script: run once, like a probe, within `timeout`.
    pub fn add_reboot_hook(
        &mut self,
        name: &str,
        script: String,
        timeout: u64,
    ) -> bell_bundle::Probe {
        let script = self.add_script("reboot", name, "sh", script, false);
        bell_bundle::Probe {
            name: name.to_string(),
            script,
            timeout,
            retries: 1,
            interval: 1,
            offline: bell_bundle::Offline::Skip,
        }
    }

    /// A live file: what bell-run renders for the resource `live:PATH` added beside it.
    pub fn add_live(&mut self, live: bell_bundle::live::Live) {
        self.live.push(live);
    }

    /// Says that this host provides `service`: it publishes its health for the service's live
    /// files.
    pub fn add_provided(&mut self, service: &str) {
        self.provides.push(service.to_string());
    }

    /// Makes the resource `key` wait for `waits`, and says who may provide each service.
    pub fn add_waits(
        &mut self,
        key: &str,
        waits: Vec<bell_bundle::live::WaitFor>,
        providers: BTreeMap<String, Vec<bell_bundle::live::Provider>>,
    ) {
        if let Some(resource) = self.resources.iter_mut().find(|r| r.key() == key) {
            resource.wait_for = waits;
            self.providers.extend(providers);
        }
    }

    /// How the host reboots (the `reboot` setting).
    pub fn set_reboot(&mut self, reboot: bell_bundle::Reboot) {
        self.reboot = Some(reboot);
    }

    /// How long the host has to confirm a live apply (the `confirm` setting).
    pub fn set_confirm(&mut self, confirm: bell_bundle::Confirm) {
        self.confirm = Some(confirm);
    }

    /// Puts the resources in the model's apply order and gives each the dependencies the graph
    /// found. A resource a kind module adds that the graph does not know (a part of a larger
    /// resource) stays right after the last known resource added before it.
    pub fn finish(self, order: &ResourceOrder) -> RenderedBundle {
        let files: Vec<File> = self.files.into_values().map(|(f, _)| f).collect();
        let mut resources = self.resources;
        let mut last_known = 0;
        let mut rank: Vec<(usize, usize, usize)> = Vec::with_capacity(resources.len());
        for (seq, r) in resources.iter().enumerate() {
            match order.position(&r.key()) {
                Some(p) => {
                    last_known = p;
                    rank.push((p, 0, seq));
                }
                None => rank.push((last_known, 1, seq)),
            }
        }
        let mut ranked: Vec<_> = rank.into_iter().zip(resources).collect();
        ranked.sort_by_key(|(k, _)| *k);
        resources = ranked.into_iter().map(|(_, r)| r).collect();
        let present: std::collections::HashSet<String> =
            resources.iter().map(|r| r.key()).collect();
        for r in &mut resources {
            let waits = order.after_present(&r.key(), |k| present.contains(k));
            let mut after = waits.needs;
            // Edges a kind module adds itself (inside one resource family) are kept.
            for extra in std::mem::take(&mut r.after) {
                if present.contains(&extra) && !after.contains(&extra) {
                    after.push(extra);
                }
            }
            r.order_after = waits
                .order_only
                .into_iter()
                .filter(|k| !after.contains(k))
                .collect();
            r.after = after;
        }
        let mut resources = stable_topological(resources);
        for r in &mut resources {
            r.hash = r.compute_hash(&files);
        }
        let manifest = Manifest {
            format: bell_bundle::FORMAT,
            target: self.target,
            fleet: self.fleet,
            resources,
            files,
            triggers: self.triggers,
            probes: self.probes,
            batches: self.batches,
            snapshots: self.snapshots,
            reboot: self.reboot,
            confirm: self.confirm,
            live: {
                let mut live = self.live;
                live.sort_by(|a, b| a.path.cmp(&b.path));
                live
            },
            provides: {
                let mut provides = self.provides;
                provides.sort();
                provides.dedup();
                provides
            },
            providers: self.providers,
        };
        let manifest_json = manifest.to_json();
        let id = bell_bundle::sha256_hex(manifest_json.as_bytes());
        RenderedBundle {
            manifest,
            manifest_json,
            id,
            contents: self.contents,
            sha256: self.sha256,
            sealed: BTreeMap::new(),
            values: Arc::new(values::BundleValues {
                format: values::VALUES_FORMAT,
                target: String::new(),
                values: BTreeMap::new(),
            }),
        }
    }
}

/// Reorders resources so that every `after` target comes first, moving as little as possible
/// (among resources that are ready, the earliest goes first). The graph orders the kinds of
/// the language; resources a kind module adds on its own (a default account after the users
/// that replace it) only carry `after` edges, and bell-run requires them to point backwards.
pub(super) fn stable_topological(resources: Vec<Resource>) -> Vec<Resource> {
    use std::collections::{BTreeSet, HashMap};
    let index: HashMap<String, usize> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| (r.key(), i))
        .collect();
    let mut waiting = vec![0usize; resources.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); resources.len()];
    for (i, r) in resources.iter().enumerate() {
        for dep in r.after.iter().chain(&r.order_after) {
            if let Some(&d) = index.get(dep) {
                waiting[i] += 1;
                dependents[d].push(i);
            }
        }
    }
    let mut ready: BTreeSet<usize> = (0..resources.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(resources.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.insert(d);
            }
        }
    }
    // A cycle (reported by the graph stage for the language's kinds) leaves the rest in place.
    let placed: BTreeSet<usize> = order.iter().copied().collect();
    order.extend((0..resources.len()).filter(|i| !placed.contains(i)));
    let mut slots: Vec<Option<Resource>> = resources.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// A resource name as a file name in `scripts/`: bytes outside `[A-Za-z0-9._-]` (and a
/// leading dot) are percent-encoded, so that distinct names never share a file.
pub fn file_name_for(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let safe = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if safe {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

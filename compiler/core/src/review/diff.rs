//! Release diffs: what a new build changes, for review before it is published. Hosts are
//! grouped by bundle change (old id → new id), so three thousand hosts sharing one change are
//! one entry; each change lists the managed files, scripts and resources it adds, removes or
//! changes, with unified diffs of the contents.
//!
//! Both sides are read through `Side`, so an output directory on disk can be compared with
//! another one or with a build still in memory (`bellc build --diff OUT` before OUT is
//! overwritten). The result is data; `main.rs` prints it.

use crate::render::values::BundleValues;
use crate::render::RenderedBundle;
use bell_bundle::{Manifest, Release, Resource};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One side of a diff: a release and the bundles it names.
pub trait Side: Sync {
    fn release(&self) -> &Release;
    fn manifest(&self, id: &str) -> Result<Manifest, String>;
    /// A file of a bundle by its path inside the bundle (`root/etc/...`, `scripts/...`).
    fn content(&self, id: &str, rel: &str) -> Option<Vec<u8>>;
    /// The values a bundle was rendered from (`OUT/values/<id>.json`).
    fn values(&self, id: &str) -> Result<BundleValues, String>;
}

/// A build output directory (`release.json`, `bundles/`, `hosts/`).
pub struct DirSide {
    dir: PathBuf,
    release: Release,
}

impl DirSide {
    pub fn open(dir: &Path) -> Result<DirSide, String> {
        let path = dir.join("release.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read {}: {e}; is {} the output of `bellc build`?",
                path.display(),
                dir.display()
            )
        })?;
        let release: Release = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a bellc release: {e}", path.display()))?;
        Ok(DirSide {
            dir: dir.to_path_buf(),
            release,
        })
    }
}

impl Side for DirSide {
    fn release(&self) -> &Release {
        &self.release
    }

    fn manifest(&self, id: &str) -> Result<Manifest, String> {
        if !bell_bundle::is_bundle_id(id) {
            return Err(format!("`{id}` in the release is not a bundle id"));
        }
        let path = self
            .dir
            .join("bundles")
            .join(id)
            .join(bell_bundle::MANIFEST_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Manifest::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn content(&self, id: &str, rel: &str) -> Option<Vec<u8>> {
        if !bell_bundle::is_bundle_id(id) || !bell_bundle::is_contained_relative(rel) {
            return None;
        }
        std::fs::read(self.dir.join("bundles").join(id).join(rel)).ok()
    }

    fn values(&self, id: &str) -> Result<BundleValues, String> {
        crate::emit::values::read(&self.dir, id)
    }
}

/// A build in memory.
pub struct MemorySide<'a> {
    pub release: &'a Release,
    pub bundles: &'a BTreeMap<String, RenderedBundle>,
}

impl Side for MemorySide<'_> {
    fn release(&self) -> &Release {
        self.release
    }

    fn manifest(&self, id: &str) -> Result<Manifest, String> {
        self.bundles
            .get(id)
            .map(|b| b.manifest.clone())
            .ok_or_else(|| format!("the build has no bundle `{id}`"))
    }

    fn content(&self, id: &str, rel: &str) -> Option<Vec<u8>> {
        self.bundles
            .get(id)
            .and_then(|b| b.contents.get(rel))
            .map(|c| c.to_vec())
    }

    fn values(&self, id: &str) -> Result<BundleValues, String> {
        self.bundles
            .get(id)
            .map(|b| (*b.values).clone())
            .ok_or_else(|| format!("the build has no bundle `{id}`"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Added,
    Removed,
    Changed,
}

impl Change {
    pub fn symbol(self) -> char {
        match self {
            Change::Added => '+',
            Change::Removed => '-',
            Change::Changed => '~',
        }
    }
}

/// A managed file or a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    pub path: String,
    pub change: Change,
    /// Manifest-level changes: `mode 0644 → 0600`, `owner root:root → app:app`.
    pub details: Vec<String>,
    /// A unified diff of the content, when it changed and is text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceChange {
    pub key: String,
    pub change: Change,
    pub details: Vec<String>,
    /// A changed `exec` that runs once (`once-successfully`, `never`) and will run again,
    /// because its own definition changed; the details say why in words.
    #[serde(skip_serializing_if = "is_false")]
    pub runs_again: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One bundle change and every host it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleChange {
    pub old: String,
    pub new: String,
    pub hosts: Vec<String>,
    /// Target or fleet of the manifest, and how its health probes run.
    pub manifest: Vec<String>,
    pub files: Vec<FileChange>,
    pub scripts: Vec<FileChange>,
    pub resources: Vec<ResourceChange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseDiff {
    pub fleet: String,
    pub old_version: String,
    pub new_version: String,
    /// Hosts only in the new release, with their bundle.
    pub added: BTreeMap<String, String>,
    /// Hosts only in the old release, with the bundle they had.
    pub removed: BTreeMap<String, String>,
    pub unchanged: Vec<String>,
    pub changes: Vec<BundleChange>,
}

impl ReleaseDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changes.is_empty()
    }

    pub fn changed_hosts(&self) -> usize {
        self.changes.iter().map(|c| c.hosts.len()).sum()
    }

    /// One line for logs and CI.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return format!(
                "no change: {} hosts on the same bundles",
                self.unchanged.len()
            );
        }
        format!(
            "{} host(s) changed in {} bundle change(s), {} added, {} removed, {} unchanged (release {} → {})",
            self.changed_hosts(),
            self.changes.len(),
            self.added.len(),
            self.removed.len(),
            self.unchanged.len(),
            bell_bundle::short_id(&self.old_version),
            bell_bundle::short_id(&self.new_version)
        )
    }
}

/// Compares two releases.
pub fn diff(old: &dyn Side, new: &dyn Side) -> Result<ReleaseDiff, String> {
    let (or, nr) = (old.release(), new.release());
    let mut added = BTreeMap::new();
    let mut removed = BTreeMap::new();
    let mut unchanged = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (host, entry) in &nr.hosts {
        match or.hosts.get(host) {
            None => {
                added.insert(host.clone(), entry.bundle.clone());
            }
            Some(before) if before.bundle == entry.bundle => unchanged.push(host.clone()),
            Some(before) => groups
                .entry((before.bundle.clone(), entry.bundle.clone()))
                .or_default()
                .push(host.clone()),
        }
    }
    for (host, entry) in &or.hosts {
        if !nr.hosts.contains_key(host) {
            removed.insert(host.clone(), entry.bundle.clone());
        }
    }
    let mut changes = Vec::new();
    for ((old_id, new_id), hosts) in groups {
        let a = old.manifest(&old_id)?;
        let b = new.manifest(&new_id)?;
        let mut change = compare(old, new, (&old_id, &a), (&new_id, &b));
        change.hosts = hosts;
        changes.push(change);
    }
    // Biggest changes first: they are what a reviewer must not miss.
    changes.sort_by(|x, y| {
        y.hosts
            .len()
            .cmp(&x.hosts.len())
            .then_with(|| x.hosts.cmp(&y.hosts))
    });
    Ok(ReleaseDiff {
        fleet: nr.fleet.clone(),
        old_version: or.version.clone(),
        new_version: nr.version.clone(),
        added,
        removed,
        unchanged,
        changes,
    })
}

/// What changes from bundle `old_id` to bundle `new_id`, both read from `side`, as [`diff`]
/// shows one bundle change: what `bellc serve` shows for a host not on its desired bundle yet.
pub fn bundle_change(side: &dyn Side, old_id: &str, new_id: &str) -> Result<BundleChange, String> {
    let a = side.manifest(old_id)?;
    let b = side.manifest(new_id)?;
    Ok(compare(side, side, (old_id, &a), (new_id, &b)))
}

fn compare(
    old: &dyn Side,
    new: &dyn Side,
    (a_id, a): (&str, &Manifest),
    (b_id, b): (&str, &Manifest),
) -> BundleChange {
    let mut manifest = Vec::new();
    if a.target != b.target {
        manifest.push(format!("target {} → {}", a.target, b.target));
    }
    if a.fleet != b.fleet {
        manifest.push(format!("fleet {} → {}", a.fleet, b.fleet));
    }
    // A new snapshot changes a line of the sources file, and every package it brings: say it
    // as what it is, first.
    let (sa, sb) = (&a.snapshots, &b.snapshots);
    for source in sa.keys().chain(sb.keys()).collect::<BTreeSet<_>>() {
        match (sa.get(source), sb.get(source)) {
            (Some(x), Some(y)) if x != y => {
                manifest.push(format!("apt-source {source}: snapshot {x} → {y}"))
            }
            (None, Some(y)) => {
                manifest.push(format!("apt-source {source}: pinned to snapshot {y}"))
            }
            (Some(x), None) => manifest.push(format!(
                "apt-source {source}: no longer pinned (was snapshot {x})"
            )),
            _ => {}
        }
    }
    // A probe's script shows with the scripts; how it is run shows here.
    let policy = |m: &Manifest| -> BTreeMap<String, String> {
        m.probes
            .iter()
            .map(|p| {
                let how = format!(
                    "timeout {}s, {} attempts {}s apart",
                    p.timeout, p.retries, p.interval
                );
                (p.name.clone(), how)
            })
            .collect()
    };
    let (pa, pb) = (policy(a), policy(b));
    for name in pa.keys().chain(pb.keys()).collect::<BTreeSet<_>>() {
        match (pa.get(name), pb.get(name)) {
            (Some(x), Some(y)) if x != y => manifest.push(format!("health {name}: {x} → {y}")),
            (None, Some(y)) => manifest.push(format!("health {name} added: {y}")),
            (Some(_), None) => manifest.push(format!("health {name} removed")),
            _ => {}
        }
    }

    let a_files: BTreeMap<&str, &bell_bundle::File> =
        a.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let b_files: BTreeMap<&str, &bell_bundle::File> =
        b.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let mut files = Vec::new();
    for path in a_files
        .keys()
        .chain(b_files.keys())
        .collect::<BTreeSet<_>>()
    {
        let rel = format!("{}{path}", bell_bundle::ROOT_DIR);
        let (fa, fb) = (a_files.get(path), b_files.get(path));
        let text = |side: &dyn Side, id: &str, present: bool| {
            if present {
                side.content(id, &rel)
            } else {
                Some(Vec::new())
            }
        };
        let (change, mut details) = match (fa, fb) {
            (None, Some(f)) => (
                Change::Added,
                vec![format!("mode {} owner {}:{}", f.mode, f.owner, f.group)],
            ),
            (Some(_), None) => (Change::Removed, Vec::new()),
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => {
                let mut details = Vec::new();
                if x.mode != y.mode {
                    details.push(format!("mode {} → {}", x.mode, y.mode));
                }
                if (&x.owner, &x.group) != (&y.owner, &y.group) {
                    details.push(format!(
                        "owner {}:{} → {}:{}",
                        x.owner, x.group, y.owner, y.group
                    ));
                }
                (Change::Changed, details)
            }
            (None, None) => continue,
        };
        let content_changed = fa.map(|f| &f.sha256) != fb.map(|f| &f.sha256);
        let secret = fa.is_some_and(|f| f.is_secret()) || fb.is_some_and(|f| f.is_secret());
        let diff = if content_changed {
            if secret {
                details.push(secret_change(
                    fa.filter(|f| f.sealed).map(|f| f.sha256.as_str()),
                    fb.filter(|f| f.sealed).map(|f| f.sha256.as_str()),
                ));
                None
            } else {
                let before = text(old, a_id, fa.is_some());
                let after = text(new, b_id, fb.is_some());
                unified(path, before.as_deref(), after.as_deref(), &mut details)
            }
        } else {
            None
        };
        files.push(FileChange {
            path: path.to_string(),
            change,
            details,
            diff,
        });
    }

    let a_scripts = scripts(a);
    let b_scripts = scripts(b);
    let mut script_changes = Vec::new();
    for path in a_scripts
        .keys()
        .chain(b_scripts.keys())
        .collect::<BTreeSet<_>>()
    {
        let (sa, sb) = (a_scripts.get(path), b_scripts.get(path));
        let change = match (sa, sb) {
            (None, Some(_)) => Change::Added,
            (Some(_), None) => Change::Removed,
            (Some(x), Some(y)) if x.0 == y.0 => continue,
            _ => Change::Changed,
        };
        let secret = sa.is_some_and(|s| s.1) || sb.is_some_and(|s| s.1);
        let mut details = Vec::new();
        let diff = if secret {
            details.push(secret_change(
                sa.filter(|s| s.2).map(|s| s.0.as_str()),
                sb.filter(|s| s.2).map(|s| s.0.as_str()),
            ));
            None
        } else {
            let before = match sa {
                Some(_) => old.content(a_id, path),
                None => Some(Vec::new()),
            };
            let after = match sb {
                Some(_) => new.content(b_id, path),
                None => Some(Vec::new()),
            };
            unified(path, before.as_deref(), after.as_deref(), &mut details)
        };
        script_changes.push(FileChange {
            path: path.to_string(),
            change,
            details,
            diff,
        });
    }

    let a_res: BTreeMap<String, &Resource> = a.resources.iter().map(|r| (r.key(), r)).collect();
    let b_res: BTreeMap<String, &Resource> = b.resources.iter().map(|r| (r.key(), r)).collect();
    let mut resources = Vec::new();
    for key in a_res.keys().chain(b_res.keys()).collect::<BTreeSet<_>>() {
        let (change, details, runs_again) = match (a_res.get(key), b_res.get(key)) {
            (None, Some(_)) => (Change::Added, Vec::new(), false),
            (Some(_), None) => (Change::Removed, Vec::new(), false),
            (Some(x), Some(y)) if x.hash == y.hash => continue,
            (Some(x), Some(y)) => {
                let (details, runs_again) = resource_details(x, y);
                (Change::Changed, details, runs_again)
            }
            (None, None) => continue,
        };
        resources.push(ResourceChange {
            key: key.clone(),
            change,
            details,
            runs_again,
        });
    }
    BundleChange {
        old: a_id.to_string(),
        new: b_id.to_string(),
        hosts: Vec::new(),
        manifest,
        files,
        scripts: script_changes,
        resources,
    }
}

/// Every script of a manifest by its path in the bundle, with its sha256 (or keyed digest),
/// whether it is secret and whether it is sealed.
fn scripts(m: &Manifest) -> BTreeMap<String, (String, bool, bool)> {
    let mut out = BTreeMap::new();
    for r in &m.resources {
        for s in [&r.apply, &r.revert, &r.check].into_iter().flatten() {
            out.insert(
                s.path.clone(),
                (s.sha256.clone(), s.secret || s.sealed, s.sealed),
            );
        }
    }
    let others = m.triggers.iter().map(|t| &t.script);
    for s in others.chain(m.probes.iter().map(|p| &p.script)) {
        out.insert(
            s.path.clone(),
            (s.sha256.clone(), s.secret || s.sealed, s.sealed),
        );
    }
    out
}

/// What a diff shows of a secret's change: that it changed, told by the digests that name it,
/// and nothing of the content: no size, no hash. A sealed secret's keyed digest (`Some`) is
/// shown, as the manifest shows it, so that a review can tell which secret changed to what it
/// saw elsewhere (`bellc diff --values` names the value by the same key); a secret in the clear
/// is named by its plain sha256, which would confirm a guess: not shown.
fn secret_change(sealed_before: Option<&str>, sealed_after: Option<&str>) -> String {
    let short = |d: &str| d.get(..16).unwrap_or(d).to_string();
    match (sealed_before, sealed_after) {
        (None, Some(_)) => "secret content changed, and is now sealed to the host".to_string(),
        (Some(_), None) => "secret content changed, and is no longer sealed".to_string(),
        (Some(a), Some(b)) => format!("secret content changed: keyed {} → {}", short(a), short(b)),
        (None, None) => "secret content changed".to_string(),
    }
}

/// What changed about a resource, in words, and whether it is a run-once script that will run
/// again.
fn resource_details(x: &Resource, y: &Resource) -> (Vec<String>, bool) {
    let mut details = Vec::new();
    let list = |v: &[String]| format!("[{}]", v.join(", "));
    if x.after != y.after {
        details.push(format!("after {} → {}", list(&x.after), list(&y.after)));
    }
    if x.files != y.files {
        details.push(format!("files {} → {}", list(&x.files), list(&y.files)));
    }
    for (role, a, b) in [
        ("apply", &x.apply, &y.apply),
        ("revert", &x.revert, &y.revert),
        ("check", &x.check, &y.check),
    ] {
        match (a, b) {
            (None, Some(_)) => details.push(format!("{role} script added")),
            (Some(_), None) => details.push(format!("{role} script removed")),
            (Some(a), Some(b)) if a != b => details.push(format!("{role} script changed")),
            _ => {}
        }
    }
    if x.exec != y.exec {
        let show = |e: &Option<bell_bundle::ExecPolicy>| {
            e.as_ref()
                .map(|p| serde_json::to_string(p).unwrap_or_default())
                .unwrap_or_else(|| "none".to_string())
        };
        details.push(format!("exec policy {} → {}", show(&x.exec), show(&y.exec)));
    }
    if details.is_empty() {
        // Only the content, mode or owner of files it owns changed; they are listed above.
        details.push("its files changed".to_string());
    }
    // bell-run knows a script by its own definition (`Resource::exec_identity`): say whether
    // this change makes a script meant to run once run again, before a host finds out.
    let mut runs_again = false;
    if let Some(policy) = &y.exec {
        let rerun = match policy.rerun {
            bell_bundle::Rerun::OnceSuccessfully => Some("once-successfully"),
            bell_bundle::Rerun::Never => Some("never"),
            bell_bundle::Rerun::Always => None,
        };
        if let Some(rerun) = rerun {
            if x.exec_identity() != y.exec_identity() {
                runs_again = true;
                details.push(format!(
                    "runs again on every host that ran it: its script, arguments, environment \
                     or policy changed, and rerun=\"{rerun}\" counts that as a new script"
                ));
            } else {
                details.push(format!(
                    "does not run again: its own definition is unchanged (rerun=\"{rerun}\")"
                ));
            }
        }
    }
    (details, runs_again)
}

/// A unified diff of two contents, or a note in `details` when there is none to show.
fn unified(
    path: &str,
    before: Option<&[u8]>,
    after: Option<&[u8]>,
    details: &mut Vec<String>,
) -> Option<String> {
    let (Some(before), Some(after)) = (before, after) else {
        details.push("content unreadable on one side".to_string());
        return None;
    };
    let (Ok(before), Ok(after)) = (std::str::from_utf8(before), std::str::from_utf8(after)) else {
        details.push("binary content differs".to_string());
        return None;
    };
    let shown = path.trim_start_matches('/');
    let text = similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string();
    Some(text)
}

//! Emission: bundles in memory → the output directory. The only stage that writes to disk.
//!
//! Layout (a contract other tools rely on):
//!
//! ```text
//! OUT/release.json                 host → bundle id, rollout waves, release version
//! OUT/release.json.minisig         its minisign signature, when signed (`--sign-key`)
//! OUT/releases/<version>.json      every release OUT held (and its .minisig), kept until
//!                                  `bellc prune`, with the bundles they name
//! OUT/bundles/<id>/bundle.json     the manifest; <id> is its sha256
//! OUT/bundles/<id>/root/...        files at their host paths
//! OUT/bundles/<id>/scripts/...     apply / revert / trigger / exec scripts
//! OUT/hosts/<name>                 symlink → ../bundles/<id>
//! OUT/values/<id>.json             the values bundle <id> was rendered from (for review)
//! ```
//!
//! Bundles are content-addressed, so a bundle directory that already exists is already right
//! and is not rewritten; a new one is written under a temporary name and renamed into place,
//! so an interrupted build never leaves a half-written bundle under its final name.
//!
//! Creating files dominates the cost of a large build, and bundles share most of their files,
//! so every distinct content is written once into `OUT/.store/` and bundle files are hard links
//! to it. `OUT/hosts/<name>` stays a plain tree to read and rsync (`rsync -H` keeps the links).
//! Bundles and store files are written in parallel, host links one after another (they share
//! one directory's lock; see `link_hosts`); what is written does not depend on the order, so
//! the output is identical to a serial build.

use super::files::{io_err, prune_store, remove_any, EmitError};
use super::out_dir::Trust;
use crate::render::RenderedBundle;
use bell_bundle::Release;
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a write changed, for the CLI's summary and for tests of incremental rebuilds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteStats {
    pub bundles_written: usize,
    pub bundles_kept: usize,
    pub bundles_removed: usize,
    pub files_written: usize,
    pub links_written: usize,
    pub links_removed: usize,
    /// `values/<id>.json` files written (a new bundle's, or one found missing).
    pub values_written: usize,
    pub release_written: bool,
    /// Bundles that were on disk but differed from what their id says (changed by hand).
    pub bundles_repaired: usize,
}

pub fn write(
    out: &Path,
    bundles: &BTreeMap<String, RenderedBundle>,
    release: &Release,
) -> Result<WriteStats, EmitError> {
    write_with(out, bundles, release, Trust::Kept)
}

pub fn write_with(
    out: &Path,
    bundles: &BTreeMap<String, RenderedBundle>,
    release: &Release,
    trust: Trust,
) -> Result<WriteStats, EmitError> {
    let mut writer = BundleWriter::open(out, trust)?;
    writer.write(bundles.values())?;
    writer.finish(|id| bundles.contains_key(id), release)
}

/// Writes a build into OUT as its bundles come: [`BundleWriter::write`] for each batch of
/// distinct bundles (a streamed build hands them over a chunk at a time and drops them), then
/// [`BundleWriter::finish`] with the release, which links the hosts and removes what no
/// release needs any more; or [`BundleWriter::abandon`] when the build failed half-way.
pub struct BundleWriter {
    out: PathBuf,
    bundles_dir: PathBuf,
    hosts_dir: PathBuf,
    store_dir: PathBuf,
    trust: Trust,
    stats: WriteStats,
    /// Bundles this build created (not those it repaired), for `abandon`.
    created: Vec<PathBuf>,
    /// The thread that links new hosts, once [`BundleWriter::link_new`] was called.
    linker: Option<Linker>,
}

/// Links hosts on a thread of its own, as their chunks come: the render loop hands them over
/// and goes on (the first chunk holds the hosts of every group that begins early in the
/// inventory, at a million hosts nearly all of them).
struct Linker {
    send: std::sync::mpsc::Sender<Vec<(String, String)>>,
    thread: std::thread::JoinHandle<Linked>,
}

/// What the linker did: what `hosts/` held before it linked anything (every host of the
/// release not in it is linked now, unless it stopped on `error`), and how many links it
/// made.
struct Linked {
    found: Option<FoundLinks>,
    written: usize,
    error: Option<EmitError>,
}

impl Linker {
    fn start(hosts_dir: PathBuf) -> Linker {
        let (send, receive) = std::sync::mpsc::channel::<Vec<(String, String)>>();
        let thread = std::thread::spawn(move || {
            let found = match read_links(&hosts_dir) {
                Ok(found) => found,
                Err(error) => {
                    return Linked {
                        found: None,
                        written: 0,
                        error: Some(error),
                    }
                }
            };
            let mut written = 0;
            let mut link = hosts_dir;
            let mut target = PathBuf::from("../bundles");
            // After an error the rest is received and dropped: the build fails at `finish`.
            let mut error = None;
            for hosts in receive {
                for (name, bundle) in hosts {
                    if error.is_some() || found.contains_key(name.as_bytes()) {
                        continue;
                    }
                    link.push(&name);
                    target.push(&bundle);
                    match symlink(&target, &link) {
                        Ok(()) => written += 1,
                        Err(e) => error = Some(e),
                    }
                    link.pop();
                    target.pop();
                }
            }
            Linked {
                found: Some(found),
                written,
                error,
            }
        });
        Linker { send, thread }
    }

    /// Waits for every link handed over.
    fn finish(self) -> Linked {
        drop(self.send);
        self.thread.join().unwrap_or_else(|_| Linked {
            found: None,
            written: 0,
            error: Some(EmitError::Io {
                path: PathBuf::from("hosts"),
                source: io::Error::other("the thread linking hosts stopped"),
            }),
        })
    }
}

/// The entries of `hosts/` by name, and whether each is a symlink (only links are ours).
type FoundLinks = foldhash::HashMap<Vec<u8>, bool>;

fn read_links(hosts_dir: &Path) -> Result<FoundLinks, EmitError> {
    use std::os::unix::ffi::OsStrExt;
    let mut found = FoundLinks::default();
    for entry in fs::read_dir(hosts_dir).map_err(io_err(hosts_dir))? {
        let entry = entry.map_err(io_err(hosts_dir))?;
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        found.insert(entry.file_name().as_bytes().to_vec(), link);
    }
    Ok(found)
}

impl BundleWriter {
    /// Nothing is written until the first bundle (or `finish`): a build that fails before
    /// leaves OUT as it was.
    pub fn open(out: &Path, trust: Trust) -> Result<Self, EmitError> {
        Ok(BundleWriter {
            out: out.to_path_buf(),
            bundles_dir: out.join("bundles"),
            hosts_dir: out.join("hosts"),
            store_dir: out.join(STORE_DIR),
            trust,
            stats: WriteStats::default(),
            created: Vec::new(),
            linker: None,
        })
    }

    fn make_dirs(&self) -> Result<(), EmitError> {
        fs::create_dir_all(&self.bundles_dir).map_err(io_err(&self.bundles_dir))?;
        fs::create_dir_all(&self.hosts_dir).map_err(io_err(&self.hosts_dir))
    }

    /// Writes the bundles OUT lacks (or, under [`Trust::Verify`], holds differently), each
    /// distinct file content once into the store. Each bundle is given once per build.
    pub fn write<'b>(
        &mut self,
        bundles: impl IntoIterator<Item = &'b RenderedBundle>,
    ) -> Result<(), EmitError> {
        let bundles: Vec<&RenderedBundle> = bundles.into_iter().collect();
        self.make_dirs()?;
        let (bundles_dir, store_dir, trust) = (&self.bundles_dir, &self.store_dir, self.trust);
        // Content-addressed bundles that are already on disk are already right, unless OUT may
        // have been changed since it was written.
        let new: Vec<(&RenderedBundle, bool)> = bundles
            .par_iter()
            .filter_map(|bundle| {
                let dir = bundles_dir.join(&bundle.id);
                let absent = || fs::symlink_metadata(&dir).is_err();
                match trust {
                    Trust::Kept if dir.join(bell_bundle::MANIFEST_FILE).is_file() => None,
                    Trust::Kept => Some((*bundle, absent())),
                    Trust::Verify if bundle_matches(&dir, bundle) => None,
                    Trust::Verify => Some((*bundle, absent())),
                }
            })
            .collect();
        self.stats.bundles_kept += bundles.len() - new.len();
        if trust == Trust::Verify {
            self.stats.bundles_repaired += new.iter().filter(|(_, absent)| !absent).count();
        }

        // Every distinct file content is written once into the store; bundles hard-link to it.
        // Many bundles share most of their files, so this is most of the saving of a large
        // build. A content that is secret in any bundle is private in the store, and so in
        // every bundle that links to it: hard links share their mode.
        let mut distinct: BTreeMap<&str, (&[u8], bool)> = BTreeMap::new();
        for (bundle, _) in &new {
            let secret = bundle.manifest.secret_paths();
            for (rel, content) in &bundle.contents {
                let entry = distinct
                    .entry(bundle.sha256[rel].as_str())
                    .or_insert((content, false));
                entry.1 |= secret.contains(rel);
            }
        }
        let written: Vec<Result<bool, EmitError>> = distinct
            .par_iter()
            .map(|(sha, (content, secret))| {
                write_store_file(store_dir, sha, content, *secret, trust)
            })
            .collect();
        for result in written {
            if result? {
                self.stats.files_written += 1;
            }
        }
        let results: Vec<Result<usize, EmitError>> = new
            .par_iter()
            .map(|(bundle, _)| write_bundle(bundles_dir, store_dir, &bundle.id, bundle))
            .collect();
        for (result, (bundle, absent)) in results.into_iter().zip(&new) {
            self.stats.files_written += result?;
            self.stats.bundles_written += 1;
            if *absent {
                self.created.push(bundles_dir.join(&bundle.id));
            }
        }
        self.stats.values_written += super::values::write(&self.out, &bundles, trust)?;
        Ok(())
    }

    /// Links the hosts that have no entry in `hosts/` yet (every host of a cold build) to
    /// their bundles, as their chunk is written: at a million hosts the links take seconds,
    /// which are spent while the next chunk renders rather than after the last. A host that
    /// has an entry already is linked (or left) by [`BundleWriter::finish`], so that a build
    /// that fails changes no link a release named.
    pub fn link_new(&mut self, hosts: Vec<(String, String)>) -> Result<(), EmitError> {
        if hosts.is_empty() {
            return Ok(());
        }
        if self.linker.is_none() {
            self.make_dirs()?;
        }
        let hosts_dir = &self.hosts_dir;
        let linker = self
            .linker
            .get_or_insert_with(|| Linker::start(hosts_dir.clone()));
        // A thread that is gone panicked, which `finish` tells.
        let _ = linker.send.send(hosts);
        Ok(())
    }

    /// Takes back what this writer wrote, after a build that failed: the host links and the
    /// bundles it created and the store files only those bundles linked to. Bundles it
    /// repaired stay (they are right now), and nothing else of OUT was touched yet.
    pub fn abandon(mut self) -> Result<(), EmitError> {
        if let Some(linker) = self.linker.take() {
            use std::os::unix::ffi::OsStrExt;
            // What it linked, also before an error, is what `hosts/` holds now and did not.
            if let Some(found) = linker.finish().found {
                for (name, is_link) in read_links(&self.hosts_dir)? {
                    if is_link && !found.contains_key(&name) {
                        remove_any(&self.hosts_dir.join(std::ffi::OsStr::from_bytes(&name)))?;
                    }
                }
            }
        }
        if self.created.is_empty() {
            return Ok(());
        }
        for dir in &self.created {
            remove_any(dir)?;
        }
        super::values::prune(&self.out)?;
        prune_store(&self.store_dir)
    }

    /// Links every host of `release` to its bundle, keeps the release being replaced, removes
    /// hosts that left and bundles that neither `release` (whose bundles `is_written` says)
    /// nor a kept release names, and writes release.json.
    pub fn finish(
        self,
        is_written: impl Fn(&str) -> bool,
        release: &Release,
    ) -> Result<WriteStats, EmitError> {
        self.make_dirs()?;
        let BundleWriter {
            out,
            bundles_dir,
            hosts_dir,
            store_dir,
            mut stats,
            linker,
            ..
        } = self;
        let found_links = match linker {
            Some(linker) => {
                let linked = linker.finish();
                if let Some(error) = linked.error {
                    return Err(error);
                }
                stats.links_written += linked.written;
                linked.found
            }
            None => None,
        };
        let out = out.as_path();
        finish(
            out,
            &bundles_dir,
            HostLinks {
                dir: &hosts_dir,
                found: found_links,
            },
            &store_dir,
            &is_written,
            release,
            &mut stats,
        )?;
        Ok(stats)
    }
}

/// `hosts/`, and what it held before the linker thread linked the hosts it lacked.
struct HostLinks<'a> {
    dir: &'a Path,
    found: Option<FoundLinks>,
}

fn finish(
    out: &Path,
    bundles_dir: &Path,
    hosts: HostLinks,
    store_dir: &Path,
    is_written: &dyn Fn(&str) -> bool,
    release: &Release,
    stats: &mut WriteStats,
) -> Result<(), EmitError> {
    use super::files::remove_if_present;
    use super::releases::{keep, signature_path, write_atomic, RELEASE_FILE};

    // The release this build replaces is kept by version before anything of it goes. It is
    // read once: at a million hosts each parse takes a second.
    let release_path = out.join(RELEASE_FILE);
    let existing = fs::read(&release_path).ok().and_then(|bytes| {
        let parsed = serde_json::from_slice::<Release>(&bytes).ok()?;
        Some((bytes, parsed))
    });
    if let Some((bytes, existing)) = &existing {
        keep(out, &existing.version, existing.sequence, bytes)?;
    }
    // A signed release.json whose map and waves are this build's stays as it is (a rebuild
    // without `--sign-key` does not strip a signature); any other is replaced, and its
    // signature, which no longer matches, goes with it.
    let same = existing
        .as_ref()
        .is_some_and(|(_, existing)| existing.same_unsigned(release));
    drop(existing);

    // The release's text is made while the links are written: both take a while at scale.
    let (linked, json) = rayon::join(
        || link_hosts(hosts, release, stats),
        || (!same).then(|| release.to_json()),
    );
    linked?;

    let mut unused = Vec::new();
    for entry in fs::read_dir(bundles_dir).map_err(io_err(bundles_dir))? {
        let entry = entry.map_err(io_err(bundles_dir))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if !is_written(&name) && super::out_dir::is_bundle_name(&name) {
            unused.push((name, entry.path()));
        }
    }
    if !unused.is_empty() {
        // Read only when something might go: a large fleet's releases take a while to parse.
        let kept = super::releases::bundles_in_use(out)?;
        for (name, path) in unused {
            if !kept.contains(&name) {
                remove_any(&path)?;
                stats.bundles_removed += 1;
            }
        }
    }
    if stats.bundles_removed > 0 {
        prune_store(store_dir)?;
    }
    super::values::prune(out)?;

    if let Some(json) = json {
        remove_if_present(&signature_path(&release_path))?;
        write_atomic(&release_path, json.as_bytes())?;
        keep(out, &release.version, release.sequence, json.as_bytes())?;
        stats.release_written = true;
    }
    Ok(())
}

/// Points `hosts/<name>` at its bundle for every host of `release` and removes the links of
/// hosts that left it. With `hosts.found` (what `hosts/` held before [`BundleWriter::link_new`]
/// linked the hosts it lacked), a host not found there is linked already.
///
/// `hosts/` is read once up front, so a host that has no link yet (every host of a cold
/// build) is linked without looking it up. The links are made one after another: they all go
/// into one directory, whose lock lets one creation through at a time, and threads racing for
/// it spent more time waking each other than linking (a million hosts: 10 s in parallel on two
/// cores).
fn link_hosts(
    hosts: HostLinks,
    release: &Release,
    stats: &mut WriteStats,
) -> Result<(), EmitError> {
    use std::os::unix::ffi::OsStrExt;
    let hosts_dir = hosts.dir;
    let linked_new = hosts.found.is_some();
    let mut present = match hosts.found {
        Some(found) => found,
        None => read_links(hosts_dir)?,
    };
    let mut link = hosts_dir.to_path_buf();
    let mut target = PathBuf::from("../bundles");
    for (name, host) in &release.hosts {
        link.push(name);
        target.push(&host.bundle);
        let wrote = match present.remove(name.as_bytes()) {
            None if linked_new => false,
            None => {
                symlink(&target, &link)?;
                true
            }
            Some(true) if fs::read_link(&link).ok().as_deref() == Some(target.as_path()) => false,
            Some(_) => {
                remove_any(&link)?;
                symlink(&target, &link)?;
                true
            }
        };
        stats.links_written += usize::from(wrote);
        link.pop();
        target.pop();
    }
    // What is left are hosts that left the release.
    for (name, is_link) in present {
        if is_link {
            link.push(std::ffi::OsStr::from_bytes(&name));
            remove_any(&link)?;
            link.pop();
            stats.links_removed += 1;
        }
    }
    Ok(())
}

/// Where distinct file contents live, by sha256; bundle files are hard links into it.
pub const STORE_DIR: &str = ".store";

fn store_path(store: &Path, sha: &str) -> PathBuf {
    store.join(&sha[..2]).join(&sha[2..])
}

/// Writes one content into the store unless it is there; true when it wrote.
fn write_store_file(
    store: &Path,
    sha: &str,
    content: &[u8],
    secret: bool,
    trust: Trust,
) -> Result<bool, EmitError> {
    let path = store_path(store, sha);
    let intact = match trust {
        Trust::Kept => path.is_file(),
        Trust::Verify => {
            fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && fs::read(&path).is_ok_and(|bytes| bytes == content)
        }
    };
    if intact {
        if secret {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).map_err(io_err(&path))?;
        }
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(store);
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    // Written under a temporary name so that an interrupted build never leaves a store file
    // whose content does not match its name.
    let tmp = dir.join(format!(".tmp-{}", &sha[2..]));
    write_file(&tmp, content, secret)?;
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    Ok(true)
}

/// Writes a file, 0600 from its creation on when it is secret.
fn write_file(path: &Path, content: &[u8], secret: bool) -> Result<(), EmitError> {
    use std::io::Write;
    let _ = fs::remove_file(path);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)
        .map_err(io_err(path))?;
    file.write_all(content).map_err(io_err(path))
}

/// Writes one bundle under a temporary name and renames it into place; returns the number of
/// directory entries created (links and the manifest).
fn write_bundle(
    bundles_dir: &Path,
    store: &Path,
    id: &str,
    bundle: &RenderedBundle,
) -> Result<usize, EmitError> {
    let dir = bundles_dir.join(id);
    let tmp = bundles_dir.join(format!(".tmp-{id}"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io_err(&tmp))?;
    }
    // A bundle that manages nothing still has its directory and manifest.
    fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
    let mut created = 0;
    let mut made_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let secret = bundle.manifest.secret_paths();
    for (rel, content) in &bundle.contents {
        let path = tmp.join(rel);
        if let Some(parent) = path.parent() {
            if made_dirs.insert(parent.to_path_buf()) {
                fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
        }
        let source = store_path(store, &bundle.sha256[rel]);
        if fs::hard_link(&source, &path).is_err() {
            // A file system without hard links (or a store on another device) gets copies.
            write_file(&path, content, secret.contains(rel))?;
        }
        created += 1;
    }
    let manifest = tmp.join(bell_bundle::MANIFEST_FILE);
    fs::write(&manifest, &bundle.manifest_json).map_err(io_err(&manifest))?;
    created += 1;
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
    }
    fs::rename(&tmp, &dir).map_err(io_err(&dir))?;
    Ok(created)
}

fn symlink(target: &Path, link: &Path) -> Result<(), EmitError> {
    std::os::unix::fs::symlink(target, link).map_err(io_err(link))
}

/// Compares a build in memory with an existing output directory: the hosts whose bundle
/// differs (or is missing), and whether release.json differs.
pub fn check(
    out: &Path,
    bundles: &BTreeMap<String, RenderedBundle>,
    release: &Release,
) -> Vec<String> {
    let mut differing = Vec::new();
    let existing: Option<Release> = fs::read_to_string(out.join("release.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    for (name, host) in &release.hosts {
        let on_disk = fs::read_link(out.join("hosts").join(name)).ok();
        let expected = PathBuf::from("../bundles").join(&host.bundle);
        let same_link = on_disk.as_deref() == Some(expected.as_path());
        let bundle = &bundles[&host.bundle];
        let same_bundle = same_link
            && bundle_matches(&out.join("bundles").join(&host.bundle), bundle)
            && super::values::matches(out, bundle);
        let same_release = existing
            .as_ref()
            .and_then(|r| r.hosts.get(name))
            .is_some_and(|h| h == host);
        if !(same_bundle && same_release) {
            differing.push(name.clone());
        }
    }
    if let Some(existing) = &existing {
        for name in existing.hosts.keys() {
            if !release.hosts.contains_key(name) {
                differing.push(name.clone());
            }
        }
    }
    differing.sort();
    differing
}

/// Whether the directory holds exactly the bundle: its manifest, each file with its content,
/// nothing else, and no symlink (a hand-made link to /dev/zero is never read).
fn bundle_matches(dir: &Path, bundle: &RenderedBundle) -> bool {
    let regular = |path: &Path| fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    let manifest = dir.join(bell_bundle::MANIFEST_FILE);
    if !regular(&manifest)
        || fs::read(&manifest).ok().as_deref() != Some(bundle.manifest_json.as_bytes())
    {
        return false;
    }
    let same = bundle.contents.iter().all(|(rel, content)| {
        let path = dir.join(rel);
        regular(&path) && fs::read(&path).ok().as_deref() == Some(&content[..])
    });
    // Nothing more: every entry is a directory or one of the bundle's files.
    same && walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .count()
        == bundle.contents.len() + 1
}

//! `bellc serve`: the fleet's status in a browser, and the same data as JSON under
//! `/api/v1/`. Read-only: nothing here writes to the store or to OUT.
//!
//! The board follows the fleet's keys (`/bell/FLEET/`: reports, liveness leases, the
//! published release, the rollout's progress, the disruption budget's semaphores) through a
//! watch of its own ([`crate::fleet::follow`]), and a refresher thread turns what changed
//! every `refresh` seconds (and each etcd member's word on its health) into a [`Snapshot`]:
//! the first reading takes every key, each later one only the reports written since. Pages
//! are rendered from the newest snapshot. So a page costs no request to etcd however many
//! people look, a refresh costs what changed rather than the fleet, and while etcd is down
//! the pages go on answering from the last snapshot, saying since when the store has not
//! answered and why.
//!
//! The statuses are [`crate::fleet::status::fleet_status`]'s, the one `bellc status` prints:
//! `/api/v1/status` is `bellc status OUT --store … --json` as of the snapshot.

pub mod metrics;
pub mod pages;

use crate::fleet::rollout::{self, Progress};
use crate::fleet::status::{fleet_status, FleetStatus};
use crate::fleet::witness::Witness;
use bell_bundle::Release;
use bell_store::semaphore::{self, Group};
use bell_store::{Etcd, HostView};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot read the release of {out}: {reason}")]
    Release { out: String, reason: String },
    #[error("cannot listen on {address}: {reason}")]
    Listen { address: String, reason: String },
}

impl ServeError {
    pub fn help(&self) -> String {
        match self {
            ServeError::Release { .. } => "give the output directory of `bellc build` (it holds \
                 release.json), or the http:// URL that serves it to hosts"
                .to_string(),
            ServeError::Listen { .. } => {
                "another program may use that port; give another with `--listen ADDRESS:PORT`"
                    .to_string()
            }
        }
    }
}

/// One reading of the store, with the release it was compared with.
#[derive(Debug)]
pub struct Snapshot {
    pub release: Arc<Release>,
    /// The key id of the release's minisign signature, when OUT has one (not verified here:
    /// hosts verify; this says which key signed).
    pub signer: Option<String>,
    pub status: FleetStatus,
    /// Host name → its row in `status.hosts`.
    index: HashMap<String, usize>,
    /// Shared with the follower's: a refresh makes again only the views that changed.
    pub views: BTreeMap<String, Arc<HostView>>,
    pub groups: Vec<Group>,
    pub progress: Option<Progress>,
    /// Who runs the rollout controller now, if anyone.
    pub controller: Option<String>,
    /// The release version the store names (`bellc publish`, or the controller's wave).
    pub published: Option<String>,
    /// When that is this release but for held hosts (see
    /// [`crate::fleet::status::published_but_for_held`]): those hosts.
    pub published_but_for_held: Option<Vec<String>>,
    /// The fleet's last rollouts, newest first.
    pub history: Vec<crate::fleet::rollout::history::Entry>,
    /// When the store was read (unix seconds).
    pub read_at: u64,
    /// What could not be read of it (a progress key that is not a progress): shown, not fatal.
    pub warnings: Vec<String>,
}

impl Snapshot {
    pub fn host(&self, name: &str) -> Option<&crate::fleet::status::HostStatus> {
        self.index.get(name).map(|&i| &self.status.hosts[i])
    }
}

/// Why the store was not read, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    pub since: u64,
    pub error: String,
}

/// A build output: a directory, or the URL a web server serves it from to hosts (what
/// `bell-run pull` reads). Either way only its files are read: release.json, its signature,
/// and bundles' manifests and files for a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Dir(PathBuf),
    /// Without a trailing slash.
    Url(String),
}

/// What a path segment keeps as it is in a URL.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl Out {
    /// `http://…` is a URL (`https://` is refused: bellc speaks plain HTTP, as bell-run does;
    /// put a local proxy in between), anything else a directory.
    pub fn parse(text: &str) -> Result<Out, String> {
        if text.starts_with("http://") {
            Ok(Out::Url(text.trim_end_matches('/').to_string()))
        } else if text.contains("://") {
            Err(format!(
                "`{text}`: OUT is a directory or an http:// URL (for https, read through a \
                 local proxy)"
            ))
        } else {
            Ok(Out::Dir(PathBuf::from(text)))
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Out::Dir(dir) => dir.display().to_string(),
            Out::Url(url) => url.clone(),
        }
    }

    /// Its release.json.
    pub fn release(&self) -> Result<Release, String> {
        let bytes = self
            .read(bell_bundle::RELEASE_FILE)?
            .ok_or_else(|| format!("{} has no {}", self.describe(), bell_bundle::RELEASE_FILE))?;
        self.parse_release(&bytes)
    }

    fn parse_release(&self, bytes: &[u8]) -> Result<Release, String> {
        serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "{}/{} is not a bellc release: {e}",
                self.describe(),
                bell_bundle::RELEASE_FILE
            )
        })
    }

    /// A file of the output by its relative path (`/`-separated); `None` when there is none.
    pub fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, String> {
        match self {
            Out::Dir(dir) => match std::fs::read(dir.join(rel)) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("{}: {e}", dir.join(rel).display())),
            },
            Out::Url(base) => {
                let path: Vec<String> = rel
                    .split('/')
                    .map(|s| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string())
                    .collect();
                // A build output is read as a reader reads etcd: the 1 GiB and two minutes
                // (a release of a 100,000-host fleet is tens of MiB).
                let bounds =
                    bell_wire::etcd::Limits::READER.bounds("the web server did not answer in time");
                bell_wire::client::get(&format!("{base}/{}", path.join("/")), &bounds)
            }
        }
    }
}

/// The bundles of a build output, for a diff between the bundle a host runs and the one it
/// should (as `bellc diff` compares two outputs).
struct OutSide<'a> {
    out: &'a Out,
    release: &'a Release,
}

impl bellc_core::review::diff::Side for OutSide<'_> {
    fn release(&self) -> &Release {
        self.release
    }

    fn manifest(&self, id: &str) -> Result<bell_bundle::Manifest, String> {
        if !bell_bundle::is_bundle_id(id) {
            return Err(format!("`{id}` is not a bundle id"));
        }
        let rel = format!("bundles/{id}/{}", bell_bundle::MANIFEST_FILE);
        let bytes = self.out.read(&rel)?.ok_or_else(|| {
            format!(
                "bundle {} is not in {} (pruned, or built elsewhere)",
                bell_bundle::short_id(id),
                self.out.describe()
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{rel} is not UTF-8"))?;
        bell_bundle::Manifest::from_json(&text).map_err(|e| format!("{rel}: {e}"))
    }

    fn content(&self, id: &str, rel: &str) -> Option<Vec<u8>> {
        if !bell_bundle::is_bundle_id(id) || !bell_bundle::is_contained_relative(rel) {
            return None;
        }
        self.out.read(&format!("bundles/{id}/{rel}")).ok().flatten()
    }

    fn values(&self, id: &str) -> Result<bellc_core::render::values::BundleValues, String> {
        if !bell_bundle::is_bundle_id(id) {
            return Err(format!("`{id}` is not a bundle id"));
        }
        let rel = format!("{}/{id}.json", bellc_core::emit::out_dir::VALUES_DIR);
        let bytes = self
            .out
            .read(&rel)?
            .ok_or_else(|| format!("{rel} is not in {}", self.out.describe()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{rel}: {e}"))
    }
}

/// What the pages are rendered from: the newest snapshot and the store's health.
pub struct Board {
    out: Out,
    etcd: Etcd,
    refresh: Duration,
    current: RwLock<Option<Arc<Snapshot>>>,
    outage: Mutex<Option<Outage>>,
    refreshes: AtomicU64,
    took_ms: AtomicU64,
    /// OUT's release as last read, by the bytes it was read from.
    release: Mutex<Option<(Vec<u8>, Arc<Release>)>>,
    /// `--trust`: the release is shown only when one of these keys signed it.
    trust: Option<crate::fleet::trusted::TrustedKeys>,
    /// The fleet's keys, followed through a watch (started at the first reading, which
    /// names the fleet).
    follower: Mutex<Option<crate::fleet::follow::Follower>>,
    /// What was seen signed, so that a report put back is refused (opened at the first
    /// reading, which names the fleet).
    witness: Mutex<Option<Witness>>,
    /// The release's identities, by the release they were read from.
    identities: Mutex<Option<(Arc<Release>, Arc<bell_store::Identities>)>>,
    /// Each member of the store as it last answered about itself (read at every refresh,
    /// also when the fleet's keys could not be).
    members: Mutex<Vec<bell_store::members::Member>>,
    explain: Option<Explain>,
}

/// A host's resolved configuration with provenance (`bellc explain`), when the spec was given.
pub type Explain = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl Board {
    /// Reads OUT's release (an error when it cannot be: there is nothing to show without it).
    pub fn new(
        out: Out,
        etcd: Etcd,
        refresh: Duration,
        explain: Option<Explain>,
    ) -> Result<Board, ServeError> {
        Board::trusting(out, etcd, refresh, explain, None)
    }

    /// [`Board::new`] showing OUT's release only while a key of `trust` signed it.
    pub fn trusting(
        out: Out,
        etcd: Etcd,
        refresh: Duration,
        explain: Option<Explain>,
        trust: Option<crate::fleet::trusted::TrustedKeys>,
    ) -> Result<Board, ServeError> {
        let board = Board {
            trust,
            out,
            etcd,
            refresh,
            current: RwLock::new(None),
            outage: Mutex::new(None),
            refreshes: AtomicU64::new(0),
            took_ms: AtomicU64::new(0),
            release: Mutex::new(None),
            follower: Mutex::new(None),
            witness: Mutex::new(None),
            identities: Mutex::new(None),
            members: Mutex::new(Vec::new()),
            explain,
        };
        board.read_release()?;
        Ok(board)
    }

    pub fn out(&self) -> &Out {
        &self.out
    }

    /// What changes from bundle `old` to bundle `new`, both read from OUT.
    pub fn bundle_change(
        &self,
        release: &Release,
        old: &str,
        new: &str,
    ) -> Result<bellc_core::review::diff::BundleChange, String> {
        let side = OutSide {
            out: &self.out,
            release,
        };
        bellc_core::review::diff::bundle_change(&side, old, new)
    }

    /// The fleet of OUT's release as last read.
    pub fn fleet(&self) -> String {
        lock(&self.release)
            .as_ref()
            .map(|(_, release)| release.fleet.clone())
            .unwrap_or_default()
    }

    pub fn store_url(&self) -> String {
        self.etcd.url()
    }

    pub fn refresh_seconds(&self) -> u64 {
        self.refresh.as_secs().max(1)
    }

    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.current.read().ok().and_then(|s| s.clone())
    }

    /// Each member of the store, as the last refresh found it.
    pub fn members(&self) -> Vec<bell_store::members::Member> {
        lock(&self.members).clone()
    }

    pub fn outage(&self) -> Option<Outage> {
        lock(&self.outage).clone()
    }

    /// Reads of the store done so far (successful or not).
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::SeqCst)
    }

    /// Requests sent to etcd so far: the watch's (the range read once in pages, then one
    /// watch, made again only when it breaks), and per refresh one to learn etcd's revision
    /// and one per member for its health.
    pub fn requests(&self) -> u64 {
        self.etcd.requests()
    }

    pub fn has_spec(&self) -> bool {
        self.explain.is_some()
    }

    pub fn explain(&self, host: &str) -> Option<String> {
        self.explain.as_ref().and_then(|f| f(host))
    }

    /// OUT's release, parsed again only when its bytes changed (a new build into OUT). With
    /// `--trust`, verified at every reading: the mirror may swap it at any moment.
    fn read_release(&self) -> Result<Arc<Release>, ServeError> {
        let error = |reason: String| ServeError::Release {
            out: self.out.describe(),
            reason,
        };
        if let Some(keys) = &self.trust {
            let release = crate::fleet::trusted::verified_release(
                |rel| self.out.read(rel),
                &self.out.describe(),
                keys,
            )
            .map_err(error)?;
            let bytes = serde_json::to_vec(&release).map_err(|e| error(e.to_string()))?;
            return self.keep_release(bytes, || Ok(release));
        }
        let bytes = self
            .out
            .read(bell_bundle::RELEASE_FILE)
            .map_err(error)?
            .ok_or_else(|| error(format!("there is no {}", bell_bundle::RELEASE_FILE)))?;
        self.keep_release(bytes.clone(), || {
            self.out.parse_release(&bytes).map_err(error)
        })
    }

    /// The release kept for `bytes`, or the one `parse` makes, kept from now on.
    fn keep_release(
        &self,
        bytes: Vec<u8>,
        parse: impl FnOnce() -> Result<Release, ServeError>,
    ) -> Result<Arc<Release>, ServeError> {
        let mut kept = lock(&self.release);
        if let Some((old, release)) = kept.as_ref() {
            if *old == bytes {
                return Ok(Arc::clone(release));
            }
        }
        let release = Arc::new(parse()?);
        *kept = Some((bytes, Arc::clone(&release)));
        Ok(release)
    }

    /// The identities `release` gives its hosts, parsed once per release.
    fn identities_of(&self, release: &Arc<Release>) -> Arc<bell_store::Identities> {
        let mut kept = lock(&self.identities);
        if let Some((of, identities)) = kept.as_ref() {
            if Arc::ptr_eq(of, release) {
                return Arc::clone(identities);
            }
        }
        let identities = Arc::new(bell_store::identities_of(release));
        *kept = Some((Arc::clone(release), Arc::clone(&identities)));
        identities
    }

    /// One reading: OUT's release, what changed in the fleet's keys since the last (see
    /// [`crate::fleet::follow`]), and each member of the store asked about itself (one
    /// request per member, all at once).
    /// How long the follower's last reading of the whole fleet from etcd took (a benchmark
    /// tells it apart from the checking that follows).
    pub fn last_listing(&self) -> Option<Duration> {
        lock(&self.follower).as_ref().map(|f| f.last_listing())
    }

    pub fn refresh(&self, now: u64) {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        let started = std::time::Instant::now();
        *lock(&self.members) = bell_store::members::members(&self.etcd);
        let read = self.read(now);
        let took = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.took_ms.store(took, Ordering::SeqCst);
        match read {
            Ok(snapshot) => {
                if let Ok(mut current) = self.current.write() {
                    *current = Some(Arc::new(snapshot));
                }
                *lock(&self.outage) = None;
            }
            Err(error) => {
                let mut outage = lock(&self.outage);
                let since = outage.as_ref().map_or(now, |o| o.since);
                *outage = Some(Outage { since, error });
            }
        }
    }

    fn read(&self, now: u64) -> Result<Snapshot, String> {
        let release = self.read_release().map_err(|e| e.to_string())?;
        let fleet = release.fleet.clone();
        bell_store::check_name("fleet", &fleet)?;
        let identities = self.identities_of(&release);
        let mut warnings = Vec::new();
        let mut following = lock(&self.follower);
        {
            let mut witness = lock(&self.witness);
            if following.as_ref().map(|f| f.fleet()) != Some(fleet.as_str()) {
                // The reports checked before, from the witness, or from its digests alone
                // when it is not open yet: it is opened while etcd reads the range.
                let checked_before = match witness.as_ref() {
                    Some(witness) => witness.checked_before(),
                    None => Witness::kept_checked(&fleet),
                };
                *following = Some(crate::fleet::follow::Follower::start_checking(
                    self.etcd.clone(),
                    &fleet,
                    Arc::clone(&identities),
                    checked_before,
                )?);
            }
            let witness = witness.get_or_insert_with(|| {
                Witness::open(&fleet)
                    .map(|w| w.saving_every(Duration::from_secs(30)))
                    .unwrap_or_else(|e| {
                        eprintln!("warning: {e}; what is seen now is kept in memory only");
                        Witness::default()
                    })
            });
            let follower = following.as_mut().ok_or("no follower")?;
            follower.read(&release, &identities, witness, now)?;
            if let Err(e) = witness.save_behind() {
                warnings.push(e);
            }
        }
        let follower = following.as_ref().ok_or("no follower")?;
        let views = follower.views().clone();
        let kvs = follower.others();
        let groups = semaphore::groups_from(kvs, &semaphore::default_prefix(&fleet))
            .unwrap_or_else(|e| {
                warnings.push(e);
                Vec::new()
            });
        let value_of = |key: String| kvs.iter().find(|kv| kv.key == key).map(|kv| &kv.value);
        let progress = value_of(bell_store::keys::progress_key(&fleet)).and_then(|bytes| {
            rollout::parse_progress(&fleet, bytes)
                .map_err(|e| warnings.push(e.to_string()))
                .ok()
        });
        let controller = value_of(bell_store::keys::controller_key(&fleet))
            .map(|b| String::from_utf8_lossy(b).into_owned());
        let published = bell_store::published_from(&fleet, kvs);
        let holds = bell_store::hold::holds_in(&fleet, kvs);
        let published_but_for_held = published
            .as_ref()
            .filter(|p| p.version != release.version)
            .and_then(|p| crate::fleet::status::published_but_for_held(&release, p, &holds));
        let published = published.map(|p| p.version);
        let mut status = fleet_status(&release, &views, now, None);
        if let Some(p) = &progress {
            // As `bellc status` tells it, so that `/api/v1/status` stays its JSON.
            rollout::note_progress(&mut status, p);
        }
        status.note_holds(&holds);
        status.note_discovered(&crate::fleet::enroll::pending(
            &release,
            &bell_store::discovery::filed_in(&fleet, kvs),
            &bell_store::discovery::rejections_in(&fleet, kvs),
        ));
        // A release a mirror served, unverified: its identities are that server's word.
        if let (Out::Url(url), None) = (&self.out, &self.trust) {
            status.mark_unverified(&crate::fleet::trusted::read_unverified(url));
        }
        let index = index(&status);
        let signer = self
            .out
            .read(&format!("{}.minisig", bell_bundle::RELEASE_FILE))
            .ok()
            .flatten()
            .and_then(|bytes| bellc_core::emit::signing::signer(&String::from_utf8_lossy(&bytes)));
        Ok(Snapshot {
            release,
            signer,
            status,
            index,
            views,
            groups,
            progress,
            controller,
            published,
            published_but_for_held,
            history: crate::fleet::rollout::history::entries_in(&fleet, kvs),
            read_at: now,
            warnings,
        })
    }

    /// Refreshes every `refresh` until the process ends, or less often when reading takes
    /// long (the first reading of a large fleet takes seconds: every report is checked), so
    /// that the refresher never keeps a core busy more than a third of the time.
    pub fn keep_refreshing(self: Arc<Self>) {
        std::thread::spawn(move || loop {
            let took = Duration::from_millis(self.took_ms.load(Ordering::SeqCst));
            std::thread::sleep(self.refresh.max(took * 2));
            self.refresh(unix_now());
        });
    }

    /// How long the last reading took.
    pub fn took(&self) -> Duration {
        Duration::from_millis(self.took_ms.load(Ordering::SeqCst))
    }
}

/// Host name → its row.
fn index(status: &FleetStatus) -> HashMap<String, usize> {
    status
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (h.host.clone(), i))
        .collect()
}

/// A poisoned lock only means another thread panicked while holding it; the data is still
/// what it was.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::Out;

    #[test]
    fn out_is_a_directory_or_an_http_url() {
        assert_eq!(
            Out::parse("http://mirror:8080/lab/").unwrap(),
            Out::Url("http://mirror:8080/lab".into())
        );
        assert_eq!(Out::parse("out").unwrap(), Out::Dir("out".into()));
        assert!(Out::parse("https://mirror/lab")
            .unwrap_err()
            .contains("proxy"));
        assert!(Out::parse("ftp://mirror/lab").is_err());
    }

    #[test]
    fn a_url_path_is_percent_encoded_segment_by_segment() {
        // Nothing listens on port 9 of loopback: the request is refused after it was built,
        // so the error names the URL as sent.
        let out = Out::Url("http://127.0.0.1:9/o".into());
        let error = out.read("bundles/ab/root/etc/a b?#%.conf").unwrap_err();
        assert!(
            error.contains("http://127.0.0.1:9/o/bundles/ab/root/etc/a%20b%3F%23%25.conf"),
            "{error}"
        );
    }
}

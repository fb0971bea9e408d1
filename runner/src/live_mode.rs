//! `bell-run live`: the small long-running mode of the live layer, beside the pull timer.
//!
//! On a provider it runs the bundle's health probes every `--every` seconds and files its
//! health (signed) when the outcome changes, so that its consumers learn of a failing probe
//! within seconds rather than at its next pull. On a consumer it reads its live files'
//! providers (a long-poll at the fleet's gateway, or a read every `--every` seconds straight
//! from etcd), and when a file's ready set has changed and been still for the file's `wait
//! min` (or changed first `wait max` ago), renders it and runs the file's apply (which puts it
//! in place and reloads), under the host's lock so that it never interleaves with a pull.
//! What it follows is the applied generation, read again each round: a pull that applies a
//! new release changes what it renders without a restart.

use crate::apply;
use crate::context::Ctx;
use crate::health::ProbeOutcome;
use crate::live;
use crate::report;
use crate::rootfs::Root;
use crate::state;
use bell_bundle::Manifest;
use bell_store::ready::Readiness;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Options {
    pub root: PathBuf,
    pub host: Option<String>,
    /// The fleet's store (`etcd[s]://…`, the gateway's included).
    pub store: String,
    pub access: bell_store::Access,
    /// At a gateway: long-poll for a change of the providers' keys instead of reading them
    /// every `every`.
    pub gateway: bool,
    /// How often the probes run and the providers are read (without a gateway).
    pub every: Duration,
    /// The key reports are signed with when it is not the root's (`--identity`).
    pub identity: Option<PathBuf>,
}

/// How often the probes run and the store is read unless `--every` says otherwise.
pub const DEFAULT_EVERY: u64 = 2;

/// How long a consumer that provides nothing waits at the gateway for a change at most.
const LONG_POLL: u64 = 30;

/// A live file's ready set that differs from the one rendered: since when, and since when it
/// is what it is now (the quiescence window's two clocks).
struct Pending {
    first: Instant,
    last: Instant,
    ready: Vec<String>,
}

struct Follower {
    /// By path: the providers each file was last rendered with.
    rendered: BTreeMap<String, Vec<String>>,
    pending: BTreeMap<String, Pending>,
    /// The outcome last filed: the failing probes (`None`: nothing filed yet).
    filed: Option<Vec<String>>,
    newest: BTreeMap<String, u64>,
}

pub fn run(opts: &Options) -> Result<(), String> {
    let root = crate::statedir::open_root(&opts.root).map_err(|r| r.message)?;
    let host = crate::report::host_name(opts.host.as_deref(), &root.dir)?;
    let limits = bell_wire::etcd::Limits {
        request: opts.every.max(Duration::from_secs(LONG_POLL)) + Duration::from_secs(15),
        ..bell_wire::etcd::Limits::HOST
    };
    let store = bell_store::Store::open(&opts.store, &opts.access)?.with_limits(limits);
    let bell_store::Store::Etcd(etcd) = &store else {
        return Err(format!(
            "`{}` is not an etcd store: live files follow the fleet's store",
            opts.store
        ));
    };
    let mut follower = Follower {
        rendered: BTreeMap::new(),
        pending: BTreeMap::new(),
        filed: None,
        newest: BTreeMap::new(),
    };
    let mut loaded = false;
    let mut next_probe = Instant::now();
    let mut said_idle = false;
    loop {
        let Some((generation, manifest)) = applied(&root) else {
            if !said_idle {
                errln!("bell-run live: nothing is applied yet; waiting for the first apply");
                said_idle = true;
            }
            std::thread::sleep(opts.every);
            continue;
        };
        said_idle = false;
        let ctx = Ctx {
            root: &root,
            offline: root.dir != std::path::Path::new("/"),
            timeout: Duration::from_secs(apply::DEFAULT_SCRIPT_TIMEOUT),
            now: state::now(),
            boot: state::boot_id(),
            clock: None,
            store: None,
        };
        if !loaded {
            follower.newest = live::load_newest(&ctx);
            loaded = true;
        }
        let bundle = state::generation_dir(&root, &generation);
        let between = report::Between {
            host: &host,
            manifest: &manifest,
            generation: &generation,
            release: state::load(&root).ok().and_then(|s| s.release),
            identity: opts.identity.as_deref(),
        };
        if Instant::now() >= next_probe {
            next_probe = Instant::now() + opts.every;
            if !manifest.provides.is_empty() {
                follower.probe(&ctx, &store, &between, &bundle);
            }
        }
        // A provider wakes for its next probe; a consumer at a gateway only when its
        // providers' keys change (or after a long-poll's round, to see a new generation), and
        // one reading etcd every `--every`.
        let mut wake = match (manifest.provides.is_empty(), opts.gateway) {
            (false, _) => next_probe,
            (true, true) => Instant::now() + Duration::from_secs(LONG_POLL),
            (true, false) => Instant::now() + opts.every,
        };
        if !manifest.live.is_empty() {
            match follower.follow(&ctx, &store, etcd, &between, &bundle) {
                Ok((revision, due)) => {
                    if let Some(due) = due {
                        wake = wake.min(due);
                    }
                    if opts.gateway {
                        let keys = live::provider_keys(&manifest);
                        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
                        let left = wake.saturating_duration_since(Instant::now());
                        if left.as_secs() >= 1 {
                            // Woken by a change, or at the round's end; a gateway that
                            // cannot be waited at is read again after the round, as etcd is.
                            match etcd.wait_for_change(&names, revision, left.as_secs()) {
                                Ok(_) => continue,
                                Err(e) => errln!("bell-run live: cannot wait at the gateway: {e}"),
                            }
                        }
                    }
                }
                Err(e) => errln!("bell-run live: cannot read the providers: {e}"),
            }
        }
        std::thread::sleep(
            wake.saturating_duration_since(Instant::now())
                .min(opts.every),
        );
    }
}

/// The applied generation and its manifest, as bell-run's own copy holds them.
fn applied(root: &Root) -> Option<(String, Manifest)> {
    let state = state::load(root).ok()?;
    let generation = state.generation?;
    let dir = state::generation_dir(root, &generation);
    let text = crate::rootfs::read_record(&dir.join(bell_bundle::MANIFEST_FILE))
        .ok()
        .flatten()?;
    Some((generation, Manifest::from_json(&text).ok()?))
}

impl Follower {
    /// Runs the probes (when no other bell-run holds the host) and files the health when
    /// what fails changed.
    fn probe(
        &mut self,
        ctx: &Ctx,
        store: &bell_store::Store,
        of: &report::Between,
        bundle: &std::path::Path,
    ) {
        let Some(_lock) = apply::lock_for_live(ctx.root) else {
            return;
        };
        let outcomes: Vec<ProbeOutcome> =
            crate::health::run_probes(ctx, of.manifest, bundle, of.generation);
        let failing: Vec<String> = outcomes
            .iter()
            .filter(|o| !o.healthy)
            .map(|o| o.name.clone())
            .collect();
        if self.filed.as_ref() == Some(&failing) {
            return;
        }
        match report::file_health(store, ctx.root, of, &outcomes) {
            Ok(()) => {
                match failing.is_empty() {
                    true => outln!("health: healthy, filed"),
                    false => outln!("health: {} failing, filed", failing.join(", ")),
                }
                self.filed = Some(failing);
            }
            Err(e) => errln!("bell-run live: the health was not filed: {e}"),
        }
    }

    /// Reads the providers once, renders and applies each live file that is due; the store's
    /// revision it read at, and when a file waiting out its window is due next.
    fn follow(
        &mut self,
        ctx: &Ctx,
        store: &bell_store::Store,
        etcd: &bell_store::Etcd,
        of: &report::Between,
        bundle: &std::path::Path,
    ) -> Result<(i64, Option<Instant>), String> {
        let (manifest, generation) = (of.manifest, of.generation);
        let (revision, judged) = live::read(etcd, manifest, &mut self.newest)?;
        live::save_newest(ctx, &self.newest);
        let now = Instant::now();
        let mut next_due: Option<Instant> = None;
        // Whether a file was put in place (or failed to be) this round, and why the last
        // that failed did.
        let mut tried = false;
        let mut failed = None;
        for file in &manifest.live {
            let (ready, _) = live::split(file, &judged);
            let rendered = self
                .rendered
                .entry(file.path.clone())
                .or_insert_with(|| live::kept(ctx, file));
            if *rendered == ready {
                self.pending.remove(&file.path);
                continue;
            }
            let pending = self.pending.entry(file.path.clone()).or_insert(Pending {
                first: now,
                last: now,
                ready: ready.clone(),
            });
            if pending.ready != ready {
                pending.last = now;
                pending.ready = ready.clone();
            }
            let due = (pending.last + Duration::from_secs(file.wait_min))
                .min(pending.first + Duration::from_secs(file.wait_max));
            if now < due {
                next_due = Some(next_due.map_or(due, |d| d.min(due)));
                continue;
            }
            match apply_file(ctx, manifest, bundle, generation, file, &ready, &judged) {
                Some(Ok(())) => {
                    tried = true;
                    self.pending.remove(&file.path);
                    self.rendered.insert(file.path.clone(), ready);
                }
                Some(Err(e)) => {
                    tried = true;
                    errln!("live {}: {}", file.path, bell_bundle::one_line(&e));
                    failed = Some(format!("{}: {}", file.path, bell_bundle::one_line(&e)));
                    // Tried again after its window, not at once.
                    self.pending.insert(
                        file.path.clone(),
                        Pending {
                            first: now,
                            last: now,
                            ready,
                        },
                    );
                }
                // Another bell-run holds the host: the next round.
                None => {}
            }
        }
        if tried {
            // What each file lists now, for `bellc status` and the page, between pulls.
            let listed = live::listed(ctx, manifest, &self.rendered);
            if let Err(e) = report::file_live(store, ctx.root, of, listed, failed) {
                errln!("bell-run live: what the live files list was not filed: {e}");
            }
        }
        Ok((revision, next_due))
    }
}

/// Renders one live file and runs its apply, under the host's lock; `None` when another
/// bell-run holds it.
fn apply_file(
    ctx: &Ctx,
    manifest: &Manifest,
    bundle: &std::path::Path,
    generation: &str,
    file: &bell_bundle::live::Live,
    ready: &[String],
    judged: &BTreeMap<String, Readiness>,
) -> Option<Result<(), String>> {
    let _lock = apply::lock_for_live(ctx.root)?;
    let (_, out) = live::split(file, judged);
    let out: Vec<String> = out
        .iter()
        .map(|(host, why)| format!("{host} ({why})"))
        .collect();
    let listed = match ready.is_empty() {
        true => "none ready".to_string(),
        false => ready.join(", "),
    };
    let result = (|| {
        if !live::stage(ctx, file, ready)? {
            return Ok(());
        }
        let key = format!("{}:{}", bell_bundle::live::KIND, file.path);
        let resource = manifest
            .resources
            .iter()
            .find(|r| r.key() == key)
            .ok_or_else(|| format!("the bundle has no resource {key}"))?;
        let script = resource
            .apply
            .as_ref()
            .ok_or_else(|| format!("{key} has no apply script"))?;
        let (exit, log) =
            apply::run::run_apply(ctx, manifest, bundle, generation, resource, script);
        if exit.ok() {
            return Ok(());
        }
        let output = crate::rootfs::read_tail(&log, 64 * 1024).unwrap_or_default();
        Err(match crate::context::last_reason(&output) {
            Some(reason) => format!("{}: {reason}", exit.describe()),
            None => exit.describe(),
        })
    })();
    if result.is_ok() {
        outln!(
            "live {} ({}): {listed}{}",
            file.path,
            file.service,
            match out.is_empty() {
                true => String::new(),
                false => format!("; {}", bell_bundle::one_line(&out.join(", "))),
            }
        );
    }
    Some(result)
}

//! One apply, stage by stage: verify, plan, revert departed resources, switch files, run
//! triggers, run applies (and due exec scripts), record the generation. Each stage lives in
//! its own module; this one only orders them and keeps the promise that a refusal changes
//! nothing.

use crate::accounts::Accounts;
use crate::confine;
use crate::context::{last_reason, load_generation, Ctx, Outcome, Placement, Refusal};
use crate::exec;
use crate::failpoint;
use crate::health::ProbeOutcome;
use crate::journal::{self, Switched};
use crate::plan::{self, Change, Plan};
use crate::revert::revert;
use crate::rootfs::Root;
use crate::scripts::{self, Exit, Invocation};
use crate::state::{self, ExecRecord, HistoryEntry, Pending, ResourceRecord, Running, State};
use crate::triggers::{fired_triggers, run_trigger};
use bell_bundle::{Manifest, Resource};
use bell_store::Status;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod batch;
pub(crate) mod run;
use run::run_resources;

/// Seconds a resource's script may run unless `--timeout` says otherwise.
pub const DEFAULT_SCRIPT_TIMEOUT: u64 = 900;

#[derive(Clone)]
pub struct Options {
    pub root: PathBuf,
    pub offline: bool,
    pub dry_run: bool,
    /// Timeout of generated apply, revert and trigger scripts (exec scripts carry their own).
    pub script_timeout: u64,
    /// The release the bundle came with (`--release`, or the one `pull` verified), recorded
    /// so that later runs (`check`, the timer's re-apply) report it.
    pub release: Option<String>,
    /// Report where the time went (`--timings`).
    pub timings: bool,
    /// The bundle's sealed secrets, as `pull` fetched them; `None` for a bundle applied from
    /// a directory (they are read from beside it, `OUT/secrets/`).
    pub sealed: Option<crate::sealed::Sealed>,
    /// The key that opens sealed secrets, for an image whose own key is not in its root yet
    /// (`--identity FILE`); otherwise the root's.
    pub identity: Option<PathBuf>,
    /// The first apply after a reboot bell-run made: the bundle's `after-boot` hook runs
    /// before the health probes, as one of them, once the reasons for the reboot are gone.
    pub after_boot: bool,
    /// The fleet's store, whose providers' health the live files are rendered from (a pull's);
    /// `None`: each live file keeps the providers it was rendered with.
    pub live_store: Option<std::sync::Arc<bell_store::Store>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The id of the bundle as built (`bellc hosts` and the release name it): what the header
    /// of every apply names.
    pub bundle: String,
    /// The id of what this apply makes current: the bundle's, or, baked without the host's
    /// key, that of the bundle without what needs its secrets (see `needs_secrets`).
    pub generation: String,
    pub root: String,
    pub offline: bool,
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<String>,
    pub plan: Plan,
    pub reverts: Vec<Outcome>,
    pub files: Switched,
    pub triggers: Vec<Outcome>,
    pub resources: Vec<Outcome>,
    /// The live files, and the providers each was rendered with.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<crate::live::Rendered>,
    /// Resources created, changed, retried, put back or departed.
    pub changed: usize,
    /// Resources whose apply needs a live host (exit `EXIT_DEFERRED` offline).
    pub deferred: usize,
    /// Resources left out of an image baked without the host's key, since they need its
    /// sealed secrets (and those that depend on them): the first apply with the key does them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs_secrets: Vec<String>,
    /// Of `changed`: resources the bundle did not change whose files had drifted on the host,
    /// put back by this apply.
    pub repaired: usize,
    /// Resources, reverts and triggers that did not succeed.
    pub failed: Vec<String>,
    /// Resources whose check script found the live value drifted (they were applied again),
    /// and managed files that had changed on disk (they were put back).
    pub drift: Vec<bell_store::Drift>,
    /// The bundle's health probes, run after a clean apply (a failed one is not healthy
    /// whatever they say, so they are not run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<ProbeOutcome>,
    /// Why the host needs a reboot (a change that takes effect at boot, the target's own
    /// signal); empty when it does not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reboot_required: Vec<String>,
    /// The applied manifest, for reports and metrics.
    #[serde(skip)]
    pub manifest: Manifest,
    /// Where the time went, with `--timings`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<crate::timings::Timings>,
}

/// Everything read-only that must hold before anything is touched.
struct Checked {
    root: Root,
    /// As the host sees it: sealed entries opened ([`Manifest::opened`]).
    manifest: Manifest,
    id: String,
    /// The bundle's own id, which `id` differs from when `needs_secrets` is not empty.
    bundle_id: String,
    /// The plaintext of each sealed entry the bundle directory lacks, by bundle path: put
    /// into bell-run's copy before anything runs from it.
    opened: BTreeMap<String, Vec<u8>>,
    /// Baked without the host's key: the `KIND:NAME` of each resource left out (see
    /// [`Manifest::without_sealed`]); `manifest` and `id` are then those of what is left,
    /// which bell-run's copy holds as its `bundle.json`.
    needs_secrets: Vec<String>,
}

fn check(bundle: &Path, opts: &Options) -> Result<Checked, Refusal> {
    let manifest = bell_bundle::verify_dir(bundle).map_err(|e| {
        use bell_bundle::{FormatError, VerifyError};
        let help = match e {
            // Not damage: this bell-run is older than the bellc that built the bundle.
            VerifyError::Format(FormatError::UnknownFormat(_) | FormatError::UnknownField(_)) => {
                "install the bell-run of the bellc release that built the bundle \
                 (`runner/build-static`) and apply again; nothing was changed"
            }
            _ => "rebuild the bundle with `bellc build` and copy it again; nothing was changed",
        };
        Refusal::new(format!(
            "the bundle {} does not verify: {e}",
            bundle.display()
        ))
        .help(help)
    })?;
    // Also checks bell-run's own directory, for every command alike.
    let root = crate::statedir::open_root(&opts.root)?;
    // The id is the sealed manifest's, never the opened view's; without what needs the
    // secrets, it is that manifest's own.
    let sealed_id = manifest.id();
    let opened = open_sealed(bundle, manifest, &root, opts)?;
    let id = match opened.needs_secrets.is_empty() {
        true => sealed_id.clone(),
        false => opened.manifest.id(),
    };
    Ok(Checked {
        root,
        manifest: opened.manifest,
        id,
        bundle_id: sealed_id,
        opened: opened.plaintext,
        needs_secrets: opened.needs_secrets,
    })
}

/// The bundle's sealed secrets, opened with the host's key (or `--identity`): the manifest as
/// the host sees it, and each plaintext the bundle directory lacks. A bundle that bell-run
/// opened before (its own copy) holds them already. An image baked without the key (offline,
/// none in the root, no `--identity`) gets the bundle without what needs them, and their
/// names: its first apply with the key, a different bundle id, does the rest.
fn open_sealed(
    bundle: &Path,
    manifest: Manifest,
    root: &Root,
    opts: &Options,
) -> Result<Opened, Refusal> {
    let whole = |manifest: Manifest, plaintext: BTreeMap<String, Vec<u8>>| Opened {
        manifest,
        plaintext,
        needs_secrets: Vec::new(),
    };
    let sealed_paths = manifest.sealed();
    if sealed_paths.is_empty() {
        return Ok(whole(manifest, BTreeMap::new()));
    }
    if sealed_paths.keys().all(|rel| bundle.join(rel).is_file()) {
        let opened = bell_bundle::opened_in(manifest, bundle)
            .map_err(|e| Refusal::new(format!("cannot read an opened secret: {e}")))?;
        return Ok(whole(opened, BTreeMap::new()));
    }
    let key = match &opts.identity {
        Some(file) => crate::identity::load_file(file).map_err(Refusal::new)?,
        None => match crate::identity::load(root).map_err(Refusal::new)? {
            Some(found) => found.key,
            None if opts.offline => {
                return Ok(match manifest.without_sealed() {
                    Some((manifest, needs_secrets)) => Opened {
                        manifest,
                        plaintext: BTreeMap::new(),
                        needs_secrets,
                    },
                    None => whole(manifest, BTreeMap::new()),
                });
            }
            None => {
                return Err(Refusal::new(format!(
                    "the bundle holds secrets sealed to its host, and {} has no key to open \
                     them ({} or {})",
                    root.dir.display(),
                    crate::identity::SSH_HOST_KEY,
                    crate::identity::BELL_KEY
                ))
                .help(
                    "give the host's key with `--identity FILE` (or bake an image with \
                     `--offline`, which leaves what needs them to the first apply with the \
                     key); nothing was changed",
                ))
            }
        },
    };
    let sealed = match &opts.sealed {
        Some(sealed) => sealed.clone(),
        None => crate::sealed::beside(bundle, &manifest)?.ok_or_else(|| {
            Refusal::new(format!(
                "the bundle {} holds secrets sealed to its host, and they are not beside it",
                bundle.display()
            ))
            .help(
                "apply it as OUT/hosts/NAME from the build output (its sealed files are in \
                 OUT/secrets/NAME/), or with `bell-run pull`; nothing was changed",
            )
        })?,
    };
    let opened = crate::sealed::open(&manifest, &sealed, &key)?;
    let view = manifest
        .opened(|rel| {
            opened
                .get(rel)
                .map(|plain| (bell_bundle::sha256_hex(plain), plain.len() as u64))
        })
        .map_err(|rel| Refusal::new(format!("the sealed secret for {rel} was not opened")))?;
    Ok(whole(view, opened))
}

/// What [`open_sealed`] makes of a bundle.
struct Opened {
    /// As the host sees it (see [`Checked::manifest`]).
    manifest: Manifest,
    /// See [`Checked::opened`].
    plaintext: BTreeMap<String, Vec<u8>>,
    /// See [`Checked::needs_secrets`].
    needs_secrets: Vec<String>,
}

/// The manifest of the generation applied last, from bell-run's verified copy; when that is
/// the bundle being applied (a re-apply), the bundle's own manifest: the id is the manifest's
/// sha256, so they are the same, and the copy is not hashed a second time.
fn previous_manifest(
    root: &Root,
    state: &State,
    current: &Manifest,
    current_id: &str,
) -> Option<Manifest> {
    let id = state.generation.as_ref()?;
    if id == current_id {
        return Some(current.clone());
    }
    bell_bundle::verify_opened(&state::generation_dir(root, id)).ok()
}

/// The plan for `manifest`, whose id (its sha256, computed when it was verified) is `id`.
fn make_plan(root: &Root, manifest: &Manifest, id: &str, state: &State) -> Result<Plan, Refusal> {
    if let Some(missing) = crate::accounts::missing_databases(&root.dir, manifest) {
        return Err(Refusal::new(missing).help(
            "copy them from the image's base (debootstrap makes them); nothing was changed",
        ));
    }
    let accounts = Accounts::load(&root.dir);
    let previous = previous_manifest(root, state, manifest, id);
    for file in &manifest.files {
        root.check_contained(&file.path).map_err(|e| {
            Refusal::new(e).help("a managed path must stay inside the root; nothing was changed")
        })?;
    }
    for path in state.files.keys() {
        root.check_contained(path).map_err(Refusal::new)?;
    }
    plan::make(root, manifest, previous.as_ref(), state, &accounts).map_err(|e| {
        Refusal::new(e).help("add the account to the image or host first; nothing was changed")
    })
}

/// `--dry-run`: the plan, without the lock and without touching anything.
pub fn dry_run(bundle: &Path, opts: &Options) -> Result<Report, Refusal> {
    let checked = check(bundle, opts)?;
    let state = state::load(&checked.root).map_err(Refusal::new)?;
    let plan = make_plan(&checked.root, &checked.manifest, &checked.id, &state)?;
    let pending = journal::load(&checked.root)
        .ok()
        .flatten()
        .map(|_| "an interrupted switch will be completed or undone first".to_string());
    Ok(report(&checked, opts, pending, plan))
}

impl Report {
    /// Whether a resource waits for providers that were not ready (`wait-for`).
    pub fn waiting(&self) -> bool {
        self.resources.iter().any(|o| o.status == Status::Waiting)
    }
}

fn report(checked: &Checked, opts: &Options, recovered: Option<String>, plan: Plan) -> Report {
    Report {
        bundle: checked.bundle_id.clone(),
        generation: checked.id.clone(),
        root: checked.root.dir.display().to_string(),
        offline: opts.offline,
        dry_run: opts.dry_run,
        recovered,
        plan,
        reverts: Vec::new(),
        files: Switched::default(),
        triggers: Vec::new(),
        resources: Vec::new(),
        live: Vec::new(),
        changed: 0,
        deferred: checked.needs_secrets.len(),
        needs_secrets: checked.needs_secrets.clone(),
        repaired: 0,
        failed: Vec::new(),
        drift: Vec::new(),
        health: Vec::new(),
        reboot_required: Vec::new(),
        manifest: checked.manifest.clone(),
        timings: None,
    }
}

/// Holds `ROOT/var/lib/bell/lock` for the lifetime of a run.
pub struct Lock {
    _file: fs::File,
}

/// How long a run waits for `bell-run live` to let go of the host: its holds are a probe or a
/// live file's render and reload, each bounded by its own timeout, and a pull that met one must
/// not fail for it (a refused pull halts its rollout's wave).
const LIVE_HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// What the lock file says of the live service's holds, after its pid.
const LIVE_HOLDER: &str = "live";

/// Takes the host's lock for a run (apply, pull, rollback, remove): refused at once while
/// another run holds it, waited for while `bell-run live` does.
pub fn lock(root: &Root) -> Result<Lock, Refusal> {
    let waited_until = std::time::Instant::now() + LIVE_HOLD_WAIT;
    loop {
        match take_lock(root, None)? {
            Ok(lock) => return Ok(lock),
            Err(holder) => {
                let mut words = holder.split_whitespace();
                let pid = words.next().unwrap_or_default().to_string();
                let live = words.next() == Some(LIVE_HOLDER);
                if live && std::time::Instant::now() < waited_until {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
                let who = match live {
                    true => format!(
                        "bell-run live (pid {pid}) has held {} for {} s",
                        root.dir.display(),
                        LIVE_HOLD_WAIT.as_secs()
                    ),
                    false => format!(
                        "another bell-run (pid {pid}) is applying to {}",
                        root.dir.display()
                    ),
                };
                return Err(Refusal::new(who).help("wait for it to finish; nothing was changed"));
            }
        }
    }
}

/// Takes the host's lock for `bell-run live`'s short holds, or `None` while anything holds it
/// (the live service yields: it tries again on its next round).
pub fn lock_for_live(root: &Root) -> Option<Lock> {
    take_lock(root, Some(LIVE_HOLDER)).ok()?.ok()
}

/// One try at the lock: taken (the file then says our pid, and `kind` after it), or what the
/// file says of its holder.
fn take_lock(root: &Root, kind: Option<&str>) -> Result<Result<Lock, String>, Refusal> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let dir = root.bell_dir();
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Refusal::new(format!("cannot create {}: {e}", parent.display())))?;
    }
    // Closed to others: it holds copies of secrets and the scripts' private state.
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(Refusal::new(format!(
                "cannot create {}: {e}",
                dir.display()
            )));
        }
        _ => {}
    }
    let path = dir.join("lock");
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| Refusal::new(format!("cannot open {}: {e}", path.display())))?;
    let plain = file.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 1);
    if !plain {
        return Err(Refusal::new(format!(
            "{} is not a plain file of bell-run's own",
            path.display()
        ))
        .help("remove it; nothing was changed"));
    }
    match crate::sys::try_lock_exclusive(&file) {
        Ok(true) => {
            use std::io::{Seek, Write};
            let _ = file.set_len(0);
            let _ = file.seek(std::io::SeekFrom::Start(0));
            let _ = match kind {
                Some(kind) => writeln!(file, "{} {kind}", std::process::id()),
                None => writeln!(file, "{}", std::process::id()),
            };
            Ok(Ok(Lock { _file: file }))
        }
        Ok(false) => Ok(Err(crate::rootfs::read_record(&path)
            .ok()
            .flatten()
            .unwrap_or_default())),
        Err(e) => Err(Refusal::new(format!("cannot lock {}: {e}", path.display()))),
    }
}

/// Applies a bundle. `Err` is a refusal (nothing changed); a report with failures is exit 3.
pub fn apply(bundle: &Path, opts: &Options) -> Result<Report, Refusal> {
    let clock = crate::timings::Clock::start();
    let checked = check(bundle, opts)?;
    clock.lap("verify");
    let root = &checked.root;
    // Everything that can refuse is checked once before the lock file is even created, so
    // that a refusal leaves the root exactly as it was; the plan is made again under the lock.
    let unlocked = state::load(root).map_err(Refusal::new)?;
    make_plan(root, &checked.manifest, &checked.id, &unlocked)?;
    let _lock = lock(root)?;
    let mut state = state::load(root).map_err(Refusal::new)?;
    let recovered = journal::recover(root, &mut state).map_err(|e| {
        Refusal::new(format!("cannot finish the interrupted switch: {e}"))
            .help("fix the cause and run `bell-run recover`")
    })?;
    clock.lap("plan");

    // bell-run's own copy of the bundle: departed resources are reverted from it later, and
    // what runs is what was verified.
    let left_out = (!checked.needs_secrets.is_empty()).then_some(&checked.manifest);
    let (copy, copied) = copy_bundle(root, bundle, &checked.id, left_out)?;
    // A refusal from here until something changes takes the new copy back, so that a refused
    // apply leaves the root as it was.
    let forget_copy = |refusal: Refusal| {
        if copied {
            let _ = fs::remove_dir_all(&copy);
        }
        refusal
    };
    crate::sealed::put(&copy, &checked.opened).map_err(forget_copy)?;
    make_exec_scripts_executable(&copy, &checked.manifest);

    let mut plan = make_plan(root, &checked.manifest, &checked.id, &state).map_err(forget_copy)?;
    let ctx = Ctx {
        root,
        offline: opts.offline,
        timeout: Duration::from_secs(opts.script_timeout),
        now: state::now(),
        boot: state::boot_id(),
        clock: Some(&clock),
        store: opts.live_store.as_deref(),
    };
    clock.lap("stage");
    let live = crate::live::prepare_from_store(
        &ctx,
        &checked.manifest,
        opts.live_store.as_deref(),
        &mut plan,
    );
    let found = find_drift(&ctx, opts, &checked, &copy, &mut plan);
    clock.lap("drift");
    let mut rep = report(&checked, opts, recovered, plan.clone());
    rep.drift = drift_of(&plan, found.drift);
    rep.live = live;

    failpoint::hit("before-revert");
    // The generation being applied was verified above and is what its resources run from:
    // its triggers run from it too, without hashing the copy again.
    let mut manifests: BTreeMap<String, Option<Manifest>> =
        BTreeMap::from([(checked.id.clone(), Some(checked.manifest.clone()))]);
    state.pending_reverts = revert_departed(&ctx, &mut manifests, &plan, &mut rep);
    failpoint::hit("after-revert");
    clock.lap("revert");

    let previous = state
        .generation
        .as_ref()
        .and_then(|g| load_generation(&ctx, &mut manifests, g).map(|m| (g.clone(), m)));
    let fired = fired_triggers(&checked.manifest, &checked.id, previous.as_ref(), &plan);
    if !plan.files.is_empty() {
        rep.files = journal::switch(
            root,
            &mut state,
            &checked.manifest,
            &copy,
            &plan.files,
            fired,
        )
        .map_err(|e| {
            let refusal = Refusal::new(format!("the file switch failed: {e}"));
            let undone = journal::load(root).ok().flatten().is_none();
            if undone && plan.departed.is_empty() {
                // Staging failed and was taken back: nothing changed.
                forget_copy(refusal.help("nothing was changed; fix the cause and apply again"))
            } else {
                refusal
                    .help("the next bell-run completes or undoes it")
                    .partial()
            }
        })?;
    }

    clock.lap("switch");
    for pending in std::mem::take(&mut state.pending_triggers) {
        let outcome = run_trigger(&ctx, &mut manifests, &pending);
        if outcome.failed() {
            state.pending_triggers.push(pending);
        }
        rep.triggers.push(outcome);
    }

    clock.lap("triggers");
    failpoint::hit("before-apply");
    let records = run_resources(&ctx, &checked, &copy, &plan, &state, &mut rep);
    crate::live::settle(&ctx, &mut rep.live);
    failpoint::hit("after-apply");
    clock.lap("scripts");
    // What waits for the next boot: unchanged resources said so in their drift checks above;
    // one that takes effect at boot and was applied now is asked after its apply.
    let applied_at_boot: Vec<usize> = (0..checked.manifest.resources.len())
        .filter(|&i| {
            checked.manifest.resources[i].at_boot
                && plan.resources[i].change != Change::Unchanged
                && rep.resources.get(i).is_some_and(|o| o.status == Status::Ok)
        })
        .collect();
    let after_apply = crate::check::run_checks(
        &ctx,
        &checked.manifest,
        &copy,
        &checked.id,
        &applied_at_boot,
    );
    rep.reboot_required =
        crate::check::reboot_reasons(&ctx, found.other.iter().chain(&after_apply));
    clock.lap("reboot");

    tally(&mut rep, &plan, &checked);
    record(&mut state, &ctx, &checked, opts, records, &mut rep);
    state::save(root, &state).map_err(|e| Refusal::new(e).partial())?;
    set_current(root, &checked.id);
    state::prune_generations(root, &state);
    clock.lap("state");
    // Under the lock still: nothing changes the host while its probes look at it.
    if rep.failed.is_empty() {
        if opts.after_boot && rep.reboot_required.is_empty() {
            rep.health.extend(crate::rebooting::after_boot(
                &ctx,
                &checked.manifest,
                &copy,
                &checked.id,
            ));
        }
        rep.health.extend(crate::health::run_probes(
            &ctx,
            &checked.manifest,
            &copy,
            &checked.id,
        ));
    }
    clock.lap("health");
    if opts.timings {
        rep.timings = Some(clock.finish());
    }
    Ok(rep)
}

/// The apply in bell-run's state: the generation, when and how it went, its resources'
/// records, and the last 20 of them in the history.
fn record(
    state: &mut State,
    ctx: &Ctx,
    checked: &Checked,
    opts: &Options,
    records: BTreeMap<String, ResourceRecord>,
    rep: &mut Report,
) {
    let result = if rep.failed.is_empty() {
        "ok"
    } else {
        "failed"
    };
    // A re-apply of the same bundle that names no release keeps the one it came with.
    if opts.release.is_some() || state.generation.as_deref() != Some(checked.id.as_str()) {
        state.release = opts.release.clone();
    }
    state.generation = Some(checked.id.clone());
    state.applied_at = Some(ctx.now);
    state.result = Some(result.to_string());
    state.resources = records;
    rep.reboot_required.extend(crate::reboot::exec_reasons(
        &checked.manifest,
        state,
        ctx.boot.as_deref(),
    ));
    state.history.push(HistoryEntry {
        generation: checked.id.clone(),
        applied_at: ctx.now,
        result: result.to_string(),
        release: state.release.clone(),
    });
    let excess = state.history.len().saturating_sub(20);
    state.history.drain(..excess);
}

/// What drifted: the files put back, then what the check scripts found.
fn drift_of(plan: &Plan, found: Vec<bell_store::Drift>) -> Vec<bell_store::Drift> {
    plan.files
        .iter()
        .filter(|f| matches!(f, plan::FileAction::Write { drifted: true, .. }))
        .map(|f| bell_store::Drift {
            name: format!("file:{}", f.path()),
            detail: "changed on disk; put back".to_string(),
        })
        .chain(found)
        .collect()
}

/// Live drift that only a check script can see: those resources are applied again. An
/// offline root (an image being baked) has no live values of its own, and a re-apply there
/// must cost no more than comparing hashes, so offline only what `bell-run check` marked
/// drifted is checked again.
fn find_drift(
    ctx: &Ctx,
    opts: &Options,
    checked: &Checked,
    copy: &Path,
    plan: &mut Plan,
) -> crate::check::Found {
    let marks = state::drift_marks_path(ctx.root);
    let marked: Option<BTreeSet<String>> = opts.offline.then(|| {
        crate::rootfs::read_record(&marks)
            .ok()
            .flatten()
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    });
    let found = if marked.as_ref().is_some_and(BTreeSet::is_empty) {
        crate::check::Found::default()
    } else {
        crate::check::mark_drifted(
            ctx,
            &checked.manifest,
            copy,
            &checked.id,
            plan,
            marked.as_ref(),
        )
    };
    if !opts.dry_run {
        let _ = fs::remove_file(&marks);
    }
    found
}

/// Reverts the resources the new bundle no longer has, from the generation that had them;
/// returns those whose revert failed, to try again at the next apply.
fn revert_departed(
    ctx: &Ctx,
    manifests: &mut BTreeMap<String, Option<Manifest>>,
    plan: &Plan,
    rep: &mut Report,
) -> Vec<Pending> {
    let mut still_pending = Vec::new();
    for departed in &plan.departed {
        let outcome = revert(ctx, manifests, &departed.key, &departed.generation);
        if outcome.failed() {
            still_pending.push(Pending {
                name: departed.key.clone(),
                generation: departed.generation.clone(),
                paths: None,
            });
        }
        rep.reverts.push(outcome);
    }
    still_pending
}

/// The report's counts: what changed, was repaired, deferred or failed.
fn tally(rep: &mut Report, plan: &Plan, checked: &Checked) {
    // A deferred resource (work only a live host can do, during an image bake) is not counted
    // as changed: an offline re-apply that defers it again changed nothing.
    rep.deferred = rep
        .resources
        .iter()
        .filter(|o| o.status == Status::Deferred)
        .count()
        + checked.needs_secrets.len();
    rep.changed = plan
        .resources
        .iter()
        .zip(&rep.resources)
        .filter(|(r, o)| r.change != Change::Unchanged && o.status != Status::Deferred)
        .count()
        + plan.departed.len();
    rep.repaired = plan
        .resources
        .iter()
        .zip(&rep.resources)
        .filter(|(r, o)| r.change == Change::Drifted && o.status == Status::Ok)
        .count();
    rep.failed = rep
        .reverts
        .iter()
        .chain(&rep.triggers)
        .chain(&rep.resources)
        .filter(|o| o.failed())
        .map(|o| o.key.clone())
        .collect();
}

/// Copies the verified bundle into `generations/ID` unless a verified copy is there already;
/// says whether it made the copy. Half-made copies of earlier runs (a full disk, a crash) are
/// removed first: under the lock nothing else can be writing them, and left behind they would
/// hold the space the next copy needs.
/// bell-run's copy of `bundle` as generation `id`; with `without_sealed`, the manifest of what
/// an image baked without the host's key applies, in place of the bundle's own (`id` is its).
fn copy_bundle(
    root: &Root,
    bundle: &Path,
    id: &str,
    without_sealed: Option<&Manifest>,
) -> Result<(PathBuf, bool), Refusal> {
    let copy = state::generation_dir(root, id);
    if bundle.canonicalize().ok() == copy.canonicalize().ok() {
        return Ok((copy, false));
    }
    let generations = state::generations_dir(root);
    if let Ok(entries) = fs::read_dir(&generations) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
    if bell_bundle::verify_dir(&copy).is_ok() {
        return Ok((copy, false));
    }
    let _ = fs::remove_dir_all(&copy);
    let tmp = generations.join(format!(".{id}.tmp"));
    crate::rootfs::copy_tree(bundle, &tmp)
        .and_then(|()| match without_sealed {
            Some(manifest) => leave_out_of_copy(&tmp, manifest),
            None => Ok(()),
        })
        .and_then(|()| fs::rename(&tmp, &copy))
        .map_err(|e| {
            let _ = fs::remove_dir_all(&tmp);
            Refusal::new(format!(
                "cannot copy the bundle into {}: {e}",
                copy.display()
            ))
            .help("free space under the root and apply again; nothing was changed")
        })?;
    bell_bundle::verify_dir(&copy).map_err(|e| {
        let _ = fs::remove_dir_all(&copy);
        Refusal::new(format!("the bundle changed while it was copied: {e}"))
    })?;
    Ok((copy, true))
}

/// Makes the copy at `dir` the bundle `kept` (the bundle without what needs its sealed
/// secrets): the files and scripts only the whole bundle lists go, and its manifest is
/// `kept`'s.
fn leave_out_of_copy(dir: &Path, kept: &Manifest) -> std::io::Result<()> {
    let manifest_path = dir.join(bell_bundle::MANIFEST_FILE);
    let whole = Manifest::from_json(&fs::read_to_string(&manifest_path)?)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let paths = |m: &Manifest| -> std::collections::BTreeSet<String> {
        m.files
            .iter()
            .map(|f| format!("{}{}", bell_bundle::ROOT_DIR, f.path))
            .chain(m.scripts().map(|s| s.path.clone()))
            .collect()
    };
    let kept_paths = paths(kept);
    for rel in paths(&whole).difference(&kept_paths) {
        match fs::remove_file(dir.join(rel)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    fs::write(manifest_path, kept.to_json())
}

/// exec scripts run directly, honouring their shebang, so bell-run's copy is executable.
fn make_exec_scripts_executable(copy: &Path, manifest: &Manifest) {
    use std::os::unix::fs::PermissionsExt;
    for resource in &manifest.resources {
        if let (Some(_), Some(script)) = (&resource.exec, &resource.apply) {
            let _ = fs::set_permissions(copy.join(&script.path), fs::Permissions::from_mode(0o700));
        }
    }
}

fn set_current(root: &Root, id: &str) {
    let link = root.bell_dir().join("current");
    let tmp = root.bell_dir().join(".current.tmp");
    let _ = fs::remove_file(&tmp);
    if std::os::unix::fs::symlink(Path::new("generations").join(id), &tmp).is_ok() {
        let _ = fs::rename(&tmp, &link);
    }
}

//! Live files (`live` of the spec): what the apply renders from the providers of a service
//! that are ready now, between releases.
//!
//! The bundle says who may provide (the signed build's list). A run that can read the fleet's
//! store judges each provider from its signed health report and its liveness key
//! (`bell_store::ready`), renders the file's template with the ready ones into the resource's
//! state (`next`), and plans the resource changed when that differs from what its apply last
//! put in place (`current`); the resource's apply script then puts it in place and reloads.
//! A run without the store (an apply from a directory, an image bake) renders with the ready
//! set it rendered last, so that a re-apply does not empty a backends file.

use crate::context::Ctx;
use crate::plan::{Change, Plan};
use crate::rootfs;
use bell_bundle::live::{self, Live};
use bell_bundle::Manifest;
use bell_store::ready::{self, Readiness};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What one live file was rendered from.
#[derive(Debug, Clone, Serialize)]
pub struct Rendered {
    pub path: String,
    pub service: String,
    /// The providers it lists.
    pub ready: Vec<String>,
    /// The others the bundle names, and why each is out.
    pub out: Vec<(String, String)>,
    /// Where the ready set came from: `store`, or `kept` (the last one, no store read).
    pub from: &'static str,
    /// Why it could not be rendered, if it could not (its apply then fails).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When what is in place was put there (Unix seconds), as its apply left it: read after
    /// the run (see [`settle`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// Fills in when each file's content took effect, once its apply ran: the time its apply
/// last recorded what it put in place.
pub fn settle(ctx: &Ctx, rendered: &mut [Rendered]) {
    for live in rendered {
        live.since = since(ctx, &live.path);
    }
}

/// When the live file at `path` was last put in place by its apply (Unix seconds).
fn since(ctx: &Ctx, path: &str) -> Option<u64> {
    let current = ctx.state_dir(live::KIND, path).join(live::CURRENT_FILE);
    std::fs::symlink_metadata(&current)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

/// Every live file of `manifest` as it is now: the providers it lists (`in_place` where the
/// caller knows them: a file whose apply failed lists what it listed before, not what was
/// rendered for it) and since when (what `bell-run live` reports).
pub fn listed(
    ctx: &Ctx,
    manifest: &Manifest,
    in_place: &BTreeMap<String, Vec<String>>,
) -> Vec<bell_store::LiveFile> {
    manifest
        .live
        .iter()
        .map(|file| bell_store::LiveFile {
            path: file.path.clone(),
            service: file.service.clone(),
            ready: match in_place.get(&file.path) {
                Some(ready) => ready.clone(),
                None => kept(ctx, file),
            },
            since: since(ctx, &file.path),
        })
        .collect()
}

/// Every provider of every live file of `manifest`, judged from what `etcd` holds, and the
/// revision it was read at (what a long-poll waits from). `newest` is the highest report
/// sequence accepted of each provider, kept across runs.
pub fn read(
    etcd: &bell_store::Etcd,
    manifest: &Manifest,
    newest: &mut BTreeMap<String, u64>,
) -> Result<(i64, BTreeMap<String, Readiness>), String> {
    let keys = provider_keys(manifest);
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (revision, held) = etcd.read_all_at(&names)?;
    let providers = all_providers(manifest);
    let mut judged = BTreeMap::new();
    for ((host, provider), held) in providers.iter().zip(held.chunks(2)) {
        let report = held[0].as_ref().map(|h| h.value.as_slice());
        let readiness = ready::judge(&manifest.fleet, provider, report, held[1].is_some(), newest);
        judged.insert(host.to_string(), readiness);
    }
    Ok((revision, judged))
}

/// Every provider the bundle names, of its live files and of its resources' waits, by host.
fn all_providers(manifest: &Manifest) -> BTreeMap<&str, &live::Provider> {
    manifest
        .live
        .iter()
        .flat_map(|l| &l.providers)
        .chain(manifest.providers.values().flatten())
        .map(|p| (p.host.as_str(), p))
        .collect()
}

/// The keys [`read`] reads: each provider's health report and liveness key, by host name.
pub fn provider_keys(manifest: &Manifest) -> Vec<String> {
    all_providers(manifest)
        .keys()
        .flat_map(|host| ready::keys(&manifest.fleet, host))
        .collect()
}

/// What a waiting resource is told: `None` when it may run.
pub enum Wait {
    /// Not this run's to do without the store (an image bake): the first run with it does it.
    Deferred(String),
    /// Its providers were not ready in time.
    Waiting(String),
}

/// Waits until each service `resource` waits for (`wait-for`) has its count of ready
/// providers, reading them every second, each wait at most its timeout. Says so when a
/// resource had to wait and its providers came.
pub fn wait_for(ctx: &Ctx, manifest: &Manifest, resource: &bell_bundle::Resource) -> Option<Wait> {
    if resource.wait_for.is_empty() {
        return None;
    }
    let Some(bell_store::Store::Etcd(etcd)) = ctx.store else {
        let why = "no fleet store to read its providers from";
        return Some(match ctx.offline {
            true => Wait::Deferred(format!("{why}: the first run with one applies it")),
            false => Wait::Waiting(format!("{why} (pull, or --report etcd://…)")),
        });
    };
    let started = std::time::Instant::now();
    let mut newest = load_newest(ctx);
    let mut said = false;
    loop {
        let judged = match read(etcd, manifest, &mut newest) {
            Ok((_, judged)) => judged,
            Err(e) => {
                errln!(
                    "warning: cannot read the providers {} waits for: {e}",
                    resource.key()
                );
                BTreeMap::new()
            }
        };
        save_newest(ctx, &newest);
        let mut short = None;
        for wait in &resource.wait_for {
            let ready: Vec<&str> = manifest
                .providers
                .get(&wait.service)
                .into_iter()
                .flatten()
                .filter(|p| judged.get(&p.host).is_some_and(Readiness::is_ready))
                .map(|p| p.host.as_str())
                .collect();
            if ready.len() < wait.count as usize {
                let ready = match ready.is_empty() {
                    true => "none ready".to_string(),
                    false => format!("{} ready: {}", ready.len(), ready.join(", ")),
                };
                short = Some((
                    wait,
                    format!(
                        "waits for {} of `{}`'s providers; {ready}",
                        wait.count, wait.service
                    ),
                ));
                break;
            }
        }
        // All met: it may run.
        let (wait, why) = short?;
        if started.elapsed() >= std::time::Duration::from_secs(wait.timeout) {
            return Some(Wait::Waiting(format!(
                "{why}, after {}s; the next run tries again",
                wait.timeout
            )));
        }
        if !said {
            errln!("{}: {why}; waiting up to {}s", resource.key(), wait.timeout);
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Renders `live` with the providers in `ready`, as the build checked it would.
pub fn render(live: &Live, ready: &[&str]) -> Result<String, String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(live::MAX_TEMPLATE_STEPS));
    let text = env
        .render_str(&live.template, live::context(live, ready))
        .map_err(|e| format!("its template does not render: {e}"))?;
    if text.len() > live::MAX_RENDERED {
        return Err(format!(
            "its rendering is {} bytes, more than {}",
            text.len(),
            live::MAX_RENDERED
        ));
    }
    Ok(text)
}

/// Where the highest report sequence accepted of each provider is kept.
fn newest_path(ctx: &Ctx) -> PathBuf {
    ctx.root.bell_dir().join("live-newest.json")
}

pub fn load_newest(ctx: &Ctx) -> BTreeMap<String, u64> {
    rootfs::read_record(&newest_path(ctx))
        .ok()
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

pub fn save_newest(ctx: &Ctx, newest: &BTreeMap<String, u64>) {
    let text = serde_json::to_string(newest).unwrap_or_default();
    if let Err(e) = rootfs::write_atomic(&newest_path(ctx), text.as_bytes()) {
        errln!("warning: cannot keep the providers' report sequences: {e}");
    }
}

/// Which of `live`'s providers are ready by `judged` (in the bundle's order), and why each
/// other one is out.
pub fn split(
    live: &Live,
    judged: &BTreeMap<String, Readiness>,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut ready = Vec::new();
    let mut others = Vec::new();
    for provider in &live.providers {
        match judged.get(&provider.host) {
            Some(r) if r.is_ready() => ready.push(provider.host.clone()),
            Some(r) => others.push((provider.host.clone(), r.describe())),
            None => others.push((provider.host.clone(), "out: not read".into())),
        }
    }
    (ready, others)
}

/// The providers `live` was last rendered with, as kept in its resource's state.
pub fn kept(ctx: &Ctx, live: &Live) -> Vec<String> {
    let state = ctx.state_dir(live::KIND, &live.path);
    let kept = rootfs::read_record(&state.join("ready"))
        .ok()
        .flatten()
        .unwrap_or_default();
    kept.lines()
        .filter(|h| live.providers.iter().any(|p| p.host == *h))
        .map(str::to_string)
        .collect()
}

/// Renders `live` with `ready` into its resource's state (`next`, and the list it was
/// rendered with); whether that differs from what its apply last put in place. An error
/// leaves no `next`, so that an apply fails rather than put an old rendering in place.
pub fn stage(ctx: &Ctx, live: &Live, ready: &[String]) -> Result<bool, String> {
    let state = ctx.state_dir(live::KIND, &live.path);
    let next = state.join(live::NEXT_FILE);
    let names: Vec<&str> = ready.iter().map(String::as_str).collect();
    let text = render(live, &names).inspect_err(|_| {
        let _ = rootfs::remove_if_exists(&next);
    })?;
    let mut list = ready.join("\n");
    list.push('\n');
    rootfs::write_atomic(&next, text.as_bytes())
        .and_then(|()| rootfs::write_atomic(&state.join("ready"), list.as_bytes()))
        .map_err(|e| {
            let _ = rootfs::remove_if_exists(&next);
            format!("cannot keep its rendering: {e}")
        })?;
    let current = rootfs::read_record(&state.join(live::CURRENT_FILE))
        .ok()
        .flatten();
    Ok(current.as_deref() != Some(&text))
}

/// Renders every live file of `manifest` into its resource's state and marks the resources
/// whose rendering differs from what is in place as changed. `judged` is what the store said
/// of the providers (`None`: no store; each file keeps the ready set it was rendered with).
pub fn prepare(
    ctx: &Ctx,
    manifest: &Manifest,
    judged: Option<&BTreeMap<String, Readiness>>,
    plan: &mut Plan,
) -> Vec<Rendered> {
    let mut out = Vec::new();
    for live in &manifest.live {
        let key = format!("{}:{}", live::KIND, live.path);
        let Some(index) = manifest.resources.iter().position(|r| r.key() == key) else {
            continue;
        };
        let (ready, others, from) = match judged {
            Some(judged) => {
                let (ready, others) = split(live, judged);
                (ready, others, "store")
            }
            None => {
                let ready = kept(ctx, live);
                let others = live
                    .providers
                    .iter()
                    .filter(|p| !ready.contains(&p.host))
                    .map(|p| (p.host.clone(), "out: not ready when last read".to_string()))
                    .collect();
                (ready, others, "kept")
            }
        };
        let staged = stage(ctx, live, &ready);
        let planned = &mut plan.resources[index];
        // A rendering that differs, or none (its apply then fails and says why).
        if planned.change == Change::Unchanged && !matches!(staged, Ok(false)) {
            planned.change = Change::Changed;
        }
        out.push(Rendered {
            path: live.path.clone(),
            service: live.service.clone(),
            ready,
            out: others,
            from,
            error: staged.err(),
            since: None,
        });
    }
    out
}

/// [`read`] and [`prepare`] with the sequences kept between runs: what an apply calls.
pub fn prepare_from_store(
    ctx: &Ctx,
    manifest: &Manifest,
    store: Option<&bell_store::Store>,
    plan: &mut Plan,
) -> Vec<Rendered> {
    if manifest.live.is_empty() {
        return Vec::new();
    }
    let judged = match store {
        Some(bell_store::Store::Etcd(etcd)) => {
            let mut newest = load_newest(ctx);
            match read(etcd, manifest, &mut newest) {
                Ok((_, judged)) => {
                    save_newest(ctx, &newest);
                    Some(judged)
                }
                Err(e) => {
                    errln!(
                        "warning: live files keep their providers: the store cannot be read: {e}"
                    );
                    None
                }
            }
        }
        _ => None,
    };
    prepare(ctx, manifest, judged.as_ref(), plan)
}

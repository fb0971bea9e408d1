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
use std::collections::{BTreeMap, BTreeSet};
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
}

/// Every provider of every live file of `manifest`, judged from `etcd`. `newest` is the highest
/// report sequence accepted of each provider, kept across runs.
pub fn read(
    etcd: &bell_store::Etcd,
    manifest: &Manifest,
    newest: &mut BTreeMap<String, u64>,
) -> Result<BTreeMap<String, Readiness>, String> {
    let providers: BTreeMap<&str, &live::Provider> = manifest
        .live
        .iter()
        .flat_map(|l| &l.providers)
        .map(|p| (p.host.as_str(), p))
        .collect();
    let keys: Vec<String> = providers
        .keys()
        .flat_map(|host| ready::keys(&manifest.fleet, host))
        .collect();
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let held = etcd.get_all(&names)?;
    let mut judged = BTreeMap::new();
    for ((host, provider), pair) in providers.iter().zip(held.chunks(2)) {
        let readiness = ready::judge(
            &manifest.fleet,
            provider,
            pair[0].as_deref(),
            pair[1].is_some(),
            newest,
        );
        judged.insert(host.to_string(), readiness);
    }
    Ok(judged)
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

fn save_newest(ctx: &Ctx, newest: &BTreeMap<String, u64>) {
    let text = serde_json::to_string(newest).unwrap_or_default();
    if let Err(e) = rootfs::write_atomic(&newest_path(ctx), text.as_bytes()) {
        errln!("warning: cannot keep the providers' report sequences: {e}");
    }
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
        let state = ctx.state_dir(live::KIND, &live.path);
        let kept_path = state.join("ready");
        let named: BTreeSet<&str> = live.providers.iter().map(|p| p.host.as_str()).collect();
        let (ready, others, from): (Vec<String>, Vec<(String, String)>, _) = match judged {
            Some(judged) => {
                let mut ready = Vec::new();
                let mut others = Vec::new();
                for provider in &live.providers {
                    match judged.get(&provider.host) {
                        Some(r) if r.is_ready() => ready.push(provider.host.clone()),
                        Some(r) => others.push((provider.host.clone(), r.describe())),
                        None => others.push((provider.host.clone(), "out: not read".into())),
                    }
                }
                (ready, others, "store")
            }
            None => {
                let kept = rootfs::read_record(&kept_path)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let ready: Vec<String> = kept
                    .lines()
                    .filter(|h| named.contains(h))
                    .map(str::to_string)
                    .collect();
                let others = live
                    .providers
                    .iter()
                    .filter(|p| !ready.contains(&p.host))
                    .map(|p| (p.host.clone(), "out: not ready when last read".to_string()))
                    .collect();
                (ready, others, "kept")
            }
        };
        let names: Vec<&str> = ready.iter().map(String::as_str).collect();
        let mut rendered = Rendered {
            path: live.path.clone(),
            service: live.service.clone(),
            ready: ready.clone(),
            out: others,
            from,
            error: None,
        };
        let next = state.join(live::NEXT_FILE);
        match render(live, &names) {
            Ok(text) => {
                let written = rootfs::write_atomic(&next, text.as_bytes()).and_then(|()| {
                    let mut list = ready.join("\n");
                    list.push('\n');
                    rootfs::write_atomic(&kept_path, list.as_bytes())
                });
                if let Err(e) = written {
                    rendered.error = Some(format!("cannot keep its rendering: {e}"));
                    let _ = rootfs::remove_if_exists(&next);
                }
                let current = rootfs::read_record(&state.join(live::CURRENT_FILE))
                    .ok()
                    .flatten();
                let planned = &mut plan.resources[index];
                if planned.change == Change::Unchanged && current.as_deref() != Some(&text) {
                    planned.change = Change::Changed;
                }
            }
            Err(e) => {
                let _ = rootfs::remove_if_exists(&next);
                rendered.error = Some(e);
                let planned = &mut plan.resources[index];
                if planned.change == Change::Unchanged {
                    planned.change = Change::Changed;
                }
            }
        }
        out.push(rendered);
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
                Ok(judged) => {
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

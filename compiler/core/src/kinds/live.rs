//! `live`: a file that follows which providers of a service are ready now, between releases.
//!
//! The build resolves who may provide (every host the spec makes a provider, with its address,
//! port and identity) and puts that list, the template and the quiescence window into the
//! manifest's `live`; bell-run renders the template from the providers whose latest signed
//! report is healthy, and the resource's apply (a script of `stdlib/live/`) puts the rendering
//! in place atomically and runs the reload, putting the old file back when the reload fails.
//! The template is checked here by rendering it as bell-run will: with every provider ready and
//! with none, so that a mistake in it is the build's error, not a host's.

use super::ResourceKind;
use crate::diagnostic::{Diagnostics, Invalid};
use crate::front::validate;
use crate::render::{common, BundleBuilder, BundleKind, HostContext, NewResource, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use bell_bundle::live::{Live as LiveEntry, Provider};
use minijinja::context;

pub struct Live;

/// Render once the ready set has been still this long (seconds)...
pub const DEFAULT_WAIT_MIN: u64 = 1;
/// ...and at the latest this long after it changed: a provider that fails its probe is out of
/// every consumer's file within this, plus the time its report takes to arrive.
pub const DEFAULT_WAIT_MAX: u64 = 4;
/// A reload that runs longer is killed, and counts as failed.
pub const DEFAULT_RELOAD_TIMEOUT: u64 = 30;

impl ResourceKind for Live {
    fn keyword(&self) -> &'static str {
        "live"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("service", Prop, Str, true).checked(validate::resource_name),
            FieldSchema::new("mode", Prop, Mode, false),
            FieldSchema::new("owner", Prop, Str, false).checked(validate::unix_user_name),
            FieldSchema::new("group", Prop, Str, false).checked(validate::unix_group_name),
            FieldSchema::new("reload-timeout", Prop, Duration, false),
            FieldSchema::new("template", ChildArg, Str, true),
            FieldSchema::new("reload", ChildArg, Str, false),
            FieldSchema::new("wait", ChildProps, StrMap, false),
            FieldSchema::new("offline", Prop, Enum(&["skip", "root"]), false),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "path"
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::absolute_path(name)?;
        validate::not_bell_own(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for res in model.of_kind(Kind::LIVE) {
            policy(res, diags);
            // Two writers of one path would overwrite each other at every change.
            for other in model.of_kind(Kind::FILE) {
                if other.name == res.name {
                    common::clash(
                        diags,
                        format!("`{}` is both a `file` and a `live` file", res.name),
                        other.origin.span,
                        res.origin.span,
                        "a path has one writer: keep the `live` one and drop the `file`".into(),
                    );
                }
            }
        }
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        for service in &cx.host.model.services {
            if cx.followed.contains(&service.name) {
                out.add_provided(&service.name);
            }
        }
        for res in cx.host.model.of_kind(Kind::LIVE) {
            // Its mistakes were reported in the first pass (`check_model`).
            let Some(policy) = policy(res, &mut Diagnostics::new()) else {
                continue;
            };
            let service = res.str("service").unwrap_or_default().to_string();
            let providers = providers(cx, &service);
            let entry = LiveEntry {
                path: res.name.clone(),
                service,
                template: res.str("template").unwrap_or_default().to_string(),
                host: cx.host.name.clone(),
                address: cx.host.address.clone(),
                wait_min: policy.wait_min,
                wait_max: policy.wait_max,
                providers,
                offline: match res.str("offline") {
                    Some("root") => bell_bundle::Offline::Root,
                    _ => bell_bundle::Offline::Skip,
                },
            };
            if let Err(message) = check_template(&entry) {
                common::invalid(
                    diags,
                    res.span_of("template"),
                    format!("the template of `{}` does not render: {message}", res.key()),
                    "it sees `services.SERVICE` (a list of `host`, `address`, `port`) and `host` \
                     (`name`, `address`); bell-run renders it with minijinja, undefined names \
                     refused",
                );
                continue;
            }
            let mode = res.str("mode").unwrap_or("0644");
            let owner = res.str("owner").unwrap_or("root");
            let group = res.str("group").unwrap_or("root");
            let reload = res.str("reload").map(str::trim_end).unwrap_or_default();
            let name = res.name.as_str();
            let script = |role: &str| {
                r.stdlib(
                    &format!("live/{role}.sh.j2"),
                    context! {
                        kind => "live", name, role, path => name, mode, owner, group, reload,
                        reload_timeout => policy.reload_timeout,
                    },
                )
            };
            let (apply, revert, check) = match (script("apply"), script("revert"), script("check"))
            {
                (Ok(a), Ok(r), Ok(c)) => (a, r, c),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    diags.push(common::template_error(res, e));
                    continue;
                }
            };
            out.add_live(entry);
            out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::LIVE),
                name: res.name.clone(),
                files: Vec::new(),
                lines_in: Vec::new(),
                after: res.list("after").to_vec(),
                apply: Some(apply),
                revert: Some(revert),
                exec: None,
                check: Some(check),
            });
        }
    }
}

/// Who may provide `service`, as the build resolved it: what a live file lists at most and a
/// `wait-for` counts.
pub fn providers(cx: &HostContext, service: &str) -> Vec<Provider> {
    cx.services
        .get(service)
        .map(|list| {
            list.iter()
                .map(|p| Provider {
                    host: p.host.clone(),
                    address: p.address.clone(),
                    port: p.port,
                    identity: p.identity.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Renders the template as bell-run will (`bell_bundle::live::context`, a plain minijinja
/// environment that refuses undefined names), with every provider ready and with none.
pub fn check_template(live: &LiveEntry) -> Result<(), String> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    // The same bound bell-run renders with: a template that loops forever is refused here.
    env.set_fuel(Some(bell_bundle::live::MAX_TEMPLATE_STEPS));
    let all: Vec<&str> = live.providers.iter().map(|p| p.host.as_str()).collect();
    for ready in [&all[..], &[]] {
        env.render_str(&live.template, bell_bundle::live::context(live, ready))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

struct Policy {
    wait_min: u64,
    wait_max: u64,
    reload_timeout: u64,
}

fn policy(res: &ResolvedResource, diags: &mut Diagnostics) -> Option<Policy> {
    let mut ok = true;
    let message = format!(
        "`{}`: `reload-timeout` must be between 1s and 1h",
        res.key()
    );
    let help = "a reload that hangs keeps the old file in place; give it, say, \"30s\"";
    let reload_timeout = common::bounded(
        diags,
        res,
        "reload-timeout",
        DEFAULT_RELOAD_TIMEOUT,
        message,
        help,
    )
    .unwrap_or_else(|| {
        ok = false;
        DEFAULT_RELOAD_TIMEOUT
    });
    let mut wait = |key: &str, default: u64| -> u64 {
        let Some(text) = res.map("wait").and_then(|m| m.get(key)) else {
            return default;
        };
        match validate::duration(text) {
            Some(secs) if secs <= common::LONGEST_STEP => secs,
            _ => {
                common::invalid(
                    diags,
                    res.span_of("wait"),
                    format!(
                        "`{}`: wait {key}=\"{text}\" is not a duration of at most 1h",
                        res.key()
                    ),
                    "write it as `wait min=\"2s\" max=\"10s\"`",
                );
                ok = false;
                default
            }
        }
    };
    let wait_min = wait("min", DEFAULT_WAIT_MIN);
    let wait_max = wait("max", DEFAULT_WAIT_MAX.max(wait_min));
    if let Some(unknown) = res
        .map("wait")
        .and_then(|m| m.keys().find(|k| !["min", "max"].contains(&k.as_str())))
    {
        common::invalid(
            diags,
            res.span_of("wait"),
            format!(
                "`{}`: `wait` takes `min` and `max`, not `{unknown}`",
                res.key()
            ),
            "write it as `wait min=\"2s\" max=\"10s\"`",
        );
        ok = false;
    }
    if ok && wait_max < wait_min {
        common::invalid(
            diags,
            res.span_of("wait"),
            format!(
                "`{}`: wait max ({wait_max}s) is shorter than min ({wait_min}s)",
                res.key()
            ),
            "`max` bounds how long a render waits for the ready set to be still for `min`: give max >= min",
        );
        ok = false;
    }
    if res.str("template").is_some_and(|t| t.trim().is_empty()) {
        common::invalid(
            diags,
            res.span_of("template"),
            format!("`{}` has an empty template", res.key()),
            "give what the file holds, such as `template \"{% for s in services.web %}server {{ s.host }} {{ s.address }}:{{ s.port }}\\n{% endfor %}\"`",
        );
        ok = false;
    }
    ok.then_some(Policy {
        wait_min,
        wait_max,
        reload_timeout,
    })
}

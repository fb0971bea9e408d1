//! `health`: a probe that says whether the host does its job after a change, the seed notes'
//! validation state, kept apart from configuration.
//!
//! A probe changes nothing, so it is not a resource of the apply order: it goes into the
//! manifest's `probes`, and bell-run runs every one after the apply and after a check. The
//! user's `run` text is the body of the probe's script, verbatim, as an `exec` script is:
//! it is shell code the user reviewed, not a value to quote. A host whose configuration
//! applied but whose probes fail is `unhealthy`, and `bell-run pull` keeps its rollout slot,
//! so a release that breaks a service stops at the disruption budget.

use super::ResourceKind;
use crate::diagnostic::{Diagnostics, Invalid};
use crate::render::common::{self, invalid, template_error};
use crate::render::{BundleBuilder, HostContext, ProbePolicy, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Health;

/// One attempt may take this long unless the spec says otherwise.
pub const DEFAULT_TIMEOUT: u64 = 10;
/// Attempts before a probe fails (Docker's `HEALTHCHECK` default).
pub const DEFAULT_RETRIES: u32 = 3;
pub const DEFAULT_INTERVAL: u64 = 2;

impl ResourceKind for Health {
    fn keyword(&self) -> &'static str {
        "health"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("timeout", Prop, Duration, false),
            FieldSchema::new("retries", Prop, Count, false),
            FieldSchema::new("interval", Prop, Duration, false),
            FieldSchema::new("offline", Prop, Enum(super::exec::OFFLINE_MODES), false),
            FieldSchema::new("run", ChildArg, Str, true),
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::resource_name(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for res in model.of_kind(Kind::HEALTH) {
            policy(res, diags);
        }
        // A probe is not in the apply order, so nothing can wait for it.
        for res in &model.resources {
            if let Some(probe) = res.list("after").iter().find(|r| r.starts_with("health:")) {
                invalid(
                    diags,
                    res.span_of("after"),
                    format!("`{}` waits for `{probe}`, a health probe", res.key()),
                    "probes run after every resource has applied, so nothing can come after one; \
                     drop it from `after`",
                );
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::HEALTH])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let mut probes: Vec<&ResolvedResource> = cx.host.model.of_kind(Kind::HEALTH).collect();
        probes.sort_by(|a, b| a.name.cmp(&b.name));
        for res in probes {
            // Its mistakes were reported in the first pass (`check_model`).
            let Some(policy) = policy(res, &mut Diagnostics::new()) else {
                continue;
            };
            let ctx = minijinja::context! {
                name => res.name,
                run => res.str("run").unwrap_or_default().trim_end(),
                timeout => policy.timeout,
                retries => policy.retries,
                interval => policy.interval,
            };
            match r.stdlib("health/probe.sh.j2", ctx) {
                Ok(script) => out.add_probe(&res.name, script, policy),
                Err(e) => diags.push(template_error(res, e)),
            }
        }
    }
}

/// The policy of one probe, or the diagnostics that say why it has none.
fn policy(res: &ResolvedResource, diags: &mut Diagnostics) -> Option<ProbePolicy> {
    let mut ok = true;
    let mut number = |field: &str, default: u64, what: &str, help: &str| -> u64 {
        let message = format!("`{}`: {what}", res.key());
        common::bounded(diags, res, field, default, message, help).unwrap_or_else(|| {
            ok = false;
            default
        })
    };
    let timeout = number(
        "timeout",
        DEFAULT_TIMEOUT,
        "`timeout` must be between 1s and 1h",
        "a probe that hangs holds the host's lock and its rollout slot; give it, say, \"10s\"",
    );
    let retries = number(
        "retries",
        u64::from(DEFAULT_RETRIES),
        "`retries` must be between 1 and 3600",
        "`retries` is how many attempts fail before the probe does, such as 3",
    );
    let interval = number(
        "interval",
        DEFAULT_INTERVAL,
        "`interval` must be between 1s and 1h",
        "the pause between attempts, such as \"2s\"",
    );
    let run = res.str("run").unwrap_or_default();
    if run.trim().is_empty() {
        invalid(
            diags,
            res.span_of("run"),
            format!("`{}` runs nothing", res.key()),
            "give the command that says whether the service works, such as `run \"curl -fsS http://127.0.0.1:8080/healthz\"`",
        );
        ok = false;
    }
    ok.then(|| ProbePolicy {
        timeout,
        retries: u32::try_from(retries).unwrap_or(DEFAULT_RETRIES),
        interval,
        offline: super::exec::offline_mode(res),
    })
}

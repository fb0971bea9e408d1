//! `exec`: a script of the user's with a rerun policy, run in name order.
//!
//! exec: the user's own scripts, shipped verbatim with the policy bell-run runs them by.
//!
//! The script is the resource's `apply`, byte for byte as written in the spec: it is a program
//! in whatever language its `#!` line names, so templating or quoting it would change what the
//! user reviewed. Everything bell-run needs to schedule it (rerun, intervals, timeout, failure
//! handling, arguments, environment) goes into the manifest's `ExecPolicy`, which is part of
//! the resource hash along with the name and the script, so any change to any of them runs the
//! script again.
//!
//! The policy rules of the language are checked here, on the merged resource, because an
//! override may set `rerun` while the base sets an interval: each diagnostic points at the
//! property that breaks the rule.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::graph::resources::Implied;
use crate::render::{BundleBuilder, BundleKind, HostContext, NewResource, RenderError, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use crate::spec::{Kind, Value};
use bell_bundle::{ExecPolicy, OnFailure, Rerun};

pub struct Exec;

/// The values of `offline=` on `exec` and `health`: where the script runs on an image root.
pub const OFFLINE_MODES: &[&str] = &["image", "defer", "skip", "root"];

/// A resource's `offline=`, already checked against [`OFFLINE_MODES`] by the schema.
pub fn offline_mode(res: &ResolvedResource) -> bell_bundle::Offline {
    use bell_bundle::Offline;
    match res.str("offline") {
        Some("defer") => Offline::Defer,
        Some("skip") => Offline::Skip,
        Some("root") => Offline::Root,
        _ => Offline::Image,
    }
}

impl ResourceKind for Exec {
    fn keyword(&self) -> &'static str {
        "exec"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new(
                "rerun",
                Prop,
                Enum(&["always", "never", "once-successfully"]),
                false,
            ),
            FieldSchema::new("rerun-interval", Prop, DurationOrInfinite, false),
            FieldSchema::new("retry-interval", Prop, DurationOrInfinite, false),
            FieldSchema::new("rerun-interval-persist", Prop, Bool, false),
            FieldSchema::new("retry-interval-persist", Prop, Bool, false),
            FieldSchema::new("rerun-max-count", Prop, Count, false),
            FieldSchema::new("retry-max-count", Prop, Count, false),
            FieldSchema::new("timeout", Prop, DurationOrInfinite, false),
            FieldSchema::new("on-failure", Prop, Enum(&["continue", "halt"]), false),
            FieldSchema::new("background", Prop, Bool, false),
            FieldSchema::new("reboot", Prop, Bool, false),
            FieldSchema::new("offline", Prop, Enum(OFFLINE_MODES), false),
            FieldSchema::new("args", ChildArgs, Strings, false),
            FieldSchema::new("env", ChildProps, StrMap, false),
            FieldSchema::new("script", ChildArg, Str, true).checked(interpreter_line),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::script_name(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for res in model.of_kind(Kind::EXEC) {
            policy(res, diags);
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::EXEC])
    }

    fn render(
        &self,
        _r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        _diags: &mut Diagnostics,
    ) {
        let mut scripts: Vec<&ResolvedResource> = cx.host.model.of_kind(Kind::EXEC).collect();
        // Scripts run in name order where `after` edges leave a choice (Divingbell's rule).
        scripts.sort_by(|a, b| a.name.cmp(&b.name));
        for res in scripts {
            // Its mistakes were reported in the first pass (`check_model`).
            let Some(policy) = policy(res, &mut Diagnostics::new()) else {
                continue;
            };
            out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::EXEC),
                name: res.name.clone(),
                files: Vec::new(),
                lines_in: Vec::new(),
                after: res.list("after").to_vec(),
                apply: Some(res.str("script").unwrap_or_default().to_string()),
                revert: None,
                exec: Some(policy),
                check: None,
            });
        }
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[
            Implied::AfterEvery(Kind::PACKAGE, super::package::PACKAGES_FIRST),
            Implied::AfterEvery(Kind::USER, super::user::USERS_FIRST),
            Implied::AfterEvery(Kind::MOUNT, super::mount::MOUNTS_FIRST),
            Implied::InNameOrder {
                why: "scripts run in name order, so {before} runs before {after}",
            },
        ]
    }
}

/// bell-run executes the script itself, as Divingbell does, so the kernel needs a `#!` line
/// to know what runs it; without one the host says only "exec format error".
fn interpreter_line(script: &str) -> Result<(), Invalid> {
    if script.starts_with("#!") {
        return Ok(());
    }
    let message = if script.trim_start().starts_with("#!") {
        "the script's `#!` line is not its first line"
    } else {
        "the script has no `#!` line"
    };
    Err(Invalid {
        message: message.into(),
        help: "bell-run runs the script as a program: begin it with an interpreter line such \
               as `#!/bin/sh`, `#!/bin/bash` or `#!/usr/bin/env python3`"
            .into(),
    })
}

/// Divingbell's default: a script gets half an hour.
pub const DEFAULT_TIMEOUT: u64 = 1800;

/// A finite number of seconds, `None` for `"infinite"` or unset.
/// The longest `timeout` an exec may have: a week.
pub const MAX_TIMEOUT: u64 = 7 * 24 * 3600;

fn seconds(res: &ResolvedResource, field: &str) -> Option<u64> {
    match res.value(field) {
        Some(Value::Int(i)) => u64::try_from(*i).ok(),
        _ => None,
    }
}

fn is_shell_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The policy of one `exec`, or the diagnostics that say why it has none.
pub fn policy(res: &ResolvedResource, diags: &mut Diagnostics) -> Option<ExecPolicy> {
    let mut ok = true;
    let mut error = |field: &str, message: String, help: &str| {
        let span = res.span_of(field);
        diags.push(RenderError::Invalid {
            message,
            span: span.source_span(),
            help: help.into(),
            file: span.file,
        });
        ok = false;
    };
    let rerun = match res.str("rerun") {
        Some("never") => Rerun::Never,
        Some("once-successfully") => Rerun::OnceSuccessfully,
        _ => Rerun::Always,
    };
    let rerun_interval = seconds(res, "rerun-interval");
    let retry_interval = seconds(res, "retry-interval");
    let key = res.key();
    if rerun_interval.is_some() && rerun != Rerun::Always {
        error(
            "rerun-interval",
            format!("`{key}` has a finite `rerun-interval` but does not rerun"),
            "a rerun interval needs `rerun=\"always\"`; drop it, or set it to \"infinite\"",
        );
    }
    if retry_interval.is_some() && rerun == Rerun::Never {
        error(
            "retry-interval",
            format!("`{key}` has a finite `retry-interval` but `rerun=\"never\"`"),
            "a retry interval needs `rerun=\"always\"` or `rerun=\"once-successfully\"`",
        );
    }
    let rerun_interval_persist = res.bool("rerun-interval-persist").unwrap_or(true);
    let retry_interval_persist = res.bool("retry-interval-persist").unwrap_or(true);
    let rerun_max_count = seconds(res, "rerun-max-count");
    let retry_max_count = seconds(res, "retry-max-count");
    if !rerun_interval_persist && rerun_interval.is_none() {
        error(
            "rerun-interval-persist",
            format!("`{key}` has `rerun-interval-persist=#false` but no finite `rerun-interval`"),
            "it makes the first apply after a boot skip the rerun interval; give              `rerun-interval` (with `rerun=\"always\"`), or drop it",
        );
    }
    if !retry_interval_persist && retry_interval.is_none() {
        error(
            "retry-interval-persist",
            format!("`{key}` has `retry-interval-persist=#false` but no finite `retry-interval`"),
            "it makes the first apply after a boot skip the retry interval; give              `retry-interval`, or drop it",
        );
    }
    if rerun_max_count.is_some() && rerun != Rerun::Always {
        error(
            "rerun-max-count",
            format!("`{key}` has a `rerun-max-count` but does not rerun"),
            "a rerun count needs `rerun=\"always\"`; drop it, or set it to \"infinite\"",
        );
    }
    if retry_max_count.is_some() && rerun == Rerun::Never {
        error(
            "retry-max-count",
            format!("`{key}` has a `retry-max-count` but `rerun=\"never\"`"),
            "a retry count needs `rerun=\"always\"` or `rerun=\"once-successfully\"`",
        );
    }
    if res.bool("reboot") == Some(true) && rerun == Rerun::Always {
        error(
            "reboot",
            format!("`{key}` asks for a reboot after every run, and runs again after every boot"),
            "a script whose work takes effect at the next boot runs once: give it \
             `rerun=\"once-successfully\"`, or drop `reboot=#true`",
        );
    }
    let timeout = match res.value("timeout") {
        Some(Value::Str(s)) if s == "infinite" => {
            error(
                "timeout",
                format!("`{key}` cannot have an infinite `timeout`"),
                "give a whole number of seconds; a script that hangs would hold every later one",
            );
            DEFAULT_TIMEOUT
        }
        Some(Value::Int(0)) => {
            error(
                "timeout",
                format!("`{key}` has a `timeout` of 0 seconds"),
                "give a positive number of seconds, such as 1800",
            );
            DEFAULT_TIMEOUT
        }
        _ => match seconds(res, "timeout") {
            Some(t) if t > MAX_TIMEOUT => {
                error(
                    "timeout",
                    format!("`{key}` has a `timeout` of {t} seconds, more than a week"),
                    "give at most 604800 seconds; a script that runs longer belongs in a \
                     systemd unit, with `background=#true` to start it",
                );
                DEFAULT_TIMEOUT
            }
            t => t.unwrap_or(DEFAULT_TIMEOUT),
        },
    };
    let env = res.map("env").cloned().unwrap_or_default();
    for name in env.keys() {
        if !is_shell_identifier(name) {
            error(
                "env",
                format!(
                    "`{}` is not a valid environment variable name",
                    name.escape_debug()
                ),
                "names are letters, digits and `_`, not starting with a digit, such as `APP_MODE`",
            );
        } else if name.starts_with("BELL_") {
            error(
                "env",
                format!("`{name}` is set by bell-run itself"),
                "bell-run gives every script BELL_ROOT, BELL_STATE, BELL_OFFLINE, BELL_RESOURCE \
                 and BELL_GENERATION; pick another name for your own variable",
            );
        }
    }
    let on_failure = match res.str("on-failure") {
        Some("halt") => OnFailure::Halt,
        _ => OnFailure::Continue,
    };
    ok.then(|| ExecPolicy {
        rerun,
        rerun_interval,
        retry_interval,
        rerun_interval_persist,
        retry_interval_persist,
        rerun_max_count,
        retry_max_count,
        timeout,
        on_failure,
        background: res.bool("background").unwrap_or(false),
        args: res.list("args").to_vec(),
        env,
        offline: offline_mode(res),
        reboot: res.bool("reboot").unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell_identifiers() {
        assert!(super::is_shell_identifier("env1"));
        assert!(super::is_shell_identifier("_X"));
        assert!(!super::is_shell_identifier("1x"));
        assert!(!super::is_shell_identifier("a-b"));
        assert!(!super::is_shell_identifier(""));
        assert!(!super::is_shell_identifier("a=b"));
    }
}

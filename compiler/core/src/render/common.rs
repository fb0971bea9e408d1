//! Pieces several kinds share: rendering an apply/revert script from a stdlib template with the
//! prelude's context, the `systemd-daemon-reload` trigger, diagnostics that point at two
//! declarations, and mapping a line inside a multi-line spec string back to the spec file.

use super::{BundleBuilder, HostContext, RenderError, Renderer};
use crate::diagnostic::Diagnostics;
use crate::source::{Sources, Span};
use crate::targets::TargetPath;
use minijinja::context;

/// Where units bell writes go (mounts, ethtool, `unit`, the units `file` drops there).
pub const UNIT_DIR: TargetPath = TargetPath {
    key: "unit_dir",
    default: "/etc/systemd/system",
};

/// Renders `template` as the `role` script (`apply` or `revert`) of `kind:name`. The prelude
/// the template includes reads `kind`, `name` and `role` from the context.
pub fn script(
    r: &Renderer,
    kind: &str,
    name: &str,
    role: &str,
    template: &str,
    ctx: minijinja::Value,
) -> Result<String, String> {
    r.stdlib(template, context! { kind, name, role, ..ctx })
}

/// Adds the trigger that reloads systemd once after unit files under the target's unit
/// directory changed, so that the applies that follow see the new units.
pub fn daemon_reload_trigger(
    r: &Renderer,
    cx: &HostContext,
    out: &mut BundleBuilder,
) -> Result<(), String> {
    let unit_dir = cx.target.path(&UNIT_DIR);
    let dir = format!("{unit_dir}/");
    let text = r.stdlib("systemd/daemon-reload.sh.j2", context! { unit_dir })?;
    out.add_trigger("systemd-daemon-reload", vec![dir], text);
    Ok(())
}

/// Reports a stdlib rendering failure (a value the template's filter refused) against a span.
pub fn invalid(diags: &mut Diagnostics, span: Span, message: String, help: &str) {
    diags.push(RenderError::Invalid {
        message,
        span: span.source_span(),
        help: help.into(),
        file: span.file,
    });
}

/// The most a bounded number of a spec may be: a duration in seconds (a probe's attempt, a
/// reload, a reboot hook), past which a step holds the host's lock and its rollout slot for
/// nothing, or a count of attempts.
pub const LONGEST_STEP: u64 = 3600;

/// `field` of `res` as a whole number from 1 to [`LONGEST_STEP`], `default` when it is not
/// given; `None` after a diagnostic (`message`, `help`) at the field when it is out of range.
pub fn bounded(
    diags: &mut Diagnostics,
    res: &crate::resolve::ResolvedResource,
    field: &str,
    default: u64,
    message: String,
    help: &str,
) -> Option<u64> {
    match res.value(field) {
        None => Some(default),
        Some(crate::spec::Value::Int(n)) if *n >= 1 && n.unsigned_abs() <= LONGEST_STEP => {
            Some(n.unsigned_abs())
        }
        Some(_) => {
            invalid(diags, res.span_of(field), message, help);
            None
        }
    }
}

/// A stdlib template that failed on a resource's values: a bug in bellc, not in the spec.
pub fn template_error(res: &crate::resolve::ResolvedResource, message: String) -> RenderError {
    let span = res.origin.span;
    RenderError::Template {
        resource: res.key(),
        message,
        span: span.source_span(),
        help: "this is a bug in bellc's stdlib templates; please report it".into(),
        file: span.file,
    }
}

/// Reports two declarations that claim the same thing. miette labels point into one file, so
/// the first declaration is labelled when it is in the same file, and named in the message
/// either way.
pub fn clash(diags: &mut Diagnostics, message: String, first: Span, second: Span, help: String) {
    diags.push(RenderError::Clash {
        message,
        first: (first.file == second.file).then(|| first.source_span()),
        span: second.source_span(),
        help,
        file: second.file,
    });
}

/// The span of line `line` (1-based) of the string value written at `field`: for a multi-line
/// string (`"""` ... `"""`) the value's lines are the source lines after the opening quotes;
/// otherwise the whole value is on one source line and the field's span is the best answer.
pub fn line_in_string(sources: &Sources, field: Span, line: usize) -> Span {
    let text = sources.slice(field);
    let Some(open) = text.find("\"\"\"") else {
        return field;
    };
    let mut start = match text[open..].find('\n') {
        Some(nl) => open + nl + 1,
        None => return field,
    };
    for _ in 1..line {
        match text[start..].find('\n') {
            Some(nl) => start += nl + 1,
            None => return field,
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |nl| start + nl);
    Span::new(
        field.file,
        (field.offset + start, end.saturating_sub(start)).into(),
    )
}

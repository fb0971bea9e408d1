//! `confirm`: how long a host has, after a live apply of a new generation, to reach the fleet
//! again and pass its health probes before it goes back to the generation it ran before (one
//! per host, no name; placed at the top, by label or per host like any setting).
//!
//! Only bell-run can tell whether the host still reaches its store and its mirror, so all this
//! stage does is carry the timeout into the manifest ([`bell_bundle::Confirm`]), refusing one
//! no host could keep: shorter than a few seconds, or longer than an hour.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::render::common::invalid;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*, Kind, Value};
use bell_bundle::confirm::{DEFAULT, LONGEST, SHORTEST};

pub struct Confirm;

impl ResourceKind for Confirm {
    fn keyword(&self) -> &'static str {
        "confirm"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[FieldSchema::new("timeout", Prop, Duration, false)];
        SCHEMA
    }

    fn is_setting(&self) -> bool {
        true
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        if let Some(res) = model.of_kind(Kind::CONFIRM).next() {
            timeout(res, diags);
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::CONFIRM])
    }

    fn render(&self, _: &Renderer, cx: &HostContext, out: &mut BundleBuilder, _: &mut Diagnostics) {
        let Some(res) = cx.host.model.of_kind(Kind::CONFIRM).next() else {
            return;
        };
        // Its mistakes were reported in the first pass (`check_model`).
        if let Some(timeout) = timeout(res, &mut Diagnostics::new()) {
            out.set_confirm(bell_bundle::Confirm { timeout });
        }
    }
}

/// The `timeout` in seconds, or the diagnostic that says why it is out of range.
fn timeout(res: &ResolvedResource, diags: &mut Diagnostics) -> Option<u64> {
    match res.value("timeout") {
        None => Some(DEFAULT),
        Some(Value::Int(n)) if (SHORTEST..=LONGEST).contains(&n.unsigned_abs()) && *n > 0 => {
            Some(n.unsigned_abs())
        }
        Some(_) => {
            invalid(
                diags,
                res.span_of("timeout"),
                format!("`confirm`: `timeout` must be between {SHORTEST}s and 1h"),
                "it is how long the host has to reach its store and mirror again after an apply \
                 and pass its probes, such as \"2m\"; deploy-rs waits 30s",
            );
            None
        }
    }
}

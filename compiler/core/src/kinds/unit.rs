//! `unit`: a systemd unit file bell owns, enabled and started as asked.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::graph::resources::Implied;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Unit;

impl ResourceKind for Unit {
    fn keyword(&self) -> &'static str {
        "unit"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("enable", Prop, Bool, false),
            FieldSchema::new("start", Prop, Bool, false),
            FieldSchema::new("content", ChildArg, Str, true),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for res in model.of_kind(Kind::UNIT) {
            let enable = res.bool("enable").unwrap_or(false);
            let start = res.bool("start").unwrap_or(enable);
            if (enable || start) && res.name.contains("@.") {
                crate::render::common::invalid(
                    diags,
                    res.origin.span,
                    format!(
                        "unit `{}` is a template: it cannot be enabled or started without an \
                         instance",
                        res.name
                    ),
                    "set `enable=#false start=#false` and add a `unit` for an instance, such as \
                     `NAME@INSTANCE.service`",
                );
            }
        }
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::systemd_unit_name(name)
    }

    /// Rendered by `file`: units are rendered with files (`file`): both are bell-owned files, in declaration order, so a unit and a file at one path conflict the same way either way round.
    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[])
    }

    fn render(&self, _: &Renderer, _: &HostContext, _: &mut BundleBuilder, _: &mut Diagnostics) {}

    fn user_template<'r>(&self, resource: &'r ResolvedResource) -> Option<&'r str> {
        resource.str("content")
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[
            Implied::AfterEvery(Kind::PACKAGE, super::package::PACKAGES_FIRST),
            Implied::AfterPathsIn {
                field: "content",
                kind: Kind::FILE,
                why: "{after} names the path of {before}, so the file is written first",
            },
        ]
    }
}

//! `perm`: owner, group and mode of paths bell does not write (a trailing `*` for a glob).
//!
//! perm: owner, group and mode of paths bell does not create (globs expand on the host). The
//! originals are recorded per path the first time and put back by the revert.
//!
//! A path that appears later (a new file matching the glob) or is changed back by someone else
//! is found by the resource's check script, which `bell-run check` and every live apply run
//! (the periodic timer's included), and the drifted resource is applied again.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::graph::resources::Implied;
use crate::render::{common, BundleBuilder, BundleKind, HostContext, NewResource, Renderer};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use minijinja::context;

pub struct Perm;

impl ResourceKind for Perm {
    fn keyword(&self) -> &'static str {
        "perm"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("owner", Prop, Str, false).checked(validate::unix_user_name),
            FieldSchema::new("group", Prop, Str, false).checked(validate::unix_group_name),
            FieldSchema::new("mode", Prop, Mode, false),
            FieldSchema::new("ignore-missing", Prop, Bool, false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "path"
    }

    /// An absolute path, or a glob of them.
    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::absolute_path(name.trim_end_matches('*')).or_else(|e| {
            if name.starts_with('/')
                && !name.contains("/../")
                && !name.contains("//")
                && !name.ends_with("/..")
            {
                Ok(())
            } else {
                Err(e)
            }
        })
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        for p in cx.host.model.of_kind(Kind::PERM) {
            let ctx = context! {
                pattern => p.name,
                owner => p.str("owner"),
                group => p.str("group"),
                mode => p.str("mode"),
                ignore_missing => p.bool("ignore-missing").unwrap_or(false),
            };
            let scripts = ["apply", "revert", "check"].map(|role| {
                common::script(
                    r,
                    "perm",
                    &p.name,
                    role,
                    &format!("perm/{role}.sh.j2"),
                    ctx.clone(),
                )
            });
            match scripts {
                [Ok(apply), Ok(revert), Ok(check)] => {
                    out.add_resource(NewResource {
                        kind: BundleKind::Of(Kind::PERM),
                        name: p.name.clone(),
                        files: Vec::new(),
                        after: p.list("after").to_vec(),
                        apply: Some(apply),
                        revert: Some(revert),
                        exec: None,
                        check: Some(check),
                    });
                }
                [Err(message), _, _] | [_, Err(message), _] | [_, _, Err(message)] => {
                    common::invalid(diags, p.origin.span, message, "")
                }
            }
        }
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[Implied::AfterNamedBy {
            field: "owner",
            kind: Kind::USER,
        }]
    }
}

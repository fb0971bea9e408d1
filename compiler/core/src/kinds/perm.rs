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
        validate::glob_not_bell_own(name)?;
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

    /// A glob in the first component (`/*`, `/e*`) changes the owner or mode of the system's
    /// own top-level directories: allowed, since it may be meant, but never silently.
    fn check_model(
        &self,
        model: &crate::resolve::Model,
        _: &crate::source::Sources,
        diags: &mut Diagnostics,
    ) {
        for p in model.of_kind(Kind::PERM) {
            let first = p
                .name
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("");
            if first.contains(['*', '?', '[']) {
                let span = p.origin.span;
                diags.push(PermWarning::TopLevelGlob {
                    pattern: p.name.clone(),
                    span: span.source_span(),
                    file: span.file,
                });
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::PERM])
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
                        lines_in: Vec::new(),
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
            why: super::user::OWNER_FIRST,
        }]
    }
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PermWarning {
    #[error("`{pattern}` matches top-level directories of the system (/etc, /usr, /var, ...)")]
    #[diagnostic(
        code(bell::perm::top_level_glob),
        severity(Warning),
        help("name the directories: a mode or owner on /etc or /usr breaks logins, sudo and ssh")
    )]
    TopLevelGlob {
        pattern: String,
        #[label("this glob")]
        span: miette::SourceSpan,
        file: crate::source::FileId,
    },
}

impl PermWarning {
    fn file_id(&self) -> Option<crate::source::FileId> {
        match self {
            PermWarning::TopLevelGlob { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(PermWarning);

//! `limit`: one line of limits.conf(5), in bell's own file under the target's limits.d.
//!
//! limits: one bell-owned file in the target's limits.d holding every `limit`; files bell did
//! not write are never touched (Divingbell deletes them).

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, RenderError, Renderer,
};
use crate::resolve::Model;
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use crate::targets::TargetPath;
use minijinja::context;

pub struct Limit;

/// The `item` values limits.conf(5) knows.
const ITEMS: &[&str] = &[
    "as",
    "chroot",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "maxlogins",
    "maxsyslogins",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nonewprivs",
    "nproc",
    "priority",
    "rss",
    "rtprio",
    "sigpending",
    "stack",
];

/// A limits.conf value: a whole number (negative for `nice` and `priority`, `-1` for no
/// limit), or `unlimited`/`infinity`. pam_limits skips a line it cannot read, and says so only
/// in the journal: a wrong value would leave the limit unset without a word.
fn limit_value(value: &str) -> Result<(), Invalid> {
    if matches!(value, "unlimited" | "infinity") || value.parse::<i64>().is_ok() {
        return Ok(());
    }
    let help = "a limit is a whole number (such as 65536; `nice` and `priority` may be \
                negative), or `unlimited`, `infinity` or -1 for none";
    let message = match crate::escape::limits_field(value) {
        Ok(_) => format!("`{value}` is not a limit value"),
        Err(reason) => format!("invalid limits.conf field: {reason}"),
    };
    Err(Invalid {
        message,
        help: help.into(),
    })
}

impl ResourceKind for Limit {
    fn keyword(&self) -> &'static str {
        "limit"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("domain", Prop, Str, true).checked(validate::limits_domain),
            FieldSchema::new("type", Prop, Enum(&["soft", "hard", "-"]), true),
            FieldSchema::new("item", Prop, Enum(ITEMS), true),
            FieldSchema::new("value", Prop, IntOrStr, true).checked(limit_value),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::resource_name(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for l in model.of_kind(Kind::LIMIT) {
            let (Some(domain), Some(item)) = (l.str("domain"), l.str("item")) else {
                continue;
            };
            // pam_limits counts a `%` domain's logins together, and drops it for any other item
            // with a line in the journal only.
            if domain.starts_with('%') && item != "maxlogins" {
                let span = l.span_of("domain");
                diags.push(RenderError::Invalid {
                    message: format!(
                        "domain `{domain}` is for `maxlogins` only: pam_limits ignores it for `{item}`"
                    ),
                    span: span.source_span(),
                    help: match &domain[1..] {
                        "" => "to limit every user, write `*`".to_string(),
                        group => format!("to limit each member of the group, write `@{group}`"),
                    },
                    file: span.file,
                });
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::LIMIT])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let limits: Vec<_> = cx.host.model.of_kind(Kind::LIMIT).collect();
        if limits.is_empty() {
            return;
        }
        let rows: Vec<_> = limits
            .iter()
            .map(|l| {
                context! {
                    domain => l.str("domain").unwrap_or_default(),
                    type => l.str("type").unwrap_or_default(),
                    item => l.str("item").unwrap_or_default(),
                    value => l.str("value").unwrap_or_default(),
                }
            })
            .collect();
        let path = format!("{}/{FILE_NAME}", cx.target.path(&LIMITS_DIR));
        match r.stdlib("limits/limits.conf.j2", context! { limits => rows }) {
            Ok(text) => {
                let _ = out.add_file(NewFile::root_owned(path.clone(), text, 0o644), "limit");
            }
            Err(message) => {
                let span = limits[0].origin.span;
                common::invalid(diags, span, message, "limits.conf fields are single words");
                return;
            }
        }
        for l in limits {
            out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::LIMIT),
                name: l.name.clone(),
                files: Vec::new(),
                lines_in: vec![path.clone()],
                after: l.list("after").to_vec(),
                apply: None,
                revert: None,
                exec: None,
                check: None,
            });
        }
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[LIMITS_DIR]
    }
}

pub const FILE_NAME: &str = "60-bell.conf";

pub const LIMITS_DIR: TargetPath = TargetPath {
    key: "limits_dir",
    default: "/etc/security/limits.d",
};

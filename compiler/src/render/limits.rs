//! limits: one bell-owned file in the target's limits.d holding every `limit`; files bell did
//! not write are never touched (Divingbell deletes them).

use super::{BundleBuilder, HostContext, NewFile, NewResource, RenderError, Renderer};
use crate::diagnostic::Diagnostics;
use crate::spec::Kind;
use crate::targets::TargetPath;
use minijinja::context;

pub const FILE_NAME: &str = "60-bell.conf";

pub const LIMITS_DIR: TargetPath = TargetPath {
    key: "limits_dir",
    default: "/etc/security/limits.d",
};

pub fn render(r: &Renderer, cx: &HostContext, out: &mut BundleBuilder, diags: &mut Diagnostics) {
    let limits: Vec<_> = cx
        .host
        .model
        .resources
        .iter()
        .filter(|res| res.kind == Kind::LIMIT)
        .collect();
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
            let _ = out.add_file(NewFile::root_owned(path, text, 0o644), "limit");
        }
        Err(message) => {
            let span = limits[0].origin.span;
            diags.push(RenderError::Invalid {
                message,
                span: span.source_span(),
                help: "limits.conf fields are single words".into(),
                file: span.file,
            });
            return;
        }
    }
    for l in limits {
        out.add_resource(NewResource {
            kind: "limit",
            name: l.name.clone(),
            files: Vec::new(),
            after: l.list("after").to_vec(),
            apply: None,
            revert: None,
            exec: None,
            check: None,
        });
    }
}

//! sysctl: one bell-owned file in the target's sysctl.d, and one resource per key so that a key
//! leaving the spec is reverted on its own (its original value put back).

use super::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, RenderError, Renderer,
};
use crate::diagnostic::Diagnostics;
use crate::targets::TargetPath;
use minijinja::context;

pub const FILE_NAME: &str = "60-bell.conf";

pub const SYSCTL_DIR: TargetPath = TargetPath {
    key: "sysctl_dir",
    default: "/etc/sysctl.d",
};

pub fn render(r: &Renderer, cx: &HostContext, out: &mut BundleBuilder, diags: &mut Diagnostics) {
    let model = &cx.host.model;
    if model.sysctl.is_empty() {
        return;
    }
    let settings: Vec<_> = model
        .sysctl
        .values()
        .map(|s| context! { key => s.key, value => s.value })
        .collect();
    let path = format!("{}/{FILE_NAME}", cx.target.path(&SYSCTL_DIR));
    match r.stdlib("sysctl/sysctl.conf.j2", context! { settings }) {
        Ok(text) => {
            let _ = out.add_file(NewFile::root_owned(path, text, 0o644), "sysctl");
        }
        Err(message) => {
            let first = model.sysctl.values().next().map(|s| s.origin.span);
            if let Some(span) = first {
                diags.push(RenderError::Invalid {
                    message,
                    span: span.source_span(),
                    help: "a sysctl value must fit on one line".into(),
                    file: span.file,
                });
            }
            return;
        }
    }
    for (path, setting) in &model.sysctl {
        let ctx = context! { key => setting.key, value => setting.value, path };
        let scripts = ["apply", "revert", "check"].map(|role| {
            common::script(
                r,
                "sysctl",
                &setting.key,
                role,
                &format!("sysctl/{role}.sh.j2"),
                ctx.clone(),
            )
        });
        match scripts {
            [Ok(apply), Ok(revert), Ok(check)] => {
                out.add_resource(NewResource {
                    kind: BundleKind::Sysctl,
                    name: setting.key.clone(),
                    files: Vec::new(),
                    after: Vec::new(),
                    apply: Some(apply),
                    revert: Some(revert),
                    exec: None,
                    check: Some(check),
                });
            }
            [Err(message), _, _] | [_, Err(message), _] | [_, _, Err(message)] => common::invalid(
                diags,
                setting.origin.span,
                message,
                "a sysctl value is one line of text",
            ),
        }
    }
}

//! sysctl: one bell-owned file in the target's sysctl.d, and one resource per key so that a key
//! leaving the spec is reverted on its own (its original value put back).
//!
//! Not a kind of the registry: `sysctl` is the language's own node, a map of keys that layers
//! merge key by key, so the model holds it as a map rather than as resources. Its rendering is
//! here with the kinds', and runs before theirs.

use crate::diagnostic::Diagnostics;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, Renderer,
};
use crate::targets::TargetPath;
use minijinja::context;

/// The KIND of a key's resource, `sysctl:KEY`.
pub const KEYWORD: &str = "sysctl";

pub const FILE_NAME: &str = "60-bell.conf";

/// The batch whose one check reads back every key's live value.
pub const BATCH: &str = "sysctl";

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
    let file = format!("{}/{FILE_NAME}", cx.target.path(&SYSCTL_DIR));
    match r.stdlib("sysctl/sysctl.conf.j2", context! { settings }) {
        Ok(text) => {
            let _ = out.add_file(NewFile::root_owned(file.clone(), text, 0o644), KEYWORD);
        }
        Err(message) => {
            let first = model.sysctl.values().next().map(|s| s.origin.span);
            if let Some(span) = first {
                common::invalid(diags, span, message, "a sysctl value must fit on one line");
            }
            return;
        }
    }
    // The live values are read back by one check for every key, and set by one apply for every
    // key due (a first apply) (see the templates).
    let keys: Vec<_> = model
        .sysctl
        .iter()
        .map(|(path, s)| context! { key => s.key, value => s.value, path })
        .collect();
    let [check, apply] = [
        ("check", "sysctl/check-batch.sh.j2"),
        ("apply", "sysctl/apply-batch.sh.j2"),
    ]
    .map(|(role, template)| {
        common::script(
            r,
            "batch",
            BATCH,
            role,
            template,
            context! { settings => keys.clone() },
        )
    });
    // A value the filters refuse is reported below, against its own key.
    if let (Ok(check), Ok(apply)) = (check, apply) {
        out.add_batch(BATCH, check, Some(apply));
    }
    for (path, setting) in model.sysctl.iter() {
        // Asked for every key of every bundle: remembered by the values themselves.
        let (key, value) = (setting.key.as_str(), setting.value.as_str());
        let scripts = ["apply", "revert"].map(|role| {
            r.stdlib_of_parts(
                &format!("sysctl/{role}.sh.j2"),
                &[role, key, value, path],
                || context! { kind => KEYWORD, name => key, role, key, value, path },
            )
        });
        match scripts {
            [Ok(apply), Ok(revert)] => {
                let resource = NewResource {
                    kind: BundleKind::Named(KEYWORD),
                    name: setting.key.clone(),
                    files: Vec::new(),
                    lines_in: vec![file.clone()],
                    after: Vec::new(),
                    apply: Some(apply),
                    revert: Some(revert),
                    exec: None,
                    check: None,
                };
                out.add_batched_resource(resource, BATCH);
            }
            [Err(message), _] | [_, Err(message)] => common::invalid(
                diags,
                setting.origin.span,
                message,
                "a sysctl value is one line of text",
            ),
        }
    }
}

//! perm: owner, group and mode of paths bell does not create (globs expand on the host). The
//! originals are recorded per path the first time and put back by the revert.
//!
//! A path that appears later (a new file matching the glob) or is changed back by someone else
//! is found by the resource's check script, which `bell-run check` and every live apply run
//! (the periodic timer's included), and the drifted resource is applied again.

use super::{common, BundleBuilder, HostContext, NewResource, Renderer};
use crate::diagnostic::Diagnostics;
use crate::spec::Kind;
use minijinja::context;

pub fn render(r: &Renderer, cx: &HostContext, out: &mut BundleBuilder, diags: &mut Diagnostics) {
    for p in cx
        .host
        .model
        .resources
        .iter()
        .filter(|p| p.kind == Kind::PERM)
    {
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
                    kind: "perm",
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

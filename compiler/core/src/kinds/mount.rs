//! `mount`: a systemd mount unit for a filesystem, named after its target.
//!
//! mount: a systemd `.mount` unit per mount (named after its target, as systemd requires) that
//! mounts at boot, and apply/revert scripts that create the mount point and mount now.
//! Two mounts on one target would be two units for one path; that is refused at build time.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::escape;
use crate::front::validate;
use crate::graph::resources::Implied;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, Renderer,
};
use crate::resolve::Model;
use crate::source::Span;
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use minijinja::context;
use std::collections::BTreeMap;

/// The directory of the links that enable a mount unit (its `[Install] WantedBy=`).
const WANTS: &str = "local-fs.target.wants";

/// The batch whose one check reads back every mount, and whose apply brings them live.
const BATCH: &str = "mount";

pub struct Mount;

impl ResourceKind for Mount {
    fn keyword(&self) -> &'static str {
        "mount"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("target", Prop, Str, true).checked(validate::mount_target),
            FieldSchema::new("device", Prop, Str, true).checked(validate::unit_setting_not_empty),
            FieldSchema::new("type", Prop, Str, true).checked(validate::unit_setting_not_empty),
            FieldSchema::new("options", Prop, Str, false).checked(validate::unit_setting),
            FieldSchema::new("before", Prop, Str, false).checked(validate::unit_name_list),
            FieldSchema::new("after", Prop, Str, false).checked(validate::unit_name_list),
            FieldSchema::WAIT_FOR,
            FieldSchema::new("requires", ChildArgs, Strings, false),
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::resource_name(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        let mut targets: BTreeMap<&str, (&str, Span)> = BTreeMap::new();
        for m in model.of_kind(Kind::MOUNT) {
            let Some(target) = m.str("target") else {
                continue;
            };
            if let Some((first, first_span)) =
                targets.insert(target, (&m.name, m.span_of("target")))
            {
                common::clash(
                    diags,
                    format!("mounts `{first}` and `{}` both mount on `{target}`", m.name),
                    first_span,
                    m.span_of("target"),
                    "one file system per mount point: remove one mount, or give it another target"
                        .into(),
                );
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::MOUNT])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let mut targets: BTreeMap<&str, (&str, Span)> = BTreeMap::new();
        let mut any = false;
        let mut batched = Vec::new();
        for m in cx.host.model.of_kind(Kind::MOUNT) {
            let (Some(target), Some(device), Some(fstype)) =
                (m.str("target"), m.str("device"), m.str("type"))
            else {
                // Missing required fields are reported by resolution.
                continue;
            };
            // Two mounts on one target were reported by `check_model`.
            if targets
                .insert(target, (&m.name, m.span_of("target")))
                .is_some()
            {
                continue;
            }
            let mut order = Vec::new();
            for field in ["before", "after"] {
                let names: Vec<&str> = m
                    .str(field)
                    .map(|s| s.split_whitespace().collect())
                    .unwrap_or_default();
                order.push(names);
            }
            let unit = escape::mount_unit_name(target);
            let unit_dir = cx.target.path(&common::UNIT_DIR);
            let path = format!("{unit_dir}/{unit}");
            let ctx = context! {
                name => m.name, target, device, type => fstype,
                options => m.str("options"), before => order[0], after => order[1],
            };
            let text = match r.stdlib("mount/mount.unit.j2", ctx) {
                Ok(text) => text,
                Err(message) => {
                    common::invalid(
                        diags,
                        m.origin.span,
                        message,
                        "unit file settings are one line each, without control characters",
                    );
                    continue;
                }
            };
            let unit_hash = bell_bundle::sha256_hex(text.as_bytes());
            if let Err(first) =
                out.add_file(NewFile::root_owned(path.clone(), text, 0o644), &m.key())
            {
                common::invalid(
                    diags,
                    m.span_of("target"),
                    format!(
                        "the unit file `{path}` of mount `{}` is also written by `{first}`",
                        m.name
                    ),
                    "remove one of them",
                );
                continue;
            }
            // A bind mount shows its source's device and file system, not the spec's path.
            let bind = m
                .str("options")
                .is_some_and(|o| o.split(',').any(|o| matches!(o.trim(), "bind" | "rbind")));
            let ctx = context! {
                target, unit, unit_dir, unit_hash, device, type => fstype, bind,
                install_links => vec![context! { dir => WANTS }],
            };
            batched.push(context! {
                name => m.name, unit, unit_hash, target, device, type => fstype, bind,
            });
            let scripts = ["apply", "revert"].map(|role| {
                common::script(
                    r,
                    "mount",
                    &m.name,
                    role,
                    &format!("mount/{role}.sh.j2"),
                    ctx.clone(),
                )
            });
            match scripts {
                [Ok(apply), Ok(revert)] => {
                    let resource = NewResource {
                        kind: BundleKind::Of(Kind::MOUNT),
                        name: m.name.clone(),
                        files: vec![path],
                        lines_in: Vec::new(),
                        after: Vec::new(),
                        apply: Some(apply),
                        revert: Some(revert),
                        exec: None,
                        check: None,
                    };
                    out.add_batched_resource(resource, BATCH);
                }
                [Err(message), _] | [_, Err(message)] => {
                    common::invalid(diags, m.origin.span, message, "");
                    continue;
                }
            }
            any = true;
        }
        if any {
            // Every mount is read back by one check (see the template).
            let unit_dir = cx.target.path(&common::UNIT_DIR);
            let ctx = context! { mounts => batched, unit_dir, wants => WANTS };
            let [check, apply] = [
                ("check", "mount/check-batch.sh.j2"),
                ("apply", "mount/apply-batch.sh.j2"),
            ]
            .map(|(role, template)| common::script(r, "batch", BATCH, role, template, ctx.clone()));
            match (check, apply) {
                (Ok(check), Ok(apply)) => out.add_batch(BATCH, check, Some(apply)),
                (Err(message), _) | (_, Err(message)) => {
                    common::invalid(diags, cx.host.model.resources[0].origin.span, message, "")
                }
            }
            if let Err(message) = common::daemon_reload_trigger(r, cx, out) {
                common::invalid(diags, cx.host.model.resources[0].origin.span, message, "");
            }
        }
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[Implied::AfterEnclosing {
            field: "target",
            why: "{after} is mounted under {before}, so it is mounted after it",
        }]
    }
}

/// Why what depends on this kind comes after it (see `Implied::AfterEvery`).
pub const MOUNTS_FIRST: crate::graph::resources::Reason =
    crate::graph::resources::Reason::Rule("mounts are up before scripts run");

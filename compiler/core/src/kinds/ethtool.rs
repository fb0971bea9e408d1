//! `ethtool`: offload features of one network interface, set at boot by a oneshot unit.
//!
//! ethtool: per interface, a oneshot unit that sets its features at boot (`ethtool -K`), and
//! apply/revert scripts that set them now, read them back and put the originals back.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::escape;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, Renderer,
};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use minijinja::context;

pub struct Ethtool;

impl ResourceKind for Ethtool {
    fn keyword(&self) -> &'static str {
        "ethtool"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("settings", AnyChildren, OnOffMap, false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "interface name"
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::interface_name(name)
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::ETHTOOL])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let mut any = false;
        for e in cx.host.model.of_kind(Kind::ETHTOOL) {
            let iface = e.name.as_str();
            let features: Vec<_> = e
                .map("settings")
                .into_iter()
                .flatten()
                .map(|(name, want)| context! { name, want, shown => shown_name(name) })
                .collect();
            if features.is_empty() {
                continue;
            }
            // Interface names may hold `-` and `@`, which mean something in unit names.
            let escaped = escape::systemd_escape_path(&format!("/{iface}"));
            let unit = format!("bell-ethtool-{escaped}.service");
            let device = format!(
                "{}.device",
                escape::systemd_escape_path(&format!("/sys/subsystem/net/devices/{iface}"))
            );
            let unit_dir = cx.target.path(&common::UNIT_DIR);
            let path = format!("{unit_dir}/{unit}");
            let text = match r.stdlib(
                "ethtool/ethtool.service.j2",
                context! { iface, device, features },
            ) {
                Ok(text) => text,
                Err(message) => {
                    common::invalid(diags, e.origin.span, message, "");
                    continue;
                }
            };
            if let Err(first) =
                out.add_file(NewFile::root_owned(path.clone(), text, 0o644), &e.key())
            {
                common::invalid(
                    diags,
                    e.origin.span,
                    format!(
                        "the unit file `{path}` of `{}` is also written by `{first}`",
                        e.key()
                    ),
                    "remove one of them",
                );
                continue;
            }
            let ctx = context! {
                iface, unit, unit_dir, features,
                install_links => vec![context! { dir => "multi-user.target.wants" }],
            };
            let scripts = ["apply", "revert", "check"].map(|role| {
                common::script(
                    r,
                    "ethtool",
                    iface,
                    role,
                    &format!("ethtool/{role}.sh.j2"),
                    ctx.clone(),
                )
            });
            match scripts {
                [Ok(apply), Ok(revert), Ok(check)] => out.add_resource(NewResource {
                    kind: BundleKind::Of(Kind::ETHTOOL),
                    name: e.name.clone(),
                    files: vec![path],
                    lines_in: Vec::new(),
                    after: e.list("after").to_vec(),
                    apply: Some(apply),
                    revert: Some(revert),
                    exec: None,
                    check: Some(check),
                }),
                [Err(message), _, _] | [_, Err(message), _] | [_, _, Err(message)] => {
                    common::invalid(diags, e.origin.span, message, "");
                    continue;
                }
            }
            any = true;
        }
        if any {
            if let Err(message) = common::daemon_reload_trigger(r, cx, out) {
                common::invalid(diags, cx.host.model.resources[0].origin.span, message, "");
            }
        }
    }
}

/// `ethtool -k` prints the long name of a feature `ethtool -K` also takes by its legacy alias.
fn shown_name(feature: &str) -> &str {
    match feature {
        "rx" => "rx-checksumming",
        "tx" => "tx-checksumming",
        "sg" => "scatter-gather",
        "tso" => "tcp-segmentation-offload",
        "ufo" => "udp-fragmentation-offload",
        "gso" => "generic-segmentation-offload",
        "gro" => "generic-receive-offload",
        "lro" => "large-receive-offload",
        "rxvlan" => "rx-vlan-offload",
        "txvlan" => "tx-vlan-offload",
        "ntuple" => "ntuple-filters",
        "rxhash" => "receive-hashing",
        // Kernel names that `ethtool -k` shows under their legacy long name.
        "rx-checksum" => "rx-checksumming",
        "rx-gro" => "generic-receive-offload",
        "tx-generic-segmentation" => "generic-segmentation-offload",
        "rx-lro" => "large-receive-offload",
        "rx-vlan-hw-parse" => "rx-vlan-offload",
        "tx-vlan-hw-insert" => "tx-vlan-offload",
        "rx-ntuple-filter" => "ntuple-filters",
        "rx-hashing" => "receive-hashing",
        other => other,
    }
}

//! `reboot`: how a host reboots when a change needs it (one per host, no name; placed at the
//! top, by label or per host like any setting).
//!
//! bell-run decides on the host, since only the host knows whether it needs a reboot and what
//! time it is there: the settings go into the manifest ([`bell_bundle::Reboot`]) with the
//! arguments the `kernel-args` resources give the command line (a kexec boots with them). A
//! window is checked here with the parser bell-run uses, so that a window that would never
//! open is a build error and not a host that silently never reboots. Without a `reboot` node a
//! host only reports that it needs a reboot.

use super::ResourceKind;
use crate::diagnostic::{Diagnostics, Invalid};
use crate::render::common::{self, template_error};
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*, Kind};
use bell_bundle::{RebootMethod, RebootPolicy};

pub struct Reboot;

const POLICIES: &[&str] = &["when-required", "never"];
const METHODS: &[&str] = &["reboot", "kexec"];
/// A hook may take this long unless the spec says otherwise (a drain takes minutes).
const DEFAULT_HOOK_TIMEOUT: u64 = 300;

fn window(text: &str) -> Result<(), Invalid> {
    bell_bundle::Window::parse(text)
        .map(|_| ())
        .map_err(|message| Invalid {
            message,
            help: "a window is DAYS START-END [ZONE]: `Sat,Sun 02:00-05:00`, \
               `Mon-Fri 22:00-01:00 +01:00`; days are those it starts on"
                .into(),
        })
}

impl ResourceKind for Reboot {
    fn keyword(&self) -> &'static str {
        "reboot"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("policy", Prop, Enum(POLICIES), false),
            FieldSchema::new("method", Prop, Enum(METHODS), false),
            FieldSchema::new("window", RepeatedChildArg, Strings, false).checked(window),
            FieldSchema::new("before-reboot", ChildArg, Str, false),
            FieldSchema::new("after-boot", ChildArg, Str, false),
            FieldSchema::new("timeout", Prop, Duration, false),
        ];
        SCHEMA
    }

    fn is_setting(&self) -> bool {
        true
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        if let Some(res) = model.of_kind(Kind::REBOOT).next() {
            hook_timeout(res, diags);
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::REBOOT, Kind::KERNEL_ARGS])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let model = &cx.host.model;
        let Some(res) = model.of_kind(Kind::REBOOT).next() else {
            return;
        };
        // Its mistakes were reported in the first pass (`check_model`).
        let timeout = hook_timeout(res, &mut Diagnostics::new()).unwrap_or(DEFAULT_HOOK_TIMEOUT);
        let mut hook = |field: &str, when: &str, failing: &str| {
            let run = res
                .str(field)
                .map(str::trim_end)
                .filter(|r| !r.trim().is_empty())?;
            let ctx = minijinja::context! { name => field, when, failing, run, timeout };
            match r.stdlib("reboot/hook.sh.j2", ctx) {
                Ok(script) => Some(out.add_reboot_hook(field, script, timeout)),
                Err(e) => {
                    diags.push(template_error(res, e));
                    None
                }
            }
        };
        let before_reboot = hook(
            "before-reboot",
            "runs right before the host reboots",
            "When it fails, the host does not reboot and keeps its rollout slot.",
        );
        let after_boot = hook(
            "after-boot",
            "runs at the first apply after the reboot, before the health probes",
            "It counts as a health probe: when it fails, the host keeps its rollout slot.",
        );
        // What the kernel-args resources do to the command line, in their name order.
        let mut args = model.of_kind(Kind::KERNEL_ARGS).collect::<Vec<_>>();
        args.sort_by(|a, b| a.name.cmp(&b.name));
        let mut kernel_args: Vec<String> = Vec::new();
        let mut kernel_args_removed: Vec<String> = Vec::new();
        for res in args {
            for (field, into) in [
                ("arg", &mut kernel_args),
                ("remove", &mut kernel_args_removed),
            ] {
                for arg in res.list(field) {
                    if !into.contains(arg) {
                        into.push(arg.clone());
                    }
                }
            }
        }
        out.set_reboot(bell_bundle::Reboot {
            policy: match res.str("policy") {
                Some("never") => RebootPolicy::Never,
                _ => RebootPolicy::WhenRequired,
            },
            method: match res.str("method") {
                Some("kexec") => RebootMethod::Kexec,
                _ => RebootMethod::Reboot,
            },
            windows: res.list("window").to_vec(),
            before_reboot,
            after_boot,
            kernel_args,
            kernel_args_removed,
        });
    }

    /// Whether the bundle reboots its hosts when a change needs one: a `reboot` setting whose
    /// policy is not "never" (as `render` writes it into the manifest).
    fn describe_in_release(&self, model: &Model, host: &mut bell_bundle::ReleaseHost) {
        host.reboots = model
            .of_kind(Kind::REBOOT)
            .next()
            .is_some_and(|r| r.str("policy") != Some("never"));
    }
}

/// The hooks' `timeout`, or the diagnostic that says why it is out of range.
fn hook_timeout(res: &ResolvedResource, diags: &mut Diagnostics) -> Option<u64> {
    common::bounded(
        diags,
        res,
        "timeout",
        DEFAULT_HOOK_TIMEOUT,
        "`reboot`: `timeout` must be between 1s and 1h".to_string(),
        "it bounds `before-reboot` and `after-boot` each, such as \"10m\" for a drain",
    )
}

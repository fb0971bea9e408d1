//! `kernel-args`: arguments added to (`arg`) or taken out of (`remove`) the kernel command
//! line, as a GRUB drop-in `60-bell-NAME.cfg` under the target's `/etc/default/grub.d`, then
//! `update-grub`, as Debian and Ubuntu set it (the target profile's `bootloader`).
//!
//! The running kernel keeps the command line it booted with, so the resource takes effect at
//! the next boot: its check reads `/proc/cmdline` and, when an argument is not there yet (or
//! a removed one still is), says the host needs a reboot (exit 76,
//! `bell_bundle::EXIT_REBOOT_REQUIRED`) rather than that it drifted.

use super::ResourceKind;
use crate::diagnostic::{Diagnostics, Invalid};
use crate::front::validate;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, Renderer,
};
use crate::resolve::Model;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*, Kind};
use crate::targets::TargetPath;
use minijinja::context;
use std::collections::BTreeMap;

pub struct KernelArgs;

pub const GRUB_DROPIN_DIR: TargetPath = TargetPath {
    key: "grub_dropin_dir",
    default: "/etc/default/grub.d",
};

/// The longest argument taken; the whole command line is bounded by the architecture (2048
/// bytes on x86), which the boot loader enforces.
const ARG_MAX: usize = 256;

/// A kernel argument: a flag (`quiet`, `nosmt`) or `key=value` (`hugepagesz=1G`,
/// `console=ttyS0,115200n8`, `root=UUID=…`). No quoting: the kernel's own quoting with `"` is
/// left out, so that what bell writes into the drop-in (which GRUB's scripts source as shell)
/// and what the kernel reads are the same words.
pub fn kernel_arg(arg: &str) -> Result<(), Invalid> {
    let help = "write one argument, a flag such as \"nosmt\" or `key=value` such as \
                \"hugepagesz=1G\"; list several with one `arg` each";
    if arg.is_empty() || arg.len() > ARG_MAX {
        return Err(Invalid {
            message: format!("a kernel argument has 1 to {ARG_MAX} characters"),
            help: help.into(),
        });
    }
    let (key, value) = arg.split_once('=').unwrap_or((arg, ""));
    if key.is_empty() || key.starts_with('-') || key.starts_with('.') {
        return Err(Invalid {
            message: format!("`{}` has no parameter name", arg.escape_debug()),
            help: help.into(),
        });
    }
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.".contains(*c)))
    {
        return Err(Invalid {
            message: format!(
                "the parameter name of `{}` holds {}",
                arg.escape_debug(),
                validate::show_char(c)
            ),
            help: "parameter names are letters, digits, `_`, `-` and `.` (`rd.driver.blacklist`)"
                .into(),
        });
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.,:/+@%=".contains(*c)))
    {
        return Err(Invalid {
            message: format!(
                "the value of `{}` holds {}, which bell does not pass through a boot loader",
                arg.escape_debug(),
                validate::show_char(c)
            ),
            help: "values are letters, digits and `_-.,:/+@%=`; a value with spaces or quotes \
                   cannot be written"
                .into(),
        });
    }
    Ok(())
}

/// The parameter name of an argument (`hugepagesz` of `hugepagesz=1G`).
fn key_of(arg: &str) -> &str {
    arg.split_once('=').map_or(arg, |(key, _)| key)
}

impl ResourceKind for KernelArgs {
    fn keyword(&self) -> &'static str {
        "kernel-args"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("arg", RepeatedChildArg, Strings, false).checked(kernel_arg),
            FieldSchema::new("remove", RepeatedChildArg, Strings, false).checked(kernel_arg),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::resource_name(name)
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[GRUB_DROPIN_DIR]
    }

    /// One host's command line, across its `kernel-args`: an argument given twice, a
    /// parameter given two values, or one both added and removed would leave the kernel to
    /// pick (it takes the last), so each is an error naming both.
    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        // Parameter name → (the argument, the resource that adds it).
        let mut added: BTreeMap<&str, (&str, String)> = BTreeMap::new();
        let resources: Vec<_> = model.of_kind(Kind::KERNEL_ARGS).collect();
        for r in &resources {
            if r.list("arg").is_empty() && r.list("remove").is_empty() {
                common::invalid(
                    diags,
                    r.origin.span,
                    format!("`{}` neither adds nor removes an argument", r.key()),
                    "give it `arg \"hugepagesz=1G\"` or `remove \"quiet\"` children, or drop it",
                );
            }
            for arg in r.list("arg") {
                let key = key_of(arg);
                match added.get(key) {
                    // At the resource: a field's span is that of its last child, not this one.
                    Some((first, by)) => common::invalid(
                        diags,
                        r.origin.span,
                        if first == arg {
                            format!(
                                "`{arg}` is on the command line twice (`{by}` and `{}`)",
                                r.key()
                            )
                        } else {
                            format!(
                                "`{key}` is given two values, `{first}` by `{by}` and `{arg}` by `{}`",
                                r.key()
                            )
                        },
                        "give each argument once; the kernel would take the last",
                    ),
                    None => {
                        added.insert(key, (arg, r.key()));
                    }
                }
            }
        }
        for r in &resources {
            for removed in r.list("remove") {
                let clash = added
                    .get(key_of(removed))
                    .filter(|(arg, _)| !removed.contains('=') || arg == removed);
                if let Some((arg, by)) = clash {
                    common::invalid(
                        diags,
                        r.span_of("remove"),
                        format!(
                            "`{}` removes `{removed}`, which `{by}` adds as `{arg}`",
                            r.key()
                        ),
                        "an argument is either added or removed on one host; drop one of the two",
                    );
                }
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::KERNEL_ARGS])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        for args in cx.host.model.of_kind(Kind::KERNEL_ARGS) {
            let name = args.name.as_str();
            let (add, remove) = (args.list("arg"), args.list("remove"));
            if add.is_empty() && remove.is_empty() {
                continue; // reported by `check_model`
            }
            if cx.target.bootloader.as_deref() != Some("grub") {
                common::invalid(
                    diags,
                    args.origin.span,
                    format!(
                        "target `{}` does not say how to set the kernel command line",
                        cx.target.name
                    ),
                    "kernel-args writes a GRUB drop-in; it needs a target whose profile has \
                     `\"bootloader\": \"grub\"` (debian-12 and every Ubuntu target)",
                );
                continue;
            }
            let path = format!("{}/60-bell-{name}.cfg", cx.target.path(&GRUB_DROPIN_DIR));
            let rendered = [
                ("kernel-args/dropin.cfg.j2", "dropin"),
                ("kernel-args/apply.sh.j2", "apply"),
                ("kernel-args/revert.sh.j2", "revert"),
                ("kernel-args/check.sh.j2", "check"),
            ]
            .map(|(template, role)| {
                r.stdlib(
                    template,
                    context! { kind => "kernel-args", name, role, add, remove, path },
                )
            });
            let [Ok(dropin), Ok(apply), Ok(revert), Ok(check)] = rendered else {
                if let Some(Err(message)) = rendered.into_iter().find(Result::is_err) {
                    diags.push(common::template_error(args, message));
                }
                continue;
            };
            if let Err(first) = out.add_file(
                NewFile::root_owned(path.clone(), dropin, 0o644),
                &args.key(),
            ) {
                common::invalid(
                    diags,
                    args.origin.span,
                    format!("`{path}` of `{}` is also written by `{first}`", args.key()),
                    "two resources cannot manage one file",
                );
                continue;
            }
            out.add_boot_resource(NewResource {
                kind: BundleKind::Of(Kind::KERNEL_ARGS),
                name: name.to_string(),
                files: vec![path],
                lines_in: Vec::new(),
                after: args.list("after").to_vec(),
                apply: Some(apply),
                revert: Some(revert),
                exec: None,
                check: Some(check),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_arguments() {
        for ok in [
            "quiet",
            "hugepagesz=1G",
            "console=ttyS0,115200n8",
            "root=UUID=0a1b-2c3d",
            "rd.driver.blacklist=nouveau",
            "isolcpus=nohz,domain,1-3",
            "bell.test=1",
        ] {
            assert!(kernel_arg(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "=1",
            "-x",
            "a b",
            "a=\"b c\"",
            "a=$(reboot)",
            "a=`id`",
            "a=b;c",
            "a=b'c",
            "a\\b",
            "a=*",
            "a=b\nc",
        ] {
            assert!(kernel_arg(bad).is_err(), "{bad:?}");
        }
        assert!(kernel_arg(&"a".repeat(257)).is_err());
    }
}

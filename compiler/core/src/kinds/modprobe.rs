//! `modprobe`: the options of a kernel module and whether it is blacklisted, in bell's own file
//! `bell-NAME.conf` under the target's modprobe.d.
//!
//! modprobe reads the file the next time it loads the module (at boot, or after `modprobe -r`);
//! bell never unloads a module that is in use, so there is no apply script: the file is the
//! resource, and bell-run removes it when a newer bundle no longer has it. A blacklist takes
//! effect at the next boot, so its check says a reboot is required while the module is loaded.

use super::ResourceKind;
use crate::diagnostic::{Diagnostics, Invalid};
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, Renderer,
};
use crate::resolve::Model;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*, Kind};
use crate::targets::TargetPath;
use minijinja::context;

pub struct Modprobe;

pub const MODPROBE_DIR: TargetPath = TargetPath {
    key: "modprobe_dir",
    default: "/etc/modprobe.d",
};

/// The longest module name the kernel keeps (`MODULE_NAME_LEN` less the terminating NUL).
const NAME_MAX: usize = 55;

/// A module name as `modprobe` takes it: letters, digits, `_` and `-` (which modprobe treats as
/// the same), at most 55 characters.
fn module_name(name: &str) -> Result<(), Invalid> {
    let help = "write the module name as `lsmod` or `modinfo` shows it, such as \"bonding\"";
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(Invalid {
            message: format!("a module name has 1 to {NAME_MAX} characters"),
            help: help.into(),
        });
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        Some(c) => Err(Invalid {
            message: format!(
                "module name `{}` holds {}, which is not a letter, digit, `_` or `-`",
                name.escape_debug(),
                crate::front::validate::show_char(c)
            ),
            help: help.into(),
        }),
        None => Ok(()),
    }
}

/// `param=value` words as `options` takes them on one line (a control character, in a name or
/// a value, fails its word). Quoting is not supported, so that
/// what bell writes is what the module gets: a value with a space cannot be written.
fn module_options(options: &str) -> Result<(), Invalid> {
    let help = "write space-separated `param=value` words, such as \"max_bonds=2 miimon=100\"";
    let words: Vec<&str> = options.split(' ').filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return Err(Invalid {
            message: "`options` is empty".into(),
            help: "drop `options`, or give the module's parameters".into(),
        });
    }
    for word in words {
        let (param, value) = word.split_once('=').unwrap_or((word, ""));
        let bad_param = param.is_empty()
            || param
                .chars()
                .any(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'));
        let bad_value = value
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '#' || c == '"');
        if bad_param || bad_value {
            return Err(Invalid {
                message: format!("`{}` is not a `param=value` word", word.escape_debug()),
                help: help.into(),
            });
        }
    }
    Ok(())
}

impl ResourceKind for Modprobe {
    fn keyword(&self) -> &'static str {
        "modprobe"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("options", Prop, Str, false).checked(module_options),
            FieldSchema::new("blacklist", Prop, Bool, false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "module name"
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for module in model.of_kind(Kind::MODPROBE) {
            if module.str("options").is_none() && module.bool("blacklist") != Some(true) {
                common::invalid(
                    diags,
                    module.origin.span,
                    format!(
                        "`{}` sets neither `options` nor `blacklist=#true`",
                        module.key()
                    ),
                    "give the module's `options`, set `blacklist=#true`, or drop the resource",
                );
            }
        }
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        module_name(name)
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[MODPROBE_DIR]
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::MODPROBE])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let modules = cx.host.model.of_kind(Kind::MODPROBE);
        for module in modules {
            let name = module.name.as_str();
            // One space between words, as `modprobe -c` prints them.
            let options = module
                .str("options")
                .map(|o| o.split_whitespace().collect::<Vec<_>>().join(" "));
            let blacklist = module.bool("blacklist").unwrap_or(false);
            // Reported in the first pass (`check_model`).
            if options.is_none() && !blacklist {
                continue;
            }
            let text = match r.stdlib(
                "modprobe/modprobe.conf.j2",
                context! { name, options, blacklist },
            ) {
                Ok(text) => text,
                Err(message) => {
                    common::invalid(diags, module.origin.span, message, "");
                    continue;
                }
            };
            let path = format!("{}/bell-{name}.conf", cx.target.path(&MODPROBE_DIR));
            if let Err(first) = out.add_file(
                NewFile::root_owned(path.clone(), text, 0o644),
                &module.key(),
            ) {
                common::invalid(
                    diags,
                    module.origin.span,
                    format!(
                        "`{path}` of `{}` is also written by `{first}`",
                        module.key()
                    ),
                    "two resources cannot manage one file",
                );
                continue;
            }
            // A blacklist takes effect at the next boot: its check says when the running
            // kernel still has the module loaded.
            let check = match blacklist {
                false => None,
                true => match r.stdlib(
                    "modprobe/check.sh.j2",
                    context! { kind => "modprobe", name, role => "check" },
                ) {
                    Ok(check) => Some(check),
                    Err(message) => {
                        diags.push(common::template_error(module, message));
                        continue;
                    }
                },
            };
            let resource = NewResource {
                kind: BundleKind::Of(Kind::MODPROBE),
                name: name.to_string(),
                files: vec![path],
                lines_in: Vec::new(),
                after: module.list("after").to_vec(),
                apply: None,
                revert: None,
                exec: None,
                check,
            };
            match blacklist {
                true => out.add_boot_resource(resource),
                false => out.add_resource(resource),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names() {
        assert!(module_name("bonding").is_ok());
        assert!(module_name("snd-hda-intel").is_ok());
        assert!(module_name("").is_err());
        assert!(module_name("a b").is_err());
        assert!(module_name("../x").is_err());
        assert!(module_name(&"m".repeat(56)).is_err());
    }

    #[test]
    fn module_option_words() {
        assert!(module_options("max_bonds=2 miimon=100").is_ok());
        assert!(module_options("nohz").is_ok());
        assert!(module_options("").is_err());
        assert!(module_options("a=b\nblacklist x").is_err());
        assert!(module_options("a=\"b c\"").is_err());
        assert!(module_options("=1").is_err());
        assert!(module_options("a=1 # comment").is_err());
    }
}

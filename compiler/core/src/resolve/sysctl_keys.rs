//! sysctl keys and values checked against the kernel of each target that a setting reaches
//! (`targets/sysctl/*.txt`, collected from a booted image's `/proc/sys`).
//!
//! systemd-sysctl skips a key the kernel does not have and logs it; it never fails the boot.
//! So `vm.swapiness 10` or `vm.swappiness "ten"` would land on every host and change nothing,
//! silently. They are caught here, at the key or the value, with the closest key the kernel
//! has. A key the list cannot know (an out-of-tree module's) is accepted with `unknown=#true`
//! on the key, or for the whole build with `--allow-unknown-sysctl`.

use crate::diagnostic::Diagnostics;
use crate::front::validate;
use crate::source::{FileId, Span};
use crate::spec::{Spec, SysctlSetting};
use crate::targets::{self, SysctlKeys, SysctlKind};
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeSet, HashSet};
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum SysctlKeyError {
    #[error("`{key}` is not a sysctl key of {target}")]
    #[diagnostic(code(bell::resolve::unknown_sysctl))]
    Unknown {
        key: String,
        target: String,
        #[label("not a key of {kernel}")]
        span: SourceSpan,
        kernel: String,
        #[help]
        help: String,
        file: FileId,
    },
    /// The same, on a target whose list is another kernel's: a hint, not a verdict.
    #[error("`{key}` may not be a sysctl key of {target}")]
    #[diagnostic(code(bell::resolve::unknown_sysctl), severity(Warning))]
    UnknownElsewhere {
        key: String,
        target: String,
        #[label("not a key of {kernel}, the list {target} is checked against")]
        span: SourceSpan,
        kernel: String,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{key}` is read-only")]
    #[diagnostic(
        code(bell::resolve::read_only_sysctl),
        help("the kernel reports this value and takes no writes; remove the key")
    )]
    ReadOnly {
        key: String,
        #[label("the kernel takes no writes here")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("`{key}` takes a number, not `{value}`")]
    #[diagnostic(code(bell::resolve::sysctl_not_a_number))]
    NotANumber {
        key: String,
        value: String,
        #[label("not a number")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl SysctlKeyError {
    fn file_id(&self) -> Option<FileId> {
        use SysctlKeyError::*;
        match self {
            Unknown { file, .. }
            | UnknownElsewhere { file, .. }
            | ReadOnly { file, .. }
            | NotANumber { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(SysctlKeyError);

/// Numbers as the kernel's number keys parse them: decimal words, hex masks (`ff`, `0x1f`),
/// and the lists and ranges of CPU masks (`0-3,8`); never a word such as `ten` or `high`.
fn looks_numeric(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_hexdigit())
        && value
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b" \t-,:xX".contains(&b))
}

/// `net/ipv4/ip_forward` written the way the user wrote `like`: dotted unless they used slashes.
fn spelled_like(path: &str, like: &str) -> String {
    let dotted = like
        .find(['.', '/'])
        .is_some_and(|i| like.as_bytes()[i] == b'.');
    if !dotted {
        return path.to_string();
    }
    path.chars()
        .map(|c| match c {
            '/' => '.',
            '.' => '/',
            c => c,
        })
        .collect()
}

/// Checks the settings of every (layer, target) pair in `reached`: layer `None` is the base,
/// `Some(i)` override `i`; targets by name. Each setting is reported once, at its own span.
pub(super) fn check(
    spec: &Spec,
    reached: &BTreeSet<(Option<usize>, String)>,
    diags: &mut Diagnostics,
) {
    // Targets whose list is their own kernel's first, so that a key unknown to both a Debian
    // and an Ubuntu host is reported as the error, not as the borrowed list's warning.
    let mut pairs: Vec<(
        Option<usize>,
        &'static targets::Target,
        &'static SysctlKeys,
        bool,
    )> = reached
        .iter()
        .filter_map(|(layer, name)| {
            let target = targets::get(name)?;
            let (keys, exact) = targets::sysctl_keys(target)?;
            Some((*layer, target, keys, exact))
        })
        .collect();
    pairs.sort_by_key(|(_, _, _, exact)| !exact);
    let mut reported: HashSet<Span> = HashSet::new();
    for (layer, target, keys, exact) in pairs {
        let settings = match layer {
            None => &spec.base.sysctl,
            Some(i) => match spec.overrides.get(i) {
                Some(o) => &o.layer.sysctl,
                None => continue,
            },
        };
        for setting in settings {
            if reported.contains(&setting.span) {
                continue;
            }
            if let Some(diagnostic) = check_one(
                setting,
                &target.name,
                keys,
                exact,
                spec.allow_unknown_sysctl,
            ) {
                reported.insert(setting.span);
                diags.push(diagnostic);
            }
        }
    }
}

fn check_one(
    setting: &SysctlSetting,
    target: &str,
    keys: &SysctlKeys,
    exact: bool,
    allow_unknown: bool,
) -> Option<SysctlKeyError> {
    // `KEY #null` removes an inherited key: there is nothing to write.
    let value = setting.value.as_deref()?;
    let path = validate::sysctl_path(&setting.key);
    let key = setting.key.clone();
    match keys.get(&path) {
        None if setting.unknown || allow_unknown => None,
        None => {
            let interface = SysctlKeys::interface_of(&path).unwrap_or("all");
            let known: Vec<String> = keys.paths_for(interface).collect();
            let escape = "for a key of a module the list does not have, write `unknown=#true` \
                          after the value, or build with `--allow-unknown-sysctl`";
            let help = match validate::did_you_mean(&path, known.iter().map(String::as_str)) {
                Some(closest) => format!(
                    "did you mean `{}`? ({escape})",
                    spelled_like(closest, &setting.key)
                ),
                None => format!("the kernel has no such key; {escape}"),
            };
            let (span, file) = (setting.key_span.source_span(), setting.key_span.file);
            let kernel = keys.kernel.clone();
            let target = target.to_string();
            Some(if exact {
                SysctlKeyError::Unknown {
                    key,
                    target,
                    span,
                    kernel,
                    help,
                    file,
                }
            } else {
                SysctlKeyError::UnknownElsewhere {
                    key,
                    target,
                    span,
                    kernel,
                    help,
                    file,
                }
            })
        }
        Some(SysctlKind::ReadOnly) => Some(SysctlKeyError::ReadOnly {
            key,
            span: setting.key_span.source_span(),
            file: setting.key_span.file,
        }),
        Some(SysctlKind::Number) if !looks_numeric(value) => Some(SysctlKeyError::NotANumber {
            help: format!(
                "write a whole number, such as `{key} 10`; several numbers go in one string, \
                 such as `\"4096 131072 6291456\"`"
            ),
            key,
            value: value.escape_debug().to_string(),
            span: setting.value_span.source_span(),
            file: setting.value_span.file,
        }),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_what_number_keys_parse() {
        for ok in [
            "10",
            "-1",
            "4096 131072 6291456",
            "0-3,8",
            "ff",
            "0x1f",
            "1\t2",
        ] {
            assert!(looks_numeric(ok), "{ok}");
        }
        for bad in ["ten", "", "high", "yes", "10%", "1.5", "x"] {
            assert!(!looks_numeric(bad), "{bad}");
        }
    }

    #[test]
    fn a_suggestion_is_spelled_as_the_key_was() {
        assert_eq!(
            spelled_like("vm/swappiness", "vm.swapiness"),
            "vm.swappiness"
        );
        assert_eq!(
            spelled_like("vm/swappiness", "vm/swapiness"),
            "vm/swappiness"
        );
        assert_eq!(
            spelled_like(
                "net/ipv4/conf/eth0.100/rp_filter",
                "net.ipv4.conf.eth0/100.rp_filtr"
            ),
            "net.ipv4.conf.eth0/100.rp_filter"
        );
    }
}

//! `bellc import divingbell`: an Airship Divingbell values file as a fleet spec.
//!
//! The values are read as Divingbell's chart reads them (`values`), each module mapped to
//! bellc's declarations (`modules`), and the spec written with the overrides arranged so that
//! every host resolves to what Divingbell would give it (`write`).

mod accounts;
mod history;
mod modules;
mod values;
mod verify;
mod write;

use bellc_core::diagnostic::Diagnostics;
use bellc_core::front::inventory::Entry;
use bellc_core::source::{FileId, Sources, Span};
use miette::{Diagnostic, SourceSpan};
use thiserror::Error;

pub use history::{Rules, CHANGES};
pub use modules::Module;
use modules::NoteKind;

#[derive(Debug, Error, Diagnostic)]
pub enum ImportError {
    #[error("{message}")]
    #[diagnostic(
        code(bell::import::yaml),
        help("Divingbell's values are YAML as Helm reads it; fix the file where it points")
    )]
    Yaml {
        message: String,
        #[label("here")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::import::refused))]
    Refused {
        message: String,
        #[label("imported from here")]
        span: SourceSpan,
        #[help]
        help: Option<String>,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(
        code(bell::import::differs),
        help("the spec would not give this host what Divingbell gives it; please report it, with the values")
    )]
    Differs {
        message: String,
        #[label("this module's values")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::import::invalid))]
    Invalid {
        message: String,
        #[label("Divingbell stops here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::import::warned), severity(Warning))]
    Warned {
        message: String,
        #[label("imported from here")]
        span: SourceSpan,
        #[help]
        help: Option<String>,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::import::not_imported), severity(Warning))]
    NotImported {
        message: String,
        #[label("not imported")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl ImportError {
    fn file_id(&self) -> Option<FileId> {
        match self {
            ImportError::Yaml { file, .. }
            | ImportError::Refused { file, .. }
            | ImportError::Differs { file, .. }
            | ImportError::Invalid { file, .. }
            | ImportError::Warned { file, .. }
            | ImportError::NotImported { file, .. } => Some(*file),
        }
    }
}
bellc_core::spec_diagnostic!(ImportError);

/// What to import and how to name it.
pub struct Input<'a> {
    /// The values files, already in `sources`, merged in order as `helm -f A -f B` merges them.
    pub values: &'a [FileId],
    pub fleet: &'a str,
    pub target: &'a str,
    /// Hosts to write into the spec (from `--inventory`).
    pub hosts: &'a [Entry],
    /// Resolve every host (`hosts`, or hosts that exercise every override when there are none)
    /// under Divingbell's rules and under the written spec, and report each difference.
    pub verify: bool,
    /// Add `RETIRE`: the files Divingbell leaves on a host go, once, with the first apply.
    pub retire: bool,
    /// The behaviour of the chart version the site ran (`--divingbell-version`).
    pub rules: Rules,
    /// Where the hosts' labels the spec does not use are kept (named in its header), or
    /// `None` to leave them out.
    pub all_labels: Option<&'a str>,
    /// The spec's password hashes and debconf passwords go into encrypted files
    /// (`--secrets-recipient`): not a warning of the spec, which will not hold them.
    pub secrets_moved: bool,
}

/// The name of the script `--retire-divingbell` adds: last of the scripts, which run in name
/// order, and a name Divingbell's own scripts (`NNN-name.sh`) do not take.
pub const RETIRE_NAME: &str = "zz-retire-divingbell";

/// What bell-run never touches, because bell did not write it, and what must go with the move:
/// Divingbell's sysctl.d and limits.d files are read after bell's `60-bell.conf` and would win
/// at the next boot, and its sudoers drop-ins keep granting sudo. Its AppArmor links point into
/// /var/divingbell; a profile the spec holds is a file of bell's by now, not a link. Live hosts
/// only: Divingbell ran on booted hosts, and in an image root the script has nothing to do.
const RETIRE: &str = r####"
// ---- retiring Divingbell (--retire-divingbell) ----
// Once per host, with the first apply: the files Divingbell wrote and bell-run leaves alone,
// which would otherwise win over bell's (sysctl.d and limits.d, at the next boot) or keep
// granting sudo (its sudoers drop-ins), and its state under /var/divingbell.
exec "zz-retire-divingbell" rerun="once-successfully" {
    script #"""
        #!/bin/sh
        set -eu
        if [ "${BELL_OFFLINE:-0}" = 1 ]; then
            echo "an image root: Divingbell configured booted hosts only; nothing to retire"
            exit 0
        fi
        for f in /etc/sysctl.d/60-divingbell-*.conf /etc/security/limits.d/60-divingbell-*.conf /etc/sudoers.d/divingbell-*-sudo; do
            if [ -e "$f" ] || [ -L "$f" ]; then
                rm -f -- "$f"
                echo "removed $f"
            fi
        done
        for f in /etc/apparmor.d/*; do
            if [ -L "$f" ]; then
                case $(readlink -- "$f") in
                /var/divingbell/*)
                    rm -f -- "$f"
                    echo "removed $f"
                    ;;
                esac
            fi
        done
        if [ -d /var/divingbell ] && [ ! -L /var/divingbell ]; then
            rm -rf -- /var/divingbell
            echo "removed /var/divingbell"
        fi
        """#
}
"####;

pub use verify::Difference;
pub use write::Written;

/// The spec, or `None` when the values cannot be read (the errors are in `diags`). What the
/// spec does not express is a warning in `diags` and a comment in the text.
pub fn import(sources: &Sources, input: &Input, diags: &mut Diagnostics) -> Option<Written> {
    let mut root: Option<crate::yaml::Node> = None;
    let mut failed = false;
    for &id in input.values {
        match crate::yaml::parse(id, &sources.get(id).text) {
            Ok(node) => {
                root = Some(match root {
                    Some(before) => values::merge(&before, &node),
                    None => node,
                })
            }
            Err(e) => {
                failed = true;
                diags.push(ImportError::Yaml {
                    message: e.message,
                    span: e.span.source_span(),
                    file: id,
                });
            }
        }
    }
    let (Some(root), false) = (root, failed) else {
        return None;
    };
    let account = bellc_core::targets::get(input.target).map_or("", |t| t.default_account.as_str());
    let values = values::read(&root, input.rules, account);
    // Several files: a comment names the file as well as the line.
    let line_of = |span: Span| {
        let line = sources.line_col(span).0;
        match input.values {
            [_] => format!("line {line}"),
            _ => format!("{} line {line}", sources.get(span.file).name),
        }
    };
    let mut notes = Vec::new();
    let source = input
        .values
        .iter()
        .map(|&id| sources.get(id).name.clone())
        .collect::<Vec<_>>()
        .join(", ");
    let mut written = write::spec(
        &values,
        &write::Options {
            fleet: input.fleet,
            target: input.target,
            source: &source,
            hosts: input.hosts,
            all_labels: input.all_labels,
        },
        &line_of,
        &mut notes,
    );
    let (hosts, with_hosts) = match input.hosts {
        [] => (verify::probe_hosts(&values), false),
        hosts => (hosts.to_vec(), true),
    };
    let first = input.values.first().copied().unwrap_or(FileId(0));
    let start = Span::new(first, (0, 0).into());
    // What bellc refuses in the spec is said at the values it came from: a typo Divingbell
    // would meet on a host is an error here, before anything moves.
    let found = verify::refusals(
        &written.text,
        &written.map,
        &hosts,
        with_hosts,
        input.secrets_moved,
    );
    let refused = found.iter().any(|f| f.error);
    for f in found {
        let span = f.span.unwrap_or(start);
        diags.push(if f.error {
            ImportError::Refused {
                message: format!("the spec cannot hold this: {}", f.message),
                span: span.source_span(),
                help: f.help,
                file: span.file,
            }
        } else {
            ImportError::Warned {
                message: format!("bellc warns of this: {}", f.message),
                span: span.source_span(),
                help: f.help,
                file: span.file,
            }
        });
    }
    let invalid = notes.iter().any(|n| n.kind != NoteKind::Kept);
    if input.verify && !refused && !invalid {
        match verify::verify(&values, &written.text, &hosts, with_hosts, input.target) {
            Ok(verified) => {
                written.verified = Some((verified.hosts, verified.compared));
                for d in verified.differences {
                    let span = Module::ALL
                        .into_iter()
                        .find(|m| m.key() == d.module)
                        .and_then(|m| values.base.get(&m))
                        .map_or(start, |n| n.span);
                    diags.push(ImportError::Differs {
                        message: d.to_string(),
                        span: span.source_span(),
                        file: span.file,
                    });
                }
            }
            Err(message) => diags.push(ImportError::Differs {
                message,
                span: start.source_span(),
                file: first,
            }),
        }
    }
    // After the check: Divingbell has no such script, so `--verify` must not meet it.
    if input.retire {
        if written.text.contains(&format!("exec \"{RETIRE_NAME}\"")) {
            diags.push(ImportError::Refused {
                message: format!("the values hold a script named `{RETIRE_NAME}`, the name `--retire-divingbell` gives its own"),
                span: start.source_span(),
                help: Some("rename that script in the values, or import without --retire-divingbell".into()),
                file: first,
            });
        } else {
            written.text.push_str(RETIRE);
        }
    }
    for note in notes {
        let (message, span, help, file) = (
            note.message,
            note.span.source_span(),
            note.help,
            note.span.file,
        );
        diags.push(match note.kind {
            NoteKind::DivingbellRefuses => ImportError::Invalid {
                message,
                span,
                help,
                file,
            },
            NoteKind::SpecRefuses => ImportError::Refused {
                message,
                span,
                help: Some(help),
                file,
            },
            NoteKind::Kept => ImportError::NotImported {
                message,
                span,
                help,
                file,
            },
        });
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clash check looks for `RETIRE_NAME`; the script it guards is written out by hand.
    #[test]
    fn the_retire_script_is_named_what_the_clash_check_looks_for() {
        assert_eq!(
            RETIRE.matches("exec \"").count(),
            1,
            "one script in the retire text"
        );
        assert!(RETIRE.contains(&format!("exec \"{RETIRE_NAME}\" ")));
    }
}

//! `secrets.kdl`: who can open each of the spec's encrypted secret files, as agenix's
//! `secrets.nix` says it. It lies beside the spec:
//!
//! ```kdl
//! build "age1…"                              // CI's build key: a recipient of every file
//! key "ana" "ssh-ed25519 AAAA… ana@laptop"   // the people who may edit them
//! key "bob" "age1…"
//! secret "secrets/ops.hash.age" "ana" "bob"  // a file, and who besides the build opens it
//! ```
//!
//! `bellc secrets check` holds each file to it, `rekey` encrypts each to it again, `edit`
//! encrypts what was edited to it.

use crate::diagnostic::Diagnostics;
use crate::source::{FileId, Sources};
use bell_seal::at_rest::Recipient;
use kdl::{KdlDocument, KdlNode, KdlValue};
use miette::{Diagnostic, SourceSpan};
use std::collections::BTreeMap;
use thiserror::Error;

/// The file's name, beside the spec.
pub const FILE_NAME: &str = "secrets.kdl";

/// What `secrets.kdl` says.
#[derive(Debug, Default)]
pub struct Recipients {
    /// CI's build key: a recipient of every file.
    pub build: Option<Recipient>,
    /// Each file (relative to the spec's directory, as written) and who opens it besides the
    /// build, by the names of their keys.
    pub secrets: BTreeMap<String, Vec<String>>,
    /// The people's keys, by name.
    pub keys: BTreeMap<String, Recipient>,
}

impl Recipients {
    /// Everyone who opens `secret`: the build's key, then each named key once.
    pub fn of(&self, secret: &str) -> Option<Vec<Recipient>> {
        let names = self.secrets.get(secret)?;
        let mut out: Vec<Recipient> = self.build.iter().cloned().collect();
        for name in names {
            if let Some(key) = self.keys.get(name) {
                if !out.contains(key) {
                    out.push(key.clone());
                }
            }
        }
        Some(out)
    }
}

#[derive(Debug, Error, Diagnostic)]
pub enum RecipientsError {
    #[error("{message}")]
    #[diagnostic(code(bell::secrets::invalid))]
    Invalid {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl crate::diagnostic::SpecDiagnostic for RecipientsError {
    fn file(&self) -> Option<FileId> {
        match self {
            RecipientsError::Invalid { file, .. } => Some(*file),
        }
    }
}

/// Reads `secrets.kdl` (already in `sources` as `file`): what it says, every mistake in
/// `diags`.
pub fn parse(file: FileId, sources: &Sources, diags: &mut Diagnostics) -> Recipients {
    let mut out = Recipients::default();
    let text = sources.get(file).text.clone();
    let doc: KdlDocument = match text.parse() {
        Ok(doc) => doc,
        Err(e) => {
            let e: kdl::KdlError = e;
            for d in e.diagnostics {
                let at = d.span;
                diags.push(RecipientsError::Invalid {
                    message: d.message.unwrap_or_else(|| "not KDL".into()).to_string(),
                    span: at,
                    help: d
                        .help
                        .unwrap_or_else(|| "see `docs/secrets-and-identities.md`".into())
                        .to_string(),
                    file,
                });
            }
            return out;
        }
    };
    let invalid = |diags: &mut Diagnostics, span: SourceSpan, message: String, help: &str| {
        diags.push(RecipientsError::Invalid {
            message,
            span,
            help: help.to_string(),
            file,
        });
    };
    let strings = |node: &KdlNode| -> Option<Vec<String>> {
        node.entries()
            .iter()
            .map(|e| match (e.name(), e.value()) {
                (None, KdlValue::String(s)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    };
    let mut uses: Vec<(String, SourceSpan)> = Vec::new();
    for node in doc.nodes() {
        let name = node.name().value();
        let Some(args) = strings(node).filter(|_| node.children().is_none()) else {
            invalid(
                diags,
                node.span(),
                format!("`{name}` takes strings only"),
                "write `build \"age1…\"`, `key \"NAME\" \"age1…\"` or `secret \"secrets/X.age\" \"NAME\" …`",
            );
            continue;
        };
        match (name, args.as_slice()) {
            ("build", [key]) => {
                if out.build.is_some() {
                    invalid(
                        diags,
                        node.span(),
                        "a second `build` key".into(),
                        "the build has one key: CI's, a recipient of every file",
                    );
                }
                match Recipient::parse(key) {
                    Ok(key) => out.build = Some(key),
                    Err(e) => invalid(
                        diags,
                        node.span(),
                        format!("the build key: {e}"),
                        "give the public key of CI's key: `age-keygen -y ci.key` prints it",
                    ),
                }
            }
            ("key", [who, key]) => match Recipient::parse(key) {
                Ok(key) => {
                    if out.keys.insert(who.clone(), key).is_some() {
                        invalid(
                            diags,
                            node.span(),
                            format!("a second key named `{who}`"),
                            "give each person's key one name",
                        );
                    }
                }
                Err(e) => invalid(
                    diags,
                    node.span(),
                    format!("the key of `{who}`: {e}"),
                    "an age public key (`age-keygen -y KEY`) or an `ssh-ed25519` public key",
                ),
            },
            ("secret", [path, names @ ..]) => {
                let bad_path = path.starts_with('/')
                    || path.split('/').any(|part| part == "..")
                    || !path.ends_with(".age");
                if bad_path {
                    invalid(
                        diags,
                        node.span(),
                        format!("`{path}` is not a `.age` file of the spec's tree"),
                        "name it relative to the spec's directory, as the spec does: `secrets/ops.hash.age`",
                    );
                    continue;
                }
                if out.secrets.insert(path.clone(), names.to_vec()).is_some() {
                    invalid(
                        diags,
                        node.span(),
                        format!("`{path}` is named twice"),
                        "give each file one `secret` line with all its recipients",
                    );
                }
                uses.extend(names.iter().map(|n| (n.clone(), node.span())));
            }
            _ => invalid(
                diags,
                node.span(),
                format!("not a line of `{FILE_NAME}`: `{name}` with {} value(s)", args.len()),
                "write `build \"age1…\"`, `key \"NAME\" \"age1…\"` or `secret \"secrets/X.age\" \"NAME\" …`",
            ),
        }
    }
    for (name, span) in uses {
        if !out.keys.contains_key(&name) {
            let known: Vec<&str> = out.keys.keys().map(String::as_str).collect();
            invalid(
                diags,
                span,
                format!("no key is named `{name}`"),
                &match known.is_empty() {
                    true => format!("add `key \"{name}\" \"age1…\"`"),
                    false => format!("the keys are {}", known.join(", ")),
                },
            );
        }
    }
    if out.build.is_none() && !doc.nodes().is_empty() {
        invalid(
            diags,
            SourceSpan::new(0.into(), 0),
            "no `build` key: the build could not open the secrets".into(),
            "add `build \"age1…\"`, the public key of CI's `--secrets-key`",
        );
    }
    out
}

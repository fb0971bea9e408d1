//! Lowering: KDL documents → the typed `Spec`.
//!
//! This stage reads the root spec, follows `include` (globs, relative to the including file,
//! cycles reported) and `inventory` (JSON) nodes, and checks every node against the language:
//! node and property names (with "did you mean"), value types, required properties, duplicates
//! within a layer, and the syntax of values that other tools define (sysctl keys, crypt hashes,
//! SSH keys, package names, paths). It collects every error it can find instead of stopping at
//! the first; a node with an error is dropped, its siblings are still checked.

use crate::diagnostic::Diagnostics;
use crate::front::inventory;
use crate::front::read;
use crate::front::validate;
use crate::source::{FileId, Sources, Span};
use crate::spec::*;
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

mod entries;
mod error;
mod files;
mod layers;
mod resources;
mod secrets;
mod seen;
mod values;

pub use error::LowerError;
use resources::{merge_sysctl_into, push_resource};
pub use secrets::{holds_no_secret, movable_secrets, move_out};
use seen::SeenHosts;

/// Reads and lowers the spec rooted at `path`. The spec is returned even when there are errors
/// (with the erroneous nodes left out), so later stages can still find more problems; callers
/// stop at the stage boundary when `diagnostics.has_errors()`.
pub fn load(path: &Path, sources: &mut Sources, diagnostics: &mut Diagnostics) -> Option<Spec> {
    let bytes = match read::read_bounded(path, read::MAX_SPEC_FILE) {
        Ok(bytes) => bytes,
        Err(e) => {
            diagnostics.push(LowerError::UnreadableSpec {
                path: path.display().to_string(),
                reason: e.to_string(),
            });
            return None;
        }
    };
    match read::utf8(bytes) {
        Ok(text) => {
            let file = sources.add(path, text);
            Some(lower_root(file, sources, diagnostics))
        }
        Err(bad) => {
            let file = sources.add(path, bad.lossy);
            diagnostics.push(LowerError::NotUtf8 {
                what: "the spec".into(),
                span: SourceSpan::new(bad.offset.into(), '\u{fffd}'.len_utf8()),
                file,
            });
            None
        }
    }
}

/// Lowers a root file already in `sources`.
pub fn lower_root(file: FileId, sources: &mut Sources, diagnostics: &mut Diagnostics) -> Spec {
    let tree = spec_tree(&sources.get(file).path);
    let mut lowerer = Lowerer {
        sources,
        diags: diagnostics,
        spec: Spec {
            fleet: Fleet {
                name: "fleet".into(),
                target: None,
                mode: OverrideMode::Layered,
                span: None,
                identities_required: None,
                secrets_plaintext: None,
            },
            hosts: Vec::new(),
            base: Layer::default(),
            overrides: Vec::new(),
            assigns: Vec::new(),
            rollout: None,
            globs: Vec::new(),
            allow_unknown_sysctl: false,
            rejected: Default::default(),
            rejected_identities: Default::default(),
        },
        include_stack: Vec::new(),
        tree,
        included_files: 0,
        seen_hosts: SeenHosts::default(),
        seen_overrides: HashMap::new(),
        fleet_seen: None,
        rollout_seen: false,
    };
    lowerer.file(file);
    let mut spec = lowerer.spec;
    crate::front::assign::assign(&mut spec, diagnostics);
    spec
}

struct Lowerer<'a> {
    sources: &'a mut Sources,
    diags: &'a mut Diagnostics,
    spec: Spec,
    include_stack: Vec<(PathBuf, Span)>,
    /// The spec's own tree: the root file's directory with its symlinks resolved. Every file
    /// the spec reads lies under it. Found on first use (`None` until then, and when the
    /// directory cannot be resolved, in which case no file is read).
    tree: Option<PathBuf>,
    /// Every file included so far, against `read::MAX_INCLUDED_FILES`.
    included_files: usize,
    /// Every host so far by name, and by address: two hosts with one address is a copy-paste
    /// slip that services would hand to peers twice.
    seen_hosts: SeenHosts,
    seen_overrides: HashMap<String, Span>,
    fleet_seen: Option<Span>,
    rollout_seen: bool,
}

/// Nodes that are not resource kinds, by where they may stand. Resource kinds (`Kind::ALL`)
/// may stand in both places.
const TOP_LEVEL_ONLY: &[&str] = &[
    "fleet",
    "host",
    "inventory",
    "include",
    "assign",
    "override",
    "rollout",
];
const OVERRIDE_ONLY: &[&str] = &["match", "remove", "service", "uses"];

/// The node names allowed at the top level or inside an override, for suggestions.
fn allowed(in_override: bool) -> Vec<&'static str> {
    let own = if in_override {
        OVERRIDE_ONLY
    } else {
        TOP_LEVEL_ONLY
    };
    own.iter()
        .copied()
        .chain(std::iter::once("sysctl"))
        .chain(Kind::ALL.iter().map(|k| k.keyword()))
        .collect()
}

impl Lowerer<'_> {
    fn span(&self, file: FileId, span: SourceSpan) -> Span {
        Span::new(file, span)
    }

    fn location(&self, span: Span) -> String {
        self.sources.location(span)
    }

    fn file(&mut self, file: FileId) {
        let text = self.sources.get(file).text.clone();
        if let Some(parsed) = self.parse(file, &text) {
            self.parsed_file(file, parsed);
        }
    }

    /// Parses a file's text, unless its blocks nest deeper than the parser's stack allows
    /// (reported here). A free function of the text, so included files parse in parallel.
    fn parse_checked(
        text: &str,
    ) -> Result<Result<KdlDocument, kdl::KdlError>, (usize, read::Nesting)> {
        match read::too_deep(text, read::MAX_NESTING) {
            Some(at) => Err(at),
            None => Ok(KdlDocument::parse_v2(text)),
        }
    }

    fn parse(&mut self, file: FileId, text: &str) -> Option<Result<KdlDocument, kdl::KdlError>> {
        match Self::parse_checked(text) {
            Ok(parsed) => Some(parsed),
            Err(at) => {
                self.too_deep(file, at);
                None
            }
        }
    }

    fn too_deep(&mut self, file: FileId, (at, nesting): (usize, read::Nesting)) {
        let span = SourceSpan::new(at.into(), 1);
        self.diags.push(match nesting {
            read::Nesting::Blocks => LowerError::TooDeep {
                max: read::MAX_NESTING,
                span,
                file,
            },
            read::Nesting::CommentedOut => LowerError::CommentedOutTooDeep {
                max: read::MAX_COMMENTED_NESTING,
                span,
                file,
            },
        });
    }

    /// Lowers a file that is already parsed (included files are parsed in parallel).
    fn parsed_file(&mut self, file: FileId, parsed: Result<KdlDocument, kdl::KdlError>) {
        let path = self.sources.get(file).path.clone();
        let text = self.sources.get(file).text.clone();
        let doc = match parsed {
            Ok(doc) => doc,
            Err(err) => {
                self.sources.mask(file, &secrets::in_unparsed(&text));
                let repaired = repair_bare_words(&self.sources.get(file).text, &err);
                self.syntax_errors(file, err);
                if let Some((doc, words)) = repaired {
                    self.lower_repaired(file, path, doc, &words);
                }
                return;
            }
        };
        let written = secrets::in_document(&doc, &text);
        self.sources.mask(file, &secrets::ranges(&written));
        for secret in written {
            self.diags.push(LowerError::PlaintextSecretInSpec {
                span: secret.entry,
                help: match secret.instead {
                    Some((encrypted, line)) => format!(
                        "encrypt it into the spec's tree: name it in secrets.kdl (`secret \"{encrypted}\"`), \
                         run `bellc secrets edit {encrypted}` and paste it there, then write \
                         `{line}` here"
                    ),
                    None => "keep it in an encrypted file of the spec's tree (`bellc secrets edit \
                             secrets/NAME.age`), as a 0600 file's `content file=\"secrets/NAME.age\"`"
                        .into(),
                },
                file,
            });
        }
        self.lower_doc(file, path, &doc);
    }

    /// Lowers a file whose only syntax errors were bare `true`, `null`… (reported already),
    /// read with a number in each one's place, so that one run also reports every other
    /// mistake of the file. What lowering says about the stand-ins is only an echo of the
    /// syntax error, and is left out.
    fn lower_repaired(
        &mut self,
        file: FileId,
        path: PathBuf,
        doc: KdlDocument,
        words: &[SourceSpan],
    ) {
        let outer = std::mem::take(self.diags);
        self.lower_doc(file, path, &doc);
        let found = std::mem::replace(self.diags, outer);
        for d in found.into_boxed() {
            // The label covers the stand-in (a value) or holds it (`sudo=1111`, a property).
            let echo = d.file() == Some(file)
                && d.labels().and_then(|mut l| l.next()).is_some_and(|l| {
                    words.iter().any(|w| {
                        l.offset() <= w.offset() && w.offset() + w.len() <= l.offset() + l.len()
                    })
                });
            if !echo {
                self.diags.push_boxed(d);
            }
        }
    }

    fn lower_doc(&mut self, file: FileId, path: PathBuf, doc: &KdlDocument) {
        self.include_stack.push((
            path,
            Span {
                file,
                offset: 0,
                len: 0,
            },
        ));
        for node in doc.nodes() {
            self.top_node(file, node);
        }
        self.include_stack.pop();
    }

    fn syntax_errors(&mut self, file: FileId, err: kdl::KdlError) {
        let text = self.sources.get(file).text.clone();
        // The parser's error recovery can report one error at one place many times over (on
        // mangled text, thousands of times); each is shown once.
        let mut seen = std::collections::HashSet::new();
        for d in err.diagnostics {
            if !seen.insert((d.span.offset(), d.span.len(), d.message.clone())) {
                continue;
            }
            let at = text.get(d.span.offset()..d.span.offset() + d.span.len());
            // KDL 2 reserves the bare words of YAML and KDL 1; the parser only says it wanted
            // an identifier, which sends a YAML user looking in the wrong place.
            if let Some(word @ ("true" | "false" | "null" | "inf" | "nan")) = at {
                let fix = match word {
                    "true" | "false" => format!("KDL 2 booleans are `#true` and `#false`: write `#{word}`"),
                    "null" => "KDL 2 writes null as `#null`".to_string(),
                    _ => format!("KDL 2 writes this number as `#{word}`, or quote it (`\"{word}\"`) for the word"),
                };
                self.diags.push(LowerError::Syntax {
                    message: format!("bare `{word}` is not a value in KDL 2"),
                    span: d.span,
                    label: "write it with a `#`".into(),
                    help: Some(fix),
                    file,
                });
                continue;
            }
            let message = d
                .message
                .clone()
                .unwrap_or_else(|| "invalid KDL syntax".to_string());
            let help = d.help.clone().or_else(|| {
                Some("see the language reference (docs/language.md); values such as `on` need no quotes, but strings with spaces or `#` do".into())
            });
            self.diags.push(LowerError::Syntax {
                message: lowercase_first(&message),
                span: d.span,
                label: d.label.clone().unwrap_or_else(|| "here".into()),
                help,
                file,
            });
        }
    }

    fn unknown_node(
        &mut self,
        file: FileId,
        node: &KdlNode,
        allowed: &[&str],
        context: &'static str,
    ) {
        let name = node.name().value();
        let help = match validate::did_you_mean(name, allowed.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => {
                if context == "at the top level" && OVERRIDE_ONLY.contains(&name) {
                    format!("`{name}` is only allowed inside an `override` block")
                } else if context == "inside `override`" && TOP_LEVEL_ONLY.contains(&name) {
                    format!("`{name}` is only allowed at the top level")
                } else {
                    format!("allowed here: {}", allowed.join(", "))
                }
            }
        };
        self.diags.push(LowerError::UnknownNode {
            name: name.to_string(),
            context,
            span: node.name().span(),
            help,
            file,
        });
    }

    fn top_node(&mut self, file: FileId, node: &KdlNode) {
        let name = node.name().value();
        match name {
            "fleet" => self.fleet(file, node),
            "host" => self.host(file, node),
            "inventory" => self.inventory(file, node),
            "assign" => self.assign(file, node),
            "include" => self.include(file, node),
            "override" => self.override_node(file, node),
            "rollout" => self.rollout(file, node),
            "sysctl" => {
                let mut settings = Vec::new();
                self.sysctl(file, node, &mut settings);
                merge_sysctl_into(
                    &mut self.spec.base.sysctl,
                    settings,
                    self.diags,
                    self.sources,
                );
            }
            _ => match Kind::from_keyword(name) {
                Some(kind) => {
                    if let Some(decl) = self.resource(file, node, kind) {
                        push_resource(&mut self.spec.base, decl, self.diags, self.sources);
                    }
                }
                None => self.unknown_node(file, node, &allowed(false), "at the top level"),
            },
        }
    }
}

/// `KIND:NAME`, as written in `remove` and `after`.
pub fn parse_ref(text: &str) -> Result<(RefKind, &str), validate::Invalid> {
    let kinds: Vec<&str> = std::iter::once("sysctl")
        .chain(Kind::ALL.iter().map(|k| k.keyword()))
        .collect();
    let Some((kind, name)) = text.split_once(':') else {
        return Err(validate::Invalid {
            message: format!("`{text}` is not a `KIND:NAME` reference"),
            help: "write the kind and the name, such as \"mount:mnt\" or \"package:htop\"".into(),
        });
    };
    let kind = if kind == "sysctl" {
        RefKind::Sysctl
    } else {
        match Kind::from_keyword(kind) {
            Some(k) if !k.is_setting() => RefKind::Resource(k),
            _ => {
                let help = match validate::did_you_mean(kind, kinds.iter().copied()) {
                    Some(s) => format!("did you mean `{s}:{name}`?"),
                    None => format!("kinds: {}", kinds.join(", ")),
                };
                return Err(validate::Invalid {
                    message: format!("unknown kind `{kind}` in `{text}`"),
                    help,
                });
            }
        }
    };
    if name.is_empty() {
        return Err(validate::Invalid {
            message: format!("`{text}` names no resource"),
            help: "write the name after the colon, such as \"mount:mnt\"".into(),
        });
    }
    Ok((kind, name))
}

fn label_value(value: &KdlValue) -> Option<String> {
    match value {
        KdlValue::String(s) => Some(s.clone()),
        KdlValue::Integer(i) => Some(i.to_string()),
        _ => None,
    }
}

fn describe_value(value: &KdlValue) -> String {
    match value {
        KdlValue::String(s) => format!("the string {s:?}"),
        KdlValue::Integer(i) => format!("the number {i}"),
        KdlValue::Float(f) => format!("the number {f}"),
        KdlValue::Bool(b) => format!("the boolean #{b}"),
        KdlValue::Null => "#null".into(),
    }
}

fn parse_percent(s: &str) -> Option<u32> {
    let n: u32 = s.strip_suffix('%')?.trim().parse().ok()?;
    (1..=100).contains(&n).then_some(n)
}

/// The directory of the root spec with its symlinks resolved.
fn spec_tree(root: &Path) -> Option<PathBuf> {
    let dir = match root.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    dir.canonicalize().ok()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidData => "not valid UTF-8".into(),
        _ => lowercase_first(&e.to_string()),
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// KDL 1's and YAML's bare words, which KDL 2 writes with a `#`.
const BARE_WORDS: [&str; 5] = ["true", "false", "null", "inf", "nan"];

/// When every syntax error of a file is a bare word of [`BARE_WORDS`], the file parsed with
/// each of them replaced by a number of the same length (so every span still points at the
/// user's text), and where the words stand. `None` when any other error is among them, or
/// when the stand-ins do not parse either (a bare word where a node name goes).
fn repair_bare_words(text: &str, err: &kdl::KdlError) -> Option<(KdlDocument, Vec<SourceSpan>)> {
    let mut repaired = text.to_string();
    let mut words = Vec::new();
    for d in &err.diagnostics {
        let range = d.span.offset()..d.span.offset() + d.span.len();
        if !BARE_WORDS.contains(&text.get(range.clone())?) {
            return None;
        }
        repaired.replace_range(range.clone(), &"1".repeat(range.len()));
        words.push(d.span);
    }
    if words.is_empty() {
        return None;
    }
    let doc = KdlDocument::parse_v2(&repaired).ok()?;
    Some((doc, words))
}

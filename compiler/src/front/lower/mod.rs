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
use crate::front::validate;
use crate::source::{FileId, Sources, Span};
use crate::spec::*;
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum LowerError {
    #[error("{message}")]
    #[diagnostic(code(bell::parse::syntax))]
    Syntax {
        message: String,
        #[label("{label}")]
        span: SourceSpan,
        label: String,
        #[help]
        help: Option<String>,
        file: FileId,
    },
    #[error("unknown node `{name}` {context}")]
    #[diagnostic(code(bell::lower::unknown_node))]
    UnknownNode {
        name: String,
        context: &'static str,
        #[label("not a node bellc knows here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("unknown property `{name}` on `{node}`")]
    #[diagnostic(code(bell::lower::unknown_property))]
    UnknownProperty {
        name: String,
        node: String,
        #[label("unknown property")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{node}` takes {expected}")]
    #[diagnostic(code(bell::lower::unexpected_argument))]
    UnexpectedArgument {
        node: String,
        expected: &'static str,
        #[label("unexpected")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{what}` expects {expected}, found {found}")]
    #[diagnostic(code(bell::lower::wrong_type))]
    WrongType {
        what: String,
        expected: String,
        found: String,
        #[label("expected {expected}")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{node}` is missing its required {what}")]
    #[diagnostic(code(bell::lower::missing_property))]
    Missing {
        node: String,
        what: String,
        #[label("needs {what}")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{what} `{name}` is declared twice")]
    #[diagnostic(code(bell::lower::duplicate))]
    Duplicate {
        what: &'static str,
        name: String,
        #[label("declared again here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::lower::invalid_value))]
    InvalidValue {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("cannot read {what} `{path}`: {reason}")]
    #[diagnostic(code(bell::load::unreadable))]
    Unreadable {
        what: &'static str,
        path: String,
        reason: String,
        #[label("this file")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("include cycle: {chain}")]
    #[diagnostic(
        code(bell::load::include_cycle),
        help("a spec file may include another only once along any chain of includes; move the shared nodes into a file both include")
    )]
    IncludeCycle {
        chain: String,
        #[label("this include closes the cycle")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("`{pattern}` matches no file")]
    #[diagnostic(
        code(bell::load::empty_glob),
        severity(Warning),
        help("the pattern is relative to the directory of the file that includes it")
    )]
    EmptyGlob {
        pattern: String,
        #[label("no match")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::inventory::invalid))]
    Inventory {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl LowerError {
    fn file_id(&self) -> Option<FileId> {
        use LowerError::*;
        match self {
            Syntax { file, .. }
            | UnknownNode { file, .. }
            | UnknownProperty { file, .. }
            | UnexpectedArgument { file, .. }
            | WrongType { file, .. }
            | Missing { file, .. }
            | Duplicate { file, .. }
            | InvalidValue { file, .. }
            | Unreadable { file, .. }
            | IncludeCycle { file, .. }
            | EmptyGlob { file, .. }
            | Inventory { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(LowerError);

/// Reads and lowers the spec rooted at `path`. The spec is returned even when there are errors
/// (with the erroneous nodes left out), so later stages can still find more problems; callers
/// stop at the stage boundary when `diagnostics.has_errors()`.
pub fn load(path: &Path, sources: &mut Sources, diagnostics: &mut Diagnostics) -> Option<Spec> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) => return None,
    };
    let file = sources.add(path, text);
    Some(lower_root(file, sources, diagnostics))
}

/// Lowers a root file already in `sources`.
pub fn lower_root(file: FileId, sources: &mut Sources, diagnostics: &mut Diagnostics) -> Spec {
    let mut lowerer = Lowerer {
        sources,
        diags: diagnostics,
        spec: Spec {
            fleet: Fleet {
                name: "fleet".into(),
                target: None,
                mode: OverrideMode::Layered,
                span: None,
            },
            hosts: Vec::new(),
            base: Layer::default(),
            overrides: Vec::new(),
            rollout: None,
            globs: Vec::new(),
        },
        include_stack: Vec::new(),
        seen_hosts: HashMap::new(),
        seen_overrides: HashMap::new(),
        fleet_seen: None,
        rollout_seen: false,
    };
    lowerer.file(file);
    lowerer.spec
}

struct Lowerer<'a> {
    sources: &'a mut Sources,
    diags: &'a mut Diagnostics,
    spec: Spec,
    include_stack: Vec<(PathBuf, Span)>,
    seen_hosts: HashMap<String, Span>,
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
        let parsed = KdlDocument::parse_v2(&text);
        self.parsed_file(file, parsed);
    }

    /// Lowers a file that is already parsed (included files are parsed in parallel).
    fn parsed_file(&mut self, file: FileId, parsed: Result<KdlDocument, kdl::KdlError>) {
        let path = self.sources.get(file).path.clone();
        let doc = match parsed {
            Ok(doc) => doc,
            Err(err) => {
                self.syntax_errors(file, err);
                return;
            }
        };
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
        for d in err.diagnostics {
            let message = d
                .message
                .clone()
                .unwrap_or_else(|| "invalid KDL syntax".to_string());
            let help = d.help.clone().or_else(|| {
                Some("see the language reference in the README; values such as `on` need no quotes, but strings with spaces or `#` do".into())
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

    // ---- small readers ------------------------------------------------------------------

    /// The positional arguments of a node.
    fn args<'n>(&self, node: &'n KdlNode) -> Vec<&'n KdlEntry> {
        node.entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect()
    }

    fn props<'n>(&self, node: &'n KdlNode) -> Vec<(&'n str, &'n KdlEntry)> {
        node.entries()
            .iter()
            .filter_map(|e| e.name().map(|n| (n.value(), e)))
            .collect()
    }

    /// Exactly one string argument: the node's name (`host "node-001"`).
    fn name_arg(&mut self, file: FileId, node: &KdlNode, what: &str) -> Option<(String, Span)> {
        let args = self.args(node);
        let node_name = node.name().value().to_string();
        for extra in args.iter().skip(1) {
            self.diags.push(LowerError::UnexpectedArgument {
                node: node_name.clone(),
                expected: "one name argument",
                span: extra.span(),
                help: "other values are written as properties: `key=value`".into(),
                file,
            });
        }
        match args.first() {
            Some(entry) => match entry.value() {
                KdlValue::String(s) if !s.is_empty() => {
                    Some((s.clone(), self.span(file, entry.span())))
                }
                other => {
                    self.diags.push(LowerError::WrongType {
                        what: format!("{node_name} name"),
                        expected: "a non-empty string".into(),
                        found: describe_value(other),
                        span: entry.span(),
                        help: format!("write the {what} in quotes: `{node_name} \"NAME\"`"),
                        file,
                    });
                    None
                }
            },
            None => {
                self.missing(
                    file,
                    node.name().span(),
                    node_name.clone(),
                    what.to_string(),
                    format!("write `{node_name} \"NAME\" ...`"),
                );
                None
            }
        }
    }

    /// A node lacks something it needs (`what`), with a help line showing how to write it.
    fn missing(
        &mut self,
        file: FileId,
        span: SourceSpan,
        node: impl Into<String>,
        what: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.diags.push(LowerError::Missing {
            node: node.into(),
            what: what.into(),
            span,
            help: help.into(),
            file,
        });
    }

    fn no_args(&mut self, file: FileId, node: &KdlNode) {
        for extra in self.args(node) {
            self.diags.push(LowerError::UnexpectedArgument {
                node: node.name().value().to_string(),
                expected: "no arguments",
                span: extra.span(),
                help: "values are written as properties: `key=value`".into(),
                file,
            });
        }
    }

    fn no_children(&mut self, file: FileId, node: &KdlNode) {
        if let Some(children) = node.children() {
            if let Some(first) = children.nodes().first() {
                self.diags.push(LowerError::UnexpectedArgument {
                    node: node.name().value().to_string(),
                    expected: "no child block",
                    span: first.span(),
                    help: "remove the `{ ... }` block".into(),
                    file,
                });
            }
        }
    }

    fn unknown_prop(&mut self, file: FileId, node: &str, entry: &KdlEntry, known: &[&str]) {
        let name = entry.name().map(|n| n.value()).unwrap_or("");
        let help = match validate::did_you_mean(name, known.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None if known.is_empty() => format!("`{node}` takes no properties"),
            None => format!("`{node}` knows: {}", known.join(", ")),
        };
        self.diags.push(LowerError::UnknownProperty {
            name: name.to_string(),
            node: node.to_string(),
            span: entry.span(),
            help,
            file,
        });
    }

    fn string(&mut self, file: FileId, what: &str, entry: &KdlEntry) -> Option<String> {
        match entry.value() {
            KdlValue::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(file, what, "a string", other, entry.span());
                None
            }
        }
    }

    fn bool(&mut self, file: FileId, what: &str, entry: &KdlEntry) -> Option<bool> {
        match entry.value() {
            KdlValue::Bool(b) => Some(*b),
            other => {
                self.wrong_type(
                    file,
                    what,
                    "a boolean (`#true` or `#false`)",
                    other,
                    entry.span(),
                );
                None
            }
        }
    }

    fn wrong_type(
        &mut self,
        file: FileId,
        what: &str,
        expected: &str,
        found: &KdlValue,
        span: SourceSpan,
    ) {
        let help = match found {
            KdlValue::String(s) if s == "true" || s == "false" => {
                format!("booleans are written `#{s}`, without quotes")
            }
            KdlValue::String(s) if s.parse::<i64>().is_ok() => {
                format!("numbers are written without quotes: `{s}`")
            }
            KdlValue::Integer(i) if expected.contains("string") => {
                format!("strings are written in quotes: `\"{i}\"`")
            }
            KdlValue::Null => "`#null` only removes inherited sysctl keys".into(),
            _ => format!("write {expected}"),
        };
        self.diags.push(LowerError::WrongType {
            what: what.to_string(),
            expected: expected.to_string(),
            found: describe_value(found),
            span,
            help,
            file,
        });
    }

    fn invalid(&mut self, file: FileId, span: SourceSpan, invalid: validate::Invalid) {
        self.diags.push(LowerError::InvalidValue {
            message: invalid.message,
            span,
            help: invalid.help,
            file,
        });
    }

    // ---- fleet, hosts, inventory, include -------------------------------------------------

    fn fleet(&mut self, file: FileId, node: &KdlNode) {
        let span = self.span(file, node.span());
        if let Some(first) = self.fleet_seen {
            let help = format!("the fleet is first declared at {}", self.location(first));
            self.diags.push(LowerError::Duplicate {
                what: "fleet",
                name: "fleet".into(),
                span: node.name().span(),
                help,
                file,
            });
            return;
        }
        self.fleet_seen = Some(span);
        if let Some((name, _)) = self.name_arg(file, node, "fleet name") {
            self.spec.fleet.name = name;
        }
        self.spec.fleet.span = Some(span);
        for (key, entry) in self.props(node) {
            match key {
                "target" => {
                    if let Some(t) = self.string(file, "target", entry) {
                        self.spec.fleet.target = Some(Spanned {
                            value: t,
                            span: self.span(file, entry.span()),
                        });
                    }
                }
                "overrides" => {
                    if let Some(mode) = self.string(file, "overrides", entry) {
                        match mode.as_str() {
                            "layered" => self.spec.fleet.mode = OverrideMode::Layered,
                            "exclusive" => self.spec.fleet.mode = OverrideMode::Exclusive,
                            _ => self.diags.push(LowerError::InvalidValue {
                                message: format!("unknown override mode `{mode}`"),
                                span: entry.span(),
                                help: "use overrides=\"layered\" (every matching override applies) or overrides=\"exclusive\" (at most one, as in Divingbell)".into(),
                                file,
                            }),
                        }
                    }
                }
                _ => self.unknown_prop(file, "fleet", entry, &["target", "overrides"]),
            }
        }
        self.no_children(file, node);
    }

    fn host(&mut self, file: FileId, node: &KdlNode) {
        let Some((name, name_span)) = self.name_arg(file, node, "host name") else {
            return;
        };
        if let Err(invalid) = validate::host_name(&name) {
            self.invalid(file, name_span.source_span(), invalid);
        }
        let mut host = Host {
            name,
            address: None,
            target: None,
            labels: BTreeMap::new(),
            span: self.span(file, node.span()),
        };
        let mut ok = true;
        for (key, entry) in self.props(node) {
            match key {
                "address" => host.address = self.string(file, "address", entry),
                "target" => {
                    host.target = self.string(file, "target", entry).map(|t| Spanned {
                        value: t,
                        span: self.span(file, entry.span()),
                    })
                }
                "host" => {
                    self.diags.push(LowerError::InvalidValue {
                        message: "`host` cannot be a label".into(),
                        span: entry.span(),
                        help: "`match host=\"...\"` matches the host's name; choose another label name".into(),
                        file,
                    });
                    ok = false;
                }
                label => match label_value(entry.value()) {
                    Some(v) => {
                        host.labels.insert(label.to_string(), v);
                    }
                    None => {
                        self.wrong_type(
                            file,
                            &format!("label `{label}`"),
                            "a string",
                            entry.value(),
                            entry.span(),
                        );
                        ok = false;
                    }
                },
            }
        }
        self.no_children(file, node);
        if ok {
            self.add_host(file, host, name_span);
        }
    }

    fn add_host(&mut self, file: FileId, host: Host, name_span: Span) {
        if let Some(first) = self.seen_hosts.get(&host.name) {
            let help = format!(
                "`{}` is first declared at {}; host names must be unique across the spec and its inventories",
                host.name,
                self.location(*first)
            );
            self.diags.push(LowerError::Duplicate {
                what: "host",
                name: host.name.clone(),
                span: name_span.source_span(),
                help,
                file,
            });
            return;
        }
        self.seen_hosts.insert(host.name.clone(), name_span);
        self.spec.hosts.push(host);
    }

    fn resolve_relative(&self, file: FileId, relative: &str) -> PathBuf {
        let base = self
            .sources
            .get(file)
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        base.join(relative)
    }

    /// The one path argument of `inventory` and `include`, resolved against the directory of
    /// the file that holds the node.
    fn path_arg(
        &mut self,
        file: FileId,
        node: &KdlNode,
        what: &str,
    ) -> Option<(String, Span, PathBuf)> {
        let (relative, span) = self.name_arg(file, node, what)?;
        let keyword = node.name().value().to_string();
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, &keyword, entry, &[]);
        }
        let full = self.resolve_relative(file, &relative);
        Some((relative, span, full))
    }

    fn inventory(&mut self, file: FileId, node: &KdlNode) {
        let Some((relative, span, path)) = self.path_arg(file, node, "inventory file path") else {
            return;
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                self.diags.push(LowerError::Unreadable {
                    what: "inventory",
                    path: relative,
                    reason: io_reason(&e),
                    span: span.source_span(),
                    help: "the path is relative to the directory of this spec file".into(),
                    file,
                });
                return;
            }
        };
        let json_file = self.sources.add(&path, text);
        let text = self.sources.get(json_file).text.clone();
        match inventory::parse(&text) {
            Ok(entries) => {
                for entry in entries {
                    let host = Host {
                        name: entry.name,
                        address: entry.address,
                        target: None,
                        labels: entry.labels,
                        span,
                    };
                    if let Err(invalid) = validate::host_name(&host.name) {
                        self.diags.push(LowerError::Inventory {
                            message: format!("inventory host `{}`: {}", host.name, invalid.message),
                            span: SourceSpan::new(entry.offset.into(), 1),
                            help: invalid.help,
                            file: json_file,
                        });
                        continue;
                    }
                    if host.labels.contains_key("host") {
                        self.diags.push(LowerError::Inventory {
                            message: format!("inventory host `{}` has a label named `host`", host.name),
                            span: SourceSpan::new(entry.offset.into(), 1),
                            help: "`match host=\"...\"` matches the host's name; rename the label".into(),
                            file: json_file,
                        });
                        continue;
                    }
                    let name_span = Span {
                        file: json_file,
                        offset: entry.offset,
                        len: 1,
                    };
                    self.add_host(json_file, host, name_span);
                }
            }
            Err(err) => self.diags.push(LowerError::Inventory {
                message: err.message,
                span: SourceSpan::new(err.offset.into(), 1),
                help: "an inventory is a JSON list of {\"name\", \"address\", \"labels\"} objects, or the output of `kubectl get nodes -o json`".into(),
                file: json_file,
            }),
        }
    }

    fn include(&mut self, file: FileId, node: &KdlNode) {
        let Some((pattern, span, full)) = self.path_arg(file, node, "file or glob") else {
            return;
        };
        let is_glob = pattern.contains(['*', '?', '[']);
        let paths: Vec<PathBuf> = if is_glob {
            let full_text = full.to_string_lossy().to_string();
            match glob::glob(&full_text) {
                Ok(paths) => {
                    let mut v: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
                    v.sort();
                    v
                }
                Err(e) => {
                    self.diags.push(LowerError::InvalidValue {
                        message: format!("invalid glob pattern: {}", e.msg),
                        span: span.source_span(),
                        help: "use `*`, `?` and `[...]` as in a shell".into(),
                        file,
                    });
                    return;
                }
            }
        } else {
            vec![full.clone()]
        };
        if is_glob {
            self.spec.globs.push((full.clone(), paths.clone()));
        }
        if is_glob && paths.is_empty() {
            self.diags.push(LowerError::EmptyGlob {
                pattern,
                span: span.source_span(),
                file,
            });
            return;
        }
        // Read in order, parse in parallel (the KDL parser is the slow part of a large spec
        // split into many files), then lower in order, so declaration order is kept.
        let mut included: Vec<FileId> = Vec::new();
        for path in paths {
            let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if let Some(pos) = self.include_stack.iter().position(|(p, _)| {
                std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()) == canonical
            }) {
                let mut chain: Vec<String> = self.include_stack[pos..]
                    .iter()
                    .map(|(p, _)| self.short_name(p))
                    .collect();
                chain.push(self.short_name(&path));
                self.diags.push(LowerError::IncludeCycle {
                    chain: chain.join(" → "),
                    span: span.source_span(),
                    file,
                });
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    self.diags.push(LowerError::Unreadable {
                        what: "included file",
                        path: if is_glob {
                            self.short_name(&path)
                        } else {
                            pattern.clone()
                        },
                        reason: io_reason(&e),
                        span: span.source_span(),
                        help: "the path is relative to the directory of this spec file".into(),
                        file,
                    });
                    continue;
                }
            };
            included.push(self.sources.add(&path, text));
        }
        let texts: Vec<std::sync::Arc<String>> = included
            .iter()
            .map(|&id| self.sources.get(id).text.clone())
            .collect();
        let parsed: Vec<Result<KdlDocument, kdl::KdlError>> = {
            use rayon::prelude::*;
            texts.par_iter().map(|t| KdlDocument::parse_v2(t)).collect()
        };
        for (id, doc) in included.into_iter().zip(parsed) {
            self.parsed_file(id, doc);
        }
    }

    fn short_name(&self, path: &Path) -> String {
        match self.sources.find(path) {
            Some(id) => self.sources.get(id).name.clone(),
            None => path.display().to_string(),
        }
    }

    // ---- overrides and rollout ------------------------------------------------------------

    fn override_node(&mut self, file: FileId, node: &KdlNode) {
        let Some((name, name_span)) = self.name_arg(file, node, "override name") else {
            return;
        };
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "override", entry, &[]);
        }
        if let Some(first) = self.seen_overrides.get(&name) {
            let help = format!(
                "`{name}` is first declared at {}; give each override its own name",
                self.location(*first)
            );
            self.diags.push(LowerError::Duplicate {
                what: "override",
                name,
                span: name_span.source_span(),
                help,
                file,
            });
            return;
        }
        self.seen_overrides.insert(name.clone(), name_span);
        let mut ov = Override {
            name,
            span: self.span(file, node.span()),
            matches: Vec::new(),
            layer: Layer::default(),
        };
        let Some(children) = node.children() else {
            self.missing(
                file,
                node.name().span(),
                "override",
                "block with `match` and settings",
                "write `override \"NAME\" { match role=\"compute\"; sysctl { ... } }`",
            );
            return;
        };
        for child in children.nodes() {
            match child.name().value() {
                "match" => {
                    if let Some(m) = self.match_node(file, child) {
                        ov.matches.push(m);
                    }
                }
                "sysctl" => {
                    let mut settings = Vec::new();
                    self.sysctl(file, child, &mut settings);
                    merge_sysctl_into(&mut ov.layer.sysctl, settings, self.diags, self.sources);
                }
                "remove" => self.remove(file, child, &mut ov.layer),
                "service" => self.service(file, child, &mut ov.layer),
                "uses" => self.uses(file, child, &mut ov.layer),
                other => match Kind::from_keyword(other) {
                    Some(kind) => {
                        if let Some(decl) = self.resource(file, child, kind) {
                            push_resource(&mut ov.layer, decl, self.diags, self.sources);
                        }
                    }
                    None => self.unknown_node(file, child, &allowed(true), "inside `override`"),
                },
            }
        }
        if ov.matches.is_empty() {
            self.missing(file, node.name().span(), format!("override \"{}\"", ov.name), "`match`", "add `match LABEL=\"VALUE\"` (or `match host=\"NAME\"`) to say which hosts it applies to");
        }
        self.spec.overrides.push(ov);
    }

    fn match_node(&mut self, file: FileId, node: &KdlNode) -> Option<Match> {
        self.no_args(file, node);
        self.no_children(file, node);
        let mut conditions = Vec::new();
        for (key, entry) in self.props(node) {
            match label_value(entry.value()) {
                Some(value) => conditions.push(Condition {
                    label: key.to_string(),
                    value,
                    span: self.span(file, entry.span()),
                }),
                None => self.wrong_type(
                    file,
                    &format!("match `{key}`"),
                    "a string",
                    entry.value(),
                    entry.span(),
                ),
            }
        }
        if conditions.is_empty() {
            self.missing(
                file,
                node.name().span(),
                "match",
                "label condition",
                "write `match LABEL=\"VALUE\"`; several properties must all hold",
            );
            return None;
        }
        Some(Match {
            conditions,
            span: self.span(file, node.span()),
        })
    }

    fn remove(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "remove", entry, &[]);
        }
        let args = self.args(node);
        if args.is_empty() {
            self.missing(
                file,
                node.name().span(),
                "remove",
                "`KIND:NAME` argument",
                "write `remove \"mount:mnt\" \"package:htop\"`",
            );
        }
        for entry in args {
            let Some(text) = self.string(file, "remove", entry) else {
                continue;
            };
            match parse_ref(&text) {
                Ok((kind, name)) => layer.removes.push(Removal {
                    kind,
                    name: name.to_string(),
                    span: self.span(file, entry.span()),
                }),
                Err(invalid) => self.invalid(file, entry.span(), invalid),
            }
        }
    }

    fn service(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        let Some((name, _)) = self.name_arg(file, node, "service name") else {
            return;
        };
        let mut port = None;
        for (key, entry) in self.props(node) {
            match key {
                "port" => match entry.value() {
                    KdlValue::Integer(i) if (1..=65535).contains(i) => port = Some(*i as u16),
                    KdlValue::Integer(_) => self.diags.push(LowerError::InvalidValue {
                        message: "port out of range".into(),
                        span: entry.span(),
                        help: "a port is a number from 1 to 65535".into(),
                        file,
                    }),
                    other => self.wrong_type(file, "port", "a number", other, entry.span()),
                },
                _ => self.unknown_prop(file, "service", entry, &["port"]),
            }
        }
        layer.services.push(ServiceDecl {
            name,
            port,
            span: self.span(file, node.span()),
        });
    }

    fn uses(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        let Some((name, _)) = self.name_arg(file, node, "service name") else {
            return;
        };
        let mut uses = UsesDecl {
            name,
            count: 1,
            runtime: true,
            span: self.span(file, node.span()),
        };
        for (key, entry) in self.props(node) {
            match key {
                "count" => match entry.value() {
                    KdlValue::Integer(i) if (0..=u32::MAX as i128).contains(i) => {
                        uses.count = *i as u32
                    }
                    other => {
                        self.wrong_type(file, "count", "a non-negative number", other, entry.span())
                    }
                },
                "runtime" => {
                    if let Some(b) = self.bool(file, "runtime", entry) {
                        uses.runtime = b;
                    }
                }
                _ => self.unknown_prop(file, "uses", entry, &["count", "runtime"]),
            }
        }
        layer.uses.push(uses);
    }

    fn rollout(&mut self, file: FileId, node: &KdlNode) {
        if self.rollout_seen {
            self.diags.push(LowerError::Duplicate {
                what: "rollout",
                name: "rollout".into(),
                span: node.name().span(),
                help: "a fleet has one rollout policy; keep one `rollout` node".into(),
                file,
            });
            return;
        }
        self.rollout_seen = true;
        self.no_args(file, node);
        self.no_children(file, node);
        let mut rollout = Rollout {
            batch_by: None,
            max_unavailable: MaxUnavailable::Count(1),
            span: self.span(file, node.span()),
        };
        for (key, entry) in self.props(node) {
            match key {
                "batch-by" => rollout.batch_by = self.string(file, "batch-by", entry),
                "max-unavailable" => match entry.value() {
                    KdlValue::Integer(i) if (1..=u32::MAX as i128).contains(i) => {
                        rollout.max_unavailable = MaxUnavailable::Count(*i as u32)
                    }
                    KdlValue::String(s) if parse_percent(s).is_some() => {
                        rollout.max_unavailable =
                            MaxUnavailable::Percent(parse_percent(s).unwrap_or(1))
                    }
                    other => self.wrong_type(
                        file,
                        "max-unavailable",
                        "a count of at least 1 or a percentage such as \"10%\"",
                        other,
                        entry.span(),
                    ),
                },
                _ => self.unknown_prop(file, "rollout", entry, &["batch-by", "max-unavailable"]),
            }
        }
        self.spec.rollout = Some(rollout);
    }

    // ---- sysctl ----------------------------------------------------------------------------

    fn sysctl(&mut self, file: FileId, node: &KdlNode, out: &mut Vec<SysctlSetting>) {
        self.no_args(file, node);
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "sysctl", entry, &[]);
        }
        let Some(children) = node.children() else {
            return;
        };
        for child in children.nodes() {
            let key = child.name().value().to_string();
            let key_span = child.name().span();
            if let Err(invalid) = validate::sysctl_key(&key) {
                self.invalid(file, key_span, invalid);
                continue;
            }
            self.no_children(file, child);
            for (_, entry) in self.props(child) {
                self.diags.push(LowerError::UnexpectedArgument {
                    node: key.clone(),
                    expected: "one value",
                    span: entry.span(),
                    help: "write `KEY VALUE`, such as `net.ipv4.ip_forward 1`".into(),
                    file,
                });
            }
            let args = self.args(child);
            let value = match args.as_slice() {
                [entry] => match entry.value() {
                    KdlValue::Null => None,
                    KdlValue::Integer(i) => Some(i.to_string()),
                    KdlValue::String(s) => {
                        if let Err(reason) = crate::escape::config_field(s) {
                            self.diags.push(LowerError::InvalidValue {
                                message: format!("invalid value for `{key}`: {reason}"),
                                span: entry.span(),
                                help: "a sysctl value is one line; several numbers are separated by spaces or tabs".into(),
                                file,
                            });
                            continue;
                        }
                        Some(s.clone())
                    }
                    other => {
                        self.wrong_type(
                            file,
                            &key,
                            "a number or a string (or `#null` to remove the key)",
                            other,
                            entry.span(),
                        );
                        continue;
                    }
                },
                [] => {
                    self.missing(
                        file,
                        key_span,
                        key.clone(),
                        "value",
                        "write `KEY VALUE`, or `KEY #null` to remove an inherited key",
                    );
                    continue;
                }
                [_, extra, ..] => {
                    self.diags.push(LowerError::UnexpectedArgument {
                        node: key.clone(),
                        expected: "one value",
                        span: extra.span(),
                        help:
                            "a value with several fields is one string: `kernel.printk \"4 4 1 7\"`"
                                .into(),
                        file,
                    });
                    continue;
                }
            };
            out.push(SysctlSetting {
                key,
                value,
                span: self.span(file, child.span()),
            });
        }
    }

    // ---- resources -------------------------------------------------------------------------

    fn resource(&mut self, file: FileId, node: &KdlNode, kind: Kind) -> Option<ResourceDecl> {
        let keyword = kind.keyword();
        let (name, name_span) = if kind.is_setting() {
            self.no_args(file, node);
            (keyword.to_string(), self.span(file, node.name().span()))
        } else {
            let what = match kind {
                Kind::Perm | Kind::File => "path",
                Kind::Ethtool => "interface name",
                _ => "name",
            };
            self.name_arg(file, node, what)?
        };
        let before = self.diags.error_count();
        self.check_name(file, kind, &name, name_span);
        let schema = kind.schema();
        let mut fields: BTreeMap<&'static str, Field> = BTreeMap::new();
        let prop_names: Vec<&str> = schema
            .iter()
            .filter(|f| f.source == FieldSource::Prop)
            .map(|f| f.name)
            .collect();
        for (key, entry) in self.props(node) {
            match schema
                .iter()
                .find(|f| f.source == FieldSource::Prop && f.name == key)
            {
                Some(field) => {
                    if let Some(value) = self.typed_value(file, keyword, field, entry) {
                        if fields.contains_key(field.name) {
                            self.diags.push(LowerError::Duplicate {
                                what: "property",
                                name: key.to_string(),
                                span: entry.span(),
                                help: "a property may be set once per node".into(),
                                file,
                            });
                        }
                        fields.insert(
                            field.name,
                            Field {
                                value,
                                span: self.span(file, entry.span()),
                            },
                        );
                    }
                }
                None => self.unknown_prop(file, keyword, entry, &prop_names),
            }
        }
        if let Some(children) = node.children() {
            self.resource_children(file, kind, children, &mut fields);
        }
        let decl = ResourceDecl {
            kind,
            name,
            name_span,
            span: self.span(file, node.span()),
            fields,
        };
        // Field checks run even when something else in the node is wrong, so that one run
        // reports every mistake; the node is dropped afterwards.
        self.check_fields(file, &decl);
        if self.diags.error_count() > before {
            return None;
        }
        Some(decl)
    }

    fn resource_children(
        &mut self,
        file: FileId,
        kind: Kind,
        children: &KdlDocument,
        fields: &mut BTreeMap<&'static str, Field>,
    ) {
        let schema = kind.schema();
        let keyword = kind.keyword();
        let child_names: Vec<&str> = schema
            .iter()
            .filter(|f| !matches!(f.source, FieldSource::Prop | FieldSource::AnyChildren))
            .map(|f| f.name)
            .collect();
        if let Some(field) = schema.iter().find(|f| f.source == FieldSource::AnyChildren) {
            // ethtool: every child is `feature on|off`.
            let mut map = BTreeMap::new();
            for child in children.nodes() {
                let feature = child.name().value();
                if feature == "after" {
                    if let Some(v) = self.child_args(file, child) {
                        fields.insert(
                            "after",
                            Field {
                                value: Value::List(v),
                                span: self.span(file, child.span()),
                            },
                        );
                    }
                    continue;
                }
                if let Err(invalid) = validate::ethtool_feature(feature) {
                    self.invalid(file, child.name().span(), invalid);
                    continue;
                }
                let args = self.args(child);
                let value = match args.as_slice() {
                    [entry] => match entry.value() {
                        KdlValue::String(s) if s == "on" || s == "off" => s.clone(),
                        other => {
                            self.wrong_type(file, feature, "`on` or `off`", other, entry.span());
                            continue;
                        }
                    },
                    _ => {
                        self.missing(
                            file,
                            child.span(),
                            feature.to_string(),
                            "value `on` or `off`",
                            format!("write `{feature} on` or `{feature} off`"),
                        );
                        continue;
                    }
                };
                if map.insert(feature.to_string(), value).is_some() {
                    self.diags.push(LowerError::Duplicate {
                        what: "ethtool feature",
                        name: feature.to_string(),
                        span: child.name().span(),
                        help: "set each feature once".into(),
                        file,
                    });
                }
            }
            fields.insert(
                field.name,
                Field {
                    value: Value::Map(map),
                    span: self.span(file, children.span()),
                },
            );
            return;
        }
        for child in children.nodes() {
            let name = child.name().value();
            let Some(field) = schema
                .iter()
                .find(|f| f.name == name && f.source != FieldSource::Prop)
            else {
                let help = match validate::did_you_mean(name, child_names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if child_names.is_empty() => format!("`{keyword}` takes no child nodes"),
                    None => format!("`{keyword}` knows: {}", child_names.join(", ")),
                };
                self.diags.push(LowerError::UnknownNode {
                    name: name.to_string(),
                    context: "in this resource",
                    span: child.name().span(),
                    help,
                    file,
                });
                continue;
            };
            let mut span = self.span(file, child.span());
            let value = match field.source {
                FieldSource::ChildArg => {
                    self.no_children(file, child);
                    for (_, entry) in self.props(child) {
                        self.unknown_prop(file, name, entry, &[]);
                    }
                    let args = self.args(child);
                    match args.as_slice() {
                        [entry] => {
                            span = self.span(file, entry.span());
                            self.typed_value(file, keyword, field, entry)
                        }
                        [] => {
                            self.missing(
                                file,
                                child.name().span(),
                                name.to_string(),
                                "value",
                                format!("write `{name} \"...\"`"),
                            );
                            None
                        }
                        [_, extra, ..] => {
                            self.diags.push(LowerError::UnexpectedArgument {
                                node: name.to_string(),
                                expected: "one value",
                                span: extra.span(),
                                help: format!("write one `{name}` value"),
                                file,
                            });
                            None
                        }
                    }
                }
                FieldSource::ChildArgs => self.child_args(file, child).map(Value::List),
                FieldSource::RepeatedChildArg => {
                    if let [entry] = self.args(child).as_slice() {
                        span = self.span(file, entry.span());
                        // Each key is checked where it is written, not after the list is merged.
                        if let (Kind::User, KdlValue::String(key)) = (kind, entry.value()) {
                            if let Err(invalid) = validate::ssh_public_key(key) {
                                self.invalid(file, entry.span(), invalid);
                                continue;
                            }
                        }
                    }
                    let args = self.child_args(file, child);
                    match args {
                        Some(list) if list.len() == 1 => {
                            let mut all = match fields.remove(field.name) {
                                Some(Field {
                                    value: Value::List(l),
                                    ..
                                }) => l,
                                _ => Vec::new(),
                            };
                            all.extend(list);
                            Some(Value::List(all))
                        }
                        Some(_) => {
                            self.diags.push(LowerError::UnexpectedArgument {
                                node: name.to_string(),
                                expected: "one value",
                                span: child.span(),
                                help: format!("write one `{name}` node per value"),
                                file,
                            });
                            None
                        }
                        None => None,
                    }
                }
                FieldSource::ChildProps => {
                    self.no_args(file, child);
                    self.no_children(file, child);
                    let mut map = BTreeMap::new();
                    for (key, entry) in self.props(child) {
                        if let Some(v) = label_value(entry.value()) {
                            map.insert(key.to_string(), v);
                        } else {
                            self.wrong_type(file, key, "a string", entry.value(), entry.span());
                        }
                    }
                    Some(Value::Map(map))
                }
                FieldSource::DebconfChildren => {
                    let mut list = match fields.remove(field.name) {
                        Some(Field {
                            value: Value::Debconf(l),
                            ..
                        }) => l,
                        _ => Vec::new(),
                    };
                    if let Some(d) = self.debconf(file, child) {
                        list.push(d);
                    }
                    Some(Value::Debconf(list))
                }
                FieldSource::Prop | FieldSource::AnyChildren => None,
            };
            if let Some(value) = value {
                if matches!(
                    field.source,
                    FieldSource::ChildArg | FieldSource::ChildArgs | FieldSource::ChildProps
                ) && fields.contains_key(field.name)
                {
                    self.diags.push(LowerError::Duplicate {
                        what: "child node",
                        name: name.to_string(),
                        span: child.name().span(),
                        help: format!("write `{name}` once"),
                        file,
                    });
                }
                fields.insert(field.name, Field { value, span });
            }
        }
    }

    fn child_args(&mut self, file: FileId, child: &KdlNode) -> Option<Vec<String>> {
        self.no_children(file, child);
        let name = child.name().value().to_string();
        for (_, entry) in self.props(child) {
            self.unknown_prop(file, &name, entry, &[]);
        }
        let mut out = Vec::new();
        let mut ok = true;
        for entry in self.args(child) {
            match entry.value() {
                KdlValue::String(s) => out.push(s.clone()),
                other => {
                    self.wrong_type(file, &name, "a string", other, entry.span());
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn debconf(&mut self, file: FileId, node: &KdlNode) -> Option<Debconf> {
        self.no_children(file, node);
        let (question, _) = self.name_arg(file, node, "debconf question")?;
        let mut kind = None;
        let mut value = None;
        for (key, entry) in self.props(node) {
            match key {
                "type" => kind = self.string(file, "type", entry),
                "value" => {
                    value = match entry.value() {
                        KdlValue::Bool(b) => Some(b.to_string()),
                        KdlValue::String(s) => Some(s.clone()),
                        KdlValue::Integer(i) => Some(i.to_string()),
                        other => {
                            self.wrong_type(
                                file,
                                "value",
                                "a string or a boolean",
                                other,
                                entry.span(),
                            );
                            None
                        }
                    }
                }
                _ => self.unknown_prop(file, "debconf", entry, &["type", "value"]),
            }
        }
        const TYPES: &[&str] = &[
            "boolean",
            "string",
            "select",
            "multiselect",
            "note",
            "text",
            "password",
            "title",
            "error",
            "seen",
        ];
        let Some(kind) = kind else {
            self.missing(
                file,
                node.name().span(),
                "debconf",
                "`type`",
                format!("debconf types: {}", TYPES.join(", ")),
            );
            return None;
        };
        if !TYPES.contains(&kind.as_str()) {
            let help = match validate::did_you_mean(&kind, TYPES.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("debconf types: {}", TYPES.join(", ")),
            };
            self.diags.push(LowerError::InvalidValue {
                message: format!("unknown debconf type `{kind}`"),
                span: node.span(),
                help,
                file,
            });
            return None;
        }
        let Some(value) = value else {
            self.missing(
                file,
                node.name().span(),
                "debconf",
                "`value`",
                "write `debconf \"pkg/question\" type=\"boolean\" value=#false`",
            );
            return None;
        };
        if value.contains('\n') {
            self.diags.push(LowerError::InvalidValue {
                message: "a debconf answer cannot span lines".into(),
                span: node.span(),
                help: "debconf-set-selections reads one answer per line".into(),
                file,
            });
            return None;
        }
        Some(Debconf {
            question,
            kind,
            value,
        })
    }

    fn typed_value(
        &mut self,
        file: FileId,
        node: &str,
        field: &FieldSchema,
        entry: &KdlEntry,
    ) -> Option<Value> {
        let what = format!("{node} {}", field.name);
        let value = entry.value();
        match field.ty {
            FieldType::Bool => self.bool(file, &what, entry).map(Value::Bool),
            FieldType::Str => self.string(file, &what, entry).map(Value::Str),
            FieldType::IntOrStr => match value {
                KdlValue::Integer(i) => Some(Value::Str(i.to_string())),
                KdlValue::String(s) => Some(Value::Str(s.clone())),
                other => {
                    self.wrong_type(file, &what, "a number or a string", other, entry.span());
                    None
                }
            },
            FieldType::Seconds => match value {
                KdlValue::Integer(i) if (0..=i64::MAX as i128).contains(i) => {
                    Some(Value::Int(*i as i64))
                }
                KdlValue::String(s) if s == "infinite" => Some(Value::Str(s.clone())),
                other => {
                    self.wrong_type(
                        file,
                        &what,
                        "a whole number of seconds (or \"infinite\")",
                        other,
                        entry.span(),
                    );
                    None
                }
            },
            FieldType::Mode => {
                let text = match value {
                    KdlValue::String(s) => s.clone(),
                    other => {
                        let help_value = match other {
                            KdlValue::Integer(i) => format!("\"{i:04}\""),
                            _ => "\"0644\"".into(),
                        };
                        self.diags.push(LowerError::WrongType {
                            what,
                            expected: "an octal mode string".into(),
                            found: describe_value(other),
                            span: entry.span(),
                            help: format!("write the mode in quotes, such as {help_value}, so that it is read as octal"),
                            file,
                        });
                        return None;
                    }
                };
                match validate::file_mode(&text) {
                    Ok(_) => Some(Value::Str(text)),
                    Err(invalid) => {
                        self.invalid(file, entry.span(), invalid);
                        None
                    }
                }
            }
            FieldType::Enum(values) => {
                let text = self.string(file, &what, entry)?;
                if values.contains(&text.as_str()) {
                    Some(Value::Str(text))
                } else {
                    let help = match validate::did_you_mean(&text, values.iter().copied()) {
                        Some(s) => format!("did you mean \"{s}\"?"),
                        None => format!("use {}", field.ty.describe()),
                    };
                    self.diags.push(LowerError::InvalidValue {
                        message: format!("`{what}` cannot be \"{text}\""),
                        span: entry.span(),
                        help,
                        file,
                    });
                    None
                }
            }
            FieldType::Strings
            | FieldType::StrMap
            | FieldType::OnOffMap
            | FieldType::DebconfList => self
                .string(file, &what, entry)
                .map(|s| Value::List(vec![s])),
        }
    }

    /// Checks of a resource's name that depend on its kind.
    fn check_name(&mut self, file: FileId, kind: Kind, name: &str, span: Span) {
        let result = match kind {
            Kind::User => validate::unix_user_name(name),
            Kind::Package => validate::apt_package_name(name),
            Kind::File => validate::absolute_path(name),
            Kind::Perm => validate::absolute_path(name.trim_end_matches('*')).or_else(|e| {
                if name.starts_with('/')
                    && !name.contains("/../")
                    && !name.contains("//")
                    && !name.ends_with("/..")
                {
                    Ok(())
                } else {
                    Err(e)
                }
            }),
            Kind::Unit => validate::systemd_unit_name(name),
            Kind::Apparmor => validate::apparmor_profile_name(name),
            Kind::Ethtool => validate::interface_name(name),
            Kind::Exec => validate::script_name(name),
            Kind::AptSource => validate::source_name(name),
            Kind::Limit | Kind::Mount => validate::resource_name(name),
            Kind::Users | Kind::Apt => Ok(()),
        };
        if let Err(invalid) = result {
            self.invalid(file, span.source_span(), invalid);
        }
    }

    /// Checks of field values that do not need the other layers.
    fn check_fields(&mut self, file: FileId, decl: &ResourceDecl) {
        for (name, field) in &decl.fields {
            let result = match (decl.kind, *name, &field.value) {
                (Kind::User, "password", Value::Str(s)) => validate::sha512_crypt(s),
                (Kind::User, "shell", Value::Str(s)) => validate::absolute_path(s),
                (Kind::Package, "version", Value::Str(v)) => validate::apt_version(v),
                (Kind::Mount, "target", Value::Str(t)) => validate::mount_target(t),
                (Kind::File | Kind::Perm, "owner", Value::Str(s)) => validate::unix_user_name(s),
                (Kind::File | Kind::Perm, "group", Value::Str(s)) => validate::unix_group_name(s),
                (Kind::AptSource, "url", Value::Str(s)) => validate::apt_url(s),
                (Kind::AptSource, "key", Value::Str(s)) => validate::pgp_public_key(s),
                (_, "after", Value::List(refs)) => {
                    refs.iter().try_for_each(|r| parse_ref(r).map(|_| ()))
                }
                (Kind::Limit, "domain", Value::Str(s)) | (Kind::Limit, "value", Value::Str(s)) => {
                    crate::escape::config_field(s)
                        .map(|_| ())
                        .map_err(|reason| validate::Invalid {
                            message: format!("invalid limits.conf field: {reason}"),
                            help: "a limits.conf field is one word: no spaces, tabs or newlines"
                                .into(),
                        })
                }
                _ => Ok(()),
            };
            if let Err(invalid) = result {
                self.invalid(file, field.span.source_span(), invalid);
            }
        }
    }
}

/// Adds a resource to a layer; the same kind and name twice in one layer is an error.
fn push_resource(
    layer: &mut Layer,
    decl: ResourceDecl,
    diags: &mut Diagnostics,
    sources: &Sources,
) {
    if let Some(first) = layer
        .resources
        .iter()
        .find(|r| r.kind == decl.kind && r.name == decl.name)
    {
        let help = if decl.kind.is_setting() {
            format!(
                "`{}` is first set at {}; set all its properties on one node",
                decl.kind.keyword(),
                sources.location(first.name_span)
            )
        } else {
            format!(
                "`{}:{}` is first declared at {}; merge the two, or change one in an `override`",
                decl.kind.keyword(),
                decl.name,
                sources.location(first.name_span)
            )
        };
        diags.push(LowerError::Duplicate {
            what: "resource",
            name: format!("{}:{}", decl.kind.keyword(), decl.name),
            span: decl.name_span.source_span(),
            help,
            file: decl.name_span.file,
        });
        return;
    }
    layer.resources.push(decl);
}

/// Several `sysctl` blocks in one layer are one map; a key set twice in it is an error.
fn merge_sysctl_into(
    into: &mut Vec<SysctlSetting>,
    new: Vec<SysctlSetting>,
    diags: &mut Diagnostics,
    sources: &Sources,
) {
    for setting in new {
        let canonical = validate::sysctl_path(&setting.key);
        if let Some(first) = into
            .iter()
            .find(|s| validate::sysctl_path(&s.key) == canonical)
        {
            diags.push(LowerError::Duplicate {
                what: "sysctl key",
                name: setting.key.clone(),
                span: setting.span.source_span(),
                help: format!(
                    "`{}` is first set at {}; set each key once per layer",
                    first.key,
                    sources.location(first.span)
                ),
                file: setting.span.file,
            });
            continue;
        }
        into.push(setting);
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

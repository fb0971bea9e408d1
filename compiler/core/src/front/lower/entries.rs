//! Reading a node's entries: positional arguments and properties, typed as the language wants
//! them, and the errors (missing, unexpected, wrong type, invalid) about them.

use super::*;

impl Lowerer<'_> {
    /// The positional arguments of a node.
    pub(super) fn args<'n>(&self, node: &'n KdlNode) -> Vec<&'n KdlEntry> {
        node.entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect()
    }

    pub(super) fn props<'n>(&self, node: &'n KdlNode) -> Vec<(&'n str, &'n KdlEntry)> {
        node.entries()
            .iter()
            .filter_map(|e| e.name().map(|n| (n.value(), e)))
            .collect()
    }

    /// Exactly one string argument: the node's name (`host "node-001"`).
    pub(super) fn name_arg(
        &mut self,
        file: FileId,
        node: &KdlNode,
        what: &str,
    ) -> Option<(String, Span)> {
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
    pub(super) fn missing(
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

    pub(super) fn no_args(&mut self, file: FileId, node: &KdlNode) {
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

    pub(super) fn no_children(&mut self, file: FileId, node: &KdlNode) {
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

    pub(super) fn unknown_prop(
        &mut self,
        file: FileId,
        node: &str,
        entry: &KdlEntry,
        known: &[&str],
    ) {
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

    pub(super) fn string(&mut self, file: FileId, what: &str, entry: &KdlEntry) -> Option<String> {
        match entry.value() {
            KdlValue::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(file, what, "a string", other, entry.span());
                None
            }
        }
    }

    pub(super) fn bool(&mut self, file: FileId, what: &str, entry: &KdlEntry) -> Option<bool> {
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

    pub(super) fn wrong_type(
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

    pub(super) fn invalid(&mut self, file: FileId, span: SourceSpan, invalid: validate::Invalid) {
        self.diags.push(LowerError::InvalidValue {
            message: invalid.message,
            span,
            help: invalid.help,
            file,
        });
    }
}

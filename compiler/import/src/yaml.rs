//! A YAML document as a tree whose every node knows where it was written, so that an import can
//! point at the line of a key it does not know.
//!
//! Scalars keep their text and whether they were quoted: Helm reads values as YAML 1.1, where a
//! plain `on` or `off` is a boolean and a quoted one a string, and the import decides per field
//! what a scalar means rather than this reader guessing.

use bellc_core::source::{FileId, Span};
use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    /// From the node's first character to the end of that line.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    /// In the order written; keys are scalars (the reader refuses others).
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The text of a scalar, `None` for a collection.
    pub fn scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// A plain `~`, `null`, `Null`, `NULL` or nothing: YAML's null, which Helm reads as "unset".
    /// The same value wherever it is written: mappings key by key in any order.
    pub fn same(&self, other: &Node) -> bool {
        match (&self.value, &other.value) {
            (Value::Scalar { .. }, Value::Scalar { .. }) if self.is_null() || other.is_null() => {
                self.is_null() && other.is_null()
            }
            (Value::Scalar { text: a, plain: pa }, Value::Scalar { text: b, plain: pb }) => {
                a == b && pa == pb
            }
            (Value::Seq(a), Value::Seq(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same(y))
            }
            (Value::Map(a), Value::Map(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.iter()
                            .any(|(k2, v2)| k.scalar() == k2.scalar() && v.same(v2))
                    })
            }
            _ => false,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true }
            if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    pub fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// The value under `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.scalar() == Some(key))
            .map(|(_, v)| v)
    }

    /// What a value is, for a message, never its text (it may be a password hash): "a mapping",
    /// "a list", "a single value".
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Scalar { .. } => "a single value".into(),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
        }
    }
}

/// What is wrong with the text as YAML, with where.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub message: String,
    pub span: Span,
}

/// How deep collections nest: values files nest a handful of levels.
const MAX_DEPTH: usize = 64;
/// How many nodes a document may hold once aliases are expanded, so that aliases of aliases
/// (a "billion laughs") end in an error, not in all of memory.
const MAX_NODES: usize = 1_000_000;

/// Reads one YAML document. Aliases are expanded; a key written twice is an error (Helm would
/// keep one of the two, and which one is not something to leave to a reader of the file).
pub fn parse(file: FileId, text: &str) -> Result<Node, SyntaxError> {
    let mut builder = Builder {
        file,
        text,
        char_offsets: if text.is_ascii() {
            None
        } else {
            Some(text.char_indices().map(|(at, _)| at).collect())
        },
        stack: Vec::new(),
        anchors: HashMap::new(),
        documents: Vec::new(),
        error: None,
        nodes: 0,
    };
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, true) {
        return Err(SyntaxError {
            message: e.info().to_string(),
            span: builder.span_at(e.marker()),
        });
    }
    if let Some(error) = builder.error {
        return Err(error);
    }
    let mut documents = builder.documents.into_iter();
    let first = documents.next();
    if let Some(second) = documents.next() {
        return Err(SyntaxError {
            message: "a values file holds one YAML document, this one more".into(),
            span: second.span,
        });
    }
    Ok(first.unwrap_or(Node {
        value: Value::Map(Vec::new()),
        span: Span::new(file, (0, 0).into()),
    }))
}

enum Open {
    Seq(Vec<Node>, Span, usize),
    Map(Vec<(Node, Node)>, Option<Node>, Span, usize),
}

struct Builder<'t> {
    file: FileId,
    text: &'t str,
    /// Byte offset of every character, when they differ from character indexes.
    char_offsets: Option<Vec<usize>>,
    stack: Vec<Open>,
    /// Each anchored node with the number of nodes it holds.
    anchors: HashMap<usize, (Node, usize)>,
    /// Nodes made so far, aliases counted at their size.
    nodes: usize,
    documents: Vec<Node>,
    error: Option<SyntaxError>,
}

impl Builder<'_> {
    fn span_at(&self, mark: &Marker) -> Span {
        let start = match &self.char_offsets {
            None => mark.index(),
            Some(offsets) => offsets
                .get(mark.index())
                .copied()
                .unwrap_or(self.text.len()),
        }
        .min(self.text.len());
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |n| start + n);
        let len = self.text[start..line_end].trim_end().len().max(1);
        let len = len.min(self.text.len().saturating_sub(start));
        Span::new(self.file, (start, len).into())
    }

    fn add(&mut self, node: Node, anchor: usize, size: usize) {
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_NODES {
            self.fail(
                &format!("the values hold more than {MAX_NODES} values once aliases are expanded"),
                node.span,
            );
            return;
        }
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size_of(&node)));
        }
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some(Open::Seq(items, _, _)) => items.push(node),
            Some(Open::Map(entries, pending, _, _)) => match pending.take() {
                None => {
                    if node.scalar().is_none() {
                        self.fail("a mapping key here is a list or a mapping; bellc reads keys that are text", node.span);
                        return;
                    }
                    *pending = Some(node);
                }
                Some(key) => {
                    if entries.iter().any(|(k, _)| k.scalar() == key.scalar()) {
                        let message = format!(
                            "`{}` is written twice in this mapping",
                            key.scalar().unwrap_or_default()
                        );
                        self.fail(&message, key.span);
                        return;
                    }
                    entries.push((key, node));
                }
            },
        }
    }

    fn fail(&mut self, message: &str, span: Span) {
        if self.error.is_none() {
            self.error = Some(SyntaxError {
                message: message.to_string(),
                span,
            });
        }
    }
}

/// The number of nodes in a tree.
fn size_of(node: &Node) -> usize {
    1 + match &node.value {
        Value::Scalar { .. } => 0,
        Value::Seq(items) => items.iter().map(size_of).sum(),
        Value::Map(entries) => entries.iter().map(|(k, v)| size_of(k) + size_of(v)).sum(),
    }
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, event: Event, mark: Marker) {
        // After the first error the tree is not built on.
        if self.error.is_some() {
            return;
        }
        let span = self.span_at(&mark);
        match event {
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = style == TScalarStyle::Plain;
                self.add(
                    Node {
                        value: Value::Scalar { text, plain },
                        span,
                    },
                    anchor,
                    1,
                );
            }
            Event::Alias(anchor) => match self.anchors.get(&anchor) {
                Some((_, size)) if self.nodes.saturating_add(*size) > MAX_NODES => self.fail(
                    &format!(
                        "the values hold more than {MAX_NODES} values once aliases are expanded"
                    ),
                    span,
                ),
                Some((node, size)) => {
                    let (node, size) = (
                        Node {
                            value: node.value.clone(),
                            span,
                        },
                        *size,
                    );
                    self.add(node, 0, size);
                }
                None => self.fail("an alias to an anchor not defined before it", span),
            },
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                self.fail(
                    &format!("the values nest deeper than {MAX_DEPTH} levels"),
                    span,
                );
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Open::Seq(Vec::new(), span, anchor)),
            Event::MappingStart(anchor, _) => {
                self.stack.push(Open::Map(Vec::new(), None, span, anchor))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, span, anchor) = match self.stack.pop() {
                    Some(Open::Seq(items, span, anchor)) => (Value::Seq(items), span, anchor),
                    Some(Open::Map(entries, _, span, anchor)) => {
                        // The parser marks a block mapping at its first key's colon; what is
                        // said of the mapping is said at its first key.
                        let span = match entries.first() {
                            Some((key, _)) if key.span.offset < span.offset => Span {
                                offset: key.span.offset,
                                len: span.offset + span.len - key.span.offset,
                                ..span
                            },
                            _ => span,
                        };
                        (Value::Map(entries), span, anchor)
                    }
                    None => return,
                };
                // Its members were counted as they were added.
                self.add(Node { value, span }, anchor, 1);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Node, SyntaxError> {
        parse(FileId(0), text)
    }

    #[test]
    fn nodes_know_their_line_and_whether_they_were_quoted() {
        let text = "conf:\n  sysctl:\n    net.ipv4.ip_forward: 1\n  ethtool:\n    ens3: {tso: off, x: 'off'}\n";
        let root = parse_str(text).unwrap();
        let sysctl = root.get("conf").unwrap().get("sysctl").unwrap();
        let (key, value) = &sysctl.entries().unwrap()[0];
        assert_eq!(key.scalar(), Some("net.ipv4.ip_forward"));
        assert_eq!(
            &text[key.span.offset..][..key.span.len],
            "net.ipv4.ip_forward: 1"
        );
        assert_eq!(value.scalar(), Some("1"));
        let ens3 = root
            .get("conf")
            .unwrap()
            .get("ethtool")
            .unwrap()
            .get("ens3")
            .unwrap();
        assert_eq!(
            ens3.get("tso").unwrap().value,
            Value::Scalar {
                text: "off".into(),
                plain: true
            }
        );
        assert_eq!(
            ens3.get("x").unwrap().value,
            Value::Scalar {
                text: "off".into(),
                plain: false
            }
        );
    }

    #[test]
    fn spans_are_byte_offsets_after_non_ascii_text() {
        let text = "a: ü漢\nb: 2\n";
        let root = parse_str(text).unwrap();
        let (key, _) = &root.entries().unwrap()[1];
        assert_eq!(&text[key.span.offset..][..key.span.len], "b: 2");
    }

    #[test]
    fn aliases_expand_and_duplicates_are_errors() {
        let root = parse_str("a: &x {k: 1}\nb: *x\n").unwrap();
        assert_eq!(root.get("b").unwrap().get("k").unwrap().scalar(), Some("1"));
        let e = parse_str("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(e.message.contains("`a` is written twice"), "{e:?}");
        assert_eq!(e.span.offset, 10);
    }

    #[test]
    fn aliases_of_aliases_and_deep_nesting_are_errors_not_exhaustion() {
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (i, c) in ('b'..='k').enumerate() {
            let prev = char::from(b'a' + i as u8);
            laughs.push_str(&format!(
                "{c}: &{c} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
        }
        let e = parse_str(&laughs).unwrap_err();
        assert!(e.message.contains("once aliases are expanded"), "{e:?}");
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        let e = parse_str(&deep).unwrap_err();
        assert!(e.message.contains("nest deeper than 64"), "{e:?}");
        // Deeper still, the YAML parser stops first.
        let deeper = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_str(&deeper).is_err());
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = parse_str("conf:\n  sysctl:\n    a: [1, 2\n").unwrap_err();
        assert!(!e.message.is_empty());
        let e = parse_str("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("one YAML document"), "{e:?}");
    }
}

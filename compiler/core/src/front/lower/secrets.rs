//! Where a spec file holds secrets, so that no diagnostic's source excerpt shows one: a build's
//! warnings land in CI logs, and an excerpt spans the lines around its label (a warning at
//! `user "x" {` would print the `password` line under it).
//!
//! What is secret here is what the bundle treats as secret: a password hash, a debconf answer
//! of `type="password"`, the content of a file whose mode keeps others from reading it, and any
//! string that holds a PEM private key. The excerpt shows each such value masked, byte for byte,
//! so that every label's offset stays where it was.

use bell_bundle::{looks_like_private_key, parse_mode, private_mode};
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use std::ops::Range;

/// The byte ranges of `text` (the file `doc` was parsed from) that hold a secret value: the
/// inside of each secret string, its quotes left visible.
pub(super) fn in_document(doc: &KdlDocument, text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    nodes(doc.nodes(), false, text, &mut out);
    out
}

fn nodes(list: &[KdlNode], private_content: bool, text: &str, out: &mut Vec<Range<usize>>) {
    for node in list {
        let name = node.name().value();
        let password_answer = name == "debconf"
            && node
                .entry("type")
                .is_some_and(|e| e.value().as_string() == Some("password"));
        for entry in node.entries() {
            let secret = match entry.name().map(|n| n.value()) {
                None => name == "password" || (name == "content" && private_content),
                Some("value") => password_answer,
                Some(_) => false,
            } || entry
                .value()
                .as_string()
                .is_some_and(|s| looks_like_private_key(s.as_bytes()));
            if secret {
                out.extend(value_range(entry, text));
            }
        }
        // A file's (or a unit's) content is secret when its mode keeps others from reading it.
        let private = node
            .entry("mode")
            .and_then(|e| e.value().as_string())
            .and_then(parse_mode)
            .is_some_and(private_mode);
        if let Some(children) = node.children() {
            nodes(children.nodes(), private, text, out);
        }
    }
}

/// The value of `entry` in `text`, without its quotes (`#"` and `"#` of a raw string too).
fn value_range(entry: &KdlEntry, text: &str) -> Option<Range<usize>> {
    let start = entry.span().offset();
    let whole = text.get(start..start + entry.span().len())?;
    // A property's value follows the `=` after its key.
    let mut at = 0;
    if let Some(key) = entry.name() {
        at = (key.span().offset() + key.span().len()).checked_sub(start)?;
        at += whole.get(at..)?.find('=')? + 1;
    }
    let rest = whole.get(at..)?;
    let value = rest.trim();
    let from = start + at + (rest.len() - rest.trim_start().len());
    let hashes = value.bytes().take_while(|&b| b == b'#').count();
    let quotes = value
        .get(hashes..)?
        .bytes()
        .take_while(|&b| b == b'"')
        .count();
    if quotes == 0 || !matches!(entry.value(), KdlValue::String(_)) {
        // A bare word (`password abc`) or a number: all of it.
        return Some(from..from + value.len());
    }
    let open = hashes + quotes;
    let close = value.len().checked_sub(open)?;
    Some(from + open..from + close.max(open))
}

/// For a file that did not parse (its syntax errors are reported with excerpts too): the
/// inside of the quotes on every line whose node is `password`, and every line of a PEM
/// private key block.
pub(super) fn in_unparsed(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut in_key = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        if trimmed.contains("-----BEGIN ") && trimmed.contains("PRIVATE KEY") {
            in_key = true;
        }
        let password = trimmed
            .strip_prefix("password")
            .is_some_and(|rest| rest.starts_with([' ', '\t', '"']));
        if in_key {
            out.push(offset..offset + body.len());
        } else if password || (trimmed.starts_with("debconf") && trimmed.contains("password")) {
            if let (Some(first), Some(last)) = (body.find('"'), body.rfind('"')) {
                if last > first {
                    out.push(offset + first + 1..offset + last);
                }
            }
        }
        if trimmed.contains("-----END ") && trimmed.contains("PRIVATE KEY") {
            in_key = false;
        }
        offset += line.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(text: &str, ranges: &[Range<usize>]) -> String {
        let mut sources = crate::source::Sources::new();
        let id = sources.add(std::path::Path::new("t.kdl"), text.to_string());
        sources.mask(id, ranges);
        let shown = sources.named_source(id);
        miette::SourceCode::read_span(shown.inner(), &(0, text.len()).into(), 0, 0)
            .map(|c| String::from_utf8_lossy(c.data()).into_owned())
            .expect("whole text")
    }

    fn mask(text: &str) -> String {
        let doc = KdlDocument::parse_v2(text).expect("parses");
        masked(text, &in_document(&doc, text))
    }

    #[test]
    fn secrets_are_masked_and_everything_else_stays() {
        let text = r##"user "ops" sudo=#true {
    password "$6$salt$hash"
}
package "mysql-server" {
    debconf "mysql-server/root_password" type="password" value="hunter2-x"
    debconf "mysql-server/other" type="string" value="visible"
}
file "/etc/app/token" mode="0600" {
    content "token-1"
}
file "/etc/app/public" mode="0644" {
    content "public-1"
}
file "/etc/key" {
    content #"""
    -----BEGIN OPENSSH PRIVATE KEY-----
    abc
    -----END OPENSSH PRIVATE KEY-----
    """#
}
"##;
        let out = mask(text);
        assert_eq!(out.len(), text.len());
        assert_eq!(out.lines().count(), text.lines().count());
        for secret in ["$6$salt$hash", "hunter2-x", "token-1", "abc", "BEGIN"] {
            assert!(!out.contains(secret), "{secret}: {out}");
        }
        for kept in [
            "password \"",
            "value=\"visible\"",
            "public-1",
            "type=\"password\" value=\"*********\"",
            "content #\"\"\"\n****",
        ] {
            assert!(out.contains(kept), "{kept}: {out}");
        }
    }

    #[test]
    fn an_unparsed_file_masks_password_lines_and_key_blocks() {
        let text = "user \"x\" {\n    password \"$6$a$b\" oops=\n}\nfile \"/k\" { content \"-----BEGIN RSA PRIVATE KEY-----\nsecretbody\n-----END RSA PRIVATE KEY-----\" }\n";
        let out = masked(text, &in_unparsed(text));
        assert_eq!(out.len(), text.len());
        assert!(!out.contains("$6$a$b"), "{out}");
        assert!(!out.contains("secretbody"), "{out}");
        assert!(out.contains("user \"x\" {"), "{out}");
    }
}

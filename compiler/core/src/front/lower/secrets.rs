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

/// A secret value written in a spec file.
pub(super) struct Written {
    /// The value's bytes in the file, its quotes aside: what is masked.
    pub range: Range<usize>,
    /// The whole entry that holds it, what the warning points at.
    pub entry: miette::SourceSpan,
    /// The encrypted file it could move to (`secrets/ops.hash.age`) and the line that would
    /// take it from there (`password file="secrets/ops.hash.age"`), when a field can.
    pub instead: Option<(String, String)>,
    /// The value, when it is one string that means the same read from a file: a password
    /// hash or a debconf password answer (a file's content is a template in the spec, and
    /// taken literally from a file).
    movable: Option<String>,
}

/// Whether `text` (a spec file) writes no secret value in the clear; `false` when it does not
/// parse, as what cannot be read cannot be said to hold none.
pub fn holds_no_secret(text: &str) -> bool {
    KdlDocument::parse_v2(text).is_ok_and(|doc| in_document(&doc, text).is_empty())
}

/// Where [`move_out`] would take a secret out of `text`: each entry's offset.
pub fn movable_secrets(text: &str) -> Vec<usize> {
    let Ok(doc) = KdlDocument::parse_v2(text) else {
        return Vec::new();
    };
    in_document(&doc, text)
        .into_iter()
        .filter(|w| w.instead.is_some() && w.movable.is_some())
        .map(|w| w.entry.offset())
        .collect()
}

/// A spec file's text with its password hashes and debconf password answers moved out into
/// encrypted files (`password file="secrets/ops.hash.age"`), as `bellc import` writes them:
/// the new text, and each file's name (relative to the spec) with what it holds, once per
/// file. `None` when the text does not parse.
pub fn move_out(text: &str) -> Option<(String, Vec<(String, String)>)> {
    let doc = KdlDocument::parse_v2(text).ok()?;
    let mut files: Vec<(String, String)> = Vec::new();
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for written in in_document(&doc, text) {
        let (Some((name, _)), Some(value)) = (written.instead, written.movable) else {
            continue;
        };
        // One name per value: the same question answered twice alike shares its file.
        let mut file = name.clone();
        let mut n = 1;
        while let Some((_, held)) = files.iter().find(|(f, _)| *f == file) {
            if *held == value {
                break;
            }
            n += 1;
            file = format!("{}-{n}.age", name.trim_end_matches(".age"));
        }
        if !files.iter().any(|(f, _)| *f == file) {
            files.push((file.clone(), value));
        }
        let at = written.entry.offset()..written.entry.offset() + written.entry.len();
        edits.push((at, format!("file={}", crate::kdl_text::string(&file))));
    }
    let mut out = text.to_string();
    edits.sort_by_key(|(at, _)| std::cmp::Reverse(at.start));
    for (at, with) in edits {
        out.replace_range(at, &with);
    }
    Some((out, files))
}

/// The secret values written in `text` (the file `doc` was parsed from).
pub(super) fn in_document(doc: &KdlDocument, text: &str) -> Vec<Written> {
    let mut out = Vec::new();
    nodes(doc.nodes(), None, text, &mut out);
    out
}

/// The byte ranges of `text` that hold a secret value: the inside of each secret string, its
/// quotes left visible.
pub(super) fn ranges(written: &[Written]) -> Vec<Range<usize>> {
    written.iter().map(|w| w.range.clone()).collect()
}

/// The node a value is written under: its name, its first argument, and whether its mode
/// keeps others out.
#[derive(Clone, Copy)]
struct Parent<'a> {
    name: &'a str,
    argument: &'a str,
    private: bool,
}

fn nodes(list: &[KdlNode], parent: Option<Parent>, text: &str, out: &mut Vec<Written>) {
    for node in list {
        let name = node.name().value();
        let password_answer = name == "debconf"
            && node
                .entry("type")
                .is_some_and(|e| e.value().as_string() == Some("password"));
        let argument = node
            .entries()
            .iter()
            .find(|e| e.name().is_none())
            .and_then(|e| e.value().as_string())
            .unwrap_or_default();
        let private_content = parent.is_some_and(|p| p.private);
        for entry in node.entries() {
            let secret = match entry.name().map(|n| n.value()) {
                None => name == "password" || (name == "content" && private_content),
                Some("value") => password_answer,
                Some(_) => false,
            } || entry
                .value()
                .as_string()
                .is_some_and(|s| looks_like_private_key(s.as_bytes()));
            let Some(range) = secret.then(|| value_range(entry, text)).flatten() else {
                continue;
            };
            let instead = match (name, parent) {
                ("password", Some(p)) if p.name == "user" => {
                    let file = format!("secrets/{}.hash.age", file_name(p.argument));
                    Some((file.clone(), format!("password file=\"{file}\"")))
                }
                ("content", Some(p)) if p.name == "file" => {
                    let base = p.argument.rsplit('/').next().unwrap_or_default();
                    let file = format!("secrets/{}.age", file_name(base));
                    Some((file.clone(), format!("content file=\"{file}\"")))
                }
                ("debconf", _) if password_answer => {
                    let file = format!("secrets/{}.age", file_name(argument));
                    let line = format!(
                        "debconf {} type=\"password\" file=\"{file}\"",
                        crate::kdl_text::string(argument)
                    );
                    Some((file, line))
                }
                _ => None,
            };
            let movable = (name == "password" || password_answer)
                .then(|| entry.value().as_string().map(str::to_string))
                .flatten();
            out.push(Written {
                range,
                entry: entry.span(),
                instead,
                movable,
            });
        }
        // A file's (or a unit's) content is secret when its mode keeps others from reading it.
        let private = node
            .entry("mode")
            .and_then(|e| e.value().as_string())
            .and_then(parse_mode)
            .is_some_and(private_mode);
        if let Some(children) = node.children() {
            let parent = Parent {
                name,
                argument,
                private,
            };
            nodes(children.nodes(), Some(parent), text, out);
        }
    }
}

/// `name` as one safe file name: what a shell, a KDL string and a reader take as it is.
fn file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '.',
        })
        .collect();
    match safe.trim_matches('.') {
        "" => "secret".to_string(),
        trimmed => trimmed.to_string(),
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
        masked(text, &ranges(&in_document(&doc, text)))
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
    fn password_hashes_and_debconf_passwords_move_out_and_nothing_else() {
        let text = r##"user "ops" sudo=#true {
    password "$6$salt$hash"
}
user "x/y" { password "$6$other$hash"; }
package "mysql-server" {
    debconf "mysql-server/root_password" type="password" value="hunter2-x"
    debconf "mysql-server/other" type="string" value="visible"
}
package "mariadb-server" {
    debconf "mysql-server/root_password" type="password" value="different"
}
package "again" {
    debconf "mysql-server/root_password" type="password" value="hunter2-x"
}
file "/etc/app/token" mode="0600" {
    content "token-1"
}
"##;
        let (moved, files) = move_out(text).expect("parses");
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(f, v)| (f.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            files,
            [
                ("secrets/ops.hash.age", "$6$salt$hash"),
                ("secrets/x.y.hash.age", "$6$other$hash"),
                ("secrets/mysql-server.root_password.age", "hunter2-x"),
                ("secrets/mysql-server.root_password-2.age", "different"),
            ]
        );
        for line in [
            "    password file=\"secrets/ops.hash.age\"\n",
            "user \"x/y\" { password file=\"secrets/x.y.hash.age\"; }",
            "debconf \"mysql-server/root_password\" type=\"password\" file=\"secrets/mysql-server.root_password.age\"\n",
            "file=\"secrets/mysql-server.root_password-2.age\"",
            "value=\"visible\"",
            "content \"token-1\"",
        ] {
            assert!(moved.contains(line), "{line}: {moved}");
        }
        for gone in ["$6$", "hunter2", "different"] {
            assert!(!moved.contains(gone), "{gone}: {moved}");
        }
        assert_eq!(moved.matches("mysql-server.root_password.age").count(), 2);
        KdlDocument::parse_v2(&moved).expect("still KDL");
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

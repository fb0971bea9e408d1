//! KDL literals written by bellc (the import's spec, `bellc explain`): every value quoted by the
//! code that writes it, and read back by the KDL parser in the tests.

/// A quoted KDL string that reads back as `s`, on one line: escapes for `"`, `\` and every
/// character KDL does not allow literally or that would end the line.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Control characters, line ends and the characters KDL v2 forbids in a document (bidi
/// controls, the byte order mark).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// A node name or property key: bare when it is a plain identifier, quoted otherwise.
pub fn ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !matches!(s, "true" | "false" | "null" | "inf" | "nan");
    if plain {
        s.to_string()
    } else {
        string(s)
    }
}

/// A text of several lines (a script, a profile) as a raw multi-line string indented by
/// `indent`, so that it reads as written; a one-line quoted string when the text has what a raw
/// string cannot hold (lines of blanks only, carriage returns, the closing delimiter).
pub fn block(s: &str, indent: &str) -> String {
    if !s.contains('\n') || s.chars().any(|c| c != '\n' && c != '\t' && needs_escape(c)) {
        return string(s);
    }
    if s.lines().any(|l| !l.is_empty() && l.trim().is_empty()) {
        return string(s);
    }
    let mut hashes = String::from("#");
    while s.contains(&format!("\"\"\"{hashes}")) {
        hashes.push('#');
    }
    let inner = format!("{indent}    ");
    let mut out = format!("{hashes}\"\"\"\n");
    for line in s.split('\n') {
        if !line.is_empty() {
            out.push_str(&inner);
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push_str(&inner);
    out.push_str(&format!("\"\"\"{hashes}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(literal: &str) -> String {
        let doc = kdl::KdlDocument::parse_v2(&format!("n {literal}\n"))
            .unwrap_or_else(|e| panic!("{literal}: {e:?}"));
        doc.nodes()[0].entries()[0]
            .value()
            .as_string()
            .expect("a string")
            .to_string()
    }

    #[test]
    fn strings_read_back_unchanged() {
        for s in [
            "",
            "plain",
            "a \"quoted\" \\ value",
            "tab\there",
            "nul\0",
            "del\u{7f}",
            "nel\u{85}",
            "ls\u{2028}",
            "bom\u{feff}",
            "rtl\u{202e}",
            "ü漢🦀",
            "#\"\"\"#",
            "\u{8}backspace\u{c}formfeed",
            "\"\"\"\nquotes\n\"\"\"",
            "trailing spaces   \n  indented\n",
            "\\\n back\\slash\n",
            "  \n\t\nend",
        ] {
            assert_eq!(read_back(&string(s)), s, "{s:?}");
            assert_eq!(read_back(&block(s, "  ")), s, "{s:?}");
        }
    }

    #[test]
    fn scripts_stay_readable_and_exact() {
        for s in [
            "#!/bin/sh\necho hi\n",
            "#!/bin/sh\n\n  indented\n\ttab\nno newline at end",
            "a\n\"\"\"#\nb\n",
            "x\n   \ny\n",
            "cr\r\nlf\n",
        ] {
            assert_eq!(read_back(&block(s, "    ")), s, "{s:?}");
        }
        assert!(block("#!/bin/sh\necho hi\n", "").starts_with("#\"\"\"\n    #!/bin/sh\n"));
    }

    #[test]
    fn identifiers_are_bare_only_when_plain() {
        assert_eq!(ident("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(ident("net/ipv4/ip_forward"), "\"net/ipv4/ip_forward\"");
        assert_eq!(ident("1abc"), "\"1abc\"");
        assert_eq!(ident("true"), "\"true\"");
    }
}

//! Text that a host, the store or a mirror wrote, made safe to print on a terminal: the one
//! place every text output of bellc and bell-run escapes it (the status page escapes for HTML
//! in its own way). A report's `error` holding ESC, CR or LF would otherwise move the cursor,
//! recolour the screen or paint a row of its own under `bellc status`; a bidirectional
//! override would show a name reversed.

use std::borrow::Cow;

/// Whether `c` is escaped by [`one_line`]: every control character (C0, DEL, C1: line breaks
/// and ESC among them) and the invisible characters that reorder or hide text (bidirectional
/// marks, embeddings, overrides and isolates, the line and paragraph separators, the BOM).
pub fn is_unsafe_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `text` on one line with nothing a terminal acts on: each character of
/// [`is_unsafe_on_a_terminal`] written as its escape (`\n`, `\r`, `\t`, `\u{1b}`, `\u{202e}`),
/// everything else as it is. Borrowed when there is nothing to escape.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_on_a_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe_on_a_terminal(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` line by line, each line as [`one_line`] writes it, tabs kept: for a message or an
/// output that is several lines (or columns) on purpose. A value that should not start a line
/// of its own is escaped with [`one_line`] where it is put into the message.
pub fn lines(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            line.split('\t')
                .map(one_line)
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// JSON text (as `serde_json` writes it, compact or pretty) with nothing a terminal acts on:
/// the characters of [`is_unsafe_on_a_terminal`] that JSON leaves raw in a string (DEL, the C1
/// controls, the bidirectional and invisible ones) written as `\uXXXX` escapes, which any JSON
/// reader reads back as the same string. Line breaks stay: in JSON text they are only ever
/// between values, as a string's own are escaped already.
pub fn json(text: &str) -> Cow<'_, str> {
    let unsafe_here = |c: char| c != '\n' && is_unsafe_on_a_terminal(c);
    if !text.chars().any(unsafe_here) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_here(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_acts_on_is_escaped_and_the_rest_kept() {
        assert!(matches!(one_line("db-01 ok é ✓"), Cow::Borrowed(_)));
        assert_eq!(
            one_line("x\n h3 failed\r\u{1b}[2K FAKE"),
            "x\\n h3 failed\\r\\u{1b}[2K FAKE"
        );
        assert_eq!(one_line("a\u{202e}cba\u{9b}"), "a\\u{202e}cba\\u{9b}");
        assert_eq!(one_line("tab\there\u{7f}"), "tab\\there\\u{7f}");
        assert_eq!(lines("one\u{1b}\ntwo\tcolumn"), "one\\u{1b}\ntwo\tcolumn");
        // Nothing escaped contains a character escaped again.
        let escaped = one_line("\u{0}\u{1}\u{1b}\u{85}\u{2066}\u{feff}");
        assert!(!escaped.chars().any(is_unsafe_on_a_terminal), "{escaped}");
    }

    /// JSON whose strings hold what JSON leaves raw reads back the same, with nothing raw.
    #[test]
    fn json_escapes_what_json_leaves_raw_and_reads_back_the_same() {
        let value = serde_json::json!({
            "error": "x\u{1b}[2J\r\n\u{202e}cba\u{9b}\u{7f}\u{2066}\u{feff} é ✓",
            "rows": ["a", "\u{85}"],
        });
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let shown = json(&text);
            assert!(
                !shown
                    .chars()
                    .any(|c| c != '\n' && is_unsafe_on_a_terminal(c)),
                "{shown}"
            );
            assert!(
                shown.contains("\\u202e") && shown.contains(" é ✓"),
                "{shown}"
            );
            let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
            assert_eq!(back, value);
        }
        assert!(matches!(json("{\n  \"a\": 1\n}"), Cow::Borrowed(_)));
    }
}

//! Prometheus's text exposition format, as far as both bell-run's textfile metrics and
//! `bellc serve`'s `/metrics` need it: a label value quoted so that no value can end its
//! quotes or start a line of its own.

/// A label value as the format quotes it: `\`, `"` and newlines escaped, everything else as
/// it is (UTF-8).
pub fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_hostile_label_value_stays_inside_its_quotes() {
        assert_eq!(super::label_value("a\"} 1\nb\\"), "a\\\"} 1\\nb\\\\");
        assert_eq!(super::label_value("plain ü"), "plain ü");
    }
}

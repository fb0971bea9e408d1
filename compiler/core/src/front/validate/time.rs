//! Durations as the language writes them.

/// `"10s"`, `"2m"`, `"1h"` or a bare `"30"` (seconds) as seconds; `None` for anything else
/// (fractions, other units, signs, overflow).
pub fn duration(text: &str) -> Option<u64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b's' => (&text[..text.len() - 1], 1),
        b'm' => (&text[..text.len() - 1], 60),
        b'h' => (&text[..text.len() - 1], 3600),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_read_as_seconds() {
        assert_eq!(duration("10s"), Some(10));
        assert_eq!(duration("2m"), Some(120));
        assert_eq!(duration("1h"), Some(3600));
        assert_eq!(duration("30"), Some(30));
        for bad in [
            "",
            "s",
            "1.5s",
            "-1s",
            "+1s",
            "10d",
            "1 s",
            "99999999999999999999h",
        ] {
            assert_eq!(duration(bad), None, "{bad}");
        }
    }
}

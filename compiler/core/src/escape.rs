//! Escaping of spec values for the contexts they reach: POSIX sh words, systemd unit names,
//! unit file settings, Exec*= command lines and line-based config files.
//!
//! Every value from a spec that lands in a script or config line goes through one of these
//! functions, chosen by the code that builds the line, so quoting holds by construction. Where a
//! context has no way to represent a value exactly (a newline in a unit setting, a NUL anywhere),
//! the function refuses it with a reason instead of producing something the consumer would read
//! differently.

use std::fmt::Write as _;

/// Characters that mean nothing to a POSIX shell in an argument position.
fn is_shell_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c)
}

/// `NAME=...` as the first word of a command is an assignment, not a command name; quoting it
/// keeps the word a word wherever the caller places it.
fn looks_like_assignment(s: &str) -> bool {
    match s.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// POSIX sh single-quoted literal: `'a'\''b'`.
///
/// Strings made only of `[A-Za-z0-9_./:=@%+,-]` (and not shaped like an assignment) are left
/// bare. Any other string, including the empty one and strings with newlines, is single-quoted;
/// inside single quotes nothing is special except `'` itself, which is closed, escaped and
/// reopened.
///
/// A NUL byte cannot be part of a shell word at all; use [`shell_word`] where the value has not
/// already been checked.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(is_shell_safe) && !looks_like_assignment(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// [`shell_quote`], refusing the one thing no shell word can hold: a NUL byte.
pub fn shell_word(s: &str) -> Result<String, String> {
    if s.contains('\0') {
        return Err("contains a NUL byte, which no shell word can hold".to_owned());
    }
    Ok(shell_quote(s))
}

/// `\xNN` for one byte, as systemd writes it (lowercase hex).
fn push_hex_escape(out: &mut String, byte: u8) {
    // Writing to a String cannot fail.
    let _ = write!(out, "\\x{byte:02x}");
}

/// `systemd-escape --path` of an absolute path, without a suffix: `/mnt/data-1` ->
/// `mnt-data\x2d1`, `/` -> `-`.
///
/// Like systemd, repeated slashes, `.` components and a trailing slash are dropped first. The
/// caller validates the path (see [`crate::front::validate::absolute_path`]); `..` components, which
/// systemd refuses, are not resolved here.
pub fn systemd_escape_path(path: &str) -> String {
    let simplified = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/");
    if simplified.is_empty() {
        return "-".to_owned();
    }
    let mut out = String::with_capacity(simplified.len());
    for (i, byte) in simplified.bytes().enumerate() {
        match byte {
            b'/' => out.push('-'),
            // A leading dot would make a hidden unit file.
            b'.' if i == 0 => push_hex_escape(&mut out, byte),
            b'.' | b':' | b'_' => out.push(char::from(byte)),
            _ if byte.is_ascii_alphanumeric() => out.push(char::from(byte)),
            _ => push_hex_escape(&mut out, byte),
        }
    }
    out
}

/// The unit file name systemd requires for a mount on `target`: `mnt-data.mount`.
pub fn mount_unit_name(target: &str) -> String {
    format!("{}.mount", systemd_escape_path(target))
}

fn first_control_char(s: &str) -> Option<char> {
    s.chars().find(|c| c.is_control())
}

fn describe_char(c: char) -> String {
    match c {
        '\n' => "a newline".to_owned(),
        '\r' => "a carriage return".to_owned(),
        '\t' => "a tab".to_owned(),
        '\0' => "a NUL byte".to_owned(),
        _ => format!("the control character U+{:04X}", u32::from(c)),
    }
}

/// A value for a plain systemd unit file setting (`Description=`, `What=`, `Where=`,
/// `Options=`, ...), which systemd takes literally apart from `%` specifiers.
///
/// systemd strips whitespace around a value, reads a line ending in an odd number of
/// backslashes as continued on the next line, and has no escape for a newline in these
/// settings; such values are refused. Quotes and inner backslashes are literal there and are left
/// as they are; `%` is doubled so no specifier is expanded.
pub fn unit_value(s: &str) -> Result<String, String> {
    if let Some(c) = first_control_char(s) {
        return Err(format!(
            "contains {}, which a unit file setting cannot hold",
            describe_char(c)
        ));
    }
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Err("starts or ends with whitespace, which systemd strips".to_owned());
    }
    let trailing_backslashes = s.chars().rev().take_while(|&c| c == '\\').count();
    if trailing_backslashes % 2 == 1 {
        return Err("ends with a backslash, which systemd reads as a line continuation".to_owned());
    }
    Ok(s.replace('%', "%%"))
}

/// The inside of a double-quoted word for a systemd command line or `Environment=`, with C
/// escapes for what cannot appear raw. `dollar` doubles `$`, which only Exec*= lines expand.
fn quoted_c_word(s: &str, dollar: bool) -> Result<String, String> {
    if s.contains('\0') {
        return Err("contains a NUL byte, which no command line argument can hold".to_owned());
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '%' => out.push_str("%%"),
            '$' if dollar => out.push_str("$$"),
            // ASCII controls (C1 controls are valid UTF-8 and pass through unchanged).
            c if c.is_ascii_control() => push_hex_escape(&mut out, c as u8),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// One argument of an `Exec*=` line after the executable, per systemd.service "Command lines":
/// always double-quoted (so a lone `;` is never a command separator), C escapes for `"`, `\` and
/// control characters, `%` -> `%%` (specifiers) and `$` -> `$$` (environment expansion).
pub fn unit_exec_arg(s: &str) -> Result<String, String> {
    quoted_c_word(s, true)
}

/// The executable (first word) of an `Exec*=` line.
///
/// systemd refuses quotes, backslashes and control characters in it, requires an absolute path
/// here (bell never relies on a search path), and does not expand `$` in the path while it does in
/// `argv[0]`, so a `$` cannot be written so that both agree; those are refused.
pub fn unit_exec_path(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err("is not an absolute path".to_owned());
    }
    if path.ends_with('/') {
        return Err("ends with `/`, which systemd reads as a directory".to_owned());
    }
    if let Some(c) = path
        .chars()
        .find(|&c| c.is_control() || "\"'\\$".contains(c))
    {
        let what = if c.is_control() {
            describe_char(c)
        } else {
            format!("`{c}`")
        };
        return Err(format!(
            "contains {what}, which systemd refuses in an executable path"
        ));
    }
    quoted_c_word(path, false)
}

/// One `Environment=` assignment, quoted so systemd reads back exactly `name=value`.
/// The name follows the rules systemd applies to environment variable names.
pub fn unit_environment(name: &str, value: &str) -> Result<String, String> {
    let mut chars = name.chars();
    let name_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        return Err(format!(
            "`{name}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    // systemd keeps tabs and newlines in environment values but refuses other control characters.
    if let Some(c) = value
        .chars()
        .find(|&c| c.is_control() && c != '\t' && c != '\n')
    {
        return Err(format!(
            "contains {}, which systemd refuses in an environment value",
            describe_char(c)
        ));
    }
    quoted_c_word(&format!("{name}={value}"), false)
}

/// A field of a line-based config file (sysctl.d `key = value`): refuses control characters
/// (a newline would start a new setting) and surrounding whitespace (which the readers strip).
pub fn config_field(s: &str) -> Result<String, String> {
    if let Some(c) = first_control_char(s) {
        return Err(format!(
            "contains {}, which a config file line cannot hold",
            describe_char(c)
        ));
    }
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Err("starts or ends with whitespace, which the reader strips".to_owned());
    }
    Ok(s.to_owned())
}

/// A field of a limits.d line (`domain type item value`): fields are separated by whitespace
/// and pam_limits cuts a line at `#`, so neither may appear inside a field, which may not be empty.
pub fn limits_field(s: &str) -> Result<String, String> {
    let s = config_field(s)?;
    if s.is_empty() {
        return Err("is empty, which would shift the fields of a limits.d line".to_owned());
    }
    if s.contains(char::is_whitespace) {
        return Err(
            "contains whitespace, which separates the fields of a limits.d line".to_owned(),
        );
    }
    if s.contains('#') {
        return Err("contains `#`, which starts a comment in limits.d".to_owned());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_safe_words_bare() {
        assert_eq!(shell_quote("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(shell_quote("/mnt/data-1"), "/mnt/data-1");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("FOO=bar"), "'FOO=bar'");
        assert_eq!(shell_quote("--opt=bar"), "--opt=bar");
        assert!(shell_word("a\0b").is_err());
    }

    #[test]
    fn escape_path_matches_systemd_rules() {
        assert_eq!(systemd_escape_path("/mnt/data-1"), "mnt-data\\x2d1");
        assert_eq!(systemd_escape_path("/"), "-");
        assert_eq!(systemd_escape_path("//a//./b/"), "a-b");
        assert_eq!(systemd_escape_path("/.hidden/.x"), "\\x2ehidden-.x");
        assert_eq!(mount_unit_name("/var/lib/ü"), "var-lib-\\xc3\\xbc.mount");
    }

    #[test]
    fn unit_value_rules() {
        assert_eq!(
            unit_value("100% \"x\" \\ y").as_deref(),
            Ok("100%% \"x\" \\ y")
        );
        assert_eq!(unit_value("a\\\\").as_deref(), Ok("a\\\\"));
        assert!(unit_value("a\\").is_err());
        assert!(unit_value("a\nb").is_err());
        assert!(unit_value(" a").is_err());
        assert!(unit_value("a\t").is_err());
    }

    #[test]
    fn exec_arg_rules() {
        assert_eq!(
            unit_exec_arg("a\"b\\c\n$X %n\u{1}").as_deref(),
            Ok("\"a\\\"b\\\\c\\n$$X %%n\\x01\"")
        );
        assert_eq!(unit_exec_arg(";").as_deref(), Ok("\";\""));
        assert_eq!(unit_exec_arg("").as_deref(), Ok("\"\""));
        assert!(unit_exec_arg("\0").is_err());
        assert_eq!(unit_exec_path("/bin/a %b").as_deref(), Ok("\"/bin/a %%b\""));
        assert!(unit_exec_path("/bin/$x").is_err());
        assert!(unit_exec_path("bin/x").is_err());
        assert_eq!(
            unit_environment("A", "$x \"q\" %n").as_deref(),
            Ok("\"A=$x \\\"q\\\" %%n\"")
        );
        assert!(unit_environment("1A", "x").is_err());
    }

    #[test]
    fn config_fields() {
        assert_eq!(config_field("32768 60999").as_deref(), Ok("32768 60999"));
        assert!(config_field("1\nnet.x=2").is_err());
        assert!(limits_field("a b").is_err());
        assert!(limits_field("a#b").is_err());
        assert!(limits_field("").is_err());
        assert_eq!(limits_field("@admins").as_deref(), Ok("@admins"));
    }
}

//! Reading the files a spec names, with the limits a hostile spec cannot move.
//!
//! A spec is edited by many people and built next to CI's secrets, so every file it brings in
//! (the root, includes, inventories, key files) is read the same way: only a regular file (a
//! FIFO would block the build, `/dev/zero` would never end), at most a stated number of bytes,
//! and only text. The caller decides whether the path is inside the spec's tree; this module
//! only reads.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest spec file (the root or an included file).
pub const MAX_SPEC_FILE: u64 = 16 << 20;
/// The largest inventory: `kubectl get nodes -o json` of ten thousand nodes is about 100 MiB.
pub const MAX_INVENTORY: u64 = 256 << 20;
/// The largest file of public SSH keys.
pub const MAX_KEY_FILE: u64 = 1 << 20;
/// The most files one spec may include, counting every file a glob matches.
pub const MAX_INCLUDED_FILES: usize = 10_000;
/// The deepest nesting of `{ }` blocks in one file.
pub const MAX_NESTING: usize = 64;

/// Why a file could not be read. The reason never quotes the file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not there, not permitted, or another error of the file system, as a short reason.
    Io(String),
    /// A directory, FIFO, socket or device.
    NotRegular,
    /// Larger than the limit (the size found, the limit).
    TooLarge(u64, u64),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(reason) => f.write_str(reason),
            ReadError::NotRegular => f.write_str("not a regular file"),
            ReadError::TooLarge(size, max) => write!(
                f,
                "{} is larger than the limit of {}",
                bytes(*size),
                bytes(*max)
            ),
        }
    }
}

/// `16 MiB`, `1.5 KiB`, `12 bytes`: sizes as a reader of a diagnostic wants them.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size {
            let whole = n / size;
            let tenth = (n % size) * 10 / size;
            return if tenth == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenth} {unit}")
            };
        }
    }
    format!("{n} bytes")
}

/// The bytes of the regular file at `path`, at most `max` of them.
///
/// Opened without blocking (a FIFO's open waits for a writer otherwise) and checked on the
/// open descriptor, so the file that is read is the file that was checked. The read stops one
/// byte past `max`, so a file that grows while it is read is still refused, not read on.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| ReadError::Io(io_reason(&e)))?;
    let meta = file.metadata().map_err(|e| ReadError::Io(io_reason(&e)))?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge(meta.len(), max));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    File::take(file, max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Io(io_reason(&e)))?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// The text of a file that is not valid UTF-8, with the byte offset of the first invalid
/// sequence, so the diagnostic can point at it. Invalid sequences become U+FFFD.
pub struct NotUtf8 {
    pub lossy: String,
    /// Where the first U+FFFD stands in `lossy`.
    pub offset: usize,
}

/// The bytes as text, or the lossy text and where it went wrong.
pub fn utf8(bytes: Vec<u8>) -> Result<String, NotUtf8> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            // The valid prefix is the same in the lossy text, so the offset carries over.
            Err(NotUtf8 {
                lossy: String::from_utf8_lossy(&bytes).into_owned(),
                offset: valid,
            })
        }
    }
}

/// An I/O error as the end of a sentence: "no such file", "permission denied".
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidData => "not valid UTF-8".into(),
        _ => {
            let text = e.to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => text,
            }
        }
    }
}

/// Commented-out blocks (`/- {`, or the block of a node commented out with `/- node {`) nested
/// deeper than this are refused: the KDL parser's work doubles or quadruples with each such
/// level left open (the fuzzer found 10 levels taking minutes, and twenty `/- node {` left
/// open taking seconds and a million diagnostics), and no spec comments out blocks inside
/// commented-out blocks this deep (a `/-` inside a commented-out node is redundant).
pub const MAX_COMMENTED_NESTING: usize = 4;

/// The first `{` that opens a commented-out block inside [`MAX_COMMENTED_NESTING`] others.
/// Counted on the raw bytes, strings and comments included: on malformed text the parser,
/// recovering from one error after another, may read what looks like a string or a comment
/// as blocks (the fuzzer's cases), and a real spec has no `/- {` in its strings this deep.
fn commented_out_too_deep(b: &[u8]) -> Option<(usize, Nesting)> {
    // Per open block, whether it is commented out.
    let mut open: Vec<bool> = Vec::new();
    let mut commented = 0usize;
    // The last token was `/-`: a `{` now is a commented-out children block.
    let mut after_slashdash = false;
    // Nothing but blanks and `/-` since the last node ended: a `/-` here comments out a node.
    let mut at_node_start = true;
    // The node being read was commented out: its children block is too.
    let mut in_commented_node = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'-') => {
                in_commented_node |= at_node_start;
                after_slashdash = true;
                i += 2;
                continue;
            }
            // A `/-` may stand on the line before what it comments out.
            b'\n' | b';' if !after_slashdash => {
                at_node_start = true;
                in_commented_node = false;
            }
            c if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'{' => {
                let is_commented = after_slashdash || in_commented_node;
                open.push(is_commented);
                if is_commented {
                    commented += 1;
                    if commented > MAX_COMMENTED_NESTING {
                        return Some((i, Nesting::CommentedOut));
                    }
                }
                at_node_start = true;
                in_commented_node = false;
            }
            b'}' => {
                if open.pop() == Some(true) {
                    commented -= 1;
                }
                at_node_start = true;
                in_commented_node = false;
            }
            _ => at_node_start = false,
        }
        after_slashdash = false;
        i += 1;
    }
    None
}

/// What nests too deep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// Blocks, block comments or `/-` in a row, beyond `max`.
    Blocks,
    /// Commented-out blocks, beyond [`MAX_COMMENTED_NESTING`].
    CommentedOut,
}

/// The offset of the first `{` block, block comment or `/-` in KDL text that goes deeper than
/// `max`. The KDL parser recurses once per nested block, once per nested block comment and
/// once per `/-` in a row, and would overflow its stack on thousands of any (the fuzzer found
/// the last two), so this runs first. Strings (quoted, raw and multi-line) and line comments
/// are skipped as the parser skips them; on text that is not KDL the count may be off, which
/// only moves where the parser then reports its syntax error.
pub fn too_deep(text: &str, max: usize) -> Option<(usize, Nesting)> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    // `/-` in a row, with only blanks and comments between them.
    let mut slashdashes = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'-') => {
                slashdashes += 1;
                if slashdashes > max {
                    return Some((i, Nesting::Blocks));
                }
                i += 2;
                continue;
            }
            c if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'/' if matches!(b.get(i + 1), Some(b'/' | b'*')) => {}
            _ => slashdashes = 0,
        }
        match b[i] {
            b'{' => {
                depth += 1;
                if depth > max {
                    return Some((i, Nesting::Blocks));
                }
                i += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                // Block comments nest in KDL.
                let mut level = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        level += 1;
                        if level > max {
                            return Some((i, Nesting::Blocks));
                        }
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'#' if matches!(b.get(i + 1), Some(b'#' | b'"')) => {
                // A raw string: `#"…"#`, `##"…"##`, `#"""…"""#`; it ends at a quote followed
                // by as many `#` as opened it.
                let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                i += hashes;
                if b.get(i) != Some(&b'"') {
                    continue;
                }
                i += 1;
                loop {
                    match b.get(i) {
                        None => break,
                        Some(b'"')
                            if b[i + 1..].iter().take_while(|&&c| c == b'#').count() >= hashes =>
                        {
                            i += 1 + hashes;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            b'"' => {
                // Quoted and multi-line strings: `"""` opens a string that only `"""` ends.
                let multi = b[i..].starts_with(b"\"\"\"");
                i += if multi { 3 } else { 1 };
                loop {
                    match b.get(i) {
                        None => break,
                        Some(b'\\') => i += 2,
                        Some(b'"') if !multi => {
                            i += 1;
                            break;
                        }
                        Some(b'"') if b[i..].starts_with(b"\"\"\"") => {
                            i += 3;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            _ => i += 1,
        }
    }
    commented_out_too_deep(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(12), "12 bytes");
        assert_eq!(bytes(16 << 20), "16 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
    }

    #[test]
    fn nesting_ignores_braces_in_strings_and_comments() {
        let text = "a { b { c \"{{{{\" #\"}}}{\"# /* { { */ // {{{\n } }\n";
        assert_eq!(too_deep(text, 2), None);
        assert_eq!(too_deep(text, 1), Some((6, Nesting::Blocks)));
        let multi = "s \"\"\"\n{{{{\n\"\"\" {}";
        assert_eq!(too_deep(multi, 1), None);
        let deep = "a {".repeat(100);
        assert_eq!(too_deep(&deep, 64), Some((64 * 3 + 2, Nesting::Blocks)));
    }

    #[test]
    fn nested_comments_and_slashdashes_in_a_row_count_as_nesting() {
        assert_eq!(too_deep(&"/*".repeat(3), 2), Some((4, Nesting::Blocks)));
        assert_eq!(too_deep("/* /* */ */ /* /* */ */", 2), None);
        assert_eq!(too_deep("/- /-\n/- x", 2), Some((6, Nesting::Blocks)));
        // A node between them ends the row.
        assert_eq!(too_deep("/- a /- b /- c", 2), None);
        assert_eq!(too_deep("/- /* c */ /- x", 1), Some((11, Nesting::Blocks)));
    }

    #[test]
    fn commented_out_blocks_nest_only_a_few_levels() {
        // The fuzzer's find: each level left open multiplies the parser's work by four.
        let open = "/-x /- {a\n".repeat(MAX_COMMENTED_NESTING + 1);
        let at = "/-x /- {a\n".len() * MAX_COMMENTED_NESTING + "/-x /- ".len();
        assert_eq!(too_deep(&open, 64), Some((at, Nesting::CommentedOut)));
        // Closed ones do not add up, nor do ordinary blocks inside one.
        let closed = "/-x /- {a}\n".repeat(100);
        assert_eq!(too_deep(&closed, 64), None);
        let plain = format!("/- a {{ {} }}", "b { ".repeat(10));
        assert_eq!(too_deep(&plain, 64), None);
        // The fuzzer's second find: nodes commented out with `/- node {`, left open, double
        // the work per level (twenty took seconds and a million diagnostics).
        let nodes = "/- /- n { x */\n".repeat(MAX_COMMENTED_NESTING + 1);
        let at = "/- /- n { x */\n".len() * MAX_COMMENTED_NESTING + "/- /- n ".len();
        assert_eq!(too_deep(&nodes, 64), Some((at, Nesting::CommentedOut)));
        // A `/-` on the line before its node counts; one before an argument does not, nor
        // does a commented-out node whose block closed on its line.
        let next_line = "/-\nn {\n".repeat(MAX_COMMENTED_NESTING + 1);
        assert!(too_deep(&next_line, 64).is_some());
        let argument = "n /- a {\n".repeat(MAX_COMMENTED_NESTING + 1);
        assert_eq!(too_deep(&argument, 64), None);
        let closed_nodes = "/- n { x }\n".repeat(100);
        assert_eq!(too_deep(&closed_nodes, 64), None);
    }

    #[test]
    fn a_fifo_and_a_device_are_refused_without_blocking() {
        assert_eq!(
            read_bounded(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular)
        );
        let dir = std::env::temp_dir().join(format!("bell-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        assert_eq!(read_bounded(&fifo, 10), Err(ReadError::NotRegular));
        std::fs::write(dir.join("big"), [b'x'; 11]).unwrap();
        assert_eq!(
            read_bounded(&dir.join("big"), 10),
            Err(ReadError::TooLarge(11, 10))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

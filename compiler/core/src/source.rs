//! Source files and spans.
//!
//! Every diagnostic points into a file by a `Span` (file id + byte range). Errors carry only the
//! span; the text is attached when the report is printed (`Sources::report`), so the stages stay
//! free of I/O and the same error type serves files read from disk and strings in tests.

use miette::{NamedSource, SourceSpan};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FileId(pub u32);

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Span {
    pub file: FileId,
    pub offset: usize,
    pub len: usize,
}

impl Span {
    pub fn new(file: FileId, span: SourceSpan) -> Span {
        Span {
            file,
            offset: span.offset(),
            len: span.len(),
        }
    }

    pub fn source_span(&self) -> SourceSpan {
        SourceSpan::new(self.offset.into(), self.len)
    }
}

#[derive(Debug)]
pub struct SourceFile {
    /// The path as the user would recognise it (relative to the working directory when possible).
    pub name: String,
    pub path: PathBuf,
    pub text: Arc<String>,
    /// Where each line starts, found on the first `line_col`: a fleet's diagnostics and
    /// template guards ask for many locations in one large file.
    line_starts: std::sync::OnceLock<Vec<usize>>,
    /// The text with its secrets masked (see [`Sources::mask`]), what a diagnostic's excerpt
    /// shows; `None` while the file holds none.
    shown: Option<Arc<String>>,
}

/// All files read during one build: spec files and inventory files.
#[derive(Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
    /// Paths under this directory are shown relative to it (the CLI passes the working
    /// directory), so that diagnostics and provenance do not depend on the checkout's location.
    base: Option<PathBuf>,
    /// What opens the spec's encrypted secret files (`--secrets-key`), when given.
    secret_keys: Option<Arc<Vec<bell_seal::at_rest::Identity>>>,
    /// The encrypted files the spec read, each with the sha256 of its bytes: inputs of the build
    /// like the spec's text, never shown (they are not text, and what they hold is secret).
    encrypted: Vec<(PathBuf, String)>,
    /// Where each secret that came from an encrypted file was named (the `file=` entry), with
    /// that file as the spec wrote it: what explain and query show in the secret's place.
    secret_origins: Vec<(Span, String)>,
    /// Whether an encrypted file no key was given for stands in as a placeholder instead of
    /// failing: for what reads a spec without building it (explain, query), so that a reviewer
    /// who holds no key can still read everything else.
    review_without_secrets: bool,
}

/// What stands for a secret a review did not open: never a valid value of any secret field
/// (no crypt hash, and a build never renders it: only readers that build nothing allow it).
pub const UNOPENED_SECRET: &str = "<secret not opened: no --secrets-key>";

impl Sources {
    pub fn new() -> Sources {
        Sources::default()
    }

    pub fn with_base(base: PathBuf) -> Sources {
        Sources {
            base: Some(base),
            ..Sources::default()
        }
    }

    /// Lets the spec's encrypted secret files be opened with `keys` (`--secrets-key`).
    pub fn open_secrets_with(&mut self, keys: Vec<bell_seal::at_rest::Identity>) {
        self.secret_keys = Some(Arc::new(keys));
    }

    /// Lets a spec whose encrypted files no key opens be read without them (see
    /// [`UNOPENED_SECRET`]); only for commands that render nothing.
    pub fn review_without_secrets(&mut self) {
        self.review_without_secrets = true;
    }

    /// Whether [`Sources::review_without_secrets`] was asked for.
    pub fn reviews_without_secrets(&self) -> bool {
        self.review_without_secrets
    }

    /// Records that the secret named at `at` came from the encrypted file `shown`.
    pub fn add_secret_origin(&mut self, at: Span, shown: &str) {
        self.secret_origins.push((at, shown.to_string()));
    }

    /// The encrypted file the secret named at `at` came from, as the spec wrote it.
    pub fn secret_origin(&self, at: Span) -> Option<&str> {
        self.secret_origins
            .iter()
            .find(|(span, _)| *span == at)
            .map(|(_, shown)| shown.as_str())
    }

    /// What opens the spec's encrypted secret files, if anything was given.
    pub fn secret_keys(&self) -> Option<&[bell_seal::at_rest::Identity]> {
        self.secret_keys.as_deref().map(Vec::as_slice)
    }

    /// Records an encrypted file the spec read (`path`, the sha256 of its bytes).
    pub fn add_encrypted(&mut self, path: &Path, sha256: String) {
        self.encrypted.push((path.to_path_buf(), sha256));
    }

    /// The encrypted files the spec read, each with the sha256 of its bytes.
    pub fn encrypted(&self) -> &[(PathBuf, String)] {
        &self.encrypted
    }

    pub fn add(&mut self, path: &Path, text: String) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: display_name(path, self.base.as_deref()),
            path: path.to_path_buf(),
            text: Arc::new(text),
            line_starts: std::sync::OnceLock::new(),
            shown: None,
        });
        id
    }

    /// Marks the byte ranges of a file that hold secrets: every diagnostic's excerpt shows the
    /// file with them masked (each byte but line breaks a `*`, so that offsets, lines and
    /// labels stay where they were), as a build's output lands in CI logs.
    pub fn mask(&mut self, id: FileId, secrets: &[std::ops::Range<usize>]) {
        if secrets.is_empty() {
            return;
        }
        let file = &mut self.files[id.0 as usize];
        let text = file.shown.as_deref().unwrap_or(&file.text);
        file.shown = Some(Arc::new(masked(text, secrets)));
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &SourceFile> {
        self.files.iter()
    }

    pub fn find(&self, path: &Path) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.path == path)
            .map(|i| FileId(i as u32))
    }

    pub fn named_source(&self, id: FileId) -> NamedSource<Arc<String>> {
        let file = self.get(id);
        NamedSource::new(
            file.name.clone(),
            file.shown.clone().unwrap_or_else(|| file.text.clone()),
        )
    }

    /// 1-based line and column of a span's start, for `file:line:col` locations.
    pub fn line_col(&self, span: Span) -> (usize, usize) {
        let file = self.get(span.file);
        let text = &file.text;
        let starts = file.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        let offset = span.offset.min(text.len());
        let line = starts.partition_point(|&start| start <= offset);
        let start = starts[line - 1];
        let col = text.get(start..offset).map_or(0, |s| s.chars().count()) + 1;
        (line, col)
    }

    /// `file:line:col` of a span.
    pub fn location(&self, span: Span) -> String {
        let (line, col) = self.line_col(span);
        format!("{}:{}:{}", self.get(span.file).name, line, col)
    }

    /// `file:line` of a span, as `bellc explain` prints provenance.
    pub fn file_line(&self, span: Span) -> String {
        let (line, _) = self.line_col(span);
        format!("{}:{}", self.get(span.file).name, line)
    }

    /// The text a span covers.
    pub fn slice(&self, span: Span) -> &str {
        let text = &self.get(span.file).text;
        text.get(span.offset..span.offset + span.len).unwrap_or("")
    }
}

/// `text` with every byte of `ranges` but line breaks turned into `*`: the same length, each
/// line where it was.
fn masked(text: &str, ranges: &[std::ops::Range<usize>]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for range in ranges {
        for b in bytes.get_mut(range.clone()).into_iter().flatten() {
            if *b != b'\n' && *b != b'\r' {
                *b = b'*';
            }
        }
    }
    // A range that split a multibyte character leaves a stray byte: shown as U+FFFD.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn display_name(path: &Path, base: Option<&Path>) -> String {
    match base.and_then(|b| path.strip_prefix(b).ok()) {
        Some(rel) => rel.display().to_string(),
        None => path.display().to_string(),
    }
}

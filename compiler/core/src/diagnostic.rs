//! The common shape of every user-facing error and warning.
//!
//! Each stage has its own error enum (`LoadError`, `LowerError`, `ResolveError`, ...). They all
//! implement `SpecDiagnostic`, which adds the one thing miette does not know: which source file
//! the labelled span points into. Stages collect diagnostics instead of stopping at the first
//! one, and the CLI attaches the source text when it prints them.

use crate::source::{FileId, Sources};
use miette::{Diagnostic, Report, Severity};

pub trait SpecDiagnostic: Diagnostic + Send + Sync + std::any::Any {
    /// The file the labels point into, when the diagnostic points into one.
    fn file(&self) -> Option<FileId>;
}

impl dyn SpecDiagnostic {
    /// The diagnostic as the stage's own error type, to match it by variant: a diagnostic is
    /// picked by what it is, never by the text of its code.
    pub fn downcast_ref<T: SpecDiagnostic>(&self) -> Option<&T> {
        (self as &dyn std::any::Any).downcast_ref()
    }
}

/// What is wrong with a value, for a diagnostic: a one-line message and a help line teaching
/// the fix. The value checks (`front::validate`, the kinds' name and field checks) return it; the
/// stage that found the value adds the span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub message: String,
    pub help: String,
}

/// Diagnostics collected by one or more stages, in the order they were found.
#[derive(Default)]
pub struct Diagnostics {
    items: Vec<Box<dyn SpecDiagnostic>>,
}

impl std::fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.items.iter().map(|d| d.to_string()))
            .finish()
    }
}

impl Diagnostics {
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    pub fn push(&mut self, diagnostic: impl SpecDiagnostic) {
        self.items.push(Box::new(diagnostic));
    }

    pub fn push_boxed(&mut self, diagnostic: Box<dyn SpecDiagnostic>) {
        self.items.push(diagnostic);
    }

    pub fn into_boxed(self) -> Vec<Box<dyn SpecDiagnostic>> {
        self.items
    }

    pub fn append(&mut self, mut other: Diagnostics) {
        self.items.append(&mut other.items);
    }

    /// Orders diagnostics by file and position (stable, so that diagnostics at one place keep
    /// the order the stages found them in): a user reads them top to bottom.
    pub fn sort(&mut self) {
        self.items.sort_by_key(|d| {
            let offset = d
                .labels()
                .and_then(|mut l| l.next())
                .map_or(usize::MAX, |l| l.offset());
            (d.file().map_or(u32::MAX, |f| f.0), offset)
        });
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &dyn SpecDiagnostic> {
        self.items.iter().map(|d| d.as_ref())
    }

    pub fn error_count(&self) -> usize {
        self.iter().filter(|d| is_error(*d)).count()
    }

    pub fn warning_count(&self) -> usize {
        self.len() - self.error_count()
    }

    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// miette reports with the source text attached, ready to print.
    pub fn into_reports(self, sources: &Sources) -> Vec<Report> {
        self.items
            .into_iter()
            .map(|d| {
                let file = d.file();
                let report = Report::new_boxed(d);
                match file {
                    Some(file) => report.with_source_code(sources.named_source(file)),
                    None => report,
                }
            })
            .collect()
    }

    /// One line per diagnostic, `file:line:col: severity[code]: message`, for tests.
    pub fn to_short_lines(&self, sources: &Sources) -> Vec<String> {
        self.to_short(sources)
            .into_iter()
            .map(|(line, _)| line)
            .collect()
    }

    /// `--short`: the line of [`Diagnostics::to_short_lines`] and the help line, which holds
    /// the fix (a did-you-mean) and so is never dropped.
    pub fn to_short(&self, sources: &Sources) -> Vec<(String, Option<String>)> {
        self.iter()
            .map(|d| {
                let help = d.help().map(|h| h.to_string());
                let severity = if is_error(d) { "error" } else { "warning" };
                let code = d.code().map(|c| c.to_string()).unwrap_or_default();
                let location = match (d.file(), d.labels().and_then(|mut l| l.next())) {
                    (Some(file), Some(label)) => {
                        let span = crate::source::Span::new(file, *label.inner());
                        format!("{}: ", sources.location(span))
                    }
                    (Some(file), None) => format!("{}: ", sources.get(file).name),
                    _ => String::new(),
                };
                (format!("{location}{severity}[{code}]: {d}"), help)
            })
            .collect()
    }
}

/// A diagnostic that the same spec line gives on several hosts (a template that reads a label
/// some hosts lack), reported once with the hosts it affects.
pub struct OnHosts {
    inner: Box<dyn SpecDiagnostic>,
    hosts: String,
}

impl OnHosts {
    /// `hosts` in the order given; more than five are counted, not listed.
    pub fn new(inner: Box<dyn SpecDiagnostic>, hosts: &[&str]) -> OnHosts {
        let shown: Vec<String> = hosts.iter().take(5).map(|h| format!("`{h}`")).collect();
        let hosts = match hosts.len() {
            1 => format!("on host {}", shown[0]),
            n if n <= 5 => format!("on hosts {}", shown.join(", ")),
            n => format!("on {n} hosts: {}, …", shown.join(", ")),
        };
        OnHosts { inner, hosts }
    }

    /// The diagnostic it names the hosts of.
    pub fn inner(&self) -> &dyn SpecDiagnostic {
        self.inner.as_ref()
    }
}

impl std::fmt::Debug for OnHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for OnHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.inner, self.hosts)
    }
}

impl std::error::Error for OnHosts {}

impl Diagnostic for OnHosts {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.inner.code()
    }
    fn severity(&self) -> Option<Severity> {
        self.inner.severity()
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.inner.help()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.inner.labels()
    }
}

impl SpecDiagnostic for OnHosts {
    fn file(&self) -> Option<FileId> {
        self.inner.file()
    }
}

pub fn is_error(d: &dyn SpecDiagnostic) -> bool {
    !matches!(
        d.severity(),
        Some(Severity::Warning) | Some(Severity::Advice)
    )
}

/// Implements `SpecDiagnostic` for a stage's error enum whose every variant has a `file` field.
#[macro_export]
macro_rules! spec_diagnostic {
    ($ty:ty) => {
        impl $crate::diagnostic::SpecDiagnostic for $ty {
            fn file(&self) -> Option<$crate::source::FileId> {
                self.file_id()
            }
        }
    };
}

/// A diagnostic as plain data: what a skipped rebuild prints again of the build it skips
/// (`emit::incremental` keeps the last build's warnings), rendered as the original was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plain {
    pub file: Option<FileId>,
    pub code: Option<String>,
    pub message: String,
    pub help: Option<String>,
    pub severity: Severity,
    pub labels: Vec<PlainLabel>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainLabel {
    pub text: Option<String>,
    pub offset: usize,
    pub len: usize,
    pub primary: bool,
}

impl Plain {
    pub fn of(d: &dyn SpecDiagnostic) -> Plain {
        Plain {
            file: d.file(),
            code: d.code().map(|c| c.to_string()),
            message: d.to_string(),
            help: d.help().map(|h| h.to_string()),
            severity: d.severity().unwrap_or(Severity::Error),
            labels: d
                .labels()
                .map(|labels| {
                    labels
                        .map(|l| PlainLabel {
                            text: l.label().map(str::to_string),
                            offset: l.offset(),
                            len: l.len(),
                            primary: l.primary(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Plain {}

impl Diagnostic for Plain {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.code
            .as_ref()
            .map(|c| Box::new(c) as Box<dyn std::fmt::Display>)
    }
    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().map(|l| {
            let span = (l.offset, l.len);
            if l.primary {
                miette::LabeledSpan::new_primary_with_span(l.text.clone(), span)
            } else {
                miette::LabeledSpan::new_with_span(l.text.clone(), span)
            }
        })))
    }
}

impl SpecDiagnostic for Plain {
    fn file(&self) -> Option<FileId> {
        self.file
    }
}

//! `apparmor`: a profile in the target's apparmor.d, loaded in enforce or complain mode.
//!
//! apparmor: a profile file in the target's apparmor directory, loaded now by the apply and at
//! boot by the distribution's apparmor service. The profile names and attachments a profile
//! declares are read from its header lines at build time: two profiles claiming one name or one
//! executable are refused, and the names are what the revert unloads.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::graph::resources::Implied;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, RenderError, Renderer,
};
use crate::resolve::Model;
use crate::source::{Sources, Span};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use crate::spec::{Kind, Spec, Value};
use crate::targets::TargetPath;
use minijinja::context;
use std::collections::BTreeMap;

pub struct Apparmor;

impl ResourceKind for Apparmor {
    fn keyword(&self) -> &'static str {
        "apparmor"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("mode", Prop, Enum(&["enforce", "complain"]), false),
            FieldSchema::new("profile", ChildArg, Str, true).checked(declares_a_profile),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::apparmor_profile_name(name)
    }

    fn check_model(&self, model: &Model, sources: &Sources, diags: &mut Diagnostics) {
        clashes(model, sources, diags);
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::APPARMOR])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        // Clashes were reported in the first pass (`check_model`); nothing is rendered for them.
        let clashed = clashes(&cx.host.model, cx.sources, &mut Diagnostics::new());
        for a in cx.host.model.of_kind(Kind::APPARMOR) {
            let Some(profile) = a.str("profile") else {
                continue;
            };
            let found = headers(profile);
            // A text without one was reported where it was written (`declares_a_profile`).
            if found.is_empty() || clashed.contains(&a.key()) {
                continue;
            }
            let mode = a.str("mode").unwrap_or("enforce");
            let path = format!("{}/{}", cx.target.path(&APPARMOR_DIR), a.name);
            let mut text = profile.to_string();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            let profile_hash = bell_bundle::sha256_hex(text.as_bytes());
            if let Err(first) =
                out.add_file(NewFile::root_owned(path.clone(), text, 0o644), &a.key())
            {
                diags.push(RenderError::PathConflict {
                    path: path.clone(),
                    first,
                    second: a.key(),
                    span: a.origin.span.source_span(),
                    help: "choose another profile name".into(),
                    file: a.origin.span.file,
                });
                continue;
            }
            let profiles: Vec<&str> = found.iter().map(|h| h.name.as_str()).collect();
            let ctx = context! { path, profile_hash, mode, profiles };
            let scripts = ["apply", "revert", "check"].map(|role| {
                common::script(
                    r,
                    "apparmor",
                    &a.name,
                    role,
                    &format!("apparmor/{role}.sh.j2"),
                    ctx.clone(),
                )
            });
            match scripts {
                [Ok(apply), Ok(revert), Ok(check)] => {
                    out.add_resource(NewResource {
                        kind: BundleKind::Of(Kind::APPARMOR),
                        name: a.name.clone(),
                        files: vec![path],
                        lines_in: Vec::new(),
                        after: a.list("after").to_vec(),
                        apply: Some(apply),
                        revert: Some(revert),
                        exec: None,
                        check: Some(check),
                    });
                }
                [Err(message), _, _] | [_, Err(message), _] | [_, _, Err(message)] => {
                    common::invalid(diags, a.origin.span, message, "")
                }
            }
        }
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[APPARMOR_DIR]
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[Implied::AfterEvery(
            Kind::PACKAGE,
            super::package::PACKAGES_FIRST,
        )]
    }
}

pub const APPARMOR_DIR: TargetPath = TargetPath {
    key: "apparmor_dir",
    default: "/etc/apparmor.d",
};

/// Two profiles of one host with one name, or confining one executable: reported at the lines
/// of the profile texts. Returns the keys of the resources that clash with an earlier one.
fn clashes(
    model: &Model,
    sources: &Sources,
    diags: &mut Diagnostics,
) -> std::collections::BTreeSet<String> {
    let mut names: BTreeMap<String, (String, Span)> = BTreeMap::new();
    let mut attachments: BTreeMap<String, (String, Span)> = BTreeMap::new();
    let mut clashed = std::collections::BTreeSet::new();
    for a in model.of_kind(Kind::APPARMOR) {
        let Some(profile) = a.str("profile") else {
            continue;
        };
        let field = a.span_of("profile");
        for h in &headers(profile) {
            let at = common::line_in_string(sources, field, h.line);
            let name_clash = names.insert(h.name.clone(), (a.key(), at));
            if let Some((other, first)) = &name_clash {
                clashed.insert(a.key());
                common::clash(
                    diags,
                    format!("profile name `{}` is declared by both `{other}` and `{}`", h.name, a.key()),
                    *first,
                    at,
                    "the kernel keeps one profile per name; the second load would replace the first".into(),
                );
            }
            if let Some(path) = &h.attachment {
                if name_clash.is_some() && path == &h.name {
                    continue;
                }
                if let Some((other, first)) = attachments.insert(path.clone(), (a.key(), at)) {
                    if other != a.key() {
                        clashed.insert(a.key());
                        common::clash(
                            diags,
                            format!("`{path}` is confined by both `{other}` and `{}`", a.key()),
                            first,
                            at,
                            "one profile per executable: remove one, or give one another attachment".into(),
                        );
                    }
                }
            }
        }
    }
    clashed
}

/// The `profile` text declares at least one profile, checked where it is written.
fn declares_a_profile(text: &str) -> Result<(), Invalid> {
    let headers = headers(text);
    if headers.is_empty() {
        return Err(Invalid {
            message: "the profile text declares no profile".into(),
            help: "a profile starts with `/path/to/executable {` or `profile NAME {`".into(),
        });
    }
    if let Some(line) = split_header(text) {
        return Err(Invalid {
            message: format!("a profile header continues past line {line} of the profile"),
            help: "write each profile header on one line, ending in the `{` that opens it".into(),
        });
    }
    // The scripts ask the kernel for each profile by the name read here; apparmor_parser reads
    // `\` as an escape and `=` as the start of an assignment, so a name holding them may name
    // another profile than the one these scripts look for.
    for header in &headers {
        // `{` glued to a word is AppArmor's alternation (`/usr/{bin,sbin}/x`), not the block;
        // bellc reads the header up to the first `{`, so it must open the block.
        let line = text.lines().nth(header.line - 1).unwrap_or("");
        let glued = line
            .find('{')
            .is_some_and(|at| !line[..at].ends_with([' ', '\t']));
        if glued {
            return Err(Invalid {
                message: format!(
                    "the header of profile `{}` (line {} of the profile) has a `{{` inside a word",
                    header.name.escape_debug(),
                    header.line
                ),
                help: "write the header as `profile NAME /path {` or `/path {`, with a blank \
                       before the `{` that opens the profile and no `{` in the name"
                    .into(),
            });
        }
        if let Some(c) = header
            .name
            .chars()
            .find(|c| c.is_control() || matches!(c, '\\' | '=' | '"'))
        {
            return Err(Invalid {
                message: format!(
                    "profile name `{}` (line {} of the profile) holds {}",
                    header.name.escape_debug(),
                    header.line,
                    crate::front::validate::show_char(c)
                ),
                help: "name profiles with letters, digits, `-_./`, and `*?[]` in attachments"
                    .into(),
            });
        }
    }
    Ok(())
}

/// A top-level profile declared by a profile file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    /// The executable path (or glob) the profile attaches to, when it has one.
    pub attachment: Option<String>,
    /// 1-based line of the header inside the profile text.
    pub line: usize,
}

/// Reads the top-level profile headers: `/path {`, `/path flags=(...) {`,
/// `profile NAME [/path] [flags=(...)] {`. Nested blocks (hats, child profiles) are skipped.
/// This is deliberately a simple reader: apparmor_parser (`bellc check --strict`) is the judge
/// of the full syntax.
pub fn headers(text: &str) -> Vec<Header> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        // A header opens a block, which may close on the same line (`profile x {}`).
        if let Some(open) = line.find('{').filter(|_| depth == 0) {
            let words = words(&line[..open]);
            let words: Vec<&str> = words
                .iter()
                .map(String::as_str)
                .take_while(|w| !w.starts_with("flags") && !w.starts_with("xattrs") && *w != "=")
                .collect();
            let header = match words.as_slice() {
                ["profile", name, rest @ ..] => Some(Header {
                    name: name.to_string(),
                    attachment: rest
                        .first()
                        .filter(|a| a.starts_with(['/', '@']))
                        .map(|a| a.to_string()),
                    line: i + 1,
                }),
                [attach, ..] if attach.starts_with(['/', '@']) => Some(Header {
                    name: attach.to_string(),
                    attachment: Some(attach.to_string()),
                    line: i + 1,
                }),
                _ => None,
            };
            out.extend(header);
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    out
}

/// The line of a top-level profile header that does not open its block on the same line
/// (apparmor_parser reads a newline as a blank; `headers` reads line by line).
fn split_header(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        let header_like = line.starts_with("profile") && line[7..].starts_with([' ', '\t'])
            || line.starts_with('/')
            || (line.starts_with('@') && !line.contains('='))
            || line == "profile";
        if depth == 0 && header_like && !line.contains('{') {
            return Some(i + 1);
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    None
}

/// A line without its comment; `#include` is a directive, not a comment.
fn strip_comment(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("#include") {
        return "";
    }
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Whitespace-separated words, a double-quoted word kept whole (without its quotes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_quote = false;
    for c in line.chars() {
        match c {
            '"' => in_quote = !in_quote,
            // apparmor_parser separates words by blanks only; any other space is part of a word
            // (and refused in a name by `declares_a_profile`).
            ' ' | '\t' if !in_quote => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// `bellc check --strict`: compiles every AppArmor profile of the spec (each declaration once,
/// whatever host gets it) with the build machine's `apparmor_parser`, without loading it, and
/// reports its errors at the line of the spec. Runs a process, so only the CLI calls it.
/// Returns how many profiles were checked, or why the check could not run.
pub fn check_profiles_with_parser(
    spec: &Spec,
    sources: &Sources,
    diags: &mut Diagnostics,
) -> Result<usize, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let layers = std::iter::once(&spec.base).chain(spec.overrides.iter().map(|o| &o.layer));
    let mut checked = 0;
    for decl in layers
        .flat_map(|l| &l.resources)
        .filter(|d| d.kind == Kind::APPARMOR)
    {
        let Some(field) = decl.fields.get("profile") else {
            continue;
        };
        let Value::Str(text) = &field.value else {
            continue;
        };
        let mut child = Command::new("apparmor_parser")
            .args(["--skip-kernel-load", "--skip-cache", "-Q", "-K"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run `apparmor_parser` (package `apparmor`): {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A parser that exits early closes its stdin; its exit status tells what happened.
            let _ = stdin.write_all(text.as_bytes());
        }
        let output = child
            .wait_with_output()
            .map_err(|e| format!("`apparmor_parser` failed to run: {e}"))?;
        checked += 1;
        if output.status.success() {
            continue;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let error = stderr
            .lines()
            .find(|l| l.contains("error"))
            .or_else(|| stderr.lines().last())
            .unwrap_or("apparmor_parser rejected the profile")
            .trim();
        let line = error
            .split_once(" at line ")
            .and_then(|(_, rest)| rest.split(':').next())
            .and_then(|n| n.trim().parse::<usize>().ok());
        let span = match line {
            Some(line) => common::line_in_string(sources, field.span, line),
            None => field.span,
        };
        let message = match error.split_once(": ") {
            Some((_, reason)) if line.is_some() => reason.to_string(),
            _ => error.to_string(),
        };
        diags.push(RenderError::Invalid {
            message: format!("apparmor_parser rejects profile `{}`: {message}", decl.name),
            span: span.source_span(),
            help: "see apparmor.d(5); `apparmor_parser -Q -K FILE` reproduces this".into(),
            file: span.file,
        });
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::headers;

    #[test]
    fn reads_top_level_headers_only() {
        let text = "#include <tunables/global>\n# /not/a/profile {\n/usr/bin/a flags=(complain) {\n  ^hat {\n  }\n  profile child {\n  }\n}\nprofile \"b c\" /usr/bin/b {\n}\nprofile d {\n}\n";
        let h = headers(text);
        let got: Vec<_> = h
            .iter()
            .map(|h| (h.name.as_str(), h.attachment.as_deref(), h.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/usr/bin/a", Some("/usr/bin/a"), 3),
                ("b c", Some("/usr/bin/b"), 9),
                ("d", None, 11)
            ]
        );
    }

    #[test]
    fn a_block_closed_on_the_header_line_is_a_profile() {
        let h = headers(
            "profile x {}
profile y { capability setgid, }
/usr/bin/z {
}
",
        );
        let names: Vec<_> = h.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "/usr/bin/z"]);
    }
}

//! `package`: an apt package at a version (or absent), with its debconf answers.
//!
//! package, apt, apt-source: pinned apt packages with their debconf answers, apt-wide
//! settings, and bell-owned apt sources.
//!
//! - `package`: the apply records once whether the package was there before bell, sets the
//!   debconf answers (a managed seed file in the target's `debconf_dir`) before installing,
//!   installs `NAME=VERSION` only when dpkg reports another version (so an unchanged re-apply
//!   never touches the package, unlike Divingbell, which purged on re-run), and reads the
//!   version back. The revert removes the package only when bell installed it. `absent=#true`
//!   purges when present and never installs.
//! - `apt`: `allow-downgrade` is passed to every install; `upgrade=#true` is a resource of its
//!   own that upgrades when it is applied.
//! - `apt-source`: a deb822 `bell-NAME.sources` file and its `bell-NAME.asc` keyring, both
//!   managed files; other sources and keyrings are never touched. A trigger on those
//!   directories runs `apt-get update` after the file switch, before packages are applied.
//!
//! Offline (`BELL_OFFLINE=1`, baking an image), packages cannot be installed or purged: the
//! apply succeeds when the image's dpkg database already matches the spec and fails with a
//! one-line reason otherwise. Source files are written either way; the update trigger does
//! nothing offline.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::graph::resources::Implied;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, RenderError, Renderer,
};
use crate::resolve::{Model, ResolvedResource};
use crate::source::Span;
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use crate::targets::TargetPath;
use minijinja::context;

pub struct Package;

impl ResourceKind for Package {
    fn keyword(&self) -> &'static str {
        "package"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("version", Prop, Str, false).checked(validate::apt_version),
            FieldSchema::new("absent", Prop, Bool, false),
            FieldSchema::new("debconf", DebconfChildren, DebconfList, false),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::apt_package_name(name)
    }

    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        for pkg in model.of_kind(Kind::PACKAGE) {
            if let Some(mistake) = package_mistake(pkg) {
                diags.push(mistake);
            }
        }
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::PACKAGE, Kind::APT, Kind::APT_SOURCE])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let model = &cx.host.model;
        let apt = model.of_kind(Kind::APT).next();
        let allow_downgrade = apt.and_then(|a| a.bool("allow-downgrade")).unwrap_or(false);

        let mut source_keys = Vec::new();
        // Every source file, and the snapshots of the pinned ones, for `apt upgrade`.
        let mut source_files = Vec::new();
        let mut snapshots = Vec::new();
        for source in model.of_kind(Kind::APT_SOURCE) {
            let key = source.key();
            let name = source.name.as_str();
            // Checked where they were written (`validate::apt_suites`, `apt_words`): at least
            // one suite, words on one line.
            let words = |field: &str| -> Vec<&str> {
                source
                    .str(field)
                    .unwrap_or_default()
                    .split_whitespace()
                    .collect()
            };
            let (suites, components) = (words("suites"), words("components"));
            let mut files = Vec::new();
            let keyring = source
                .str("key")
                .map(|_| format!("{}/bell-{name}.asc", cx.target.path(&APT_KEYRING_DIR)));
            if let (Some(path), Some(key_text)) = (&keyring, source.str("key")) {
                let mut text = key_text.trim().to_string();
                text.push('\n');
                if let Err(first) = out.add_file(NewFile::root_owned(path, text, 0o644), &key) {
                    diags.push(conflict(
                        source.span_of("key"),
                        path.clone(),
                        first,
                        key.clone(),
                    ));
                    continue;
                }
                files.push(path.clone());
            }
            let snapshot = source.str("snapshot");
            let url = source.str("url").unwrap_or_default();
            // `check_model` holds a snapshot and the placeholder together.
            let url = match snapshot {
                Some(snapshot) => url.replace(validate::SNAPSHOT_PLACEHOLDER, snapshot),
                None => url.to_string(),
            };
            let text = r.stdlib(
                "apt-source/source.sources.j2",
                context! { name, url, suites, components, keyring, snapshot },
            );
            let text = match text {
                Ok(text) => text,
                Err(message) => {
                    diags.push(invalid(
                        source.span_of("url"),
                        message,
                        "a deb822 field must fit on one line",
                    ));
                    continue;
                }
            };
            let path = format!("{}/bell-{name}.sources", cx.target.path(&APT_SOURCES_DIR));
            if let Err(first) = out.add_file(NewFile::root_owned(&path, text, 0o644), &key) {
                diags.push(conflict(source.origin.span, path, first, key.clone()));
                continue;
            }
            source_files.push(path.clone());
            files.insert(0, path);
            if let Some(snapshot) = snapshot {
                out.add_snapshot(name, snapshot);
                snapshots.push((name, snapshot));
            }
            out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::APT_SOURCE),
                name: name.to_string(),
                files,
                lines_in: Vec::new(),
                after: source.list("after").to_vec(),
                apply: None,
                revert: None,
                exec: None,
                check: None,
            });
            source_keys.push(key);
        }
        // With a snapshot pinned, apt reads only the release's sources (`apt/release-sources`).
        let pinned_sources = match snapshots.is_empty() {
            true => Vec::new(),
            false => source_files.clone(),
        };
        if !source_keys.is_empty() {
            match r.stdlib("apt-source/update.sh.j2", context! { pinned_sources }) {
                Ok(script) => out.add_trigger(
                    "apt-update",
                    vec![
                        format!("{}/", cx.target.path(&APT_SOURCES_DIR)),
                        format!("{}/", cx.target.path(&APT_KEYRING_DIR)),
                    ],
                    script,
                ),
                Err(message) => {
                    if let Some(first) = model.of_kind(Kind::APT_SOURCE).next() {
                        diags.push(common::template_error(first, message));
                    }
                }
            }
        }

        if let Some(apt) = apt.filter(|a| a.bool("upgrade") == Some(true)) {
            match r.stdlib(
                "apt/upgrade.sh.j2",
                context! {
                    kind => "apt", name => "upgrade", role => "apply", allow_downgrade,
                    snapshots, pinned_sources,
                },
            ) {
                Ok(apply) => out.add_resource(NewResource {
                    kind: BundleKind::Of(Kind::APT),
                    name: "upgrade".into(),
                    files: Vec::new(),
                    lines_in: Vec::new(),
                    after: source_keys.clone(),
                    apply: Some(apply),
                    revert: None,
                    exec: None,
                    check: None,
                }),
                Err(message) => diags.push(common::template_error(apt, message)),
            }
        }

        for pkg in model.of_kind(Kind::PACKAGE) {
            render_package(r, cx, out, diags, pkg, allow_downgrade, &pinned_sources);
        }
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[APT_SOURCES_DIR, APT_KEYRING_DIR, DEBCONF_DIR]
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[Implied::AfterEvery(
            Kind::APT_SOURCE,
            super::apt_source::SOURCES_FIRST,
        )]
    }
}

pub const APT_SOURCES_DIR: TargetPath = TargetPath {
    key: "apt_sources_dir",
    default: "/etc/apt/sources.list.d",
};
pub const APT_KEYRING_DIR: TargetPath = TargetPath {
    key: "apt_keyring_dir",
    default: "/etc/apt/keyrings",
};
/// Where debconf answers are staged for `debconf-set-selections` (bell's own state).
pub const DEBCONF_DIR: TargetPath = TargetPath {
    key: "debconf_dir",
    default: "/var/lib/bell/debconf",
};

pub(super) fn invalid(span: Span, message: String, help: &str) -> RenderError {
    RenderError::Invalid {
        message,
        span: span.source_span(),
        help: help.into(),
        file: span.file,
    }
}

fn conflict(span: Span, path: String, first: String, second: String) -> RenderError {
    RenderError::PathConflict {
        path,
        first,
        second,
        span: span.source_span(),
        help: "two resources cannot write the same file".into(),
        file: span.file,
    }
}

/// What is wrong with one package declaration on its own: `absent` with a version or answers,
/// a debconf question that is not one word, an answer that is not one trimmed line.
fn package_mistake(pkg: &ResolvedResource) -> Option<RenderError> {
    let key = pkg.key();
    let answers = pkg.debconf();
    if pkg.bool("absent").unwrap_or(false) && (pkg.str("version").is_some() || !answers.is_empty())
    {
        let field = if pkg.str("version").is_some() {
            "version"
        } else {
            "debconf"
        };
        return Some(invalid(
            pkg.span_of(field),
            format!("`{key}` is `absent=#true` and also sets `{field}`"),
            "an absent package is never installed; drop `absent` or the other property",
        ));
    }
    if let Some(bad) = answers.iter().find(|d| !is_question(&d.question)) {
        return Some(invalid(
            pkg.span_of("debconf"),
            if bad.question.contains(char::is_whitespace) {
                format!(
                    "debconf question `{}` of `{key}` holds whitespace",
                    bad.question.escape_debug()
                )
            } else {
                format!(
                    "`{}` is not a debconf question name (in `{key}`)",
                    bad.question.escape_debug()
                )
            },
            "a debconf question is named `OWNER/NAME` in letters, digits and `-._+:/`, as the \
             package's templates name it, such as \"openssh-server/permit-root-login\"",
        ));
    }
    // debconf-set-selections joins a line ending in `\` to the next one.
    if let Some(bad) = answers.iter().find(|d| d.value.ends_with('\\')) {
        return Some(invalid(
            pkg.span_of("debconf"),
            format!(
                "the debconf answer to `{}` ends with `\\`",
                bad.question.escape_debug()
            ),
            "debconf-set-selections reads a line ending in `\\` as continued on the next line, \
             so the answer cannot end with one",
        ));
    }
    if let Some(bad) = answers
        .iter()
        .find(|d| crate::escape::config_field(&d.value).is_err())
    {
        return Some(invalid(
            pkg.span_of("debconf"),
            format!(
                "the debconf answer to `{}` starts or ends with whitespace or holds a control character",
                bad.question.escape_debug()
            ),
            "debconf-set-selections reads one trimmed answer per line",
        ));
    }
    None
}

/// A debconf question name as templates have them: `OWNER/NAME`. debconf's own reader takes the
/// name `0` for none at all (Perl's false), and its database is a line-based file, so bellc
/// holds names to the characters packages use.
fn is_question(s: &str) -> bool {
    let allowed =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '+' | ':' | '/');
    s.split_once('/')
        .is_some_and(|(owner, name)| !owner.is_empty() && !name.is_empty())
        && !s.ends_with('/')
        && !s.contains("//")
        && s.chars().all(allowed)
}

fn render_package(
    r: &Renderer,
    cx: &HostContext,
    out: &mut BundleBuilder,
    diags: &mut Diagnostics,
    pkg: &ResolvedResource,
    allow_downgrade: bool,
    pinned_sources: &[String],
) {
    let key = pkg.key();
    let name = pkg.name.as_str();
    let absent = pkg.bool("absent").unwrap_or(false);
    let answers = pkg.debconf();
    // Reported in the first pass (`check_model`); nothing is rendered from such a package.
    if package_mistake(pkg).is_some() {
        return;
    }
    let mut files = Vec::new();
    let mut seed = String::new();
    if !answers.is_empty() {
        for answer in answers.iter().filter(|a| a.kind == "password") {
            out.secret_value(&answer.value);
        }
        let rows: Vec<_> = answers
            .iter()
            .map(|d| context! { question => d.question, kind => d.kind, value => d.value })
            .collect();
        let text = match r.stdlib(
            "package/debconf.seed.j2",
            context! { pkg => name, answers => rows },
        ) {
            Ok(text) => text,
            Err(message) => {
                diags.push(common::template_error(pkg, message));
                return;
            }
        };
        seed = format!("{}/{name}.seed", cx.target.path(&DEBCONF_DIR));
        // Answers may hold passwords: readable by root only.
        if let Err(first) = out.add_file(NewFile::root_owned(&seed, text, 0o600), &key) {
            diags.push(conflict(pkg.span_of("debconf"), seed, first, key));
            return;
        }
        files.push(seed.clone());
    }
    let version = pkg.str("version").unwrap_or_default();
    let apply = r.stdlib(
        "package/apply.sh.j2",
        context! {
            kind => "package", name, role => "apply",
            version, absent, allow_downgrade, seed, pinned_sources,
        },
    );
    let revert = r.stdlib(
        "package/revert.sh.j2",
        context! { kind => "package", name, role => "revert", absent, pinned_sources },
    );
    let check = r.stdlib(
        "package/check.sh.j2",
        // A check reads dpkg's database and never runs apt: no sources to pin.
        context! {
            kind => "package", name, role => "check", version, absent,
            pinned_sources => Vec::<String>::new(),
        },
    );
    match (apply, revert, check) {
        (Ok(apply), Ok(revert), Ok(check)) => {
            out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::PACKAGE),
                name: name.to_string(),
                files,
                lines_in: Vec::new(),
                after: pkg.list("after").to_vec(),
                apply: Some(apply),
                revert: Some(revert),
                exec: None,
                check: Some(check),
            });
        }
        (Err(message), _, _) | (_, Err(message), _) | (_, _, Err(message)) => {
            diags.push(common::template_error(pkg, message))
        }
    }
}

/// Why what depends on this kind comes after it (see `Implied::AfterEvery`).
pub const PACKAGES_FIRST: crate::graph::resources::Reason = crate::graph::resources::Reason::Rule(
    "packages are installed before the files, units, profiles and scripts of their host",
);

//! `apt-source`: a deb822 source with its signing key, both bell-owned files.
//!
//! `snapshot="ID"` pins the source to a repository snapshot: the id is filled into the url's
//! `{snapshot}` (the only spelling, so the url shows where it goes), the bundle's manifest
//! and the release record it per source, and `apt upgrade=#true` then upgrades from the
//! release's own sources only (`package`).

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::resolve::Model;
use crate::source::Sources;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*, Kind};

pub struct AptSource;

impl ResourceKind for AptSource {
    fn keyword(&self) -> &'static str {
        "apt-source"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("url", Prop, Str, true).checked(validate::apt_url),
            FieldSchema::new("suites", Prop, Str, true).checked(validate::apt_suites),
            FieldSchema::new("components", Prop, Str, false).checked(validate::apt_words),
            FieldSchema::new("snapshot", Prop, Str, false).checked(validate::apt_snapshot),
            FieldSchema::new("key", ChildArg, Str, false).checked(validate::pgp_public_key),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::source_name(name)
    }

    /// apt reads a suite ending in `/` as an exact path, which takes no components, and any other
    /// suite only with components; a source that mixes them, or lacks them, apt refuses whole.
    fn check_model(&self, model: &Model, _: &Sources, diags: &mut Diagnostics) {
        for source in model.of_kind(Kind::APT_SOURCE) {
            let suites = source.str("suites").unwrap_or("");
            let components = source.str("components").unwrap_or("");
            let exact = suites
                .split_whitespace()
                .filter(|s| s.ends_with('/'))
                .count();
            let named = suites.split_whitespace().count() - exact;
            let has_components = components.split_whitespace().next().is_some();
            let mistake = if exact > 0 && named > 0 {
                Some((
                    "suites",
                    format!(
                        "`{}` mixes exact paths (ending in `/`) with suite names",
                        source.key()
                    ),
                    "apt reads a suite ending in `/` as a path under the url without components; \
                     declare such a path as an `apt-source` of its own",
                ))
            } else if exact > 0 && has_components {
                Some((
                    "components",
                    format!(
                        "`{}` has components, but its suite is an exact path",
                        source.key()
                    ),
                    "a suite ending in `/` takes no components: drop `components`, or name the \
                     suite without the `/`",
                ))
            } else if named > 0 && !has_components {
                Some((
                    "suites",
                    format!("`{}` names suites but no components", source.key()),
                    "apt needs the components of a suite, such as `components=\"main\"`; only a \
                     suite ending in `/` (an exact path) takes none",
                ))
            } else {
                None
            };
            if let Some((field, message, help)) = mistake {
                crate::render::common::invalid(diags, source.span_of(field), message, help);
            }
            let placeholder = source
                .str("url")
                .is_some_and(|url| url.contains(validate::SNAPSHOT_PLACEHOLDER));
            match (source.str("snapshot"), placeholder) {
                (Some(_), false) => crate::render::common::invalid(
                    diags,
                    source.span_of("snapshot"),
                    format!("`{}` has a snapshot, but its url has no `{{snapshot}}`", source.key()),
                    "write `{snapshot}` into the url where the archive puts its snapshots, such as \
                     `url=\"http://snapshot.debian.org/archive/debian/{snapshot}\"`",
                ),
                (None, true) => crate::render::common::invalid(
                    diags,
                    source.span_of("url"),
                    format!("the url of `{}` holds `{{snapshot}}`, but no snapshot is given", source.key()),
                    "pin the repository with `snapshot=\"20261120T000000Z\"` (the archive's name for \
                     it), or write the url without `{snapshot}`",
                ),
                _ => {}
            }
        }
    }

    /// Rendered by `package`: apt sources are rendered with the packages (`package`), so that the upgrade step sits between them.
    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[])
    }

    fn render(&self, _: &Renderer, _: &HostContext, _: &mut BundleBuilder, _: &mut Diagnostics) {}

    /// The repository snapshot of every pinned source: what the bundle's manifest records (the
    /// render stage adds each source of the model, or fails), signed with the release.
    fn describe_in_release(&self, model: &Model, host: &mut bell_bundle::ReleaseHost) {
        let snapshots: bell_bundle::Snapshots = model
            .of_kind(Kind::APT_SOURCE)
            .filter_map(|source| Some((source.name.clone(), source.str("snapshot")?.to_string())))
            .collect();
        host.snapshots = std::sync::Arc::new(snapshots);
    }
}

/// Why what depends on this kind comes after it (see `Implied::AfterEvery`).
pub const SOURCES_FIRST: crate::graph::resources::Reason =
    crate::graph::resources::Reason::Rule("apt sources are in place before packages are installed");

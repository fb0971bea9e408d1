//! `apt-source`: a deb822 source with its signing key, both bell-owned files.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

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
            FieldSchema::new("key", ChildArg, Str, false).checked(validate::pgp_public_key),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::source_name(name)
    }

    /// Rendered by `package`: apt sources are rendered with the packages (`package`), so that the upgrade step sits between them.
    fn render(&self, _: &Renderer, _: &HostContext, _: &mut BundleBuilder, _: &mut Diagnostics) {}
}

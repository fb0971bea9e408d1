//! `apt`: the settings of package management on a host (one per host, no name).

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Apt;

impl ResourceKind for Apt {
    fn keyword(&self) -> &'static str {
        "apt"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("upgrade", Prop, Bool, false),
            FieldSchema::new("allow-downgrade", Prop, Bool, false),
        ];
        SCHEMA
    }

    fn is_setting(&self) -> bool {
        true
    }

    /// Rendered by `package`: `apt` settings are read by the `package` kind, which renders the upgrade step between the sources and the packages.
    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[])
    }

    fn render(&self, _: &Renderer, _: &HostContext, _: &mut BundleBuilder, _: &mut Diagnostics) {}
}

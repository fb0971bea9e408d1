//! `users`: the settings of user management on a host (one per host, no name).

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::render::{BundleBuilder, HostContext, Renderer};
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Users;

impl ResourceKind for Users {
    fn keyword(&self) -> &'static str {
        "users"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[FieldSchema::new("purge-expired", Prop, Bool, false)];
        SCHEMA
    }

    fn is_setting(&self) -> bool {
        true
    }

    /// Rendered by `user`: `users` settings are read by the `user` kind when it renders accounts.
    fn render(&self, _: &Renderer, _: &HostContext, _: &mut BundleBuilder, _: &mut Diagnostics) {}
}

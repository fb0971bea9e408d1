//! `users`: the settings of user management on a host (one per host, no name).

use super::ResourceKind;
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
}

//! `apparmor`: a profile in the target's apparmor.d, loaded in enforce or complain mode.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Apparmor;

impl ResourceKind for Apparmor {
    fn keyword(&self) -> &'static str {
        "apparmor"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("mode", Prop, Enum(&["enforce", "complain"]), false),
            FieldSchema::new("profile", ChildArg, Str, true),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::apparmor_profile_name(name)
    }
}

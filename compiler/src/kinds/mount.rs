//! `mount`: a systemd mount unit for a filesystem, named after its target.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Mount;

impl ResourceKind for Mount {
    fn keyword(&self) -> &'static str {
        "mount"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("target", Prop, Str, true).checked(validate::mount_target),
            FieldSchema::new("device", Prop, Str, true),
            FieldSchema::new("type", Prop, Str, true),
            FieldSchema::new("options", Prop, Str, false),
            FieldSchema::new("before", Prop, Str, false),
            FieldSchema::new("after", Prop, Str, false),
            FieldSchema::new("requires", ChildArgs, Strings, false),
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::resource_name(name)
    }
}

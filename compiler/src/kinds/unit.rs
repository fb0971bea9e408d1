//! `unit`: a systemd unit file bell owns, enabled and started as asked.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Unit;

impl ResourceKind for Unit {
    fn keyword(&self) -> &'static str {
        "unit"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("enable", Prop, Bool, false),
            FieldSchema::new("start", Prop, Bool, false),
            FieldSchema::new("content", ChildArg, Str, true),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::systemd_unit_name(name)
    }
}

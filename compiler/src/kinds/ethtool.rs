//! `ethtool`: offload features of one network interface, set at boot by a oneshot unit.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Ethtool;

impl ResourceKind for Ethtool {
    fn keyword(&self) -> &'static str {
        "ethtool"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("settings", AnyChildren, OnOffMap, false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "interface name"
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::interface_name(name)
    }
}

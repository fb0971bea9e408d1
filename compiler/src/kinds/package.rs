//! `package`: an apt package at a version (or absent), with its debconf answers.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

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
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::apt_package_name(name)
    }
}

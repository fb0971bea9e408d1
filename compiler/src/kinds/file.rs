//! `file`: a file bell owns at an absolute path, its content a template.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct File;

impl ResourceKind for File {
    fn keyword(&self) -> &'static str {
        "file"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("mode", Prop, Mode, false),
            FieldSchema::new("owner", Prop, Str, false).checked(validate::unix_user_name),
            FieldSchema::new("group", Prop, Str, false).checked(validate::unix_group_name),
            FieldSchema::new("content", ChildArg, Str, true),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "path"
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::absolute_path(name)
    }
}

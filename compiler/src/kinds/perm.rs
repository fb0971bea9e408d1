//! `perm`: owner, group and mode of paths bell does not write (a trailing `*` for a glob).

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Perm;

impl ResourceKind for Perm {
    fn keyword(&self) -> &'static str {
        "perm"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("owner", Prop, Str, false).checked(validate::unix_user_name),
            FieldSchema::new("group", Prop, Str, false).checked(validate::unix_group_name),
            FieldSchema::new("mode", Prop, Mode, false),
            FieldSchema::new("ignore-missing", Prop, Bool, false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "path"
    }

    /// An absolute path, or a glob of them.
    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::absolute_path(name.trim_end_matches('*')).or_else(|e| {
            if name.starts_with('/')
                && !name.contains("/../")
                && !name.contains("//")
                && !name.ends_with("/..")
            {
                Ok(())
            } else {
                Err(e)
            }
        })
    }
}

//! `user`: a local account with its password hash, SSH keys and sudo rights.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct User;

impl ResourceKind for User {
    fn keyword(&self) -> &'static str {
        "user"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("sudo", Prop, Bool, false),
            FieldSchema::new("shell", Prop, Str, false).checked(validate::absolute_path),
            FieldSchema::new("password", ChildArg, Str, false).checked(validate::sha512_crypt),
            FieldSchema::new("ssh-key", RepeatedChildArg, Strings, false)
                .checked(validate::ssh_public_key),
            FieldSchema::new("ssh-keys", ChildArg, Enum(&["unmanaged", "managed"]), false),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::unix_user_name(name)
    }
}

//! `limit`: one line of limits.conf(5), in bell's own file under the target's limits.d.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Limit;

/// The `item` values limits.conf(5) knows.
const ITEMS: &[&str] = &[
    "as",
    "chroot",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "maxlogins",
    "maxsyslogins",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nonewprivs",
    "nproc",
    "priority",
    "rss",
    "rtprio",
    "sigpending",
    "stack",
];

/// A limits.conf field is one word.
fn config_field(value: &str) -> Result<(), Invalid> {
    crate::escape::config_field(value)
        .map(|_| ())
        .map_err(|reason| Invalid {
            message: format!("invalid limits.conf field: {reason}"),
            help: "a limits.conf field is one word: no spaces, tabs or newlines".into(),
        })
}

impl ResourceKind for Limit {
    fn keyword(&self) -> &'static str {
        "limit"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("domain", Prop, Str, true).checked(config_field),
            FieldSchema::new("type", Prop, Enum(&["soft", "hard", "-"]), true),
            FieldSchema::new("item", Prop, Enum(ITEMS), true),
            FieldSchema::new("value", Prop, IntOrStr, true).checked(config_field),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::resource_name(name)
    }
}

//! `exec`: a script of the user's with a rerun policy, run in name order.

use super::ResourceKind;
use crate::diagnostic::Invalid;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};

pub struct Exec;

impl ResourceKind for Exec {
    fn keyword(&self) -> &'static str {
        "exec"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new(
                "rerun",
                Prop,
                Enum(&["always", "never", "once-successfully"]),
                false,
            ),
            FieldSchema::new("rerun-interval", Prop, Seconds, false),
            FieldSchema::new("retry-interval", Prop, Seconds, false),
            FieldSchema::new("timeout", Prop, Seconds, false),
            FieldSchema::new("on-failure", Prop, Enum(&["continue", "halt"]), false),
            FieldSchema::new("background", Prop, Bool, false),
            FieldSchema::new("args", ChildArgs, Strings, false),
            FieldSchema::new("env", ChildProps, StrMap, false),
            FieldSchema::new("script", ChildArg, Str, true),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        crate::front::validate::script_name(name)
    }
}

//! `users`: the settings of user management on a host (one per host, no name).
//!
//! `purge-expired=#true` also renders a resource of its own, `users:purge-expired`, that removes
//! every account bell created and expired earlier (Divingbell's `purge_expired_users`): a user
//! that leaves the spec is expired with its home kept, and a later release that turns purging on
//! removes it. The user kind's revert keeps the ledger of those accounts.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::render::{common, BundleBuilder, BundleKind, HostContext, NewResource, Renderer};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use minijinja::context;

pub struct Users;

impl ResourceKind for Users {
    fn keyword(&self) -> &'static str {
        "users"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("purge-expired", Prop, Bool, false),
            FieldSchema::new(
                "default-account",
                Prop,
                Enum(&["auto", "expire", "keep"]),
                false,
            ),
        ];
        SCHEMA
    }

    fn is_setting(&self) -> bool {
        true
    }

    /// The user kind reads `purge-expired` for the reverts of departing accounts; this renders
    /// the purge of the accounts that departed earlier.
    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::USERS, Kind::USER])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let model = &cx.host.model;
        let Some(users) = model
            .of_kind(Kind::USERS)
            .find(|u| u.bool("purge-expired") == Some(true))
        else {
            return;
        };
        let name = "purge-expired";
        let scripts = [
            ("apply", "user/purge-expired.sh.j2"),
            ("check", "user/purge-expired-check.sh.j2"),
        ]
        .map(|(role, template)| {
            common::script(
                r,
                "users",
                name,
                role,
                template,
                context! { kind => "users", name, role },
            )
        });
        match scripts {
            [Ok(apply), Ok(check)] => out.add_resource(NewResource {
                kind: BundleKind::Of(Kind::USERS),
                name: name.to_string(),
                files: Vec::new(),
                lines_in: Vec::new(),
                // After every account of the spec: one it takes back leaves the ledger first,
                // and a failed one is not purged behind its back.
                after: model.of_kind(Kind::USER).map(|u| u.key()).collect(),
                apply: Some(apply),
                // Removed accounts cannot come back; turning purging off stops it.
                revert: None,
                exec: None,
                check: Some(check),
            }),
            [Err(message), _] | [_, Err(message)] => {
                diags.push(common::template_error(users, message));
            }
        }
    }
}

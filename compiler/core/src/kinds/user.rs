//! `user`: a local account with its password hash, SSH keys and sudo rights.
//!
//! user (Divingbell's uamlite): local accounts, their `authorized_keys`, and sudo.
//!
//! The account is created or updated by the apply script, with the shadow tools pointed at
//! `BELL_ROOT` (`--root`), so baking an image and applying live are the same code. Two things
//! are deliberately *not* managed files of the bundle:
//!
//! - `authorized_keys` lives in the user's home and must be owned by the user, who does not
//!   exist before the first apply (bell-run switches files before it runs applies, and resolves
//!   owners by name). The keys are in the apply script instead, which writes them after the
//!   account exists, refusing symlinks in the user-writable home.
//! - The sudoers drop-in must pass `visudo -c` *before* sudo reads it: a broken drop-in breaks
//!   sudo for everyone. The bundle carries it at a staging path sudo never reads
//!   (`/var/lib/bell/sudoers/USER`), and the apply checks it and renames it into sudoers.d.
//!
//! Bell records the accounts it created and only ever expires (or, with
//! `users purge-expired=#true`, removes) those; an account that existed before gets back its
//! recorded shell, password hash, expiry and keys. The target's built-in account
//! (`default_account`) is expired only when a managed user has sudo and a way to log in, after
//! that user is applied; otherwise the build warns that it stays.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::render::{
    common, BundleBuilder, BundleKind, HostContext, NewFile, NewResource, RenderError, Renderer,
};
use crate::resolve::{Model, ResolvedResource};
use crate::source::FileId;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use crate::spec::{Kind, Value};
use crate::targets::{Target, TargetPath};
use miette::{Diagnostic, SourceSpan};
use minijinja::context;
use thiserror::Error;

pub struct User;

impl ResourceKind for User {
    fn keyword(&self) -> &'static str {
        "user"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("sudo", Prop, BoolOrStr, false).checked(sudo_policy),
            FieldSchema::new("shell", Prop, Str, false).checked(validate::login_shell),
            FieldSchema::new("password", ChildArg, Str, false).checked(validate::sha512_crypt),
            FieldSchema::new("ssh-key", RepeatedChildArg, Strings, false)
                .checked(validate::ssh_public_key),
            FieldSchema::new("ssh-keys", ChildArg, Enum(&["unmanaged", "managed"]), false),
            FieldSchema::AFTER,
            FieldSchema::WAIT_FOR,
        ];
        SCHEMA
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::unix_user_name(name)
    }

    fn render_reads(&self) -> Option<&'static [Kind]> {
        Some(&[Kind::USER, Kind::USERS])
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let model = &cx.host.model;
        let users: Vec<&ResolvedResource> = model.of_kind(Kind::USER).collect();
        if users.is_empty() {
            return;
        }
        let purge = model
            .of_kind(Kind::USERS)
            .next()
            .and_then(|res| res.bool("purge-expired"))
            .unwrap_or(false);
        let mut can_take_over = Vec::new();
        let mut checked = Vec::new();
        let mut applied = Vec::new();
        for user in &users {
            let name = user.name.as_str();
            let key = user.key();
            if !sudoers_safe(name) {
                let span = user.origin.span;
                diags.push(RenderError::Invalid {
                    message: format!(
                        "user name `{}` cannot be written to sudoers",
                        name.escape_debug()
                    ),
                    span: span.source_span(),
                    help: "user names are lowercase letters, digits, `_` and `-`".into(),
                    file: span.file,
                });
                continue;
            }
            let rule = sudo_rule(user.value("sudo"));
            let sudo = rule.is_some();
            let manage_keys = user.str("ssh-keys") != Some("unmanaged");
            let keys: &[String] = if manage_keys {
                user.list("ssh-key")
            } else {
                &[]
            };
            let password = user.str("password");
            if let Some(hash) = password {
                out.secret_value(hash);
            }
            if can_take_over_from(user) {
                can_take_over.push(key.clone());
            }
            let staged = format!("{SUDOERS_STAGING_DIR}/{name}");
            let dropin = format!("{}/bell-{name}", cx.target.path(&SUDOERS_DIR));
            let mut files = Vec::new();
            let mut sudoers_sha256 = String::new();
            if let Some((rule, written)) = &rule {
                let text = match r.stdlib("user/sudoers.j2", context! { name, rule, written }) {
                    Ok(text) => text,
                    Err(message) => {
                        diags.push(common::template_error(user, message));
                        continue;
                    }
                };
                sudoers_sha256 = bell_bundle::sha256_hex(text.as_bytes());
                if let Err(first) = out.add_file(NewFile::root_owned(&staged, text, 0o440), &key) {
                    let span = user.span_of("sudo");
                    diags.push(RenderError::PathConflict {
                        path: staged.clone(),
                        first,
                        second: key.clone(),
                        span: span.source_span(),
                        help: "two resources cannot write the same file".into(),
                        file: span.file,
                    });
                    continue;
                }
                files.push(staged.clone());
            }
            let account = context! {
                kind => "user", name,
                shell => user.str("shell").unwrap_or(""),
                sudo, password, manage_keys, keys,
                sudoers_staged => staged, sudoers_dropin => dropin,
            };
            let apply = r.stdlib(
                "user/apply.sh.j2",
                context! { role => "apply", ..account.clone() },
            );
            applied.push(account);
            // What the batch's check compares: the authorized_keys the apply writes (a key a
            // line) and the drop-in, by their digests.
            let keys_text: String = keys.iter().map(|k| format!("{k}\n")).collect();
            checked.push(context! {
                name, keys, manage_keys, sudo, sudoers_sha256,
                shell => user.str("shell").unwrap_or(""),
                manage_password => password.is_some(),
                keys_sha256 => bell_bundle::sha256_hex(keys_text.as_bytes()),
                sudoers_dropin => dropin,
            });
            let revert = r.stdlib(
                "user/revert.sh.j2",
                context! {
                    kind => "user", name, role => "revert", purge, sudoers_dropin => dropin,
                },
            );
            match (apply, revert) {
                (Ok(apply), Ok(revert)) => {
                    let resource = NewResource {
                        kind: BundleKind::Of(Kind::USER),
                        name: name.to_string(),
                        files,
                        lines_in: Vec::new(),
                        after: user.list("after").to_vec(),
                        apply: Some(apply),
                        revert: Some(revert),
                        exec: None,
                        check: None,
                    };
                    out.add_batched_resource(resource, BATCH);
                }
                (Err(message), _) | (_, Err(message)) => {
                    diags.push(common::template_error(user, message))
                }
            }
        }
        if !checked.is_empty() {
            let check = r.stdlib(
                "user/check-batch.sh.j2",
                context! { kind => "batch", name => BATCH, role => "check", users => checked },
            );
            let apply = r.stdlib(
                "user/apply-batch.sh.j2",
                context! { kind => "batch", name => BATCH, role => "apply", users => applied },
            );
            match (check, apply) {
                (Ok(check), Ok(apply)) => out.add_batch(BATCH, check, Some(apply)),
                (Err(message), _) | (_, Err(message)) => {
                    diags.push(common::template_error(users[0], message))
                }
            }
        }

        let account = cx.target.default_account.as_str();
        if account.is_empty() || users.iter().any(|u| u.name == account) {
            // No built-in account, or the spec manages it like any other user.
            return;
        }
        match default_account_policy(model) {
            "keep" => return,
            // Said outright: after every user, so that whoever is to log in exists first.
            "expire" if can_take_over.is_empty() => {
                can_take_over = users.iter().map(|u| u.key()).collect();
            }
            _ => {}
        }
        if can_take_over.is_empty() {
            let span = users[0].origin.span;
            diags.push(UserWarning::DefaultAccountKept {
                account: account.to_string(),
                span: span.source_span(),
                help: format!(
                    "give a user `sudo=#true` and a `password` or an `ssh-key` to have `{account}` expired, or declare `user \"{account}\"` to manage it"
                ),
                file: span.file,
            });
            return;
        }
        let apply = r.stdlib(
            "user/default-account-apply.sh.j2",
            context! { kind => DEFAULT_ACCOUNT_KIND, name => account, role => "apply" },
        );
        let revert = r.stdlib(
            "user/default-account-revert.sh.j2",
            context! { kind => DEFAULT_ACCOUNT_KIND, name => account, role => "revert" },
        );
        let check = r.stdlib(
            "user/default-account-check.sh.j2",
            context! { kind => DEFAULT_ACCOUNT_KIND, name => account, role => "check" },
        );
        match (apply, revert, check) {
            (Ok(apply), Ok(revert), Ok(check)) => {
                out.add_resource(NewResource {
                    kind: BundleKind::Named(DEFAULT_ACCOUNT_KIND),
                    name: account.to_string(),
                    files: Vec::new(),
                    lines_in: Vec::new(),
                    // Only once a user who can take over is in place.
                    after: can_take_over,
                    apply: Some(apply),
                    revert: Some(revert),
                    exec: None,
                    check: Some(check),
                });
            }
            (Err(message), _, _) | (_, Err(message), _) | (_, _, Err(message)) => {
                diags.push(common::template_error(users[0], message))
            }
        }
    }

    fn target_paths(&self) -> &'static [TargetPath] {
        &[SUDOERS_DIR]
    }
}

/// `users default-account=`: `auto` unless the host's `users` says otherwise.
fn default_account_policy(model: &Model) -> &str {
    model
        .of_kind(Kind::USERS)
        .find_map(|u| u.str("default-account"))
        .unwrap_or("auto")
}

/// Whether `user` can stand in for the image's default account: an admin who can log in and
/// become root. `sudo="password"` needs the password to use it; a command list is not root.
fn can_take_over_from(user: &ResolvedResource) -> bool {
    let manage_keys = user.str("ssh-keys") != Some("unmanaged");
    let keys = manage_keys && !user.list("ssh-key").is_empty();
    let password = user.str("password").is_some();
    match user.value("sudo") {
        Some(Value::Bool(true)) => password || keys,
        Some(Value::Str(p)) if p == "password" => password,
        _ => false,
    }
}

/// The resources a model gets without declaring them, and why: the default account of the
/// target's image (`debian`, `ubuntu`) is expired once a managed admin can take over
/// (Divingbell's rule), so that no well-known login stays open on the host.
pub fn implied(model: &Model, target: &Target) -> Vec<super::ImpliedResource> {
    let account = target.default_account.as_str();
    let users: Vec<&ResolvedResource> = model.of_kind(Kind::USER).collect();
    if account.is_empty() || users.iter().any(|u| u.name == account) {
        return Vec::new();
    }
    let policy = default_account_policy(model);
    if policy == "keep" || users.is_empty() {
        return Vec::new();
    }
    let admins: Vec<&ResolvedResource> = users
        .iter()
        .copied()
        .filter(|u| can_take_over_from(u))
        .collect();
    if admins.is_empty() {
        // Said outright (an import states Divingbell's decision so): once every user is in.
        return match model.of_kind(Kind::USERS).next() {
            Some(setting) if policy == "expire" => vec![super::ImpliedResource {
                key: format!("{DEFAULT_ACCOUNT_KIND}:{account}"),
                why: format!(
                    "`users default-account=\"expire\"`: the image's own `{account}` account is locked and expired once {} are in place",
                    users.iter().map(|u| format!("`{}`", u.key())).collect::<Vec<_>>().join(", ")
                ),
                origin: setting.origin,
            }],
            _ => Vec::new(),
        };
    }
    let first = admins[0];
    let names: Vec<String> = admins.iter().map(|u| format!("`{}`", u.key())).collect();
    vec![super::ImpliedResource {
        key: format!("{DEFAULT_ACCOUNT_KIND}:{account}"),
        why: format!(
            "{} can log in and become root, so the image's own `{account}` account is \
             locked and expired (declare `user \"{account}\"` to manage it instead)",
            names.join(", ")
        ),
        origin: first.origin,
    }]
}

/// The sudoers rule after the user's name, and `sudo` as the spec wrote it (for the drop-in's
/// comment): `sudo=#true` is root without a password (Divingbell's rule), `sudo="password"`
/// root with the user's password, any other string the user's own `HOSTS=(RUNAS) COMMANDS`
/// (visudo checks it before sudo reads it).
fn sudo_rule(value: Option<&Value>) -> Option<(String, String)> {
    match value? {
        Value::Bool(true) => Some(("ALL=(ALL:ALL) NOPASSWD: ALL".into(), "#true".into())),
        Value::Str(p) if p == "password" => Some(("ALL=(ALL:ALL) ALL".into(), format!("{p:?}"))),
        Value::Str(rule) => Some((rule.clone(), format!("{rule:?}"))),
        _ => None,
    }
}

/// A `sudo` string: `password`, or a rule that stays one sudoers line.
fn sudo_policy(policy: &str) -> Result<(), Invalid> {
    let help = "`sudo=#true` is root without a password, `sudo=\"password\"` root with the user's \
                password; otherwise write the rule after the user name, such as \
                `sudo=\"ALL=(root) /usr/bin/systemctl restart nginx\"`";
    let fail = |message: String| {
        Err(Invalid {
            message,
            help: help.into(),
        })
    };
    if policy == "password" {
        return Ok(());
    }
    if let Some(c) = policy.chars().find(|c| c.is_control()) {
        return fail(format!(
            "a sudo rule is one line; it contains {}",
            validate::show_char(c)
        ));
    }
    // A trailing backslash would join the next line of the drop-in to this rule.
    if policy.trim_end().ends_with('\\') {
        return fail("a sudo rule cannot end with `\\`".into());
    }
    match policy.split_once('=') {
        Some((hosts, commands)) if !hosts.trim().is_empty() && !commands.trim().is_empty() => {
            validate::sudo_rule(policy)
        }
        _ => fail(format!(
            "`{}` is not a sudo policy: write `password`, or a rule `HOSTS=(RUNAS) COMMANDS`",
            policy.escape_debug()
        )),
    }
}

/// Which file of `user`'s the path `path` is, when the user's resource writes it, with the
/// field that makes it: `/home/NAME/.ssh/authorized_keys` (`/root/...` for root) while keys are
/// managed, and the sudoers drop-in while the user has sudo.
pub fn writes(user: &ResolvedResource, path: &str) -> Option<(&'static str, &'static str)> {
    let name = user.name.as_str();
    let home = if name == "root" {
        "/root".to_string()
    } else {
        format!("/home/{name}")
    };
    if user.str("ssh-keys") != Some("unmanaged") && path == format!("{home}/.ssh/authorized_keys") {
        return Some(("authorized_keys", "ssh-key"));
    }
    let sudo = sudo_rule(user.value("sudo")).is_some();
    if sudo && path == format!("{}/bell-{name}", SUDOERS_DIR.default) {
        return Some(("sudoers drop-in", "sudo"));
    }
    None
}

/// Where the bundle stages sudoers drop-ins for the apply to check and install.
/// The batch whose one check reads back every account.
const BATCH: &str = "user";

pub const SUDOERS_STAGING_DIR: &str = "/var/lib/bell/sudoers";

pub const SUDOERS_DIR: TargetPath = TargetPath {
    key: "sudoers_dir",
    default: "/etc/sudoers.d",
};

/// The kind of the resource that expires the target's built-in account.
pub const DEFAULT_ACCOUNT_KIND: &str = "default-account";

#[derive(Debug, Error, Diagnostic)]
pub enum UserWarning {
    #[error(
        "the default account `{account}` stays enabled: no managed user has `sudo=#true` and a password or an ssh key"
    )]
    #[diagnostic(code(bell::render::default_account_kept), severity(Warning))]
    DefaultAccountKept {
        account: String,
        #[label("managed users start here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl UserWarning {
    fn file_id(&self) -> Option<FileId> {
        match self {
            UserWarning::DefaultAccountKept { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(UserWarning);

/// A user name that may stand bare in a sudoers line and in a sudoers.d file name (sudo skips
/// files whose name holds a `.`). `lower` already enforces useradd's stricter rule; this keeps
/// the sudoers line safe by construction should that rule ever be relaxed.
fn sudoers_safe(name: &str) -> bool {
    let body = name.strip_suffix('$').unwrap_or(name);
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !body.starts_with('-')
}

/// Why what depends on this kind comes after it (see `Implied::AfterEvery`).
pub const USERS_FIRST: crate::graph::resources::Reason =
    crate::graph::resources::Reason::Rule("users exist before scripts run");

/// Why a resource whose `owner` is a user of the spec comes after that user (files, perms).
pub const OWNER_FIRST: &str = "{after} is owned by {before}, which must exist first";

#[cfg(test)]
mod tests {
    #[test]
    fn sudoers_safe_names() {
        assert!(super::sudoers_safe("alice"));
        assert!(super::sudoers_safe("svc-backup$"));
        assert!(!super::sudoers_safe("a.b"));
        assert!(!super::sudoers_safe("a b"));
        assert!(!super::sudoers_safe("ALL"));
        assert!(!super::sudoers_safe("$"));
    }
}

//! What uamlite does to accounts beyond the users it declares: whether the image's own account
//! (`ubuntu`) is expired, and whether a user's `authorized_keys` is written, emptied or left
//! alone. bellc decides the first by a rule of its own (`users default-account="auto"`), so
//! the import states Divingbell's decision wherever the two differ, and `--verify` compares
//! both outcomes host by host.

use super::history::{DefaultAccountRule, Rules};
use super::modules::{boolean, singleton, Decl};
use crate::yaml::Node;
use bellc_core::kdl_text::string;

/// What becomes of a user's `~/.ssh/authorized_keys`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Written with these keys.
    Written(Vec<String>),
    /// Removed: the user has no keys (`user_sshkeys` left out).
    Emptied,
    /// Left as it is (`[ Unmanaged ]`, or `[]` since 4c6ac47).
    Unmanaged,
}

impl std::fmt::Display for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keys::Written(keys) if keys.len() == 1 => write!(f, "written with 1 key"),
            Keys::Written(keys) => write!(f, "written with {} keys", keys.len()),
            Keys::Emptied => write!(f, "emptied (no keys)"),
            Keys::Unmanaged => write!(f, "left as it is (unmanaged)"),
        }
    }
}

/// What uamlite does with one user's `authorized_keys`.
pub fn keys(user: &Node, rules: Rules) -> Keys {
    let Some(list) = user.get("user_sshkeys").filter(|v| !v.is_null()) else {
        return Keys::Emptied;
    };
    let words: Vec<String> = match list.items() {
        Some(items) => items
            .iter()
            .filter_map(|i| i.scalar().map(str::to_string))
            .collect(),
        None => list.scalar().map(str::to_string).into_iter().collect(),
    };
    match words.first() {
        // Before 4c6ac47 the chart refuses `[]`: the import says so at the value.
        None if rules.empty_ssh_keys_unmanaged() => Keys::Unmanaged,
        None => Keys::Emptied,
        Some(first) if first == "Unmanaged" => Keys::Unmanaged,
        Some(_) => Keys::Written(words),
    }
}

fn sudo(user: &Node) -> bool {
    user.get("user_sudo").and_then(boolean) == Some(true)
}

/// Whether uamlite, run with these values (`conf.uamlite` as a host gets it), expires the
/// image's account. uamlite names it `ubuntu`; the import reads it as the target's own
/// (`debian` on Debian), which bellc's rule is about.
pub fn divingbell_expires(conf: &Node, rules: Rules, account: &str) -> bool {
    let users = conf.get("users").and_then(Node::items).unwrap_or_default();
    let admins = users
        .iter()
        .filter(|u| sudo(u) && u.get("user_name").and_then(Node::scalar) != Some(account));
    match rules.default_account() {
        DefaultAccountRule::AnySudoUser => admins.count() > 0,
        DefaultAccountRule::SudoPasswordAndSudoKeys => {
            let admins: Vec<&Node> = admins.collect();
            let password = admins.iter().any(|u| {
                u.get("user_crypt_passwd")
                    .and_then(Node::scalar)
                    .is_some_and(|p| !p.is_empty() && p != "*")
            });
            let keys = admins
                .iter()
                .any(|u| matches!(keys(u, rules), Keys::Written(_)));
            password && keys
        }
    }
}

/// Whether bellc's own rule (`default-account="auto"`) expires it for these declarations: a
/// user with `sudo=#true` and a password or keys.
pub fn bellc_expires(decls: &[Decl], account: &str) -> bool {
    decls.iter().any(|d| {
        d.id.strip_prefix("user:")
            .is_some_and(|name| name != account)
            && d.fields.get("sudo").map(String::as_str) == Some("#true")
            && (d.fields.contains_key("password")
                || (d.fields.contains_key("ssh-key") && !d.fields.contains_key("ssh-keys")))
    })
}

/// The uamlite declarations for `conf`, with Divingbell's decision on the image's account
/// said outright (`users default-account=`) where bellc's own rule would decide otherwise.
pub fn settle(decls: &mut Vec<Decl>, conf: &Node, rules: Rules, account: &str) {
    if account.is_empty() || decls.iter().any(|d| d.id == format!("user:{account}")) {
        // The spec manages the account as a user: bellc leaves its expiry to that user.
        return;
    }
    let divingbell = divingbell_expires(conf, rules, account);
    if divingbell == bellc_expires(decls, account) {
        return;
    }
    let policy = string(if divingbell { "expire" } else { "keep" });
    match decls.iter_mut().find(|d| d.id == "users") {
        Some(users) => users.set("default-account", policy),
        None => decls.push(singleton(
            "users",
            &[("default-account", policy)],
            conf.span,
        )),
    }
}

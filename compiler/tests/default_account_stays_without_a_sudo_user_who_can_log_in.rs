//! Divingbell's safety rule: the target's built-in account is expired only when a managed user
//! has sudo and a way to log in; otherwise the build warns (and still builds) and says why.

use crate::common::in_memory::build;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";

fn default_account(body: &str) -> (Option<Vec<String>>, Vec<String>) {
    let b = build(&format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"h\"\n{body}"
    ));
    let compiled = b.compiled.expect("warnings do not block the build");
    let id = &compiled.release.hosts["h"].bundle;
    let r = compiled.bundles[id]
        .manifest
        .resources
        .iter()
        .find(|r| r.kind == "default-account")
        .map(|r| {
            assert_eq!(r.name, "debian");
            r.after.clone()
        });
    (r, b.diagnostics)
}

const WARNING: &str = "bell.kdl:3:6: warning[bell::render::default_account_kept]: the default account `debian` stays enabled: no managed user has `sudo=#true` and a password or an ssh key";

#[test]
fn a_sudo_user_with_a_key_takes_over() {
    let (after, diags) = default_account(&format!(
        "user \"nosudo\" {{\n    ssh-key \"{KEY}\"\n}}\nuser \"ops\" sudo=#true {{\n    ssh-key \"{KEY}\"\n}}\n"
    ));
    assert_eq!(after, Some(vec!["user:ops".to_string()]));
    assert_eq!(diags, Vec::<String>::new());
}

#[test]
fn sudo_without_a_way_to_log_in_keeps_it_with_a_warning() {
    let (after, diags) = default_account("user \"ops\" sudo=#true\n");
    assert_eq!(after, None);
    assert_eq!(diags, [WARNING]);
}

#[test]
fn unmanaged_keys_are_not_a_way_to_log_in() {
    let (after, diags) = default_account(&format!(
        "user \"ops\" sudo=#true {{\n    ssh-key \"{KEY}\"\n    ssh-keys \"unmanaged\"\n}}\n"
    ));
    assert_eq!(after, None);
    assert_eq!(diags, [WARNING]);
}

#[test]
fn a_login_without_sudo_keeps_it_with_a_warning() {
    let (after, diags) = default_account(&format!("user \"ops\" {{\n    ssh-key \"{KEY}\"\n}}\n"));
    assert_eq!(after, None);
    assert_eq!(diags, [WARNING]);
}

#[test]
fn a_spec_that_manages_the_default_account_itself_is_left_alone() {
    let (after, diags) = default_account("user \"debian\" sudo=#true\n");
    assert_eq!(after, None);
    assert_eq!(diags, Vec::<String>::new());
}

#[test]
fn no_users_no_warning() {
    let (after, diags) = default_account("package \"htop\"\n");
    assert_eq!(after, None);
    assert_eq!(diags, Vec::<String>::new());
}

#[test]
fn users_default_account_says_it_outright() {
    // `keep`: an admin who could take over, and the account stays, without a warning.
    let (after, diags) = default_account(&format!(
        "users default-account=\"keep\"\nuser \"ops\" sudo=#true {{\n    ssh-key \"{KEY}\"\n}}\n"
    ));
    assert_eq!(after, None);
    assert_eq!(diags, Vec::<String>::new());
    // `expire`: no user can take over, and the account goes once every user is in place.
    let (after, diags) = default_account(
        "users default-account=\"expire\"\nuser \"ops\" sudo=#true\nuser \"dev\"\n",
    );
    assert_eq!(
        after,
        Some(vec!["user:ops".to_string(), "user:dev".to_string()])
    );
    assert_eq!(diags, Vec::<String>::new());
    // `auto` is bellc's rule.
    let (after, diags) =
        default_account("users default-account=\"auto\"\nuser \"ops\" sudo=#true\n");
    assert_eq!(after, None);
    assert_eq!(diags, [WARNING.replace("3:6", "4:6")]);
    // Anything else is an error at the value.
    let b = build("fleet \"f\" target=\"debian-12\"\nhost \"h\"\nusers default-account=\"lock\"\n");
    assert!(b.compiled.is_none());
    assert!(
        b.diagnostics[0].starts_with("bell.kdl:3:7: error"),
        "{:?}",
        b.diagnostics
    );
}

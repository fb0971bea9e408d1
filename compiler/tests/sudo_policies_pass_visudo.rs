//! `sudo` says which sudo a user gets, and the drop-in says exactly that: `#true` is root
//! without a password (Divingbell's rule), `"password"` root with the user's password, any other
//! string the user's own rule. Every drop-in passes the real `visudo -c`; a rule that would not
//! stay one line is refused at its span; only a user who can become root stands in for the
//! image's default account.
use crate::common;
use crate::common::in_memory::{bundle, errors};
use crate::common::*;
use std::process::Command;

const HASH: &str = "$6$saltsalt$QSfQiVvSDBmdVdB4hm.4ZfPlKmCwMJbkyjM/YbG9ZBv6Wtgzy.ab.vm2pQjmiO0SmPm7hBTB7r9P1oFbqjEPo0";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHgmFwCM0VkW1QLvFmHDBbg3zrF8gqAodb9wGN6x5S5W ops@example";

fn spec(users: &str) -> String {
    format!("fleet \"f\" target=\"debian-12\"\nhost \"h\"\n{users}")
}

#[test]
fn each_policy_writes_its_own_rule_and_passes_visudo() {
    let b = bundle(
        &spec(&format!(
            r#"user "root-nopasswd" sudo=#true {{
    ssh-key "{KEY}"
}}
user "root-password" sudo="password" {{
    password "{HASH}"
}}
user "deployer" sudo="ALL=(root) /usr/bin/systemctl restart nginx, /usr/bin/journalctl" {{
    ssh-key "{KEY}"
}}
user "plain" sudo=#false
"#
        )),
        "h",
    );
    let rule = |user: &str| file(&b, &format!("/var/lib/bell/sudoers/{user}"));
    assert!(rule("root-nopasswd").ends_with("\nroot-nopasswd ALL=(ALL:ALL) NOPASSWD: ALL\n"));
    assert!(rule("root-password").ends_with("\nroot-password ALL=(ALL:ALL) ALL\n"));
    assert!(rule("deployer").ends_with(
        "\ndeployer ALL=(root) /usr/bin/systemctl restart nginx, /usr/bin/journalctl\n"
    ));
    assert!(!b.contents.contains_key("root/var/lib/bell/sudoers/plain"));
    if have("visudo") {
        let dir = tempfile::tempdir().unwrap();
        for user in ["root-nopasswd", "root-password", "deployer"] {
            let path = dir.path().join(user);
            std::fs::write(&path, rule(user)).unwrap();
            let out = Command::new("visudo")
                .args(["-c", "-f"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "visudo rejects {user}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn a_rule_that_is_not_one_sudoers_line_is_refused_at_its_span() {
    let e = errors(&spec(
        "user \"a\" sudo=\"ALL=(ALL) ALL\\nevil ALL=(ALL) NOPASSWD: ALL\"\nuser \"b\" sudo=\"yes\"\nuser \"c\" sudo=\"ALL=(ALL) /bin/ls \\\\\"\nuser \"d\" sudo=1\n",
    ));
    let expected = [
        "bell.kdl:3:10: error[bell::lower::invalid_value]: a sudo rule is one line; it contains U+000A",
        "bell.kdl:4:10: error[bell::lower::invalid_value]: `yes` is not a sudo policy",
        "bell.kdl:5:10: error[bell::lower::invalid_value]: a sudo rule cannot end with `\\`",
        "bell.kdl:6:10: error[bell::lower::wrong_type]: `user sudo` expects `#true`, `#false` or a string",
    ];
    for want in expected {
        assert!(
            e.iter().any(|l| l.starts_with(want)),
            "no `{want}` in {e:#?}"
        );
    }
    assert_eq!(e.len(), expected.len(), "{e:#?}");
}

#[test]
fn only_a_user_who_can_become_root_replaces_the_default_account() {
    // A command list is not root: the image's default account stays, with a warning.
    let b = common::in_memory::build(&spec(&format!(
        "user \"deployer\" sudo=\"ALL=(root) /usr/bin/systemctl\" {{\n    ssh-key \"{KEY}\"\n}}\n"
    )));
    assert!(
        b.diagnostics
            .iter()
            .any(|d| d.contains("warning[bell::render::default_account_kept]")),
        "{:#?}",
        b.diagnostics
    );
    // Root with a password, and the password set: it takes over.
    let b = common::in_memory::build(&spec(&format!(
        "user \"admin\" sudo=\"password\" {{\n    password \"{HASH}\"\n}}\n"
    )));
    // (The one thing said: the hash is written in the spec.)
    assert!(
        b.diagnostics
            .iter()
            .all(|d| d.contains("warning[bell::lower::plaintext_secret_in_spec]")),
        "{:#?}",
        b.diagnostics
    );
}

//! Build-time checks of user and package values: each bad spec gives one diagnostic with its
//! message, at the line of the offending value.

use crate::common::in_memory::errors;

fn check(body: &str, expected: &[&str]) {
    let text = format!("fleet \"f\" target=\"ubuntu-24.04\"\nhost \"h\"\n{body}");
    let got: Vec<String> = errors(&text)
        .into_iter()
        .filter(|d| d.contains(": error["))
        .collect();
    assert_eq!(got, expected, "for:\n{body}");
}

const ED25519: &str =
    "AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";

#[test]
fn md5_crypt_hashes_are_refused() {
    check(
        "user \"alice\" {\n    password \"$1$abc$def\"\n}\n",
        &["bell.kdl:4:14: error[bell::lower::invalid_value]: password hash uses md5 crypt, not sha-512 (`$6$`)"],
    );
}

#[test]
fn plain_text_passwords_are_refused() {
    check(
        "user \"alice\" {\n    password \"hunter2\"\n}\n",
        &["bell.kdl:4:14: error[bell::lower::invalid_value]: password is not a crypt hash; plain-text passwords are not accepted"],
    );
}

#[test]
fn truncated_sha512_hashes_are_refused() {
    check(
        "user \"alice\" {\n    password \"$6$rounds=5000$saltsalt$tooshort\"\n}\n",
        &["bell.kdl:4:14: error[bell::lower::invalid_value]: password hash digest must be 86 characters of `[./0-9A-Za-z]`, found 8"],
    );
}

#[test]
fn the_offending_ssh_key_is_pointed_at() {
    check(
        &format!(
            "user \"bob\" {{\n    ssh-key \"ssh-ed25519 {ED25519}\"\n    ssh-key \"ssh-rsa {ED25519}\"\n    ssh-key \"ssh-foo AAAA x\"\n    ssh-key \"ssh-ed25519 AAAAnot!base64 x\"\n}}\n"
        ),
        &[
            "bell.kdl:5:13: error[bell::lower::invalid_value]: ssh key says `ssh-rsa` but its key data is a `ssh-ed25519` key",
            "bell.kdl:6:13: error[bell::lower::invalid_value]: unknown ssh key type `ssh-foo`",
            "bell.kdl:7:13: error[bell::lower::invalid_value]: the key data of this `ssh-ed25519` key is not valid base64",
        ],
    );
}

#[test]
fn user_names_follow_useradd() {
    check(
        "user \"Carol\"\n",
        &["bell.kdl:3:6: error[bell::lower::invalid_value]: user name `Carol` must start with a lowercase letter or `_`"],
    );
}

#[test]
fn shells_are_absolute_paths() {
    check(
        "user \"dave\" shell=\"bin/sh\"\n",
        &["bell.kdl:3:13: error[bell::lower::invalid_value]: path `bin/sh` is not absolute"],
    );
}

#[test]
fn ssh_keys_is_managed_or_unmanaged() {
    check(
        "user \"dave\" {\n    ssh-keys \"sometimes\"\n}\n",
        &["bell.kdl:4:14: error[bell::lower::invalid_value]: `user ssh-keys` cannot be \"sometimes\""],
    );
}

#[test]
fn an_absent_package_has_no_version() {
    check(
        "package \"telnetd\" absent=#true version=\"1.0\"\n",
        &["bell.kdl:3:32: error[bell::render::invalid]: `package:telnetd` is `absent=#true` and also sets `version`"],
    );
}

#[test]
fn debconf_questions_are_one_word() {
    check(
        "package \"yy\" {\n    debconf \"yy/q q\" type=\"string\" value=\"v\"\n}\n",
        &["bell.kdl:4:5: error[bell::render::invalid]: debconf question `yy/q q` of `package:yy` holds whitespace"],
    );
}

#[test]
fn debconf_answers_are_trimmed_single_lines() {
    check(
        "package \"zz\" {\n    debconf \"zz/q\" type=\"string\" value=\" v\"\n}\n",
        &["bell.kdl:4:5: error[bell::render::invalid]: the debconf answer to `zz/q` starts or ends with whitespace or holds a control character"],
    );
}

#[test]
fn apt_sources_name_a_suite() {
    check(
        "apt-source \"s\" url=\"http://deb.example/debian\" suites=\" \"\n",
        &["bell.kdl:3:48: error[bell::lower::invalid_value]: the list of suites is empty"],
    );
}

#[test]
fn shells_hold_no_colon() {
    check(
        "user \"dave\"\nuser \"erin\" shell=\"/bin/a:b\"\n",
        &["bell.kdl:4:13: error[bell::lower::invalid_value]: shell `/bin/a:b` holds a `:`, which separates /etc/passwd fields"],
    );
}

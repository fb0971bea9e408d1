//! SHA-512 crypt hashes: real hashes from `openssl passwd -6` pass; damaged ones are refused
//! without the hash being repeated in the message.

use bellc_core::front::validate::sha512_crypt;
use std::io::Write;
use std::process::{Command, Stdio};

fn openssl_hash(password: &str) -> Option<String> {
    if !bell_testkit::tool("openssl") {
        return None;
    }
    let mut child = Command::new("openssl")
        .args(["passwd", "-6", "-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run openssl");
    if let Some(mut stdin) = child.stdin.take() {
        writeln!(stdin, "{password}").expect("write password");
    }
    let output = child.wait_with_output().expect("openssl output");
    assert!(output.status.success());
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

// Generated with glibc crypt(3): crypt("secret", "$6$rounds=10000$saltsaltsaltsalt$").
const WITH_ROUNDS: &str = "$6$rounds=10000$saltsaltsaltsalt$JfKXl4x07umbXIGXrz4jYnDtZt8fIFlNSby2poRKPSFD4PbiQHTxb2NLQPGuaML.ZXPWXKfgxibKFGp.yXoha.";

fn message(hash: &str) -> String {
    match sha512_crypt(hash) {
        Ok(()) => panic!("{hash:?} should be refused"),
        Err(invalid) => {
            assert!(
                invalid.help.contains("mkpasswd -m sha-512"),
                "{}",
                invalid.help
            );
            assert!(
                hash.len() < 8 || !invalid.message.contains(hash),
                "message repeats the hash"
            );
            invalid.message
        }
    }
}

#[test]
fn accepts_real_hashes() {
    for password in ["secret", "x", "it's a \"pass phrase\" ✓"] {
        let Some(hash) = openssl_hash(password) else {
            return;
        };
        assert_eq!(sha512_crypt(&hash), Ok(()), "{hash}");
    }
    assert_eq!(sha512_crypt(WITH_ROUNDS), Ok(()));
}

#[test]
fn refuses_other_schemes_and_plain_text() {
    assert_eq!(
        message("hunter2"),
        "password is not a crypt hash; plain-text passwords are not accepted"
    );
    assert_eq!(
        message("$y$j9T$abc$def"),
        "password hash uses yescrypt crypt, not sha-512 (`$6$`)"
    );
    assert_eq!(
        message("$1$abc$def"),
        "password hash uses md5 crypt, not sha-512 (`$6$`)"
    );
    assert_eq!(
        message("$5$abc$def"),
        "password hash uses sha-256 crypt, not sha-512 (`$6$`)"
    );
}

#[test]
fn refuses_damaged_hashes() {
    let Some(hash) = openssl_hash("secret") else {
        return;
    };
    assert_eq!(
        message(&hash[..hash.len() - 1]),
        "password hash digest must be 86 characters of `[./0-9A-Za-z]`, found 85"
    );
    assert_eq!(
        message(&format!("{hash}x")),
        "password hash digest must be 86 characters of `[./0-9A-Za-z]`, found 87"
    );
    let bad_char = format!("{}!", &hash[..hash.len() - 1]);
    assert_eq!(
        message(&bad_char),
        "password hash digest must be 86 characters of `[./0-9A-Za-z]`, found 86"
    );
    assert_eq!(
        message(&format!("{hash}\n")),
        "password hash digest must be 86 characters of `[./0-9A-Za-z]`, found 87"
    );
    let digest = hash.rsplit('$').next().unwrap_or_default();
    assert_eq!(
        message(&format!("$6$${digest}")),
        "password hash salt must be 1 to 16 characters of `[./0-9A-Za-z]`"
    );
    assert_eq!(
        message(&format!("$6$saltsaltsaltsaltX${digest}")),
        "password hash salt must be 1 to 16 characters of `[./0-9A-Za-z]`"
    );
    assert_eq!(
        message(&format!("$6$sa_lt${digest}")),
        "password hash salt must be 1 to 16 characters of `[./0-9A-Za-z]`"
    );
    for rounds in ["999", "1000000000", "", "1e4", "-5000", "+5000"] {
        assert_eq!(
            message(&format!("$6$rounds={rounds}$salt${digest}")),
            "password hash has a `rounds=` outside 1000..=999999999",
            "rounds={rounds}"
        );
    }
    assert_eq!(
        sha512_crypt(&format!("$6$rounds=1000$salt${digest}")),
        Ok(())
    );
    assert_eq!(
        sha512_crypt(&format!("$6$rounds=999999999$salt${digest}")),
        Ok(())
    );
    assert_eq!(
        message(&format!("$6$a$b${digest}")),
        "password hash does not have the shape `$6$[rounds=N$]salt$hash`"
    );
    assert_eq!(
        message("$6$"),
        "password hash does not have the shape `$6$[rounds=N$]salt$hash`"
    );
}

//! Password hashes: SHA-512 crypt(3), the only scheme bellc accepts.

use super::*;

const CRYPT_ALPHABET_HELP: &str = "generate the hash with `mkpasswd -m sha-512` (package `whois`) \
     or `openssl passwd -6`, and paste the whole `$6$...` string";

fn is_crypt_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '/'
}

/// A SHA-512 crypt(3) hash: `$6$[rounds=N$]salt$hash`.
///
/// The hash is never repeated in a message: it is a secret-adjacent value.
pub fn sha512_crypt(hash: &str) -> Result<(), Invalid> {
    let Some(rest) = hash.strip_prefix("$6$") else {
        let message = if !hash.starts_with('$') {
            "password is not a crypt hash; plain-text passwords are not accepted".to_owned()
        } else {
            let scheme = hash.split('$').nth(1).unwrap_or_default();
            let name = match scheme {
                "1" => "md5",
                "5" => "sha-256",
                "y" => "yescrypt",
                "2a" | "2b" | "2y" => "bcrypt",
                "7" => "scrypt",
                "gy" => "gost-yescrypt",
                _ => "an unknown",
            };
            format!("password hash uses {name} crypt, not sha-512 (`$6$`)")
        };
        return Err(invalid(message, CRYPT_ALPHABET_HELP));
    };
    let fields: Vec<&str> = rest.split('$').collect();
    let (rounds, salt, digest) = match fields.as_slice() {
        [salt, digest] => (None, *salt, *digest),
        [rounds, salt, digest] if rounds.starts_with("rounds=") => (Some(*rounds), *salt, *digest),
        _ => {
            return Err(invalid(
                "password hash does not have the shape `$6$[rounds=N$]salt$hash`",
                CRYPT_ALPHABET_HELP,
            ))
        }
    };
    if let Some(rounds) = rounds {
        let digits = rounds.trim_start_matches("rounds=");
        let parsed = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            digits.parse::<u64>().ok()
        } else {
            None
        };
        match parsed {
            Some(n) if (1000..=999_999_999).contains(&n) => {}
            _ => {
                return Err(invalid(
                    "password hash has a `rounds=` outside 1000..=999999999",
                    CRYPT_ALPHABET_HELP,
                ))
            }
        }
    }
    if salt.is_empty() || salt.chars().count() > 16 || !salt.chars().all(is_crypt_char) {
        return Err(invalid(
            "password hash salt must be 1 to 16 characters of `[./0-9A-Za-z]`",
            CRYPT_ALPHABET_HELP,
        ));
    }
    if digest.len() != 86 || !digest.chars().all(is_crypt_char) {
        return Err(invalid(
            format!(
                "password hash digest must be 86 characters of `[./0-9A-Za-z]`, found {}",
                digest.chars().count()
            ),
            CRYPT_ALPHABET_HELP,
        ));
    }
    Ok(())
}

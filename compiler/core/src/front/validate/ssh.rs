//! SSH public keys: one `authorized_keys` line, decoded and checked against its key type.

use super::*;

const SSH_KEY_TYPES: [&str; 8] = [
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-ed25519",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

const SSH_HELP: &str = "paste one line of a `.pub` file as `ssh-keygen` writes it: \
     `TYPE BASE64 [COMMENT]`, e.g. `ssh-ed25519 AAAAC3Nza... alice@laptop`";

/// A reader of the SSH wire format (RFC 4251 strings).
struct Wire<'a> {
    rest: &'a [u8],
}

impl<'a> Wire<'a> {
    fn string(&mut self) -> Option<&'a [u8]> {
        let (len, rest) = self.rest.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
        if rest.len() < len {
            return None;
        }
        let (field, rest) = rest.split_at(len);
        self.rest = rest;
        Some(field)
    }
}

/// Bits of an SSH mpint (big-endian two's complement, positive here).
fn mpint_bits(bytes: &[u8]) -> usize {
    match bytes.iter().position(|&b| b != 0) {
        Some(first) => (bytes.len() - first) * 8 - bytes[first].leading_zeros() as usize,
        None => 0,
    }
}

/// Checks the fields of a decoded key blob after its type string; the reason on failure.
fn check_key_blob(key_type: &str, wire: &mut Wire<'_>) -> Result<(), String> {
    let truncated = || "the key data is truncated".to_owned();
    match key_type {
        "ssh-rsa" => {
            let _e = wire.string().ok_or_else(truncated)?;
            let n = wire.string().ok_or_else(truncated)?;
            let bits = mpint_bits(n);
            if bits < 1024 {
                return Err(format!(
                    "the rsa modulus has {bits} bits; openssh refuses rsa keys under 1024 bits"
                ));
            }
        }
        "ssh-dss" => {
            for _ in 0..4 {
                wire.string().ok_or_else(truncated)?;
            }
        }
        "ssh-ed25519" | "sk-ssh-ed25519@openssh.com" => {
            let point = wire.string().ok_or_else(truncated)?;
            if point.len() != 32 {
                return Err(format!(
                    "an ed25519 public key is 32 bytes, this one is {}",
                    point.len()
                ));
            }
            if key_type.starts_with("sk-") {
                wire.string().ok_or_else(truncated)?;
            }
        }
        _ => {
            // ecdsa-sha2-<curve> and sk-ecdsa-sha2-nistp256@openssh.com
            let curve = key_type
                .trim_end_matches("@openssh.com")
                .rsplit('-')
                .next()
                .unwrap_or_default();
            let embedded = wire.string().ok_or_else(truncated)?;
            if embedded != curve.as_bytes() {
                return Err(format!(
                    "the key data names curve `{}`, the type says `{curve}`",
                    String::from_utf8_lossy(embedded)
                ));
            }
            let point = wire.string().ok_or_else(truncated)?;
            let expected = match curve {
                "nistp256" => 65,
                "nistp384" => 97,
                _ => 133,
            };
            if point.len() != expected || point.first() != Some(&4) {
                return Err(format!(
                    "the {curve} public point is not a {expected}-byte uncompressed point"
                ));
            }
            if key_type.starts_with("sk-") {
                wire.string().ok_or_else(truncated)?;
            }
        }
    }
    if !wire.rest.is_empty() {
        return Err(format!(
            "the key data has {} bytes after the key",
            wire.rest.len()
        ));
    }
    Ok(())
}

/// One `authorized_keys` line without options: `TYPE BASE64 [COMMENT]`.
///
/// The key data must decode, name the same type as the line, and have the shape of that type.
pub fn ssh_public_key(line: &str) -> Result<(), Invalid> {
    if let Some(c) = line.chars().find(|c| c.is_control() && *c != '\t') {
        return Err(invalid(
            format!("ssh public key contains {}", show_char(c)),
            "give each key as its own single-line value",
        ));
    }
    let mut fields = line.split([' ', '\t']).filter(|f| !f.is_empty());
    let Some(key_type) = fields.next() else {
        return Err(invalid("ssh public key is empty", SSH_HELP));
    };
    if !SSH_KEY_TYPES.contains(&key_type) {
        let looks_like_path =
            !line.trim().contains([' ', '\t']) && (line.contains('/') || line.ends_with(".pub"));
        if looks_like_path {
            return Err(invalid(
                format!("`{}` looks like a path, not an ssh public key", line.trim()),
                key_file_help(line.trim()),
            ));
        }
        let looks_like_options = key_type.contains('=')
            || key_type.contains(',')
            || [
                "restrict",
                "no-pty",
                "no-port-forwarding",
                "no-agent-forwarding",
                "no-x11-forwarding",
                "cert-authority",
            ]
            .contains(&key_type);
        if looks_like_options {
            return Err(invalid(
                format!("ssh public key starts with options (`{key_type}`), not a key type"),
                "give only `TYPE BASE64 [COMMENT]`; authorized_keys options are not supported here",
            ));
        }
        let help = match did_you_mean(key_type, SSH_KEY_TYPES) {
            Some(suggestion) => format!("did you mean `{suggestion}`? {SSH_HELP}"),
            None => format!("known types: {}", SSH_KEY_TYPES.join(", ")),
        };
        return Err(invalid(format!("unknown ssh key type `{key_type}`"), help));
    }
    let Some(data) = fields.next() else {
        return Err(invalid(
            format!("ssh public key of type `{key_type}` has no key data"),
            SSH_HELP,
        ));
    };
    // Strict RFC 4648 base64, as in `.pub` files: padding required, one text per key.
    let Some(blob) = Some(data)
        .filter(|data| !data.is_empty())
        .and_then(bell_wire::from_base64)
    else {
        return Err(invalid(
            format!("the key data of this `{key_type}` key is not valid base64"),
            "the key was probably cut or wrapped when copied; copy the `.pub` line again in one piece",
        ));
    };
    let mut wire = Wire { rest: &blob };
    let embedded = wire.string().ok_or_else(|| {
        invalid(
            format!("the key data of this `{key_type}` key is truncated"),
            "copy the `.pub` line again in one piece",
        )
    })?;
    if embedded != key_type.as_bytes() {
        let shown = String::from_utf8(embedded.to_vec())
            .ok()
            .filter(|s| s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic()));
        let message = match shown {
            Some(actual) => {
                format!("ssh key says `{key_type}` but its key data is a `{actual}` key")
            }
            None => format!("ssh key says `{key_type}` but its key data is not an ssh public key"),
        };
        return Err(invalid(
            message,
            "the type and the key data were probably mixed from two keys; copy the whole `.pub` line",
        ));
    }
    check_key_blob(key_type, &mut wire).map_err(|reason| {
        invalid(
            format!("`{key_type}` key is malformed: {reason}"),
            "copy the `.pub` line again in one piece, or regenerate it with `ssh-keygen -y -f KEY`",
        )
    })
}

/// A host's identity: the public half of its Ed25519 key, as one `.pub` line (`ssh-ed25519
/// BASE64 [COMMENT]`: what `ssh-keyscan -t ed25519 HOST` and `bell-run identity` print). The
/// identity as the release carries it, type and key data without the comment.
pub fn host_identity(line: &str) -> Result<String, Invalid> {
    const HELP: &str = "give the host's Ed25519 key as one line: `bell-run identity` prints it on \
                        the host, `ssh-keyscan -t ed25519 HOST` from outside";
    let key_type = line
        .split([' ', '\t'])
        .find(|f| !f.is_empty())
        .unwrap_or("");
    if key_type != "ssh-ed25519" && SSH_KEY_TYPES.contains(&key_type) {
        return Err(invalid(
            format!("a host identity is an Ed25519 key, not `{key_type}`"),
            HELP,
        ));
    }
    ssh_public_key(line).map_err(|e| Invalid {
        message: format!("host identity: {}", e.message),
        help: if key_type == "ssh-ed25519" {
            e.help
        } else {
            HELP.to_string()
        },
    })?;
    let data = line
        .split([' ', '\t'])
        .filter(|f| !f.is_empty())
        .nth(1)
        .unwrap_or_default();
    Ok(format!("ssh-ed25519 {data}"))
}

/// The help for a path written where a key goes: `file=` with a path relative to the spec, and
/// for a path outside the tree (`~/.ssh/…`, `/root/…`, `../…`), to copy it in first.
fn key_file_help(path: &str) -> String {
    let inside = !path.starts_with(['~', '/']) && !path.split('/').any(|part| part == "..");
    if inside {
        return format!(
            "`ssh-key` takes the key itself; to read keys from a file of the spec's tree, write \
             `ssh-key file=\"{path}\"`"
        );
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    format!(
        "`ssh-key` takes the key itself; bellc reads key files only from the spec's own tree \
         (`~` is not expanded): copy it beside the spec and write `ssh-key file=\"{name}\"`"
    )
}

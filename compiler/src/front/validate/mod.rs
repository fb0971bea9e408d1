//! Build-time checks of values whose syntax another tool defines: sysctl keys, crypt hashes,
//! SSH public keys, user and package names, Debian versions, paths, modes, ethtool features,
//! systemd unit names and AppArmor profile file names.
//!
//! bellc moves every decision to build time, so a value the host's tool would reject must be
//! rejected here, with a message that says what is wrong and a help line that teaches the fix.
//! Each check mirrors the rules of the tool that will consume the value; messages never repeat
//! secrets (password hashes) back.

/// What is wrong with a value, for a diagnostic: a one-line message and a help line teaching
/// the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub message: String,
    pub help: String,
}

fn invalid(message: impl Into<String>, help: impl Into<String>) -> Invalid {
    Invalid {
        message: message.into(),
        help: help.into(),
    }
}

/// The first character that is not allowed, shown so a user can find it.
fn show_char(c: char) -> String {
    if c.is_control() || c.is_whitespace() {
        format!("U+{:04X}", u32::from(c))
    } else {
        format!("`{c}`")
    }
}

// ---------------------------------------------------------------------------------------------
// sysctl

const SYSCTL_HELP: &str = "write the key as `sysctl -a` prints it, e.g. `net.ipv4.ip_forward`, \
     or in slash form, e.g. `net/ipv4/conf/eth0.100/rp_filter`";

/// The key in slash form, as sysctl(8) and systemd-sysctl read it: the first separator decides
/// the form, and in dotted form `/` stands for a `.` inside a segment (`sysctl -a` prints
/// `net.ipv4.conf.eth0/100.rp_filter` for the VLAN interface `eth0.100`).
fn sysctl_slash_form(key: &str) -> String {
    match key.find(['.', '/']) {
        Some(i) if key.as_bytes()[i] == b'.' => key
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => key.to_owned(),
    }
}

/// A sysctl key, dotted (`net.ipv4.ip_forward`, `net.ipv4.conf.eth0/100.rp_filter`) or in slash
/// form (`net/ipv4/conf/eth0.100/rp_filter`).
pub fn sysctl_key(key: &str) -> Result<(), Invalid> {
    if key.is_empty() {
        return Err(invalid("sysctl key is empty", SYSCTL_HELP));
    }
    if key.starts_with('-') {
        return Err(invalid(
            format!("sysctl key `{key}` starts with `-`"),
            "in sysctl.d a leading `-` means \"ignore failure\", it is not part of the key; \
             write the key without it",
        ));
    }
    if let Some(c) = key
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || "_-./".contains(c)))
    {
        return Err(invalid(
            format!("sysctl key `{key}` contains {}", show_char(c)),
            SYSCTL_HELP,
        ));
    }
    if key.starts_with(['.', '/']) || key.ends_with(['.', '/']) {
        return Err(invalid(
            format!("sysctl key `{key}` starts or ends with a separator"),
            SYSCTL_HELP,
        ));
    }
    let path = sysctl_slash_form(key);
    let segments: Vec<&str> = path.split('/').collect();
    if segments.len() < 2 {
        return Err(invalid(
            format!("sysctl key `{key}` has only one segment"),
            SYSCTL_HELP,
        ));
    }
    for segment in segments {
        if segment.is_empty() {
            return Err(invalid(
                format!("sysctl key `{key}` has an empty segment"),
                SYSCTL_HELP,
            ));
        }
        if segment == "." || segment.contains("..") {
            return Err(invalid(
                format!("sysctl key `{key}` has a `.` or `..` segment"),
                SYSCTL_HELP,
            ));
        }
    }
    Ok(())
}

/// The path of a (valid) sysctl key relative to `/proc/sys`:
/// `net.ipv4.conf.eth0/100.rp_filter` -> `net/ipv4/conf/eth0.100/rp_filter`.
pub fn sysctl_path(key: &str) -> String {
    sysctl_slash_form(key)
}

// ---------------------------------------------------------------------------------------------
// password hashes

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

// ---------------------------------------------------------------------------------------------
// SSH public keys

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

/// Strict RFC 4648 base64 (standard alphabet, padding required), as in `.pub` files.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn value(b: u8) -> Option<u32> {
        match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    // `is_multiple_of` is newer than the workspace's rust-version (1.80).
    #[allow(clippy::manual_is_multiple_of)]
    if bytes.is_empty() || bytes.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.len() / 4;
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let padding = chunk.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 || (padding > 0 && i + 1 != chunks) {
            return None;
        }
        let mut acc: u32 = 0;
        for &b in &chunk[..4 - padding] {
            acc = (acc << 6) | value(b)?;
        }
        acc <<= 6 * padding as u32;
        let [_, b0, b1, b2] = acc.to_be_bytes();
        let decoded = [b0, b1, b2];
        let keep = 3 - padding;
        // Bits below the last kept byte must be zero, or two texts would decode the same.
        if decoded[keep..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..keep]);
    }
    Some(out)
}

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
    let Some(blob) = decode_base64(data) else {
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

// ---------------------------------------------------------------------------------------------
// names

fn unix_name(kind: &str, tool: &str, name: &str) -> Result<(), Invalid> {
    let help = format!(
        "{tool} accepts names matching `^[a-z_][a-z0-9_-]*\\$?$` of at most 32 characters, e.g. `alice` or `svc_backup`"
    );
    if name.is_empty() {
        return Err(invalid(format!("{kind} is empty"), help));
    }
    let body = name.strip_suffix('$').unwrap_or(name);
    let mut chars = body.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    if !first_ok {
        return Err(invalid(
            format!("{kind} `{name}` must start with a lowercase letter or `_`"),
            help,
        ));
    }
    if let Some(c) = body
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'))
    {
        let message = if c.is_ascii_uppercase() {
            format!("{kind} `{name}` contains uppercase letters")
        } else {
            format!("{kind} `{name}` contains {}", show_char(c))
        };
        return Err(invalid(message, help));
    }
    // Checked after the characters, so the count below is of ASCII characters.
    if name.len() > 32 {
        return Err(invalid(
            format!(
                "{kind} `{name}` is {} characters long, the limit is 32",
                name.len()
            ),
            help,
        ));
    }
    Ok(())
}

/// A user name `useradd` accepts with its default `NAME_REGEX`.
pub fn unix_user_name(name: &str) -> Result<(), Invalid> {
    unix_name("user name", "useradd", name)
}

/// A group name `groupadd` accepts with its default `NAME_REGEX`.
pub fn unix_group_name(name: &str) -> Result<(), Invalid> {
    unix_name("group name", "groupadd", name)
}

/// A Debian package name (policy 5.6.1): `[a-z0-9][a-z0-9+.-]+`.
pub fn apt_package_name(name: &str) -> Result<(), Invalid> {
    let help = "debian package names are lowercase letters, digits and `+ - .`, at least two \
                characters, starting with a letter or digit, e.g. `openssh-server`";
    if name.is_empty() {
        return Err(invalid("package name is empty", help));
    }
    if let Some((package, arch)) = name.split_once(':') {
        return Err(invalid(
            format!("package name `{name}` has an architecture qualifier `:{arch}`"),
            format!("give the package name alone, `{package}`; architecture qualifiers are not supported"),
        ));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(invalid(
            format!("package name `{name}` contains uppercase letters"),
            format!(
                "debian package names are lowercase: `{}`",
                name.to_ascii_lowercase()
            ),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c)))
    {
        return Err(invalid(
            format!("package name `{name}` contains {}", show_char(c)),
            help,
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(invalid(
            format!("package name `{name}` must start with a letter or digit"),
            help,
        ));
    }
    if name.len() < 2 {
        return Err(invalid(
            format!("package name `{name}` is shorter than two characters"),
            help,
        ));
    }
    Ok(())
}

/// A Debian version (policy 5.6.12): `[epoch:]upstream_version[-debian_revision]`.
pub fn apt_version(v: &str) -> Result<(), Invalid> {
    let help = "a debian version is `[epoch:]upstream[-revision]` as `apt-cache policy PKG` shows \
                it, e.g. `1:9.2p1-2+deb12u3`";
    if v.is_empty() {
        return Err(invalid("package version is empty", help));
    }
    let (epoch, rest) = match v.split_once(':') {
        Some((epoch, rest)) => (Some(epoch), rest),
        None => (None, v),
    };
    if let Some(epoch) = epoch {
        if epoch.is_empty() || !epoch.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(
                format!("version `{v}` has an epoch `{epoch}` that is not a number"),
                help,
            ));
        }
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((upstream, revision)) => (upstream, Some(revision)),
        None => (rest, None),
    };
    if let Some(revision) = revision {
        if revision.is_empty() {
            return Err(invalid(
                format!("version `{v}` ends with `-` but has no revision after it"),
                help,
            ));
        }
        if let Some(c) = revision
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || "+.~".contains(c)))
        {
            return Err(invalid(
                format!("version `{v}` has {} in its debian revision", show_char(c)),
                help,
            ));
        }
    }
    if !upstream.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(invalid(
            format!("version `{v}` has an upstream part that does not start with a digit"),
            help,
        ));
    }
    if let Some(c) = upstream
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || ".+~-".contains(c)))
    {
        return Err(invalid(
            format!("version `{v}` contains {}", show_char(c)),
            help,
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// paths and modes

/// An absolute, normalised path for a managed resource: not `/` itself, no `.`/`..` components,
/// no `//`, no trailing `/`, no control characters, within PATH_MAX and NAME_MAX.
pub fn absolute_path(path: &str) -> Result<(), Invalid> {
    let help =
        "write an absolute path without `.`, `..`, doubled or trailing slashes, e.g. `/mnt/data`";
    if !path.starts_with('/') {
        return Err(invalid(format!("path `{path}` is not absolute"), help));
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Err(invalid(
            format!("path contains {}", show_char(c)),
            "control characters (newlines, NUL, ...) are not allowed in paths bell manages",
        ));
    }
    if path == "/" {
        return Err(invalid(
            "path `/` is the root directory",
            "name a file or directory below `/`",
        ));
    }
    if path.len() >= 4096 {
        return Err(invalid(
            format!("path is {} bytes long, the limit is 4095", path.len()),
            help,
        ));
    }
    if path.ends_with('/') {
        return Err(invalid(
            format!("path `{path}` ends with `/`"),
            format!("write `{}`", path.trim_end_matches('/')),
        ));
    }
    for component in path[1..].split('/') {
        match component {
            "" => return Err(invalid(format!("path `{path}` contains `//`"), help)),
            "." | ".." => {
                return Err(invalid(
                    format!("path `{path}` contains a `{component}` component"),
                    help,
                ))
            }
            c if c.len() > 255 => {
                return Err(invalid(
                    format!("path `{path}` has a component longer than 255 bytes"),
                    help,
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A file mode in octal, as chmod takes it: `0640`, `640`, `1777`.
pub fn file_mode(mode: &str) -> Result<u32, Invalid> {
    let help = "write the mode as three or four octal digits, e.g. `0644`, `0750` or `1777`";
    if !(3..=4).contains(&mode.len()) || !mode.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(invalid(
            format!("file mode `{mode}` is not an octal mode"),
            help,
        ));
    }
    u32::from_str_radix(mode, 8)
        .map_err(|_| invalid(format!("file mode `{mode}` is not an octal mode"), help))
}

// ---------------------------------------------------------------------------------------------
// ethtool

const ETHTOOL_FEATURES: &str = include_str!("../../../../stdlib/ethtool/features.txt");

/// The feature names `ethtool -K` accepts, from `stdlib/ethtool/features.txt`.
pub fn ethtool_features() -> impl Iterator<Item = &'static str> {
    ETHTOOL_FEATURES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// A feature name `ethtool -K` knows (whether a given NIC can change it is known only on the host).
pub fn ethtool_feature(name: &str) -> Result<(), Invalid> {
    if ethtool_features().any(|f| f == name) {
        return Ok(());
    }
    let message = format!("unknown ethtool feature `{name}`");
    let help = match did_you_mean(name, ethtool_features()) {
        Some(suggestion) => {
            format!("did you mean `{suggestion}`? `ethtool -k DEV` lists the features of a device")
        }
        None => {
            "`ethtool -k DEV` lists the features of a device, e.g. `tx-tcp-segmentation` or `gro`"
                .to_owned()
        }
    };
    Err(invalid(message, help))
}

// ---------------------------------------------------------------------------------------------
// did you mean

/// Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// The candidate closest to `word` by edit distance, if within `max(1, len/3)` edits. Ties go
/// to the lexicographically smallest candidate, so the answer does not depend on input order.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let threshold = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= threshold)
        .min()
        .map(|(_, c)| c)
}

// ---------------------------------------------------------------------------------------------
// systemd and AppArmor names

const UNIT_SUFFIXES: [&str; 11] = [
    "automount",
    "device",
    "mount",
    "path",
    "scope",
    "service",
    "slice",
    "socket",
    "swap",
    "target",
    "timer",
];

/// A systemd unit name (`foo.service`, `foo@.service`, `foo@bar.timer`, `mnt-data.mount`) with a
/// known suffix, using only the characters systemd allows, at most 255 bytes.
pub fn systemd_unit_name(name: &str) -> Result<(), Invalid> {
    let help = "a unit name is `NAME.SUFFIX` (or `NAME@INSTANCE.SUFFIX`) of `[A-Za-z0-9:_.\\-]`; \
                escape other characters with `systemd-escape`";
    if name.is_empty() {
        return Err(invalid("unit name is empty", help));
    }
    if name.len() > 255 {
        return Err(invalid(
            format!("unit name is {} bytes long, the limit is 255", name.len()),
            help,
        ));
    }
    let Some((stem, suffix)) = name.rsplit_once('.') else {
        return Err(invalid(
            format!("unit name `{name}` has no suffix"),
            "add the unit type, e.g. `.service` or `.timer`",
        ));
    };
    if !UNIT_SUFFIXES.contains(&suffix) {
        let help = match did_you_mean(suffix, UNIT_SUFFIXES) {
            Some(s) => format!("did you mean `.{s}`?"),
            None => format!("unit types: .{}", UNIT_SUFFIXES.join(", .")),
        };
        return Err(invalid(
            format!("unit name `{name}` has an unknown suffix `.{suffix}`"),
            help,
        ));
    }
    if let Some(c) = stem
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || ":-_.\\@".contains(c)))
    {
        return Err(invalid(
            format!("unit name `{name}` contains {}", show_char(c)),
            help,
        ));
    }
    let (prefix, instance) = match stem.split_once('@') {
        Some((prefix, instance)) => (prefix, Some(instance)),
        None => (stem, None),
    };
    if prefix.is_empty() {
        return Err(invalid(
            format!("unit name `{name}` has an empty name before the suffix"),
            help,
        ));
    }
    if instance.is_some_and(|i| i.contains('@')) {
        return Err(invalid(
            format!("unit name `{name}` contains more than one `@`"),
            help,
        ));
    }
    Ok(())
}

/// Endings of files that apparmor_parser skips when it loads /etc/apparmor.d, so a profile with
/// such a name would be silently ignored.
const APPARMOR_SKIPPED_SUFFIXES: [&str; 11] = [
    ".dpkg-new",
    ".dpkg-old",
    ".dpkg-dist",
    ".dpkg-bak",
    ".dpkg-remove",
    ".pacsave",
    ".pacnew",
    ".rpmnew",
    ".rpmsave",
    ".orig",
    ".rej",
];

/// Names under /etc/apparmor.d that are directories or files with another meaning.
const APPARMOR_RESERVED: [&str; 8] = [
    "abi",
    "abstractions",
    "cache",
    "disable",
    "force-complain",
    "local",
    "tunables",
    "README",
];

/// A file name for a profile in /etc/apparmor.d: letters, digits, `. _ + -`, starting with a
/// letter or digit, at most 255 bytes, and not a name apparmor_parser skips or reserves.
pub fn apparmor_profile_name(name: &str) -> Result<(), Invalid> {
    let help = "use letters, digits and `. _ + -`, starting with a letter or digit, \
                e.g. `usr.sbin.nginx` or `bell-backup`";
    if name.is_empty() {
        return Err(invalid("apparmor profile name is empty", help));
    }
    if name.len() > 255 {
        return Err(invalid(
            format!(
                "apparmor profile name is {} bytes long, the limit is 255",
                name.len()
            ),
            help,
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || "._+-".contains(c)))
    {
        return Err(invalid(
            format!("apparmor profile name `{name}` contains {}", show_char(c)),
            help,
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(invalid(
            format!("apparmor profile name `{name}` must start with a letter or digit"),
            help,
        ));
    }
    if let Some(suffix) = APPARMOR_SKIPPED_SUFFIXES
        .iter()
        .find(|s| name.ends_with(*s))
    {
        return Err(invalid(
            format!("apparmor profile name `{name}` ends with `{suffix}`"),
            "apparmor_parser skips files with package-manager backup endings; choose another name",
        ));
    }
    if APPARMOR_RESERVED.contains(&name) {
        return Err(invalid(
            format!("apparmor profile name `{name}` is reserved in /etc/apparmor.d"),
            "that name is a directory or special file there; choose another name",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Names of hosts and resources, and values the compiler checks before rendering.

/// A host name: what `hostname` accepts and what makes a safe file name in `OUT/hosts/`
/// (RFC 1123 labels, dots allowed, at most 253 characters).
pub fn host_name(name: &str) -> Result<(), Invalid> {
    let help = "host names are letters, digits, `-` and `.` (RFC 1123), such as `node-001` or `rack1.node3`";
    if name.is_empty() || name.len() > 253 {
        return Err(invalid(
            format!("host name must be 1 to 253 characters, not {}", name.len()),
            help,
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.' || *c == '_'))
    {
        return Err(invalid(
            format!(
                "host name `{}` contains {}",
                name.escape_debug(),
                show_char(c)
            ),
            help,
        ));
    }
    if name
        .split('.')
        .any(|label| label.is_empty() || label.starts_with('-') || label.ends_with('-'))
    {
        return Err(invalid(
            format!(
                "host name `{name}` has an empty label or a label that starts or ends with `-`"
            ),
            help,
        ));
    }
    Ok(())
}

/// A network interface name as the kernel accepts it (at most 15 bytes, no `/`, `:` or space).
pub fn interface_name(name: &str) -> Result<(), Invalid> {
    let help = "interface names are at most 15 characters without `/`, `:` or whitespace, such as `ens3` or `eth0.100`";
    if name.is_empty() || name.len() > 15 || name == "." || name == ".." {
        return Err(invalid(
            format!("`{}` is not a valid interface name", name.escape_debug()),
            help,
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@')))
    {
        return Err(invalid(
            format!(
                "interface name `{}` contains {}",
                name.escape_debug(),
                show_char(c)
            ),
            help,
        ));
    }
    Ok(())
}

/// A name that becomes part of a file name bell writes (exec scripts, apt sources, limits).
fn plain_name(name: &str, what: &str, example: &str) -> Result<(), Invalid> {
    let help = format!("{what} names are letters, digits, `.`, `_` and `-`, such as `{example}`");
    if name.is_empty() || name.len() > 128 || name.starts_with('.') || name.starts_with('-') {
        return Err(invalid(
            format!("`{}` is not a valid {what} name", name.escape_debug()),
            help,
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(invalid(
            format!(
                "{what} name `{}` contains {}",
                name.escape_debug(),
                show_char(c)
            ),
            help,
        ));
    }
    Ok(())
}

pub fn script_name(name: &str) -> Result<(), Invalid> {
    plain_name(name, "exec script", "001-setup.sh")
}

pub fn source_name(name: &str) -> Result<(), Invalid> {
    plain_name(name, "apt source", "ubuntu")
}

pub fn resource_name(name: &str) -> Result<(), Invalid> {
    plain_name(name, "resource", "core_dump")
}

/// A mount target: an absolute normalised path outside the kernel's virtual file systems.
pub fn mount_target(path: &str) -> Result<(), Invalid> {
    absolute_path(path)?;
    for virtual_fs in ["/proc", "/sys", "/dev"] {
        if path == virtual_fs || path.starts_with(&format!("{virtual_fs}/")) {
            return Err(invalid(
                format!("cannot mount on `{path}`: {virtual_fs} belongs to the kernel"),
                "mount somewhere bell can own, such as /mnt/NAME or /srv/NAME",
            ));
        }
    }
    Ok(())
}

/// An apt repository URL.
pub fn apt_url(url: &str) -> Result<(), Invalid> {
    let help = "write the repository's base URL, such as `http://deb.debian.org/debian` or `file:/srv/repo`";
    let ok_scheme = [
        "http://",
        "https://",
        "file:",
        "mirror+http://",
        "mirror+https://",
        "cdrom:",
    ]
    .iter()
    .any(|s| url.starts_with(s));
    if !ok_scheme {
        return Err(invalid(
            format!("`{}` is not an apt URL", url.escape_debug()),
            help,
        ));
    }
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(format!("apt URL contains {}", show_char(c)), help));
    }
    Ok(())
}

/// An ASCII-armoured OpenPGP public key block, as `Signed-By` keyrings take it.
pub fn pgp_public_key(text: &str) -> Result<(), Invalid> {
    let help = "paste the output of `gpg --armor --export KEYID`, from `-----BEGIN PGP PUBLIC KEY BLOCK-----` to `-----END PGP PUBLIC KEY BLOCK-----`";
    let trimmed = text.trim();
    if !trimmed.starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        || !trimmed.ends_with("-----END PGP PUBLIC KEY BLOCK-----")
    {
        return Err(invalid(
            "`key` is not an armoured PGP public key block",
            help,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_strict() {
        assert_eq!(decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(decode_base64("aGkh").as_deref(), Some(&b"hi!"[..]));
        assert_eq!(decode_base64("aA==").as_deref(), Some(&b"h"[..]));
        assert_eq!(decode_base64("aGl="), None, "non-zero padding bits");
        assert_eq!(decode_base64("aGk"), None);
        assert_eq!(decode_base64("a=Gk"), None);
        assert_eq!(decode_base64("aGk=aGk="), None);
        assert_eq!(decode_base64("a===",), None);
        assert_eq!(decode_base64(""), None);
    }

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("tso", "tos"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

//! Names of hosts and resources, and values the compiler checks before rendering (mount
//! targets, apt URLs, PGP keys).

use super::*;

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
    if let Some(c) = first_outside(name, "-.") {
        // `_` is the common one (`cmp_04`): hostnamectl, DNS and Kubernetes node names all
        // refuse it, so the host would never be called what the spec calls it.
        let help = if c == '_' {
            format!(
                "host names are letters, digits, `-` and `.` (RFC 1123); write `{}`",
                name.replace('_', "-")
            )
        } else {
            help.to_string()
        };
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

/// A host's `address`: an IPv4 or IPv6 address, as services hand it to the configuration of
/// other hosts (`peers=10.0.0.1,10.0.0.2`) and `bellc status` shows it.
pub fn host_address(address: &str) -> Result<(), Invalid> {
    if address.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let v4 = address.split('.').collect::<Vec<_>>();
    let message = if v4.len() == 4
        && v4
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        match v4.iter().find(|p| p.parse::<u8>().is_err() || (p.len() > 1 && p.starts_with('0'))) {
            Some(part) => format!("`{address}` is not an IPv4 address: `{part}` is not a number from 0 to 255 without leading zeros"),
            None => format!("`{address}` is not an IP address"),
        }
    } else {
        format!("`{}` is not an IP address", address.escape_debug())
    };
    Err(invalid(
        message,
        "write the host's IPv4 (such as 10.0.2.15) or IPv6 (such as fd00::15) address; its name is the `host` argument",
    ))
}

/// A host label: one line of printable text each side. Labels are printed one per host in
/// `bellc hosts` and `bellc status`, matched by selectors and read by templates; a newline or
/// another control character in one would forge lines there.
pub fn label(key: &str, value: &str) -> Result<(), Invalid> {
    let help = "a label and its value are printable text on one line, such as `rack=\"r01\"`";
    if key.is_empty() {
        return Err(invalid("a label name is empty", help));
    }
    for (what, text) in [("label name", key), ("value of label", value)] {
        if text.chars().any(char::is_control) {
            return Err(invalid(
                format!(
                    "the {what} `{}` holds a control character (such as a newline)",
                    text.escape_debug()
                ),
                help,
            ));
        }
        if text.len() > 253 {
            return Err(invalid(
                format!(
                    "the {what} is {} bytes long; labels hold at most 253",
                    text.len()
                ),
                help,
            ));
        }
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
    if let Some(c) = first_outside(name, "-_.@") {
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
    if let Some(c) = first_outside(name, "._-") {
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

/// A repository snapshot of an apt source (`20261120T000000Z`, `2026-11-20`, `r42`): one path
/// segment of its URL, so a word of URL characters that is not `.` or `..`.
pub fn apt_snapshot(snapshot: &str) -> Result<(), Invalid> {
    let help = "name the snapshot as the archive does, such as \"20261120T000000Z\" \
                (snapshot.debian.org) or \"2026-11-20\"";
    if snapshot.is_empty() || snapshot.len() > 64 {
        return Err(invalid("a snapshot is a word of 1 to 64 characters", help));
    }
    if let Some(c) = snapshot
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~+:".contains(*c)))
    {
        return Err(invalid(
            format!("a snapshot cannot hold {}", show_char(c)),
            format!(
                "{help}; it is filled into the URL as one path segment: letters, digits, `-._~+:`"
            ),
        ));
    }
    if snapshot == "." || snapshot == ".." {
        return Err(invalid(format!("`{snapshot}` is not a snapshot"), help));
    }
    Ok(())
}

pub fn resource_name(name: &str) -> Result<(), Invalid> {
    plain_name(name, "resource", "core_dump")
}

/// A mount target: an absolute normalised path outside the kernel's virtual file systems.
pub fn mount_target(path: &str) -> Result<(), Invalid> {
    absolute_path(path)?;
    // It is also the `Where=` of the mount unit.
    super::unit_setting(path)?;
    super::not_bell_own(path)?;
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

/// Where an apt source's `snapshot` goes in its URL: the one spelling of a pinned repository
/// snapshot, so that the URL a reviewer reads says where the snapshot lands.
pub const SNAPSHOT_PLACEHOLDER: &str = "{snapshot}";

/// An apt repository URL, which may hold [`SNAPSHOT_PLACEHOLDER`] (the source's `snapshot`).
pub fn apt_url(url: &str) -> Result<(), Invalid> {
    let help = "write the repository's base URL, such as `http://deb.debian.org/debian` or `file:/srv/repo`";
    if url.matches(SNAPSHOT_PLACEHOLDER).count() > 1 {
        return Err(invalid(
            format!(
                "`{}` holds `{SNAPSHOT_PLACEHOLDER}` more than once",
                url.escape_debug()
            ),
            "write `{snapshot}` once, where the snapshot goes, such as \
             `http://snapshot.debian.org/archive/debian/{snapshot}`",
        ));
    }
    // The placeholder stands for a snapshot id, which `apt_snapshot` keeps to URL characters.
    let url = &url.replace(SNAPSHOT_PLACEHOLDER, "0");
    if let Some(start) = url.find('{') {
        let word = &url[start
            ..url[start..]
                .find('}')
                .map_or(url.len(), |end| start + end + 1)];
        return Err(invalid(
            format!(
                "`{}` is not a placeholder of an apt URL",
                word.escape_debug()
            ),
            "the one placeholder is `{snapshot}`, filled with the source's `snapshot`; \
             percent-encode a literal brace (`%7B`, `%7D`)",
        ));
    }
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
    // What apt reads is what it fetches only for a URL made of the characters RFC 3986 allows
    // unencoded; a `?` or `#` would end the path at the mirror, and the host is a plain name.
    let (scheme, rest) = url.split_once(':').unwrap_or(("", url));
    let (authority, path) = match rest.strip_prefix("//") {
        Some(rest) if scheme.ends_with("http") || scheme.ends_with("https") => {
            rest.split_at(rest.find('/').unwrap_or(rest.len()))
        }
        _ => ("", rest),
    };
    if scheme.ends_with("http") || scheme.ends_with("https") {
        // `[IPv6]` or a name or IPv4 address, then `:PORT` or nothing.
        let (ipv6, host, port) = match authority.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((address, port)) => (Some(address), "", port),
            None => {
                let end = authority.find(':').unwrap_or(authority.len());
                (None, &authority[..end], &authority[end..])
            }
        };
        let host_ok = match ipv6 {
            Some(address) => {
                !address.is_empty()
                    && address
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            }
            None => {
                !host.is_empty()
                    && host.split('.').all(|label| {
                        !label.is_empty()
                            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    })
            }
        };
        let port_ok = port.is_empty()
            || port.strip_prefix(':').is_some_and(|p| {
                !p.is_empty() && p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit())
            });
        if !host_ok || !port_ok {
            return Err(invalid(
                format!(
                    "`{}` is not a host name or address of an apt URL",
                    authority.escape_debug()
                ),
                "the host of a URL is a DNS name, an IPv4 address or `[IPv6]`, with an optional \
                 `:PORT`; credentials go into apt's auth.conf, not the URL",
            ));
        }
    }
    url_path(path)
}

/// The path of a URL (or a word of one, such as an apt suite): the characters RFC 3986 allows
/// unencoded, and `%` only before two hex digits. apt fetches such a path as it is written.
pub fn url_path(path: &str) -> Result<(), Invalid> {
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        let ok = c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/".contains(c);
        if c == '%' {
            let hex = (chars.next(), chars.next());
            if let (Some(a), Some(b)) = hex {
                if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() {
                    continue;
                }
            }
            return Err(invalid(
                "a `%` in a URL must be followed by two hex digits",
                "write a literal `%` as `%25`",
            ));
        }
        if !ok {
            return Err(invalid(
                format!(
                    "{} cannot stand unencoded in a URL, and apt puts this into one",
                    show_char(c)
                ),
                format!(
                    "percent-encode it (`%{:02X}` per UTF-8 byte) or drop it",
                    u32::from(c).min(0xff)
                ),
            ));
        }
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

//! sysctl keys, as sysctl(8) and systemd-sysctl read them.

use super::*;

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
    if let Some(c) = first_outside(key, "_-./") {
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

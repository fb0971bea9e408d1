//! systemd unit names and AppArmor profile file names.

use super::*;

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
    if let Some(c) = first_outside(stem, ":-_.\\@") {
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
    if let Some(c) = first_outside(name, "._+-") {
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

/// A value that becomes a plain unit file setting (`What=`, `Type=`, `Options=`): checked where
/// it is written, in the first pass, with the rules the unit file writer applies
/// ([`crate::escape::unit_value`]), so that it is reported beside every other mistake.
pub fn unit_setting(value: &str) -> Result<(), Invalid> {
    crate::escape::unit_value(value).map(|_| ()).map_err(|why| {
        invalid(
            format!("`{}` {why}", value.escape_debug()),
            "this value becomes one line of a systemd unit file; write it on one line, \
             without control characters or surrounding blanks",
        )
    })
}

/// A unit setting that must say something: an empty `What=` makes systemd refuse the mount, and
/// an empty `Type=` silently means "guess".
pub fn unit_setting_not_empty(value: &str) -> Result<(), Invalid> {
    if value.is_empty() {
        return Err(invalid(
            "this value is empty",
            "an empty value would leave the setting unset in the unit file; give the value",
        ));
    }
    unit_setting(value)
}

/// Unit names separated by blanks, as mount ordering (`before`, `after`) takes them.
pub fn unit_name_list(text: &str) -> Result<(), Invalid> {
    unit_setting(text)?;
    for name in text.split_whitespace() {
        systemd_unit_name(name)?;
    }
    Ok(())
}

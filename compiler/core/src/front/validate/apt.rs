//! Unix user and group names as `useradd`/`groupadd` take them, and Debian package names and
//! versions as dpkg does.

use super::*;

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
        if let Some(c) = first_outside(revision, "+.~") {
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
    if let Some(c) = first_outside(upstream, ".+~-") {
        return Err(invalid(
            format!("version `{v}` contains {}", show_char(c)),
            help,
        ));
    }
    Ok(())
}

/// The `components` of an apt source: words on one deb822 line.
pub fn apt_words(text: &str) -> Result<(), Invalid> {
    match text.chars().find(|c| c.is_control() && *c != '\t') {
        Some(c) => Err(invalid(
            format!(
                "`{}` holds {}, which a deb822 field cannot",
                text.escape_debug(),
                show_char(c)
            ),
            "list the values separated by spaces, such as \"main contrib\"",
        )),
        // Split as apt splits, at blanks only: any other space is a character of a word, and
        // one a URL cannot hold.
        None if text.contains('%') => Err(invalid(
            format!("`{}` holds `%`", text.escape_debug()),
            "apt quotes a `%` of a suite but not of a component, so the two would name \
             different paths; suites and components are plain words such as \"main\"",
        )),
        None => text
            .split([' ', '\t'])
            .filter(|word| !word.is_empty())
            .try_for_each(super::names::url_path),
    }
}

/// The `suites` of an apt source: at least one word, on one deb822 line.
pub fn apt_suites(text: &str) -> Result<(), Invalid> {
    apt_words(text)?;
    if text.split_whitespace().next().is_none() {
        return Err(invalid(
            "the list of suites is empty",
            "name at least one suite, such as \"bookworm\" or \"noble noble-updates\"",
        ));
    }
    Ok(())
}

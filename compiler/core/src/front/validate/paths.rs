//! Absolute paths of managed files and file modes.

use super::*;

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

/// What bell itself keeps on a host: its state (bundles, the lock, backups, staged secrets),
/// the key that signed releases are checked with, and the runner. A resource that wrote,
/// mounted over or changed the mode of one of these could defeat the lock, forge what bell
/// restores, or let anyone replace the runner (where it is copied by hand, and where its Debian
/// package installs it).
pub const BELL_OWN: &[&str] = &[
    "/var/lib/bell",
    "/etc/bell",
    "/usr/local/sbin/bell-run",
    "/usr/sbin/bell-run",
];

/// The keys a host trusts releases from: of bell's own, the one file a spec may manage (as a
/// `file`), so that a release signed by the old key can add the new one and a later release,
/// signed by the new key, remove the old (`docs/running-a-fleet.md`, "Rotating it").
pub const TRUST_FILE: &str = "/etc/bell/trusted.pub";

/// A path that is not bell's own (see [`BELL_OWN`]).
pub fn not_bell_own(path: &str) -> Result<(), Invalid> {
    match BELL_OWN
        .iter()
        .find(|own| path == **own || path.strip_prefix(**own).is_some_and(|r| r.starts_with('/')))
    {
        Some(own) => Err(bell_own(path, own)),
        None => Ok(()),
    }
}

/// A glob (as `perm` takes it) that can match nothing of bell's own: a glob's `*` does not
/// cross `/`, so it can reach into `/var/lib/bell` only if its first three components each
/// match those of `/var/lib/bell`.
pub fn glob_not_bell_own(pattern: &str) -> Result<(), Invalid> {
    let parts: Vec<&str> = pattern.split('/').collect();
    for own in BELL_OWN {
        let own_parts: Vec<&str> = own.split('/').collect();
        if parts.len() < own_parts.len() {
            continue;
        }
        let reaches = own_parts
            .iter()
            .zip(&parts)
            .all(|(o, p)| glob::Pattern::new(p).map_or(o == p, |p| p.matches(o)));
        if reaches {
            return Err(bell_own(pattern, own));
        }
    }
    Ok(())
}

fn bell_own(path: &str, own: &str) -> Invalid {
    invalid(
        format!("`{path}` is bell's own `{own}`"),
        "bell keeps its state, trusted key and runner there; a resource there could defeat the \
         lock or what bell restores. Manage another path (of these, only a `file` at \
         `/etc/bell/trusted.pub`, the trusted keys, may be managed)",
    )
}

/// A file mode in octal, as chmod takes it: `0640`, `640`, `1777`.
pub fn file_mode(mode: &str) -> Result<u32, Invalid> {
    let octal = mode.bytes().all(|b| (b'0'..=b'7').contains(&b));
    // One way to write a mode, as chmod's documentation and LANGUAGE.md do: four digits. `644`
    // reads as octal to chmod but as decimal to many a reader (and to KDL, unquoted).
    if octal && mode.len() == 3 {
        return Err(invalid(
            format!("file mode `{mode}` has three digits"),
            format!("write the mode as four octal digits: `\"0{mode}\"`"),
        ));
    }
    let help = "write the mode as four octal digits, e.g. `\"0644\"`, `\"0750\"` or `\"1777\"`";
    if mode.len() != 4 || !octal {
        return Err(invalid(
            format!("file mode `{mode}` is not an octal mode"),
            help,
        ));
    }
    u32::from_str_radix(mode, 8)
        .map_err(|_| invalid(format!("file mode `{mode}` is not an octal mode"), help))
}

/// A login shell: an absolute path that fits in an /etc/passwd field.
pub fn login_shell(path: &str) -> Result<(), Invalid> {
    absolute_path(path)?;
    if path.contains(':') {
        return Err(invalid(
            format!(
                "shell `{}` holds a `:`, which separates /etc/passwd fields",
                path.escape_debug()
            ),
            "give the path of a login shell, such as \"/bin/bash\"",
        ));
    }
    Ok(())
}

//! The domain of a limits.conf(5) rule: whom pam_limits applies it to.
//!
//! pam_limits skips a rule it cannot read and says so only in the journal, so a misread domain
//! leaves a limit unset without a word. `tests/hostile_strings.rs` puts every domain that passes
//! here to the real pam_limits, through a session as the user the domain names.

use super::*;

const HELP: &str = "a domain is `*`, a user name, `@group`, a uid range (`1000:`, `1000:1999`, \
                    `:1000` for one uid), a gid range (`@1000:`, `@1000:1999`, `@:1000`), or \
                    `%group`, `%:GID` or `%` for `maxlogins`";

/// A domain that pam_limits reads as it is written. Whether a `%` domain suits its item is the
/// limit's own check (`%` counts logins, so pam_limits takes it for `maxlogins` only).
pub fn limits_domain(domain: &str) -> Result<(), Invalid> {
    if let Err(why) = crate::escape::limits_field(domain) {
        return Err(invalid(format!("invalid limits.conf field: {why}"), HELP));
    }
    if domain == "*" {
        return Ok(());
    }
    let (sigil, rest) = match domain.strip_prefix(['@', '%']) {
        Some(rest) => (domain.chars().next(), rest),
        None => (None, domain),
    };
    if let Some((min, max)) = rest.split_once(':') {
        return id_range(domain, sigil, min, max);
    }
    match sigil {
        Some('%') if rest.is_empty() => Ok(()),
        Some(c) if rest.is_empty() => Err(invalid(
            format!("`{c}` names no group"),
            "write the group after it, e.g. `@wheel`",
        )),
        Some(_) => account_name(domain, "group", rest),
        None => account_name(domain, "user", rest),
    }
}

/// `MIN:`, `MIN:MAX` or `:ID`, decimal, as pam_limits' `parse_uid_range` reads it; an id must
/// fit a uid_t, which pam_limits would otherwise truncate (`4294967296:` is every uid from 0).
fn id_range(domain: &str, sigil: Option<char>, min: &str, max: &str) -> Result<(), Invalid> {
    let what = if sigil.is_some() { "gid" } else { "uid" };
    let id = |text: &str| -> Result<Option<u32>, Invalid> {
        if text.is_empty() {
            return Ok(None);
        }
        match text.parse::<u32>() {
            Ok(id) if text.bytes().all(|b| b.is_ascii_digit()) && id != u32::MAX => Ok(Some(id)),
            _ => Err(invalid(
                format!(
                    "`{domain}` is not a {what} range: `{text}` is not a {what} \
                     (a decimal number below 4294967295)"
                ),
                HELP,
            )),
        }
    };
    let (min, max) = (id(min)?, id(max)?);
    match (sigil, min, max) {
        (_, None, None) => Err(invalid(
            format!("`{domain}` is not a {what} range: it holds no {what}"),
            HELP,
        )),
        (Some('%'), Some(_), _) => Err(invalid(
            format!("`{domain}`: pam_limits takes no range after `%`, only one gid (`%:GID`)"),
            HELP,
        )),
        (_, Some(min), Some(max)) if min > max => Err(invalid(
            format!("`{domain}` is an empty range: {min} is above {max}"),
            HELP,
        )),
        _ => Ok(()),
    }
}

/// A user or group name as the passwd and group databases hold it. Lines starting with `+` or
/// `-` are NIS compat entries there, never an account, and `:` separates fields.
fn account_name(domain: &str, what: &str, name: &str) -> Result<(), Invalid> {
    if name.starts_with(['+', '-']) {
        return Err(invalid(
            format!(
                "`{domain}` names no {what}: a {what} name cannot start with `{}`",
                &name[..1]
            ),
            HELP,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_pam_limits_reads() {
        for ok in [
            "*",
            "alice",
            "@wheel",
            "%",
            "%ops",
            "%:100",
            "1000:",
            "1000:1999",
            ":0",
            "@1000:",
            "@:27",
            "@5:5",
            "jdoe@corp.example",
        ] {
            assert!(limits_domain(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn domains_pam_limits_would_skip_or_misread() {
        for bad in [
            "",
            "@",
            "a b",
            "a#b",
            ":",
            "@:",
            "1000:c37",
            "10x0:",
            "+1:",
            "1000:999",
            "4294967296:",
            "4294967295:",
            "%1000:",
            "%10:20",
            "+alice",
            "-alice",
            "@+nis",
            ":ops",
            "o:ps",
        ] {
            assert!(limits_domain(bad).is_err(), "{bad}");
        }
    }
}

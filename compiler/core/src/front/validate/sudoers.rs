//! A sudo rule as `user NAME sudo="..."` writes it: the part of a sudoers(5) `User_Spec` after
//! the user name.
//!
//! The drop-in is checked by `visudo -c` on the host before sudo reads it, so a rule visudo
//! refuses would only fail there, after the rollout began. bellc checks the rule at build time
//! instead, against a part of the sudoers grammar that visudo always accepts:
//!
//! ```text
//! rule      = hosts "=" commands { ":" hosts "=" commands }
//! hosts     = host { "," host }               host = { "!" } word
//! commands  = command { "," command }
//! command   = [ "(" [ runas ] [ ":" runas ] ")" ] { TAG ":" } { "!" } ( "ALL" | ALIAS | path [ args ] | "sudoedit" args )
//! runas     = { "!" } word { "," { "!" } word }
//! ```
//!
//! Arguments are printable ASCII; `,` `:` `=` `\` in them are written escaped with `\`, as
//! sudoers requires. Anything else (Defaults, aliases defined inline, digests, IPv6 hosts,
//! quoted or non-ASCII arguments) is refused with a help line saying what is accepted.

use super::{invalid, show_char, Invalid};

const TAGS: &[&str] = &[
    "EXEC",
    "NOEXEC",
    "FOLLOW",
    "NOFOLLOW",
    "LOG_INPUT",
    "NOLOG_INPUT",
    "LOG_OUTPUT",
    "NOLOG_OUTPUT",
    "MAIL",
    "NOMAIL",
    "INTERCEPT",
    "NOINTERCEPT",
    "PASSWD",
    "NOPASSWD",
    "SETENV",
    "NOSETENV",
];

const HELP: &str = "write the rule after the user name as `HOSTS=(RUNAS) COMMANDS`, such as \
                    `ALL=(root) NOPASSWD: /usr/bin/systemctl restart nginx, /usr/bin/journalctl`; \
                    commands are `ALL`, an alias or an absolute path with arguments, and `,` `:` \
                    `=` `\\` in arguments are escaped with `\\`";

struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    fn blanks(&mut self) {
        self.rest = self.rest.trim_start_matches([' ', '\t']);
    }

    fn eat(&mut self, c: char) -> bool {
        self.blanks();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// The longest run of characters satisfying `ok`, after blanks.
    fn word(&mut self, ok: impl Fn(char) -> bool) -> &'a str {
        self.blanks();
        let end = self.rest.find(|c| !ok(c)).unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        word
    }

    fn expected(&self, what: &str) -> Invalid {
        match self.rest.chars().next() {
            Some(c) => invalid(
                format!("sudo rule: expected {what}, found {}", show_char(c)),
                HELP,
            ),
            None => invalid(format!("sudo rule: expected {what} at the end"), HELP),
        }
    }
}

fn is_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// A host (a name, `ALL`, an alias, `+netgroup`, or an IPv4 address with an optional mask) or,
/// with `runas`, a user or group to run as (a name, `ALL`, an alias, `%group`, `#uid`, `%#gid`,
/// `+netgroup`).
fn list_item(p: &mut Cursor, runas: bool) -> Result<(), Invalid> {
    let what = if runas {
        "a user or group to run as"
    } else {
        "a host, `ALL` or a host alias"
    };
    while p.eat('!') {}
    p.blanks();
    let mut id = false;
    if let Some(rest) = p.rest.strip_prefix('+') {
        p.rest = rest;
    } else if runas {
        if let Some(rest) = p.rest.strip_prefix('%') {
            p.rest = rest;
        }
        if let Some(rest) = p.rest.strip_prefix('#') {
            p.rest = rest;
            id = true;
        }
    }
    let word = if id {
        p.word(|c| c.is_ascii_digit())
    } else if runas {
        p.word(is_name)
    } else {
        p.word(|c| is_name(c) || c == '/')
    };
    let address = |w: &str| {
        w.chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '/')
    };
    if word.is_empty() || (word.contains('/') && !address(word)) {
        return Err(p.expected(what));
    }
    Ok(())
}

/// `item, item, ...`: a host list, or with `runas` a list of users and groups to run as.
fn list(p: &mut Cursor, runas: bool) -> Result<(), Invalid> {
    loop {
        list_item(p, runas)?;
        if !p.eat(',') {
            return Ok(());
        }
    }
}

fn hosts(p: &mut Cursor) -> Result<(), Invalid> {
    list(p, false)
}

fn runas(p: &mut Cursor) -> Result<(), Invalid> {
    p.blanks();
    if p.rest.starts_with([':', ')']) {
        return Ok(());
    }
    list(p, true)
}

/// Arguments up to the next unescaped `,` or `:` or the end.
fn args(p: &mut Cursor) -> Result<(), Invalid> {
    p.blanks();
    // sudo reads arguments that start with `^` as a regular expression.
    if p.rest.starts_with('^') {
        return Err(invalid(
            "sudo rule: arguments starting with `^` are a regular expression, which bellc does \
             not check",
            HELP,
        ));
    }
    let mut chars = p.rest.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            ',' | ':' => {
                p.rest = &p.rest[at..];
                return Ok(());
            }
            '\\' => match chars.next() {
                Some((_, ',' | ':' | '=' | '\\')) => {}
                _ => {
                    return Err(invalid(
                        "sudo rule: `\\` in arguments escapes only `,` `:` `=` or `\\`",
                        HELP,
                    ))
                }
            },
            '=' | '#' | '"' | '(' | ')' | '!' => {
                return Err(invalid(
                    format!(
                        "sudo rule: {} in a command's arguments must be escaped or is not \
                         supported",
                        show_char(c)
                    ),
                    HELP,
                ))
            }
            ' ' | '\t' => {}
            c if c.is_ascii_graphic() => {}
            c => {
                return Err(invalid(
                    format!("sudo rule: {} in a command's arguments", show_char(c)),
                    HELP,
                ))
            }
        }
    }
    p.rest = "";
    Ok(())
}

fn command(p: &mut Cursor) -> Result<(), Invalid> {
    if p.eat('(') {
        runas(p)?;
        if p.eat(':') {
            // `(user:)` is refused by sudoers; `(:group)` is not.
            p.blanks();
            if p.rest.starts_with(')') {
                return Err(p.expected("a group to run as after `:`"));
            }
            runas(p)?;
        }
        if !p.eat(')') {
            return Err(p.expected("`)` after the users to run as"));
        }
    }
    loop {
        p.blanks();
        let Some(tag) = TAGS.iter().find(|tag| {
            p.rest
                .strip_prefix(**tag)
                .is_some_and(|r| r.starts_with(':'))
        }) else {
            break;
        };
        p.rest = &p.rest[tag.len() + 1..];
    }
    while p.eat('!') {}
    p.blanks();
    if p.rest.starts_with('/') {
        let path = p.word(|c| {
            c.is_ascii_graphic()
                && !matches!(c, ',' | ':' | '=' | '\\' | '#' | '"' | '(' | ')' | '!')
        });
        if path.ends_with('/') {
            return Err(invalid(
                format!("sudo rule: `{path}` is a directory, not a command"),
                HELP,
            ));
        }
        return args(p);
    }
    let word = p.word(|c| c.is_ascii_alphanumeric() || c == '_');
    match word {
        "sudoedit" => args(p),
        w if !w.is_empty()
            && w.starts_with(|c: char| c.is_ascii_uppercase())
            && w.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') =>
        {
            Ok(())
        }
        _ => Err(p.expected("`ALL`, a command alias or a command's absolute path")),
    }
}

/// Checks a sudo rule (see the module comment for what is accepted).
pub fn sudo_rule(rule: &str) -> Result<(), Invalid> {
    let mut p = Cursor { rest: rule };
    loop {
        hosts(&mut p)?;
        if !p.eat('=') {
            return Err(p.expected("`=` after the hosts"));
        }
        loop {
            command(&mut p)?;
            if !p.eat(',') {
                break;
            }
        }
        if !p.eat(':') {
            break;
        }
    }
    p.blanks();
    if !p.rest.is_empty() {
        return Err(p.expected("`,` or `:` between commands"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sudo_rule;

    #[test]
    fn rules_visudo_takes_are_taken() {
        for rule in [
            "ALL=(ALL:ALL) NOPASSWD: ALL",
            "ALL=(root) /usr/bin/systemctl restart nginx, /usr/bin/journalctl",
            "ALL = (root) NOPASSWD: SETENV: /bin/ls -l /tmp, !/bin/su",
            "web1,10.0.0.0/8=(%www:#33) /usr/bin/kill -HUP 1 : db1=(ALL) ALL",
            "ALL=(ALL) /usr/bin/printf a\\,b\\:c\\=d\\\\",
            "ALL=() sudoedit /etc/hosts",
            "ALL=(:adm) /bin/ls",
            "ALL=(root) SERVICES",
        ] {
            assert!(
                sudo_rule(rule).is_ok(),
                "{rule}: {:?}",
                sudo_rule(rule).err()
            );
        }
    }

    #[test]
    fn rules_visudo_refuses_are_refused() {
        for rule in [
            "1=n\\d5_",
            "ALL",
            "=ALL",
            "ALL=",
            "ALL=(root",
            "ALL=(root) systemctl",
            "ALL=(root) /bin/echo a=b",
            "ALL=(root) /bin/echo #x",
            "ALL=(root) /bin/echo \"x\"",
            "ALL=(root) /bin/echo ünï",
            "ALL=(root) ALL junk",
            "ALL=(root) NOPASSWD ALL",
            "ALL=(root:) /bin/ls",
            "ALL=(root) /bin/ls ^a b",
        ] {
            assert!(sudo_rule(rule).is_err(), "{rule} was taken");
        }
    }
}

//! `bell-run CMD --help` (and `bell-run help CMD`): what one command does and every option it
//! takes, so that a reader on a host need not find the README. The text is the command line's
//! own definition (`bell_run::spec`), which the parser, the man pages and the completions read.

pub(crate) use bell_run::spec::{MARKERS, USAGE};

/// The help of `command`, or `None` when there is no such command.
pub fn of(command: &str) -> Option<String> {
    bell_run::spec::command(command).map(|c| c.help())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_of_the_usage_has_its_help() {
        let usage = super::USAGE;
        let commands: Vec<&str> = usage
            .lines()
            .filter_map(|l| {
                l.trim_start()
                    .strip_prefix("usage: ")
                    .or(Some(l.trim_start()))
            })
            .filter_map(|l| l.strip_prefix("bell-run "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(commands.len() >= 11, "{commands:?}");
        for command in commands {
            let help = super::of(command).unwrap_or_else(|| panic!("no help for `{command}`"));
            assert!(
                help.starts_with(&format!("usage: bell-run {command}")),
                "{command}: {help}"
            );
        }
        assert!(super::of("frobnicate").is_none());
    }

    /// The summary of all commands names only options its commands take.
    #[test]
    fn the_usage_names_only_options_of_its_command() {
        let mut command = None;
        for line in super::USAGE
            .lines()
            .take_while(|l| !l.starts_with("every command"))
        {
            let line = line.trim_start().trim_start_matches("usage: ");
            if let Some(rest) = line.strip_prefix("bell-run ") {
                command = rest.split_whitespace().next();
            }
            let spec = command
                .and_then(bell_run::spec::command)
                .unwrap_or_else(|| panic!("no command for {line}"));
            for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
                    assert!(spec.flag(long).is_some(), "{}: --{long}", spec.name);
                }
            }
        }
    }

    /// A default said in the help or the guide is the one the code has: the help once said
    /// `--alive-ttl` lasts 900 s while the code gave 2700.
    #[test]
    fn defaults_said_in_help_and_readme_are_the_codes() {
        let guide = [
            include_str!("../../docs/reviewing.md"),
            include_str!("../../docs/security-model.md"),
        ]
        .concat();
        let readme = guide.as_str();
        let alive = crate::report::DEFAULT_ALIVE_TTL;
        let script = crate::apply::DEFAULT_SCRIPT_TIMEOUT;
        let fetch = crate::fetch::DEFAULT_FETCH_TIMEOUT.as_secs();
        let help = |command: &str, flag: &str| {
            bell_run::spec::command(command)
                .and_then(|c| c.flag(flag))
                .map(|f| f.help)
                .unwrap_or_else(|| panic!("{command} has no --{flag}"))
        };
        for (text, said) in [
            (
                help("apply", "alive-ttl"),
                format!("default {alive}, >= 10"),
            ),
            (readme, format!("(`--alive-ttl SECS`, default {alive}:")),
            (help("apply", "timeout"), format!("(default {script});")),
            (readme, format!("(`--fetch-timeout`, {fetch} s by default;")),
            (
                help("pull", "fetch-timeout"),
                format!("last byte (default {fetch})"),
            ),
            (
                help("live", "every"),
                format!("(default {})", crate::live_mode::DEFAULT_EVERY),
            ),
        ] {
            assert!(text.contains(&said), "`{said}` is not said");
        }
        let identity = super::of("identity").expect("identity's help");
        for path in [crate::identity::SSH_HOST_KEY, crate::identity::BELL_KEY] {
            assert!(identity.contains(path), "{identity}");
        }
    }
}

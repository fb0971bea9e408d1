//! `bellc completions SHELL` and `bellc man-pages DIR`: both made by clap from the definitions
//! in `args.rs` that parse the command line, so neither can name a flag bellc does not take or
//! miss one it does. The Debian package ships what these print (`packaging/build-deb`).

use crate::args::Cli;
use crate::Failure;
use clap::CommandFactory;
use std::path::Path;

pub fn completions(shell: clap_complete::Shell) {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "bellc", &mut out);
    use std::io::Write as _;
    // A reader that went away loses the rest; the exit code still says it was printed.
    let _ = std::io::stdout().lock().write_all(&out);
}

/// bellc.1 and one page per command, nested ones too (`bellc-store-roles.1`).
pub fn man_pages(dir: &Path) -> Result<u8, Failure> {
    let failed = |e: std::io::Error| Failure::Io(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(failed)?;
    clap_mangen::generate_to(Cli::command(), dir).map_err(failed)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command clap parses, nested ones too, with its page's name: `bellc-store-roles`.
    fn commands(command: &clap::Command, page: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            commands(sub, format!("{page}-{}", sub.get_name()), out);
        }
        out.push((page, command.clone()));
    }

    /// What roff makes of `--name`: each hyphen escaped, so that it is not typeset as a dash.
    fn roff(text: &str) -> String {
        text.replace('-', "\\-")
    }

    #[test]
    fn every_command_and_flag_is_in_the_man_pages() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert!(matches!(man_pages(dir.path()), Ok(0)), "pages not written");
        let mut all = Vec::new();
        commands(&Cli::command(), "bellc".into(), &mut all);
        assert!(all.len() > 30, "{}", all.len());
        let mut flags = 0;
        for (page, command) in &all {
            let path = dir.path().join(format!("{page}.1"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("no page for `{page}` ({}): {e}", path.display()));
            assert!(
                text.contains(&format!(".TH {page} 1")),
                "{page}: {}",
                text.lines().next().unwrap_or("")
            );
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                match arg.get_long() {
                    Some(long) => {
                        flags += 1;
                        let said = roff(&format!("--{long}"));
                        assert!(text.contains(&said), "{page}.1 does not name --{long}");
                    }
                    None if arg.is_positional() => {
                        let name = match arg.get_value_names() {
                            Some([name, ..]) => name.to_string(),
                            _ => arg.get_id().as_str().to_uppercase(),
                        };
                        assert!(text.contains(&name), "{page}.1 does not name {name}");
                    }
                    None => {}
                }
            }
            for sub in command.get_subcommands() {
                assert!(
                    text.contains(&roff(&format!("{page}-{}", sub.get_name()))),
                    "{page}.1 does not point at {page}-{}(1)",
                    sub.get_name()
                );
            }
        }
        assert!(flags > 150, "only {flags} flags found");
    }
}

//! `bell-run-manual man DIR` writes bell-run(8) and one page per command (bell-run-pull(8),
//! …); `bell-run-manual completions SHELL` prints a completion script. Both are made by clap
//! (clap_mangen, clap_complete) from `bell_run::spec`, the definition bell-run's own parser
//! reads, so a page or a completion cannot name an option bell-run does not take or miss one it
//! does. bell-run itself stays free of clap: this tool runs when the package is built
//! (packaging/build-deb), never on a host.

use bell_run::spec::{self, Command};
use clap::{Arg, ArgAction};
use std::path::Path;
use std::process::ExitCode;

/// Administration commands: bell-run runs as root on a host.
const SECTION: &str = "8";

/// One command as clap describes it: its options and operand, its summary and description,
/// its exit codes after them.
fn command(command: &Command) -> clap::Command {
    let mut about = command.description.to_string();
    if let Some(exit) = command.exit {
        about.push_str("\n\nExit: ");
        about.push_str(exit);
    }
    if command.markers {
        about.push_str("\n\n");
        about.push_str(spec::MARKERS);
    }
    let mut out = clap::Command::new(command.name)
        .about(command.summary)
        .long_about(about);
    for flag in command.options() {
        let mut arg = Arg::new(flag.long).long(flag.long).help(flag.help);
        arg = match flag.value {
            Some(value) => arg.value_name(value).action(ArgAction::Set),
            None => arg.action(ArgAction::SetTrue),
        };
        out = out.arg(arg);
    }
    if let Some(operand) = command.operand {
        out = out.arg(Arg::new(operand).value_name(operand).required(true));
    }
    out
}

/// `bell-run` with every command.
pub fn bell_run() -> clap::Command {
    let (usage, exit_codes) = spec::USAGE
        .split_once("\n\nexit codes:\n")
        .unwrap_or((spec::USAGE, ""));
    let about = format!(
        "bell-run verifies a bundle that bellc built (every file against its manifest, the \
         release's signature against the keys the host trusts), switches its files atomically, \
         runs each resource's apply script in dependency order and the health probes, and \
         reverts what a newer bundle no longer manages. `bell-run COMMAND --help` and \
         bell-run-COMMAND(8) say what each command does.\n\n{usage}\n\nExit codes:\n{exit_codes}"
    );
    spec::COMMANDS.iter().fold(
        clap::Command::new("bell-run")
            .version(env!("CARGO_PKG_VERSION"))
            .about("apply a bellc bundle on a host")
            .long_about(about)
            .after_long_help(spec::MARKERS)
            .subcommand_required(true),
        |root, c| root.subcommand(command(c)),
    )
}

/// The completion script of `shell`. For bash it is made for a program called `bell_run` and
/// then registered for `bell-run`: clap_complete's bash script spells the dash of a program's
/// name one way where it walks the words and another where it picks the options, so that
/// `bell-run pull --` offered nothing.
fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if shell != clap_complete::Shell::Bash {
        clap_complete::generate(shell, &mut bell_run(), "bell-run", out);
        return Ok(());
    }
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut bell_run(), "bell_run", &mut script);
    let script = String::from_utf8_lossy(&script);
    for line in script.lines() {
        match line.trim_start().starts_with("complete -F ") {
            true => writeln!(out, "{}", line.replace(" bell_run", " bell-run"))?,
            false => writeln!(out, "{line}")?,
        }
    }
    Ok(())
}

/// bell-run.8 and bell-run-COMMAND.8 for each command.
fn man_pages(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let root = bell_run();
    let write = |page: String, command: clap::Command| -> std::io::Result<()> {
        let mut text = Vec::new();
        clap_mangen::Man::new(command)
            .section(SECTION)
            .manual("bell-run")
            .source(format!("bell-run {}", env!("CARGO_PKG_VERSION")))
            .render(&mut text)?;
        std::fs::write(dir.join(format!("{page}.{SECTION}")), text)
    };
    for sub in root.get_subcommands() {
        let page = format!("bell-run-{}", sub.get_name());
        let named = sub
            .clone()
            .display_name(&page)
            .bin_name(format!("bell-run {}", sub.get_name()));
        write(page, named)?;
    }
    write("bell-run".into(), root.clone())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["man", dir] => match man_pages(Path::new(dir)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bell-run-manual: {dir}: {e}");
                ExitCode::FAILURE
            }
        },
        ["completions", shell] => match shell.parse::<clap_complete::Shell>() {
            Ok(shell) => match completions(shell, &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            },
            Err(e) => {
                eprintln!("bell-run-manual: {e}");
                ExitCode::from(64)
            }
        },
        _ => {
            eprintln!(
                "usage: bell-run-manual man DIR\n       bell-run-manual completions bash|zsh|fish"
            );
            ExitCode::from(64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roff(text: &str) -> String {
        text.replace('-', "\\-")
    }

    /// Every command of the definition has its page, and every option its name in it.
    #[test]
    fn every_command_and_option_is_in_the_man_pages() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        man_pages(dir.path()).expect("pages written");
        let read = |page: &str| {
            std::fs::read_to_string(dir.path().join(format!("{page}.8")))
                .unwrap_or_else(|e| panic!("no page {page}.8: {e}"))
        };
        let main = read("bell-run");
        let mut options = 0;
        for command in spec::COMMANDS {
            let page = format!("bell-run-{}", command.name);
            let text = read(&page);
            assert!(text.contains(&format!(".TH {page} 8")), "{page}");
            assert!(
                text.contains(&roff(&format!("bell-run {}", command.name))),
                "{page}"
            );
            for flag in command.options() {
                assert!(
                    text.contains(&roff(&format!("--{}", flag.long))),
                    "{page}: --{}",
                    flag.long
                );
                options += 1;
            }
            if let Some(operand) = command.operand {
                assert!(text.contains(operand), "{page}: {operand}");
            }
            assert!(
                main.contains(&roff(&page)),
                "bell-run.8 does not point at {page}(8)"
            );
        }
        assert!(options > 120, "{options}");
        assert!(
            main.contains("exit codes") || main.contains("Exit codes"),
            "{main}"
        );
    }

    fn script(shell: clap_complete::Shell) -> Vec<u8> {
        let mut script = Vec::new();
        completions(shell, &mut script).expect("a script");
        script
    }

    fn bash_completes(words: &[&str]) -> Vec<String> {
        bell_testkit::bash_completes(&script(clap_complete::Shell::Bash), words)
    }

    #[test]
    fn fish_completes_a_commands_own_options_and_zsh_takes_the_script() {
        let fish = script(clap_complete::Shell::Fish);
        let offered = bell_testkit::fish_completes(&fish, "bell-run pull --");
        for flag in ["--source", "--gateway", "--trust", "--wait"] {
            assert!(offered.iter().any(|o| o == flag), "{flag}: {offered:?}");
        }
        assert!(!offered.iter().any(|o| o == "--yes"), "{offered:?}");
        let commands = bell_testkit::fish_completes(&fish, "bell-run gen");
        assert_eq!(commands, ["generations"], "{commands:?}");
        let zsh = script(clap_complete::Shell::Zsh);
        assert_eq!(bell_testkit::zsh_registers(&zsh, "bell-run"), "_bell-run");
    }

    #[test]
    fn bash_completes_a_commands_own_options() {
        let offered = bash_completes(&["bell-run", "pull", "--"]);
        for flag in ["--source", "--gateway", "--trust", "--wait"] {
            assert!(offered.iter().any(|o| o == flag), "{flag}: {offered:?}");
        }
        assert!(!offered.iter().any(|o| o == "--yes"), "{offered:?}");
        assert_eq!(bash_completes(&["bell-run", "gen"]), ["generations"]);
    }
}

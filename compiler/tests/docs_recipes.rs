//! Every recipe of the guide runs. The shell blocks of the README and of `docs/` are what a
//! newcomer pastes, so each is executed here, in order, in one shell per document, in a scratch
//! directory with `bellc` and `bell-run` on PATH; a document that starts etcd and nginx starts
//! the real ones, on loopback ports this test picks free. A recipe whose command or flag breaks
//! fails this test, and with it CI (the first README of 2,735 lines had a rollout recipe that
//! halted on every host, and nothing ran it).
//!
//! A fence's info string says what a block is:
//!
//! - `sh`: run; every command must succeed (`set -euo pipefail`).
//! - `console`: `$ command` lines, each followed by the output it prints (stdout and stderr as
//!   a terminal shows them), compared line by line; `...` on a line of its own stands for any
//!   number of lines, `[..]` within a line for any text (as `trycmd` writes them); a command
//!   that exits non-zero shows `[exit N]` as its last line, and must.
//! - `LANG file=NAME` (`kdl file=bell.kdl`): written to NAME before the next block runs.
//! - `sh skip: REASON`: not run, and listed with its reason by
//!   `every_shell_block_runs_or_says_why_not`.
//!
//! The documents name fixed addresses (`127.0.0.1:2379`, `/tmp/bell`) and `cargo run -p bellc --`
//! as a newcomer would type them; the harness swaps each for a free port, the scratch directory
//! and the built binary, and swaps them back in what the commands print before comparing.
//! `BELL_RECIPE_SHOW=1` prints what each console command showed and keeps the scratch
//! directory (the hosts' logs of the trial are in its `bell/hosts/`).

use crate::common;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The documents whose blocks run, each in its own test below.
const RUN: [&str; 2] = ["README.md", "docs/running-a-fleet.md"];

#[derive(Debug)]
enum Kind {
    Shell,
    Console,
    File(String),
    Skipped(String),
    /// Not a recipe: a spec, JSON, a table of output shown for reading.
    Other,
}

#[derive(Debug)]
struct Block {
    /// Where the block's fence opens, as `docs/x.md:12`.
    at: String,
    kind: Kind,
    text: String,
}

fn kind_of(info: &str, at: &str) -> Kind {
    let info = info.trim();
    if info == "sh" {
        return Kind::Shell;
    }
    if info == "console" {
        return Kind::Console;
    }
    if let Some(reason) = info.strip_prefix("sh skip:") {
        assert!(!reason.trim().is_empty(), "{at}: `sh skip:` needs a reason");
        return Kind::Skipped(reason.trim().to_string());
    }
    let mut words = info.split_whitespace();
    let language = words.next().unwrap_or("");
    if let Some(name) = words.find_map(|w| w.strip_prefix("file=")) {
        return Kind::File(name.to_string());
    }
    // A shell block with any other word after `sh` is a typo of one of the above: it would
    // silently never run.
    assert!(
        !matches!(language, "sh" | "bash" | "shell" | "console"),
        "{at}: unknown info string `{info}` (sh, console, `sh skip: REASON`, `LANG file=NAME`)"
    );
    Kind::Other
}

/// The fenced blocks of one document.
fn blocks(document: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(common::repo_root().join(document))
        .unwrap_or_else(|e| panic!("{document}: {e}"));
    let mut blocks = Vec::new();
    let mut open: Option<(String, Kind, Vec<&str>)> = None;
    for (number, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let at = format!("{document}:{}", number + 1);
                let kind = kind_of(info, &at);
                open = Some((at, kind, Vec::new()));
            }
            (Some(_), Some(_)) => {
                let (at, kind, lines) = open.take().expect("open");
                let mut text = lines.join("\n");
                text.push('\n');
                blocks.push(Block { at, kind, text });
            }
            (Some((_, _, lines)), None) => lines.push(line),
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{document}: a fence is never closed");
    blocks
}

/// The Markdown files of the guide: the README and every chapter.
fn documents() -> Vec<String> {
    let root = common::repo_root();
    let mut chapters: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    chapters.sort();
    let mut all = vec!["README.md".to_string(), "runner/README.md".to_string()];
    all.extend(chapters);
    all
}

/// One command of a `console` block and the lines it shows.
struct Shown {
    at: String,
    command: String,
    expected: Vec<String>,
}

fn console_commands(block: &Block) -> Vec<Shown> {
    let mut shown: Vec<Shown> = Vec::new();
    let mut continued = false;
    for line in block.text.lines() {
        if continued {
            let last = shown.last_mut().expect("a command");
            last.command.push('\n');
            last.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            shown.push(Shown {
                at: block.at.clone(),
                command: command.to_string(),
                expected: Vec::new(),
            });
            continued = command.ends_with('\\');
        } else {
            let last = shown
                .last_mut()
                .unwrap_or_else(|| panic!("{}: output before any `$ ` command", block.at));
            last.expected.push(line.to_string());
        }
    }
    shown
}

/// Whether `line` matches `pattern`, where `[..]` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `lines` match `expected`, where a `...` line stands for any number of lines.
fn lines_match(expected: &[String], lines: &[&str]) -> bool {
    match expected.split_first() {
        None => lines.is_empty(),
        Some((first, rest)) if first.trim() == "..." => {
            (0..=lines.len()).any(|skip| lines_match(rest, &lines[skip..]))
        }
        Some((first, rest)) => lines
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && lines_match(rest, more)),
    }
}

/// A document's blocks as one bash script, and the console commands whose output it keeps.
fn script(document: &str, recipe: &Path, swaps: &[(String, String)]) -> (String, Vec<Shown>) {
    let swap = |text: &str| {
        swaps
            .iter()
            .fold(text.to_string(), |text, (from, to)| text.replace(from, to))
    };
    // The harness's own files by absolute path: a recipe may `cd`.
    let mut script = format!("set -euo pipefail\nBELL_RECIPE='{}'\n", recipe.display());
    let mut shown = Vec::new();
    for block in blocks(document) {
        script.push_str(&format!(
            "printf '%s\\n' '{}' > \"$BELL_RECIPE/at\"\n",
            block.at
        ));
        match &block.kind {
            Kind::Shell => script.push_str(&swap(&block.text)),
            Kind::File(name) => script.push_str(&format!(
                "cat > '{name}' <<'BELL_RECIPE_FILE'\n{}BELL_RECIPE_FILE\n",
                block.text
            )),
            Kind::Console => {
                for command in console_commands(&block) {
                    let n = shown.len();
                    script.push_str(&format!(
                        "{{\n{}\n}} > \"$BELL_RECIPE/out.{n}\" 2>&1 || {{ echo \"[exit $?]\" >> \"$BELL_RECIPE/out.{n}\"; }}\n",
                        swap(&command.command)
                    ));
                    shown.push(command);
                }
            }
            Kind::Skipped(_) | Kind::Other => {}
        }
    }
    script.push_str("printf 'end\\n' > \"$BELL_RECIPE/at\"\n");
    (script, shown)
}

/// Runs `document`'s recipes in a scratch directory and compares what they show.
fn run_document(document: &str) {
    if !bell_testkit::root() {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let dir = scratch.path();
    // nginx's workers run as `nobody`, as the trial says: they must reach the served directory.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let recipe = dir.join(".recipe");
    let bin = recipe.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bellc"), bin.join("bellc")).expect("bellc");
    std::os::unix::fs::symlink(common::fleet::bell_run(), bin.join("bell-run")).expect("run");
    std::os::unix::fs::symlink(common::repo_root().join("examples"), dir.join("examples"))
        .expect("examples");
    let tmp_bell = dir.join("bell");
    let mut swaps: Vec<(String, String)> = vec![
        ("cargo run --release -p bellc --".into(), "bellc".into()),
        ("cargo run -p bellc --".into(), "bellc".into()),
        ("cargo run -p bell-run --".into(), "bell-run".into()),
        ("/tmp/bell".into(), tmp_bell.display().to_string()),
        ("/tmp/img".into(), dir.join("tmp-img").display().to_string()),
    ];
    for port in [2379, 2380, 8080, 8088] {
        swaps.push((
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{}", common::fleet::free_port()),
        ));
    }
    let (text, shown) = script(document, &recipe, &swaps);
    std::fs::write(recipe.join("script.sh"), &text).expect("script");

    let path = format!(
        "{}:{}:/usr/local/sbin:/usr/sbin:/sbin",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let stdout = std::fs::File::create(recipe.join("stdout")).expect("stdout");
    let stderr = std::fs::File::create(recipe.join("stderr")).expect("stderr");
    // Its own process group, so that what a recipe leaves running (etcd, nginx, a host's pull
    // loop) is stopped with it; output to files, which a background child may keep open.
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new("bash")
            .arg(recipe.join("script.sh"))
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("CI")
            .env_remove("BELL_RUN_BIN")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .expect("bash")
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();

    let read = |name: &str| std::fs::read_to_string(recipe.join(name)).unwrap_or_default();
    let unswap = |text: &str| {
        swaps
            .iter()
            .rev()
            .filter(|(from, _)| !from.starts_with("cargo "))
            .fold(text.to_string(), |text, (from, to)| text.replace(to, from))
    };
    let tail = |text: String| {
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    let at = read("at");
    if std::env::var_os("BELL_RECIPE_SHOW").is_some() {
        eprintln!("kept: {}", dir.display());
        std::mem::forget(scratch);
        for (n, command) in shown.iter().enumerate() {
            let output = unswap(&read(&format!("out.{n}")));
            eprintln!("--- {}\n{output}", command.command);
        }
    }
    match status {
        None => panic!(
            "{document}: the recipe at {} did not finish in 300 s\nstderr:\n{}",
            at.trim(),
            tail(unswap(&read("stderr")))
        ),
        Some(status) if !status.success() => panic!(
            "{document}: the recipe at {} failed ({status})\nstdout:\n{}\nstderr:\n{}",
            at.trim(),
            tail(unswap(&read("stdout"))),
            tail(unswap(&read("stderr")))
        ),
        Some(_) => {}
    }
    let mut wrong = Vec::new();
    for (n, command) in shown.iter().enumerate() {
        let output = unswap(&read(&format!("out.{n}")));
        let lines: Vec<&str> = output.lines().map(str::trim_end).collect();
        let expected: Vec<String> = command
            .expected
            .iter()
            .map(|l| l.trim_end().to_string())
            .collect();
        if !lines_match(&expected, &lines) {
            wrong.push(format!(
                "{}: `$ {}` showed\n{}\n--- where the document shows ---\n{}",
                command.at,
                command.command,
                lines.join("\n"),
                expected.join("\n")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn the_readme_runs() {
    run_document("README.md");
}

#[test]
fn the_trial_fleet_of_running_a_fleet_runs_end_to_end() {
    if !(common::fleet::require("etcd")
        && common::fleet::require("nginx")
        && common::fleet::require("curl"))
    {
        return;
    }
    run_document("docs/running-a-fleet.md");
}

/// Every shell block of the guide is run by a test above, or says why not in its info string;
/// this lists the skipped ones, so that a reader of the test's output sees what is not run.
#[test]
fn every_shell_block_runs_or_says_why_not() {
    let mut skipped = Vec::new();
    for document in documents() {
        let runnable = blocks(&document)
            .into_iter()
            .filter(|b| {
                if let Kind::Skipped(reason) = &b.kind {
                    skipped.push(format!("{}: {reason}", b.at));
                }
                matches!(b.kind, Kind::Shell | Kind::Console)
            })
            .map(|b| b.at)
            .collect::<Vec<_>>();
        assert!(
            runnable.is_empty() || RUN.contains(&document.as_str()),
            "{document} has shell blocks no test runs ({}): add the document to RUN and a test \
             that runs it, or mark each `sh skip: REASON`",
            runnable.join(", ")
        );
    }
    eprintln!("shell blocks not run, and why:\n{}", skipped.join("\n"));
}

#[test]
fn output_patterns_match_as_trycmd_writes_them() {
    let lines = ["built 3 hosts into 2 bundles in out", "a", "b", "end"];
    let exact = |e: &[&str]| e.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(
        &exact(&["built [..] hosts into [..] bundles in out", "...", "end"]),
        &lines
    ));
    assert!(lines_match(
        &exact(&["built 3 hosts[..]", "a", "b", "end"]),
        &lines
    ));
    assert!(!lines_match(&exact(&["built 4 hosts[..]", "..."]), &lines));
    assert!(!lines_match(
        &exact(&["built 3 hosts into 2 bundles in out"]),
        &lines
    ));
    assert!(!lines_match(&exact(&["...", "a"]), &lines));
    assert!(line_matches("[..]", ""));
    assert!(!line_matches("a[..]a", "a"));
}

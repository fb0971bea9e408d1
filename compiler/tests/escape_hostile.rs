//! Hostile strings through every escaping function, read back by the real consumer: POSIX
//! shells, `systemd-escape`, and systemd's own unit file parser (`systemd-analyze verify`,
//! whose debug log dumps the parsed unit).

use crate::common::have;
use bellc_core::escape::{
    mount_unit_name, shell_quote, systemd_escape_path, unit_environment, unit_exec_arg,
    unit_exec_path, unit_value,
};
use std::path::Path;
use std::process::{Command, Output};

const HOSTILE: &[&str] = &[
    "",
    "plain",
    "'",
    "''",
    "'''",
    "\"",
    "it's a \"test\"",
    "$(reboot)",
    "`reboot`",
    "${HOME}",
    "$HOME",
    "a\nb",
    "\n",
    "trailing newline\n\n",
    "back\\slash\\",
    "\\",
    "\\'",
    "*",
    "/*",
    "?",
    "[a-z]",
    "-n",
    "-e \\n",
    "--help",
    "~",
    "~root",
    "a b  c",
    " lead and trail ",
    "\ttab",
    "; rm -rf / #",
    "a && b || c | d > e < f",
    "FOO=bar",
    "!",
    "!!",
    "#comment",
    "%s %d %%",
    "ünïcödé ✓ 漢字 🦀",
    "\u{1}\u{7f}\u{1b}[31m",
    "{a,b}",
    "x=$(id)'\"`",
];

fn run(cmd: &mut Command) -> Output {
    match cmd.output() {
        Ok(output) => output,
        Err(error) => panic!("cannot run {cmd:?}: {error}"),
    }
}

fn assert_shell_prints_exactly(shell: &[&str]) {
    for s in HOSTILE {
        let script = format!("printf %s {}", shell_quote(s));
        let output = run(Command::new(shell[0])
            .args(&shell[1..])
            .arg("-c")
            .arg(&script));
        assert!(
            output.status.success(),
            "{shell:?} failed on {script:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            output.stdout,
            s.as_bytes(),
            "{shell:?} read {script:?} differently"
        );
    }
}

#[test]
fn shell_quote_survives_sh() {
    assert_shell_prints_exactly(&["sh"]);
}

#[test]
fn shell_quote_survives_dash() {
    if have("dash") {
        assert_shell_prints_exactly(&["dash"]);
    }
}

#[test]
fn shell_quote_survives_bash_posix() {
    if have("bash") {
        assert_shell_prints_exactly(&["bash", "--posix"]);
    }
}

#[test]
fn shell_quote_as_command_word_is_not_an_assignment() {
    let output = run(Command::new("sh").args([
        "-c",
        &format!("{} 2>/dev/null; echo $?", shell_quote("FOO=bar")),
    ]));
    // `FOO=bar` unquoted would be an assignment and succeed; quoted it is a missing command (127).
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "127");
}

const PATHS: &[&str] = &[
    "/",
    "/mnt",
    "/mnt/data-1",
    "/mnt/data_1",
    "/mnt/a b",
    "/mnt/ünïcode",
    "/mnt/漢字",
    "/mnt/.hidden",
    "/.hidden/x",
    "/mnt/a.b.c",
    "/mnt/back\\slash",
    "/mnt/100%",
    "/mnt/$x",
    "/mnt/a:b",
    "/mnt/'q'\"",
    "/mnt/-",
    "/-lead",
    "/mnt/trailing/",
    "//double//slash",
    "/mnt/./dot",
    "/mnt/a@b+c,d=e~f",
    "/var/lib/bell/x",
];

#[test]
fn systemd_escape_path_matches_systemd_escape() {
    if !have("systemd-escape") {
        return;
    }
    for path in PATHS {
        let output = run(Command::new("systemd-escape").args(["--path", "--", path]));
        assert!(output.status.success(), "systemd-escape refused {path:?}");
        let expected = String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned();
        assert_eq!(systemd_escape_path(path), expected, "escaping {path:?}");
        let output =
            run(Command::new("systemd-escape").args(["--path", "--suffix=mount", "--", path]));
        let expected = String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned();
        assert_eq!(mount_unit_name(path), expected, "mount unit for {path:?}");
    }
}

/// Runs `systemd-analyze verify` on `unit` in `dir` with debug logging, which dumps the parsed
/// unit; returns the combined log.
fn verify(dir: &Path, unit: &str) -> String {
    verify_as(dir, unit, unit)
}

/// Like [`verify`], loading `file` under the unit name `unit`. verify reads `FILE:NAME` as "load
/// FILE as NAME", so a unit name containing `:` can only be checked this way.
fn verify_as(dir: &Path, file: &str, unit: &str) -> String {
    let mut arg = dir.join(file).into_os_string();
    if file != unit {
        arg.push(":");
        arg.push(unit);
    }
    let output = run(Command::new("systemd-analyze")
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .env("SYSTEMD_LOG_COLOR", "0")
        .args(["verify", "--man=no"])
        .arg(arg));
    let mut log = String::from_utf8_lossy(&output.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "systemd-analyze verify {unit} failed:\n{log}"
    );
    log
}

/// The value of the first dumped setting `name: value` (tab-indented in the dump).
fn dumped<'a>(log: &'a str, name: &str) -> Option<&'a str> {
    log.lines().find_map(|line| {
        line.trim_start_matches('\t')
            .strip_prefix(&format!("{name}: "))
    })
}

const DESCRIPTIONS: &[&str] = &[
    "plain",
    "100% done %n %i %%",
    "it's a \"quoted\" value",
    "back\\slash in\\side",
    "ends with two backslashes \\\\",
    "$HOME ${X} $(reboot) `id`",
    "#not a comment ;nor this",
    "ünïcödé ✓ 漢字 🦀",
    "a = b [Section]",
];

#[test]
fn mount_unit_values_read_back_exactly() {
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let mount_paths = PATHS
        .iter()
        .filter(|p| **p != "/" && !p.ends_with('/') && !p.contains("//") && !p.contains("/./"));
    for (path, description) in mount_paths.zip(DESCRIPTIONS.iter().cycle()) {
        let what = format!("server:/export {description}");
        let options = "rw,x-bell.note=50%,uid=1000";
        let unit = mount_unit_name(path);
        let text = format!(
            "[Unit]\nDescription={}\n[Mount]\nWhat={}\nWhere={}\nOptions={}\n",
            unit_value(description).expect("description"),
            unit_value(&what).expect("what"),
            unit_value(path).expect("where"),
            unit_value(options).expect("options"),
        );
        std::fs::write(dir.path().join("test.mount"), &text).expect("write unit");
        let log = verify_as(dir.path(), "test.mount", &unit);
        assert!(!log.contains("doesn't match unit name"), "{path:?}:\n{log}");
        assert!(!log.contains("specifier"), "{path:?}:\n{log}");
        assert_eq!(dumped(&log, "Description"), Some(*description), "{text}");
        assert_eq!(dumped(&log, "Where"), Some(*path), "{text}");
        assert_eq!(dumped(&log, "What"), Some(what.as_str()), "{text}");
        assert_eq!(dumped(&log, "Options"), Some(options), "{text}");
    }
}

#[test]
fn verify_catches_a_where_that_does_not_match_the_unit_name() {
    // The control for the test above: a mismatch is reported, so its absence means something.
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "[Mount]\nWhat=/dev/sda1\nWhere=/mnt/a-b\n";
    std::fs::write(dir.path().join("test.mount"), text).expect("write unit");
    let output = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(format!(
            "{}:mnt-a-b.mount",
            dir.path().join("test.mount").display()
        )));
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("doesn't match unit name"), "{log}");
    assert_eq!(mount_unit_name("/mnt/a-b"), "mnt-a\\x2db.mount");
}

#[test]
fn unescaped_percent_would_have_been_expanded() {
    // The control for the test above: without unit_value, systemd does expand specifiers.
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("x.service"),
        "[Unit]\nDescription=100% %n\n[Service]\nExecStart=/bin/true\n",
    )
    .expect("write unit");
    let log = verify(dir.path(), "x.service");
    let description = dumped(&log, "Description").expect("the dump shows the Description");
    assert_ne!(description, "100% %n");
    assert!(
        description.contains("x.service"),
        "%n not expanded: {description}"
    );
}

/// Decodes one `Command Line:` of a systemd dump: words separated by spaces, each bare or in
/// double quotes with backslash escapes (C escapes, octal `\NNN`, and `\"` `\\` `\$` `` \` ``).
fn decode_command_line(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut bytes = Vec::new();
        if c == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => bytes.push(b'\n'),
                        Some('t') => bytes.push(b'\t'),
                        Some('r') => bytes.push(b'\r'),
                        Some('a') => bytes.push(7),
                        Some('b') => bytes.push(8),
                        Some('f') => bytes.push(12),
                        Some('v') => bytes.push(11),
                        Some(d @ '0'..='7') => {
                            let mut value = d.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                let next = chars.next().and_then(|c| c.to_digit(8));
                                value = value * 8 + next.expect("three octal digits");
                            }
                            bytes.push(u8::try_from(value).expect("octal byte"));
                        }
                        Some(other) => {
                            let mut buf = [0; 4];
                            bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                        }
                        None => panic!("dangling backslash in {line:?}"),
                    },
                    other => {
                        let mut buf = [0; 4];
                        bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                let mut buf = [0; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                chars.next();
            }
        }
        words.push(String::from_utf8(bytes).expect("utf-8 word"));
    }
    words
}

#[test]
fn exec_args_read_back_exactly() {
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    // A lone `;` would separate commands if it were not quoted.
    let args: Vec<&str> = HOSTILE
        .iter()
        .copied()
        .chain([";", "\\;", "%", "$$"])
        .collect();
    let mut line = unit_exec_path("/bin/echo").expect("path");
    for arg in &args {
        line.push(' ');
        line.push_str(&unit_exec_arg(arg).expect("arg"));
    }
    let text = format!("[Service]\nType=oneshot\nExecStart={line}\n");
    std::fs::write(dir.path().join("args.service"), &text).expect("write unit");
    let log = verify(dir.path(), "args.service");
    let dumped = dumped(&log, "Command Line").expect("dumped command line");
    let words = decode_command_line(dumped);
    // The dump shows argv before environment expansion, which turns `$$` into `$` at exec time.
    let expected: Vec<String> = std::iter::once("/bin/echo".to_owned())
        .chain(args.iter().map(|a| a.replace('$', "$$")))
        .collect();
    assert_eq!(words, expected, "{text}");
}

#[test]
fn exec_path_with_hostile_characters_is_found() {
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("my tool 100% ü;x");
    std::fs::write(&bin, "#!/bin/sh\n").expect("write tool");
    let status = Command::new("chmod").arg("755").arg(&bin).status();
    assert!(status.is_ok_and(|s| s.success()));
    let bin = bin.to_str().expect("utf-8 path");
    let text = format!(
        "[Service]\nType=oneshot\nExecStart={} {}\n",
        unit_exec_path(bin).expect("path"),
        unit_exec_arg("arg").expect("arg")
    );
    std::fs::write(dir.path().join("path.service"), &text).expect("write unit");
    let log = verify(dir.path(), "path.service");
    assert!(!log.contains("is not executable"), "{log}");
    let words = decode_command_line(dumped(&log, "Command Line").expect("command line"));
    assert_eq!(words, [bin, "arg"]);
}

#[test]
fn environment_reads_back_exactly() {
    if !have("systemd-analyze") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let values = [
        "plain",
        "",
        "it's \"quoted\" \\ back",
        "$HOME ${X} 100% %n",
        "  spaces  ",
        "ünïcödé 🦀",
    ];
    for value in values {
        let text = format!(
            "[Service]\nType=oneshot\nExecStart=/bin/true\nEnvironment={}\n",
            unit_environment("BELL_VALUE", value).expect("env")
        );
        std::fs::write(dir.path().join("env.service"), &text).expect("write unit");
        let log = verify(dir.path(), "env.service");
        let expected = format!("BELL_VALUE={value}");
        assert_eq!(
            dumped(&log, "Environment"),
            Some(expected.as_str()),
            "{text}"
        );
    }
}

#[test]
fn unit_value_refuses_what_systemd_cannot_read_back() {
    for bad in [
        "a\nb",
        "\r",
        " lead",
        "trail ",
        "tab\tinside",
        "cont\\",
        "a\\\\\\",
        "nul\0",
    ] {
        assert!(unit_value(bad).is_err(), "{bad:?} should be refused");
    }
    assert_eq!(
        unit_value("a\nb").unwrap_err(),
        "contains a newline, which a unit file setting cannot hold"
    );
    assert_eq!(
        unit_value("cont\\").unwrap_err(),
        "ends with a backslash, which systemd reads as a line continuation"
    );
    assert!(unit_exec_arg("a\0").is_err());
    assert_eq!(
        unit_exec_path("/bin/it's").unwrap_err(),
        "contains `'`, which systemd refuses in an executable path"
    );
}

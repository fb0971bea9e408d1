//! What a test needs from the machine it runs on, decided in one place.
//!
//! Many of the tests that matter most (the hostile roots, the account tools, live sysctls in a
//! private namespace) need root, a namespace or a real tool such as `visudo`. A test that cannot
//! have what it needs must never pass quietly under CI, where `.ci/test` installs every tool and
//! runs as root: there it fails, naming what is missing. Elsewhere (a person's laptop, as a
//! normal user) it is skipped with a printed reason, so `cargo test` stays usable.
//!
//! Every check returns whether the test may go on:
//!
//! ```ignore
//! if !bell_testkit::tool("visudo") || !bell_testkit::root() {
//!     return;
//! }
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or `false` (GitHub and
/// GitLab set `true`, others `1`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A test lacks `what`: under CI this panics (the test fails), otherwise it prints why the test
/// is skipped and returns `false`.
pub fn missing(what: &str) -> bool {
    assert!(
        !in_ci(),
        "{what}, and CI is set: .ci/test installs every tool and runs as root"
    );
    eprintln!("skipping: {what}");
    false
}

/// The machine is in a state no installation gives or takes away (a kernel upgraded and not
/// yet booted, say) that the test cannot work around: skipped with the reason printed, under CI
/// too, since `.ci/test` cannot put it right either. Returns `false`.
pub fn machine_state(what: &str) -> bool {
    eprintln!("skipping: {what}");
    false
}

/// Where `name` is installed: on PATH, or in the sbin directories a normal user's PATH lacks
/// on Debian.
pub fn find(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Whether the program `name` is installed.
pub fn tool(name: &str) -> bool {
    find(name).is_some() || missing(&format!("`{name}` is not installed"))
}

/// Whether the test runs as root (to chown, to run the account tools, to give a directory to
/// another user).
pub fn root() -> bool {
    euid() == Some(0) || missing("this test needs root")
}

/// Whether `unshare` can make the namespaces named by `flags` (`--net`, `--mount`): root can.
pub fn namespaces(flags: &[&str]) -> bool {
    if !tool("unshare") {
        return false;
    }
    let made = Command::new("unshare")
        .args(flags)
        .arg("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    made || missing(&format!(
        "`unshare {} true` fails (not root?)",
        flags.join(" ")
    ))
}

/// Whether the directory `path` exists on this machine (a test that mounts over it).
pub fn dir(path: &str) -> bool {
    Path::new(path).is_dir() || missing(&format!("{path} does not exist"))
}

/// The effective user id, read from `/proc/self/status` (no libc in a test crate).
pub fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// The files (and directories of files) of `package/tests/` that no test binary builds. A package's integration tests are
/// one binary (`tests/it.rs` declares each file a module: one link instead of a hundred, which
/// CI's disk and time feel), and cargo builds only the files its manifest names once
/// `autotests = false`: a new file neither declared in `it.rs` nor given its own `[[test]]`
/// would never run, and nothing would say so. Each `it.rs` asserts this list is empty.
pub fn undeclared_test_files(package: &Path) -> Vec<String> {
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let root = read(&package.join("tests/it.rs"));
    let manifest = read(&package.join("Cargo.toml"));
    // A file, or a directory of files with its `mod.rs` (or the `main.rs` cargo would once
    // have built as a binary of its own).
    let tests = package.join("tests");
    let is_module = |name: &str| {
        ["mod.rs", "main.rs"]
            .iter()
            .any(|root| tests.join(name).join(root).is_file())
    };
    let mut names: Vec<String> = std::fs::read_dir(&tests)
        .map(|dir| {
            dir.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter_map(|name| match name.strip_suffix(".rs") {
                    Some(stem) => Some(stem.to_string()),
                    None => is_module(&name).then_some(name),
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.retain(|name| {
        name != "it"
            && !root
                .lines()
                .any(|line| line.trim() == format!("mod {name};"))
            && !manifest.contains(&format!("\"tests/{name}.rs\""))
    });
    names
}

/// The test each `it.rs` runs: every file of `package/tests/` is built by a test binary.
pub fn assert_every_test_file_is_built(package: &str) {
    assert_eq!(
        undeclared_test_files(Path::new(package)),
        Vec::<String>::new(),
        "declare each in tests/it.rs (`mod NAME;`), or give it its own [[test]] in Cargo.toml"
    );
}

/// What bash offers on TAB after `words` (the cursor after the last one), through the function
/// the completion `script` registers for the program `words[0]` (`complete -F FUNCTION
/// PROGRAM`), called as bash calls it: with the program, the word being completed and the one
/// before it.
pub fn bash_completes(script: &[u8], words: &[&str]) -> Vec<String> {
    const PROGRAM: &str = r#"source /dev/stdin
spec=$(complete -p "$1") || exit 9
function=${spec##*-F }; function=${function%% *}
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
"$function" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}""#;
    let args: Vec<&str> = ["-c", PROGRAM, "bash"]
        .into_iter()
        .chain(words.iter().copied())
        .collect();
    run_shell("bash", &args, script)
        .lines()
        .map(str::to_string)
        .collect()
}

/// What fish offers on TAB at the end of `line` (`complete -C`, fish's own completion of a
/// command line), once the completion `script` is sourced: each candidate without its
/// description. (`source` without a file reads standard input: fish refuses `/dev/stdin` when it
/// is a pipe.)
pub fn fish_completes(script: &[u8], line: &str) -> Vec<String> {
    let out = run_shell(
        "fish",
        &["--no-config", "-c", "source; complete -C $argv[1]", line],
        script,
    );
    out.lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

/// The completion function zsh's completion system (compinit) has for `program` once the
/// completion `script` is sourced, as a user's `.zshrc` would: `_comps[program]`.
pub fn zsh_registers(script: &[u8], program: &str) -> String {
    // -D: no dump file written.
    let program_text = format!(
        "autoload -U compinit; compinit -u -D; source /dev/stdin; print -r -- ${{_comps[{program}]}}"
    );
    run_shell("zsh", &["-f", "-c", &program_text], script)
        .trim()
        .to_string()
}

/// Runs `shell` with `args`, `stdin` on its standard input; its standard output, once it
/// succeeded.
fn run_shell(shell: &str, args: &[&str], stdin: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = Command::new(shell)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shell} runs (CI installs it): {e}"));
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin)
            .expect("the script reaches the shell");
    }
    let out = child.wait_with_output().expect("the shell ends");
    assert!(
        out.status.success(),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_tool_every_machine_has_and_not_one_none_has() {
        assert!(find("sh").is_some());
        assert!(find("bell-no-such-tool").is_none());
    }

    #[test]
    fn a_test_file_no_binary_builds_is_named() {
        let package = tempfile_dir();
        std::fs::create_dir_all(package.join("tests")).unwrap();
        let write = |name: &str, text: &str| std::fs::write(package.join(name), text).unwrap();
        write(
            "Cargo.toml",
            "[[test]]\nname = \"alone\"\npath = \"tests/alone.rs\"\n",
        );
        write("tests/it.rs", "mod common;\nmod declared;\n");
        for name in ["alone", "declared", "forgotten"] {
            write(&format!("tests/{name}.rs"), "");
        }
        // Directories: the helpers it declares, one cargo used to build alone, and data.
        for (dir, file) in [
            ("common", "mod.rs"),
            ("by_itself", "main.rs"),
            ("data", "a.kdl"),
        ] {
            std::fs::create_dir_all(package.join("tests").join(dir)).unwrap();
            write(&format!("tests/{dir}/{file}"), "");
        }
        assert_eq!(undeclared_test_files(&package), ["by_itself", "forgotten"]);
        std::fs::remove_dir_all(&package).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bell-testkit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn reads_the_effective_user() {
        let uid = euid().expect("a Uid: line");
        let owner = std::fs::metadata("/proc/self").map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid()
        });
        assert_eq!(Some(uid), owner.ok());
    }
}

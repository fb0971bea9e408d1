//! Secrets at rest in the spec's repository (issue 95): a password hash and a 0600 file's
//! content taken from age files of the spec's own tree (`password file="secrets/…age"`),
//! encrypted with Debian's `age` to CI's key (made by `age-keygen`). Built with that key
//! (`--secrets-key`) they give the same sealed output as the same secrets written in the
//! spec; without it, or with a key they are not encrypted to, the build fails naming the
//! file and what to give; the repository, OUT and everything printed hold no plaintext.

use crate::common::sealing::{assert_nowhere, needles, ssh_key};
use crate::common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const HASH: &str = "$6$atrestsalt01$GQ3kEwmX8mYzVY2.0o8vQ5oN6m1x1r8m1q7oZ1pTj8mR2eQ0uS7yT4wK3vL6bN9cD5fH2jA8sE1gI4kM7oP0r/";
const TOKEN: &str = "api-token-AT-REST-Q7x";
const ANSWER: &str = "debconf-pass-AT-REST-5k";

/// The spec of host `a` (its identity `identity`), its secrets written in it or taken from
/// the age files `secrets/ops.hash.age` and `secrets/token.age`; each on one line either way.
fn spec(identity: &str, from_files: bool) -> String {
    let (password, content, answer) = match from_files {
        true => (
            "password file=\"secrets/ops.hash.age\"".to_string(),
            "content file=\"secrets/token.age\"".to_string(),
            "file=\"secrets/mysql.age\"".to_string(),
        ),
        false => (
            format!("password \"{HASH}\""),
            format!("content \"{TOKEN}\\n\""),
            format!("value=\"{ANSWER}\""),
        ),
    };
    format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\" identity=\"{identity}\"\n\
         user \"ops\" {{\n    {password}\n}}\n\
         file \"/etc/app/token\" mode=\"0600\" {{\n    {content}\n}}\n\
         package \"mysql-server\" {{\n    debconf \"mysql-server/root_password\" type=\"password\" {answer}\n}}\n"
    )
}

/// `age-keygen -o PATH`: the recipient (`age1…`) of the key it made.
fn age_keygen(path: &Path) -> String {
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .unwrap()
        .to_string()
}

/// `age -e -a -r RECIPIENT -o PATH` with `secret` on its input.
fn age_encrypt(path: &Path, recipient: &str, secret: &str) {
    age_encrypt_to(path, &[recipient], secret);
}

/// `age -e -a -r R1 -r R2 … -o PATH` with `secret` on its input.
fn age_encrypt_to(path: &Path, recipients: &[&str], secret: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut child = Command::new("age")
        .args(["-e", "-a"])
        .args(recipients.iter().flat_map(|r| ["-r", r]))
        .arg("-o")
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(secret.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn secrets_from_encrypted_files_build_as_written_ones_and_nothing_holds_them_in_the_clear() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let host = ssh_key(&keys.path().join("a"));
    let seal = "0123456789abcdef0123456789abcdef-example-only";

    // The same secrets written in the spec, built elsewhere: what the build must give.
    let plain = Fixture::spec(&spec(&host, false)).file("seal.key", seal);
    let run = plain.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plain_release = std::fs::read_to_string(plain.path().join("out/release.json")).unwrap();

    let fx = Fixture::spec(&spec(&host, true)).file("seal.key", seal);
    let ci = age_keygen(&keys.path().join("ci.key"));
    age_encrypt(&fx.path().join("secrets/ops.hash.age"), &ci, HASH);
    age_encrypt(
        &fx.path().join("secrets/token.age"),
        &ci,
        &format!("{TOKEN}\n"),
    );
    // As an editor leaves it: a newline after the answer, which is not part of it.
    age_encrypt(
        &fx.path().join("secrets/mysql.age"),
        &ci,
        &format!("{ANSWER}\n"),
    );
    let ci_key = keys.path().join("ci.key").display().to_string();
    let build = |extra: &[&str]| {
        let mut args = vec![
            "--short",
            "build",
            "bell.kdl",
            "-o",
            "out",
            "--seal-key",
            "seal.key",
        ];
        args.extend(extra);
        fx.bellc(&args)
    };

    // Without a key: refused, naming the file and what to give, and nothing written.
    let run = build(&[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "cannot open the encrypted secret `secrets/ops.hash.age`: no key to open it was given"
        ),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--secrets-key FILE"), "{}", run.stderr);
    assert!(
        run.stderr.contains("bell.kdl:4:14: error"),
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("out/release.json").exists());
    // With a key they are not encrypted to: which key was given.
    let other = age_keygen(&keys.path().join("other.key"));
    let other_key = keys.path().join("other.key").display().to_string();
    let run = build(&["--secrets-key", &other_key]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("it is not encrypted to the key given ({other})")),
        "{}",
        run.stderr
    );
    // A key others can read is no key of CI's.
    let loose = keys.path().join("loose.key");
    std::fs::copy(keys.path().join("ci.key"), &loose).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = build(&["--secrets-key", loose.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("chmod 600"), "{}", run.stderr);

    // With CI's key: the release, and every sealed file, as from the written secrets.
    let run = build(&["--secrets-key", &ci_key]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let release = std::fs::read_to_string(fx.path().join("out/release.json")).unwrap();
    assert_eq!(release, plain_release);
    for dir in ["secrets", "bundles"] {
        let ours = walk(&fx.path().join("out").join(dir));
        let theirs = walk(&plain.path().join("out").join(dir));
        assert_eq!(ours, theirs, "OUT/{dir}");
    }
    // Not in the repository (spec, encrypted files), OUT or anything printed.
    let needles = needles(&[HASH, TOKEN, &format!("{TOKEN}\n"), ANSWER]);
    assert_nowhere(fx.path(), &needles);
    for text in [&run.stdout, &run.stderr] {
        assert!(needles.iter().all(|n| !text.contains(n.as_str())), "{text}");
    }
    let explain = fx.bellc(&["explain", "a", "--secrets-key", &ci_key]);
    assert_eq!(explain.code, 0, "{}", explain.stderr);
    for text in [&explain.stdout, &explain.stderr] {
        assert!(needles.iter().all(|n| !text.contains(n.as_str())), "{text}");
    }

    // A changed secret is a changed input: the next build seals it again.
    age_encrypt(
        &fx.path().join("secrets/token.age"),
        &ci,
        "api-token-ROTATED\n",
    );
    let run = build(&["--secrets-key", &ci_key]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rotated = std::fs::read_to_string(fx.path().join("out/release.json")).unwrap();
    assert_ne!(rotated, release);

    // A secret file's content is taken as it is, not as a template: what a template would
    // evaluate, or end a raw block with, reaches the host unchanged.
    for token in [
        "{{ host.name }} {% if x %}\n",
        "a {% endraw %} \"b\"\\ {{ c }}\u{1}\n",
    ] {
        age_encrypt(&fx.path().join("secrets/token.age"), &ci, token);
        let run = build(&["--secrets-key", &ci_key]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let opened: Vec<String> = std::fs::read_dir(fx.path().join("out/secrets/a"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "age"))
            .filter_map(|p| age_open(&p, &keys.path().join("a")))
            .collect();
        assert!(opened.iter().any(|o| o == token), "{opened:?}");
    }

    // A file whose content is an encrypted secret but whose mode lets others read it: refused.
    let readable = spec(&host, true).replace("mode=\"0600\"", "mode=\"0644\"");
    std::fs::write(fx.path().join("bell.kdl"), readable).unwrap();
    let run = build(&["--secrets-key", &ci_key]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("must keep others out"),
        "{}",
        run.stderr
    );
    std::fs::write(fx.path().join("bell.kdl"), spec(&host, true)).unwrap();

    // A hash that is not one is refused without being shown.
    age_encrypt(
        &fx.path().join("secrets/ops.hash.age"),
        &ci,
        "not-a-hash-SECRET-9",
    );
    let run = build(&["--secrets-key", &ci_key]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("what it holds is not what `password` takes"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("not-a-hash-SECRET-9"),
        "{}",
        run.stderr
    );
}

/// `age -d -i KEY PATH`: the plaintext, or `None` when age refuses.
fn age_open(path: &Path, key: &Path) -> Option<String> {
    let out = Command::new("age")
        .arg("-d")
        .arg("-i")
        .arg(key)
        .arg(path)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap())
}

/// The test's keys: a host's (`a`, ssh) and CI's (`ci.key`, age), with their public lines.
fn host_and_ci(keys: &Path) -> (String, String) {
    (ssh_key(&keys.join("a")), age_keygen(&keys.join("ci.key")))
}

/// Every file under `dir` by relative path, with its bytes.
fn walk(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn a_secret_file_where_none_belongs_is_refused_at_its_place() {
    let fx = Fixture::spec(
        r#"fleet "f" target="debian-12"
host "a"
package "tzdata" {
    debconf "tzdata/Areas" type="select" file="secrets/area.age"
}
package "mysql-server" {
    debconf "mysql-server/root_password" type="password" value="x" file="secrets/mysql.age"
}
user "ops" {
    password "x" file="secrets/ops.hash.age"
}
"#,
    );
    let run = fx.bellc(&["--short", "check", "bell.kdl"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for (line, said) in [
        ("bell.kdl:4:42", "a `select` answer is no secret"),
        (
            "bell.kdl:7:68",
            "a debconf answer has either `value` or `file`",
        ),
        (
            "bell.kdl:10:14",
            "`password` takes either a value or `file=`",
        ),
    ] {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with(line) && l.contains(said)),
            "{line} {said}:\n{}",
            run.stderr
        );
    }
}

#[test]
fn secrets_kdl_names_who_opens_each_file_and_check_and_rekey_hold_them_to_it() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let (host, ci) = host_and_ci(keys.path());
    let ana = ssh_key(&keys.path().join("ana"));
    let bob = age_keygen(&keys.path().join("bob.key"));
    let eve = age_keygen(&keys.path().join("eve.key"));
    let fx = Fixture::spec(&spec(&host, true));
    // As a team starts: encrypted with age to CI and ana.
    for (name, secret) in [
        ("ops.hash.age", HASH.to_string()),
        ("token.age", format!("{TOKEN}\n")),
        ("mysql.age", format!("{ANSWER}\n")),
    ] {
        age_encrypt_to(&fx.path().join("secrets").join(name), &[&ci, &ana], &secret);
    }
    let listed = |ops: &str, token: &str| {
        std::fs::write(
            fx.path().join("secrets.kdl"),
            format!(
                "build \"{ci}\"\nkey \"ana\" \"{ana} ana@laptop\"\nkey \"bob\" \"{bob}\"\n\
                 key \"eve\" \"{eve}\"\n\
                 secret \"secrets/ops.hash.age\" {ops}\nsecret \"secrets/token.age\" {token}\n\
                 secret \"secrets/mysql.age\" \"ana\"\n"
            ),
        )
        .unwrap();
    };
    let ci_key = keys.path().join("ci.key").display().to_string();
    let secrets = |command: &str, key: &str| fx.bellc(&["secrets", command, "--secrets-key", key]);

    // Without a key nothing can be checked.
    let run = fx.bellc(&["secrets", "check"]);
    assert_eq!(run.code, 64, "{}", run.stderr);
    // age's own files cannot be shown to hold exactly the named recipients: rekey writes them.
    listed("\"ana\"", "\"ana\"");
    let run = secrets("check", &ci_key);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "secrets/ops.hash.age: encrypted to others than `secrets.kdl` names (build, ana)"
        ),
        "{}",
        run.stderr
    );
    let run = secrets("rekey", &ci_key);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = secrets("check", &ci_key);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("3 secret file(s)"), "{}", run.stdout);
    let open = |file: &str, key: &Path| age_open(&fx.path().join("secrets").join(file), key);
    assert!(open("ops.hash.age", &keys.path().join("bob.key")).is_none());

    // bob is added to one file: check fails until it is rekeyed; then bob opens it (with age),
    // and the build opens it as before.
    listed("\"ana\" \"bob\"", "\"ana\" \"eve\"");
    let run = secrets("check", &ci_key);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("secrets/ops.hash.age"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("secrets/token.age"), "{}", run.stderr);
    assert!(!run.stderr.contains("secrets/mysql.age"), "{}", run.stderr);
    // Rekeyed by ana, with her SSH key.
    let ana_key = keys.path().join("ana").display().to_string();
    assert_eq!(secrets("rekey", &ana_key).code, 0);
    let opened = open("ops.hash.age", &keys.path().join("bob.key"));
    assert_eq!(opened.as_deref(), Some(HASH));
    assert_eq!(secrets("check", &ci_key).code, 0);
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--secrets-key", &ci_key]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // eve is taken off the list but the file still opens for her: check fails naming it.
    listed("\"ana\" \"bob\"", "\"ana\"");
    let run = secrets("check", &ci_key);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "secrets/token.age: encrypted to others than `secrets.kdl` names (build, ana)"
        ),
        "{}",
        run.stderr
    );
    assert!(open("token.age", &keys.path().join("eve.key")).is_some());
    assert_eq!(secrets("rekey", &ci_key).code, 0);
    assert!(open("token.age", &keys.path().join("eve.key")).is_none());

    // A file the spec reads that secrets.kdl does not name; a name with no key; a bad key.
    std::fs::write(
        fx.path().join("secrets.kdl"),
        format!(
            "build \"{ci}\"\nkey \"ana\" \"{ana}\"\nkey \"bad\" \"age1nope\"\n\
             secret \"secrets/ops.hash.age\" \"ana\" \"carol\"\n"
        ),
    )
    .unwrap();
    let run = fx.bellc(&["--short", "secrets", "check", "--secrets-key", &ci_key]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("secrets.kdl:3:1: error[bell::secrets::invalid]: the key of `bad`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("secrets.kdl:4:1: error[bell::secrets::invalid]: no key is named `carol`"),
        "{}",
        run.stderr
    );
    std::fs::write(
        fx.path().join("secrets.kdl"),
        format!("build \"{ci}\"\nkey \"ana\" \"{ana}\"\nsecret \"secrets/ops.hash.age\" \"ana\"\n"),
    )
    .unwrap();
    let run = secrets("check", &ci_key);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "secrets/token.age: the spec reads it, and `secrets.kdl` does not name who opens it"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn secrets_edit_encrypts_what_the_editor_saved_and_leaves_no_plaintext_behind() {
    if !bell_testkit::tool("age") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let (host, ci) = host_and_ci(keys.path());
    let ana = ssh_key(&keys.path().join("ana"));
    let fx = Fixture::spec(&format!(
        "fleet \"f\" target=\"debian-12\"\nhost \"a\" identity=\"{host}\"\n\
         file \"/etc/app/token\" mode=\"0600\" {{\n    content file=\"secrets/token.age\"\n}}\n"
    ))
    .file(
        "secrets.kdl",
        &format!("build \"{ci}\"\nkey \"ana\" \"{ana}\"\nsecret \"secrets/token.age\" \"ana\"\n"),
    );
    age_encrypt(
        &fx.path().join("secrets/token.age"),
        &ci,
        "old-token-EDIT-1\n",
    );
    let ci_key = keys.path().join("ci.key").display().to_string();
    // The editor: says where it was given the plaintext, with what modes, what it held and
    // whether the repository held it meanwhile; then saves `NEW` (or fails).
    let editor = keys.path().join("editor.sh");
    std::fs::write(
        &editor,
        r#"#!/bin/sh
{
    echo "$1"
    stat -c %a "$1"
    stat -c %a "$(dirname "$1")"
    cat "$1"
    if grep -rqF -- "old-token-EDIT-1" "$REPO"; then echo "in the repository"; else echo "not in the repository"; fi
} >"$LOG"
[ -n "$FAIL" ] && exit 3
printf '%s' "$NEW" >"$1"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = keys.path().join("editor.log");
    let edit = |file: &str, new: &str, fail: bool, key: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bellc"));
        command
            .args(["secrets", "edit", file])
            .current_dir(fx.path())
            .env("EDITOR", &editor)
            // Empty, as a shell profile may leave it: EDITOR's turn (git's rule).
            .env("VISUAL", "")
            .env("REPO", fx.path())
            .env("LOG", &log)
            .env("NEW", new);
        if fail {
            command.env("FAIL", "1");
        }
        if let Some(key) = key {
            command.args(["--secrets-key", key]);
        }
        Run::from(command.output().unwrap())
    };
    let opened = |file: &str| {
        age_open(
            &fx.path().join("secrets").join(file),
            &keys.path().join("ci.key"),
        )
        .unwrap_or_default()
    };

    let run = edit(
        "secrets/token.age",
        "new-token-EDIT-2\n",
        false,
        Some(&ci_key),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("secrets/token.age: encrypted to build, ana"),
        "{}",
        run.stdout
    );
    let said = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    let plain = Path::new(lines[0]);
    assert!(!plain.starts_with(fx.path()), "{said}");
    assert_eq!(&lines[1..3], ["600", "700"], "{said}");
    assert_eq!(lines[3], "old-token-EDIT-1", "{said}");
    assert_eq!(lines[4], "not in the repository", "{said}");
    assert!(
        !plain.exists() && !plain.parent().unwrap().exists(),
        "{said}"
    );
    assert_eq!(opened("token.age"), "new-token-EDIT-2\n");
    assert_nowhere(
        fx.path(),
        &needles(&["new-token-EDIT-2", "old-token-EDIT-1"]),
    );
    let check = fx.bellc(&["secrets", "check", "--secrets-key", &ci_key]);
    assert_eq!(check.code, 0, "{}", check.stderr);

    // An editor that fails: nothing written, the plaintext gone all the same.
    let before = std::fs::read(fx.path().join("secrets/token.age")).unwrap();
    let run = edit("secrets/token.age", "never-EDIT-3\n", true, Some(&ci_key));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("nothing was written"), "{}", run.stderr);
    assert_eq!(
        std::fs::read(fx.path().join("secrets/token.age")).unwrap(),
        before
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!Path::new(said.lines().next().unwrap()).exists());

    // A new file needs no key; one secrets.kdl does not name is refused.
    let listed = std::fs::read_to_string(fx.path().join("secrets.kdl")).unwrap();
    std::fs::write(
        fx.path().join("secrets.kdl"),
        format!("{listed}secret \"secrets/new.age\" \"ana\"\n"),
    )
    .unwrap();
    let run = edit("secrets/new.age", "fresh-EDIT-4", false, None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(opened("new.age"), "fresh-EDIT-4");
    let run = edit("secrets/other.age", "x", false, Some(&ci_key));
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(
        run.stderr.contains("add `secret \"secrets/other.age\""),
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("secrets/other.age").exists());
}

/// The examples keep their secrets as a real fleet would: `bellc secrets check` (what CI runs
/// over every spec) passes for both, each file opens with the example build key by Debian's
/// `age` too, and without the key a build fails at the line that names the file.
#[test]
fn the_examples_secrets_are_encrypted_to_exactly_what_secrets_kdl_names() {
    let examples = repo_root().join("examples");
    let key = example_secrets_key();
    for spec in ["three-role.kdl", "divingbell.kdl"] {
        let run = bellc_in(
            &examples,
            &[
                "secrets",
                "check",
                spec,
                "--secrets-key",
                &key.to_string_lossy(),
            ],
        );
        assert_eq!(run.code, 0, "{spec}: {}{}", run.stdout, run.stderr);
        let out = tempfile::tempdir().unwrap();
        let out = out.path().join("out");
        let without = bellc_in(&examples, &["build", spec, "-o", &out.to_string_lossy()]);
        assert_eq!(without.code, 1, "{}", without.stderr);
        assert!(
            without.stderr.contains("bell::lower::secret_unopened")
                && without.stderr.contains(&format!("{spec}:")),
            "{}",
            without.stderr
        );
    }
    if !have("age") {
        return;
    }
    for file in std::fs::read_dir(examples.join("secrets")).unwrap() {
        let path = file.unwrap().path();
        let opened = age_open(&path, &key).expect("the example key opens it");
        assert!(opened.starts_with("$6$"), "{}", path.display());
    }
}

/// A secret written in the spec is a warning at its line (an error under `--deny-warnings`)
/// whose help says how to move it; following it word for word (`secrets.kdl`, `bellc secrets
/// edit`, the line it gives) leaves a spec that says nothing and builds the same release.
#[test]
fn a_secret_written_in_the_spec_is_a_warning_whose_commands_move_it() {
    if !bell_testkit::tool("age-keygen") || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let (host, ci) = host_and_ci(keys.path());
    let ci_key = keys.path().join("ci.key").display().to_string();
    let fx = Fixture::spec(&spec(&host, false)).file("seal.key", &"k".repeat(32));
    let seal = ["--seal-key", "seal.key"];
    let run = fx.bellc(&[&["build", "bell.kdl", "-o", "plain", "--short"][..], &seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let warned: Vec<&str> = run
        .diagnostics()
        .into_iter()
        .filter(|d| d.contains("warning[bell::lower::plaintext_secret_in_spec]"))
        .collect();
    let at: Vec<&str> = warned.iter().filter_map(|d| d.split(": ").next()).collect();
    assert_eq!(
        at,
        ["bell.kdl:4:14", "bell.kdl:7:13", "bell.kdl:10:58"],
        "{}",
        run.stderr
    );
    assert_nowhere_in_text(&run.stderr);
    let denied = fx.bellc(&["check", "--deny-warnings", "--short"]);
    assert_eq!(denied.code, 1, "{}", denied.stderr);

    // Each help, followed: the file named in secrets.kdl, `bellc secrets edit` with an editor
    // that pastes the secret, the line it gives in the place of the one written.
    let helps: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("then write `"))
        .collect();
    assert_eq!(helps.len(), 3, "{}", run.stderr);
    fn between<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
        let rest = &text[text.find(from).unwrap() + from.len()..];
        &rest[..rest.find(to).unwrap()]
    }
    let editor = keys.path().join("paste.sh");
    std::fs::write(&editor, "#!/bin/sh\nprintf '%s' \"$SECRET\" >\"$1\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut secrets_kdl = format!("build \"{ci}\"\n");
    let mut text = spec(&host, false);
    let written = [
        (format!("password \"{HASH}\""), HASH.to_string()),
        (format!("content \"{TOKEN}\\n\""), format!("{TOKEN}\n")),
        (format!("value=\"{ANSWER}\""), ANSWER.to_string()),
    ];
    for (help, (old, secret)) in helps.into_iter().zip(written) {
        let file = between(help, "(`secret \"", "\"`)");
        secrets_kdl.push_str(&format!("secret \"{file}\"\n"));
        std::fs::write(fx.path().join("secrets.kdl"), &secrets_kdl).unwrap();
        let command = between(help, "run `", "` and paste");
        assert_eq!(command, format!("bellc secrets edit {file}"));
        let args: Vec<&str> = command.split(' ').skip(1).collect();
        let edited = Command::new(env!("CARGO_BIN_EXE_bellc"))
            .args(&args)
            .current_dir(fx.path())
            .env("EDITOR", &editor)
            .env_remove("VISUAL")
            .env("SECRET", &secret)
            .output()
            .unwrap();
        assert!(edited.status.success(), "{edited:?}");
        let line = between(help, "then write `", "` here");
        let place = text.lines().find(|l| l.contains(&old)).unwrap().to_string();
        let indent = &place[..place.len() - place.trim_start().len()];
        text = text.replace(&place, &format!("{indent}{line}"));
    }
    std::fs::write(fx.path().join("bell.kdl"), &text).unwrap();
    let key = ["--secrets-key", ci_key.as_str()];
    let run = fx.bellc(
        &[
            &["build", "bell.kdl", "-o", "moved", "--short"][..],
            &seal,
            &key,
        ]
        .concat(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stderr.contains("plaintext_secret_in_spec"),
        "{}",
        run.stderr
    );
    let release = |out: &str| std::fs::read(fx.path().join(out).join("release.json")).unwrap();
    assert_eq!(release("moved"), release("plain"), "the same release");
    let check = fx.bellc(&[&["secrets", "check"][..], &key].concat());
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert_nowhere_in_text(&std::fs::read_to_string(fx.path().join("bell.kdl")).unwrap());
}

/// Fails when `text` holds one of this file's secrets.
fn assert_nowhere_in_text(text: &str) {
    crate::common::sealing::assert_not_in("the text", text, &needles(&[HASH, TOKEN, ANSWER]));
}

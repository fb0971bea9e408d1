//! Specs written to harm the machine that builds them: reading files outside the spec's tree
//! (and printing them), injecting lines into what bellc writes, exhausting memory, stack or
//! time, and bytes that are not text. Each test here failed before its fix.

mod common;

use common::Fixture;
use std::os::unix::fs::symlink;

const HEAD: &str = "fleet \"f\" target=\"debian-12\"\nhost \"h1\" address=\"10.0.0.1\"\n";

fn spec(body: &str) -> String {
    format!("{HEAD}{body}")
}

/// A secret that must never appear in bellc's output, in a file outside the spec's tree.
fn secret_outside() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secret.kdl");
    std::fs::write(&path, "TOKEN=hunter2-sekrit\nhost \"stolen\"\n").expect("write");
    (dir, path)
}

#[test]
fn include_and_inventory_read_only_the_spec_tree_and_echo_nothing() {
    let (_keep, secret) = secret_outside();
    let secret_dir = secret.parent().expect("dir").display().to_string();
    let fx = Fixture::spec(&spec(&format!(
        "include \"{}\"\ninventory \"{}\"\ninclude \"../../../../../../..{}\"\ninclude \"link.kdl\"\ninclude \"dir-link/*.kdl\"\ninclude \"links/*.kdl\"\ninclude \"{secret_dir}/*.kdl\"\ninclude \"ok/../inside.kdl\"\n",
        secret.display(),
        secret.display(),
        secret.display(),
    )))
    .file("inside.kdl", "host \"h2\" address=\"10.0.0.2\"\n")
    .file("ok/keep", "");
    symlink(&secret, fx.path().join("link.kdl")).expect("symlink");
    symlink(secret.parent().expect("dir"), fx.path().join("dir-link")).expect("symlink");
    std::fs::create_dir(fx.path().join("links")).expect("mkdir");
    symlink(&secret, fx.path().join("links/a.kdl")).expect("symlink");
    for args in [
        &["check", "--short"][..],
        &["build", "--short", "-o", "out"][..],
    ] {
        let run = fx.bellc(args);
        assert_eq!(run.code, 1, "{}", run.stderr);
        for needle in ["hunter2", "TOKEN", "stolen", "secret.kdl\n"] {
            assert!(
                !run.stderr.contains(needle) && !run.stdout.contains(needle),
                "`{needle}` was printed:\n{}",
                run.stderr
            );
        }
        let diags = run.diagnostics();
        let outside: Vec<&&str> = diags
            .iter()
            .filter(|d| d.ends_with(": outside the spec's directory"))
            .collect();
        assert_eq!(outside.len(), 7, "{}", diags.join("\n"));
        for line in 3..=9 {
            assert!(
                outside
                    .iter()
                    .any(|d| d.starts_with(&format!("bell.kdl:{line}:"))),
                "line {line}: {}",
                diags.join("\n")
            );
        }
        // `ok/../inside.kdl` stays in the tree and is read.
        assert_eq!(diags.len(), 7, "{}", diags.join("\n"));
    }
}

#[test]
fn a_path_climbing_out_is_refused_before_the_file_system_is_asked() {
    // Whether `../x` exists outside is not the spec's to learn: both answers are the same.
    let fx = Fixture::spec(&spec(
        "include \"../no-such-file.kdl\"\ninventory \"../../etc-hosts.json\"\n",
    ));
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1);
    let diags = run.diagnostics();
    assert_eq!(diags.len(), 2, "{}", diags.join("\n"));
    assert!(
        diags
            .iter()
            .all(|d| d.ends_with(": outside the spec's directory")),
        "{}",
        diags.join("\n")
    );
}

#[test]
fn special_files_are_refused_without_blocking() {
    let fx = Fixture::spec(&spec(
        "include \"fifo.kdl\"\ninventory \"zero.json\"\ninclude \"dir.kdl\"\n",
    ));
    let made = std::process::Command::new("mkfifo")
        .arg(fx.path().join("fifo.kdl"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    // /dev/zero reached through a link in the tree is outside the tree; a device node in the
    // tree is not a regular file. Both end at once.
    symlink("/dev/zero", fx.path().join("zero.json")).expect("symlink");
    std::fs::create_dir(fx.path().join("dir.kdl")).expect("mkdir");
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert!(
        diags.iter().any(|d| d.starts_with("bell.kdl:3:")
            && d.ends_with("cannot read included file `fifo.kdl`: not a regular file")),
        "{}",
        diags.join("\n")
    );
    assert!(
        diags.iter().any(|d| d.starts_with("bell.kdl:4:")
            && d.ends_with("cannot read inventory `zero.json`: outside the spec's directory")),
        "{}",
        diags.join("\n")
    );
    assert!(
        diags.iter().any(|d| d.starts_with("bell.kdl:5:")
            && d.ends_with("cannot read included file `dir.kdl`: not a regular file")),
        "{}",
        diags.join("\n")
    );
}

#[test]
fn a_spec_that_is_not_utf8_is_an_error_at_its_first_bad_byte() {
    let fx = Fixture::new()
        .file("inc.kdl", "")
        .file("bell.kdl", &spec("include \"inc.kdl\"\n"));
    std::fs::write(fx.path().join("inc.kdl"), b"host \"h\xff2\"\n").expect("write");
    std::fs::write(
        fx.path().join("root.kdl"),
        [HEAD.as_bytes(), b"host \"h\xc3\x283\"\n"].concat(),
    )
    .expect("write");
    for args in [
        &["check", "--short", "root.kdl"][..],
        &["build", "--short", "root.kdl", "-o", "out"][..],
    ] {
        let run = fx.bellc(args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert_eq!(
            run.diagnostics(),
            ["root.kdl:3:8: error[bell::load::not_utf8]: the spec is not UTF-8 text"],
            "{}",
            run.stderr
        );
        assert!(!run.stdout.contains("ok"), "{}", run.stdout);
    }
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.diagnostics(),
        ["inc.kdl:1:8: error[bell::load::not_utf8]: included file `inc.kdl` is not UTF-8 text"],
        "{}",
        run.stderr
    );
}

#[test]
fn nesting_thousands_deep_is_a_diagnostic_not_a_stack_overflow() {
    let deep = format!("{}{}", "a {".repeat(2000), "}".repeat(2000));
    let fx = Fixture::spec(&spec("include \"deep.kdl\"\n"))
        .file("deep.kdl", &deep)
        .file("root.kdl", &spec(&deep));
    for (args, expected) in [
        (&["check", "--short"][..], "deep.kdl:1:195:"),
        (&["check", "--short", "root.kdl"][..], "root.kdl:3:195:"),
    ] {
        let run = fx.bellc(args);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(
            run.diagnostics(),
            [format!(
                "{expected} error[bell::load::too_deep]: blocks nest deeper than 64 levels"
            )],
            "{}",
            run.stderr
        );
    }
}

/// Found by fuzzing: the KDL parser also recurses once per nested block comment and once per
/// `/-` in a row, so thousands of either overflowed its stack (a SIGSEGV under the fuzzer).
#[test]
fn comments_and_slashdashes_thousands_deep_are_a_diagnostic_not_a_stack_overflow() {
    for (body, at) in [
        (
            format!("{}{}", "/*".repeat(2000), "*/".repeat(2000)),
            "bell.kdl:3:129:",
        ),
        (format!("{}x\n", "/- ".repeat(2000)), "bell.kdl:3:193:"),
    ] {
        let fx = Fixture::spec(&spec(&body));
        let run = fx.bellc(&["check", "--short"]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(
            run.diagnostics(),
            [format!(
                "{at} error[bell::load::too_deep]: blocks nest deeper than 64 levels"
            )],
            "{}",
            run.stderr
        );
    }
}

/// Found by fuzzing: commented-out blocks (`/- {`) left open inside each other cost the KDL
/// parser four times as much per level; ten took minutes. Refused at five, at once.
#[test]
fn commented_out_blocks_nested_open_are_a_diagnostic_not_a_hang() {
    let body = "/-x /- {a\n".repeat(12);
    let fx = Fixture::spec(&spec(&body));
    let started = std::time::Instant::now();
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.diagnostics(),
        ["bell.kdl:7:8: error[bell::load::commented_out_too_deep]: commented-out blocks (`/- {` or `/- node {`) nest deeper than 4 levels"],
        "{}",
        run.stderr
    );
    // Not a timing test: the unguarded parse takes minutes, far beyond this.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// Found by fuzzing (fuzz/seeds/compile/slow-commented-out-nodes.kdl): nodes commented out
/// with `/- node {` and left open double the parser's work per level; twenty took seconds
/// and reported a million diagnostics. Refused at five, at once.
#[test]
fn commented_out_nodes_left_open_are_a_diagnostic_not_a_hang() {
    let body = "/- /- sysctl { vm.swappiness \"h\" */ */\n".repeat(20);
    let fx = Fixture::spec(&spec(&body));
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.diagnostics(),
        ["bell.kdl:7:14: error[bell::load::commented_out_too_deep]: commented-out blocks (`/- {` or `/- node {`) nest deeper than 4 levels"],
        "{}",
        run.stderr
    );
}

/// The fuzzer's whole input: mangled text whose parse is bounded and whose errors are each
/// reported once, however often the parser's recovery finds them.
#[test]
fn the_fuzzers_mangled_spec_gets_its_diagnostics_quickly_and_once_each() {
    let text = std::fs::read_to_string(
        common::repo_root().join("fuzz/seeds/compile/slow-commented-out-nodes.kdl"),
    )
    .expect("seed");
    let fx = Fixture::spec(&text);
    let started = std::time::Instant::now();
    let run = fx.bellc(&["check", "--short"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diagnostics = run.diagnostics();
    let unique: std::collections::HashSet<_> = diagnostics.iter().collect();
    assert_eq!(unique.len(), diagnostics.len(), "{}", run.stderr);
    // Not a timing test: unguarded, this took 100 s in a debug build.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn the_limits_the_readme_states_are_the_limits_enforced() {
    let readme = std::fs::read_to_string(common::repo_root().join("docs/language.md"))
        .expect("docs/language.md");
    for (what, value) in [
        (
            "spec file",
            bellc_core::front::read::bytes(bellc_core::front::read::MAX_SPEC_FILE),
        ),
        (
            "inventory",
            bellc_core::front::read::bytes(bellc_core::front::read::MAX_INVENTORY),
        ),
        (
            "ssh key file",
            bellc_core::front::read::bytes(bellc_core::front::read::MAX_KEY_FILE),
        ),
        (
            "included files",
            bellc_core::front::read::MAX_INCLUDED_FILES.to_string(),
        ),
        ("nesting", bellc_core::front::read::MAX_NESTING.to_string()),
        (
            "commented-out blocks",
            bellc_core::front::read::MAX_COMMENTED_NESTING.to_string(),
        ),
    ] {
        assert!(
            readme
                .lines()
                .any(|l| l.starts_with('|') && l.contains(what) && l.contains(&value)),
            "the language reference's table of limits lacks `{what}` = {value}"
        );
    }
}

#[test]
fn a_limits_field_cannot_become_a_rule_of_its_own() {
    let b = common::in_memory::build(&spec(
        "limit \"open\" domain=\"* hard nofile 0 #\" type=\"soft\" item=\"nofile\" value=1024\nlimit \"tab\" domain=\"ops\tx\" type=\"soft\" item=\"nofile\" value=1024\nlimit \"hash\" domain=\"ops#\" type=\"soft\" item=\"nofile\" value=1024\n",
    ));
    assert!(b.compiled.is_none());
    let fields: Vec<&String> = b
        .diagnostics
        .iter()
        .filter(|d| d.contains("invalid limits.conf field"))
        .collect();
    assert_eq!(fields.len(), 3, "{:#?}", b.diagnostics);
    for (line, d) in (3..).zip(&fields) {
        assert!(d.starts_with(&format!("bell.kdl:{line}:")), "{d}");
    }
}

#[test]
fn addresses_and_labels_cannot_forge_lines() {
    let fx = Fixture::spec(
        "fleet \"f\" target=\"debian-12\"\nhost \"h1\" address=\"10.0.0.1; id\"\nhost \"h2\" address=\"10.0.0.2\" rack=\"r1\\nh9 10.6.6.6 rack=r9\"\nhost \"h3\" address=\"10.0.0.3\" rack=\"r\\u{1b}[2J\"\ninventory \"nodes.json\"\n",
    )
    .file(
        "nodes.json",
        r#"[{"name": "h4", "address": "10.0.0.4", "labels": {"rack": "r1\nh9"}},
 {"name": "h5", "address": "10.0.0.5", "labels": {"ra\nck": "r1"}},
 {"name": "h6", "address": "10.0.0.6\nx", "labels": {}}]"#,
    );
    for command in ["check", "hosts"] {
        let run = fx.bellc(&[command, "--short"]);
        assert_eq!(run.code, 1, "{command}: {}{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("h9"), "{}", run.stdout);
        let diags = run.diagnostics();
        for at in [
            "bell.kdl:2:11:",
            "bell.kdl:3:30:",
            "bell.kdl:4:30:",
            "nodes.json:1:",
            "nodes.json:2:",
            "nodes.json:3:",
        ] {
            assert!(
                diags
                    .iter()
                    .any(|d| d.starts_with(at) && d.contains(": error[")),
                "{command}: nothing at {at}:\n{}",
                diags.join("\n")
            );
        }
    }
}

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example";

#[test]
fn bells_own_state_and_a_users_files_are_not_managed_paths() {
    let b = common::in_memory::build(&spec(&format!(
        r#"file "/var/lib/bell/lock" {{ content "" }}
perm "/var/lib/bell/*" mode="0777"
perm "/var/*/be?l/state" mode="0777"
mount "over" target="/var/lib/bell" device="tmpfs" type="tmpfs"
file "/etc/bell/keys.pub" {{ content "forged" }}
file "/usr/local/sbin/bell-run" {{ content "" }}
user "ops" sudo=#true {{
    ssh-key "{KEY}"
}}
file "/home/ops/.ssh/authorized_keys" {{ content "" }}
file "/etc/sudoers.d/bell-ops" {{ content "ops ALL=(ALL) NOPASSWD: ALL" }}
perm "/*" mode="0755"
perm "/var/lib/*" mode="0755"
file "/usr/sbin/bell-run" {{ content "" }}
"#
    )));
    let lines: Vec<&String> = b.diagnostics.iter().collect();
    let at = |line: usize, needle: &str| {
        assert!(
            lines
                .iter()
                .any(|d| d.starts_with(&format!("bell.kdl:{line}:")) && d.contains(needle)),
            "nothing at line {line} saying `{needle}`:\n{}",
            b.diagnostics.join("\n")
        )
    };
    at(
        3,
        "error[bell::lower::invalid_value]: `/var/lib/bell/lock` is bell's own `/var/lib/bell`",
    );
    at(4, "`/var/lib/bell/*` is bell's own");
    at(5, "`/var/*/be?l/state` is bell's own");
    at(6, "`/var/lib/bell` is bell's own");
    at(7, "`/etc/bell/keys.pub` is bell's own");
    at(8, "`/usr/local/sbin/bell-run` is bell's own");
    at(12, "is the authorized_keys of user `ops`");
    at(13, "is the sudoers drop-in of user `ops`");
    at(14, "warning[bell::perm::top_level_glob]");
    // `/var/lib/*` matches /var/lib/bell itself.
    at(15, "`/var/lib/*` is bell's own `/var/lib/bell`");
    // Where the Debian package installs the runner.
    at(16, "`/usr/sbin/bell-run` is bell's own");
}

// ---- the build output: `bellc build -o OUT` removes only what it wrote, and trusts OUT only
// as far as the record of its last build says it is unchanged.

fn small_fleet() -> Fixture {
    Fixture::spec(&spec(
        "host \"h2\" address=\"10.0.0.2\" role=\"db\"\nsysctl { vm.swappiness 10 }\noverride \"db\" {\n    match role=\"db\"\n    sysctl { vm.swappiness 1 }\n}\n",
    ))
}

#[test]
fn a_build_into_a_directory_it_did_not_write_removes_nothing() {
    let fx = small_fleet()
        .file("home/notes.txt", "mine")
        .file("home/bundles/photos/cat.jpg", "meow")
        .file("elsewhere/keep.txt", "keep")
        .file("ours/bundles/mine/keep.txt", "keep");
    let run = fx.bellc(&["build", "-o", "home"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("holds `notes.txt`, which bellc did not write"),
        "{}",
        run.stderr
    );
    assert!(fx.path().join("home/bundles/photos/cat.jpg").is_file());
    assert!(!fx.path().join("home/release.json").exists());

    // A symlinked `bundles/` would make the build remove where it points.
    std::fs::create_dir(fx.path().join("linked")).expect("mkdir");
    symlink("../elsewhere", fx.path().join("linked/bundles")).expect("symlink");
    let run = fx.bellc(&["build", "-o", "linked"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("linked/bundles is not a directory"),
        "{}",
        run.stderr
    );
    assert!(fx.path().join("elsewhere/keep.txt").is_file());

    // In bellc's own layout, an entry of `bundles/` that is not a bundle id is left alone.
    let run = fx.bellc(&["build", "-o", "ours"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(fx.path().join("ours/bundles/mine/keep.txt").is_file());
    let run = fx.bellc(&["prune", "ours", "--keep", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(fx.path().join("ours/bundles/mine/keep.txt").is_file());
}

#[test]
fn a_damaged_output_is_not_up_to_date_and_is_repaired() {
    let fx = small_fleet();
    let out = fx.path().join("out");
    assert_eq!(fx.bellc(&["build", "-o", "out"]).code, 0);
    let fresh = common::tree(&out);
    let up_to_date = |fx: &Fixture| {
        let run = fx.bellc(&["build", "-o", "out"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stderr.contains("up to date")
    };
    assert!(up_to_date(&fx));
    let bundle_files = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = walkdir::WalkDir::new(out.join("bundles"))
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| e.into_path())
            .filter(|p| p.file_name().is_some_and(|n| n != "bundle.json"))
            .collect();
        v.sort();
        v
    };
    type Harm<'a> = Box<dyn Fn() + 'a>;
    let damage: [(&str, Harm); 5] = [
        (
            "a bundle file deleted",
            Box::new(|| std::fs::remove_file(&bundle_files()[0]).expect("rm")),
        ),
        (
            "a bundle file edited in place",
            Box::new(|| {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&bundle_files()[1])
                    .expect("open");
                f.write_all(b"# edited\n").expect("write");
            }),
        ),
        (
            "a bundle file replaced by an editor",
            Box::new(|| {
                let path = &bundle_files()[2];
                let text = std::fs::read(path).expect("read");
                std::fs::remove_file(path).expect("rm");
                std::fs::write(path, [&text[..], b"x"].concat()).expect("write");
            }),
        ),
        (
            "a manifest edited",
            Box::new(|| {
                let manifest = std::fs::read_dir(out.join("bundles"))
                    .expect("ls")
                    .next()
                    .expect("a bundle")
                    .expect("entry")
                    .path()
                    .join("bundle.json");
                std::fs::write(&manifest, "{}").expect("write");
            }),
        ),
        (
            "a host link pointed elsewhere",
            Box::new(|| {
                let link = out.join("hosts/h1");
                let other = std::fs::read_link(out.join("hosts/h2")).expect("link");
                std::fs::remove_file(&link).expect("rm");
                symlink(other, &link).expect("symlink");
            }),
        ),
    ];
    for (what, harm) in damage {
        harm();
        assert!(!up_to_date(&fx), "{what}: the build said up to date");
        assert_eq!(common::tree(&out), fresh, "{what}: not repaired");
        assert!(up_to_date(&fx), "{what}: not up to date after the repair");
    }
}

#[test]
fn an_exec_timeout_beyond_a_week_is_refused() {
    let b = common::in_memory::build(&spec(
        "exec \"long\" timeout=9223372036854775807 {\n    script \"#!/bin/sh\\ntrue\\n\"\n}\nexec \"week\" timeout=604800 {\n    script \"#!/bin/sh\\ntrue\\n\"\n}\n",
    ));
    assert!(
        b.diagnostics.iter().any(|d| d.starts_with("bell.kdl:3:")
            && d.contains("has a `timeout` of 9223372036854775807 seconds, more than a week")),
        "{:#?}",
        b.diagnostics
    );
    assert_eq!(b.diagnostics.len(), 1, "{:#?}", b.diagnostics);
}

#[test]
fn a_template_that_exhausts_memory_steps_or_output_is_a_diagnostic() {
    let fx = Fixture::spec(&spec(
        r#"file "/etc/doubling" {
    content "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"
}
"#,
    ))
    .file(
        "steps.kdl",
        &spec(
            r#"file "/etc/loop" {
    content "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}"
}
file "/etc/out" {
    content "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}"
}
"#,
        ),
    );
    let run = fx.bellc(&["build", "--short", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.starts_with(
            "bell.kdl:4:13: error[bell::render::template_memory]: the template of `file:/etc/doubling` on host `h1` used more than 256 MiB of memory while rendering"
        ),
        "{}",
        run.stderr
    );
    assert!(!fx.path().join("out").exists(), "something was written");
    // Into an earlier build's output, the build that ran out of memory leaves it as it was:
    // the library reports the error to the CLI, which takes its output back, and exits.
    std::fs::write(
        fx.path().join("good.kdl"),
        spec("file \"/etc/doubling\" {\n    content \"x\"\n}\n"),
    )
    .expect("write");
    let good = fx.bellc(&["build", "--short", "good.kdl", "-o", "out"]);
    assert_eq!(good.code, 0, "{}", good.stderr);
    let before = common::tree(&fx.path().join("out"));
    let run = fx.bellc(&["build", "--short", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("used more than 256 MiB"),
        "{}",
        run.stderr
    );
    assert_eq!(
        common::tree(&fx.path().join("out")),
        before,
        "the output changed"
    );
    std::fs::remove_dir_all(fx.path().join("out")).expect("remove out");
    let run = fx.bellc(&["build", "--short", "steps.kdl", "-o", "out"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert!(
        diags.iter().any(|d| d.starts_with("steps.kdl:4:13:")
            && d.contains("the template took more than 5000000 steps")),
        "{}",
        run.stderr
    );
    assert!(
        diags
            .iter()
            .any(|d| d.starts_with("steps.kdl:7:13:") && d.contains("the output grew past 16 MiB")),
        "{}",
        run.stderr
    );
}

/// The allocator that counts a template's memory, as `bellc` installs it: with it, the library
/// itself is tried below, in this process.
#[global_allocator]
static ALLOCATOR: bellc_core::render::budget::Budgeted = bellc_core::render::budget::Budgeted;

/// The library never exits: a template over its memory budget is an error its caller gets
/// (and the next template renders as before), not the end of the process that called it.
#[test]
fn a_template_over_its_memory_budget_is_an_error_of_the_library() {
    let renderer = bellc_core::render::Renderer::new();
    let doubling = "{% set ns = namespace(s='x') %}{% for i in range(40) %}\
                    {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";
    let ctx = || minijinja::context! { host => "h1" };
    let e = renderer.user_template(doubling, ctx()).unwrap_err();
    assert_eq!(e.detail(), Some(bellc_core::render::TEMPLATE_MEMORY));
    // Not tried again in this build: each try would keep its budget held.
    let e = renderer.user_template(doubling, ctx()).unwrap_err();
    assert_eq!(e.detail(), Some(bellc_core::render::TEMPLATE_MEMORY_BEFORE));
    assert_eq!(
        renderer
            .user_template("{{ host }}", ctx())
            .expect("renders"),
        "h1"
    );
}

#[test]
fn the_template_limits_are_in_the_readme() {
    let readme = std::fs::read_to_string(common::repo_root().join("docs/language.md"))
        .expect("docs/language.md");
    for (what, value) in [
        (
            "template steps",
            bellc_core::render::MAX_TEMPLATE_STEPS.to_string(),
        ),
        (
            "template output",
            bellc_core::front::read::bytes(bellc_core::render::MAX_TEMPLATE_OUTPUT as u64),
        ),
        (
            "template memory",
            bellc_core::front::read::bytes(bellc_core::render::budget::MAX_TEMPLATE_MEMORY as u64),
        ),
        (
            "exec timeout",
            bellc_core::kinds::exec::MAX_TIMEOUT.to_string(),
        ),
    ] {
        assert!(
            readme
                .lines()
                .any(|l| l.starts_with('|') && l.contains(what) && l.contains(&value)),
            "the language reference's table of limits lacks `{what}` = {value}"
        );
    }
}

/// What `hostile_strings.rs` found: values that built but that their consumer refused or read
/// otherwise. Each is now an error at its line.
#[test]
fn values_their_consumer_would_refuse_or_misread_are_errors() {
    let b = common::in_memory::build(&spec(concat!(
        "mount \"a\" target=\"/mnt/a\" device=\"\" type=\"ext4\"\n",
        "mount \"b\" target=\"/mnt/b\" device=\"/dev/sdb\" type=\"\"\n",
        "user \"c\" sudo=\"1=n\\\\d5_\"\n",
        "user \"d\" sudo=\"#ALL=(root) /usr/bin/systemctl restart nginx\"\n",
        "package \"ee\" {\n    debconf \"0\" type=\"string\" value=\"v\"\n}\n",
        "package \"ff\" {\n    debconf \"ff/q\" type=\"string\" value=\"joins the next line \\\\\"\n}\n",
        "apt-source \"g\" url=\"http://deb.exampl'e.org/debian\" suites=\"bookworm\" components=\"main\"\n",
        "apt-source \"h\" url=\"http://deb.example.org/debian#x\" suites=\"bookworm\" components=\"main\"\n",
        "apt-source \"i\" url=\"http://deb.example.org/debian\" suites=\"bookworm ü\" components=\"main\"\n",
        "apt-source \"j\" url=\"http://deb.example.org/debian\" suites=\"bookworm\"\n",
    )));
    assert!(b.compiled.is_none());
    assert_eq!(
        b.error_lines(),
        [3, 4, 5, 6, 8, 11, 13, 14, 15, 16],
        "{:#?}",
        b.diagnostics
    );
}

/// The AppArmor findings of `hostile_strings.rs`: profile names bellc would read otherwise than
/// apparmor_parser, so that the scripts would ask the kernel for another profile.
#[test]
fn profile_names_bellc_and_apparmor_parser_would_read_apart_are_errors() {
    let b = common::in_memory::build(&spec(concat!(
        "apparmor \"a\" {\n    profile \"profile 1=n\\\\d5_ /usr/bin/a {\\n}\\n\"\n}\n",
        "apparmor \"b\" {\n    profile \"profile x\\u{85}y /usr/bin/b {\\n}\\n\"\n}\n",
        "apparmor \"c\" {\n    profile \"profile x?{- /usr/bin/c {\\n}\\n\"\n}\n",
        "apparmor \"d\" {\n    profile \"profile x\\n /usr/bin/d {\\n}\\n\"\n}\n",
        "apparmor \"e\" {\n    profile \"profile ok /usr/bin/e {\\n}\\n\"\n}\n",
    )));
    assert!(b.compiled.is_none());
    assert_eq!(b.error_lines(), [4, 7, 10, 13], "{:#?}", b.diagnostics);
}

/// The limits.conf findings of `hostile_strings.rs`: domains pam_limits skips or reads as
/// another, with only a line in the journal to say so.
#[test]
fn limits_domains_pam_limits_would_skip_or_misread_are_errors() {
    let limit = |name: &str, domain: &str, item: &str| {
        format!("limit \"{name}\" domain=\"{domain}\" type=\"soft\" item=\"{item}\" value=4\n")
    };
    let b = common::in_memory::build(&spec(
        &[
            limit("a", "%ops", "nofile"),
            limit("b", "%", "nproc"),
            limit("c", "1000:c37", "nofile"),
            limit("d", "4294967296:", "nofile"),
            limit("e", "+alice", "nofile"),
            limit("f", "@", "nofile"),
            limit("g", "2000:1000", "nofile"),
            limit("h", "%ops", "maxlogins"),
            limit("i", "@:27", "nofile"),
            limit("j", "jdoe@corp.example", "nofile"),
        ]
        .concat(),
    ));
    assert!(b.compiled.is_none());
    assert_eq!(
        b.error_lines(),
        [3, 4, 5, 6, 7, 8, 9],
        "{:#?}",
        b.diagnostics
    );
    assert!(
        b.diagnostics.iter().any(|d| d.starts_with(
            "bell.kdl:3:11: error[bell::render::invalid]: domain `%ops` is for `maxlogins` only"
        )),
        "{:#?}",
        b.diagnostics
    );
}

//! Every value a template writes is escaped for its line or says why not; AppArmor's names.

use super::*;

// ---- the templates ----

/// The filters that escape a value for the line it lands in (`render::stdlib`).
const ESCAPES: &[&str] = &["sh", "unit", "unit_arg", "conf", "limits"];

/// Values the stdlib templates write without an escaping filter, and why each needs none. A new
/// unescaped value fails the test below until it is escaped or listed here with its reason.
const UNESCAPED: &[(&str, &str, &str)] = &[
    (
        "live/apply.sh.j2",
        "reload_timeout",
        "a whole number of seconds, 1 to 3600 (`kinds::live`)",
    ),
    (
        "apt/upgrade.sh.j2",
        "apt_get",
        "`apt-get` or `bell_apt_get`, a word the template sets",
    ),
    (
        "apt-source/update.sh.j2",
        "apt_get",
        "`apt-get` or `bell_apt_get`, a word the template sets",
    ),
    (
        "package/common.sh.j2",
        "apt_get",
        "`apt-get` or `bell_apt_get`, a word the template sets",
    ),
    (
        "kernel-args/dropin.cfg.j2",
        "name",
        "in a comment: a resource name (`validate::resource_name`)",
    ),
    (
        "kernel-args/dropin.cfg.j2",
        "add | join(\" \")",
        "inside double quotes of a file sourced by sh: arguments of `_-.,:/+@%=` and \
         alphanumerics only (`kernel_args::kernel_arg`), no `\"`, `$`, `\\` or backquote",
    ),
    (
        "kernel-args/dropin.cfg.j2",
        "arg",
        "a case pattern: arguments of `_-.,:/+@%=` and alphanumerics only \
         (`kernel_args::kernel_arg`), none a pattern character",
    ),
    (
        "kernel-args/dropin.cfg.j2",
        "patterns",
        "a case pattern made of the arguments above and `|`, `=*`",
    ),
    (
        "apparmor/apply.sh.j2",
        "mode",
        "in a message: `enforce` or `complain`, an enum of the schema",
    ),
    (
        "apt-source/source.sources.j2",
        "name",
        "in a comment: a resource name (`validate::resource_name`)",
    ),
    (
        "apt-source/source.sources.j2",
        "suites | join(\" \")",
        "words of URL characters (`validate::apt_words`), read back by apt above",
    ),
    (
        "apt-source/source.sources.j2",
        "components | join(\" \")",
        "words of URL characters (`validate::apt_words`), read back by apt above",
    ),
    (
        "apt-source/source.sources.j2",
        "keyring",
        "bell's own path, made from the resource name",
    ),
    (
        "common/prelude.sh.j2",
        "kind",
        "a kind keyword of bellc's own",
    ),
    (
        "common/prelude.sh.j2",
        "role",
        "`apply`, `revert` or `check`, from bellc",
    ),
    (
        "ethtool/apply.sh.j2",
        "f.want",
        "`on` or `off`, from a boolean",
    ),
    (
        "ethtool/check.sh.j2",
        "f.want",
        "`on` or `off`, from a boolean",
    ),
    (
        "ethtool/ethtool.service.j2",
        "f.want",
        "`on` or `off`, from a boolean",
    ),
    (
        "ethtool/ethtool.service.j2",
        "iface",
        "in a comment: an interface name (`validate::interface_name`)",
    ),
    (
        "ethtool/ethtool.service.j2",
        "device",
        "the interface's device unit, escaped by `escape::systemd_escape_path`",
    ),
    (
        "health/probe.sh.j2",
        "name",
        "in a comment: a resource name (`validate::resource_name`)",
    ),
    ("health/probe.sh.j2", "timeout", "a number of seconds"),
    (
        "reboot/hook.sh.j2",
        "name",
        "in a comment: `before-reboot` or `after-boot`, the field's name",
    ),
    (
        "reboot/hook.sh.j2",
        "when",
        "in a comment: a sentence of the kind's own",
    ),
    (
        "reboot/hook.sh.j2",
        "failing",
        "in a comment: a sentence of the kind's own",
    ),
    ("reboot/hook.sh.j2", "timeout", "a number of seconds"),
    (
        "reboot/hook.sh.j2",
        "run",
        "shell code the spec gives as the hook itself, verbatim by design",
    ),
    ("health/probe.sh.j2", "retries", "a number"),
    ("health/probe.sh.j2", "interval", "a number of seconds"),
    (
        "health/probe.sh.j2",
        "run",
        "shell code the spec gives as the probe itself, verbatim by design",
    ),
    (
        "mount/mount.unit.j2",
        "name",
        "in a comment: a resource name, read back by systemd above",
    ),
    (
        "mount/mount.unit.j2",
        "before | join(\" \")",
        "unit names (`validate::unit_name_list`)",
    ),
    (
        "mount/mount.unit.j2",
        "after | join(\" \")",
        "unit names (`validate::unit_name_list`)",
    ),
    (
        "package/debconf.seed.j2",
        "pkg",
        "a package name (`validate::apt_package_name`)",
    ),
    (
        "package/debconf.seed.j2",
        "d.question",
        "an `OWNER/NAME` question, read back by debconf above",
    ),
    (
        "package/debconf.seed.j2",
        "d.kind",
        "one of debconf's types, an enum of the schema",
    ),
    (
        "package/debconf.seed.j2",
        "d.value",
        "one trimmed line not ending in `\\`, read back by debconf above",
    ),
    (
        "user/sudoers.j2",
        "name",
        "a user name sudoers reads as it is, read back by visudo above",
    ),
    (
        "user/sudoers.j2",
        "written",
        "in a comment: `#true` or the rule as a Rust debug string, one line",
    ),
    (
        "user/sudoers.j2",
        "rule",
        "a rule in the sudoers subset of `validate::sudo_rule`, read back by visudo above",
    ),
];

/// Every `{{ ... }}` of every stdlib template ends in the escaping filter of its line, is a
/// literal choice (`"1" if x else "0"`), or is listed in `UNESCAPED`, and every entry there is
/// still used.
#[test]
fn every_template_value_is_escaped_or_says_why_not() {
    let stdlib = common::repo_root().join("stdlib");
    let mut unexplained = Vec::new();
    let mut used = vec![false; UNESCAPED.len()];
    let mut templates = Vec::new();
    for kind in std::fs::read_dir(&stdlib).expect("stdlib") {
        let kind = kind.expect("entry").path();
        for file in std::fs::read_dir(&kind).expect("kind dir") {
            templates.push(file.expect("entry").path());
        }
    }
    templates.sort();
    assert!(templates.len() > 40, "found only {templates:?}");
    for path in templates {
        let name = path
            .strip_prefix(&stdlib)
            .expect("under stdlib")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("read template");
        let mut rest = text.as_str();
        while let Some(start) = rest.find("{{") {
            let Some(end) = rest[start..].find("}}") else {
                panic!("{name}: `{{{{` without `}}}}`");
            };
            let expr = rest[start + 2..start + end].trim();
            rest = &rest[start + end + 2..];
            let filter = expr.rsplit_once('|').map(|(_, f)| f.trim());
            if filter.is_some_and(|f| ESCAPES.contains(&f)) {
                continue;
            }
            if expr.starts_with("\"1\" if ") && expr.ends_with(" else \"0\"") {
                continue;
            }
            match UNESCAPED
                .iter()
                .position(|(file, value, _)| *file == name && *value == expr)
            {
                Some(i) => used[i] = true,
                None => unexplained.push(format!("{name}: {{{{ {expr} }}}}")),
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "escape these with one of {ESCAPES:?}, or list them in UNESCAPED with the reason they \
         need none: {unexplained:#?}"
    );
    let stale: Vec<_> = UNESCAPED
        .iter()
        .zip(used)
        .filter(|(_, used)| !used)
        .map(|(entry, _)| entry)
        .collect();
    assert!(
        stale.is_empty(),
        "no template writes these any more: {stale:#?}"
    );
}

// ---- AppArmor ----

/// The names of the profiles a profile text declares reach the apply and check scripts, which
/// ask the kernel for them by name. bellc reads the names from the text itself; apparmor_parser
/// (`-N`, run on every profile in one shell) must read the same names, or the scripts would ask
/// for a profile that is not there. A text apparmor_parser refuses is left to it: `bellc check
/// --strict` runs it and reports its error at the spec line.
#[test]
fn apparmor_profile_names_are_the_names_apparmor_parser_reads() {
    if !have("apparmor_parser") {
        return;
    }
    let mut cases = Vec::new();
    for value in share("app-name", 16, 2) {
        let text = format!("profile {value} /usr/bin/app {{\n}}\n");
        cases.push(Case::new(
            &value,
            &[
                "apparmor \"p\" {".into(),
                format!("    profile {}", kdl(&text)),
                "}".into(),
            ],
            1,
        ));
    }
    for value in share("/usr/bin/app", 16, 2) {
        let text = format!("{value} flags=(complain) {{\n}}\n");
        cases.push(Case::new(
            &value,
            &[
                "apparmor \"p\" {".into(),
                format!("    profile {}", kdl(&text)),
                "}".into(),
            ],
            1,
        ));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    // One shell: for each case, the names its apply script asks for (its `has` lines, run with
    // a `has` that prints its first argument), then the names apparmor_parser reads.
    let mut script = String::from("has() { printf 'bell %s\\n' \"$1\"; }\nfail() { :; }\n");
    let mut values = Vec::new();
    for (value, bundle) in build_all("apparmor names", &cases) {
        let Some(bundle) = bundle else { continue };
        let i = values.len();
        let profile = bundle
            .contents
            .iter()
            .find(|(path, _)| path.contains("/apparmor.d/"))
            .map(|(_, bytes)| bytes.clone())
            .expect("a profile file");
        std::fs::write(dir.path().join(i.to_string()), &profile).expect("write profile");
        let apply = file_text(&bundle, |p| p == "scripts/apparmor/p.apply");
        script.push_str(&format!("printf '== {i}\\n'\n"));
        for line in apply.lines().filter(|l| l.starts_with("has ")) {
            script.push_str(line);
            script.push('\n');
        }
        script.push_str(&format!(
            "apparmor_parser -N {}/{i} 2>/dev/null | sed 's/^/parser /' || true\n",
            dir.path().display()
        ));
        values.push(value);
    }
    let path = dir.path().join("names.sh");
    write(&path, &script);
    let output = run(Command::new("sh").arg(&path));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut parsed = 0;
    for (i, block) in stdout.split("== ").skip(1).enumerate() {
        let mut bell = Vec::new();
        let mut parser = Vec::new();
        for line in block.lines().skip(1) {
            if let Some(name) = line.strip_prefix("bell ") {
                bell.push(name);
            } else if let Some(name) = line.strip_prefix("parser ") {
                parser.push(name);
            }
        }
        // The apply script asks twice: before loading and after.
        let mut seen = std::collections::HashSet::new();
        bell.retain(|name| seen.insert(*name));
        if !parser.is_empty() {
            parsed += 1;
            assert_eq!(bell, parser, "the profile names of {:?}", values[i]);
        }
    }
    assert!(
        parsed * 10 >= values.len(),
        "apparmor_parser read only {parsed} profiles"
    );
}

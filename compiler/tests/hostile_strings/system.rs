//! The system's consumers: shells, sysctl, systemd's mount units, pam_limits.

use super::*;

/// Every value a template puts into a script goes through `| sh` (`escape::shell_quote`; the
/// template check below holds them to it). Here sh, dash and bash read a thousand of them back.
#[test]
fn shell_words_read_back_exactly_in_sh_dash_and_bash() {
    let values = values("it's $HOME", 24);
    let mut script = String::from("printf '%s\\0'");
    let mut expected = Vec::new();
    for value in &values {
        match bellc_core::escape::shell_word(value) {
            Ok(word) => {
                script.push_str(" \\\n  ");
                script.push_str(&word);
                expected.push(value.as_str());
            }
            Err(_) => assert!(value.contains('\0'), "{value:?} was refused"),
        }
    }
    script.push('\n');
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("words.sh");
    write(&path, &script);
    for shell in [&["sh"][..], &["dash"], &["bash", "--posix"]] {
        if !have(shell[0]) {
            continue;
        }
        let output = run(Command::new(shell[0]).args(&shell[1..]).arg(&path));
        assert!(output.status.success(), "{shell:?} failed on {script}");
        let read: Vec<&[u8]> = output.stdout.split(|b| *b == 0).collect();
        assert_eq!(read.len(), expected.len() + 1, "{shell:?} split the words");
        for (got, want) in read.iter().zip(&expected) {
            assert_eq!(*got, want.as_bytes(), "{shell:?} read {want:?} differently");
        }
    }
}

// ---- sysctl.d ----

/// A sysctl value reaches `sysctl.d/*.conf`; procps `sysctl -p` (what `sysctl --system` runs)
/// reads it and writes it to a string-valued key of a private UTS namespace, and says what it
/// set.
#[test]
fn sysctl_values_read_back_by_sysctl() {
    if !have("unshare") || !have("sysctl") {
        return;
    }
    // The kernel keeps at most 64 bytes of a domain name.
    let cases: Vec<Case> = values("example.org", 12)
        .iter()
        .map(|v| {
            Case::new(
                v,
                &[format!("sysctl {{ kernel.domainname {} }}", kdl(v))],
                0,
            )
        })
        .collect();
    let mut conf = String::new();
    let mut expected = Vec::new();
    for (value, bundle) in build_all("sysctl value", &cases) {
        let Some(bundle) = bundle else { continue };
        let text = file_text(&bundle, |p| p.contains("/sysctl.d/"));
        let setting = text
            .lines()
            .find(|line| !line.starts_with('#'))
            .unwrap_or_else(|| panic!("no setting in {text:?}"));
        conf.push_str(setting);
        conf.push('\n');
        expected.push(value);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("99-bell.conf");
    write(&path, &conf);
    let output = run(Command::new("unshare")
        .args(["--map-root-user", "--uts", "sysctl", "-p"])
        .arg(&path));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "sysctl -p: {stderr}\n{conf}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let read: Vec<&str> = stdout.lines().collect();
    assert_eq!(read.len(), expected.len(), "{stdout}");
    for (got, want) in read.iter().zip(&expected) {
        assert_eq!(
            *got,
            format!("kernel.domainname = {want}"),
            "sysctl read {want:?}"
        );
    }
}

// ---- systemd units ----

/// The name, target, device, type and options of a `mount` reach its `.mount` unit; systemd's
/// own parser (`systemd-analyze verify`, whose debug log dumps every loaded unit) reads all of
/// them in one run.
#[test]
fn mount_fields_read_back_by_systemd() {
    if !have("systemd-analyze") {
        return;
    }
    let fields = [
        ("name", "data"),
        ("target", "/srv/data"),
        ("device", "/dev/disk/by-label/data"),
        ("type", "ext4"),
        ("options", "rw,noatime,x-note=50%"),
    ];
    let mut cases = Vec::new();
    let mut wanted = Vec::new();
    for (field, base) in fields {
        // The unit file is one place (four fields share it), mount options another.
        let generated = if field == "options" {
            values(base, 16)
        } else {
            share(base, 16, fields.len() - 1)
        };
        for (i, value) in generated.into_iter().enumerate() {
            // Each case mounts somewhere else, so that every unit is its own file.
            let mut f: BTreeMap<&str, String> = fields
                .iter()
                .map(|(name, base)| (*name, base.to_string()))
                .collect();
            f.insert("target", format!("/mnt/{field}{i}"));
            if field == "target" {
                f.insert("target", format!("/mnt/t{i}-{value}"));
            } else {
                f.insert(field, value.clone());
            }
            let line = format!(
                "mount {} target={} device={} type={} options={}",
                kdl(&f["name"]),
                kdl(&f["target"]),
                kdl(&f["device"]),
                kdl(&f["type"]),
                kdl(&f["options"])
            );
            cases.push(Case::new(&value, &[line], 0));
            wanted.push(f);
        }
    }
    let built = build_all("mount fields", &cases);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut units = BTreeMap::new();
    let mut args = Vec::new();
    for (i, ((_, bundle), f)) in built.iter().zip(wanted).enumerate() {
        let Some(bundle) = bundle else { continue };
        let (path, bytes) = bundle
            .contents
            .iter()
            .find(|(path, _)| path.ends_with(".mount"))
            .expect("a mount unit");
        let name = path.rsplit('/').next().expect("a file name").to_string();
        // verify reads `FILE:NAME` as "load FILE as NAME", and a unit name may hold a `:`.
        let file = dir.path().join(format!("{i}.mount"));
        std::fs::write(&file, bytes).expect("write unit");
        let mut arg = file.into_os_string();
        arg.push(":");
        arg.push(&name);
        args.push(arg);
        assert!(units.insert(name, f).is_none(), "two cases share a unit");
    }
    let output = run(Command::new("systemd-analyze")
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .env("SYSTEMD_LOG_COLOR", "0")
        .args(["verify", "--man=no"])
        .args(&args));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "systemd-analyze verify: {stderr}");
    let complaints = [
        "doesn't match unit name",
        "specifier",
        "gnoring",
        "Failed to",
        "Refusing",
    ];
    if let Some(line) = stderr.lines().find(|line| {
        let ours = line
            .split_once(": ")
            .is_some_and(|(unit, _)| units.contains_key(unit));
        ours && complaints.iter().any(|c| line.contains(c))
    }) {
        panic!("systemd-analyze verify: {line}");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dumps = unit_dumps(&stdout);
    for (name, f) in &units {
        let Some(dump) = dumps.get(name.as_str()) else {
            panic!("systemd did not load {name}");
        };
        let want = [
            ("Description", format!("bell mount {}", f["name"])),
            ("Where", f["target"].clone()),
            ("What", f["device"].clone()),
            ("File System Type", f["type"].clone()),
            // No options is no `Options=` line, which systemd shows so.
            (
                "Options",
                Some(f["options"].clone())
                    .filter(|o| !o.is_empty())
                    .unwrap_or("n/a".into()),
            ),
        ];
        for (setting, value) in want {
            assert_eq!(
                dump.get(setting).map(String::as_str),
                Some(value.as_str()),
                "{setting} of {name}"
            );
        }
    }
}

/// The settings of each unit in the dump of `systemd-analyze verify` (`\t-> Unit NAME:` and then
/// `\t\tSetting: value` lines); the first value of each setting.
fn unit_dumps(stdout: &str) -> BTreeMap<&str, BTreeMap<&str, String>> {
    let mut dumps: BTreeMap<&str, BTreeMap<&str, String>> = BTreeMap::new();
    let mut unit = None;
    for line in stdout.lines() {
        if let Some(name) = line
            .strip_prefix("\t-> Unit ")
            .and_then(|rest| rest.strip_suffix(':'))
        {
            unit = Some(name);
            dumps.entry(name).or_default();
        } else if let (Some(name), Some(setting)) = (unit, line.strip_prefix("\t\t")) {
            if let Some((key, value)) = setting.split_once(": ") {
                let settings = dumps.entry(name).or_default();
                settings.entry(key).or_insert_with(|| value.to_string());
            }
        }
    }
    dumps
}

// ---- limits.d ----

/// Whom a limits domain names, as limits.conf(5) describes it: the user the test asks
/// pam_limits about.
#[derive(Debug)]
enum Principal {
    Anyone,
    User(String),
    Group(String),
    Uid(u32),
    Gid(u32),
}

fn principal(domain: &str) -> Result<Principal, String> {
    if domain == "*" {
        return Ok(Principal::Anyone);
    }
    let (sigil, rest) = match domain.chars().next() {
        Some(c @ ('@' | '%')) => (Some(c), &domain[1..]),
        _ => (None, domain),
    };
    if sigil == Some('%') {
        return Err("`%` domains count logins; pam_limits ignores them for `nofile`".into());
    }
    if let Some((min, max)) = rest.split_once(':') {
        // Decimal ids, at least one of them; the first is the one the test asks about.
        let number = |s: &str| match s {
            "" => Some(None),
            s if s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<u32>().ok().map(Some),
            _ => None,
        };
        let Some(id) = number(min)
            .zip(number(max))
            .and_then(|(min, max)| min.or(max))
        else {
            return Err(format!("`{rest}` is not a uid or gid range"));
        };
        return Ok(match sigil {
            Some(_) => Principal::Gid(id),
            None => Principal::Uid(id),
        });
    }
    Ok(match sigil {
        Some(_) => Principal::Group(rest.to_string()),
        None => Principal::User(domain.to_string()),
    })
}

/// `s` quoted for sh by the test itself, not by the code under test.
fn sh_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A limits `domain` names whom a rule is for: a user, `@group`, a uid or gid range, or `*`.
/// pam_limits says nothing when it skips a rule it cannot read (only the journal hears), so
/// every domain that builds is put to the real pam_limits: in a private mount namespace
/// `/etc/security` holds the case's limits.d file alone, `/etc/passwd` and `/etc/group` hold the
/// user the domain names, and a `runuser` session (pam_limits its only session module) as that
/// user reads `ulimit -Sn`: it must be the case's value. A user the domain does not name must
/// keep the default.
#[test]
fn limits_domains_name_whom_pam_limits_applies_them_to() {
    if !(have("runuser") && have("unshare") && in_memory::is_root()) {
        return;
    }
    // Lowered only, as both soft and hard: pam_limits sets the hard limit too (init's when no
    // rule names it), and raising it may be refused where the test runs.
    let limit = |i: usize| 16 + i % 997;
    let bases = ["ops", "@ops", "*", "1000:", "@:27", "%ops"];
    let values: Vec<String> = bases
        .iter()
        .flat_map(|base| share(base, 16, bases.len()))
        .collect();
    let cases: Vec<Case> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let line = format!(
                "limit \"l\" domain={} type=\"-\" item=\"nofile\" value={}",
                kdl(v),
                limit(i)
            );
            Case::new(v, &[line], 0)
        })
        .collect();

    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write(&d.join("security/limits.conf"), "");
    write(&d.join("security/limits.d/.keep"), "");
    write(
        &d.join("pam.d/runuser"),
        "auth sufficient pam_rootok.so\nsession required pam_limits.so\n",
    );
    let mut users = vec!["bellcontrol:x:69998:69999::/:/bin/sh".to_string()];
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut extra_groups = vec!["bellnone:x:69999:".to_string()];
    let mut script = String::from("set -u\n");
    for (ours, onto) in [
        ("security", "/etc/security"),
        ("pam.d", "/etc/pam.d"),
        ("passwd", "/etc/passwd"),
        ("group", "/etc/group"),
    ] {
        let ours = sh_quoted(&d.join(ours).to_string_lossy());
        script.push_str(&format!("mount --bind {ours} {onto} || exit 1\n"));
    }
    // What a user gets whom no rule names.
    script.push_str("echo '== case base other =='\nrunuser -u bellcontrol -- sh -c 'ulimit -Sn'\n");
    let ask = |script: &mut String, i: usize, who: &str, user: &str| {
        script.push_str(&format!(
            "echo '== case {i} {who} =='\nrunuser -u {} -- sh -c 'ulimit -Sn' 2>&1\n",
            sh_quoted(user)
        ));
    };
    let mut expected = BTreeMap::new();
    let mut wrong = Vec::new();
    for (i, (value, bundle)) in build_all("limits domain", &cases).into_iter().enumerate() {
        let Some(bundle) = bundle else { continue };
        let text = file_text(&bundle, |p| p.contains("/limits.d/"));
        write(&d.join(format!("cases/{i}.conf")), &text);
        let principal = match principal(&value) {
            Ok(principal) => principal,
            Err(why) => {
                wrong.push(format!(
                    "{value:?} builds, but pam_limits applies it to nobody: {why}"
                ));
                continue;
            }
        };
        let uid = 70_000 + i;
        let user = match &principal {
            Principal::User(name) if name.contains([':', '\n']) => {
                wrong.push(format!("{value:?} builds, but no user can have that name"));
                continue;
            }
            Principal::User(name) => {
                users.push(format!("{name}:x:{uid}:69999::/:/bin/sh"));
                name.clone()
            }
            Principal::Group(name) => {
                groups
                    .entry(name.clone())
                    .or_default()
                    .push(format!("bellu{i}"));
                users.push(format!("bellu{i}:x:{uid}:69999::/:/bin/sh"));
                format!("bellu{i}")
            }
            Principal::Uid(id) => {
                users.push(format!("bellu{i}:x:{id}:69999::/:/bin/sh"));
                format!("bellu{i}")
            }
            Principal::Gid(id) => {
                extra_groups.push(format!("bellg{i}:x:{id}:"));
                users.push(format!("bellu{i}:x:{uid}:{id}::/:/bin/sh"));
                format!("bellu{i}")
            }
            Principal::Anyone => "bellcontrol".to_string(),
        };
        let case = sh_quoted(&d.join(format!("cases/{i}.conf")).to_string_lossy());
        script.push_str(&format!(
            "cp {case} /etc/security/limits.d/bell.conf || exit 1\n"
        ));
        ask(&mut script, i, "named", &user);
        expected.insert(format!("{i} named"), (value.clone(), Some(limit(i))));
        if matches!(principal, Principal::User(_) | Principal::Group(_)) {
            ask(&mut script, i, "other", "bellcontrol");
            expected.insert(format!("{i} other"), (value, None));
        }
    }

    // The groups a domain names, members added where the name is already a group.
    let mut group_file = String::new();
    let real_groups = std::fs::read_to_string("/etc/group").expect("/etc/group");
    for line in real_groups.lines() {
        let name = line.split(':').next().unwrap_or("");
        match groups.remove(name) {
            Some(members) => {
                let sep = if line.ends_with(':') { "" } else { "," };
                group_file.push_str(&format!("{line}{sep}{}\n", members.join(",")));
            }
            None => group_file.push_str(&format!("{line}\n")),
        }
    }
    for (name, gid) in groups.iter().zip(80_000..) {
        group_file.push_str(&format!("{}:x:{gid}:{}\n", name.0, name.1.join(",")));
    }
    for line in &extra_groups {
        group_file.push_str(&format!("{line}\n"));
    }
    let mut passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    for line in &users {
        passwd.push_str(&format!("{line}\n"));
    }
    write(&d.join("passwd"), &passwd);
    write(&d.join("group"), &group_file);
    write(&d.join("ask.sh"), &script);

    let out = run(Command::new("unshare")
        .arg("-m")
        .arg("sh")
        .arg(d.join("ask.sh")));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A marker holds blanks, which no domain (so no user name in an answer) does.
    let mut answers: BTreeMap<String, String> = BTreeMap::new();
    let mut current = None;
    for line in stdout.lines() {
        if let Some(key) = line
            .strip_prefix("== case ")
            .and_then(|l| l.strip_suffix(" =="))
        {
            current = Some(key.to_string());
            answers.insert(key.to_string(), String::new());
        } else if let Some(key) = &current {
            let answer = answers.entry(key.clone()).or_default();
            answer.push_str(line);
        }
    }
    assert_eq!(answers.len(), expected.len() + 1, "{stdout}");
    let base = answers["base other"].clone();
    assert!(
        base.parse::<usize>()
            .is_ok_and(|n| !(16..16 + 997).contains(&n)),
        "a session whom no rule names gets {base:?}, which a case might set"
    );
    for (key, (value, want)) in &expected {
        let got = answers.get(key).map(String::as_str).unwrap_or("");
        let want = want.map_or(base.clone(), |n| n.to_string());
        if got != want {
            wrong.push(format!(
                "{value:?} ({key}): pam_limits gave {got:?}, not {want}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} domains misread:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

// ---- sudoers ----

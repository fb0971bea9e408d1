//! Accounts and packages: visudo, ssh-keygen, debconf, apt.

use super::*;

/// A managed user's name and sudo rule reach a sudoers drop-in; visudo checks all of them in one
/// file and exports what it parsed (`visudo -x`): one rule per user, for that user.
#[test]
fn sudoers_names_and_rules_read_back_by_visudo() {
    if !have("visudo") {
        return;
    }
    let mut cases = Vec::new();
    let mut users = Vec::new();
    for value in share("deploy", 16, 2) {
        cases.push(Case::new(
            &value,
            &[format!("user {} sudo=#true", kdl(&value))],
            0,
        ));
        users.push(value);
    }
    for (i, value) in share("ALL=(root) /usr/bin/systemctl restart nginx", 16, 2)
        .into_iter()
        .enumerate()
    {
        let user = format!("rule{i}");
        cases.push(Case::new(
            &value,
            &[format!("user \"{user}\" sudo={}", kdl(&value))],
            0,
        ));
        users.push(user);
    }
    let mut sudoers = String::new();
    let mut expected = Vec::new();
    for ((_, bundle), user) in build_all("sudoers", &cases).into_iter().zip(users) {
        let Some(bundle) = bundle else { continue };
        sudoers.push_str(&file_text(&bundle, |p| p.contains("/sudoers/")));
        expected.push(user);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("sudoers");
    write(&path, &sudoers);
    let check = run(Command::new("visudo").arg("-cf").arg(&path));
    if !check.status.success() {
        let log = String::from_utf8_lossy(&check.stderr);
        let line = log
            .split(&format!("{}:", path.display()))
            .nth(1)
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| sudoers.lines().nth(n - 1));
        panic!("visudo refuses {line:?}: {log}");
    }
    let export = run(Command::new("visudo").args(["-x", "-", "-f"]).arg(&path));
    assert!(export.status.success(), "visudo -x");
    let parsed: serde_json::Value = match serde_json::from_slice(&export.stdout) {
        Ok(parsed) => parsed,
        Err(error) => panic!("visudo -x printed no JSON: {error}"),
    };
    let specs = parsed["User_Specs"].as_array().cloned().unwrap_or_default();
    let read: Vec<Vec<&str>> = specs
        .iter()
        .map(|spec| {
            spec["User_List"]
                .as_array()
                .map(|list| list.iter().filter_map(|u| u["username"].as_str()).collect())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(read.len(), expected.len(), "one rule per user:\n{sudoers}");
    for (got, want) in read.iter().zip(&expected) {
        assert_eq!(
            got,
            &[want.as_str()],
            "visudo read the rule of {want:?} as another's"
        );
    }
}

// ---- authorized_keys ----

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2";

/// An ssh key's comment reaches authorized_keys through the apply script; the script writes it
/// byte for byte, and `ssh-keygen -l` reads the whole file at once as one key per line.
#[test]
fn ssh_key_comments_keep_each_key_one_line_for_ssh_keygen() {
    if !have("ssh-keygen") {
        return;
    }
    let cases: Vec<Case> = values("ops@example", 16)
        .iter()
        .map(|v| {
            let key = format!("{KEY} {v}");
            Case::new(v, &[format!("user \"ops\" {{ ssh-key {} }}", kdl(&key))], 0)
        })
        .collect();
    // The apply script prints the wanted keys with one `printf` function; sh runs those lines
    // of every case, each into its own file, and ssh-keygen reads them all as one file.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut script = String::new();
    let mut expected = Vec::new();
    for (value, bundle) in build_all("ssh key comment", &cases) {
        let Some(bundle) = bundle else { continue };
        let apply = file_text(&bundle, |p| p == "scripts/user/ops.apply");
        let Some(line) = apply.lines().find(|line| {
            line.starts_with("want_keys() { printf '%s\\n' ") && line.ends_with("; }")
        }) else {
            panic!("the apply script writes no keys: {apply}");
        };
        script.push_str(&format!(
            "keys={}/{}\n{line}\nwant_keys >\"$keys\"\n",
            dir.path().display(),
            expected.len()
        ));
        expected.push(value);
    }
    let script_path = dir.path().join("keys.sh");
    write(&script_path, &script);
    let output = run(Command::new("sh").arg("-eu").arg(&script_path));
    assert!(
        output.status.success(),
        "sh: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut keys = Vec::new();
    for (i, value) in expected.iter().enumerate() {
        let written = std::fs::read(dir.path().join(i.to_string())).expect("keys written");
        assert_eq!(
            written,
            format!("{KEY} {value}\n").as_bytes(),
            "sh wrote {value:?} otherwise"
        );
        keys.extend(written);
    }
    // Each line is one key to sshd's parser: ssh-keygen lists as many keys as lines, each this
    // key (a comment that broke the line would add a line or lose the key).
    let path = dir.path().join("authorized_keys");
    std::fs::write(&path, &keys).expect("write");
    let output = run(Command::new("ssh-keygen").arg("-lf").arg(&path));
    assert!(output.status.success(), "ssh-keygen -l");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let read: Vec<&str> = stdout.lines().collect();
    assert_eq!(read.len(), expected.len(), "{stdout}");
    for (got, want) in read.iter().zip(&expected) {
        let fingerprint = "256 SHA256:rE5pSXJaK2ZdXwGcI2GeTUmzLUocKEasOqFK1so7QtI ";
        assert!(
            got.starts_with(fingerprint) && got.ends_with(" (ED25519)"),
            "ssh-keygen read the key with comment {want:?} as {got:?}"
        );
    }
}

// ---- debconf ----

/// A debconf question and answer reach the package's seed file; `debconf-set-selections` loads
/// every seed into a file database of its own, which is then read back.
#[test]
fn debconf_answers_read_back_by_debconf() {
    if !have("debconf-set-selections") {
        return;
    }
    let mut cases = Vec::new();
    let mut wanted = Vec::new();
    for value in share("pkgx/question", 16, 2) {
        let line = format!("    debconf {} type=\"string\" value=\"v\"", kdl(&value));
        cases.push(Case::new(
            &value,
            &["package \"pkgx\" {".into(), line, "}".into()],
            1,
        ));
        wanted.push((value.clone(), "v".to_string()));
    }
    for (i, value) in share("an answer", 16, 2).into_iter().enumerate() {
        let question = format!("pkgx/v{i}");
        let line = format!(
            "    debconf \"{question}\" type=\"string\" value={}",
            kdl(&value)
        );
        cases.push(Case::new(
            &value,
            &["package \"pkgx\" {".into(), line, "}".into()],
            1,
        ));
        wanted.push((question, value));
    }
    let mut seed = String::new();
    let mut expected = BTreeMap::new();
    for ((_, bundle), (question, answer)) in build_all("debconf", &cases).into_iter().zip(wanted) {
        let Some(bundle) = bundle else { continue };
        seed.push_str(&file_text(&bundle, |p| p.contains("/debconf/")));
        // A later answer to the same question replaces the earlier one.
        expected.insert(question, answer);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let seed_path = dir.path().join("seed");
    let db = dir.path().join("config.dat");
    write(&seed_path, &seed);
    let output = run(Command::new("debconf-set-selections")
        .env("DEBCONF_DB_REPLACE", format!("File{{{}}}", db.display()))
        .env("DEBCONF_DB_OVERRIDE", "")
        .arg(&seed_path));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "debconf-set-selections: {stderr}"
    );
    let db = std::fs::read_to_string(&db).expect("the database");
    let mut read = BTreeMap::new();
    for record in db.split("\n\n") {
        let field = |name: &str| {
            record
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::to_string)
        };
        if let (Some(question), Some(answer)) = (field("Name: "), field("Value: ")) {
            read.insert(question, answer);
        }
    }
    for (question, answer) in &expected {
        assert_eq!(
            read.get(question),
            Some(answer),
            "debconf read the answer to {question:?} differently"
        );
    }
    assert_eq!(read.len(), expected.len(), "debconf read other questions");
}

// ---- apt sources ----

/// The url, suites and components of an `apt-source` reach a deb822 sources file; apt reads all
/// of them at once and prints the indexes it would fetch (`apt-get update --print-uris`).
#[test]
fn apt_sources_read_back_by_apt() {
    if !have("apt-get") {
        return;
    }
    let mut cases = Vec::new();
    let mut wanted = Vec::new();
    let fields = [
        ("url", "http://deb.example.org/debian"),
        ("suites", "bookworm bookworm-updates"),
        ("components", "main contrib"),
    ];
    for (field, base) in fields {
        for (i, value) in share(base, 16, fields.len()).into_iter().enumerate() {
            // Every case has a suite or host of its own, by which apt's lines are told apart.
            let mut f: BTreeMap<&str, String> = BTreeMap::new();
            f.insert("url", format!("http://{field}{i}.example/debian"));
            f.insert("suites", format!("{field}{i}"));
            f.insert("components", "main".into());
            if field == "suites" {
                f.insert("suites", format!("{field}{i} {value}"));
            } else {
                f.insert(field, value.clone());
            }
            let line = format!(
                "apt-source \"{field}{i}\" url={} suites={} components={}",
                kdl(&f["url"]),
                kdl(&f["suites"]),
                kdl(&f["components"])
            );
            cases.push(Case::new(&value, &[line], 0));
            wanted.push(f);
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let parts = dir.path().join("sources.list.d");
    let mut expected = Vec::new();
    for ((_, bundle), f) in build_all("apt sources", &cases).into_iter().zip(wanted) {
        let Some(bundle) = bundle else { continue };
        let (path, bytes) = bundle
            .contents
            .iter()
            .find(|(path, _)| path.ends_with(".sources"))
            .expect("a sources file");
        let name = path.rsplit('/').next().expect("a file name");
        std::fs::create_dir_all(&parts).expect("mkdir");
        std::fs::write(parts.join(name), bytes).expect("write sources");
        expected.push(f);
    }
    for sub in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
    }
    let output = run(Command::new("apt-get")
        .arg("-o")
        .arg("Dir::Etc::SourceList=/dev/null")
        .arg("-o")
        .arg(format!("Dir::Etc::SourceParts={}", parts.display()))
        .arg("-o")
        .arg(format!(
            "Dir::State::Lists={}",
            dir.path().join("lists").display()
        ))
        .arg("-o")
        .arg(format!("Dir::Cache={}", dir.path().join("cache").display()))
        .args(["-o", "Debug::NoLocking=1", "-o", "APT::Architecture=amd64"])
        .args(["-o", "APT::Architectures=amd64", "update", "--print-uris"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stderr.is_empty() {
        let named = stderr
            .split_once("sources file ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .and_then(|path| std::fs::read_to_string(path).ok());
        panic!("apt-get: {stderr}\nthe first file it names:\n{named:?}");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let uris: Vec<&str> = stdout
        .lines()
        // `'URI' FILE SIZE [HASH]`; the URI is not escaped, but holds no blank.
        .filter_map(|line| line.strip_prefix('\'')?.rsplit_once("' "))
        .map(|(uri, _)| uri)
        .collect();
    for f in &expected {
        // apt prints the url as written and percent-encodes what it puts after it.
        let url = f["url"].trim_end_matches('/');
        let fetched: std::collections::HashSet<String> = uris
            .iter()
            .filter_map(|uri| uri.strip_prefix(url))
            .map(percent_decoded)
            .collect();
        for suite in f["suites"].split_whitespace() {
            let release = format!("/dists/{suite}/InRelease");
            assert!(
                fetched.contains(&release),
                "apt does not fetch {release:?} under {url:?} for {f:?}, but {fetched:#?}"
            );
            for component in f["components"].split_whitespace() {
                let index = format!("/dists/{suite}/{component}/binary-amd64/Packages.xz");
                assert!(
                    fetched.contains(&index),
                    "apt does not fetch {index:?} under {url:?} for {f:?}"
                );
            }
        }
    }
}

fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

//! A spec holding every kind of secret (a password hash, a debconf `password` answer, a file
//! of mode 0600, a private key) is built twice, every secret changed in between, then diffed,
//! explained, planned and checked by bellc, and applied into an image root, dry-run, checked
//! and shown by bell-run. No output holds a secret, and no file bell writes that holds one (in
//! OUT, in bell-run's directory, on the host) is readable by group or others.
use crate::common;
use crate::common::fleet::*;
use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";

/// The secrets of version `v` (1 or 2), each different between the versions.
fn secrets(v: u8) -> Vec<String> {
    let hash = if v == 1 {
        HASH.to_string()
    } else {
        HASH.replace("PS2E", "QS2E")
    };
    vec![
        hash,
        format!("debconf-pass-v{v}-Xy"),
        format!("api-token-v{v}-Zq"),
        format!("pem-body-v{v}-Kw"),
    ]
}

/// The spec of version `v`: with `sealed`, the host's identity (secrets are sealed by
/// default); without, `secrets="plaintext"`, a trial's.
fn spec(v: u8, sealed: Option<&str>) -> String {
    let s = secrets(v);
    let (mode, identity) = match sealed {
        Some(identity) => ("", format!(" identity=\"{identity}\"")),
        None => (" secrets=\"plaintext\"", String::new()),
    };
    format!(
        r#"fleet "f" target="debian-12"{mode}
host "h" rack="r1"{identity}
user "ops" sudo=#true {{
    password "{hash}"
}}
package "mysql-server" {{
    debconf "mysql-server/root_password" type="password" value="{debconf}"
    debconf "mysql-server/start_on_boot" type="boolean" value=#true
}}
file "/etc/app/token" mode="0600" {{
    content "{token}\n"
}}
file "/etc/ssl/private/app.pem" mode="0600" {{
    content "-----BEGIN OPENSSH PRIVATE KEY-----\n{pem}\n-----END OPENSSH PRIVATE KEY-----\n"
}}
file "/etc/app/public.conf" {{
    content "visible=v{v}\n"
}}
"#,
        hash = s[0],
        debconf = s[1],
        token = s[2],
        pem = s[3],
    )
}

fn assert_no_secret(what: &str, text: &str) {
    for v in [1, 2] {
        for secret in secrets(v) {
            assert!(
                !text.contains(&secret),
                "{what} shows the secret {secret}:\n{text}"
            );
        }
    }
}

/// Every regular file under `dir` (links not followed) that holds a secret is 0600 or closer.
fn assert_private(dir: &Path) -> usize {
    let mut holding = 0;
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.unwrap();
        if !entry.file_type().is_file() {
            continue;
        }
        let content = std::fs::read(entry.path()).unwrap();
        let text = String::from_utf8_lossy(&content);
        if [1, 2]
            .iter()
            .flat_map(|v| secrets(*v))
            .any(|s| text.contains(&s))
        {
            holding += 1;
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(
                mode & 0o077,
                0,
                "{} holds a secret but has mode {mode:04o}",
                entry.path().display()
            );
        }
    }
    holding
}

#[test]
fn no_output_shows_a_secret_and_no_file_holding_one_is_readable_by_others() {
    secrets_stay_private(false);
}

/// The same with `secrets="sealed"`: OUT holds no secret at all, and bell-run opens them with
/// the host's key in the image root, through every command.
#[test]
fn sealed_secrets_stay_private_through_every_command() {
    if !common::in_memory::is_root() || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    secrets_stay_private(true);
}

fn secrets_stay_private(sealed: bool) {
    let root = tempfile::tempdir().unwrap();
    let identity = sealed.then(|| common::sealing::host_key_in(root.path()));
    let f = Fixture::spec(&spec(1, identity.as_deref()))
        .file("seal.key", "0123456789abcdef0123456789abcdef-test-only");
    std::fs::write(f.path().join("v2.kdl"), spec(2, identity.as_deref())).unwrap();
    let seal: &[&str] = if sealed {
        &["--seal-key", "seal.key"]
    } else {
        &[]
    };
    let run = f.bellc(&[&["build", "bell.kdl", "-o", "out1"], seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_no_secret("bellc build", &format!("{}{}", run.stdout, run.stderr));
    let run = f.bellc(&[&["build", "v2.kdl", "-o", "out2"], seal].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);

    // OUT: the user scripts, the seed, the token and the key, in bundles and in the store;
    // sealed, none at all.
    let in_out = assert_private(&f.path().join("out1")) + assert_private(&f.path().join("out2"));
    if sealed {
        assert_eq!(in_out, 0, "a sealed build left a secret in OUT");
    } else {
        assert!(in_out >= 8, "only {in_out} files in OUT hold a secret");
    }

    let diff = f.bellc(&["diff", "out1", "out2"]);
    let shown = format!("{}{}", diff.stdout, diff.stderr);
    assert_eq!(diff.code, 1, "{shown}");
    assert_no_secret("bellc diff", &shown);
    // That a secret changed, and nothing of it: no size, no digest an unkeyed guess could match.
    assert!(shown.contains("secret content changed"), "{shown}");
    assert!(!shown.contains("sha256:"), "{shown}");
    // What is not secret is still diffed.
    assert!(shown.contains("+visible=v2"), "{shown}");
    let json = f.bellc(&["diff", "out1", "out2", "--json"]);
    assert_no_secret("bellc diff --json", &json.stdout);

    for args in [
        vec!["explain", "h", "bell.kdl"],
        vec!["plan", "bell.kdl"],
        vec!["check", "bell.kdl"],
        vec!["hosts", "bell.kdl"],
    ] {
        let run = f.bellc(&args);
        let shown = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, 0, "{args:?}: {shown}");
        assert_no_secret(&format!("bellc {}", args[0]), &shown);
    }
    let explain = f.bellc(&["explain", "h", "bell.kdl"]);
    assert!(
        explain.stdout.contains("    password \"<secret>\""),
        "{}",
        explain.stdout
    );
    assert!(explain
        .stdout
        .contains("debconf \"mysql-server/root_password\" type=\"password\" value=\"<secret>\""));

    // bell-run, into an image root. The account tools write the root's shadow file as root.
    if !common::in_memory::is_root() {
        return;
    }
    let bin = bell_run();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    for db in ["passwd", "group", "shadow", "gshadow"] {
        std::fs::copy(Path::new("/etc").join(db), root.path().join("etc").join(db)).unwrap();
    }
    let root_arg = root.path().to_str().unwrap();
    // Each command must do its work (exit as it does when it succeeds): one that refused early
    // would print nothing, and show no secret, for the wrong reason.
    for (v, out) in [(1, "out1"), (2, "out2")] {
        let bundle = f.path().join(out).join("hosts/h");
        let bundle = bundle.to_str().unwrap();
        for (args, code) in [
            (vec!["apply", bundle, "--root", root_arg, "--dry-run"], 0),
            (
                vec!["apply", bundle, "--root", root_arg, "--dry-run", "--json"],
                0,
            ),
            (vec!["apply", bundle, "--root", root_arg], 0),
            (vec!["apply", bundle, "--root", root_arg, "--json"], 0),
            (vec!["check", "--root", root_arg], 0),
            (vec!["check", "--root", root_arg, "--json"], 0),
            (vec!["status", "--root", root_arg], 0),
            (vec!["status", "--root", root_arg, "--json"], 0),
        ] {
            let run = run_bin(&bin, &args, &[]);
            assert_eq!(
                run.status.code(),
                Some(code),
                "bell-run {args:?}: {}",
                text(&run)
            );
            assert_no_secret(&format!("bell-run {args:?}"), &text(&run));
        }
        assert_live(root.path(), v);
    }
    let rollback = run_bin(&bin, &["rollback", "--root", root_arg], &[]);
    assert_eq!(rollback.status.code(), Some(0), "{}", text(&rollback));
    assert_no_secret("bell-run rollback", &text(&rollback));
    assert_live(root.path(), 1);
    // bell-run's own copies, the seed it staged and the files it manages. (The account
    // databases are the system's own: useradd writes the hash to /etc/shadow.)
    let bell = root.path().join("var/lib/bell");
    let on_host = assert_private(&bell)
        + assert_private(&root.path().join("etc/app"))
        + assert_private(&root.path().join("etc/ssl"));
    assert!(
        on_host >= 6,
        "only {on_host} files on the host hold a secret"
    );
}

/// The secrets of version `v` are live in `root`: the token and the key in their 0600 files,
/// the hash in the root's shadow file.
fn assert_live(root: &Path, v: u8) {
    let s = secrets(v);
    for (path, secret) in [("etc/app/token", &s[2]), ("etc/ssl/private/app.pem", &s[3])] {
        let file = root.join(path);
        let content = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            content.contains(secret.as_str()),
            "{path} is not v{v}: {content:?}"
        );
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path}");
    }
    let shadow = std::fs::read_to_string(root.join("etc/shadow")).unwrap();
    let ops = shadow
        .lines()
        .find(|l| l.starts_with("ops:"))
        .unwrap_or_default();
    assert!(
        ops.contains(s[0].as_str()),
        "the shadow line of ops is not v{v}: {ops:?}"
    );
}

#[test]
fn a_private_key_everyone_could_read_is_an_error_at_its_mode() {
    let spec = "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nfile \"/etc/k.pem\" mode=\"0644\" {\n    content \"-----BEGIN RSA PRIVATE KEY-----\\nx\\n-----END RSA PRIVATE KEY-----\\n\"\n}\n";
    let f = Fixture::spec(spec);
    let run = f.bellc(&["check", "--short", "bell.kdl"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "bell.kdl:3:19: error[bell::render::invalid]: `file:/etc/k.pem` holds a private key but everyone could read it (mode 0644)"
        ),
        "{}",
        run.stderr
    );
}

/// A build's diagnostics land in CI logs: an excerpt around a mistake next to a secret (the
/// `user` line above a password, the debconf answer's own line, a 0600 file's node above its
/// content, a world-readable private key, a file that does not parse) shows the secret masked,
/// and the mistake's message and help as always.
#[test]
fn diagnostics_never_quote_a_secret() {
    let s = secrets(1);
    let lowering = format!(
        r#"fleet "f" target="debian-12" secrets="plaintext"
host "h" rack="r1"
user "ops" sudo=#true shel="/bin/sh" {{
    password "{hash}"
}}
package "mysql-server" {{
    debconf "mysql-server/root_password" type="password" value="{debconf}" bogus=1
}}
file "/etc/app/token" mode="0600" ownr="x" {{
    content "{token}\n"
}}
"#,
        hash = s[0],
        debconf = s[1],
        token = s[2],
    );
    let rendering = format!(
        r#"fleet "f" target="debian-12" secrets="plaintext"
host "h" rack="r1"
file "/etc/ssl/private/app.pem" mode="0644" {{
    content "-----BEGIN OPENSSH PRIVATE KEY-----\n{pem}\n-----END OPENSSH PRIVATE KEY-----\n"
}}
"#,
        pem = s[3],
    );
    let unparsed = format!(
        "fleet \"f\" target=\"debian-12\" secrets=\"plaintext\"\nhost \"h\" rack=\"r1\"\nuser \"ops\" {{\n    password \"{}\" oops=\n}}\n",
        s[0]
    );
    for (spec, expect) in [
        (
            lowering,
            &[
                "unknown property `shel`",
                "unknown property `bogus`",
                "unknown property `ownr`",
            ][..],
        ),
        (rendering, &["holds a private key"][..]),
        (unparsed, &["expected property value"][..]),
    ] {
        let fx = Fixture::spec(&spec);
        let run = fx.bellc(&["build", "bell.kdl", "-o", "out"]);
        assert_ne!(run.code, 0, "{}", run.stderr);
        for message in expect {
            assert!(run.stderr.contains(message), "{message}: {}", run.stderr);
        }
        assert!(run.stderr.contains("****"), "{}", run.stderr);
        assert_no_secret(
            "the build's diagnostics",
            &format!("{}{}", run.stdout, run.stderr),
        );
    }
}

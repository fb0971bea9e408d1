//! Sealed secrets end to end: a signed fleet whose hosts have identities (SSH host keys in
//! their image roots) holds every kind of secret; OUT is served by a real nginx whose workers
//! run as `nobody`, and each host pulls with the fleet store (a real etcd). Each host ends with
//! its own secrets in place; no plaintext nor its sha256 is in OUT, on the mirror, in etcd or in
//! any command's output; another host's key opens nothing; a sealed file swapped on the mirror
//! for one validly sealed to the host by someone else is refused with the root unchanged.
use crate::common;
use crate::common::fleet::{bell_run, etcdctl, run_bin, text, Etcd, Nginx};
use crate::common::pulling::{copy_over, fingerprint, image_root, pull};
use crate::common::sealing::{assert_not_in, assert_nowhere, host_key_in, needles, ssh_seed};
use crate::common::Fixture;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const DEBCONF: &str = "debconf-pass-Xy7";
const TOKEN: &str = "api-token-SUPERSECRET";
const PEM: &str = "pem-body-Kw9";

fn spec(a: &str, b: &str) -> String {
    format!(
        r#"fleet "f" target="debian-12" secrets="sealed"
host "a" identity="{a}"
host "b" identity="{b}"
user "ops" sudo=#true {{
    password "{HASH}"
}}
package "mysql-server" {{
    debconf "mysql-server/root_password" type="password" value="{DEBCONF}"
}}
file "/etc/app/token" mode="0600" {{
    content "{TOKEN}\n"
}}
file "/etc/ssl/app.pem" mode="0600" {{
    content "-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM}\n-----END OPENSSH PRIVATE KEY-----\n"
}}
file "/etc/motd" {{
    content "hello\n"
}}
"#
    )
}

#[test]
fn each_host_opens_only_its_own_secrets_and_nothing_else_holds_them() {
    if !bell_testkit::root() || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let Some(etcd) = Etcd::start() else { return };
    let fx = Fixture::new();
    assert_eq!(fx.bellc(&["keygen", "ci"]).code, 0);
    let (root_a, root_b) = (image_root(), image_root());
    let (a, b) = (host_key_in(root_a.path()), host_key_in(root_b.path()));
    std::fs::write(fx.path().join("bell.kdl"), spec(&a, &b)).unwrap();
    let mut outputs = String::new();
    let build = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "ci.key"]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    outputs.push_str(&build.stdout);
    outputs.push_str(&build.stderr);
    let publish = fx.bellc(&["publish", "out", "--store", &etcd.url]);
    assert_eq!(publish.code, 0, "{}", publish.stderr);
    outputs.push_str(&publish.stderr);

    // The mirror: readable by anyone, served by workers without privileges.
    let served = fx.path().join("served");
    copy_over(&fx.path().join("out"), &served);
    for dir in [fx.path(), served.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let Some(nginx) = Nginx::serve_as(&served, Some("nobody nogroup")) else {
        return;
    };
    let bin = bell_run();
    let trust = fx.path().join("ci.pub");
    let store = [
        "--trust",
        trust.to_str().unwrap(),
        "--store",
        etcd.url.as_str(),
        "--fleet",
        "f",
        "--report",
        etcd.url.as_str(),
    ];

    // b's sealed token swapped on the mirror for one validly sealed to b by someone else.
    let release = common::pulling::release_of(&served);
    let index_b = release.hosts["b"].secrets.clone().unwrap();
    let index: bell_bundle::SealedIndex = serde_json::from_str(
        &std::fs::read_to_string(served.join(bell_bundle::sealed_index_path("b", &index_b)))
            .unwrap(),
    )
    .unwrap();
    let pubkey = root_b.path().join("etc/ssh/ssh_host_ed25519_key.pub");
    let forged = fx.path().join("forged");
    std::fs::write(&forged, "api-token-FORGED\n").unwrap();
    let mut swapped = Vec::new();
    for digest in index.secrets.keys() {
        let path = served.join(bell_bundle::sealed_file_path("b", digest));
        swapped.push((path.clone(), std::fs::read(&path).unwrap()));
        if bell_testkit::find("age").is_some() {
            let status = Command::new("age")
                .arg("-R")
                .arg(&pubkey)
                .arg("-o")
                .arg(&path)
                .arg(&forged)
                .status()
                .unwrap();
            assert!(status.success());
        } else {
            std::fs::write(&path, b"age-encryption.org/v1\n-> X\n--- x\n").unwrap();
        }
    }
    // (Without the store, which would hear of the refusal: the root is then left exactly as
    // it was.)
    let before = fingerprint(root_b.path());
    let out = pull(&bin, &nginx.url, root_b.path(), "b", &store[..2]);
    outputs.push_str(&text(&out));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not the sealed file the release names: refused"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fingerprint(root_b.path()),
        before,
        "a refused pull changed the root"
    );
    for (path, bytes) in swapped {
        std::fs::write(path, bytes).unwrap();
    }

    // Each host pulls, and ends with its own secrets in place.
    for (host, root) in [("a", &root_a), ("b", &root_b)] {
        let out = pull(&bin, &nginx.url, root.path(), host, &store);
        outputs.push_str(&text(&out));
        assert_eq!(out.status.code(), Some(0), "{host}: {}", text(&out));
        let token = root.path().join("etc/app/token");
        assert_eq!(
            std::fs::read_to_string(&token).unwrap(),
            format!("{TOKEN}\n")
        );
        let mode = std::fs::metadata(&token).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let pem = std::fs::read_to_string(root.path().join("etc/ssl/app.pem")).unwrap();
        assert!(pem.contains(PEM));
        let shadow = std::fs::read_to_string(root.path().join("etc/shadow")).unwrap();
        assert!(
            shadow.contains(HASH),
            "{host}: the password hash is not in place"
        );
        for args in [
            vec!["check", "--root", root.path().to_str().unwrap(), "--json"],
            vec!["status", "--root", root.path().to_str().unwrap()],
            vec!["status", "--root", root.path().to_str().unwrap(), "--json"],
        ] {
            let run = run_bin(&bin, &args, &[]);
            assert_eq!(run.status.code(), Some(0), "{args:?}: {}", text(&run));
            outputs.push_str(&text(&run));
        }
    }
    let status = fx.bellc(&["status", "out", "--store", &etcd.url, "--fleet", "f"]);
    outputs.push_str(&status.stdout);
    outputs.push_str(&status.stderr);

    // b's key opens none of a's sealed files.
    let release = common::pulling::release_of(&served);
    let index_a: bell_bundle::SealedIndex = serde_json::from_str(
        &std::fs::read_to_string(served.join(bell_bundle::sealed_index_path(
            "a",
            release.hosts["a"].secrets.as_deref().unwrap(),
        )))
        .unwrap(),
    )
    .unwrap();
    let b_key = root_b.path().join("etc/ssh/ssh_host_ed25519_key");
    let b_identity = bell_seal::Identity::from_seed(ssh_seed(&b_key)).unwrap();
    for digest in index_a.secrets.keys() {
        let sealed =
            std::fs::read(served.join(bell_bundle::sealed_file_path("a", digest))).unwrap();
        assert!(
            bell_seal::open(&sealed, &b_identity).is_err(),
            "b opened a's secret"
        );
    }

    // Nowhere else: OUT, the mirror, etcd, and every command's output.
    let needles = needles(&[HASH, DEBCONF, TOKEN, PEM]);
    assert_nowhere(&fx.path().join("out"), &needles);
    assert_nowhere(&served, &needles);
    let dump = etcdctl(&etcd.endpoint, &["get", "", "--prefix"]);
    assert_not_in("the etcd dump", &dump, &needles);
    assert_not_in("the commands' output", &outputs, &needles);
    drop(nginx);
}

//! An image baked without its host's key (offline, no key in the root, no `--identity`)
//! applies everything its sealed secrets are not needed for, and leaves the rest (each
//! resource with a sealed script or file, and what depends on one) to the first apply with the
//! key: that bundle is another generation, so `pull` and the timer do not take it as applied.
//! The first apply with the key does only what was left out.
use crate::common;
use crate::common::fleet::{bell_run, text};
use crate::common::pulling::image_root;
use crate::common::sealing::ssh_key;
use crate::common::Fixture;
use std::path::Path;
use std::process::Command;

const HASH: &str = "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/";
const TOKEN: &str = "token-baked-later-Q9";

fn spec(identity: &str) -> String {
    format!(
        r##"fleet "f" target="debian-12"
host "a" identity="{identity}"
user "ops" {{
    password "{HASH}"
}}
file "/etc/app/token" mode="0600" {{
    content "{TOKEN}\n"
}}
file "/etc/app/public.conf" {{
    content "visible\n"
}}
exec "welcome.sh" offline="root" {{
    after "user:ops"
    script "#!/bin/sh\necho ran >>\"$BELL_ROOT/marks\"\n"
}}
"##
    )
}

fn apply(root: &Path, bundle: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(bell_run())
        .args(["apply"])
        .arg(bundle)
        .arg("--root")
        .arg(root)
        .args(extra)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), text(&out))
}

/// The generation bell-run applied last in `root`.
fn generation(root: &Path) -> String {
    let link = std::fs::read_link(root.join("var/lib/bell/current")).unwrap();
    link.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_bake_without_the_key_leaves_what_needs_secrets_to_the_first_apply_with_it() {
    // useradd writes the image's shadow file as root.
    if !common::in_memory::is_root() || !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let identity = ssh_key(&keys.path().join("a"));
    let fx = Fixture::spec(&spec(&identity)).file("seal.key", &"k".repeat(32));
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bundle = fx.path().join("out/hosts/a");
    let release: bell_bundle::Release =
        serde_json::from_slice(&std::fs::read(fx.path().join("out/release.json")).unwrap())
            .unwrap();
    let id = &release.hosts["a"].bundle;
    let root = image_root();
    let root = root.path();

    // A dry run and the bake name the bundle the build wrote, and the generation they make.
    let header = |verb: &str| format!("bell-run: {verb} {} to ", &id[..12]);
    let (code, dry) = apply(root, &bundle, &["--dry-run"]);
    assert_eq!(code, 0, "{dry}");
    assert!(dry.contains(&header("plan for")), "{dry}");

    // Baked without the key: what needs no secret lands, the rest is named and left.
    let (code, shown) = apply(root, &bundle, &[]);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains(&header("applied")), "{shown}");
    for left in ["user:ops", "file:/etc/app/token", "exec:welcome.sh"] {
        assert!(
            shown.contains(&format!(
                "{left}: left for the first apply with the host's key"
            )),
            "{left}: {shown}"
        );
    }
    assert!(
        shown.contains("3 deferred to the first live apply"),
        "{shown}"
    );
    assert!(!shown.contains(TOKEN), "{shown}");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/app/public.conf")).unwrap(),
        "visible\n"
    );
    assert!(!root.join("etc/app/token").exists());
    assert!(!root.join("marks").exists());
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(!passwd.lines().any(|l| l.starts_with("ops:")), "{passwd}");
    // Another generation than the release's bundle: not taken as applied.
    let baked = generation(root);
    assert_ne!(&baked, id);
    for said in [&dry, &shown] {
        assert!(
            said.contains(&format!(
                "without the host's key: as generation {}, the bundle less 3 resource(s)",
                &baked[..12]
            )),
            "{said}"
        );
    }
    // Baked again, the same: nothing changes.
    let (code, shown) = apply(root, &bundle, &[]);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("0 changed"), "{shown}");
    assert_eq!(generation(root), baked);

    // With the key: the whole bundle, doing only what was left out.
    let key = keys.path().join("a");
    let (code, shown) = apply(root, &bundle, &["--identity", key.to_str().unwrap()]);
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("3 changed"), "{shown}");
    assert!(shown.contains("1 unchanged"), "{shown}");
    assert!(!shown.contains("left for the first apply"), "{shown}");
    assert!(!shown.contains(TOKEN), "{shown}");
    assert_eq!(&generation(root), id);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/app/token")).unwrap(),
        format!("{TOKEN}\n")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("marks")).unwrap(),
        "ran\n"
    );
    let shadow = std::fs::read_to_string(root.join("etc/shadow")).unwrap();
    assert!(
        shadow
            .lines()
            .any(|l| l.starts_with(&format!("ops:{HASH}:"))),
        "the password hash did not land"
    );
}

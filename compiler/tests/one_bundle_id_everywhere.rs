//! A host with a sealed secret has one bundle id wherever it is shown. A secret's name in a
//! bundle is keyed with the build's seal key (given, derived from the signing key, or bellc's
//! own), so `hosts` and `plan --against` take the key the build took (`--sign-key` or
//! `--seal-key`) and name the bundles the build wrote; without it they say their ids are
//! another key's. (`bell-run apply --dry-run` of a bake without the host's key names the
//! bundle too: `image_bake_without_the_host_key.rs`.)
use crate::common::sealing::ssh_key;
use crate::common::Fixture;

fn spec(identity: &str) -> String {
    format!(
        r##"fleet "f" target="debian-12"
host "a" identity="{identity}"
host "b"
file "/etc/app/public.conf" {{
    content "visible\n"
}}
override "a-only" {{
    match host="a"
    file "/etc/app/token" mode="0600" {{
        content "token-Q9\n"
    }}
}}
"##
    )
}

fn bundle_ids(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .collect()
}

fn built_ids(fx: &Fixture, out: &str) -> Vec<(String, String)> {
    let release: bell_bundle::Release = serde_json::from_slice(
        &std::fs::read(fx.path().join(out).join("release.json")).expect("release.json"),
    )
    .expect("a release");
    release
        .hosts
        .iter()
        .map(|(name, host)| (name.clone(), host.bundle[..12].to_string()))
        .collect()
}

#[test]
fn hosts_and_plan_name_the_bundles_a_keyed_build_wrote() {
    if !bell_testkit::tool("ssh-keygen") {
        return;
    }
    let keys = tempfile::tempdir().unwrap();
    let identity = ssh_key(&keys.path().join("a"));
    let fx = Fixture::spec(&spec(&identity)).file("seal.key", &"k".repeat(32));
    let made = fx.bellc(&["keygen", "fleet"]);
    assert_eq!(made.code, 0, "{}", made.stderr);

    // Signed: the seal key is derived from the signing key.
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out", "--sign-key", "fleet.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let built = built_ids(&fx, "out");
    assert_eq!(built.len(), 2);

    let hosts = fx.bellc(&["hosts", "bell.kdl", "--sign-key", "fleet.key"]);
    assert_eq!(hosts.code, 0, "{}", hosts.stderr);
    assert_eq!(bundle_ids(&hosts.stdout), built, "{}", hosts.stdout);
    // Nothing said of the ids (the token written in the spec is, as everywhere).
    assert!(!hosts.stderr.contains("warning:"), "{}", hosts.stderr);
    assert!(!hosts.stderr.contains("another key"), "{}", hosts.stderr);
    let plan = fx.bellc(&[
        "plan",
        "bell.kdl",
        "--against",
        "out",
        "--sign-key",
        "fleet.key",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("nothing to roll out"),
        "{}",
        plan.stdout
    );

    // Without the key, the ids of the host with a secret are another key's, and both say so,
    // naming it; the host without one keeps its id.
    let bare = fx.bellc(&["hosts", "bell.kdl"]);
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    let bare_ids = bundle_ids(&bare.stdout);
    assert_ne!(bare_ids[0], built[0], "{}", bare.stdout);
    assert_eq!(bare_ids[1], built[1], "{}", bare.stdout);
    for said in [
        &bare.stderr,
        &fx.bellc(&["plan", "bell.kdl", "--against", "out"]).stderr,
    ] {
        assert!(
            said.contains("warning: 1 host(s) with sealed secrets (a)")
                && said.contains("give the same key here"),
            "{said}"
        );
    }

    // A build given its own seal key: the same, with that key.
    let run = fx.bellc(&["build", "bell.kdl", "-o", "out2", "--seal-key", "seal.key"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hosts = fx.bellc(&["hosts", "bell.kdl", "--seal-key", "seal.key"]);
    assert_eq!(bundle_ids(&hosts.stdout), built_ids(&fx, "out2"));
    let both = fx.bellc(&[
        "hosts",
        "bell.kdl",
        "--seal-key",
        "seal.key",
        "--sign-key",
        "fleet.key",
    ]);
    assert_eq!(both.code, 64, "{}", both.stderr);
}

//! Rotating the signing key through the spec, as the README tells: the trusted keys are a
//! `file "/etc/bell/trusted.pub"` of the spec. A release signed with the old key adds the new
//! one; a release signed with the new key removes the old; after that, a release signed with
//! the old (leaked) key is refused. And the trust file a spec writes is checked at build time,
//! since a host refuses every release when it cannot use its trust file.

use crate::common::fleet::{bell_run, text};
use crate::common::pulling::{copy_over, image_root, motd, pull, refused, HOSTS};
use crate::common::Fixture;

/// The `.pub` file's key line.
fn key_line(fx: &Fixture, name: &str) -> String {
    let text = std::fs::read_to_string(fx.path().join(format!("{name}.pub"))).unwrap();
    text.lines().nth(1).unwrap().trim().to_string()
}

fn spec(motd: &str, trusted: &[&str], extra: &str) -> String {
    let mut spec = String::from("fleet \"f\" target=\"debian-12\"\n");
    for host in HOSTS {
        spec.push_str(&format!("host \"{host}\"\n"));
    }
    let keys: String = trusted.iter().map(|k| format!("{k}\\n")).collect();
    spec.push_str(&format!(
        "file \"/etc/motd\" {{\n    content \"{motd}\\n\"\n}}\n\
         file \"/etc/bell/trusted.pub\"{extra} {{\n    content \"# the fleet's keys\\n{keys}\"\n}}\n"
    ));
    spec
}

fn build(fx: &Fixture, spec: &str, out: &str, key: &str) {
    std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
    let run = fx.bellc(&["build", "bell.kdl", "-o", out, "--sign-key", key]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn the_key_rotates_through_the_spec_and_the_old_one_is_refused_after() {
    let bin = bell_run();
    let fx = Fixture::new();
    for key in ["old", "new"] {
        assert_eq!(fx.bellc(&["keygen", key]).code, 0);
    }
    let (old, new) = (key_line(&fx, "old"), key_line(&fx, "new"));
    build(
        &fx,
        &spec("release 1", &[&old, &new], ""),
        "out1",
        "old.key",
    );
    build(&fx, &spec("release 2", &[&new], ""), "out2", "new.key");
    // Signed with the old key after the rotation: what a thief of that key would publish.
    build(&fx, &spec("release 3", &[&old], ""), "out3", "old.key");

    // The host was baked trusting the old key only.
    let root = image_root();
    let trust = root.path().join("etc/bell/trusted.pub");
    std::fs::create_dir_all(trust.parent().unwrap()).unwrap();
    std::fs::copy(fx.path().join("old.pub"), &trust).unwrap();
    let served = fx.path().join("served");
    let source = served.to_str().unwrap();
    let step = |out: &str, expect: &str| {
        copy_over(&fx.path().join(out), &served);
        let run = pull(&bin, source, root.path(), "h1", &[]);
        assert_eq!(run.status.code(), Some(0), "{out}: {}", text(&run));
        assert_eq!(motd(root.path()), expect);
    };
    step("out1", "release 1\n");
    let trusted = std::fs::read_to_string(&trust).unwrap();
    assert!(
        trusted.contains(&old) && trusted.contains(&new),
        "{trusted}"
    );
    step("out2", "release 2\n");
    let trusted = std::fs::read_to_string(&trust).unwrap();
    assert!(
        !trusted.contains(&old) && trusted.contains(&new),
        "{trusted}"
    );
    copy_over(&fx.path().join("out3"), &served);
    refused(&bin, source, root.path(), "h1", &[], "which");
    assert_eq!(motd(root.path()), "release 2\n");
}

#[test]
fn a_trust_file_a_host_could_not_use_is_an_error_at_build_time() {
    let fx = Fixture::new();
    assert_eq!(fx.bellc(&["keygen", "k"]).code, 0);
    let key = key_line(&fx, "k");
    let check = |spec: &str| {
        std::fs::write(fx.path().join("bell.kdl"), spec).unwrap();
        fx.bellc(&["--short", "check", "bell.kdl"])
    };
    assert_eq!(check(&spec("m", &[&key], "")).code, 0);
    for (spec, wanted) in [
        (
            spec("m", &[&key], " mode=\"0666\""),
            "writable by others than root",
        ),
        (
            spec("m", &[&key], " owner=\"nobody\""),
            "must belong to root",
        ),
        (
            spec("m", &["not-a-key"], ""),
            "`not-a-key`, which is not a minisign public key",
        ),
        (spec("m", &[], ""), "holds no key"),
    ] {
        let run = check(&spec);
        assert_eq!(run.code, 1, "{spec}\n{}", run.stderr);
        assert!(run.stderr.contains(wanted), "{}", run.stderr);
        assert!(
            run.stderr.contains("help:") || run.stderr.contains("help"),
            "{}",
            run.stderr
        );
    }
    // Anything else of bell's own is still out of a spec's reach.
    let own = spec("m", &[&key], "").replace("/etc/bell/trusted.pub", "/etc/bell/other.pub");
    let run = check(&own);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("is bell's own `/etc/bell`"),
        "{}",
        run.stderr
    );
}

//! User, group, package, unit and profile names, and Debian versions (checked against dpkg).

use bellc_core::front::validate::{
    apparmor_profile_name, apt_package_name, apt_url, apt_version, systemd_unit_name,
    unix_group_name, unix_user_name, Invalid,
};
use std::process::Command;

fn message(result: Result<(), Invalid>) -> String {
    match result {
        Ok(()) => panic!("should be refused"),
        Err(invalid) => {
            assert!(!invalid.help.is_empty());
            invalid.message
        }
    }
}

#[test]
fn user_and_group_names() {
    for good in [
        "alice",
        "_svc",
        "svc-backup_2",
        "machine$",
        "a",
        &"a".repeat(32),
    ] {
        assert_eq!(unix_user_name(good), Ok(()), "{good}");
        assert_eq!(unix_group_name(good), Ok(()), "{good}");
    }
    assert_eq!(message(unix_user_name("")), "user name is empty");
    assert_eq!(message(unix_group_name("")), "group name is empty");
    assert_eq!(
        message(unix_user_name(&"a".repeat(33))),
        format!(
            "user name `{}` is 33 characters long, the limit is 32",
            "a".repeat(33)
        )
    );
    assert_eq!(
        message(unix_user_name("Alice")),
        "user name `Alice` must start with a lowercase letter or `_`"
    );
    assert_eq!(
        message(unix_user_name("aLice")),
        "user name `aLice` contains uppercase letters"
    );
    assert_eq!(
        message(unix_user_name("1alice")),
        "user name `1alice` must start with a lowercase letter or `_`"
    );
    assert_eq!(
        message(unix_user_name("-alice")),
        "user name `-alice` must start with a lowercase letter or `_`"
    );
    assert_eq!(
        message(unix_user_name("al ice")),
        "user name `al ice` contains U+0020"
    );
    assert_eq!(
        message(unix_user_name("al:ice")),
        "user name `al:ice` contains `:`"
    );
    assert_eq!(
        message(unix_user_name("a$b")),
        "user name `a$b` contains `$`"
    );
    assert_eq!(
        message(unix_user_name("a\n")),
        "user name `a\n` contains U+000A"
    );
    assert_eq!(
        message(unix_group_name("wheel.")),
        "group name `wheel.` contains `.`"
    );
    assert!(message(unix_user_name("$")).contains("must start"));
}

#[test]
fn package_names() {
    for good in [
        "openssh-server",
        "g++",
        "libc6",
        "0ad",
        "python3.11",
        "xz-utils",
    ] {
        assert_eq!(apt_package_name(good), Ok(()), "{good}");
    }
    assert_eq!(message(apt_package_name("")), "package name is empty");
    assert_eq!(
        message(apt_package_name("a")),
        "package name `a` is shorter than two characters"
    );
    assert_eq!(
        message(apt_package_name("OpenSSH")),
        "package name `OpenSSH` contains uppercase letters"
    );
    assert_eq!(
        apt_package_name("OpenSSH").unwrap_err().help,
        "debian package names are lowercase: `openssh`"
    );
    assert_eq!(
        message(apt_package_name("-foo")),
        "package name `-foo` must start with a letter or digit"
    );
    assert_eq!(
        message(apt_package_name("foo_bar")),
        "package name `foo_bar` contains `_`"
    );
    assert_eq!(
        message(apt_package_name("curl:amd64")),
        "package name `curl:amd64` has an architecture qualifier `:amd64`"
    );
    assert_eq!(
        message(apt_package_name("vim; reboot")),
        "package name `vim; reboot` contains `;`"
    );
}

const VERSIONS_GOOD: &[&str] = &[
    "1.0",
    "1:9.2p1-2+deb12u3",
    "2.36-9+deb12u4",
    "1.2.3~rc1-1",
    "0.9+git20240101.abc123-0ubuntu1~22.04.1",
    "1.0-1-1",
    "10",
    "1:0",
];

const VERSIONS_BAD: &[(&str, &str)] = &[
    ("", "package version is empty"),
    (
        "a1.0",
        "version `a1.0` has an upstream part that does not start with a digit",
    ),
    (
        "x:1.0",
        "version `x:1.0` has an epoch `x` that is not a number",
    ),
    (
        ":1.0",
        "version `:1.0` has an epoch `` that is not a number",
    ),
    (
        "1.0-",
        "version `1.0-` ends with `-` but has no revision after it",
    ),
    (
        "1.0-a_b",
        "version `1.0-a_b` has `_` in its debian revision",
    ),
    ("1.0 beta", "version `1.0 beta` contains U+0020"),
    ("1.0_1", "version `1.0_1` contains `_`"),
    ("1.*", "version `1.*` contains `*`"),
    ("1.0;reboot", "version `1.0;reboot` contains `;`"),
];

#[test]
fn versions() {
    for good in VERSIONS_GOOD {
        assert_eq!(apt_version(good), Ok(()), "{good}");
    }
    for (bad, expected) in VERSIONS_BAD {
        assert_eq!(&message(apt_version(bad)), expected, "{bad:?}");
    }
    // Policy dropped colons from the upstream part; dpkg still tolerates them.
    assert!(apt_version("1:2:3").is_err());
}

/// dpkg agrees on every case above (it is the reader of these versions).
#[test]
fn versions_agree_with_dpkg() {
    if !bell_testkit::tool("dpkg") {
        return;
    }
    let dpkg_accepts = |v: &str| {
        let output = Command::new("dpkg")
            .args(["--validate-version", "--", v])
            .output()
            .expect("run dpkg");
        // dpkg only warns about an upstream part not starting with a digit; policy says it must.
        output.status.success() && output.stderr.is_empty()
    };
    for good in VERSIONS_GOOD {
        assert!(dpkg_accepts(good), "dpkg refuses {good}");
    }
    for (bad, _) in VERSIONS_BAD {
        assert!(!dpkg_accepts(bad), "dpkg accepts {bad:?}");
    }
}

#[test]
fn unit_names() {
    for good in [
        "nginx.service",
        "getty@.service",
        "getty@tty1.service",
        "mnt-data\\x2d1.mount",
        "-.mount",
        "bell-backup.timer",
        "a:b_c.socket",
        "multi-user.target",
        "system-bell.slice",
    ] {
        assert_eq!(systemd_unit_name(good), Ok(()), "{good}");
    }
    assert_eq!(message(systemd_unit_name("")), "unit name is empty");
    assert_eq!(
        message(systemd_unit_name("nginx")),
        "unit name `nginx` has no suffix"
    );
    assert_eq!(
        message(systemd_unit_name("nginx.servcie")),
        "unit name `nginx.servcie` has an unknown suffix `.servcie`"
    );
    assert_eq!(
        systemd_unit_name("nginx.servcie").unwrap_err().help,
        "did you mean `.service`?"
    );
    assert_eq!(
        message(systemd_unit_name("my app.service")),
        "unit name `my app.service` contains U+0020"
    );
    assert_eq!(
        message(systemd_unit_name("../x.service")),
        "unit name `../x.service` contains `/`"
    );
    assert_eq!(
        message(systemd_unit_name(".service")),
        "unit name `.service` has an empty name before the suffix"
    );
    assert_eq!(
        message(systemd_unit_name("@x.service")),
        "unit name `@x.service` has an empty name before the suffix"
    );
    assert_eq!(
        message(systemd_unit_name("a@b@c.service")),
        "unit name `a@b@c.service` contains more than one `@`"
    );
    let long = format!("{}.service", "a".repeat(247));
    assert_eq!(systemd_unit_name(&long), Ok(()));
    let too_long = format!("{}.service", "a".repeat(248));
    assert_eq!(
        message(systemd_unit_name(&too_long)),
        "unit name is 256 bytes long, the limit is 255"
    );
}

#[test]
fn apparmor_profile_names() {
    for good in ["usr.sbin.nginx", "bell-backup", "a", "x_y+z"] {
        assert_eq!(apparmor_profile_name(good), Ok(()), "{good}");
    }
    assert_eq!(
        message(apparmor_profile_name("")),
        "apparmor profile name is empty"
    );
    assert_eq!(
        message(apparmor_profile_name("../etc/passwd")),
        "apparmor profile name `../etc/passwd` contains `/`"
    );
    assert_eq!(
        message(apparmor_profile_name(".hidden")),
        "apparmor profile name `.hidden` must start with a letter or digit"
    );
    assert_eq!(
        message(apparmor_profile_name("nginx.dpkg-old")),
        "apparmor profile name `nginx.dpkg-old` ends with `.dpkg-old`"
    );
    assert_eq!(
        message(apparmor_profile_name("tunables")),
        "apparmor profile name `tunables` is reserved in /etc/apparmor.d"
    );
    assert_eq!(
        message(apparmor_profile_name("nginx~")),
        "apparmor profile name `nginx~` contains `~`"
    );
    assert_eq!(
        message(apparmor_profile_name("a b")),
        "apparmor profile name `a b` contains U+0020"
    );
}

#[test]
fn apt_urls_are_fetched_as_written() {
    for good in [
        "http://deb.debian.org/debian",
        "https://deb.example.org:8443/debian/",
        "http://10.0.0.1/repo",
        "http://[fd00::1]/repo",
        "http://[fd00::1]:8080/a%20b/c+d~e",
        "mirror+http://mirrors.example/list",
        "file:/srv/repo",
        "cdrom:/media/cdrom/",
    ] {
        assert_eq!(apt_url(good), Ok(()), "{good}");
    }
    for (bad, says) in [
        ("http://deb.exampl'e.org/debian", "not a host name"),
        ("http://user:secret@deb.example.org/", "not a host name"),
        ("http://deb.example.org:80a/", "not a host name"),
        ("http://[fd00::1/", "not a host name"),
        ("http:///debian", "not a host name"),
        (
            "http://deb.example.org/debian#x",
            "`#` cannot stand unencoded",
        ),
        (
            "http://deb.example.org/debian?x=1",
            "`?` cannot stand unencoded",
        ),
        ("http://deb.example.org/ü", "`ü` cannot stand unencoded"),
        ("http://deb.example.org/100%", "two hex digits"),
        ("file:/srv/a\\b", "cannot stand unencoded"),
    ] {
        let message = message(apt_url(bad));
        assert!(message.contains(says), "{bad}: {message}");
    }
}

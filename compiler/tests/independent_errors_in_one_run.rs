//! Every mistake that does not depend on another is reported in the first run: checks of one
//! value (a newline in a unit setting, a control character in a deb822 field) and checks
//! between valid declarations (two mounts on one target, a package both absent and pinned) sit
//! beside lowering's own, instead of waiting for every earlier error to be fixed.
use crate::common::*;

const SPEC: &str = r##"fleet "f" target="debian-12"
host "h"
limit "x" domain="*" type="soft" item="nofilez" value=1
mount "data" target="srv/data" device="/dev/sdb1" type="ext4"
mount "d1" target="/mnt/x" device="/dev/sdc1" type="ext4"
mount "d2" target="/mnt/x" device="/dev/sdd1" type="ext4"
apt-source "v" url="http://x/debian" suites="bookworm\nX"
package "pp" absent=#true version="1.0"
package "qq" {
    debconf "q/a b" type="string" value="x"
}
mount "m3" target="/mnt/z" device="/dev/sde1" type="ext4" options="rw\nx"
exec "s.sh" rerun="never" retry-interval=60 {
    script "#!/bin/sh\n"
}
user "dave" shell="/bin/a:b"
modprobe "dummy"
unit "getty@.service" enable=#true {
    content "[Service]\nExecStart=/bin/true\n"
}
apparmor "x" {
    profile "capability setgid,\n"
}
apparmor "p1" {
    profile "profile same /usr/bin/a {}\n"
}
apparmor "p2" {
    profile "profile same /usr/bin/b {}\n"
}
"##;

#[test]
fn one_run_reports_every_independent_mistake() {
    let run = Fixture::spec(SPEC).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    let expected = [
        ("bell.kdl:3:34:", "`limit item` cannot be \"nofilez\""),
        ("bell.kdl:4:14:", "path `srv/data` is not absolute"),
        (
            "bell.kdl:6:12:",
            "error[bell::render::clash]: mounts `d1` and `d2` both mount on `/mnt/x`",
        ),
        (
            "bell.kdl:7:38:",
            "`bookworm\\nX` holds U+000A, which a deb822 field cannot",
        ),
        (
            "bell.kdl:8:27:",
            "`package:pp` is `absent=#true` and also sets `version`",
        ),
        (
            "bell.kdl:10:5:",
            "debconf question `q/a b` of `package:qq` holds whitespace",
        ),
        (
            "bell.kdl:12:59:",
            "`rw\\nx` contains a newline, which a unit file setting cannot hold",
        ),
        (
            "bell.kdl:13:27:",
            "`exec:s.sh` has a finite `retry-interval` but `rerun=\"never\"`",
        ),
        ("bell.kdl:16:13:", "shell `/bin/a:b` holds a `:`"),
        (
            "bell.kdl:17:10:",
            "`modprobe:dummy` sets neither `options` nor `blacklist=#true`",
        ),
        ("bell.kdl:18:6:", "unit `getty@.service` is a template"),
        ("bell.kdl:22:13:", "the profile text declares no profile"),
        (
            "bell.kdl:28:13:",
            "profile name `same` is declared by both `apparmor:p1` and `apparmor:p2`",
        ),
    ];
    assert_eq!(diags.len(), expected.len(), "{diags:#?}");
    for ((at, message), line) in expected.iter().zip(&diags) {
        assert!(
            line.starts_with(at) && line.contains(message),
            "expected {at} … {message}\n got {line}"
        );
    }
}

/// A mistake shared by many host configurations is reported once.
#[test]
fn a_shared_mistake_is_reported_once() {
    let spec = "fleet \"f\" target=\"debian-12\"\nhost \"a\" role=\"x\"\nhost \"b\"\nmount \"d1\" target=\"/mnt/x\" device=\"/dev/sdc1\" type=\"ext4\"\nmount \"d2\" target=\"/mnt/x\" device=\"/dev/sdd1\" type=\"ext4\"\noverride \"x\" {\n    match role=\"x\"\n    sysctl { vm.swappiness 1 }\n}\n";
    let run = Fixture::spec(spec).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.diagnostics().len(), 1, "{}", run.stderr);
}

/// A newcomer's first file, with the mistakes a first hour makes: each is reported in the first
/// run, a bare `true` included (a syntax error no longer hides the rest of the file), and the
/// template typo beside them, though templates render only after every other check.
const FIRST_HOUR: &str = r##"fleet "lab" target="debian-12"
host "web-1" address="10.0.0.1" role="web"
host "web-2" address="10.0.0.2" role="web"
sysctl {
    net.ipv4.ip_forward 1
    fs.inode-nr 5
}
user "ops" sudo=true {
    ssh-key file="keys/ops.pub"
}
package "nginx" version="latest"
package "curl" version="lat"
file "/etc/motd" {
    content "hello {{ host.nmae }}\n"
}
exec "after-curl.sh" {
    script "#!/bin/sh\n"
    after "package:curl"
}
override "web" {
    match role="web"
    remove "package:ngnix"
    remove "package:curl"
}
"##;

#[test]
fn a_first_hour_of_mistakes_is_reported_in_one_run() {
    let run = Fixture::spec(FIRST_HOUR)
        .file("keys/ops.pub", "not a key\n")
        .bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    let expected = [
        ("bell.kdl:6:5:", "`fs.inode-nr` is read-only"),
        ("bell.kdl:8:17:", "bare `true` is not a value in KDL 2"),
        ("bell.kdl:11:17:", "version `latest` has an upstream part"),
        ("bell.kdl:12:16:", "version `lat` has an upstream part"),
        ("bell.kdl:14:23:", "`host.nmae` is"),
        ("bell.kdl:22:12:", "`remove` names `package:ngnix`"),
        ("keys/ops.pub:1:1:", "unknown ssh key type `not`"),
    ];
    assert_eq!(diags.len(), expected.len(), "{diags:#?}");
    for ((at, message), line) in expected.iter().zip(&diags) {
        assert!(
            line.starts_with(at) && line.contains(message),
            "expected {at} … {message}\n got {line}"
        );
    }
    // The misspelt removal still gets its did-you-mean from the package whose version was
    // wrong; the removal of that package and the `after` naming it are not second mistakes.
    assert!(
        run.stderr.contains("did you mean `package:nginx`?"),
        "{}",
        run.stderr
    );
}

/// Only when every syntax error is a bare word is the rest of the file read on: any other
/// syntax error still stops the file there (its nodes cannot be told apart).
#[test]
fn another_syntax_error_still_stops_the_file() {
    let spec = "fleet \"f\" target=\"debian-12\"\nhost \"h\"\nuser \"ops\" sudo=true\npackage \"a\" version=\"latest\" {\n";
    let run = Fixture::spec(spec).bellc(&["--short", "check"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let diags = run.diagnostics();
    assert!(!diags.is_empty());
    assert!(
        diags
            .iter()
            .all(|d| d.contains("error[bell::parse::syntax]")),
        "{diags:#?}"
    );
}

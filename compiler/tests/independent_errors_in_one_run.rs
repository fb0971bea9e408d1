//! Every mistake that does not depend on another is reported in the first run: checks of one
//! value (a newline in a unit setting, a control character in a deb822 field) and checks
//! between valid declarations (two mounts on one target, a package both absent and pinned) sit
//! beside lowering's own, instead of waiting for every earlier error to be fixed.
mod common;
use common::*;

const SPEC: &str = r##"fleet "f" target="debian-12"
host "h"
limit "x" domain="*" type="soft" item="nofilez" value="1"
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

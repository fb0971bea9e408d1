//! Mistakes found at build time, reported with their message at the line that makes them:
//! two mounts on one target, two resources writing one path, two AppArmor profiles claiming one
//! name or executable, a template error inside file content, an unknown target.

use crate::common::*;

fn errors(spec: &str) -> Vec<String> {
    let (compiled, lines) = compile(spec);
    assert!(compiled.is_none(), "spec compiled");
    lines
        .into_iter()
        .filter(|l| l.contains(": error["))
        .collect()
}

const HEAD: &str = "fleet \"t\" target=\"ubuntu-24.04\"\nhost \"h\" address=\"10.0.0.1\"\n";

#[test]
fn two_mounts_on_one_target() {
    let e = errors(&format!(
        "{HEAD}mount \"a\" target=\"/srv/x\" device=\"tmpfs\" type=\"tmpfs\"\nmount \"b\" target=\"/srv/x\" device=\"/dev/sdb1\" type=\"ext4\"\n"
    ));
    assert_eq!(
        e,
        vec![
            "bell.kdl:4:11: error[bell::render::clash]: mounts `a` and `b` both mount on `/srv/x`"
        ]
    );
}

#[test]
fn two_resources_writing_one_path() {
    let e = errors(&format!(
        "{HEAD}unit \"x.service\" {{\n    content \"[Service]\\nExecStart=/bin/true\\n\"\n}}\nfile \"/etc/systemd/system/x.service\" {{\n    content \"\"\n}}\n"
    ));
    assert_eq!(
        e,
        vec!["bell.kdl:6:6: error[bell::render::clash]: `/etc/systemd/system/x.service` is written by both `unit:x.service` and `file:/etc/systemd/system/x.service`"]
    );
    let e = errors(&format!(
        "{HEAD}sysctl {{\n    vm.swappiness 1\n}}\nfile \"/etc/sysctl.d/60-bell.conf\" {{\n    content \"\"\n}}\n"
    ));
    assert_eq!(
        e,
        vec!["bell.kdl:6:6: error[bell::render::path_conflict]: `/etc/sysctl.d/60-bell.conf` is written by both `sysctl` and `file:/etc/sysctl.d/60-bell.conf`"]
    );
}

#[test]
fn duplicate_apparmor_profile_name_or_attachment() {
    let spec = format!(
        r####"{HEAD}apparmor "one" {{
    profile #"""
        #include <tunables/global>
        /usr/bin/tool {{
        }}
        """#
}}
apparmor "two" {{
    profile #"""
        # same executable, another name
        profile other /usr/bin/tool {{
        }}
        profile shared {{
        }}
        """#
}}
apparmor "three" {{
    profile "profile shared {{\n}}\n"
}}
"####
    );
    let e = errors(&spec);
    assert_eq!(
        e,
        vec![
            "bell.kdl:13:1: error[bell::render::clash]: `/usr/bin/tool` is confined by both `apparmor:one` and `apparmor:two`",
            "bell.kdl:20:13: error[bell::render::clash]: profile name `shared` is declared by both `apparmor:two` and `apparmor:three`",
        ]
    );
}

#[test]
fn template_error_points_at_its_line_inside_the_content() {
    let spec = format!(
        r####"{HEAD}file "/etc/app.conf" {{
    content #"""
        name={{{{ host.name }}}}
        peers={{{{ services.etcd }}}}
        """#
}}
"####
    );
    let e = errors(&spec);
    assert_eq!(e.len(), 1, "{e:?}");
    // At the undefined name itself, which it names.
    assert_eq!(
        e[0],
        "bell.kdl:6:18: error[bell::render::template]: template error in `file:/etc/app.conf`: line 2 of the content: `services.etcd` is undefined (on host `h`)",
    );
    // A syntax error on a one-line string points at the string.
    let e = errors(&format!(
        "{HEAD}file \"/etc/b.conf\" {{\n    content \"a={{{{ host.name \"\n}}\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("bell.kdl:4:13: error[bell::render::template]: template error in `file:/etc/b.conf`: line 1 of the content: "), "{e:?}");
}

#[test]
fn unknown_target() {
    let e = errors("fleet \"t\" target=\"ubuntu-24.10\"\nhost \"h\" address=\"10.0.0.1\"\n");
    assert_eq!(
        e,
        vec!["bell.kdl:1:11: error[bell::resolve::unknown_target]: unknown target `ubuntu-24.10`"]
    );
}

#[test]
fn mount_ordering_names_must_be_units() {
    let e = errors(&format!(
        "{HEAD}mount \"a\" target=\"/srv/x\" device=\"tmpfs\" type=\"tmpfs\" after=\"network-online.target remote-fs\"\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "bell.kdl:3:55: error[bell::lower::invalid_value]: unit name `remote-fs` has no suffix"
        ),
        "{e:?}"
    );
}

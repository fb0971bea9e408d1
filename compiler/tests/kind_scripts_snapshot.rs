//! The rendered unit files and apply/revert scripts of a small spec per kind, as insta
//! snapshots (compiler/tests/snapshots/), so that every change to what lands on hosts is
//! reviewed as a diff.

mod common;
use common::*;

const SPEC: &str = r###"
fleet "t" target="ubuntu-24.04"
host "h" address="10.0.0.1"
sysctl {
    net.ipv4.ip_forward 1
}
limit "nofile" domain="root" type="soft" item="nofile" value=101
mount "data" target="/srv/data" device="tmpfs" type="tmpfs" options="size=8M" before="local-fs.target"
ethtool "ens3" {
    tso off
    rx-checksum on
}
perm "/srv/app/*.key" owner="app" group="app" mode="0600" ignore-missing=#true
apparmor "tool" mode="complain" {
    profile #"""
        #include <tunables/global>
        /usr/bin/tool {
          #include <abstractions/base>
        }
        """#
}
file "/etc/app.conf" mode="0640" {
    content "host={{ host.name }}\n"
}
unit "app.service" enable=#true start=#false {
    content #"""
        [Service]
        ExecStart=/usr/bin/app
        [Install]
        WantedBy=multi-user.target
        """#
}
"###;

#[test]
fn every_kind_renders() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let mut all = String::new();
    for (path, bytes) in &b.contents {
        all.push_str(&format!(
            "===== {path}\n{}\n",
            String::from_utf8_lossy(bytes)
        ));
    }
    all.push_str(&format!("===== bundle.json\n{}", b.manifest_json));
    insta::assert_snapshot!(all);
}

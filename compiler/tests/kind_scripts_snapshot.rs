//! The rendered unit files and apply/revert scripts of a small spec that declares every kind,
//! as an insta snapshot (compiler/tests/snapshots/), so that every change to what lands on
//! hosts is reviewed as a diff.

use crate::common::*;

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
users purge-expired=#true
user "ops" {
    ssh-keys "unmanaged"
}
apt upgrade=#true
apt-source "vendor" url="https://deb.example/debian" suites="noble" components="main"
package "htop" version="3.3.0-4"
exec "001-hello.sh" rerun="once-successfully" {
    script "#!/bin/sh\necho hello\n"
}
modprobe "bonding" options="max_bonds=2" blacklist=#false
modprobe "floppy" blacklist=#true
kernel-args "hugepages" {
    arg "hugepagesz=1G"
    arg "hugepages=16"
    remove "quiet"
}
unit "app.service" enable=#true start=#false {
    content #"""
        [Service]
        ExecStart=/usr/bin/app
        [Install]
        WantedBy=multi-user.target
        """#
}
override "web" {
    match host="h"
    service "web" port=8080
}
live "/etc/haproxy/backends.cfg" service="web" mode="0640" {
    template "{% for s in services.web %}server {{ s.host }} {{ s.address }}:{{ s.port }}\n{% endfor %}"
    reload "systemctl reload haproxy"
}
health "app" timeout="5s" retries=2 interval="1s" {
    run "curl -fsS http://127.0.0.1:8080/healthz"
}
reboot method="kexec" timeout="10m" {
    window "Sat,Sun 02:00-05:00"
    before-reboot "kubectl drain --ignore-daemonsets \"$(hostname)\""
    after-boot "kubectl uncordon \"$(hostname)\""
}
confirm timeout="2m"
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

/// A new kind joins the spec above (and so the snapshot): every kind of the registry is
/// declared, and every kind that is not a setting has a resource (a probe) in the manifest.
#[test]
fn every_kind_is_declared_and_rendered() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    for kind in bellc_core::spec::Kind::ALL {
        let keyword = kind.keyword();
        assert!(
            SPEC.lines().any(|l| l.starts_with(&format!("{keyword} "))),
            "the spec of `every_kind_renders` declares no `{keyword}`"
        );
        if keyword == "health" {
            // A probe changes nothing: it is listed apart from the resources.
            assert!(
                b.manifest.probes.iter().any(|p| p.name == "app"),
                "the bundle of `every_kind_renders` has no probe"
            );
        } else if keyword == "reboot" {
            // How the host reboots: settings with two hooks, apart from the resources.
            let reboot = b.manifest.reboot.as_ref();
            assert_eq!(
                reboot.map(|r| r.hooks().count()),
                Some(2),
                "the bundle of `every_kind_renders` has no reboot hooks"
            );
        } else if keyword == "confirm" {
            assert_eq!(b.manifest.confirm.map(|c| c.timeout), Some(120));
        } else if !kind.is_setting() {
            assert!(
                b.manifest.resources.iter().any(|r| r.kind == keyword),
                "the bundle of `every_kind_renders` has no `{keyword}` resource"
            );
        }
    }
}

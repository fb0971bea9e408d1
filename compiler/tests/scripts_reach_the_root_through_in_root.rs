//! Path safety by construction: no stdlib script reaches a path under BELL_ROOT but through
//! the prelude's `in_root`, which resolves links inside the root and refuses one that leads
//! out. Every rendered script of a spec that uses every kind and every option that touches a
//! path is read line by line; `malicious_roots.rs` shows the helper at work.

use crate::common::*;

const SPEC: &str = r###"
fleet "t" target="debian-12"
host "h" address="10.0.0.1"
sysctl {
    net.ipv4.ip_forward 1
}
limit "nofile" domain="root" type="soft" item="nofile" value=101
mount "data" target="/srv/data" device="tmpfs" type="tmpfs" options="size=8M"
ethtool "ens3" {
    tso off
}
perm "/srv/app/*.key" owner="app" group="app" mode="0600" ignore-missing=#true
perm "/var/log/app.log" mode="0640"
apparmor "tool" {
    profile "/usr/bin/tool {\n}\n"
}
file "/etc/app.conf" mode="0640" {
    content "x\n"
}
users purge-expired=#true
user "ops" sudo=#true {
    password "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/"
    ssh-key "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example"
}
apt upgrade=#true
apt-source "vendor" url="https://deb.example/debian" suites="bookworm" components="main"
package "mysql-server" version="1.0" {
    debconf "mysql-server/root_password" type="password" value="secret-pass"
}
exec "001-hello.sh" {
    script "#!/bin/sh\necho hello\n"
}
modprobe "bonding" options="max_bonds=2"
unit "app.service" enable=#true {
    content "[Service]\nExecStart=/usr/bin/app\n[Install]\nWantedBy=multi-user.target\n"
}
"###;

/// The lines of a script outside the two functions that may name the root: `in_root` itself,
/// and `on_root`, which hands it to tools that chroot into it (`useradd --root`).
fn outside_the_helpers(script: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (n, line) in script.lines().enumerate() {
        if line.starts_with("in_root() {") || line.starts_with("on_root() {") {
            inside = true;
        } else if inside && line == "}" {
            inside = false;
        } else if !inside {
            out.push((n + 1, line));
        }
    }
    out
}

#[test]
fn no_script_names_a_path_under_the_root_but_through_in_root() {
    let c = compile_ok(SPEC);
    let b = only_bundle(&c);
    let mut scripts = 0;
    let mut in_root_calls = 0;
    for (path, bytes) in &b.contents {
        if !path.starts_with("scripts/") {
            continue;
        }
        // exec scripts are the spec's own.
        if path.starts_with("scripts/exec/") {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        scripts += 1;
        for (n, line) in outside_the_helpers(&text) {
            in_root_calls += usize::from(line.trim_start().starts_with("in_root "));
            let code = line.split(" # ").next().unwrap_or("");
            if code.trim_start().starts_with('#') {
                continue;
            }
            // Which root it is may be asked, and BELL_ROOT read once into `root`.
            let code = code
                .replace("[ -z \"$root\" ]", "")
                .replace("root=${BELL_ROOT%/}", "")
                .replace("BELL_ROOT=${BELL_ROOT:-/}", "");
            let names_the_root = code.contains("$root")
                || code.contains("${root")
                || code.contains("\"$BELL_ROOT\"")
                || code.contains("$BELL_ROOT/")
                || code.contains("${BELL_ROOT}");
            assert!(
                !names_the_root,
                "{path}:{n} reaches the root without in_root:\n{line}"
            );
        }
    }
    assert!(scripts >= 25, "only {scripts} scripts read");
    assert!(in_root_calls >= 25, "only {in_root_calls} in_root calls");
}

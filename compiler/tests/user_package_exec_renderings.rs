//! Snapshots of what the user, package, apt, apt-source and exec kinds render for a small
//! spec: every script, staged file and manifest entry, for review in pull requests.

use crate::common::in_memory::bundle;

const SPEC: &str = r##"
fleet "f" target="ubuntu-24.04"
host "h"
users purge-expired=#true
user "ops" sudo=#true shell="/bin/bash" {
    password "$6$bellsalt0123$PS2EAEBNHcsWK7.N4hZehzmPPgLUgs0l1d0XHpozG8/tzzPyAjRmR48g4xwN0czhvqHgGx1ltq1273AGkCgaz/"
    ssh-key "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPAydqFJPL5VvU88Mt5c04CAp5Ch/deM8Y1db3CQH0Z2 ops@example"
}
user "auditor" {
    ssh-keys "unmanaged"
}
apt upgrade=#true allow-downgrade=#true
apt-source "vendor" url="https://deb.example/debian" suites="noble" components="main" {
    key "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGV\n-----END PGP PUBLIC KEY BLOCK-----\n"
}
package "openssh-server" version="1:9.6p1-3ubuntu13" {
    debconf "openssh-server/permit-root-login" type="boolean" value=#false
}
package "telnetd" absent=#true
exec "001-setup.sh" rerun="once-successfully" retry-interval=60 timeout=300 on-failure="halt" {
    args "it's" "$(x)"
    env MODE="a b"
    after "package:openssh-server"
    script "#!/bin/sh\necho \"$MODE\" \"$@\"\n"
}
"##;

#[test]
fn renderings() {
    let b = bundle(SPEC, "h");
    for (path, bytes) in &b.contents {
        if path.contains("sysctl") || path.contains("limits") {
            continue;
        }
        let name = path.replace('/', "__");
        insta::assert_snapshot!(name, String::from_utf8_lossy(bytes));
    }
    let resources: Vec<_> = b
        .manifest
        .resources
        .iter()
        .map(|r| {
            serde_json::json!({
                "key": r.key(),
                "files": r.files,
                "after": r.after,
                "order_after": r.order_after,
                "exec": r.exec,
            })
        })
        .collect();
    insta::assert_json_snapshot!("resources", resources);
}

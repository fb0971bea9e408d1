//! `bell-run pull --source http://NAME:PORT/…` resolves NAME itself (the static binary must
//! not load the host's NSS modules): in a private network and mount namespace, with its own
//! `/etc/hosts` and `/etc/resolv.conf` bind-mounted in place and a real name server (Debian's
//! dnsmasq) on its loopback, each name must connect to the address the files and DNS give it
//! (nothing listens there, so the refusal names the address), or fail with the reason.

use crate::common;
use crate::common::fleet::bell_run;
use std::collections::BTreeMap;
use std::process::Command;

/// Each case: the name, and what the first line of bell-run's error must contain.
const CASES: &[(&str, &str)] = &[
    // An A record.
    ("dns.bell.test", "cannot connect to 127.0.0.7:1:"),
    // Only an AAAA record.
    ("v6.bell.test", "cannot connect to [::1]:1:"),
    // No dot: the search domain first.
    ("short", "cannot connect to 127.0.0.8:1:"),
    // A name in the name server with a final dot: as written, not searched.
    ("short.bell.test.", "cannot connect to 127.0.0.8:1:"),
    // /etc/hosts only, and /etc/hosts before DNS.
    ("hosts-only.example", "cannot connect to 127.0.0.9:1:"),
    ("shadowed.bell.test", "cannot connect to 127.0.0.10:1:"),
    // Forty addresses: too many for a UDP answer, so asked again over TCP, all tried.
    (
        "big.bell.test",
        "(the last of 40 addresses of big.bell.test)",
    ),
    // The name server says there is no such name.
    (
        "nothere.bell.test",
        "cannot resolve nothere.bell.test: no such host in /etc/hosts or DNS",
    ),
    // Loopback whatever the files say (RFC 6761).
    ("mirror.localhost", "cannot connect to [::1]:1:"),
    ("bad_name!", "`bad_name!` is not a host name"),
];

#[test]
fn source_names_resolve_from_the_hosts_file_and_the_name_servers_of_resolv_conf() {
    if !(common::have("unshare")
        && common::have("dnsmasq")
        && common::have("ip")
        && common::in_memory::is_root())
    {
        return;
    }
    let bin = bell_run();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
    write(
        "resolv.conf",
        "# the test's own\nnameserver 127.0.0.1\nsearch bell.test\noptions timeout:2 attempts:1\n",
    );
    // Nothing listens on 127.0.0.2: every query is refused at once (ICMP), no waiting.
    write(
        "resolv-dead.conf",
        "nameserver 127.0.0.2\noptions timeout:1 attempts:1\n",
    );
    write(
        "hosts",
        "127.0.0.1 localhost\n127.0.0.9 hosts-only.example\n127.0.0.10 shadowed.bell.test\n\
         127.0.0.99 mirror.localhost\n",
    );
    let big: String = (1..=40)
        .map(|i| format!("127.0.1.{i} big.bell.test\n"))
        .collect();
    write("big.hosts", &big);
    std::fs::create_dir(d.join("root")).unwrap();

    let names: Vec<&str> = CASES.iter().map(|(name, _)| *name).collect();
    let script = format!(
        r#"set -eu
d={d}
ip link set lo up
mount --bind "$d/resolv.conf" /etc/resolv.conf
mount --bind "$d/hosts" /etc/hosts
dnsmasq --port=53 --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
    --user=root --group=root --pid-file="$d/dnsmasq.pid" --log-facility="$d/dnsmasq.log" \
    --local=/bell.test/ --addn-hosts="$d/big.hosts" \
    --address=/dns.bell.test/127.0.0.7 --address=/v6.bell.test/::1 \
    --address=/short.bell.test/127.0.0.8 --address=/shadowed.bell.test/127.0.0.11
try() {{
    printf '%s\t' "$1"
    {bin} pull --source "http://$1:1/fleet/" --host h1 --root "$d/root" 2>&1 | head -n 1
}}
for name in {names}; do try "$name"; done
mount --bind "$d/resolv-dead.conf" /etc/resolv.conf
try dead.bell.test
kill "$(cat "$d/dnsmasq.pid")"
"#,
        d = d.display(),
        bin = bin.display(),
        names = names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let out = Command::new("unshare")
        .args([
            "--net",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            &script,
        ])
        .output()
        .expect("unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(d.join("dnsmasq.log")).unwrap_or_default()
    );
    let said: BTreeMap<&str, &str> = stdout.lines().filter_map(|l| l.split_once('\t')).collect();
    let mut wrong = Vec::new();
    let dead = [(
        "dead.bell.test",
        "no name server answered (127.0.0.2, from /etc/resolv.conf)",
    )];
    for (name, want) in CASES.iter().chain(&dead) {
        let got = said.get(name).copied().unwrap_or("(no line)");
        if !got.contains(want) {
            wrong.push(format!("{name}: want `{want}`, got `{got}`"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(
        std::fs::read_dir(d.join("root")).unwrap().count(),
        0,
        "the root is untouched"
    );
}

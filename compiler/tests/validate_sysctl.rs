//! sysctl keys: the syntax rules, and agreement with the keys the running kernel exposes.

use bellc_core::front::validate::{sysctl_key, sysctl_path};
use std::process::Command;

fn message(key: &str) -> String {
    match sysctl_key(key) {
        Ok(()) => panic!("`{key}` should be refused"),
        Err(invalid) => {
            assert!(!invalid.help.is_empty());
            invalid.message
        }
    }
}

#[test]
fn accepts_dotted_and_slash_forms() {
    for key in [
        "net.ipv4.ip_forward",
        "vm.swappiness",
        "kernel.core_pattern",
        "net.ipv4.conf.all.rp_filter",
        "net.ipv6.conf.eth-1.disable_ipv6",
        "net/ipv4/conf/eth0.100/rp_filter",
        "net.ipv4.conf.eth0/100.rp_filter",
        "fs.inotify.max_user_watches",
    ] {
        assert_eq!(sysctl_key(key), Ok(()), "{key}");
    }
}

#[test]
fn maps_keys_to_proc_sys_paths() {
    assert_eq!(sysctl_path("net.ipv4.ip_forward"), "net/ipv4/ip_forward");
    assert_eq!(
        sysctl_path("net/ipv4/conf/eth0.100/rp_filter"),
        "net/ipv4/conf/eth0.100/rp_filter"
    );
    // sysctl(8) prints a dot inside a segment as `/` in dotted form.
    assert_eq!(
        sysctl_path("net.ipv4.conf.eth0/100.rp_filter"),
        "net/ipv4/conf/eth0.100/rp_filter"
    );
}

#[test]
fn refuses_malformed_keys_with_a_reason() {
    assert_eq!(message(""), "sysctl key is empty");
    assert_eq!(
        message("kernel"),
        "sysctl key `kernel` has only one segment"
    );
    assert_eq!(
        message("net..ipv4"),
        "sysctl key `net..ipv4` has an empty segment"
    );
    assert_eq!(
        message(".net.ipv4"),
        "sysctl key `.net.ipv4` starts or ends with a separator"
    );
    assert_eq!(
        message("net.ipv4."),
        "sysctl key `net.ipv4.` starts or ends with a separator"
    );
    assert_eq!(
        message("/proc/sys/net"),
        "sysctl key `/proc/sys/net` starts or ends with a separator"
    );
    assert_eq!(
        message("net/ipv4/../../etc"),
        "sysctl key `net/ipv4/../../etc` has a `.` or `..` segment"
    );
    assert_eq!(
        message("net/./ipv4"),
        "sysctl key `net/./ipv4` has a `.` or `..` segment"
    );
    assert_eq!(
        message("net.ipv4.ip forward"),
        "sysctl key `net.ipv4.ip forward` contains U+0020"
    );
    assert_eq!(
        message("net.ipv4.*"),
        "sysctl key `net.ipv4.*` contains `*`"
    );
    assert_eq!(
        message("net.ipv4=1"),
        "sysctl key `net.ipv4=1` contains `=`"
    );
    assert_eq!(
        message("net.ipv4\n"),
        "sysctl key `net.ipv4\n` contains U+000A"
    );
    assert_eq!(
        message("-net.ipv4.ip_forward"),
        "sysctl key `-net.ipv4.ip_forward` starts with `-`"
    );
}

/// Every key the running kernel lists (`sysctl -a -N`) is accepted, and its path exists.
#[test]
fn accepts_every_key_the_kernel_lists() {
    if !bell_testkit::tool("sysctl") {
        return;
    }
    let output = match Command::new("sysctl").args(["-a", "-N"]).output() {
        Ok(output) => output,
        Err(error) => {
            panic!("run sysctl: {error}");
        }
    };
    let listing = String::from_utf8_lossy(&output.stdout);
    let keys: Vec<&str> = listing.lines().filter(|l| !l.is_empty()).collect();
    assert!(keys.len() > 100, "sysctl listed only {} keys", keys.len());
    for key in keys {
        assert_eq!(sysctl_key(key), Ok(()), "kernel key `{key}`");
        let path = std::path::Path::new("/proc/sys").join(sysctl_path(key));
        assert!(path.exists(), "`{key}` maps to missing {}", path.display());
    }
}

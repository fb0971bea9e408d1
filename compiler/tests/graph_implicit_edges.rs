//! The edges a careful operator would write are added without `after`: a mount before the mounts
//! nested under it, packages before the files, units, profiles and scripts of their host, users
//! before scripts and before what they own, mounts before scripts, a file before a unit that
//! names it, and scripts in name order.

use crate::common::spec_dir::frontend;

const SPEC: &str = r##"fleet "t" target="ubuntu-24.04"
host "h1" address="10.0.0.1"
mount "a-cache" target="/srv/data/cache" device="tmpfs" type="tmpfs"
mount "b-data" target="/srv/data" device="tmpfs" type="tmpfs"
mount "c-srv" target="/srv" device="tmpfs" type="tmpfs"
mount "d-other" target="/srvx" device="tmpfs" type="tmpfs"
package "zz-pkg"
apparmor "aa-profile" {
    profile "profile aa-profile /usr/bin/aa { }\n"
}
user "app"
user "ops"
file "/etc/myapp/env" owner="app" {
    content "A=1\n"
}
file "/etc/myapp/env.d" {
    content "B=1\n"
}
perm "/srv/app.key" owner="app" mode="0600"
unit "myapp.service" {
    content "[Service]\nEnvironmentFile=/etc/myapp/env\nExecStart=/usr/bin/myapp\n"
}
exec "020-second" {
    script "#!/bin/sh\ntrue\n"
}
exec "010-first" {
    script "#!/bin/sh\ntrue\n"
}
"##;

#[test]
fn implicit_edges_order_nested_mounts_and_put_packages_first() {
    let (front, diags, _dir) = frontend(SPEC);
    assert!(!diags.has_errors(), "{diags:?}");
    let order = front.orders[0].as_ref().expect("an order");
    let pos = |k: &str| {
        order
            .position(k)
            .unwrap_or_else(|| panic!("no {k} in {:?}", order.keys))
    };
    let after = |k: &str| order.after(k);

    // Nested mounts: outermost first, whatever their names; each waits for the nearest one.
    assert!(pos("mount:c-srv") < pos("mount:b-data"));
    assert!(pos("mount:b-data") < pos("mount:a-cache"));
    assert_eq!(after("mount:a-cache"), ["mount:b-data"]);
    assert_eq!(after("mount:b-data"), ["mount:c-srv"]);
    assert!(after("mount:c-srv").is_empty());
    // `/srvx` is not under `/srv`.
    assert!(after("mount:d-other").is_empty());

    // Packages before profiles, files, units and scripts.
    for k in [
        "apparmor:aa-profile",
        "file:/etc/myapp/env",
        "unit:myapp.service",
        "exec:010-first",
    ] {
        assert!(pos("package:zz-pkg") < pos(k), "{k}");
        assert!(after(k).contains(&"package:zz-pkg"), "{k}: {:?}", after(k));
    }
    // ... but not before mounts or users.
    assert!(!after("user:app").contains(&"package:zz-pkg"));

    // Owners before what they own; users and mounts before scripts.
    assert!(after("file:/etc/myapp/env").contains(&"user:app"));
    assert!(!after("file:/etc/myapp/env").contains(&"user:ops"));
    assert!(after("perm:/srv/app.key").contains(&"user:app"));
    for k in ["user:app", "user:ops", "mount:a-cache", "mount:d-other"] {
        assert!(after("exec:010-first").contains(&k), "{k}");
    }

    // A unit waits for the file it names, not for one whose path merely starts the same.
    assert!(after("unit:myapp.service").contains(&"file:/etc/myapp/env"));
    assert!(!after("unit:myapp.service").contains(&"file:/etc/myapp/env.d"));

    // Scripts in name order, whatever the declaration order.
    assert!(pos("exec:010-first") < pos("exec:020-second"));
    assert!(after("exec:020-second").contains(&"exec:010-first"));
}

#[test]
fn the_order_is_a_topological_order_and_stable() {
    let (front, _, _dir) = frontend(SPEC);
    let order = front.orders[0].as_ref().expect("an order");
    for (p, key) in order.keys.iter().enumerate() {
        for dep in order.after(key) {
            assert!(
                order.position(dep).expect("known") < p,
                "{dep} before {key}"
            );
        }
    }
    let (again, _, _dir2) = frontend(SPEC);
    assert_eq!(order.keys, again.orders[0].as_ref().expect("an order").keys);
}

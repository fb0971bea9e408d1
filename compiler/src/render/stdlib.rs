//! The standard library of templates (`stdlib/<kind>/...`), embedded in the binary, and the
//! escaping filters templates use to put values into each kind of line.

use crate::escape;

pub const TEMPLATES: &[(&str, &str)] = &[
    // Included at the top of every apply/revert script: `{% include "common/prelude.sh.j2" %}`
    // with `kind`, `name` and `role` in the context.
    (
        "common/prelude.sh.j2",
        include_str!("../../../stdlib/common/prelude.sh.j2"),
    ),
    (
        "sysctl/sysctl.conf.j2",
        include_str!("../../../stdlib/sysctl/sysctl.conf.j2"),
    ),
    (
        "sysctl/check.sh.j2",
        include_str!("../../../stdlib/sysctl/check.sh.j2"),
    ),
    (
        "limits/limits.conf.j2",
        include_str!("../../../stdlib/limits/limits.conf.j2"),
    ),
    (
        "common/ids.sh.j2",
        include_str!("../../../stdlib/common/ids.sh.j2"),
    ),
    (
        "systemd/daemon-reload.sh.j2",
        include_str!("../../../stdlib/systemd/daemon-reload.sh.j2"),
    ),
    (
        "systemd/enable.sh.j2",
        include_str!("../../../stdlib/systemd/enable.sh.j2"),
    ),
    (
        "systemd/disable.sh.j2",
        include_str!("../../../stdlib/systemd/disable.sh.j2"),
    ),
    (
        "systemd/disable-only.sh.j2",
        include_str!("../../../stdlib/systemd/disable-only.sh.j2"),
    ),
    (
        "systemd/check-enabled.sh.j2",
        include_str!("../../../stdlib/systemd/check-enabled.sh.j2"),
    ),
    (
        "sysctl/apply.sh.j2",
        include_str!("../../../stdlib/sysctl/apply.sh.j2"),
    ),
    (
        "sysctl/revert.sh.j2",
        include_str!("../../../stdlib/sysctl/revert.sh.j2"),
    ),
    (
        "mount/mount.unit.j2",
        include_str!("../../../stdlib/mount/mount.unit.j2"),
    ),
    (
        "mount/apply.sh.j2",
        include_str!("../../../stdlib/mount/apply.sh.j2"),
    ),
    (
        "mount/revert.sh.j2",
        include_str!("../../../stdlib/mount/revert.sh.j2"),
    ),
    (
        "mount/check.sh.j2",
        include_str!("../../../stdlib/mount/check.sh.j2"),
    ),
    (
        "ethtool/ethtool.service.j2",
        include_str!("../../../stdlib/ethtool/ethtool.service.j2"),
    ),
    (
        "ethtool/apply.sh.j2",
        include_str!("../../../stdlib/ethtool/apply.sh.j2"),
    ),
    (
        "ethtool/revert.sh.j2",
        include_str!("../../../stdlib/ethtool/revert.sh.j2"),
    ),
    (
        "perm/apply.sh.j2",
        include_str!("../../../stdlib/perm/apply.sh.j2"),
    ),
    (
        "perm/revert.sh.j2",
        include_str!("../../../stdlib/perm/revert.sh.j2"),
    ),
    (
        "perm/check.sh.j2",
        include_str!("../../../stdlib/perm/check.sh.j2"),
    ),
    (
        "apparmor/apply.sh.j2",
        include_str!("../../../stdlib/apparmor/apply.sh.j2"),
    ),
    (
        "apparmor/revert.sh.j2",
        include_str!("../../../stdlib/apparmor/revert.sh.j2"),
    ),
    (
        "apparmor/check.sh.j2",
        include_str!("../../../stdlib/apparmor/check.sh.j2"),
    ),
    (
        "file/apply.sh.j2",
        include_str!("../../../stdlib/file/apply.sh.j2"),
    ),
    (
        "unit/apply.sh.j2",
        include_str!("../../../stdlib/unit/apply.sh.j2"),
    ),
    (
        "unit/revert.sh.j2",
        include_str!("../../../stdlib/unit/revert.sh.j2"),
    ),
    (
        "unit/check.sh.j2",
        include_str!("../../../stdlib/unit/check.sh.j2"),
    ),
    (
        "user/common.sh.j2",
        include_str!("../../../stdlib/user/common.sh.j2"),
    ),
    (
        "user/apply.sh.j2",
        include_str!("../../../stdlib/user/apply.sh.j2"),
    ),
    (
        "user/revert.sh.j2",
        include_str!("../../../stdlib/user/revert.sh.j2"),
    ),
    (
        "user/check.sh.j2",
        include_str!("../../../stdlib/user/check.sh.j2"),
    ),
    (
        "user/sudoers.j2",
        include_str!("../../../stdlib/user/sudoers.j2"),
    ),
    (
        "user/default-account-apply.sh.j2",
        include_str!("../../../stdlib/user/default-account-apply.sh.j2"),
    ),
    (
        "user/default-account-revert.sh.j2",
        include_str!("../../../stdlib/user/default-account-revert.sh.j2"),
    ),
    (
        "user/default-account-check.sh.j2",
        include_str!("../../../stdlib/user/default-account-check.sh.j2"),
    ),
    (
        "package/common.sh.j2",
        include_str!("../../../stdlib/package/common.sh.j2"),
    ),
    (
        "package/apply.sh.j2",
        include_str!("../../../stdlib/package/apply.sh.j2"),
    ),
    (
        "package/revert.sh.j2",
        include_str!("../../../stdlib/package/revert.sh.j2"),
    ),
    (
        "package/check.sh.j2",
        include_str!("../../../stdlib/package/check.sh.j2"),
    ),
    (
        "package/debconf.seed.j2",
        include_str!("../../../stdlib/package/debconf.seed.j2"),
    ),
    (
        "apt/upgrade.sh.j2",
        include_str!("../../../stdlib/apt/upgrade.sh.j2"),
    ),
    (
        "apt-source/source.sources.j2",
        include_str!("../../../stdlib/apt-source/source.sources.j2"),
    ),
    (
        "apt-source/update.sh.j2",
        include_str!("../../../stdlib/apt-source/update.sh.j2"),
    ),
];

pub fn register_filters(env: &mut minijinja::Environment<'static>) {
    // `sh`: a POSIX shell word, single-quoted.
    env.add_filter("sh", |value: String| escape::shell_quote(&value));
    // `unit`: a value for a systemd unit setting; refuses what systemd cannot represent.
    env.add_filter("unit", |value: String| {
        escape::unit_value(&value)
            .map_err(|reason| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, reason))
    });
    env.add_filter("unit_arg", |value: String| {
        escape::unit_exec_arg(&value)
            .map_err(|reason| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, reason))
    });
    // `conf`: one field of a line-based config file (sysctl.d, limits.d).
    env.add_filter("conf", |value: String| {
        escape::config_field(&value)
            .map_err(|reason| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, reason))
    });
}

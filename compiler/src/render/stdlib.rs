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

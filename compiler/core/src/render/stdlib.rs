//! The standard library of templates (`stdlib/<kind>/...`), embedded in the binary by
//! `build.rs`, and the escaping filters templates use to put values into each kind of line.

use crate::escape;

// `TEMPLATES`: (name, source) of every `*.j2` file under `stdlib/`, found and parsed by
// `build.rs`, so a new template is picked up without a list to edit and one that does not parse
// fails the build.
include!(concat!(env!("OUT_DIR"), "/stdlib_templates.rs"));

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
    // `limits`: one field of a limits.d line, which may hold no whitespace and no `#`.
    env.add_filter("limits", |value: String| {
        escape::limits_field(&value)
            .map_err(|reason| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, reason))
    });
    // `conf`: one field of a line-based config file (sysctl.d, limits.d).
    env.add_filter("conf", |value: String| {
        escape::config_field(&value)
            .map_err(|reason| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, reason))
    });
}

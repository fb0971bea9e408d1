//! The systemd service and timer that re-apply the current generation periodically. The
//! shipped unit files (runner/systemd/) are the source; `install-timer` writes them under the
//! root with the binary path and interval filled in.

use crate::rootfs::{write_atomic, Root};

pub const SERVICE: &str = include_str!("../systemd/bell-run.service");
pub const TIMER: &str = include_str!("../systemd/bell-run.timer");

const UNIT_DIR: &str = "/etc/systemd/system";

pub fn install(root: &Root, exe: &str, interval: &str) -> Result<Vec<String>, String> {
    if !exe.starts_with('/')
        || exe
            .chars()
            .any(|c| c.is_whitespace() || c == '%' || c == '\\')
    {
        return Err(format!(
            "`--exec {exe}` must be an absolute path without spaces, `%` or `\\`"
        ));
    }
    if interval.is_empty()
        || !interval
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ' ')
    {
        return Err(format!(
            "`--interval {interval}` is not a systemd time span such as `15min`"
        ));
    }
    let service = SERVICE.replace("/usr/local/sbin/bell-run", exe);
    let timer = TIMER.replace(
        "OnUnitActiveSec=15min",
        &format!("OnUnitActiveSec={interval}"),
    );
    let mut written = Vec::new();
    for (name, text) in [("bell-run.service", service), ("bell-run.timer", timer)] {
        let path = format!("{UNIT_DIR}/{name}");
        root.check_contained(&path)?;
        write_atomic(&root.host(&path), text.as_bytes())
            .map_err(|e| format!("cannot write `{path}`: {e}"))?;
        written.push(path);
    }
    Ok(written)
}

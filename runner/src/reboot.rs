//! Whether the host needs a reboot, and why. Three things say so: a resource that takes effect
//! at boot (a kernel command line) whose check finds the running system has not booted into
//! it yet (exit [`bell_bundle::EXIT_REBOOT_REQUIRED`]); the target's own signal, the
//! `/run/reboot-required` that Debian and Ubuntu packages (libc, Ubuntu's kernels) write from
//! their postinst; and a kernel the next boot would load (`/vmlinuz`, which Debian's and
//! Ubuntu's kernel packages point at the newest one installed) that is not the running one.
//! An `exec` with `reboot=#true` that ran in this boot says so too. None is drift: nothing an
//! apply does would change it; only a boot does. The first is `check`'s to read
//! ([`crate::check::reboot_reasons`]); the others are here.

use crate::context::Ctx;
use crate::state::State;
use bell_bundle::Manifest;

/// At most this many packages of `/run/reboot-required.pkgs` are named.
const MAX_PACKAGES: usize = 20;

/// What the host itself says: the target's signal, and a kernel installed for the next boot.
pub fn host_reasons(ctx: &Ctx) -> Vec<String> {
    // Only a running system has a running kernel; an image root's is the build machine's.
    let kernel = (!ctx.offline)
        .then(|| std::fs::read_to_string("/proc/sys/kernel/osrelease").ok())
        .flatten()
        .and_then(|running| next_kernel(&ctx.root.dir, running.trim()));
    signal(ctx).into_iter().chain(kernel).collect()
}

/// Every `exec` with `reboot=#true` whose last run, in the running boot, succeeded: what it
/// did (a firmware update) waits for the next boot. The next boot has another boot id.
pub fn exec_reasons(manifest: &Manifest, state: &State, boot: Option<&str>) -> Vec<String> {
    let Some(boot) = boot else {
        return Vec::new();
    };
    manifest
        .resources
        .iter()
        .filter(|r| r.exec.as_ref().is_some_and(|policy| policy.reboot))
        .filter_map(|r| {
            let key = r.key();
            let ran = state.resources.get(&key)?.exec.as_ref()?;
            (ran.boot_id.as_deref() == Some(boot) && ran.last_ok == Some(true)).then(|| {
                format!("{key}: ran in this boot, and what it did takes effect at the next")
            })
        })
        .collect()
}

/// The plain file at host path `path` under the root, when there is one: not when a directory
/// on its way leads out of the root, nor when it is itself a link.
fn read_in_root(ctx: &Ctx, path: &str) -> Option<String> {
    ctx.root.check_contained(path).ok()?;
    crate::rootfs::read_record(&ctx.root.host(path)).ok()?
}

/// The kernel `/vmlinuz` (else `/boot/vmlinuz`) under `root` names, when it is not `running`:
/// the link is read, never followed, and its target's `vmlinuz-VERSION` gives the version.
fn next_kernel(root: &std::path::Path, running: &str) -> Option<String> {
    let link = ["vmlinuz", "boot/vmlinuz"]
        .iter()
        .find_map(|at| std::fs::read_link(root.join(at)).ok())?;
    let name = link.file_name()?.to_str()?;
    let version = name.strip_prefix("vmlinuz-")?;
    (!running.is_empty() && version != running)
        .then(|| format!("kernel {version} is installed for the next boot; {running} is running"))
}

/// The target's own signal under the root, never through a link out of it: the reason, naming
/// the packages that asked when `.pkgs` lists them.
fn signal(ctx: &Ctx) -> Option<String> {
    let path = format!("/{}", bell_bundle::REBOOT_REQUIRED_FILE);
    read_in_root(ctx, &path)?;
    let mut packages: Vec<String> = read_in_root(ctx, &format!("{path}.pkgs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter(|p| {
            p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.:".contains(c))
        })
        .map(str::to_string)
        .collect();
    packages.sort();
    packages.dedup();
    let more = packages.len().saturating_sub(MAX_PACKAGES);
    packages.truncate(MAX_PACKAGES);
    Some(match (packages.is_empty(), more) {
        (true, _) => format!("{path} is present"),
        (false, 0) => format!("{path} is present (for {})", packages.join(", ")),
        (false, more) => format!(
            "{path} is present (for {} and {more} more)",
            packages.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::next_kernel;

    #[test]
    fn the_kernel_the_next_boot_loads() {
        let root = std::env::temp_dir().join(format!("bell-reboot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("boot")).unwrap();
        assert_eq!(
            next_kernel(&root, "6.1.0-26-amd64"),
            None,
            "no link: cannot tell"
        );
        std::os::unix::fs::symlink("boot/vmlinuz-6.1.0-28-amd64", root.join("vmlinuz")).unwrap();
        assert_eq!(
            next_kernel(&root, "6.1.0-26-amd64").as_deref(),
            Some("kernel 6.1.0-28-amd64 is installed for the next boot; 6.1.0-26-amd64 is running")
        );
        assert_eq!(next_kernel(&root, "6.1.0-28-amd64"), None);
        // Ubuntu keeps the link in /boot; an absolute target is read, not followed.
        std::fs::remove_file(root.join("vmlinuz")).unwrap();
        std::os::unix::fs::symlink("/boot/vmlinuz-6.8.0-50-generic", root.join("boot/vmlinuz"))
            .unwrap();
        assert!(next_kernel(&root, "6.8.0-45-generic").is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }
}

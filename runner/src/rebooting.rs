//! The reboot `bell-run pull` makes when the host needs one (see [`crate::reboot`] for why it
//! does): when its bundle's `reboot` policy allows it, inside one of its windows, holding a slot
//! of its rollout group, after the `before-reboot` hook. A record of it in bell-run's
//! directory outlives the boot, so that the first pull of the next boot knows it comes back
//! from bell's own reboot: it runs `after-boot` with the health probes and gives the slot
//! back only when the reasons are gone and the host is healthy. A host whose reboot did not
//! take effect, or that came back unhealthy, keeps the slot and does not reboot again for the
//! same bundle, so a bad kernel stops at the group's budget.
//!
//! Only a running system reboots: an image root (offline) only reports that it needs one.

use crate::context::Ctx;
use crate::health::{self, ProbeOutcome};
use crate::rootfs::{self, Root};
use crate::state;
use bell_bundle::{Manifest, Reboot, RebootMethod, RebootPolicy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The record of a reboot bell-run ordered, in its directory.
const RECORD: &str = "rebooting.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The bundle whose changes needed it.
    pub bundle: String,
    /// The boot it was ordered in: another boot id means it happened.
    pub boot_id: String,
    pub method: RebootMethod,
    pub reasons: Vec<String>,
    /// Unix seconds.
    pub since: u64,
    /// The arguments a kexec added to the command line, so that the next kexec takes out
    /// those a newer bundle no longer gives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kexec_added: Vec<String>,
}

/// The record of the reboot bell-run ordered last, if one is open: never read through a link.
pub fn load(root: &Root) -> Option<Record> {
    let text = rootfs::read_record(&root.bell_dir().join(RECORD)).ok()??;
    serde_json::from_str(&text).ok()
}

fn save(root: &Root, record: &Record) -> Result<(), String> {
    let path = root.bell_dir().join(RECORD);
    let text = serde_json::to_string_pretty(record).map_err(|e| e.to_string())?;
    rootfs::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Closes the record: the host is back from its reboot, healthy.
pub fn clear(root: &Root) {
    let _ = std::fs::remove_file(root.bell_dir().join(RECORD));
}

/// The open record, when this boot is a later one than the boot it was ordered in.
pub fn back_from(record: Option<Record>, boot: Option<&str>) -> Option<Record> {
    record.filter(|r| boot.is_some_and(|b| b != r.boot_id))
}

/// `after-boot`, run like a health probe of the first apply after the reboot.
pub(crate) fn after_boot(
    ctx: &Ctx,
    manifest: &Manifest,
    bundle: &Path,
    generation: &str,
) -> Option<ProbeOutcome> {
    let hook = manifest.reboot.as_ref()?.after_boot.as_ref()?;
    Some(health::run_probe(ctx, "reboot", hook, bundle, generation))
}

/// What the pull does about the reasons its apply found.
pub enum Decision {
    /// Nothing needs a reboot.
    None,
    /// It does not reboot now: why, for the report and the output.
    Waits(String),
    /// It reboots, holding a slot (the caller takes one first when there is a budget).
    Reboot,
}

/// Whether a host that needs a reboot for `reasons` reboots now under `reboot` (its bundle's
/// settings), at `now`.
pub fn decide(reboot: Option<&Reboot>, reasons: &[String], offline: bool, now: u64) -> Decision {
    if reasons.is_empty() {
        return Decision::None;
    }
    let Some(reboot) = reboot else {
        return Decision::Waits(
            "the bundle has no `reboot` policy: reboot it by hand, or give it `reboot`".into(),
        );
    };
    if offline {
        return Decision::Waits("an image root is not running: its first boot takes it".into());
    }
    if reboot.policy == RebootPolicy::Never {
        return Decision::Waits("its `reboot` policy is \"never\": reboot it by hand".into());
    }
    if !reboot.window_open(now) {
        return Decision::Waits(format!(
            "waits for its window ({})",
            reboot.windows.join("; ")
        ));
    }
    Decision::Reboot
}

/// What the pull hands the caller to run once the report is filed.
#[derive(Debug, Clone)]
pub struct Plan {
    pub method: RebootMethod,
    /// For a kexec: the kernel, its initrd, and the command line it boots with.
    pub kexec: Option<(PathBuf, Option<PathBuf>, String)>,
}

impl Plan {
    pub fn describe(&self) -> String {
        match &self.kexec {
            None => "reboot".to_string(),
            Some((kernel, _, cmdline)) => {
                format!("kexec into {} with `{cmdline}`", kernel.display())
            }
        }
    }
}

/// Runs `before-reboot` and records the reboot; the plan to run once the report is filed, or
/// why the host does not reboot after all (the hook failed: it keeps its slot).
pub(crate) fn prepare(
    ctx: &Ctx,
    manifest: &Manifest,
    generation: &str,
    reasons: &[String],
) -> Result<Plan, String> {
    let reboot = manifest
        .reboot
        .as_ref()
        .ok_or("the bundle has no `reboot` policy")?;
    let boot_id = ctx.boot.clone().ok_or(
        "the boot id cannot be read (/proc/sys/kernel/random/boot_id), so bell-run could not \
         tell the next boot from this one: not rebooting",
    )?;
    let earlier = load(ctx.root);
    let kexec = match reboot.method {
        RebootMethod::Reboot => None,
        RebootMethod::Kexec => {
            let running = std::fs::read_to_string("/proc/cmdline")
                .map_err(|e| format!("cannot read /proc/cmdline: {e}"))?;
            let added = earlier
                .as_ref()
                .map(|r| r.kexec_added.as_slice())
                .unwrap_or_default();
            let (kernel, initrd) = installed_kernel(ctx.root)?;
            Some((kernel, initrd, kexec_cmdline(&running, reboot, added)))
        }
    };
    if let Some(hook) = &reboot.before_reboot {
        let bundle = state::generation_dir(ctx.root, generation);
        let ran = health::run_probe(ctx, "reboot", hook, &bundle, generation);
        if !ran.healthy {
            return Err(format!(
                "`before-reboot` failed ({}; {}): not rebooting",
                ran.detail.unwrap_or_default(),
                ran.log
            ));
        }
    }
    save(
        ctx.root,
        &Record {
            bundle: generation.to_string(),
            boot_id,
            method: reboot.method,
            reasons: reasons.to_vec(),
            since: ctx.now,
            kexec_added: reboot.kernel_args.clone(),
        },
    )?;
    Ok(Plan {
        method: reboot.method,
        kexec,
    })
}

/// Reboots: `systemctl reboot`, or loads the kernel with `kexec -l` and `systemctl kexec`.
pub fn execute(plan: &Plan) -> Result<(), String> {
    let run = |program: &str, args: &[String]| {
        let status = Command::new(program)
            .args(args)
            .status()
            .map_err(|e| format!("cannot run `{program}`: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`{program} {}` failed: {status}", args.join(" ")))
        }
    };
    match (&plan.method, &plan.kexec) {
        (RebootMethod::Kexec, Some((kernel, initrd, cmdline))) => {
            let mut args = vec!["-l".to_string(), kernel.display().to_string()];
            if let Some(initrd) = initrd {
                args.push(format!("--initrd={}", initrd.display()));
            }
            args.push(format!("--command-line={cmdline}"));
            run("kexec", &args)?;
            run("systemctl", &["kexec".to_string()])
        }
        _ => run("systemctl", &["reboot".to_string()]),
    }
}

/// The kernel the next boot would load and its initrd: what Debian's and Ubuntu's `/vmlinuz`
/// and `/initrd.img` point at (else `/boot/vmlinuz`), or the running kernel's own files.
fn installed_kernel(root: &Root) -> Result<(PathBuf, Option<PathBuf>), String> {
    let pointed = |link: &str| -> Option<PathBuf> {
        let target = std::fs::read_link(root.host(link)).ok()?;
        let at = Path::new(link)
            .parent()
            .unwrap_or(Path::new("/"))
            .join(target);
        root.check_contained(&at.to_string_lossy()).ok()?;
        root.host(&at.to_string_lossy()).is_file().then_some(at)
    };
    let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let own = |name: &str| {
        let path = format!("/boot/{name}-{}", running.trim());
        (!running.trim().is_empty() && root.host(&path).is_file()).then(|| PathBuf::from(path))
    };
    let kernel = pointed("/vmlinuz")
        .or_else(|| pointed("/boot/vmlinuz"))
        .or_else(|| own("vmlinuz"))
        .ok_or(
            "no kernel to kexec into: neither /vmlinuz nor /boot/vmlinuz-$(uname -r) is there",
        )?;
    let initrd = pointed("/initrd.img")
        .or_else(|| pointed("/boot/initrd.img"))
        .or_else(|| own("initrd.img"));
    Ok((kernel, initrd))
}

/// The command line a kexec boots with: the running one (without the boot loader's
/// `BOOT_IMAGE=`), less what the bundle's `kernel-args` take out and what an earlier kexec
/// added that the bundle no longer gives, with the bundle's arguments last (one of theirs
/// replaces a running `key=…` of the same key).
pub fn kexec_cmdline(running: &str, reboot: &Reboot, earlier_added: &[String]) -> String {
    let key = |arg: &str| arg.split_once('=').map_or(arg, |(k, _)| k).to_string();
    let replaced: Vec<String> = reboot.kernel_args.iter().map(|a| key(a)).collect();
    let mut words: Vec<String> = words(running)
        .into_iter()
        .filter(|w| !w.starts_with("BOOT_IMAGE="))
        .filter(|w| !reboot.kernel_args_removed.contains(w))
        .filter(|w| !earlier_added.contains(w) || reboot.kernel_args.contains(w))
        .filter(|w| !(w.contains('=') && replaced.contains(&key(w))))
        .filter(|w| !reboot.kernel_args.contains(w))
        .collect();
    words.extend(reboot.kernel_args.iter().cloned());
    words.join(" ")
}

/// The words of a kernel command line: split at spaces outside double quotes, as the kernel
/// does (`dyndbg="file x.c +p"` is one).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.trim().chars() {
        match c {
            '"' => {
                quoted = !quoted;
                word.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reboot(args: &[&str], removed: &[&str]) -> Reboot {
        Reboot {
            policy: RebootPolicy::WhenRequired,
            method: RebootMethod::Kexec,
            windows: vec![],
            before_reboot: None,
            after_boot: None,
            kernel_args: args.iter().map(|a| a.to_string()).collect(),
            kernel_args_removed: removed.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_kexec_command_line() {
        let running = "BOOT_IMAGE=/vmlinuz-6.1.0-26-amd64 root=UUID=ab ro quiet hugepages=8 dyndbg=\"file a.c +p\"\n";
        let r = reboot(&["hugepagesz=1G", "hugepages=16"], &["quiet"]);
        assert_eq!(
            kexec_cmdline(running, &r, &[]),
            "root=UUID=ab ro dyndbg=\"file a.c +p\" hugepagesz=1G hugepages=16"
        );
        // An argument an earlier kexec added and the bundle no longer gives goes; one it still
        // gives is not doubled.
        let after = "root=UUID=ab ro bell.test=1 hugepagesz=1G";
        assert_eq!(
            kexec_cmdline(
                after,
                &reboot(&["hugepagesz=1G"], &[]),
                &["bell.test=1".into()]
            ),
            "root=UUID=ab ro hugepagesz=1G"
        );
    }

    #[test]
    fn decisions() {
        let reasons = vec!["kernel-args:x: not yet".to_string()];
        let mut r = reboot(&[], &[]);
        assert!(matches!(decide(Some(&r), &[], false, 0), Decision::None));
        assert!(matches!(
            decide(None, &reasons, false, 0),
            Decision::Waits(_)
        ));
        assert!(matches!(
            decide(Some(&r), &reasons, true, 0),
            Decision::Waits(_)
        ));
        assert!(matches!(
            decide(Some(&r), &reasons, false, 0),
            Decision::Reboot
        ));
        // 2026-11-28, a Saturday: 03:00 and 12:00 UTC.
        r.windows = vec!["Sat,Sun 02:00-05:00".into()];
        let saturday = 1_795_824_000;
        assert!(matches!(
            decide(Some(&r), &reasons, false, saturday + 3 * 3600),
            Decision::Reboot
        ));
        match decide(Some(&r), &reasons, false, saturday + 12 * 3600) {
            Decision::Waits(why) => assert_eq!(why, "waits for its window (Sat,Sun 02:00-05:00)"),
            _ => panic!("outside the window"),
        }
        r.policy = RebootPolicy::Never;
        assert!(matches!(
            decide(Some(&r), &reasons, false, saturday + 3 * 3600),
            Decision::Waits(_)
        ));
    }
}

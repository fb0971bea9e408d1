//! Each host's root on a small file system of its own, so that a fault can fill it while the
//! host applies, as a host's `/var` fills with logs on a bad night.
//!
//! The file systems are tmpfs mounted in a mount namespace of the run's own, held by one
//! `unshare` process: nothing is mounted where the rest of the machine sees it, and the mounts
//! go with the namespace however the test ends (the holder waits on its stdin, which closes
//! with the test, and the namespace lasts only as long as a process is in it). bell-run runs in
//! the namespace (`nsenter`); the test reads and writes the roots through the holder's view
//! of the file system, `/proc/PID/root`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Each root's size: a few hundred generations of the run's small bundles, and nothing else.
const SIZE: &str = "8m";

/// What a fault writes into a root to fill it.
const FILLER: &str = "filler";

pub struct Disks {
    holder: Child,
}

impl Disks {
    /// A tmpfs of [`SIZE`] over each of `roots` (empty directories), in a namespace of their
    /// own; `None` where the machine cannot make one (not root).
    pub fn mount(roots: &[&Path]) -> Option<Disks> {
        let script = format!(
            "for root do mount -t tmpfs -o size={SIZE},mode=0755 bell-fault-disk \"$root\" \
             || exit 1; done; echo mounted; read -r _"
        );
        let mut holder = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .args(roots)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut said = String::new();
        let stdout = holder.stdout.take()?;
        let _ = BufReader::new(stdout).read_line(&mut said);
        if said.trim() != "mounted" {
            let _ = holder.kill();
            let out = holder.wait_with_output().ok()?;
            eprintln!(
                "skipped: no file systems of the hosts' own ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Disks { holder })
    }

    /// `root` as the namespace sees it, for the test to read and write.
    pub fn view(&self, root: &Path) -> PathBuf {
        let mut view = PathBuf::from(format!("/proc/{}/root", self.holder.id()));
        view.push(root.strip_prefix("/").unwrap_or(root));
        view
    }

    /// `program` run in the namespace (`nsenter` execs it: its pid is the program's).
    pub fn enter(&self, program: &Path) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--mount=/proc/{}/ns/mnt", self.holder.id()))
            .arg("--")
            .arg(program);
        command
    }

    /// Fills `root`'s file system to the last byte; how many bytes that took.
    pub fn fill(&self, root: &Path) -> u64 {
        let Ok(mut file) = std::fs::File::create(self.view(root).join(FILLER)) else {
            return 0;
        };
        let block = vec![0x5a_u8; 64 << 10];
        let mut written = 0;
        loop {
            match file.write(&block) {
                Ok(0) | Err(_) => return written,
                Ok(n) => written += n as u64,
            }
        }
    }

    /// Gives back what [`Disks::fill`] took.
    pub fn empty(&self, root: &Path) {
        let _ = std::fs::remove_file(self.view(root).join(FILLER));
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        // Closing its stdin ends the holder; the mounts go with the last process inside.
        drop(self.holder.stdin.take());
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

#[test]
fn a_full_root_is_full_only_in_its_namespace() {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let paths: Vec<&Path> = roots.iter().map(|r| r.path()).collect();
    let Some(disks) = Disks::mount(&paths) else {
        return;
    };
    let filled = disks.fill(paths[0]);
    assert!(
        (7 << 20..=8 << 20).contains(&filled),
        "filled {filled} bytes"
    );
    // Full: a write in the namespace fails; the other root and the machine's view are not.
    let write = |root: &Path, name: &str| {
        disks
            .enter(Path::new("sh"))
            .args(["-c", "printf x > \"$1\"", "sh"])
            .arg(root.join(name))
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(!write(paths[0], "one"));
    assert!(write(paths[1], "one"));
    assert!(!paths[0].join(FILLER).exists() && !paths[1].join("one").exists());
    assert_eq!(
        std::fs::read(disks.view(paths[1]).join("one")).unwrap(),
        b"x"
    );
    disks.empty(paths[0]);
    assert!(write(paths[0], "two"));
    drop(disks);
}

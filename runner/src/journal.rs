//! The atomic file switch. New contents are staged beside their targets (same directory, so
//! the rename is atomic) with their final mode and owner and fsynced; a journal in
//! `ROOT/var/lib/bell/journal.json` lists every step. Until the journal says `committed`, a
//! crash is undone (stages, new backups and new directories removed: all old generation);
//! after it, the switch is completed (every remaining rename and removal redone: all new
//! generation). Every step is idempotent, so recovery can itself be interrupted and repeated.

use crate::failpoint;
use crate::plan::FileAction;
use crate::rootfs::{fsync_dir, remove_if_exists, write_atomic, Root};
use crate::state::{self, ManagedFile, Pending, State};
use bell_bundle::Manifest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{lchown, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    pub committed: bool,
    pub generation: String,
    pub ops: Vec<Op>,
    /// Backups this switch creates (an undo removes them again).
    pub backups: Vec<String>,
    /// Directories this switch creates, outermost first.
    pub dirs: Vec<String>,
    /// The managed files once the switch is complete.
    pub managed: BTreeMap<String, ManagedFile>,
    /// Triggers fired by the switch, recorded as pending when it completes.
    pub triggers: Vec<Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// Rename `stage` over `path`; `restored` when the stage is a pre-bell file coming back,
    /// whose backup is removed once the switch is recorded.
    Put {
        path: String,
        stage: String,
        restored: bool,
    },
    Remove {
        path: String,
    },
}

pub fn journal_file(root: &Root) -> PathBuf {
    root.bell_dir().join("journal.json")
}

fn save(root: &Root, journal: &Journal) -> Result<(), String> {
    let text = serde_json::to_string_pretty(journal).unwrap_or_default();
    write_atomic(&journal_file(root), text.as_bytes())
        .map_err(|e| format!("cannot write the journal: {e}"))
}

pub fn load(root: &Root) -> Result<Option<Journal>, String> {
    let path = journal_file(root);
    match crate::rootfs::read_record(&path)? {
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{} is not a bell-run journal: {e}", path.display())),
        None => Ok(None),
    }
}

fn stage_name(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    // Hidden and with a suffix no `*.conf` / `*.list` reader picks up.
    format!("{dir}/.{name}.bell-new")
}

/// What a switch did, for triggers and the report.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Switched {
    pub written: Vec<String>,
    pub restored: Vec<String>,
    pub removed: Vec<String>,
    pub left: Vec<String>,
}

/// Stages, commits and completes the switch of `actions` to `manifest`'s files, whose content
/// is read from the verified bundle copy `bundle`.
pub fn switch(
    root: &Root,
    state: &mut State,
    manifest: &Manifest,
    bundle: &Path,
    actions: &[FileAction],
    fired: Vec<Pending>,
) -> Result<Switched, String> {
    let mut ops = Vec::new();
    let mut backups = Vec::new();
    let mut dirs: Vec<String> = Vec::new();
    let mut done = Switched::default();
    for action in actions {
        match action {
            FileAction::Write { path, backup, .. } => {
                ops.push(Op::Put {
                    path: path.clone(),
                    stage: stage_name(path),
                    restored: false,
                });
                if *backup {
                    backups.push(path.clone());
                }
                missing_dirs(root, path, &mut dirs);
                done.written.push(path.clone());
            }
            FileAction::Restore { path } => {
                ops.push(Op::Put {
                    path: path.clone(),
                    stage: stage_name(path),
                    restored: true,
                });
                missing_dirs(root, path, &mut dirs);
                done.restored.push(path.clone());
            }
            FileAction::Remove { path } => {
                ops.push(Op::Remove { path: path.clone() });
                done.removed.push(path.clone());
            }
            FileAction::Leave { path } => done.left.push(path.clone()),
        }
    }
    let managed = manifest
        .files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                ManagedFile {
                    sha256: f.sha256.clone(),
                },
            )
        })
        .collect();
    let mut journal = Journal {
        committed: false,
        generation: manifest.id(),
        ops,
        backups,
        dirs,
        managed,
        triggers: fired,
    };
    save(root, &journal)?;
    failpoint::hit("staging-journal");

    if let Err(e) = stage(root, &journal, bundle, actions) {
        // Nothing is switched yet: take the stages back so the root stays all old.
        let undone = undo(root, &journal);
        return Err(match undone {
            Ok(()) => e,
            Err(u) => format!("{e}; undoing the staged files also failed: {u}"),
        });
    }
    failpoint::hit("staged");

    journal.committed = true;
    save(root, &journal)?;
    failpoint::hit("committed");
    complete(root, state, &journal)?;
    Ok(done)
}

fn missing_dirs(root: &Root, path: &str, dirs: &mut Vec<String>) {
    let mut chain = Vec::new();
    let mut current = Path::new(path).parent();
    while let Some(dir) = current {
        let host = dir.to_string_lossy().to_string();
        if host == "/" || fs::symlink_metadata(root.host(&host)).is_ok() {
            break;
        }
        chain.push(host);
        current = dir.parent();
    }
    for dir in chain.into_iter().rev() {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
}

fn stage(
    root: &Root,
    journal: &Journal,
    bundle: &Path,
    actions: &[FileAction],
) -> Result<(), String> {
    for dir in &journal.dirs {
        let host = root.host(dir);
        match fs::create_dir(&host) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(format!("cannot create directory `{dir}`: {e}"))
            }
            _ => {}
        }
    }
    for path in &journal.backups {
        make_backup(root, path).map_err(|e| format!("cannot back up `{path}`: {e}"))?;
    }
    // The files written are fsynced together after the last (`rootfs::copy_tree` says why),
    // before the journal's switch moves any into place.
    let mut written = Vec::new();
    let mut first = true;
    for action in actions {
        let (path, result) = match action {
            FileAction::Write {
                path,
                uid,
                gid,
                mode,
                ..
            } => {
                let src = bell_bundle::content_path(bundle, path);
                let staged = root.host(&stage_name(path));
                let result = fs::read(&src).and_then(|bytes| {
                    let file = write_stage(&staged, &bytes, *mode, *uid, *gid, None)?;
                    crate::sys::start_writeback(&file);
                    written.push(staged);
                    Ok(())
                });
                (path, result)
            }
            FileAction::Restore { path } => {
                let result = copy_preserving(
                    &state::backup_path(root, path),
                    &root.host(&stage_name(path)),
                );
                (path, result)
            }
            _ => continue,
        };
        result.map_err(|e| format!("cannot stage `{path}`: {e}"))?;
        if first {
            failpoint::hit("mid-stage");
            first = false;
        }
    }
    crate::rootfs::sync_written(&written).map_err(|e| format!("cannot sync the staged files: {e}"))
}

fn write_stage(
    stage: &Path,
    bytes: &[u8],
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: Option<std::time::SystemTime>,
) -> std::io::Result<fs::File> {
    remove_if_exists(stage)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(stage)?;
    file.write_all(bytes)?;
    // Owner before mode: chown clears set-id bits.
    std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    if let Some(mtime) = mtime {
        file.set_modified(mtime)?;
    }
    Ok(file)
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}

/// Copies a file or symlink with its content, mode, owner and mtime, via a temporary name so
/// that `to` is never half written.
fn copy_preserving(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(from)?;
        remove_if_exists(to)?;
        std::os::unix::fs::symlink(target, to)?;
        lchown(to, Some(meta.uid()), Some(meta.gid()))?;
    } else {
        // A FIFO or device where a managed file goes is not backed up (reading it would wait
        // for a writer, or never end): the apply stops there, before anything moved.
        let bytes = bell_bundle::read_regular(from, u64::MAX).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("{e}: bell-run replaces only files and symlinks"),
            )
        })?;
        write_stage(
            to,
            &bytes,
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid(),
            meta.modified().ok(),
        )?
        .sync_all()?;
    }
    if let Some(dir) = to.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

fn backup_tmp(backup: &Path) -> PathBuf {
    let name = backup.file_name().unwrap_or_default().to_string_lossy();
    backup.with_file_name(format!(".{name}.bell-tmp"))
}

fn make_backup(root: &Root, path: &str) -> std::io::Result<()> {
    let backup = state::backup_path(root, path);
    if let Some(dir) = backup.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = backup_tmp(&backup);
    copy_preserving(&root.host(path), &tmp)?;
    fs::rename(&tmp, &backup)?;
    if let Some(dir) = backup.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Completes a committed switch: every rename and removal, then the record of the new managed
/// set and pending triggers, then the cleanup. Safe to repeat from any point.
fn complete(root: &Root, state: &mut State, journal: &Journal) -> Result<(), String> {
    // Each directory a file was put into is fsynced once, after the last rename and before
    // the record of the switch; also those of renames a run before this one made (after a
    // crash, this repeats the switch), so a recorded switch is on disk whichever run did it.
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut first = true;
    for op in &journal.ops {
        match op {
            Op::Put { path, stage, .. } => {
                let staged = root.host(stage);
                let target = root.host(path);
                if fs::symlink_metadata(&staged).is_ok() {
                    fs::rename(&staged, &target)
                        .map_err(|e| format!("cannot switch `{path}` into place: {e}"))?;
                }
                if let Some(dir) = target.parent().filter(|dir| !dirs.iter().any(|d| d == dir)) {
                    dirs.push(dir.to_path_buf());
                }
            }
            Op::Remove { path } => {
                remove_if_exists(&root.host(path))
                    .map_err(|e| format!("cannot remove `{path}`: {e}"))?;
            }
        }
        if first {
            failpoint::hit("mid-switch");
            first = false;
        }
    }
    for dir in &dirs {
        fsync_dir(dir).map_err(|e| format!("cannot sync `{}`: {e}", dir.display()))?;
    }
    failpoint::hit("switched");
    state.files = journal.managed.clone();
    for trigger in &journal.triggers {
        let owed = state
            .pending_triggers
            .iter_mut()
            .find(|p| p.name == trigger.name && p.generation == trigger.generation);
        match owed {
            Some(owed) => owed.add_paths(trigger.paths.as_deref()),
            None => state.pending_triggers.push(trigger.clone()),
        }
    }
    state::save(root, state)?;
    failpoint::hit("switch-recorded");
    for op in &journal.ops {
        if let Op::Put {
            path,
            restored: true,
            ..
        } = op
        {
            remove_if_exists(&state::backup_path(root, path))
                .map_err(|e| format!("cannot remove the backup of `{path}`: {e}"))?;
        }
    }
    remove_if_exists(&journal_file(root)).map_err(|e| format!("cannot remove the journal: {e}"))
}

/// Takes back a switch that was never committed: stages, the backups it made, the
/// directories it made.
fn undo(root: &Root, journal: &Journal) -> Result<(), String> {
    for op in &journal.ops {
        if let Op::Put { stage, .. } = op {
            remove_if_exists(&root.host(stage))
                .map_err(|e| format!("cannot remove {stage}: {e}"))?;
        }
    }
    for path in &journal.backups {
        let backup = state::backup_path(root, path);
        remove_if_exists(&backup_tmp(&backup))
            .and_then(|()| remove_if_exists(&backup))
            .map_err(|e| format!("cannot remove the backup of `{path}`: {e}"))?;
    }
    for dir in journal.dirs.iter().rev() {
        // Only if still empty: something else may have put files there meanwhile.
        let _ = fs::remove_dir(root.host(dir));
    }
    remove_if_exists(&journal_file(root)).map_err(|e| format!("cannot remove the journal: {e}"))
}

/// Finishes or undoes a switch interrupted by a crash. Returns what it did, if anything.
pub fn recover(root: &Root, state: &mut State) -> Result<Option<String>, String> {
    let Some(journal) = load(root)? else {
        return Ok(None);
    };
    if journal.committed {
        complete(root, state, &journal)?;
        Ok(Some(format!(
            "completed the interrupted switch to generation {}",
            bell_bundle::short_id(&journal.generation)
        )))
    } else {
        undo(root, &journal)?;
        Ok(Some(format!(
            "undid the interrupted switch to generation {}",
            bell_bundle::short_id(&journal.generation)
        )))
    }
}

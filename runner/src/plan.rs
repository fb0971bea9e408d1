//! The plan: what an apply will do, decided before anything is touched. Resources are compared
//! by hash with the recorded generation (created, changed, departed, unchanged, or retried
//! because they did not succeed last time); files are compared with what is on disk, so that a
//! re-apply writes nothing and a drifted file is put back.

use crate::accounts::Accounts;
use crate::rootfs::Root;
use crate::state::{self, State};
use bell_bundle::Manifest;
use bell_store::Status;
use serde::Serialize;
use std::fs;
use std::os::unix::fs::MetadataExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Created,
    Changed,
    /// Same hash, but the last apply did not succeed (failed, or skipped behind a failure).
    Retry,
    /// Same hash, but one of its files had been changed on disk and is being put back.
    Drifted,
    Unchanged,
}

impl Change {
    pub fn symbol(self) -> char {
        match self {
            Change::Created => '+',
            Change::Changed => '~',
            Change::Retry => '!',
            Change::Drifted => '*',
            Change::Unchanged => '=',
        }
    }

    /// The word `--dry-run` prints after the key: the marker table's word, and the JSON's.
    pub fn word(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Changed => "changed",
            Change::Retry => "retry",
            Change::Drifted => "drifted",
            Change::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourcePlan {
    pub key: String,
    pub change: Change,
}

/// A resource of an earlier generation that the new one no longer has: its revert script runs
/// from that generation's copy.
#[derive(Debug, Clone, Serialize)]
pub struct Departed {
    pub key: String,
    pub generation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FileAction {
    /// Write the bundle's content; `backup` when a file bell never wrote is there now.
    Write {
        path: String,
        created: bool,
        backup: bool,
        uid: u32,
        gid: u32,
        mode: u32,
        /// bell wrote it before, and it is no longer what bell wrote (drift put back), as
        /// opposed to a file whose content the new bundle changes.
        drifted: bool,
    },
    /// Put back the file that was there before bell first managed the path.
    Restore { path: String },
    /// Delete a file only bell ever wrote.
    Remove { path: String },
    /// No longer managed, but changed since bell wrote it: left in place, not deleted.
    Leave { path: String },
}

impl FileAction {
    pub fn path(&self) -> &str {
        match self {
            FileAction::Write { path, .. }
            | FileAction::Restore { path }
            | FileAction::Remove { path }
            | FileAction::Leave { path } => path,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub generation: String,
    pub previous: Option<String>,
    pub resources: Vec<ResourcePlan>,
    pub departed: Vec<Departed>,
    pub files: Vec<FileAction>,
    pub unchanged_files: usize,
}

impl Plan {
    pub fn count(&self, change: Change) -> usize {
        self.resources.iter().filter(|r| r.change == change).count()
    }
}

pub fn make(
    root: &Root,
    manifest: &Manifest,
    previous: Option<&Manifest>,
    state: &State,
    accounts: &Accounts,
) -> Result<Plan, String> {
    let mut files = Vec::new();
    let mut unchanged_files = 0;
    for file in &manifest.files {
        let uid = accounts
            .uid(&file.owner)
            .map_err(|e| format!("{e} (file `{}`)", file.path))?;
        let gid = accounts
            .gid(&file.group)
            .map_err(|e| format!("{e} (file `{}`)", file.path))?;
        let mode = bell_bundle::parse_mode(&file.mode).unwrap_or(0o644);
        let target = root.host(&file.path);
        let meta = fs::symlink_metadata(&target).ok();
        let managed = state.files.contains_key(&file.path);
        let same = meta.as_ref().is_some_and(|m| {
            m.file_type().is_file()
                && m.mode() & 0o7777 == mode
                && m.uid() == uid
                && m.gid() == gid
                && bell_bundle::file_sha256(&target).is_ok_and(|sha| sha == file.sha256)
        });
        if same && managed {
            unchanged_files += 1;
            continue;
        }
        // A path bell takes over keeps its earlier file as a backup, even when its content
        // happens to be identical: it is not bell's to delete later.
        let backup = !managed
            && meta.is_some()
            && fs::symlink_metadata(state::backup_path(root, &file.path)).is_err();
        // Drift: the content is not what bell recorded writing, or the bundle's entry is the
        // same as before and the file still needs writing (its mode or owner was changed).
        let drifted = state.files.get(&file.path).is_some_and(|record| {
            let content_kept = meta.as_ref().is_some_and(|m| m.file_type().is_file())
                && bell_bundle::file_sha256(&target).is_ok_and(|sha| sha == record.sha256);
            let entry_kept = previous.and_then(|p| p.file(&file.path)) == Some(file);
            !content_kept || entry_kept
        });
        files.push(FileAction::Write {
            path: file.path.clone(),
            created: meta.is_none(),
            backup,
            uid,
            gid,
            mode,
            drifted,
        });
    }
    for (path, record) in &state.files {
        if manifest.file(path).is_some() {
            continue;
        }
        let target = root.host(path);
        if fs::symlink_metadata(state::backup_path(root, path)).is_ok() {
            files.push(FileAction::Restore { path: path.clone() });
            continue;
        }
        match fs::symlink_metadata(&target) {
            Err(_) => {}
            Ok(m) => {
                let ours = m.file_type().is_file()
                    && bell_bundle::file_sha256(&target).is_ok_and(|sha| sha == record.sha256);
                files.push(if ours {
                    FileAction::Remove { path: path.clone() }
                } else {
                    FileAction::Leave { path: path.clone() }
                });
            }
        }
    }

    let written: Vec<&str> = files
        .iter()
        .filter(|f| matches!(f, FileAction::Write { .. }))
        .map(FileAction::path)
        .collect();
    // A shared file is written whenever any resource's line of it changes: only one that
    // drifted on the host marks the resources with a line in it.
    let drifted: Vec<&str> = files
        .iter()
        .filter(|f| matches!(f, FileAction::Write { drifted: true, .. }))
        .map(FileAction::path)
        .collect();
    let mut resources = Vec::new();
    for resource in &manifest.resources {
        let key = resource.key();
        let change = match state.resources.get(&key) {
            None => Change::Created,
            Some(rec) if rec.hash != resource.hash => Change::Changed,
            Some(rec) if !matches!(rec.result, Status::Ok | Status::Started) => Change::Retry,
            Some(_)
                if resource.files.iter().any(|f| written.contains(&f.as_str()))
                    || resource
                        .lines_in
                        .iter()
                        .any(|f| drifted.contains(&f.as_str())) =>
            {
                Change::Drifted
            }
            Some(_) => Change::Unchanged,
        };
        resources.push(ResourcePlan { key, change });
    }

    // Departed: reverts still owed from earlier runs first, then this generation's leavers,
    // dependents before what they depend on (reverse apply order).
    let mut departed: Vec<Departed> = Vec::new();
    let wanted = |key: &str| manifest.resources.iter().any(|r| r.key() == key);
    for pending in &state.pending_reverts {
        if !wanted(&pending.name) && !departed.iter().any(|d| d.key == pending.name) {
            departed.push(Departed {
                key: pending.name.clone(),
                generation: pending.generation.clone(),
            });
        }
    }
    if let Some(generation) = state.generation.as_ref() {
        // Without the previous bundle copy the recorded keys still name the leavers; their
        // revert then fails clearly instead of being forgotten.
        let keys: Vec<String> = match previous {
            Some(prev) => prev.resources.iter().rev().map(|r| r.key()).collect(),
            None => state.resources.keys().rev().cloned().collect(),
        };
        for key in keys {
            if !wanted(&key) && !departed.iter().any(|d| d.key == key) {
                departed.push(Departed {
                    key,
                    generation: generation.clone(),
                });
            }
        }
    }

    Ok(Plan {
        generation: manifest.id(),
        previous: state.generation.clone(),
        resources,
        departed,
        files,
        unchanged_files,
    })
}

//! What every writer of OUT shares: its error, and taking away what a build no longer names.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error("cannot write {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> EmitError + '_ {
    move |source| EmitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A file, a link or a whole directory, without following a link.
pub(crate) fn remove_any(path: &Path) -> Result<(), EmitError> {
    let meta = fs::symlink_metadata(path).map_err(io_err(path))?;
    if meta.is_dir() {
        fs::remove_dir_all(path).map_err(io_err(path))
    } else {
        fs::remove_file(path).map_err(io_err(path))
    }
}

pub fn remove_if_present(path: &Path) -> Result<(), EmitError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

/// Removes store files no bundle links to any more (link count 1: only the store's own name).
pub(crate) fn prune_store(store: &Path) -> Result<(), EmitError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(shards) = fs::read_dir(store) else {
        return Ok(());
    };
    for shard in shards {
        let shard = shard.map_err(io_err(store))?;
        // A shard that is a symlink is not the store's: its files are not removed.
        if !shard.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let shard = shard.path();
        let Ok(files) = fs::read_dir(&shard) else {
            continue;
        };
        for file in files {
            let path = file.map_err(io_err(&shard))?.path();
            if fs::symlink_metadata(&path)
                .map(|m| m.is_file() && m.nlink() <= 1)
                .unwrap_or(false)
            {
                fs::remove_file(&path).map_err(io_err(&path))?;
            }
        }
    }
    Ok(())
}

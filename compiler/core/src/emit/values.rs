//! `OUT/values/<id>.json`: the values each bundle was rendered from (secrets as `"<secret>"`, or
//! by their keyed digest when sealed),
//! for `bellc diff OLD NEW --values`. A bundle holds files, not values, and the spec that gave
//! them is not in OUT (it may hold secrets in the clear), so a build keeps them beside the
//! bundles. They are for review: no host reads them, and a bundle's id does not cover them.
//!
//! One file per distinct bundle, written with it and removed with it.

use super::files::{io_err, remove_any, remove_if_present, EmitError};
use super::out_dir::{Trust, VALUES_DIR};
use crate::render::values::BundleValues;
use crate::render::RenderedBundle;
use rayon::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

pub fn path(out: &Path, id: &str) -> PathBuf {
    out.join(VALUES_DIR).join(format!("{id}.json"))
}

/// Writes the values of `bundles` OUT lacks (or, under [`Trust::Verify`], holds differently).
/// Returns how many were written.
pub fn write(out: &Path, bundles: &[&RenderedBundle], trust: Trust) -> Result<usize, EmitError> {
    let dir = out.join(VALUES_DIR);
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let written: Vec<Result<bool, EmitError>> = bundles
        .par_iter()
        .map(|bundle| {
            let path = path(out, &bundle.id);
            let present = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
            if present && trust == Trust::Kept {
                return Ok(false);
            }
            let json = bundle.values.to_json();
            if present && fs::read(&path).ok().as_deref() == Some(json.as_bytes()) {
                return Ok(false);
            }
            write_new(&path, json.as_bytes()).map(|()| true)
        })
        .collect();
    let mut count = 0;
    for result in written {
        count += usize::from(result?);
    }
    Ok(count)
}

/// Writes a file created afresh: whatever is under its name (a link planted there) is removed,
/// not written through. Not renamed into place: a build cut short forgets its record, so the
/// next one compares every values file it needs and rewrites one left half-written.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), EmitError> {
    use std::io::Write;
    remove_if_present(path)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err(path))?;
    file.write_all(bytes).map_err(io_err(path))
}

/// Removes the values of bundles OUT no longer holds (and half-written ones).
pub fn prune(out: &Path) -> Result<usize, EmitError> {
    let dir = out.join(VALUES_DIR);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(0);
    };
    let bundles = out.join("bundles");
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(io_err(&dir))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let keep = name
            .strip_suffix(".json")
            .filter(|id| bell_bundle::is_bundle_id(id))
            .is_some_and(|id| bundles.join(id).is_dir());
        if !keep {
            let path = entry.path();
            remove_any(&path)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The values of bundle `id` as OUT holds them.
pub fn read(out: &Path, id: &str) -> Result<BundleValues, String> {
    if !bell_bundle::is_bundle_id(id) {
        return Err(format!("`{id}` is not a bundle id"));
    }
    let path = path(out, id);
    // A values file that is a symlink is not the build's: it is not followed.
    if fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let text = fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {}: {e}; a build by this bellc keeps each bundle's values (build {} again \
             to compare values)",
            path.display(),
            out.display()
        )
    })?;
    let values: BundleValues = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bellc values file: {e}", path.display()))?;
    if values.format != crate::render::values::VALUES_FORMAT {
        return Err(format!(
            "{} is format {}, this bellc reads format {}",
            path.display(),
            values.format,
            crate::render::values::VALUES_FORMAT
        ));
    }
    Ok(values)
}

/// Whether OUT holds the values of `bundle` as this build has them (`build --check`).
pub fn matches(out: &Path, bundle: &RenderedBundle) -> bool {
    let path = path(out, &bundle.id);
    fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
        && fs::read(&path).ok().as_deref() == Some(bundle.values.to_json().as_bytes())
}

//! `bell-run remove`: takes bell off a host or an image root.
//!
//! Bell already knows how to stop managing something: a bundle that no longer has a resource
//! reverts it, and a file it no longer lists is given back its original (or removed, when bell
//! created it). Removing bell is applying a bundle that has nothing, through that same path, and
//! then taking away what is bell's own: its timer and `/var/lib/bell`. Nothing of bell's state
//! goes before every revert succeeded, so a failed removal can be run again.

use crate::apply::{self, Options, Report};
use crate::context::Refusal;
use crate::{state, statedir, timer};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub struct Removal {
    /// The apply of the empty bundle (its plan, on a dry run).
    pub report: Report,
    /// The generation that was applied before.
    pub generation: String,
    /// Accounts bell created: their revert expired and locked them, and they stay (a home may
    /// hold someone's work), named so that whoever removes bell can delete them.
    pub accounts: Vec<String>,
    /// Timer units taken away, as host paths.
    pub units: Vec<String>,
    /// bell's own directory, when it was removed.
    pub state_dir: Option<String>,
}

pub fn remove(opts: &Options) -> Result<Removal, Refusal> {
    let root = statedir::open_root(&opts.root)?;
    let state = state::load(&root).map_err(Refusal::new)?;
    let Some(generation) = state.generation.clone() else {
        return Err(Refusal::new(format!(
            "bell has applied nothing under {}: there is nothing to remove",
            root.dir.display()
        )));
    };
    // The empty bundle keeps the target and the fleet, so that its reports are filed as the
    // host's were: read from the applied manifest alone (the apply of the empty bundle checks
    // the generation it reverts; hashing every file here would only do it twice).
    let manifest = state::generation_dir(&root, &generation).join(bell_bundle::MANIFEST_FILE);
    let (target, fleet) = crate::rootfs::read_record(&manifest)
        .ok()
        .flatten()
        .and_then(|text| bell_bundle::Manifest::from_json(&text).ok())
        .map(|m| (m.target, m.fleet))
        .unwrap_or_else(|| ("unknown".into(), "unknown".into()));
    let empty = bell_bundle::Manifest {
        format: bell_bundle::FORMAT,
        target,
        fleet,
        resources: Vec::new(),
        files: Vec::new(),
        triggers: Vec::new(),
        probes: Vec::new(),
        batches: Vec::new(),
        snapshots: Default::default(),
        reboot: None,
        confirm: None,
        live: Vec::new(),
        provides: Vec::new(),
        providers: Default::default(),
    };
    let dir = EmptyBundle::write(&empty)?;
    if opts.dry_run {
        let report = apply::dry_run(&dir.0, opts)?;
        return Ok(Removal {
            report,
            generation,
            accounts: expired_accounts(&root.bell_dir()),
            units: Vec::new(),
            state_dir: None,
        });
    }
    let paused = timer::pause(&root, !opts.offline);
    let report = match apply::apply(&dir.0, opts) {
        Ok(report) if report.failed.is_empty() => report,
        other => {
            // The host stays bell's: its timer goes on as before.
            if paused {
                timer::resume();
            }
            return other.map(|report| Removal {
                report,
                generation,
                accounts: Vec::new(),
                units: Vec::new(),
                state_dir: None,
            });
        }
    };
    let mut removal = Removal {
        report,
        generation,
        accounts: expired_accounts(&root.bell_dir()),
        units: Vec::new(),
        state_dir: None,
    };
    removal.units =
        timer::uninstall(&root, !opts.offline).map_err(|e| Refusal::new(e).partial())?;
    let bell = root.bell_dir();
    // `open_root` checked that nothing in it is a link, and `remove_dir_all` follows none.
    fs::remove_dir_all(&bell).map_err(|e| {
        Refusal::new(format!("cannot remove {}: {e}", bell.display()))
            .help("every resource was reverted; remove the directory by hand")
            .partial()
    })?;
    removal.state_dir = Some(bell.display().to_string());
    Ok(removal)
}

/// The accounts in bell's ledger of accounts it created and then expired.
fn expired_accounts(bell: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(bell.join("accounts/expired"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|name| !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A bundle of nothing in a private directory of its own, removed when dropped.
struct EmptyBundle(PathBuf);

impl EmptyBundle {
    fn write(manifest: &bell_bundle::Manifest) -> Result<EmptyBundle, Refusal> {
        let dir = std::env::temp_dir().join(format!(
            "bell-run-remove-{}-{}",
            std::process::id(),
            state::now()
        ));
        let cannot = |e: std::io::Error| {
            Refusal::new(format!(
                "cannot write an empty bundle in {}: {e}",
                dir.display()
            ))
        };
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(cannot)?;
        let bundle = EmptyBundle(dir.clone());
        crate::rootfs::create_new(&dir.join(bell_bundle::MANIFEST_FILE), 0o600)
            .and_then(|mut f| std::io::Write::write_all(&mut f, manifest.to_json().as_bytes()))
            .map_err(cannot)?;
        Ok(bundle)
    }
}

impl Drop for EmptyBundle {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

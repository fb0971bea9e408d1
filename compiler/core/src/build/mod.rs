//! One build of a spec into OUT, the way `bellc build` runs it: the incremental check against
//! the last build's record, the front end, rendering (streamed into OUT, or whole in memory to
//! compare with an old build first), the secrets sealed beside the bundles, the release signed
//! and the inputs recorded for the next build. Or `--check`: the same pipeline compared with
//! OUT, nothing written.
//!
//! A [`Build`] is the session: its inputs are fields, [`Build::run`] the pipeline, and what it
//! did comes back as a [`Built`] for the caller to show. It never prints or exits; OUT is left
//! as it was whenever a build fails (the writer's `abandon`).

use crate::diagnostic::Diagnostics;
use crate::emit::incremental::{self, Found};
use crate::emit::secrets::SealedContents;
use crate::emit::signing::{self, Signed, SigningKey};
use crate::emit::{self, BundleWriter, Trust, WriteStats};
use crate::render::{Chunk, RenderCache, RenderedBundle};
use crate::review::diff::{DirSide, MemorySide, ReleaseDiff};
use crate::review::value_diff::{self, Locator, ValueDiff};
use crate::source::Sources;
use bell_seal::SealKey;
use pipeline::{Frontend, Streamed};

pub mod pipeline;
pub use pipeline::Checks;
use std::path::{Path, PathBuf};

/// What a build does with OUT.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// Writes OUT (or keeps it, when nothing changed).
    Write,
    /// Compares OUT with a fresh build in memory; writes nothing.
    Check,
    /// Compares the whole build with the build output `old` (file by file, or value by value),
    /// then writes OUT.
    Diff { old: &'a Path, values: bool },
}

/// The key that signs the release, with what the signature says.
pub struct Signer<'a> {
    pub key: &'a SigningKey,
    /// Seconds of validity from now, when the release is to expire.
    pub expires_in: Option<u64>,
    /// Now, in unix milliseconds: the signature's sequence is no smaller.
    pub now_ms: u64,
}

/// One build.
pub struct Build<'a> {
    pub spec: &'a Path,
    pub out: &'a Path,
    pub checks: Checks,
    pub mode: Mode<'a>,
    /// Renders and writes every bundle again, trusting nothing OUT holds.
    pub force: bool,
    /// The key that names and seals secrets.
    pub seal: SealKey,
    pub sign: Option<Signer<'a>>,
    /// Called once the build sealed something with a seal key made for it, before a sealed
    /// file is written: a key lost after its ciphertext landed would leave the hosts' secrets
    /// unreadable by every later build.
    pub keep_new_seal_key: Option<&'a mut dyn FnMut() -> Result<(), String>>,
    /// Called at the end of each phase (`parse`, `resolve`, `render`, `write`), for timings.
    pub phase: &'a mut dyn FnMut(&'static str),
}

/// What a build did.
pub enum Built {
    /// Inputs unchanged since the last build: OUT kept as it was (its warnings said again
    /// into the diagnostics); signed anew when a key was given.
    Unchanged { signed: Option<Signed> },
    /// The spec has errors, or a host failed to render: the diagnostics say which; nothing
    /// was written.
    Failed,
    /// `--check`: the hosts whose bundles OUT does not hold as a fresh build makes them.
    Checked {
        hosts: usize,
        differing: Vec<String>,
    },
    /// OUT written.
    Written(Box<Written>),
}

/// A build written into OUT.
pub struct Written {
    pub built: Streamed,
    pub stats: WriteStats,
    pub signed: Option<Signed>,
    /// With [`Mode::Diff`]: what changed from the old build output.
    pub changes: Option<Changes>,
    /// Groups of hosts whose bundles the last build rendered from the same inputs.
    pub groups_unrendered: usize,
    /// Bundle parts reused from the memo instead of rendered.
    pub parts_reused: usize,
}

/// A diff against an old build output.
pub enum Changes {
    Files(ReleaseDiff),
    Values(ValueDiff),
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A build without the key into an OUT that holds signed releases: an unsigned
    /// release.json over a signed one would make every host that trusts the key refuse every
    /// pull. Nothing was changed.
    #[error("{} holds signed releases: a build into it must be signed as well", .out.display())]
    UnsignedOverSigned { spec: PathBuf, out: PathBuf },
    /// OUT cannot be read or written, or a key could not sign.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for BuildError {
    fn from(message: String) -> BuildError {
        BuildError::Failed(message)
    }
}

fn recording(out: &Path) -> impl Fn(std::io::Error) -> BuildError + '_ {
    move |e| {
        BuildError::Failed(format!(
            "cannot record the build's inputs in {}: {e}",
            out.display()
        ))
    }
}

impl Build<'_> {
    /// Runs the build.
    pub fn run(
        mut self,
        sources: &mut Sources,
        diags: &mut Diagnostics,
    ) -> Result<Built, BuildError> {
        let (spec, out) = (self.spec, self.out);
        let checking = matches!(self.mode, Mode::Check);
        let diffing = matches!(self.mode, Mode::Diff { .. });
        if !checking {
            emit::out_dir::check_writable(out)?;
        }
        let found = incremental::found(
            spec,
            out,
            self.checks.allow_unknown_sysctl,
            self.checks.deny_warnings,
            &self.seal,
        );
        if !checking && !self.force && !diffing && found == Found::Current {
            return self.keep_unchanged(sources, diags);
        }
        // (Unchanged inputs make the same release, whose signature the build keeps.)
        if !checking
            && self.sign.is_none()
            && found != Found::Current
            && signing::releases_are_signed(out)
        {
            return Err(BuildError::UnsignedOverSigned {
                spec: spec.to_path_buf(),
                out: out.to_path_buf(),
            });
        }
        let Some(mut spec_tree) = crate::front::lower::load(spec, sources, diags) else {
            return Ok(Built::Failed);
        };
        spec_tree.allow_unknown_sysctl = self.checks.allow_unknown_sysctl;
        (self.phase)("parse");
        let front = pipeline::analyse(spec_tree, sources, diags);
        (self.phase)("resolve");
        if diags.has_errors() {
            pipeline::template_errors(front, sources, diags);
            return Ok(Built::Failed);
        }
        let sealing = front.spec.fleet.secrets_plaintext.is_none();
        let seal_with = sealing.then(|| self.seal.clone());
        if checking {
            return check_out(out, front, sources, diags, seal_with);
        }
        // The old side is read before the write, which may replace it (OLD = OUT).
        let old = match self.mode {
            Mode::Diff { old, values } => Some((DirSide::open(old)?, values)),
            _ => None,
        };
        // A forced build trusts nothing it finds in OUT.
        let trust = if found == Found::Unknown || self.force {
            Trust::Verify
        } else {
            Trust::Kept
        };
        let mut writer = BundleWriter::open(out, trust).map_err(|e| e.to_string())?;
        let mut cache = RenderCache {
            seal: seal_with.clone(),
            ..Default::default()
        };
        let mut sealed = SealedContents::new();
        let (changes, mut built, writer) = match &old {
            // A diff compares the whole new build with OLD before anything is written.
            Some((old, values)) => {
                let rendered = render_for_diff(
                    out,
                    old,
                    *values,
                    front,
                    sources,
                    diags,
                    &seal_with,
                    &mut writer,
                    &mut sealed,
                )?;
                let Some((changes, built)) = rendered else {
                    return Ok(Built::Failed);
                };
                (Some(changes), built, writer)
            }
            // Otherwise bundles are written as they are rendered, and dropped.
            None => {
                // What the last build rendered, unless OUT may have changed since.
                if trust == Trust::Kept {
                    cache.known = incremental::load_render_cache(out);
                }
                let rendered =
                    render_streamed(out, front, sources, diags, &mut cache, writer, &mut sealed)?;
                let Some((built, writer)) = rendered else {
                    return Ok(Built::Failed);
                };
                (None, built, writer)
            }
        };
        (self.phase)("render");
        incremental::forget(out);
        if let Some(key) = &seal_with {
            if let (Some(keep), false) = (self.keep_new_seal_key.as_mut(), sealed.is_empty()) {
                keep()?;
            }
            emit::secrets::write(out, &mut built.release, &sealed, key, trust == Trust::Kept)
                .map_err(|e| e.to_string())?;
        }
        let sealed_with = seal_with.as_ref().filter(|_| !sealed.is_empty());
        let (stats, signed) =
            self.finish_out(writer, &built, &cache, sources, diags, sealed_with)?;
        (self.phase)("write");
        Ok(Built::Written(Box::new(Written {
            built,
            stats,
            signed,
            changes,
            groups_unrendered: cache.hits,
            parts_reused: cache.parts_reused,
        })))
    }

    /// Inputs unchanged since the last build: OUT is kept as it is, its warnings said again,
    /// and with a signing key its release signed anew (a new expiry).
    fn keep_unchanged(
        self,
        sources: &mut Sources,
        diags: &mut Diagnostics,
    ) -> Result<Built, BuildError> {
        diags.append(incremental::kept_warnings(self.spec, self.out, sources));
        let signed = match &self.sign {
            Some(signer) => {
                let signed = sign(self.out, signer)?;
                incremental::refresh(self.out).map_err(recording(self.out))?;
                Some(signed)
            }
            None => None,
        };
        Ok(Built::Unchanged { signed })
    }

    /// The bundles no host names any more removed, the release signed, and the build's inputs
    /// recorded for the next build to compare with.
    fn finish_out(
        &self,
        writer: BundleWriter,
        built: &Streamed,
        cache: &RenderCache,
        sources: &Sources,
        diags: &mut Diagnostics,
        sealed_with: Option<&SealKey>,
    ) -> Result<(WriteStats, Option<Signed>), BuildError> {
        let out = self.out;
        let stats = writer
            .finish(|id| built.bundle_ids.contains(id), &built.release)
            .map_err(|e| e.to_string())?;
        let signed = self.sign.as_ref().map(|s| sign(out, s)).transpose()?;
        incremental::save_render_cache(out, &cache.now).map_err(recording(out))?;
        incremental::record(
            self.spec,
            &built.spec,
            sources,
            out,
            &built.release,
            sealed_with,
            diags,
        )
        .map_err(recording(out))?;
        Ok((stats, signed))
    }
}

fn sign(out: &Path, signer: &Signer) -> Result<Signed, BuildError> {
    signing::sign_release(out, signer.key, signer.expires_in, signer.now_ms)
        .map_err(|e| BuildError::Failed(e.to_string()))
}

/// What a host's bundle sealed, kept to write beside the bundles.
fn keep_sealed(sealed: &mut SealedContents, bundle: &RenderedBundle) {
    if !bundle.sealed.is_empty() {
        sealed.insert(bundle.id.clone(), bundle.sealed.clone());
    }
}

/// `--check`: OUT against a fresh build in memory, nothing written.
fn check_out(
    out: &Path,
    front: Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal_with: Option<SealKey>,
) -> Result<Built, BuildError> {
    let Some(mut compiled) =
        pipeline::compile_frontend_sealed(front, sources, diags, seal_with.clone())
    else {
        return Ok(Built::Failed);
    };
    let mut sealed = SealedContents::new();
    for bundle in compiled.bundles.values() {
        keep_sealed(&mut sealed, bundle);
    }
    let mut differing = match &seal_with {
        Some(key) => emit::secrets::check(out, &mut compiled.release, &sealed, key)
            .map_err(|e| e.to_string())?,
        None => Default::default(),
    };
    differing.extend(emit::check(out, &compiled.bundles, &compiled.release));
    Ok(Built::Checked {
        hosts: compiled.release.hosts.len(),
        differing: differing.into_iter().collect(),
    })
}

/// `--diff OLD`: the whole build in memory, compared with OLD, then written; `None` when a
/// host failed (nothing written).
#[allow(clippy::too_many_arguments)]
fn render_for_diff(
    out: &Path,
    old: &DirSide,
    values: bool,
    front: Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal_with: &Option<SealKey>,
    writer: &mut BundleWriter,
    sealed: &mut SealedContents,
) -> Result<Option<(Changes, Streamed)>, BuildError> {
    let Some(compiled) =
        pipeline::compile_frontend_sealed(front, sources, diags, seal_with.clone())
    else {
        return Ok(None);
    };
    for bundle in compiled.bundles.values() {
        keep_sealed(sealed, bundle);
    }
    let new = MemorySide {
        release: &compiled.release,
        bundles: &compiled.bundles,
    };
    let changes = if values {
        let locator = Locator::new(&compiled.spec, &compiled.resolution, sources);
        Changes::Values(value_diff::diff(old, &new, Some(locator))?)
    } else {
        Changes::Files(crate::review::diff::diff(old, &new)?)
    };
    incremental::forget(out);
    writer
        .write(compiled.bundles.values())
        .map_err(|e| e.to_string())?;
    let built = Streamed {
        bundle_ids: compiled.bundles.keys().cloned().collect(),
        spec: compiled.spec,
        resolution: compiled.resolution,
        release: compiled.release,
        layers: compiled.layers,
    };
    Ok(Some((changes, built)))
}

/// Bundles written as they are rendered, and dropped; `None` when a host failed, with OUT
/// back as it was.
fn render_streamed(
    out: &Path,
    front: Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    cache: &mut RenderCache,
    mut writer: BundleWriter,
    sealed: &mut SealedContents,
) -> Result<Option<(Streamed, BundleWriter)>, BuildError> {
    let mut forgotten = false;
    let mut sink = |chunk: Chunk| {
        if !forgotten {
            incremental::forget(out);
            forgotten = true;
        }
        for bundle in &chunk.bundles {
            keep_sealed(sealed, bundle);
        }
        writer.write(&chunk.bundles)?;
        writer.link_new(chunk.hosts)
    };
    match pipeline::compile_streamed(front, sources, diags, cache, &mut sink) {
        Ok(Some(built)) => Ok(Some((built, writer))),
        Ok(None) => {
            // A host failed: OUT goes back to what it was.
            writer.abandon().map_err(|e| e.to_string())?;
            Ok(None)
        }
        Err(e) => {
            let _ = writer.abandon();
            Err(BuildError::Failed(e.to_string()))
        }
    }
}

//! `bellc build`: the whole pipeline into OUT, or a skip when nothing changed since the last
//! build (`bellc_core::emit::incremental`), a comparison (`--check`) or a diff (`--diff`).

use crate::args::{BuildArgs, Cli};
use crate::keys::{keep_own_seal_key, load_seal_key, load_sign_key, own_seal_key, sign_out};
use crate::{peak_rss_kib, read_check, review, Failure};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::emit::incremental::Found;
use bellc_core::source::Sources;

pub fn build(
    cli: &Cli,
    args: &BuildArgs,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    let BuildArgs {
        spec,
        out,
        check,
        timings,
        force,
        diff,
        values: _,
        seal_key,
        signing,
    } = args;
    read_check(spec)?;
    if !*check {
        bellc_core::emit::out_dir::check_writable(out)?;
    }
    // A key that cannot sign stops the build before anything is written.
    let sign_key = load_sign_key(signing)?;
    let (seal_key, new_seal_key) = seal_key_for(seal_key.as_deref(), sign_key.as_ref())?;
    let clock = std::time::Instant::now();
    let found = bellc_core::emit::incremental::found(
        spec,
        out,
        cli.allow_unknown_sysctl,
        cli.deny_warnings,
        &seal_key,
    );
    if !*check && !*force && diff.is_none() && found == Found::Current {
        if *timings {
            eprintln!(
                "timings: {}",
                serde_json::json!({"total_s": clock.elapsed().as_secs_f64(), "skipped": true, "peak_rss_kib": peak_rss_kib()})
            );
        }
        return keep_unchanged(args, sign_key.as_ref(), sources, diags);
    }
    // (Unchanged inputs make the same release, whose signature the build keeps.)
    if !*check && sign_key.is_none() && found != Found::Current {
        refuse_unsigned_over_signed(spec, out)?;
    }
    // Each phase's time, and the peak memory by its end (what a phase holds shows as
    // the growth over the one before).
    let mut phases: Vec<(&str, f64, u64)> = Vec::new();
    let lap = |name: &'static str, phases: &mut Vec<(&str, f64, u64)>| {
        let total: f64 = phases.iter().map(|(_, t, _)| t).sum();
        phases.push((name, clock.elapsed().as_secs_f64() - total, peak_rss_kib()));
    };
    let Some(mut spec_tree) = bellc_core::front::lower::load(spec, sources, diags) else {
        return Ok(1);
    };
    spec_tree.allow_unknown_sysctl = cli.allow_unknown_sysctl;
    lap("parse", &mut phases);
    let front = bellc_core::analyse(spec_tree, sources, diags);
    lap("resolve", &mut phases);
    if diags.has_errors() {
        bellc_core::template_errors(front, sources, diags);
        return Ok(1);
    }
    let sealing = front.spec.fleet.secrets_plaintext.is_none();
    let seal_with = Some(&seal_key).filter(|_| sealing);
    let mut sealed = bellc_core::emit::secrets::SealedContents::new();
    if *check {
        return check_out(args, front, sources, diags, seal_with);
    }
    // The old side is read before the write, which may replace it (OLD = OUT).
    let old = match diff {
        Some(old) => Some(bellc_core::review::diff::DirSide::open(old)?),
        None => None,
    };
    // A forced build trusts nothing it finds in OUT.
    let trust = if found == Found::Unknown || *force {
        bellc_core::emit::Trust::Verify
    } else {
        bellc_core::emit::Trust::Kept
    };
    let mut writer = bellc_core::emit::BundleWriter::open(out, trust).map_err(|e| e.to_string())?;
    let mut cache = bellc_core::render::RenderCache {
        seal: seal_with.cloned(),
        ..Default::default()
    };
    let (changes, built, writer) = match &old {
        // A diff compares the whole new build with OLD before anything is written.
        Some(old) => {
            let Some((changes, built)) = render_for_diff(
                args,
                old,
                front,
                sources,
                diags,
                seal_with,
                &mut writer,
                &mut sealed,
            )?
            else {
                return Ok(1);
            };
            (Some(changes), built, writer)
        }
        // Otherwise bundles are written as they are rendered, and dropped.
        None => {
            // What the last build rendered, unless OUT may have changed since.
            if trust == bellc_core::emit::Trust::Kept {
                cache.known = bellc_core::emit::incremental::load_render_cache(out);
            }
            let Some((built, writer)) =
                render_streamed(out, front, sources, diags, &mut cache, writer, &mut sealed)?
            else {
                return Ok(1);
            };
            (None, built, writer)
        }
    };
    lap("render", &mut phases);
    bellc_core::emit::incremental::forget(out);
    let mut built = built;
    if let Some(key) = seal_with {
        if let (Some(material), false) = (&new_seal_key, sealed.is_empty()) {
            keep_own_seal_key(material)?;
        }
        let kept = trust == bellc_core::emit::Trust::Kept;
        bellc_core::emit::secrets::write(out, &mut built.release, &sealed, key, kept)
            .map_err(|e| e.to_string())?;
    }
    let stats = finish_out(
        args,
        writer,
        &built,
        &cache,
        sign_key.as_ref(),
        sources,
        diags,
        seal_with.filter(|_| !sealed.is_empty()),
    )?;
    lap("write", &mut phases);
    if *timings {
        print_timings(&phases, clock, &built, &cache, &stats);
    }
    report_built(out, &built, &stats);
    match changes {
        Some(changes) => Ok(changes.show(false)?),
        None => Ok(0),
    }
}

/// Inputs unchanged since the last build: OUT is kept as it is, its warnings said again, and
/// with a signing key its release signed anew (a new expiry).
fn keep_unchanged(
    args: &BuildArgs,
    sign_key: Option<&bell_ops::fleet::signing::SigningKey>,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    let out = &args.out;
    diags.append(bellc_core::emit::incremental::kept_warnings(
        &args.spec, out, sources,
    ));
    eprintln!(
        "{}: up to date (inputs unchanged since the last build)",
        out.display()
    );
    if let Some(key) = sign_key {
        sign_out(out, key, args.signing.expires)?;
        bellc_core::emit::incremental::refresh(out)
            .map_err(|e| format!("cannot record the build's inputs in {}: {e}", out.display()))?;
    }
    Ok(0)
}

/// `--check`: OUT against a fresh build in memory, nothing written; 1 when a host differs.
fn check_out(
    args: &BuildArgs,
    front: bellc_core::Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal_with: Option<&bell_seal::SealKey>,
) -> Result<u8, Failure> {
    let (spec, out) = (&args.spec, &args.out);
    let mut sealed = bellc_core::emit::secrets::SealedContents::new();
    let Some(mut compiled) =
        bellc_core::compile_frontend_sealed(front, sources, diags, seal_with.cloned())
    else {
        return Ok(1);
    };
    for bundle in compiled.bundles.values() {
        if !bundle.sealed.is_empty() {
            sealed.insert(bundle.id.clone(), bundle.sealed.clone());
        }
    }
    let mut differing = match seal_with {
        Some(key) => bellc_core::emit::secrets::check(out, &mut compiled.release, &sealed, key)
            .map_err(|e| e.to_string())?,
        None => Default::default(),
    };
    differing.extend(bellc_core::emit::check(
        out,
        &compiled.bundles,
        &compiled.release,
    ));
    if differing.is_empty() {
        eprintln!(
            "{}: up to date ({} hosts)",
            out.display(),
            compiled.release.hosts.len()
        );
        return Ok(0);
    }
    eprintln!(
        "{} differs from a fresh build of {} for {} host(s):",
        out.display(),
        spec.display(),
        differing.len()
    );
    for host in differing {
        eprintln!("  {host}");
    }
    eprintln!(
        "run `bellc build {} -o {}` and commit the result",
        spec.display(),
        out.display()
    );
    Ok(1)
}

/// `--timings`: each phase's time and the peak memory by its end, and what the build wrote.
fn print_timings(
    phases: &[(&str, f64, u64)],
    clock: std::time::Instant,
    built: &bellc_core::Streamed,
    cache: &bellc_core::render::RenderCache,
    stats: &bellc_core::emit::WriteStats,
) {
    let mut line = serde_json::Map::new();
    for (name, secs, rss) in phases {
        line.insert(format!("{name}_s"), serde_json::json!(secs));
        line.insert(format!("{name}_peak_rss_kib"), serde_json::json!(rss));
    }
    line.insert(
        "total_s".into(),
        serde_json::json!(clock.elapsed().as_secs_f64()),
    );
    line.insert("hosts".into(), serde_json::json!(built.release.hosts.len()));
    line.insert("bundles".into(), serde_json::json!(built.bundle_ids.len()));
    line.insert("groups_unrendered".into(), serde_json::json!(cache.hits));
    line.insert("parts_reused".into(), serde_json::json!(cache.parts_reused));
    line.insert(
        "bundles_written".into(),
        serde_json::json!(stats.bundles_written),
    );
    line.insert(
        "files_written".into(),
        serde_json::json!(stats.files_written),
    );
    line.insert(
        "links_written".into(),
        serde_json::json!(stats.links_written),
    );
    line.insert(
        "links_removed".into(),
        serde_json::json!(stats.links_removed),
    );
    line.insert(
        "release_written".into(),
        serde_json::json!(stats.release_written),
    );
    line.insert("peak_rss_kib".into(), serde_json::json!(peak_rss_kib()));
    eprintln!("timings: {}", serde_json::Value::Object(line));
}

/// What a host's bundle sealed, kept to write beside the bundles.
fn keep_sealed(
    sealed: &mut bellc_core::emit::secrets::SealedContents,
    bundle: &bellc_core::render::RenderedBundle,
) {
    if !bundle.sealed.is_empty() {
        sealed.insert(bundle.id.clone(), bundle.sealed.clone());
    }
}

/// `--diff OLD`: the whole build in memory, compared with OLD, then written; `None` when a
/// host failed (nothing written).
#[allow(clippy::too_many_arguments)]
fn render_for_diff(
    args: &BuildArgs,
    old: &bellc_core::review::diff::DirSide,
    front: bellc_core::Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    seal_with: Option<&bell_seal::SealKey>,
    writer: &mut bellc_core::emit::BundleWriter,
    sealed: &mut bellc_core::emit::secrets::SealedContents,
) -> Result<Option<(review::Changes, bellc_core::Streamed)>, Failure> {
    let Some(compiled) =
        bellc_core::compile_frontend_sealed(front, sources, diags, seal_with.cloned())
    else {
        return Ok(None);
    };
    for bundle in compiled.bundles.values() {
        keep_sealed(sealed, bundle);
    }
    let new = bellc_core::review::diff::MemorySide {
        release: &compiled.release,
        bundles: &compiled.bundles,
    };
    let changes = if args.values {
        let locator = bellc_core::review::value_diff::Locator::new(
            &compiled.spec,
            &compiled.resolution,
            sources,
        );
        review::Changes::Values(bellc_core::review::value_diff::diff(
            old,
            &new,
            Some(locator),
        )?)
    } else {
        review::Changes::Files(bellc_core::review::diff::diff(old, &new)?)
    };
    bellc_core::emit::incremental::forget(&args.out);
    writer
        .write(compiled.bundles.values())
        .map_err(|e| e.to_string())?;
    let built = bellc_core::Streamed {
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
    out: &std::path::Path,
    front: bellc_core::Frontend,
    sources: &mut Sources,
    diags: &mut Diagnostics,
    cache: &mut bellc_core::render::RenderCache,
    mut writer: bellc_core::emit::BundleWriter,
    sealed: &mut bellc_core::emit::secrets::SealedContents,
) -> Result<Option<(bellc_core::Streamed, bellc_core::emit::BundleWriter)>, Failure> {
    let mut forgotten = false;
    let mut sink = |chunk: bellc_core::render::Chunk| {
        if !forgotten {
            bellc_core::emit::incremental::forget(out);
            forgotten = true;
        }
        for bundle in &chunk.bundles {
            keep_sealed(sealed, bundle);
        }
        writer.write(&chunk.bundles)?;
        writer.link_new(chunk.hosts)
    };
    match bellc_core::compile_streamed(front, sources, diags, cache, &mut sink) {
        Ok(Some(built)) => Ok(Some((built, writer))),
        Ok(None) => {
            // A host failed: OUT goes back to what it was.
            writer.abandon().map_err(|e| e.to_string())?;
            Ok(None)
        }
        Err(e) => {
            let _ = writer.abandon();
            Err(e.to_string().into())
        }
    }
}

/// The bundles no host names any more removed, the release signed, and the build's inputs
/// recorded for the next build to compare with.
#[allow(clippy::too_many_arguments)]
fn finish_out(
    args: &BuildArgs,
    writer: bellc_core::emit::BundleWriter,
    built: &bellc_core::Streamed,
    cache: &bellc_core::render::RenderCache,
    sign_key: Option<&bell_ops::fleet::signing::SigningKey>,
    sources: &Sources,
    diags: &mut Diagnostics,
    sealed_with: Option<&bell_seal::SealKey>,
) -> Result<bellc_core::emit::WriteStats, Failure> {
    let (spec, out, signing) = (&args.spec, &args.out, &args.signing);
    let stats = writer
        .finish(|id| built.bundle_ids.contains(id), &built.release)
        .map_err(|e| e.to_string())?;
    if let Some(key) = sign_key {
        sign_out(out, key, signing.expires)?;
    }
    bellc_core::emit::incremental::save_render_cache(out, &cache.now)
        .map_err(|e| format!("cannot record the build's inputs in {}: {e}", out.display()))?;
    bellc_core::emit::incremental::record(
        spec,
        &built.spec,
        sources,
        out,
        &built.release,
        sealed_with,
        diags,
    )
    .map_err(|e| format!("cannot record the build's inputs in {}: {e}", out.display()))?;
    if stats.bundles_repaired > 0 {
        eprintln!(
                    "{}: {} bundle(s) differed from their id (changed since they were written) and were written again",
                    out.display(),
                    stats.bundles_repaired
                );
    }
    Ok(stats)
}

/// What the build made, and what it implied that the spec does not name (said once per
/// build, so that it is still seen).
fn report_built(
    out: &std::path::Path,
    built: &bellc_core::Streamed,
    stats: &bellc_core::emit::WriteStats,
) {
    eprintln!(
        "built {} hosts into {} bundles in {} ({} bundles written, {} unchanged, {} removed)",
        built.release.hosts.len(),
        built.bundle_ids.len(),
        out.display(),
        stats.bundles_written,
        stats.bundles_kept,
        stats.bundles_removed
    );
    for (implied, hosts) in bellc_core::kinds::implied_in_fleet(&built.resolution.hosts) {
        eprintln!(
            "implied: {} on {hosts} host{}: {}",
            implied.key,
            if hosts == 1 { "" } else { "s" },
            implied.why
        );
    }
}

/// The key that names and seals secrets: given, derived from the signing key, or bellc's own
/// (with its bytes when it is new, to keep once it sealed something).
fn seal_key_for(
    given: Option<&std::path::Path>,
    sign_key: Option<&bell_ops::fleet::signing::SigningKey>,
) -> Result<(bell_seal::SealKey, Option<[u8; 32]>), Failure> {
    Ok(match (given, sign_key) {
        (Some(path), _) => (load_seal_key(path)?, None),
        (None, Some(sign_key)) => (sign_key.seal_key(), None),
        (None, None) => own_seal_key()?,
    })
}

/// An unsigned build into an OUT that holds signed releases: an unsigned release.json over a
/// signed one (and its kept copy unsigned) would make every host that trusts the key refuse
/// every pull.
fn refuse_unsigned_over_signed(
    spec: &std::path::Path,
    out: &std::path::Path,
) -> Result<(), Failure> {
    if !bell_ops::fleet::out_is_signed(out, None) {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "{} holds signed releases: a build into it must be signed as well; give \
         `--sign-key KEY` (nothing was changed)\n  help: bellc build {} -o {} \
         --sign-key KEY",
        out.display(),
        spec.display(),
        out.display()
    )))
}

//! `bellc build`: the front end of [`bellc_core::build::Build`], the session that runs the
//! pipeline into OUT (or keeps OUT when nothing changed since the last build, compares it with
//! `--check`, or diffs against an old build with `--diff`). Here: the keys, the terminal and
//! the exit code.

use crate::args::{BuildArgs, Cli};
use crate::keys::{keep_own_seal_key, load_seal_key, load_sign_key, own_seal_key, said_signed};
use crate::{peak_rss_kib, read_check, review, Failure};
use bellc_core::build::{Build, BuildError, Built, Changes, Mode, Signer, Written};
use bellc_core::diagnostic::Diagnostics;
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
        values,
        seal_key,
        signing,
    } = args;
    read_check(spec)?;
    // A key that cannot sign stops the build before anything is written.
    let sign_key = load_sign_key(signing)?;
    let (seal, new_seal_key) = seal_key_for(seal_key.as_deref(), sign_key.as_ref())?;
    let clock = std::time::Instant::now();
    // Each phase's time, and the peak memory by its end (what a phase holds shows as the
    // growth over the one before).
    let mut phases: Vec<(&str, f64, u64)> = Vec::new();
    let mut lap = |name: &'static str| {
        let total: f64 = phases.iter().map(|(_, t, _)| t).sum();
        phases.push((name, clock.elapsed().as_secs_f64() - total, peak_rss_kib()));
    };
    let mut keep_key = || match &new_seal_key {
        Some(material) => keep_own_seal_key(material).map_err(|e| match e {
            Failure::Usage(m) | Failure::Io(m) => m,
        }),
        None => Ok(()),
    };
    let session = Build {
        spec,
        out,
        checks: crate::checks(cli),
        mode: match (check, diff) {
            (true, _) => Mode::Check,
            (false, Some(old)) => Mode::Diff {
                old,
                values: *values,
            },
            (false, None) => Mode::Write,
        },
        force: *force,
        seal,
        sign: sign_key.as_ref().map(|key| Signer {
            key,
            expires_in: signing.expires,
            now_ms: now_ms(),
        }),
        keep_new_seal_key: Some(&mut keep_key),
        phase: &mut lap,
    };
    let built = session.run(sources, diags).map_err(|e| match e {
        BuildError::UnsignedOverSigned { ref spec, ref out } => Failure::Usage(format!(
            "{e}; give `--sign-key KEY` (nothing was changed)\n  help: bellc build {} -o {} \
             --sign-key KEY",
            spec.display(),
            out.display()
        )),
        BuildError::Failed(message) => Failure::Io(message),
    })?;
    match built {
        Built::Failed => Ok(1),
        Built::Unchanged { signed } => {
            if *timings {
                eprintln!(
                    "timings: {}",
                    serde_json::json!({"total_s": clock.elapsed().as_secs_f64(), "skipped": true, "peak_rss_kib": peak_rss_kib()})
                );
            }
            eprintln!(
                "{}: up to date (inputs unchanged since the last build)",
                out.display()
            );
            if let (Some(signed), Some(key)) = (signed, &sign_key) {
                said_signed(&signed, key);
            }
            Ok(0)
        }
        Built::Checked { hosts, differing } => {
            if differing.is_empty() {
                eprintln!("{}: up to date ({hosts} hosts)", out.display());
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
        Built::Written(written) => {
            let Written {
                built,
                stats,
                signed,
                changes,
                groups_unrendered,
                parts_reused,
            } = *written;
            if let (Some(signed), Some(key)) = (&signed, &sign_key) {
                said_signed(signed, key);
            }
            if stats.bundles_repaired > 0 {
                eprintln!(
                    "{}: {} bundle(s) differed from their id (changed since they were written) and were written again",
                    out.display(),
                    stats.bundles_repaired
                );
            }
            if *timings {
                let reused = (groups_unrendered, parts_reused);
                print_timings(&phases, clock, &built, reused, &stats);
            }
            report_built(out, &built, &stats);
            match changes {
                Some(Changes::Files(d)) => Ok(review::Changes::Files(d).show(false)?),
                Some(Changes::Values(d)) => Ok(review::Changes::Values(d).show(false)?),
                None => Ok(0),
            }
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `--timings`: each phase's time and the peak memory by its end, and what the build wrote.
fn print_timings(
    phases: &[(&str, f64, u64)],
    clock: std::time::Instant,
    built: &bellc_core::Streamed,
    (groups_unrendered, parts_reused): (usize, usize),
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
    line.insert(
        "groups_unrendered".into(),
        serde_json::json!(groups_unrendered),
    );
    line.insert("parts_reused".into(), serde_json::json!(parts_reused));
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
    sign_key: Option<&bellc_core::emit::signing::SigningKey>,
) -> Result<(bell_seal::SealKey, Option<[u8; 32]>), Failure> {
    Ok(match (given, sign_key) {
        (Some(path), _) => (load_seal_key(path)?, None),
        (None, Some(sign_key)) => (sign_key.seal_key(), None),
        (None, None) => own_seal_key()?,
    })
}

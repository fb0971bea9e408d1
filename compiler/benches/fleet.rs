//! `cargo bench -p bellc`: the scale benchmark of the README.
//!
//! For generated fleets (bell_fleetgen) it runs the real `bellc build --timings` into a tmpfs
//! OUT (its own mount when run as root, else /dev/shm) and prints, per fleet: phase times of a
//! cold build (parse, resolve, render, write), the cold build, a no-change rebuild, a
//! one-host-change rebuild, peak RSS, bundles and files, and the time `cp -a OUT OUT2` takes
//! for the same output on the same file system (the floor for writing it) with the ratio of the
//! cold build to it; then the same cold build on disk. Then bell-run: the first offline apply
//! and a no-op re-apply of a typical bundle.
//! Times are medians of `BELL_BENCH_RUNS` runs (default 3). `BELL_BENCH_QUICK=1` runs the
//! small fleets only; `BELL_BENCH_ONLY=TEXT` the fleet named TEXT (`shape-hosts`), or else those
//! whose name contains it; `BELL_RUN_BIN=PATH` the bell-run to measure (default: the static
//! one `runner/build-static` makes).
//! Nothing here asserts a target: the figures go into the README as they are.
//! `compiler/tests/benchmarks_run.rs` runs it quick, on one small fleet, with the test suite.

use bell_fleetgen::{FleetGen, Inventory, Shape};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

struct Fleet {
    label: &'static str,
    gen: FleetGen,
    disk: bool,
    /// Runs of each measurement, when fewer than `BELL_BENCH_RUNS` (the largest fleets).
    runs: Option<usize>,
}

#[derive(Default, Clone)]
struct Timings {
    total: f64,
    parse: f64,
    resolve: f64,
    render: f64,
    write: f64,
    rss_kib: u64,
    bundles: u64,
    bundles_written: u64,
    links_written: u64,
    release_written: bool,
    skipped: bool,
}

fn bellc() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bellc"))
}

fn build(dir: &Path, out: &Path, extra: &[&str]) -> Timings {
    let mut cmd = Command::new(bellc());
    cmd.arg("build")
        .arg("--timings")
        .args(extra)
        .arg("bell.kdl")
        .arg("-o")
        .arg(out)
        // Its own seal key (kept by the first build that seals), beside the fleet.
        .env("BELLC_STATE_DIR", dir.join(".bellc-state"))
        .current_dir(dir);
    let output = cmd.output().expect("run bellc");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bellc build failed:\n{stderr}");
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("timings: "))
        .expect("a timings line");
    let v: serde_json::Value = serde_json::from_str(line).expect("timings json");
    let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    Timings {
        total: f("total_s"),
        parse: f("parse_s"),
        resolve: f("resolve_s"),
        render: f("render_s"),
        write: f("write_s"),
        rss_kib: u("peak_rss_kib"),
        bundles: u("bundles"),
        bundles_written: u("bundles_written"),
        links_written: u("links_written"),
        release_written: v["release_written"].as_bool().unwrap_or(false),
        skipped: v["skipped"].as_bool().unwrap_or(false),
    }
}

fn median_by(mut runs: Vec<Timings>) -> Timings {
    runs.sort_by(|a, b| a.total.total_cmp(&b.total));
    runs[runs.len() / 2].clone()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn rm(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
}

fn count_files(dir: &Path) -> usize {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| !e.file_type().is_dir())
        .count()
}

fn time_cp(from: &Path, to: &Path) -> f64 {
    rm(to);
    let t = Instant::now();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp")
        .success();
    assert!(ok, "cp -a failed");
    let secs = t.elapsed().as_secs_f64();
    rm(to);
    secs
}

fn write_fleet(gen: &FleetGen, dir: &Path) {
    rm(dir);
    for (rel, text) in gen.generate() {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write fleet");
    }
}

fn bench_fleet(fleet: &Fleet, scratch: &Path, disk_scratch: &Path, runs: usize) -> String {
    let runs = fleet.runs.map_or(runs, |r| r.min(runs));
    let dir = scratch.join(format!("{}-{}", fleet.gen.shape.as_str(), fleet.gen.hosts));
    write_fleet(&fleet.gen, &dir);
    let out = dir.join("out");
    let cold = median_by(
        (0..runs)
            .map(|_| {
                rm(&out);
                build(&dir, &out, &[])
            })
            .collect(),
    );
    let files = count_files(&out);
    let nochange = median_by((0..runs).map(|_| build(&dir, &out, &[])).collect());
    assert!(nochange.skipped, "an unchanged rebuild should be skipped");
    let floor = median(
        (0..runs)
            .map(|_| time_cp(&out, &dir.join("out2")))
            .collect(),
    );

    // One host changes: a host override of its own gives it a new bundle.
    let first = fleet.gen.hosts()[0].name.clone();
    let spec = dir.join("bell.kdl");
    let original = std::fs::read_to_string(&spec).expect("spec");
    let mut one = Vec::new();
    for i in 0..runs {
        std::fs::write(
            &spec,
            format!(
                "{original}\noverride \"bench-one-host\" {{\n    match host=\"{first}\"\n    sysctl {{ kernel.panic {} }}\n}}\n",
                30 + i
            ),
        )
        .expect("spec");
        let t = build(&dir, &out, &[]);
        assert_eq!(t.bundles_written, 1, "a one-host change writes one bundle");
        assert_eq!(t.links_written, 1, "a one-host change writes one pointer");
        assert!(t.release_written);
        one.push(t);
    }
    std::fs::write(&spec, &original).expect("spec");
    let one = median_by(one);

    let disk = if fleet.disk {
        let ddir = disk_scratch.join(format!("{}-{}", fleet.gen.shape.as_str(), fleet.gen.hosts));
        write_fleet(&fleet.gen, &ddir);
        let dout = ddir.join("out");
        let t = median_by(
            (0..runs)
                .map(|_| {
                    rm(&dout);
                    build(&ddir, &dout, &[])
                })
                .collect(),
        );
        let f = median(
            (0..runs)
                .map(|_| time_cp(&dout, &ddir.join("out2")))
                .collect(),
        );
        rm(&ddir);
        format!("{:.2} s (cp -a {:.2} s)", t.total, f)
    } else {
        "—".to_string()
    };
    rm(&dir);
    format!(
        "| {}{} | {} | {:.3} / {:.3} / {:.3} / {:.3} | **{:.3} s** | {:.3} s ({:.0} %) | {:.3} s ({:.0} %) | {} MiB | {} / {} | {:.3} s | {:.2}× | {} |",
        fleet.label,
        if runs == 1 { " (1 run)" } else { "" },
        fleet.gen.hosts,
        cold.parse,
        cold.resolve,
        cold.render,
        cold.write,
        cold.total,
        nochange.total,
        100.0 * nochange.total / cold.total,
        one.total,
        100.0 * one.total / cold.total,
        cold.rss_kib / 1024,
        cold.bundles,
        files,
        floor,
        cold.total / floor,
        disk,
    )
}

/// The bell-run that hosts run: the static release build (`runner/build-static`).
fn bell_run() -> PathBuf {
    // The test suite's quick run gives the bell-run it built.
    if let Some(given) = std::env::var_os("BELL_RUN_BIN") {
        return PathBuf::from(given);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runner/build-static");
    let out = Command::new(script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("runner/build-static");
    assert!(out.status.success(), "runner/build-static failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// First apply and no-op re-apply (medians, in seconds) on a live root: the bundle applied to
/// `/` of a freshly booted Debian 12 VM (../shared/vmtest, under KVM when there is one), where
/// systemd, AppArmor, sysctls and useradd are real and nothing of this machine changes. Between
/// rounds a bundle of the same host without resources reverts everything. `Err` says why it
/// was not measured (no VM image yet: `.ci/vm` builds it).
fn live_apply(
    runner: &Path,
    bundle: &Path,
    empty: &Path,
    runs: usize,
) -> Result<LiveApply, String> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = std::env::var_os("BELL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir.join("../../shared"));
    let run_in_vm = shared.join("vmtest/run-in-vm.sh");
    let cache = std::env::var_os("BELL_VM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/bell-vmtest"));
    if !run_in_vm.is_file() || !cache.join("stamp").is_file() {
        return Err(format!(
            "no VM image in {} (`bash .ci/vm` builds it) or no {}",
            cache.display(),
            run_in_vm.display()
        ));
    }
    let stage = bundle
        .parent()
        .and_then(Path::parent)
        .expect("out dir")
        .join("live");
    rm(&stage);
    std::fs::create_dir_all(stage.join("bin")).expect("stage");
    std::fs::copy(runner, stage.join("bin/bell-run")).expect("stage bell-run");
    for (from, to) in [(bundle, "bundle"), (empty, "empty")] {
        let ok = Command::new("cp")
            .arg("-rL")
            .arg(from)
            .arg(stage.join(to))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot stage {}", from.display());
    }
    let out = Command::new(&run_in_vm)
        .args(["-t", "600"])
        .arg(&cache)
        .arg(&stage)
        .arg(manifest_dir.join("benches/vm/live-apply.sh"))
        .arg(runs.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", run_in_vm.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut first, mut again) = (Vec::new(), Vec::new());
    let (mut offline_first, mut offline_again) = (Vec::new(), Vec::new());
    let mut profile = String::new();
    for line in text.lines() {
        if line.starts_with("live first: ") || line.starts_with("live no-op: ") {
            profile.push_str(line);
            profile.push('\n');
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["round", _, "first_us", f, "noop_us", n, "offline_first_us", of, "noop_us", on] =
            words[..]
        {
            let s = |us: &str| us.parse::<f64>().unwrap_or(f64::NAN) / 1e6;
            first.push(s(f));
            again.push(s(n));
            offline_first.push(s(of));
            offline_again.push(s(on));
        }
    }
    // run-in-vm.sh ends with `… (qemu start to power-off, kvm|tcg)`.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let accel = if stderr.contains(", kvm)") {
        "KVM"
    } else {
        "TCG: emulated, no hardware virtualisation here"
    };
    rm(&stage);
    if !out.status.success() || first.len() != runs {
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        return Err(format!(
            "the VM run failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(LiveApply {
        accel,
        first: median(first),
        again: median(again),
        offline_first: median(offline_first),
        offline_again: median(offline_again),
        profile,
    })
}

/// Medians in seconds, all measured in the same VM.
struct LiveApply {
    accel: &'static str,
    first: f64,
    again: f64,
    offline_first: f64,
    offline_again: f64,
    /// `bell-run apply --timings` of one more live first apply and no-op, line by line.
    profile: String,
}

fn bench_apply(scratch: &Path, disk_scratch: &Path, runs: usize) -> String {
    let gen = FleetGen {
        hosts: 100,
        seed: 7,
        shape: Shape::Shared,
        inventory: Inventory::Inline,
    };
    let dir = scratch.join("apply");
    write_fleet(&gen, &dir);
    let out = dir.join("out");
    build(&dir, &out, &[]);
    let host = gen.hosts()[0].name.clone();
    let bundle = out.join("hosts").join(&host);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("bundle.json")).expect("manifest"))
            .expect("manifest json");
    let resources = manifest["resources"].as_array().map_or(0, Vec::len);
    let files = manifest["files"].as_array().map_or(0, Vec::len);
    let runner = bell_run();
    let (first, again) = offline_applies(&runner, &bundle, &dir.join("root"), runs);
    // The same on disk, where a host's root is: what the tmpfs figures leave out is the
    // fsyncs that make bell-run's records and copies durable.
    let disk_root = disk_scratch.join("apply-root");
    let (disk_first, disk_again) = offline_applies(&runner, &bundle, &disk_root, runs);
    rm(&disk_root);
    // The same host in a fleet without resources: applying it reverts everything.
    let spec = std::fs::read_to_string(dir.join("bell.kdl")).expect("bell.kdl");
    let bare: String = spec
        .lines()
        .filter(|l| l.starts_with("fleet ") || l.starts_with("host "))
        .map(|l| format!("{l}\n"))
        .chain([
            // Reverted accounts are only expired; purging them makes the next round's apply a
            // first one again (useradd, not a re-enabled account).
            "users purge-expired=#true\n".to_string(),
        ])
        .collect();
    let empty_dir = dir.join("empty");
    std::fs::create_dir_all(&empty_dir).expect("mkdir");
    std::fs::write(empty_dir.join("bell.kdl"), bare).expect("write");
    build(&empty_dir, &empty_dir.join("out"), &[]);
    let empty = empty_dir.join("out/hosts").join(&host);
    // The VM's virtio NIC has TCP segmentation offload fixed off, which ethtool cannot turn on:
    // live, the ethtool resource sets only generic-receive-offload (still 34 resources).
    let tso = "    tx-tcp-segmentation on\n";
    assert!(
        spec.contains(tso),
        "the generated spec changed: update the live bench"
    );
    let live_dir = dir.join("live-spec");
    std::fs::create_dir_all(&live_dir).expect("mkdir");
    std::fs::write(live_dir.join("bell.kdl"), spec.replacen(tso, "", 1)).expect("write");
    build(&live_dir, &live_dir.join("out"), &[]);
    let live_bundle = live_dir.join("out/hosts").join(&host);
    let live = match live_apply(&runner, &live_bundle, &empty, runs.max(5)) {
        Ok(live) => format!(
            "| bell-run, live root of a booted Debian 12 VM ({}), same bundle but TSO | first apply {:.1} ms | no-op re-apply {:.1} ms |\n\
             | bell-run, offline in that VM, for comparison | first apply {:.1} ms | no-op re-apply {:.1} ms |",
            live.accel,
            1000.0 * live.first,
            1000.0 * live.again,
            1000.0 * live.offline_first,
            1000.0 * live.offline_again
        ) + &format!("\n\nWhere a live apply's time goes (in that VM):\n\n```\n{}```", live.profile),
        Err(why) => format!("| bell-run, live root | not measured: {why} | |"),
    };
    rm(&dir);
    format!(
        "| bell-run, offline, bundle `{host}` ({resources} resources, {files} files) | first apply {:.1} ms | no-op re-apply {:.1} ms |\n\
         | bell-run, offline, the same with its root on disk (`target/`) | first apply {:.1} ms | no-op re-apply {:.1} ms |\n{live}",
        1000.0 * first,
        1000.0 * again,
        1000.0 * disk_first,
        1000.0 * disk_again
    )
}

/// Medians (seconds) of the first apply of `bundle` into a new `root` holding the build
/// machine's account databases, and of the no-op apply after it.
fn offline_applies(runner: &Path, bundle: &Path, root: &Path, runs: usize) -> (f64, f64) {
    let (mut first, mut again) = (Vec::new(), Vec::new());
    for _ in 0..runs.max(5) {
        rm(root);
        std::fs::create_dir_all(root.join("etc")).expect("root");
        for f in ["passwd", "group", "shadow", "gshadow"] {
            let _ = std::fs::copy(Path::new("/etc").join(f), root.join("etc").join(f));
        }
        for times in [&mut first, &mut again] {
            let t = Instant::now();
            let status = Command::new(runner)
                .arg("apply")
                .arg(bundle)
                .arg("--root")
                .arg(root)
                .output()
                .expect("bell-run");
            times.push(t.elapsed().as_secs_f64());
            assert!(
                status.status.success(),
                "bell-run apply failed: {}",
                String::from_utf8_lossy(&status.stdout)
            );
        }
    }
    (median(first), median(again))
}

pub fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let runs: usize = std::env::var("BELL_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let quick = std::env::var("BELL_BENCH_QUICK").is_ok();
    let (scratch, mounted) = scratch_tmpfs(quick);
    let disk_scratch = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bell-bench-disk");
    let gen = |hosts, shape, inventory| FleetGen {
        hosts,
        seed: 1,
        shape,
        inventory,
    };
    let mut fleets = vec![
        Fleet {
            label: "shared, inline",
            gen: gen(1_000, Shape::Shared, Inventory::Inline),
            disk: true,
            runs: None,
        },
        Fleet {
            label: "shared, inline",
            gen: gen(10_000, Shape::Shared, Inventory::Inline),
            disk: true,
            runs: None,
        },
    ];
    if !quick {
        fleets.extend([
            Fleet {
                label: "shared, json",
                gen: gen(50_000, Shape::Shared, Inventory::Json),
                disk: false,
                runs: None,
            },
            Fleet {
                label: "shared, json",
                gen: gen(100_000, Shape::Shared, Inventory::Json),
                disk: false,
                runs: None,
            },
            Fleet {
                label: "shared, json",
                gen: gen(1_000_000, Shape::Shared, Inventory::Json),
                disk: false,
                runs: Some(1),
            },
            // A million hosts as a site has them: most share, one in a hundred is its own.
            Fleet {
                label: "overridden, json",
                gen: gen(1_000_000, Shape::Overridden, Inventory::Json),
                disk: false,
                runs: Some(1),
            },
            Fleet {
                label: "unique, json",
                gen: gen(10_000, Shape::Unique, Inventory::Json),
                disk: true,
                runs: None,
            },
            Fleet {
                label: "unique, json",
                gen: gen(100_000, Shape::Unique, Inventory::Json),
                disk: false,
                runs: Some(1),
            },
            Fleet {
                label: "templated, json",
                gen: gen(10_000, Shape::Templated, Inventory::Json),
                disk: false,
                runs: None,
            },
            Fleet {
                label: "templated, json",
                gen: gen(100_000, Shape::Templated, Inventory::Json),
                disk: false,
                runs: Some(1),
            },
            Fleet {
                label: "sealed, json",
                gen: gen(10_000, Shape::Sealed, Inventory::Json),
                disk: false,
                runs: None,
            },
            Fleet {
                label: "sealed, json",
                gen: gen(100_000, Shape::Sealed, Inventory::Json),
                disk: false,
                runs: Some(1),
            },
        ]);
    }
    println!(
        "bellc scale benchmark: medians of {runs} runs, OUT on tmpfs ({})",
        scratch.display()
    );
    println!();
    println!("| fleet | hosts | cold: parse / resolve / render / write (s) | cold build | no-change rebuild | one-host change | peak RSS | bundles / files | `cp -a` floor | cold ÷ floor | cold build on disk |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    // A name that is a fleet's exactly runs that fleet alone (`unique-10000` is also part of
    // `unique-100000`).
    let only = std::env::var("BELL_BENCH_ONLY").unwrap_or_default();
    let name_of = |fleet: &Fleet| format!("{}-{}", fleet.gen.shape.as_str(), fleet.gen.hosts);
    let exact = fleets.iter().any(|f| name_of(f) == only);
    for fleet in &fleets {
        let name = name_of(fleet);
        if (exact && name == only) || (!exact && name.contains(&only)) {
            println!("{}", bench_fleet(fleet, &scratch, &disk_scratch, runs));
        }
    }
    println!();
    println!("{}", bench_apply(&scratch, &disk_scratch, runs));
    rm(&scratch);
    rm(&disk_scratch);
    if mounted {
        let _ = Command::new("umount").arg(&scratch).status();
    }
}

/// A tmpfs for OUT. A bundle is a few dozen directories, so 100,000 unique hosts take about
/// ten million inodes, three times what `/dev/shm` allows on this machine: as root, the
/// benchmark mounts a tmpfs of its own without an inode limit; otherwise it uses `/dev/shm`.
fn scratch_tmpfs(quick: bool) -> (PathBuf, bool) {
    // The small fleets fit anywhere: a quick run mounts nothing.
    if quick {
        let dir = std::env::temp_dir().join(format!("bell-bench-quick-{}", std::process::id()));
        return (dir, false);
    }
    let own = PathBuf::from("/tmp/bell-bench-tmpfs");
    let _ = std::fs::create_dir_all(&own);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16g,nr_inodes=0", "bell-bench"])
        .arg(&own)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        (own, true)
    } else {
        (PathBuf::from("/dev/shm/bell-bench"), false)
    }
}

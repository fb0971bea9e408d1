//! bell-fleetgen: writes a synthetic fleet spec (see the `bell_fleetgen` library) for scale tests.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bell_fleetgen::{FleetGen, Inventory, Shape};

const USAGE: &str = "usage: bell-fleetgen --hosts N [--shape shared|unique|overridden|templated|sealed] [--inventory inline|json] [--seed S] -o DIR
  --hosts N        number of hosts
  --shape          shared (default): hosts differ by labels and a few host overrides;
                   unique: every host also gets a file of its own (a host override each),
                   so no two bundles match;
                   overridden: shared, and each host override (1 % of hosts) also has
                   that file, so about one host in a hundred has a bundle of its own;
                   templated: the same file from one template that reads the host;
                   sealed: shared, and every host has an identity its secrets are
                   sealed to (the others ship them in the clear)
  --inventory      inline: `host` nodes in bell.kdl; json: inventory/hosts.json
                   (default: inline for shared, json otherwise)
  --seed S         seed of the role deal and of the host overrides (default 1)
  -o, --out DIR    where to write bell.kdl (and inventory/); created if missing";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match parse(&args).and_then(|(gen, out)| write(&gen, &out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn parse(args: &[String]) -> Result<(FleetGen, PathBuf), String> {
    let mut hosts = None;
    let mut shape = Shape::Shared;
    let mut inventory = None;
    let mut seed = 1u64;
    let mut out = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("`{flag}` needs a value"))
                .cloned()
        };
        match flag.as_str() {
            "--hosts" => {
                let v = value()?;
                hosts = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("`--hosts` wants a number of hosts, got `{v}`"))?,
                );
            }
            "--shape" => shape = value()?.parse().map_err(|e| format!("{e}"))?,
            "--inventory" => {
                inventory = Some(value()?.parse::<Inventory>().map_err(|e| format!("{e}"))?);
            }
            "--seed" => {
                let v = value()?;
                seed = v
                    .parse()
                    .map_err(|_| format!("`--seed` wants an unsigned 64-bit number, got `{v}`"))?;
            }
            "-o" | "--out" => out = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let hosts = hosts.ok_or("`--hosts` is required")?;
    let out = out.ok_or("`-o DIR` is required")?;
    let inventory = inventory.unwrap_or(match shape {
        Shape::Shared => Inventory::Inline,
        Shape::Unique | Shape::Overridden | Shape::Templated | Shape::Sealed => Inventory::Json,
    });
    Ok((
        FleetGen {
            hosts,
            seed,
            shape,
            inventory,
        },
        out,
    ))
}

fn write(gen: &FleetGen, out: &Path) -> Result<(), String> {
    let files = gen.generate();
    for (rel, content) in &files {
        let path = out.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        }
        std::fs::write(&path, content)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    }
    eprintln!(
        "bell-fleetgen: {} hosts ({}, {} inventory, seed {}) in {}",
        gen.hosts,
        gen.shape.as_str(),
        gen.inventory.as_str(),
        gen.seed,
        out.display()
    );
    Ok(())
}

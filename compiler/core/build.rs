//! Embeds the standard library of templates: every `*.j2` file under the workspace's `stdlib/`,
//! named by its path there (`sysctl/apply.sh.j2`). A template that does not parse fails the
//! build, pointing at its file and line, so a broken template can never ship (the renderer has
//! no way to report one to a user, who did not write it).
//!
//! Also names this build (`BELLC_BUILD`, a digest of the templates and the compiler's sources):
//! an OUT whose record names another build is rendered again, so a bellc built from changed
//! sources under the same version never keeps bundles an older one wrote.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let stdlib = manifest.join("../..").join("stdlib");
    println!("cargo:rerun-if-changed={}", stdlib.display());
    let mut templates = Vec::new();
    collect(&stdlib, &stdlib, &mut templates);
    templates.sort();
    let src = manifest.join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut sources = Vec::new();
    collect_ext(&src, &src, "rs", &mut sources);
    sources.sort();
    let mut build = std::collections::hash_map::DefaultHasher::new();
    for (name, path) in templates.iter().chain(&sources) {
        use std::hash::Hash;
        name.hash(&mut build);
        std::fs::read(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .hash(&mut build);
    }
    println!(
        "cargo:rustc-env=BELLC_BUILD={:016x}",
        std::hash::Hasher::finish(&build)
    );
    let mut env = minijinja::Environment::new();
    let mut failed = Vec::new();
    let mut code = String::from("pub const TEMPLATES: &[(&str, &str)] = &[\n");
    for (name, path) in &templates {
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if let Err(e) = env.add_template_owned(name.clone(), source) {
            failed.push(format!("stdlib/{name}: {e:#}"));
        }
        writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("write to a String");
    }
    code.push_str("];\n");
    if !failed.is_empty() {
        for message in &failed {
            println!("cargo:warning={message}");
        }
        eprintln!("stdlib templates that do not parse:\n{}", failed.join("\n"));
        std::process::exit(1);
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("stdlib_templates.rs"), code).expect("write stdlib_templates.rs");
}

/// Every `*.j2` file under `dir`, as (path relative to `stdlib/` with `/`, absolute path).
fn collect(stdlib: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    collect_ext(stdlib, dir, "j2", out);
}

/// Every file ending in `.EXT` under `dir`, as (path relative to `top` with `/`, absolute path).
fn collect_ext(top: &Path, dir: &Path, ext: &str, out: &mut Vec<(String, PathBuf)>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_ext(top, &path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            let relative = path.strip_prefix(top).expect("under the top");
            let name: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push((name.join("/"), path));
        }
    }
}

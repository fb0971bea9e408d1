//! `bellc secrets check|rekey|edit`: the spec's encrypted secret files held to `secrets.kdl`.

use crate::args::{Cli, SecretsCommand};
use crate::{frontend, Failure};
use bell_seal::at_rest::{self, Identity, Recipient};
use bellc_core::diagnostic::Diagnostics;
use bellc_core::front::recipients::{self, Recipients};
use bellc_core::source::Sources;
use std::path::{Path, PathBuf};

pub fn exec(
    cli: &Cli,
    command: &SecretsCommand,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    let (SecretsCommand::Check { spec }
    | SecretsCommand::Rekey { spec }
    | SecretsCommand::Edit { spec, .. }) = command;
    // The spec's directory (`bell.kdl`'s is the working directory).
    let dir = spec.parent().unwrap_or(Path::new("")).to_path_buf();
    let new_file = match command {
        SecretsCommand::Edit { file, .. } => !dir.join(file).exists(),
        _ => false,
    };
    if sources.secret_keys().is_none() && !new_file {
        return Err(Failure::Usage(
            "`bellc secrets` opens the spec's encrypted files: give `--secrets-key FILE`".into(),
        ));
    }
    let listed = dir.join(recipients::FILE_NAME);
    let text = std::fs::read_to_string(&listed).map_err(|e| {
        Failure::Io(format!(
            "cannot read {}: {e}; it names who can open each encrypted file (see docs/secrets-and-identities.md)",
            listed.display()
        ))
    })?;
    let file = sources.add(&listed, text);
    let named = recipients::parse(file, sources, diags);
    if diags.has_errors() {
        return Ok(1);
    }
    match command {
        SecretsCommand::Check { spec } => check(cli, spec, &dir, &named, sources, diags),
        SecretsCommand::Rekey { .. } => rekey(&dir, &named, sources),
        SecretsCommand::Edit { file, .. } => edit(&dir, file, &named, sources),
    }
}

/// `secrets edit FILE`: decrypted into a private temporary file, edited, encrypted again.
fn edit(dir: &Path, secret: &str, named: &Recipients, sources: &Sources) -> Result<u8, Failure> {
    let Some(recipients) = named.of(secret) else {
        return Err(Failure::Usage(format!(
            "`{}` does not name `{secret}`: add `secret \"{secret}\" \"NAME\" …` first, so that \
             it is encrypted to the build and the people who may open it",
            recipients::FILE_NAME
        )));
    };
    let path = dir.join(secret);
    let before = match path.exists() {
        true => {
            let (_, bytes) =
                read_secret(dir, secret).map_err(|e| Failure::Io(format!("{secret}: {e}")))?;
            at_rest::decrypt(&bytes, keys(sources)).map_err(|e| {
                Failure::Io(format!(
                    "{secret}: cannot be opened with --secrets-key: {e}"
                ))
            })?
        }
        false => Vec::new(),
    };
    // In memory when the machine has a tmpfs for it; a directory only its owner can enter.
    let base = Path::new("/dev/shm");
    let base = match base.is_dir() {
        true => base.to_path_buf(),
        false => std::env::temp_dir(),
    };
    let private = PrivateDir::new(&base).map_err(|e| {
        Failure::Io(format!(
            "cannot make a private directory in {}: {e}",
            base.display()
        ))
    })?;
    let name = Path::new(secret)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "secret".into());
    let plain = private.path().join(name);
    let outcome = edit_in(&plain, &before);
    // Overwritten, then removed with its directory, whatever the editor did.
    if let Ok(meta) = std::fs::metadata(&plain) {
        let _ = std::fs::write(&plain, vec![0u8; meta.len() as usize]);
    }
    drop(private);
    let after = outcome?;
    if after == before && path.exists() {
        println!("{secret}: unchanged, not written");
        return Ok(0);
    }
    let sealed = at_rest::encrypt(&after, &recipients).map_err(|e| Failure::Io(e.to_string()))?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Failure::Io(format!("{secret}: {e}")))?;
    }
    write_beside(&path, at_rest::armor(&sealed).as_bytes())
        .map_err(|e| Failure::Io(format!("{secret}: {e}")))?;
    println!("{secret}: encrypted to {}", names(named, secret));
    Ok(0)
}

/// Writes `before` to `plain` (0600, a new file), runs the editor on it, and reads what it
/// saved.
fn edit_in(plain: &Path, before: &[u8]) -> Result<Vec<u8>, Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| Failure::Io(format!("{}: {e}", plain.display()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(plain)
        .and_then(|mut f| f.write_all(before))
        .map_err(io)?;
    // An empty VISUAL is no editor, as git has it: EDITOR's turn.
    let set = |name: &str| std::env::var(name).ok().filter(|e| !e.trim().is_empty());
    let editor = set("VISUAL")
        .or_else(|| set("EDITOR"))
        .unwrap_or_else(|| "vi".into());
    // As git runs it: the editor is a command line of the user's own, the file its argument.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(plain)
        .status()
        .map_err(|e| Failure::Io(format!("cannot run the editor `{editor}`: {e}")))?;
    if !status.success() {
        return Err(Failure::Io(format!(
            "the editor `{editor}` failed ({status}): nothing was written"
        )));
    }
    std::fs::read(plain).map_err(io)
}

/// The keys `--secrets-key` gave (checked by `exec`).
fn keys(sources: &Sources) -> &[Identity] {
    sources.secret_keys().unwrap_or_default()
}

/// `NAME` of each recipient as `secrets.kdl` calls it (`build` for the build's key).
fn names(named: &Recipients, secret: &str) -> String {
    let mut out = vec!["build".to_string()];
    out.extend(named.secrets.get(secret).into_iter().flatten().cloned());
    out.join(", ")
}

/// The file `secret` names (relative to the spec's directory), refused when it leaves the
/// spec's tree by a link.
fn read_secret(dir: &Path, secret: &str) -> Result<(PathBuf, Vec<u8>), String> {
    let path = dir.join(secret);
    let tree = match dir.as_os_str().is_empty() {
        true => Path::new("."),
        false => dir,
    }
    .canonicalize()
    .map_err(|e| format!("the spec's directory: {e}"))?;
    let real = path.canonicalize().map_err(|e| e.to_string())?;
    if !real.starts_with(&tree) {
        return Err("outside the spec's directory (a link out of it)".into());
    }
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return Err("not a regular file of at most 1 MiB".into());
    }
    std::fs::read(&real)
        .map(|bytes| (path, bytes))
        .map_err(|e| e.to_string())
}

fn check(
    cli: &Cli,
    spec: &Path,
    dir: &Path,
    named: &Recipients,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    // The files the spec reads: each must be named.
    if frontend(cli, spec, sources, diags).is_none() || diags.has_errors() {
        return Ok(1);
    }
    let mut problems = Vec::new();
    for (path, _) in sources.encrypted() {
        let relative = path
            .strip_prefix(dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        if !named.secrets.contains_key(&relative) {
            problems.push(format!(
                "{relative}: the spec reads it, and `{}` does not name who opens it; add \
                 `secret \"{relative}\" \"NAME\" …`",
                recipients::FILE_NAME
            ));
        }
    }
    for secret in named.secrets.keys() {
        let recipients: Vec<Recipient> = named.of(secret).unwrap_or_default();
        let outcome = read_secret(dir, secret).and_then(|(_, bytes)| {
            at_rest::recipients_match(&bytes, keys(sources), &recipients)
                .map_err(|e| format!("cannot be opened with --secrets-key: {e}"))
        });
        match outcome {
            Ok(true) => {}
            Ok(false) => problems.push(format!(
                "{secret}: encrypted to others than `{}` names ({}); `bellc secrets rekey` \
                 encrypts it to exactly them",
                recipients::FILE_NAME,
                names(named, secret)
            )),
            Err(e) => problems.push(format!("{secret}: {e}")),
        }
    }
    for problem in &problems {
        eprintln!("error: {}", bell_bundle::one_line(problem));
    }
    if !problems.is_empty() {
        return Ok(1);
    }
    println!(
        "{} secret file(s), each opened by exactly the recipients `{}` names",
        named.secrets.len(),
        recipients::FILE_NAME
    );
    Ok(0)
}

fn rekey(dir: &Path, named: &Recipients, sources: &Sources) -> Result<u8, Failure> {
    let mut failed = false;
    for secret in named.secrets.keys() {
        let recipients: Vec<Recipient> = named.of(secret).unwrap_or_default();
        let done = read_secret(dir, secret).and_then(|(path, bytes)| {
            let plain = at_rest::decrypt(&bytes, keys(sources))
                .map_err(|e| format!("cannot be opened with --secrets-key: {e}"))?;
            let sealed = at_rest::encrypt(&plain, &recipients).map_err(|e| e.to_string())?;
            write_beside(&path, at_rest::armor(&sealed).as_bytes())
        });
        match done {
            Ok(()) => println!("{secret}: encrypted to {}", names(named, secret)),
            Err(e) => {
                eprintln!("error: {secret}: {}", bell_bundle::one_line(&e));
                failed = true;
            }
        }
    }
    Ok(u8::from(failed))
}

/// Writes `bytes` to `path` by a rename, so that a reader never finds half a file.
fn write_beside(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("age.tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write it: {e}")
        })
}

/// A directory only its owner can enter, of a name no one could guess, removed when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new(base: &Path) -> std::io::Result<PrivateDir> {
        use std::os::unix::fs::DirBuilderExt;
        let mut name = [0u8; 12];
        bell_seal::random_bytes(&mut name)?;
        let name: String = name.iter().map(|b| format!("{b:02x}")).collect();
        let path = base.join(format!("bellc-secret.{name}"));
        // Fails when the name exists: never a directory someone else made.
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(PrivateDir(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

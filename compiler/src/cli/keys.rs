//! The keys a build signs releases with and seals secrets with: given on the command line,
//! derived from the signing key, or bellc's own, kept in its state directory.

use crate::args::{SealedBy, SignArgs};
use crate::Failure;
use bellc_core::emit::signing;
use std::path::Path;

/// The key a build without `--seal-key` or `--sign-key` seals secrets with: bellc's own, kept
/// in its state directory (`seal.key`, 0600) as ssh keeps a host key, so that builds on this
/// machine name the same secrets alike. CI gives its signing key instead. When none is kept
/// yet, a new one, with the bytes [`keep_own_seal_key`] keeps once a build has sealed with it
/// (a fleet without secrets leaves nothing behind).
pub fn own_seal_key() -> Result<(bell_seal::SealKey, Option<[u8; 32]>), Failure> {
    if let Some(key) = own_seal_key_if_made() {
        return Ok((key, None));
    }
    let mut material = [0u8; 32];
    bell_seal::random_bytes(&mut material)
        .map_err(|e| Failure::Io(format!("cannot read /dev/urandom: {e}")))?;
    Ok((seal_key_from(&material), Some(material)))
}

/// Keeps a new own seal key that a build sealed secrets with. Without a state directory (no
/// `HOME`) it is not kept: that build is right, only the next one names its secrets anew.
pub fn keep_own_seal_key(material: &[u8; 32]) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(dir) = bell_ops::fleet::witness::state_dir() else {
        return Ok(());
    };
    let path = dir.join("seal.key");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Io(format!("cannot create {}: {e}", dir.display())))?;
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(material));
    match made {
        // Another build kept one meanwhile: the next build seals with that one.
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(Failure::Io(format!("cannot write {}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}

/// bellc's own seal key when a build has kept it (never made here).
pub fn own_seal_key_if_made() -> Option<bell_seal::SealKey> {
    let path = bell_ops::fleet::witness::state_dir()?.join("seal.key");
    std::fs::symlink_metadata(&path).ok()?;
    load_seal_key(&path).ok()
}

pub fn seal_key_from(material: &[u8]) -> bell_seal::SealKey {
    bell_seal::SealKey::derive(material, "bellc secrets, from --seal-key")
}

/// `--seal-key FILE`: at least 32 bytes of secret material.
pub fn load_seal_key(path: &Path) -> Result<bell_seal::SealKey, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Io(format!("cannot read the seal key {}: {e}", path.display())))?;
    if bytes.len() < 32 {
        return Err(Failure::Usage(format!(
            "the seal key {} holds {} bytes, fewer than 32\n  help: make one with `head -c 32 /dev/urandom > {}` and keep it as the signing key is kept",
            path.display(),
            bytes.len(),
            path.display()
        )));
    }
    Ok(seal_key_from(&bytes))
}

pub fn load_sign_key(args: &SignArgs) -> Result<Option<signing::SigningKey>, Failure> {
    let Some(path) = &args.sign_key else {
        return Ok(None);
    };
    let password = std::env::var(signing::PASSWORD_VAR).ok();
    signing::load(path, password)
        .map(Some)
        .map_err(|e| Failure::Io(e.to_string()))
}

pub fn sign_out(
    out: &Path,
    key: &signing::SigningKey,
    expires: Option<u64>,
) -> Result<(), Failure> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let signed = signing::sign_release(out, key, expires, now_ms).map_err(|e| e.to_string())?;
    said_signed(&signed, key);
    Ok(())
}

/// `signed release V (sequence N, valid until T) with key K`, on stderr.
pub fn said_signed(signed: &signing::Signed, key: &signing::SigningKey) {
    let until = match signed.expires {
        Some(at) => format!(", valid until {}", bell_bundle::utc(at)),
        None => String::new(),
    };
    eprintln!(
        "signed release {} (sequence {}{until}) with key {}",
        signed.version, signed.sequence, key.key_id
    );
}

/// The seal key a build given `sealed_by`'s options would seal with, without making one:
/// `None` when a build would make a new key (its secrets' names are not known before).
pub fn sealed_by(args: &SealedBy) -> Result<Option<bell_seal::SealKey>, Failure> {
    if let Some(path) = &args.seal_key {
        return load_seal_key(path).map(Some);
    }
    let signing = SignArgs {
        sign_key: args.sign_key.clone(),
        expires: None,
    };
    Ok(match load_sign_key(&signing)? {
        Some(key) => Some(key.seal_key()),
        None => own_seal_key_if_made(),
    })
}

/// Said when bundle ids were computed for hosts with sealed secrets under a key the build may
/// not use: their ids are then not the ones the build writes.
pub fn warn_ids_of_sealed_hosts(compiled: &bellc_core::Compiled, args: &SealedBy, known: bool) {
    if args.seal_key.is_some() || args.sign_key.is_some() {
        return;
    }
    let sealed: Vec<&str> = compiled
        .release
        .hosts
        .iter()
        .filter(|(_, host)| {
            compiled
                .bundles
                .get(&host.bundle)
                .is_some_and(|b| !b.sealed.is_empty())
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if sealed.is_empty() {
        return;
    }
    let whose = if known {
        "bellc's own seal key on this machine"
    } else {
        "a seal key no build has used (this machine has none of its own yet)"
    };
    errln!(
        "warning: {} host(s) with sealed secrets ({}): their bundle ids are computed with {whose}; \
         a build given `--sign-key` or `--seal-key` names their secrets, and so their bundles, \
         otherwise: give the same key here",
        sealed.len(),
        sealed.join(", ")
    );
}

/// `bellc keygen NAME`: a minisign key pair, the secret 0600 (encrypted with `--encrypt`).
pub fn keygen(name: &Path, encrypt: bool) -> Result<u8, Failure> {
    let password = match std::env::var(signing::PASSWORD_VAR) {
        Ok(p) if encrypt && !p.is_empty() => Some(p),
        _ if encrypt => return Err(signing::SigningError::NoPassword.to_string().into()),
        _ => None,
    };
    let files = signing::generate(name, password).map_err(|e| e.to_string())?;
    println!(
        "wrote {} ({}, 0600; keep it secret) and {} (key id {})",
        files.secret.display(),
        if files.encrypted {
            "encrypted"
        } else {
            "not encrypted"
        },
        files.public.display(),
        files.key_id
    );
    Ok(0)
}

//! `bellc store roles`: prints the etcd users and roles a fleet needs, or makes them so with
//! the admin's credentials (`--apply`), writing each new user's password to a 0600 file.

use crate::args::StoreCommand;
use crate::{read_release, Failure};
use bell_ops::fleet::store_roles::{self, Role};
use bell_store::Etcd;
use bell_wire::etcd::Permission;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub struct Apply<'a> {
    pub etcd: Etcd,
    /// Where each new user's password goes (`DIR/HOST`, `DIR/controller`, `DIR/serve`).
    pub passwords: &'a Path,
}

/// Prints the plan (as text or JSON), or applies it. Exit 0.
pub fn run(
    release: &bell_bundle::Release,
    lock_prefix: &str,
    apply: Option<Apply>,
    json: bool,
) -> Result<u8, String> {
    let roles = store_roles::plan(release, lock_prefix);
    let Some(apply) = apply else {
        if json {
            let list: Vec<serde_json::Value> = roles
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "user": r.name,
                        "role": r.name,
                        "password_file": r.password_file,
                        "permissions": r.permissions.iter().map(Permission::describe).collect::<Vec<_>>(),
                    })
                })
                .collect();
            outjson!(serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?);
        } else {
            for role in &roles {
                outln!("user and role {}", role.name);
                for perm in &role.permissions {
                    outln!("  {}", perm.describe());
                }
            }
        }
        return Ok(0);
    };
    for role in roles.iter().filter(|r| r.name.starts_with("host/")) {
        if matches!(
            role.password_file.as_str(),
            "controller" | "enroll" | "gateway" | "serve"
        ) {
            return Err(format!(
                "host `{}` would share its password file with the {} user; rename the host",
                role.password_file, role.password_file
            ));
        }
    }
    std::fs::create_dir_all(apply.passwords)
        .map_err(|e| format!("cannot create {}: {e}", apply.passwords.display()))?;
    for role in &roles {
        let said = apply_role(&apply, role)?;
        outln!("{}: {said}", role.name);
    }
    // A host the release no longer names keeps no user: its password could still write its
    // old group's semaphore and its own keys.
    let host_prefix = format!("host/{}/", release.fleet);
    let departed =
        |name: &String| name.starts_with(&host_prefix) && !roles.iter().any(|r| &r.name == name);
    let users = apply.etcd.user_list()?;
    let mut gone: Vec<&String> = users.iter().filter(|u| departed(u)).collect();
    let role_names = apply.etcd.role_list()?;
    gone.extend(
        role_names
            .iter()
            .filter(|r| departed(r) && !users.contains(r)),
    );
    gone.sort();
    gone.dedup();
    for name in gone {
        if users.contains(name) {
            apply.etcd.user_delete(name)?;
        }
        if role_names.contains(name) {
            apply.etcd.role_delete(name)?;
        }
        let host = name.trim_start_matches(&host_prefix);
        let file = apply.passwords.join(host);
        let kept = match std::fs::symlink_metadata(&file) {
            Ok(_) => std::fs::remove_file(&file)
                .map(|()| format!(", its password file {} removed", file.display()))
                .map_err(|e| format!("cannot remove {}: {e}", file.display()))?,
            Err(_) => String::new(),
        };
        outln!("{name}: user and role removed: the release no longer names host `{host}`{kept}");
    }
    Ok(0)
}

/// Makes one user and role as the plan says; what it did, for a line of output.
fn apply_role(apply: &Apply, role: &Role) -> Result<String, String> {
    let etcd = &apply.etcd;
    let mut said = Vec::new();
    let held = match etcd.role_permissions(&role.name)? {
        Some(held) => held,
        None => {
            etcd.role_add(&role.name)?;
            said.push("role created".to_string());
            Vec::new()
        }
    };
    let (mut granted, mut revoked) = (0, 0);
    for perm in &role.permissions {
        if !held.contains(perm) {
            etcd.role_grant(&role.name, perm)?;
            granted += 1;
        }
    }
    // What the role held beyond the plan: a host that moved to another group, a key bell no
    // longer uses.
    for perm in &held {
        if !role.permissions.contains(perm) {
            etcd.role_revoke(&role.name, perm)?;
            revoked += 1;
        }
    }
    if granted > 0 || revoked > 0 {
        said.push(format!("{granted} permissions granted, {revoked} revoked"));
    }
    let user_roles = match etcd.user_roles(&role.name)? {
        Some(roles) => roles,
        None => {
            let file = apply.passwords.join(&role.password_file);
            let password = new_password()?;
            // The file first: a user whose password was never kept would be of no use.
            write_secret(&file, &password)?;
            etcd.user_add(&role.name, &password)?;
            said.push(format!("user created, its password in {}", file.display()));
            Vec::new()
        }
    };
    if !user_roles.contains(&role.name) {
        etcd.user_grant_role(&role.name, &role.name)?;
    }
    if said.is_empty() {
        said.push("as planned already".into());
    }
    Ok(said.join("; "))
}

/// 32 random bytes as URL-safe base64 without padding: nothing a shell or a config line
/// would read differently.
fn new_password() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    bell_seal::random_bytes(&mut bytes).map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    let mut bits = 0u32;
    let mut value = 0u32;
    for byte in bytes {
        value = (value << 8) | u32::from(byte);
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((value >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((value << (6 - bits)) & 63) as usize] as char);
    }
    Ok(out)
}

/// Writes `text` to a new 0600 file in place of `path` (through a temporary file: a link put
/// where the file goes is replaced, never followed).
fn write_secret(path: &Path, text: &str) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    file.write_all(format!("{text}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `bellc store roles`.
pub fn exec(command: &StoreCommand) -> Result<u8, Failure> {
    match command {
        StoreCommand::Roles {
            out,
            lock_prefix,
            apply,
            store,
            tls,
            passwords,
            json,
        } => {
            let release = read_release(out)?;
            let prefix = lock_prefix
                .clone()
                .unwrap_or_else(|| bell_store::semaphore::default_prefix(&release.fleet));
            let apply = match (apply, store, passwords) {
                (true, Some(store), Some(passwords)) => Some(Apply {
                    etcd: bell_store::Etcd::open(store, &tls.access())?,
                    passwords,
                }),
                _ => None,
            };
            Ok(run(&release, &prefix, apply, *json)?)
        }
    }
}

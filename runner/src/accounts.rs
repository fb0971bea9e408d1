//! Owner and group names resolved through the target root's own `etc/passwd` and `etc/group`,
//! not the running host's NSS, so that an image baked offline gets the ids of the image.

use bell_bundle::Manifest;
use std::collections::BTreeMap;
use std::path::Path;

/// The account databases each kind's scripts read or change in the root: owners of files
/// are looked up in `passwd` and `group`; accounts also live in `shadow`.
fn databases_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "file" | "perm" => &["etc/passwd", "etc/group"],
        "user" | "default-account" | "users" => &["etc/passwd", "etc/group", "etc/shadow"],
        _ => &[],
    }
}

/// Why `root` cannot take `manifest`: the account databases its resources need that the root
/// lacks (an image root made by hand, not by debootstrap), each named with who needs it.
/// Checked before anything changes, because the scripts would otherwise fail one by one with
/// `user root does not exist` or `password hash of ops was not set`.
pub fn missing_databases(root: &Path, manifest: &Manifest) -> Option<String> {
    let mut missing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for resource in &manifest.resources {
        for db in databases_of(&resource.kind) {
            // Not followed: a link is the scripts' business (they refuse one out of the root).
            if std::fs::symlink_metadata(root.join(db)).is_err() {
                missing.entry(db).or_default().push(resource.key());
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let lines: Vec<String> = missing
        .iter()
        .map(|(db, needed)| {
            let shown: Vec<&str> = needed.iter().take(3).map(String::as_str).collect();
            let more = needed.len().saturating_sub(shown.len());
            format!(
                "{}/{db}: missing (needed by {}{})",
                root.display(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        })
        .collect();
    Some(format!(
        "{}; an image root needs the account databases its users are added to and its files' \
         owners are found in",
        lines.join("; ")
    ))
}

pub struct Accounts {
    users: BTreeMap<String, u32>,
    groups: BTreeMap<String, u32>,
}

impl Accounts {
    pub fn load(root: &Path) -> Accounts {
        Accounts {
            users: read_table(&root.join("etc/passwd")),
            groups: read_table(&root.join("etc/group")),
        }
    }

    pub fn uid(&self, name: &str) -> Result<u32, String> {
        resolve(&self.users, name)
            .ok_or_else(|| format!("owner `{name}` is not a user in the root's etc/passwd"))
    }

    pub fn gid(&self, name: &str) -> Result<u32, String> {
        resolve(&self.groups, name)
            .ok_or_else(|| format!("group `{name}` is not a group in the root's etc/group"))
    }
}

fn resolve(table: &BTreeMap<String, u32>, name: &str) -> Option<u32> {
    if let Some(id) = table.get(name) {
        return Some(*id);
    }
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        return name.parse().ok();
    }
    // `root` is uid and gid 0 on every Linux, also in a bare root without etc/passwd yet.
    (name == "root").then_some(0)
}

/// `name:x:id:...` lines; a missing file is an empty table.
fn read_table(path: &Path) -> BTreeMap<String, u32> {
    // Read as bell-run reads its own records: a hostile root's etc/passwd may be a FIFO or a
    // link to /dev/zero.
    let text = crate::rootfs::read_record(path)
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut table = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(id)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(id) = id.parse() {
            table.entry(name.to_string()).or_insert(id);
        }
    }
    table
}

//! Owner and group names resolved through the target root's own `etc/passwd` and `etc/group`,
//! not the running host's NSS, so that an image baked offline gets the ids of the image.

use std::collections::BTreeMap;
use std::path::Path;

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
    let text = std::fs::read_to_string(path).unwrap_or_default();
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

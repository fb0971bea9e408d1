//! Inventory files: hosts from JSON, either a plain list or `kubectl get nodes -o json`.
//!
//! Large fleets keep their hosts out of KDL (the kdl crate parses about 1 MB/s; serde_json is
//! two orders of magnitude faster), so this is the path for 100k-host inventories.

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub address: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Byte offset of the entry's name in the file, for diagnostics.
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryError {
    pub message: String,
    pub offset: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainHost {
    name: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, LabelValue>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum LabelValue {
    Str(String),
    Int(i64),
}

impl LabelValue {
    fn into_string(self) -> String {
        match self {
            LabelValue::Str(s) => s,
            LabelValue::Int(i) => i.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct KubeList {
    items: Vec<KubeNode>,
}

#[derive(Deserialize)]
struct KubeNode {
    metadata: KubeMeta,
    #[serde(default)]
    status: Option<KubeStatus>,
}

#[derive(Deserialize)]
struct KubeMeta {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct KubeStatus {
    #[serde(default)]
    addresses: Vec<KubeAddress>,
}

#[derive(Deserialize)]
struct KubeAddress {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

/// Parses an inventory file's text.
pub fn parse(text: &str) -> Result<Vec<Entry>, InventoryError> {
    let trimmed = text.trim_start();
    let hosts: Vec<(String, Option<String>, BTreeMap<String, String>)> = if trimmed.starts_with('[')
    {
        let list: Vec<PlainHost> = serde_json::from_str(text).map_err(|e| json_error(text, e))?;
        list.into_iter()
            .map(|h| {
                let labels = h
                    .labels
                    .into_iter()
                    .map(|(k, v)| (k, v.into_string()))
                    .collect();
                (h.name, h.address, labels)
            })
            .collect()
    } else {
        let list: KubeList = serde_json::from_str(text).map_err(|e| {
            let mut err = json_error(text, e);
            err.message = format!(
                "{} (an object is read as `kubectl get nodes -o json` output)",
                err.message
            );
            err
        })?;
        list.items
            .into_iter()
            .map(|node| {
                let address = node.status.and_then(|s| {
                    s.addresses
                        .into_iter()
                        .find(|a| a.kind == "InternalIP")
                        .map(|a| a.address)
                });
                (node.metadata.name, address, node.metadata.labels)
            })
            .collect()
    };
    // Offsets are found by a forward scan for each name in order, so the cost stays linear.
    let mut cursor = 0;
    let mut entries = Vec::with_capacity(hosts.len());
    for (name, address, labels) in hosts {
        let needle = format!("\"{name}\"");
        let offset = match text[cursor..].find(&needle) {
            Some(i) => {
                cursor += i + needle.len();
                cursor - needle.len()
            }
            None => cursor,
        };
        entries.push(Entry {
            name,
            address,
            labels,
            offset,
        });
    }
    Ok(entries)
}

fn json_error(text: &str, e: serde_json::Error) -> InventoryError {
    let offset = text
        .split_inclusive('\n')
        .take(e.line().saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + e.column().saturating_sub(1);
    let message = e.to_string();
    let message = match message.rsplit_once(" at line ") {
        Some((m, _)) => m.to_string(),
        None => message,
    };
    InventoryError {
        message: format!("invalid inventory: {message}"),
        offset: offset.min(text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_list() {
        let text =
            r#"[{"name":"a","address":"10.0.0.1","labels":{"rack":"r1","n":3}},{"name":"b"}]"#;
        let entries = parse(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].labels["n"], "3");
        assert_eq!(entries[1].address, None);
        assert_eq!(&text[entries[1].offset..entries[1].offset + 3], "\"b\"");
    }

    #[test]
    fn kubectl_nodes() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"k1","labels":{"role":"worker"}},
            "status":{"addresses":[{"type":"Hostname","address":"k1"},{"type":"InternalIP","address":"10.1.1.1"}]}}]}"#;
        let entries = parse(text).unwrap();
        assert_eq!(entries[0].name, "k1");
        assert_eq!(entries[0].address.as_deref(), Some("10.1.1.1"));
        assert_eq!(entries[0].labels["role"], "worker");
    }

    #[test]
    fn syntax_error_points_into_the_file() {
        let text = "[\n  {\"name\": \"a\",}\n]";
        let err = parse(text).unwrap_err();
        assert!(
            err.message.starts_with("invalid inventory"),
            "{}",
            err.message
        );
        assert_eq!(text[..err.offset].matches('\n').count(), 1);
    }
}

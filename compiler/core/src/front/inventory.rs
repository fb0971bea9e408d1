//! Inventory files: hosts from JSON, either a plain list or `kubectl get nodes -o json`.
//!
//! Large fleets keep their hosts out of KDL (the kdl crate parses about 1 MB/s; serde_json is
//! two orders of magnitude faster), so this is the path for 100k-host inventories.

use bell_bundle::Labels;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub address: Option<String>,
    pub labels: Labels,
    /// The host's identity (`identity`; a kubectl node's annotation `bell/identity`),
    /// unchecked.
    pub identity: Option<String>,
    /// When an operator accepted the host (`bellc hosts accept`): its place in the order of
    /// acceptance, which `assign` follows so that an added host never takes another's role.
    pub accepted: Option<u64>,
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
    #[serde(default)]
    identity: Option<String>,
    #[serde(default)]
    accepted: Option<u64>,
}

/// A label's value: a string, or an integer taken as its decimal text.
struct LabelValue(String);

impl<'de> Deserialize<'de> for LabelValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Value;
        impl Visitor<'_> for Value {
            type Value = LabelValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<LabelValue, E> {
                Ok(LabelValue(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LabelValue, E> {
                Ok(LabelValue(v.to_string()))
            }
        }
        deserializer.deserialize_any(Value)
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
    #[serde(default)]
    annotations: BTreeMap<String, String>,
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

/// Hosts with equal labels share one map: a fleet has far fewer label sets than hosts. Each
/// host's labels are hashed once, so the hasher is a fast one (seeded: see `lower::seen`).
#[derive(Default)]
struct LabelSets(foldhash::HashMap<Labels, ()>);

impl LabelSets {
    fn intern(&mut self, labels: BTreeMap<String, String>) -> Labels {
        if let Some((shared, ())) = self.0.get_key_value(&labels) {
            return Labels::clone(shared);
        }
        let shared = Labels::new(labels);
        self.0.insert(Labels::clone(&shared), ());
        shared
    }
}

/// A plain list, read one host at a time into entries (offsets not yet known): the whole list
/// of parsed hosts is never held beside the entries made from it.
struct PlainList(Vec<Entry>);

impl<'de> Deserialize<'de> for PlainList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct List;
        impl<'de> Visitor<'de> for List {
            type Value = PlainList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of hosts")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PlainList, A::Error> {
                let mut sets = LabelSets::default();
                let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(host) = seq.next_element::<PlainHost>()? {
                    let labels = host.labels.into_iter().map(|(k, v)| (k, v.0)).collect();
                    entries.push(Entry {
                        name: host.name,
                        address: host.address,
                        labels: sets.intern(labels),
                        identity: host.identity,
                        accepted: host.accepted,
                        offset: 0,
                    });
                }
                Ok(PlainList(entries))
            }
        }
        deserializer.deserialize_seq(List)
    }
}

/// The annotation of a kubectl node that holds its bell identity.
pub const IDENTITY_ANNOTATION: &str = "bell/identity";

/// Parses an inventory file's text.
pub fn parse(text: &str) -> Result<Vec<Entry>, InventoryError> {
    let trimmed = text.trim_start();
    let mut entries = if trimmed.starts_with('[') {
        serde_json::from_str::<PlainList>(text)
            .map_err(|e| json_error(text, e))?
            .0
    } else {
        let list: KubeList = serde_json::from_str(text).map_err(|e| {
            let mut err = json_error(text, e);
            err.message = format!(
                "{} (an object is read as `kubectl get nodes -o json` output)",
                err.message
            );
            err
        })?;
        let mut sets = LabelSets::default();
        list.items
            .into_iter()
            .map(|node| {
                let address = node.status.and_then(|s| {
                    s.addresses
                        .into_iter()
                        .find(|a| a.kind == "InternalIP")
                        .map(|a| a.address)
                });
                let identity = node.metadata.annotations.get(IDENTITY_ANNOTATION).cloned();
                Entry {
                    name: node.metadata.name,
                    address,
                    labels: sets.intern(node.metadata.labels),
                    identity,
                    accepted: None,
                    offset: 0,
                }
            })
            .collect()
    };
    // Offsets are found by a forward scan for each name in order, so the cost stays linear.
    let mut cursor = 0;
    let mut needle = String::new();
    for entry in &mut entries {
        needle.clear();
        needle.push('"');
        needle.push_str(&entry.name);
        needle.push('"');
        entry.offset = match text[cursor..].find(needle.as_str()) {
            Some(i) => {
                cursor += i + needle.len();
                cursor - needle.len()
            }
            None => cursor,
        };
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
    fn equal_labels_are_one_map() {
        let text = r#"[{"name":"a","labels":{"rack":"r1","n":3}},{"name":"b","labels":{"n":"3","rack":"r1"}},
            {"name":"c","labels":{"rack":"r2"}},{"name":"d"},{"name":"e","labels":{}}]"#;
        let e = parse(text).unwrap();
        assert!(Labels::ptr_eq(&e[0].labels, &e[1].labels));
        assert!(!Labels::ptr_eq(&e[0].labels, &e[2].labels));
        assert!(Labels::ptr_eq(&e[3].labels, &e[4].labels));
        assert_eq!(e[2].labels["rack"], "r2");
        assert!(e[3].labels.is_empty());
        let wrong = parse(r#"[{"name":"a","labels":{"rack":true}}]"#).unwrap_err();
        assert!(
            wrong.message.contains("a string or an integer"),
            "{}",
            wrong.message
        );
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

//! The values a host's resolved configuration holds, one line each (`sysctl:vm.swappiness` →
//! `10`, `user:ops.shell` → `"/bin/bash"`), as `explain`, `query` and the value diff show them:
//! each written as a spec writes it, secrets as `"<secret>"` (in a sealed bundle's values file,
//! `"<secret KEYED-DIGEST>"`: [`name_sealed_secrets`]).
//!
//! A build keeps each bundle's values beside it (`OUT/values/<id>.json`), because a bundle
//! holds files, not the values they came from: `bellc diff OLD NEW --values` compares two
//! builds value by value without their specs.

use crate::kdl_text::{ident, string};
use crate::resolve::{Model, Origin, ResolvedResource};
use crate::spec::{FieldType, Value};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What explain, query and the values file show of a secret value. Not even its size or
/// digest: a bare password's digest could be guessed back from a list of common ones.
pub const SECRET: &str = "<secret>";

/// The version of `OUT/values/<id>.json`.
pub const VALUES_FORMAT: u32 = 1;

/// The values of one bundle's configuration, as `OUT/values/<id>.json` holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleValues {
    pub format: u32,
    pub target: String,
    /// By key: `sysctl:KEY` (dotted), `KIND:NAME.FIELD`, `KIND.FIELD` for a setting, and
    /// `KIND:NAME` with `(declared)` for a resource without fields.
    pub values: BTreeMap<String, String>,
}

/// A value longer than this is kept as its size and digest: a file's content or a script
/// changed is one line either way (the file-level diff shows the text), and a fleet whose
/// every host has files of its own would otherwise keep every file twice.
const LONG: usize = 160;

/// What the values file keeps of a value: the value, or when long its size and digest.
pub fn kept(value: String) -> String {
    if value.len() <= LONG {
        return value;
    }
    let sha = bell_bundle::sha256_hex(value.as_bytes());
    format!("({} bytes, sha256 {})", value.len(), &sha[..16])
}

/// The kept values of one resource, as one entry per key.
type Lines = Arc<[(String, String)]>;

thread_local! {
    /// The values of each resource already written out on this thread, by the resource (held,
    /// so that its address is not reused while it names an entry). Models share every resource
    /// a layer did not change, so a fleet whose hosts each have a bundle of their own writes
    /// out each shared resource's values (scripts, profiles: the long ones) once, not per host.
    static RESOURCE_LINES: RefCell<HashMap<usize, (Arc<ResolvedResource>, Lines)>> =
        RefCell::new(HashMap::new());
}

/// Entries the per-thread table holds before it starts afresh.
const RESOURCE_LINES_LIMIT: usize = 4096;

fn resource_lines(r: &Arc<ResolvedResource>) -> Lines {
    let lines = || -> Lines {
        let mut lines = Vec::with_capacity(r.fields.len().max(1));
        resource_values(r, |key, value, _| lines.push((key, kept(value))));
        lines.into()
    };
    RESOURCE_LINES.with(|table| {
        let mut table = table.borrow_mut();
        let id = Arc::as_ptr(r) as usize;
        if let Some((_, lines)) = table.get(&id) {
            return lines.clone();
        }
        if table.len() >= RESOURCE_LINES_LIMIT {
            table.clear();
        }
        let made = lines();
        table.insert(id, (r.clone(), made.clone()));
        made
    })
}

impl BundleValues {
    pub fn of(model: &Model, target: &str) -> BundleValues {
        let mut values = BTreeMap::new();
        for (path, s) in model.sysctl.iter() {
            values.insert(format!("sysctl:{}", dotted(path)), sysctl_value(&s.value));
        }
        for r in &model.resources {
            for (key, value) in resource_lines(r).iter() {
                values.insert(key.clone(), value.clone());
            }
        }
        BundleValues {
            format: VALUES_FORMAT,
            target: target.to_string(),
            values,
        }
    }

    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Every value of `model` with its key and the origin that set it: every sysctl, then every
/// field of every resource.
pub fn each(model: &Model, mut f: impl FnMut(String, String, &Origin)) {
    for (path, s) in model.sysctl.iter() {
        f(
            format!("sysctl:{}", dotted(path)),
            sysctl_value(&s.value),
            &s.origin,
        );
    }
    for r in &model.resources {
        resource_values(r, &mut f);
    }
}

/// Every value of one resource: each field (`KIND:NAME.FIELD`), or `(declared)` for one
/// without fields.
fn resource_values(r: &ResolvedResource, mut f: impl FnMut(String, String, &Origin)) {
    let head = resource_key(r);
    if r.fields.is_empty() {
        f(head.clone(), "(declared)".to_string(), &r.origin);
    }
    for (field, (value, origin)) in &r.fields {
        f(
            format!("{head}.{field}"),
            field_text(r, field, value),
            origin,
        );
    }
}

/// `user:ops`, or a setting's keyword (`apt`: one per host, no name).
pub fn resource_key(r: &ResolvedResource) -> String {
    if r.kind.is_setting() {
        r.kind.keyword().to_string()
    } else {
        format!("{}:{}", r.kind.keyword(), r.name)
    }
}

/// The resource a value's key belongs to and the field, when it is a resource's field:
/// `user:ops.shell` → (`user:ops`, `shell`), `apt.upgrade` → (`apt`, `upgrade`),
/// `file:/etc/a.conf.mode` → (`file:/etc/a.conf`, `mode`). A sysctl key is its own resource.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    if key.starts_with("sysctl:") {
        return None;
    }
    let word_end = key.find([':', '.']).unwrap_or(key.len());
    let kind = crate::spec::Kind::from_keyword(&key[..word_end])?;
    let (head, field) = key.rsplit_once('.')?;
    let is_field = kind.schema().iter().any(|f| f.name == field);
    (is_field && head.len() >= word_end).then_some((head, field))
}

/// Whether `r` is the resource `head` names (`user:ops`, `apt`), without building its key.
pub fn is_resource(r: &ResolvedResource, head: &str) -> bool {
    let keyword = r.kind.keyword();
    if r.kind.is_setting() {
        return head == keyword;
    }
    head.strip_prefix(keyword)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|name| name == r.name)
}

/// A sysctl path as people write the key: dotted, unless a segment holds a dot itself
/// (`net/ipv4/conf/eth0.100/rp_filter`), which only the slash form can say.
pub fn dotted(path: &str) -> String {
    if path.split('/').any(|segment| segment.contains('.')) {
        path.to_string()
    } else {
        path.replace('/', ".")
    }
}

/// As `explain` shows a sysctl: bare when a whole number, quoted otherwise.
pub fn sysctl_value(value: &str) -> String {
    number_or_string(value)
}

/// Whether explain (and query) keep a field's value to themselves: a password, and a file's
/// content when its mode keeps everyone else out or it holds a private key, as the bundle
/// marks it.
pub fn is_secret(r: &ResolvedResource, field: &str) -> bool {
    match field {
        "password" => true,
        "content" => {
            r.fields.get("mode").is_some_and(|(mode, _)| {
                matches!(mode, Value::Str(m) if bell_bundle::parse_mode(m).is_some_and(bell_bundle::private_mode))
            }) || r.fields.get("content").is_some_and(|(content, _)| {
                matches!(content, Value::Str(c) if super::looks_like_private_key(c.as_bytes()))
            })
        }
        _ => false,
    }
}

/// What a reader shows in a secret's place: `<secret from secrets/x.age>` when an encrypted
/// file of the spec held it (a review can see which file a change touched), `<secret>` else.
pub fn secret_text(from: Option<&str>) -> String {
    match from {
        Some(path) => format!("<secret from {path}>"),
        None => SECRET.to_string(),
    }
}

/// [`field_text`], a secret named by the encrypted file it came from (`from`).
pub fn field_text_from(
    r: &ResolvedResource,
    field: &str,
    value: &Value,
    from: Option<&str>,
) -> String {
    match from {
        Some(_) if is_secret(r, field) => string(&secret_text(from)),
        _ => field_text(r, field, value),
    }
}

/// A field's value on one line, as a spec writes it (a secret as `"<secret>"`, a debconf
/// password answer too).
pub fn field_text(r: &ResolvedResource, field: &str, value: &Value) -> String {
    if is_secret(r, field) {
        return string(SECRET);
    }
    let ty = r
        .kind
        .schema()
        .iter()
        .find(|f| f.name == field)
        .map(|f| f.ty);
    match (value, ty) {
        (Value::Int(secs), Some(FieldType::Duration | FieldType::DurationOrInfinite)) => {
            string(&duration(*secs))
        }
        (Value::Str(v), Some(FieldType::IntOrStr)) => number_or_string(v),
        (Value::Debconf(answers), _) => debconf_text(answers, &|_| SECRET.to_string()),
        _ => scalar(value),
    }
}

/// Debconf answers on one line, each password answer as `secret` shows it.
fn debconf_text(answers: &[crate::spec::Debconf], secret: &dyn Fn(&str) -> String) -> String {
    answers
        .iter()
        .map(|d| {
            let value = match d.kind.as_str() {
                "password" => secret(&d.value),
                _ => d.value.clone(),
            };
            format!(
                "{} type={} value={}",
                string(&d.question),
                string(&d.kind),
                string(&value)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The values of a bundle whose secrets were sealed with `key`, each secret named by its keyed
/// digest (`"<secret 3f2a9c0b1d4e5f60>"`; for a 0600 file, the start of the digest that names
/// its sealed file): a review of two builds sees which secret changed (`bellc diff --values`),
/// and a reader of OUT nothing a guess could be tested against, as with the bundle's names.
pub fn name_sealed_secrets(values: &mut BundleValues, model: &Model, key: &bell_seal::SealKey) {
    let named = |secret: &str| format!("<secret {}>", &key.digest(secret.as_bytes())[..16]);
    for r in &model.resources {
        let head = resource_key(r);
        for (field, (value, _)) in &r.fields {
            let shown = match value {
                Value::Str(secret) if is_secret(r, field) => string(&named(secret)),
                Value::Debconf(answers) if answers.iter().any(|d| d.kind == "password") => {
                    debconf_text(answers, &named)
                }
                _ => continue,
            };
            values.values.insert(format!("{head}.{field}"), kept(shown));
        }
    }
}

/// A one-line value as a spec writes it.
pub fn scalar(value: &Value) -> String {
    match value {
        Value::Bool(b) => format!("#{b}"),
        Value::Int(i) => i.to_string(),
        Value::Str(s) => string(s),
        Value::List(l) => l.iter().map(|s| string(s)).collect::<Vec<_>>().join(" "),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| format!("{}={}", ident(k), string(v)))
            .collect::<Vec<_>>()
            .join(" "),
        Value::Debconf(_) => String::new(),
        Value::WaitFor(waits) => waits.iter().map(wait_for).collect::<Vec<_>>().join("; "),
    }
}

/// One `wait-for` as a spec writes it: `"etcd" count=2 timeout="10m"`.
pub fn wait_for(w: &crate::spec::WaitFor) -> String {
    format!(
        "{} count={} timeout={}",
        string(&w.service),
        w.count,
        string(&duration(w.timeout as i64))
    )
}

/// Seconds in the largest unit that divides them: `"1h"`, `"5m"`, `"90s"`.
pub fn duration(secs: i64) -> String {
    match secs {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A value the spec may write either way (`value=65536`, `vm.swappiness 10`): bare when it is
/// a whole number that reads back the same, quoted otherwise (`"010"` stays a string).
pub fn number_or_string(s: &str) -> String {
    match s.parse::<i64>() {
        Ok(n) if n.to_string() == s => s.to_string(),
        _ => string(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_their_largest_unit() {
        assert_eq!(duration(3600), "1h");
        assert_eq!(duration(300), "5m");
        assert_eq!(duration(90), "90s");
        assert_eq!(duration(0), "0s");
    }

    #[test]
    fn a_key_splits_into_its_resource_and_field() {
        assert_eq!(split_key("user:ops.shell"), Some(("user:ops", "shell")));
        assert_eq!(split_key("apt.upgrade"), Some(("apt", "upgrade")));
        assert_eq!(
            split_key("file:/etc/a.conf.mode"),
            Some(("file:/etc/a.conf", "mode"))
        );
        assert_eq!(split_key("file:/etc/a.conf"), None);
        assert_eq!(split_key("sysctl:vm.swappiness"), None);
    }

    #[test]
    fn a_long_value_is_kept_as_its_size_and_digest() {
        assert_eq!(kept("\"short\"".to_string()), "\"short\"");
        let long = format!("\"{}\"", "x".repeat(200));
        let kept = kept(long.clone());
        assert!(kept.starts_with("(202 bytes, sha256 "), "{kept}");
        assert_eq!(kept.len(), "(202 bytes, sha256 )".len() + 16);
        assert!(kept.contains(&bell_bundle::sha256_hex(long.as_bytes())[..16]));
    }

    #[test]
    fn sysctl_keys_are_dotted_unless_a_segment_holds_a_dot() {
        assert_eq!(dotted("vm/swappiness"), "vm.swappiness");
        assert_eq!(
            dotted("net/ipv4/conf/eth0.100/rp_filter"),
            "net/ipv4/conf/eth0.100/rp_filter"
        );
    }
}

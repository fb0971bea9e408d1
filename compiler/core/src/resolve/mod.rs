//! Resolution: the typed spec × the inventory → the configuration of every host.
//!
//! Hosts that match the same overrides get the same configuration, so the work is done once
//! per distinct set of matching overrides (a `Model`), and hosts point at it. Every resolved
//! value keeps its origin (base or override, and the span that set it) for `bellc explain`.

use crate::diagnostic::Diagnostics;
use crate::front::validate;
use crate::source::{FileId, Span};
use crate::spec::*;
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use thiserror::Error;

mod checks;
mod sysctl_keys;
use checks::{identity_checks, static_checks};
pub use sysctl_keys::SysctlKeyError;

#[derive(Debug, Error, Diagnostic)]
pub enum ResolveError {
    #[error("`remove` names `{reference}`, which no layer declares")]
    #[diagnostic(code(bell::resolve::unknown_removal))]
    UnknownRemoval {
        reference: String,
        #[label("nothing to remove")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("no host carries the label `{label}`")]
    #[diagnostic(code(bell::resolve::unknown_label), severity(Warning))]
    UnknownLabel {
        label: String,
        #[label("matches nothing")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("no host carries `{selector}`: a typo of `{suggestion}`?")]
    #[diagnostic(code(bell::resolve::misspelt_selector))]
    MisspeltSelector {
        selector: String,
        suggestion: String,
        #[label("matches no host")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error(
        "host `{host}` has `{label}`{others}, one typo from `{near}` that an override matches"
    )]
    #[diagnostic(code(bell::resolve::label_value_typo), severity(Warning))]
    LabelValueTypo {
        host: String,
        label: String,
        near: String,
        others: String,
        #[label("matched by no override")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("override `{name}` matches no host")]
    #[diagnostic(code(bell::resolve::unmatched_override), severity(Warning))]
    UnmatchedOverride {
        name: String,
        #[label("applies to no host")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{resource}` is missing its required `{field}`{more}")]
    #[diagnostic(code(bell::resolve::missing_property))]
    MissingField {
        resource: String,
        field: &'static str,
        host: String,
        more: String,
        #[label("declared here without `{field}`")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("host `{host}` has no target")]
    #[diagnostic(
        code(bell::resolve::no_target),
        help("set a default on the fleet (`fleet \"NAME\" target=\"debian-12\"`) or on the host (`target=\"...\"`)")
    )]
    NoTarget {
        host: String,
        #[label("this host")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("unknown target `{target}`")]
    #[diagnostic(code(bell::resolve::unknown_target))]
    UnknownTarget {
        target: String,
        #[label("not a known target")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("the spec declares no host")]
    #[diagnostic(
        code(bell::resolve::no_hosts),
        severity(Warning),
        help("add `host \"NAME\" address=\"...\"` nodes or an `inventory \"hosts.json\"`")
    )]
    NoHosts {
        #[label("in this fleet")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("host `{host}` has no identity, and the fleet requires one")]
    #[diagnostic(
        code(bell::resolve::no_identity),
        help("give it `identity=\"ssh-ed25519 …\"` (`bell-run identity` prints it on the host, `ssh-keyscan -t ed25519 HOST` from outside), or make the fleet's identities=\"optional\"")
    )]
    NoIdentity {
        host: String,
        #[label("this host")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("hosts `{first}` and `{host}` have the same identity")]
    #[diagnostic(code(bell::resolve::shared_identity))]
    SharedIdentity {
        host: String,
        first: String,
        #[label("second host with it")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
}

impl ResolveError {
    fn file_id(&self) -> Option<FileId> {
        use ResolveError::*;
        match self {
            UnknownRemoval { file, .. }
            | UnknownLabel { file, .. }
            | MisspeltSelector { file, .. }
            | LabelValueTypo { file, .. }
            | UnmatchedOverride { file, .. }
            | MissingField { file, .. }
            | NoTarget { file, .. }
            | UnknownTarget { file, .. }
            | NoHosts { file, .. }
            | NoIdentity { file, .. }
            | SharedIdentity { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(ResolveError);

/// Which layer set a value: the base, or an override (by index into `Spec::overrides`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    pub layer: Option<usize>,
    pub span: Span,
}

impl Origin {
    pub fn layer_name<'a>(&self, spec: &'a Spec) -> &'a str {
        match self.layer {
            None => "base",
            Some(i) => &spec.overrides[i].name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SysctlValue {
    /// The key as last written (dotted, or slash form when a segment holds a dot).
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResolvedResource {
    pub kind: Kind,
    pub name: String,
    /// Where the resource was first declared among the layers this host gets.
    pub origin: Origin,
    pub fields: BTreeMap<&'static str, (Value, Origin)>,
}

impl ResolvedResource {
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind.keyword(), self.name)
    }
    // A kind reads its fields through these accessors, by name. A name its schema does not
    // declare, or a read as a type the field never has, would read as "not set" and quietly
    // change what is rendered: in debug builds (every test) it panics instead, with the name.

    /// The value of `field`, of whatever type it was written with.
    #[track_caller]
    pub fn value(&self, field: &str) -> Option<&Value> {
        self.declared(field, |_| true);
        self.fields.get(field).map(|(value, _)| value)
    }
    #[track_caller]
    pub fn str(&self, field: &str) -> Option<&str> {
        self.declared(field, |ty| {
            !matches!(
                ty,
                FieldType::Bool
                    | FieldType::Strings
                    | FieldType::StrMap
                    | FieldType::OnOffMap
                    | FieldType::DebconfList
                    | FieldType::WaitList
            )
        });
        match self.fields.get(field) {
            Some((Value::Str(s), _)) => Some(s),
            _ => None,
        }
    }
    #[track_caller]
    pub fn bool(&self, field: &str) -> Option<bool> {
        self.declared(field, |ty| {
            matches!(ty, FieldType::Bool | FieldType::BoolOrStr)
        });
        match self.fields.get(field) {
            Some((Value::Bool(b), _)) => Some(*b),
            _ => None,
        }
    }
    #[track_caller]
    pub fn list(&self, field: &str) -> &[String] {
        self.declared(field, |ty| matches!(ty, FieldType::Strings));
        match self.fields.get(field) {
            Some((Value::List(l), _)) => l,
            _ => &[],
        }
    }
    #[track_caller]
    pub fn map(&self, field: &str) -> Option<&BTreeMap<String, String>> {
        self.declared(field, |ty| {
            matches!(ty, FieldType::StrMap | FieldType::OnOffMap)
        });
        match self.fields.get(field) {
            Some((Value::Map(m), _)) => Some(m),
            _ => None,
        }
    }
    #[track_caller]
    pub fn debconf(&self) -> &[Debconf] {
        self.declared("debconf", |ty| matches!(ty, FieldType::DebconfList));
        match self.fields.get("debconf") {
            Some((Value::Debconf(d), _)) => d,
            _ => &[],
        }
    }
    /// What the resource waits for (`wait-for`), whatever its kind: none when its kind
    /// takes none.
    pub fn wait_for(&self) -> &[crate::spec::WaitFor] {
        match self.fields.get("wait-for") {
            Some((Value::WaitFor(w), _)) => w,
            _ => &[],
        }
    }
    #[track_caller]
    pub fn span_of(&self, field: &str) -> Span {
        self.declared(field, |_| true);
        self.fields
            .get(field)
            .map_or(self.origin.span, |(_, o)| o.span)
    }

    /// In debug builds, panics unless this resource's kind declares `field` with a type that
    /// `fits` the accessor.
    #[track_caller]
    fn declared(&self, field: &str, fits: fn(FieldType) -> bool) {
        // `after` is read of every resource (the order, a probe that nothing may follow),
        // whether its kind takes one or not.
        if !cfg!(debug_assertions) || field == FieldSchema::AFTER.name {
            return;
        }
        match self.kind.schema().iter().find(|f| f.name == field) {
            None => panic!(
                "kind `{}` reads field `{field}`, which its schema does not declare",
                self.kind.keyword()
            ),
            Some(f) if !fits(f.ty) => panic!(
                "kind `{}` reads field `{field}` ({:?}) as another type",
                self.kind.keyword(),
                f.ty
            ),
            Some(_) => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResolvedService {
    pub name: String,
    pub port: Option<u16>,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResolvedUses {
    pub name: String,
    pub count: u32,
    pub runtime: bool,
    pub origin: Origin,
}

/// The configuration shared by every host that matches the same overrides.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Model {
    /// The overrides applied, in the order they were applied.
    pub layers: Vec<usize>,
    /// Keyed by the sysctl path (slash form) so that both spellings of a key are one key.
    /// Shared with the model this one was built on until a layer changes a key.
    pub sysctl: Arc<BTreeMap<String, SysctlValue>>,
    /// In declaration order: base resources first, then those first declared by overrides.
    /// Each shared with the model this one was built on until a layer changes it: a fleet
    /// whose every host has an override of its own holds each host's changes, not a copy of
    /// everything.
    pub resources: Vec<Arc<ResolvedResource>>,
    pub services: Vec<ResolvedService>,
    pub uses: Vec<ResolvedUses>,
}

impl Model {
    /// The resources of one kind, in declaration order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &ResolvedResource> {
        self.resources
            .iter()
            .map(|r| &**r)
            .filter(move |r| r.kind == kind)
    }
}

#[derive(Debug, Clone)]
pub struct ResolvedHost {
    pub name: String,
    pub address: Option<String>,
    pub labels: bell_bundle::Labels,
    pub identity: Option<String>,
    pub target: String,
    pub model: Arc<Model>,
    /// Which of [`Resolution::models`] `model` is: hosts are grouped by it, never by where
    /// their model happens to be in memory.
    pub model_id: ModelId,
}

/// A configuration's place in [`Resolution::models`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelId(pub u32);

#[derive(Debug, Clone)]
pub struct Resolution {
    pub hosts: Vec<ResolvedHost>,
    /// The distinct models, in the order of the first host of each in the spec.
    pub models: Vec<Arc<Model>>,
}

/// Resolves every host. Static checks of the whole spec (removals, labels, unmatched
/// overrides) are reported once, not per host.
pub fn resolve(spec: &Spec, known_targets: &[&str], diags: &mut Diagnostics) -> Resolution {
    static_checks(spec, diags);
    identity_checks(spec, diags);
    // With errors already found (an unreadable inventory, say), "no hosts" is only an echo.
    if spec.hosts.is_empty() && !diags.has_errors() {
        if let Some(span) = spec.fleet.span {
            diags.push(ResolveError::NoHosts {
                span: span.source_span(),
                file: span.file,
            });
        }
    }

    // Index label overrides by the labels they test, so matching is linear in hosts.
    // Looked up once per host: hashed by foldhash (seeded, fast) rather than SipHash.
    let mut layer_sets: foldhash::HashMap<Vec<usize>, ModelId> = Default::default();
    let mut models: Vec<Arc<Model>> = Vec::new();
    // Models of the first layers of a host's, which hosts' models are built on.
    let mut prefixes: foldhash::HashMap<Vec<usize>, Arc<Model>> = Default::default();
    let mut matched = vec![false; spec.overrides.len()];
    let mut missing_reported: BTreeSet<(String, &'static str)> = BTreeSet::new();
    let mut hosts = Vec::with_capacity(spec.hosts.len());
    let mut target_errors: foldhash::HashSet<Span> = Default::default();
    let matcher = Matcher::new(spec);
    // Each distinct (model, target) once: the sysctl keys of its layers are checked against
    // that target's kernel.
    let mut reached: foldhash::HashSet<(ModelId, &str)> = Default::default();
    for host in &spec.hosts {
        let layers = matcher.layers_for(spec, host);
        for &i in &layers {
            matched[i] = true;
        }
        let model_id = match layer_sets.get(&layers) {
            Some(&id) => id,
            None => {
                let model = Arc::new(model_for(spec, &layers, &mut prefixes));
                check_required(&model, host, &spec.rejected, diags, &mut missing_reported);
                let id = ModelId(models.len() as u32);
                models.push(model);
                layer_sets.insert(layers.clone(), id);
                id
            }
        };
        let model = Arc::clone(&models[model_id.0 as usize]);
        let target = host.target.as_ref().or(spec.fleet.target.as_ref());
        let target = match target {
            Some(t) => {
                if !known_targets.contains(&t.value.as_str()) && target_errors.insert(t.span) {
                    let help = match validate::did_you_mean(&t.value, known_targets.iter().copied())
                    {
                        Some(s) => format!(
                            "did you mean `{s}`? known targets: {}",
                            known_targets.join(", ")
                        ),
                        None => format!("known targets: {}", known_targets.join(", ")),
                    };
                    diags.push(ResolveError::UnknownTarget {
                        target: t.value.clone(),
                        span: t.span.source_span(),
                        help,
                        file: t.span.file,
                    });
                }
                reached.insert((model_id, t.value.as_str()));
                t.value.clone()
            }
            None => {
                diags.push(ResolveError::NoTarget {
                    host: host.name.clone(),
                    span: host.span.source_span(),
                    file: host.span.file,
                });
                String::new()
            }
        };
        hosts.push(ResolvedHost {
            name: host.name.clone(),
            address: host.address.clone(),
            labels: host.labels.clone(),
            identity: host.identity.clone(),
            target,
            model,
            model_id,
        });
    }
    for (i, ov) in spec.overrides.iter().enumerate() {
        if !matched[i] && !spec.hosts.is_empty() {
            // Exclusive mode applies one override per host: one whose hosts all take another
            // is shadowed, which is not the same mistake as a selector that fits no host.
            let shadowed: Vec<&str> = spec
                .hosts
                .iter()
                .filter(|h| ov.matches.iter().any(|m| matches(m, h)))
                .map(|h| h.name.as_str())
                .collect();
            let help = match shadowed.as_slice() {
                [] => "check the `match` labels against the inventory, or remove the override"
                    .to_string(),
                hosts => format!(
                    "it matches {} ({}{}), and each takes another override: with overrides=\"exclusive\" a host takes one, a host override before label overrides and the last matching label override before earlier ones",
                    if hosts.len() == 1 { "1 host".to_string() } else { format!("{} hosts", hosts.len()) },
                    hosts.iter().take(3).copied().collect::<Vec<_>>().join(", "),
                    if hosts.len() > 3 { ", …" } else { "" }
                ),
            };
            diags.push(ResolveError::UnmatchedOverride {
                name: ov.name.clone(),
                span: ov.span.source_span(),
                help,
                file: ov.span.file,
            });
        }
    }
    let layers_of: HashMap<ModelId, &Vec<usize>> = layer_sets
        .iter()
        .map(|(layers, &id)| (id, layers))
        .collect();
    let mut by_layer: BTreeSet<(Option<usize>, String)> = BTreeSet::new();
    for (model, target) in reached {
        by_layer.insert((None, target.to_string()));
        for &i in layers_of.get(&model).copied().into_iter().flatten() {
            by_layer.insert((Some(i), target.to_string()));
        }
    }
    sysctl_keys::check(spec, &by_layer, diags);
    {
        use rayon::slice::ParallelSliceMut;
        hosts.par_sort_by(|a, b| a.name.cmp(&b.name));
    }
    Resolution { hosts, models }
}

fn matches(m: &Match, host: &Host) -> bool {
    m.holds(&host.name, &host.labels)
}

/// Finds the overrides of a host without testing every host override against every host:
/// host overrides are looked up by name, so matching stays linear in the number of hosts.
pub struct Matcher<'s> {
    by_host: HashMap<&'s str, Vec<usize>>,
    label_overrides: Vec<usize>,
}

impl<'s> Matcher<'s> {
    pub fn new(spec: &'s Spec) -> Matcher<'s> {
        let mut by_host: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut label_overrides = Vec::new();
        for (i, ov) in spec.overrides.iter().enumerate() {
            if ov.is_host_override() {
                for m in &ov.matches {
                    for c in &m.conditions {
                        let list = by_host.entry(c.value.as_str()).or_default();
                        if list.last() != Some(&i) {
                            list.push(i);
                        }
                    }
                }
            } else {
                label_overrides.push(i);
            }
        }
        Matcher {
            by_host,
            label_overrides,
        }
    }

    /// The overrides that apply to a host, in application order.
    pub fn layers_for(&self, spec: &Spec, host: &Host) -> Vec<usize> {
        let label_layers: Vec<usize> = self
            .label_overrides
            .iter()
            .copied()
            .filter(|&i| spec.overrides[i].matches.iter().any(|m| matches(m, host)))
            .collect();
        let host_layers: &[usize] = self
            .by_host
            .get(host.name.as_str())
            .map_or(&[], Vec::as_slice);
        match spec.fleet.mode {
            OverrideMode::Layered => {
                let mut all = label_layers;
                all.extend_from_slice(host_layers);
                all
            }
            OverrideMode::Exclusive => host_layers
                .last()
                .or(label_layers.last())
                .map(|&i| vec![i])
                .unwrap_or_default(),
        }
    }
}

/// Merges the base and the given overrides, in order.
pub fn merge(spec: &Spec, layers: &[usize]) -> Model {
    model_for(spec, layers, &mut Default::default())
}

/// The model of the base and `layers`: the model of all but the last layer (built once, and
/// kept in `prefixes`), with the last applied. Hosts that match the same label overrides and
/// one host override each share everything but what their own override changes.
fn model_for(
    spec: &Spec,
    layers: &[usize],
    prefixes: &mut foldhash::HashMap<Vec<usize>, Arc<Model>>,
) -> Model {
    let Some((&last, rest)) = layers.split_last() else {
        let mut model = Model::default();
        apply_layer(&mut model, None, &spec.base);
        return model;
    };
    let parent = match prefixes.get(rest) {
        Some(parent) => parent.clone(),
        None => {
            let parent = Arc::new(model_for(spec, rest, prefixes));
            prefixes.insert(rest.to_vec(), parent.clone());
            parent
        }
    };
    let mut model = Model::clone(&parent);
    model.layers = layers.to_vec();
    apply_layer(&mut model, Some(last), &spec.overrides[last].layer);
    model
}

/// Applies one layer (the base when `layer` is `None`) onto a model.
fn apply_layer(model: &mut Model, layer: Option<usize>, content: &Layer) {
    if !content.sysctl.is_empty() {
        let sysctl = Arc::make_mut(&mut model.sysctl);
        for setting in &content.sysctl {
            let path = validate::sysctl_path(&setting.key);
            match &setting.value {
                Some(value) => {
                    sysctl.insert(
                        path,
                        SysctlValue {
                            key: setting.key.clone(),
                            value: value.clone(),
                            origin: Origin {
                                layer,
                                span: setting.span,
                            },
                        },
                    );
                }
                None => {
                    sysctl.remove(&path);
                }
            }
        }
    }
    let mut index: HashMap<(Kind, String), usize> =
        if content.resources.is_empty() && content.removes.is_empty() {
            HashMap::new()
        } else {
            model
                .resources
                .iter()
                .enumerate()
                .map(|(i, r)| ((r.kind, r.name.clone()), i))
                .collect()
        };
    for decl in &content.resources {
        let key = (decl.kind, decl.name.clone());
        let fields = decl.fields.iter().map(|(name, f)| {
            (
                *name,
                (
                    f.value.clone(),
                    Origin {
                        layer,
                        span: f.span,
                    },
                ),
            )
        });
        match index.get(&key) {
            Some(&i) => Arc::make_mut(&mut model.resources[i]).fields.extend(fields),
            None => {
                index.insert(key, model.resources.len());
                model.resources.push(Arc::new(ResolvedResource {
                    kind: decl.kind,
                    name: decl.name.clone(),
                    origin: Origin {
                        layer,
                        span: decl.name_span,
                    },
                    fields: fields.collect(),
                }));
            }
        }
    }
    for removal in &content.removes {
        match removal.kind {
            RefKind::Sysctl => {
                Arc::make_mut(&mut model.sysctl).remove(&validate::sysctl_path(&removal.name));
            }
            RefKind::Resource(kind) => {
                if let Some(i) = index.remove(&(kind, removal.name.clone())) {
                    model.resources.remove(i);
                    for v in index.values_mut() {
                        if *v > i {
                            *v -= 1;
                        }
                    }
                }
            }
        }
    }
    for service in &content.services {
        model.services.retain(|s| s.name != service.name);
        model.services.push(ResolvedService {
            name: service.name.clone(),
            port: service.port,
            origin: Origin {
                layer,
                span: service.span,
            },
        });
    }
    for uses in &content.uses {
        model.uses.retain(|u| u.name != uses.name);
        model.uses.push(ResolvedUses {
            name: uses.name.clone(),
            count: uses.count,
            runtime: uses.runtime,
            origin: Origin {
                layer,
                span: uses.span,
            },
        });
    }
}

/// `rejected`: resources a layer declared with an error (already reported). An override's
/// partial declaration of one lacks what the broken declaration would have given: one mistake,
/// one error, not one more per missing property.
fn check_required(
    model: &Model,
    host: &Host,
    rejected: &BTreeSet<(crate::spec::Kind, String)>,
    diags: &mut Diagnostics,
    reported: &mut BTreeSet<(String, &'static str)>,
) {
    for resource in &model.resources {
        if rejected.contains(&(resource.kind, resource.name.clone())) {
            continue;
        }
        for field in resource.kind.schema().iter().filter(|f| f.required) {
            if resource.fields.contains_key(field.name) {
                continue;
            }
            if !reported.insert((resource.key(), field.name)) {
                continue;
            }
            let more = if resource.origin.layer.is_some() {
                format!(
                    " on host `{}` (an override declares it, and no layer gives the property)",
                    host.name
                )
            } else {
                String::new()
            };
            let how = match field.source {
                FieldSource::Prop => format!("add `{}=...` to the declaration", field.name),
                _ => format!("add a `{} ...` child node", field.name),
            };
            diags.push(ResolveError::MissingField {
                resource: resource.key(),
                field: field.name,
                host: host.name.clone(),
                more,
                span: resource.origin.span.source_span(),
                help: how,
                file: resource.origin.span.file,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ResolvedResource {
        let origin = Origin {
            layer: None,
            span: Span::new(FileId(0), (0, 0).into()),
        };
        ResolvedResource {
            kind: Kind::FILE,
            name: "/etc/a".into(),
            origin,
            fields: BTreeMap::from([("mode", (Value::Str("0600".into()), origin))]),
        }
    }

    #[test]
    fn a_kind_reads_the_fields_its_schema_declares() {
        assert_eq!(file().str("mode"), Some("0600"));
        assert_eq!(file().str("owner"), None);
        assert!(file().list("after").is_empty());
    }

    #[test]
    #[should_panic(expected = "kind `file` reads field `mdoe`, which its schema does not declare")]
    fn a_misspelt_field_is_caught_where_it_is_read() {
        file().str("mdoe");
    }

    #[test]
    #[should_panic(expected = "kind `file` reads field `mode` (Mode) as another type")]
    fn a_field_read_as_another_type_is_caught() {
        file().bool("mode");
    }
}

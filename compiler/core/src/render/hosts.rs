//! Rendering a whole fleet: every distinct host configuration once, in parallel.
//!
//! Hosts that share a model and a target get the same bundle, unless a template of theirs reads
//! `host`; so the hosts are grouped first and each group is rendered once, on as many threads
//! as there are. Warnings travel with a rendered bundle, errors replace it, and a mistake that
//! many hosts share is reported once.

use super::{HostContext, RenderedBundle, Renderer, ServiceEndpoint};
use crate::diagnostic::Diagnostics;
use crate::graph::ResourceOrder;
use crate::resolve::Resolution;
use crate::source::Sources;
use crate::spec::Spec;
use crate::targets;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// Bundles an earlier build rendered, by the digest of everything a bundle is rendered from
/// (bellc's build, the fleet's name and services, the host's model, resource order and target,
/// and the host itself where a template reads it): a rebuild renders only the hosts whose
/// inputs changed. The caller vouches that every bundle in `known` is in OUT as written.
#[derive(Debug, Default)]
pub struct RenderCache {
    /// The key sealed secrets are named and sealed with (`secrets="sealed"`): a build's, from
    /// its signing key or `--seal-key`. Without one, a command that renders without writing
    /// (plan, check) names them with a key of its own that no one keeps.
    pub seal: Option<bell_seal::SealKey>,
    pub known: HashMap<String, String>,
    /// Filled by a build: the digest and bundle of every group it rendered without a
    /// diagnostic or found in `known`, for the next build.
    pub now: Vec<(String, String)>,
    /// How many groups were found in `known` (not rendered).
    pub hits: usize,
    /// How many parts of bundles were taken from one rendered for another (see `parts`).
    pub parts_reused: usize,
}

/// What a streamed build hands its sink for each chunk of groups.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The chunk's bundles that no earlier chunk had.
    pub bundles: Vec<RenderedBundle>,
    /// Every host of the chunk, with its bundle id (also where the bundle is an earlier
    /// chunk's or, unrendered, OUT's already): a writer can link hosts while the next chunk
    /// renders rather than all of them after the last.
    pub hosts: Vec<(String, String)>,
}

impl Chunk {
    fn is_empty(&self) -> bool {
        self.bundles.is_empty() && self.hosts.is_empty()
    }
}

/// Renders every host of `resolution` a chunk of groups at a time and hands each chunk (its
/// new distinct bundles and its hosts) to `sink` while the next chunk renders, so that only two chunks of bundles
/// are ever held: a fleet whose every host has a bundle of its own builds in the memory of a
/// small one. Returns the bundle id of every host, or `None` when any host failed (the reasons
/// are in `diags`). After the first failure `sink` is not called again, but rendering goes on
/// to report every mistake; what `sink` was given before is the caller's to take back.
pub fn render_fleet_streamed<'h, E: Send>(
    spec: &Spec,
    resolution: &'h Resolution,
    orders: &[Option<Arc<ResourceOrder>>],
    sources: &Sources,
    diags: &mut Diagnostics,
    cache: &mut RenderCache,
    sink: &mut (dyn FnMut(Chunk) -> Result<(), E> + Send),
) -> Result<Option<BTreeMap<&'h str, String>>, E> {
    let services = service_endpoints(resolution);
    let renderer = Renderer::new();
    let seal_key = match spec.fleet.secrets_plaintext {
        Some(_) => None,
        None => Some(
            cache
                .seal
                .clone()
                .unwrap_or_else(bell_seal::SealKey::random),
        ),
    };
    let mut groups: BTreeMap<(crate::resolve::ModelId, &str, Option<&str>), Vec<usize>> =
        BTreeMap::new();
    let mut uses_host: HashMap<crate::resolve::ModelId, bool> = HashMap::new();
    for (i, host) in resolution.hosts.iter().enumerate() {
        let model_id = host.model_id;
        let per_host = *uses_host
            .entry(model_id)
            .or_insert_with(|| renderer.reads_host(&host.model));
        let key = (
            model_id,
            host.target.as_str(),
            per_host.then_some(host.name.as_str()),
        );
        groups.entry(key).or_default().push(i);
    }
    // In inventory order, so that chunks are the same from run to run (what is written does
    // not depend on it).
    let mut groups: Vec<(bool, Vec<usize>)> = groups
        .into_iter()
        .map(|((_, _, host), members)| (host.is_some(), members))
        .collect();
    groups.sort_unstable_by_key(|(_, members)| members[0]);
    let fleet_digest = {
        let mut d = Digest::default();
        let _ = write!(
            d,
            "bellc {}\nfleet {:?}\nplaintext {}\nservices {:?}\n",
            env!("BELLC_BUILD"),
            spec.fleet.name,
            spec.fleet.secrets_plaintext.is_some(),
            services
        );
        d.0
    };
    // What a group's bundle is rendered from; `None` where it cannot be told (no order).
    let digest_of = |members: &Vec<usize>, per_host: bool| -> Option<String> {
        let first = members[0];
        let host = &resolution.hosts[first];
        let order = orders.get(first)?.as_ref()?;
        let mut d = Digest(fleet_digest.clone());
        let _ = write!(d, "target {:?}\nmodel ", host.target);
        model_digest(&host.model, &mut d);
        let _ = write!(d, "\norder ");
        let _ = order.describe(&mut d);
        if per_host {
            let _ = write!(
                d,
                "\nhost {:?} {:?} {:?}",
                host.name, host.address, host.labels
            );
        }
        Some(format!("{:x}", sha2::Digest::finalize(d.0)))
    };
    let render_group = |members: &Vec<usize>| {
        let first = members[0];
        let host = &resolution.hosts[first];
        let mut local = Diagnostics::new();
        let (Some(Some(order)), Some(target)) = (orders.get(first), targets::get(&host.target))
        else {
            return Err(local);
        };
        let cx = HostContext {
            host,
            target,
            fleet: &spec.fleet.name,
            services: &services,
            sources,
        };
        let rendered = renderer
            .render_host_ordered(&cx, order, &mut local)
            .map(|bundle| match &seal_key {
                Some(key) => super::seal::seal_bundle(bundle, key),
                None => bundle,
            });
        if rendered.as_ref().is_some_and(|b| !b.sealed.is_empty()) {
            let lacking = members
                .iter()
                .map(|&i| &resolution.hosts[i])
                .filter(|h| h.identity.is_none());
            for host in lacking {
                // Found by name only here, on the way to an error.
                if let Some(declared) = spec.hosts.iter().find(|h| h.name == host.name) {
                    local.push(super::RenderError::SecretWithoutIdentity {
                        host: host.name.clone(),
                        span: declared.span.source_span(),
                        file: declared.span.file,
                    });
                }
            }
        }
        match rendered {
            Some(bundle) if !local.has_errors() => Ok((bundle, local)),
            _ => Err(local),
        }
    };
    // Enough groups per chunk to keep every thread busy, few enough that two chunks of
    // bundles of a host each stay small.
    let chunk_len = (64 * rayon::current_num_threads()).max(256);
    let mut seen: HashSet<String> = HashSet::new();
    let mut bundle_of: BTreeMap<&str, String> = BTreeMap::new();
    // The same mistake shows up once per host that has it: report it once, naming the hosts
    // when it is a template's (whose context is the host).
    let mut reports: Vec<(Box<dyn crate::diagnostic::SpecDiagnostic>, Vec<&str>)> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut failed = false;
    let mut unsunk = Chunk::default();
    let known = std::mem::take(&mut cache.known);
    let mut now: Vec<(String, String)> = Vec::new();
    for chunk in groups.chunks(chunk_len) {
        let pending = std::mem::take(&mut unsunk);
        let (sunk, rendered) = rayon::join(
            || match pending.is_empty() {
                true => Ok(()),
                false => sink(pending),
            },
            || {
                chunk
                    .par_iter()
                    .map(|(per_host, members)| {
                        let digest = digest_of(members, *per_host);
                        match digest.as_ref().and_then(|d| known.get(d)) {
                            Some(id) => (digest, Err(id.clone())),
                            None => (digest, Ok(render_group(members))),
                        }
                    })
                    .collect::<Vec<_>>()
            },
        );
        sunk?;
        for ((digest, result), (_, members)) in rendered.into_iter().zip(chunk) {
            let result = match result {
                // Rendered by an earlier build, and in OUT as it wrote it.
                Err(id) => {
                    for &i in members {
                        bundle_of.insert(&resolution.hosts[i].name, id.clone());
                        if !failed {
                            let name = resolution.hosts[i].name.clone();
                            unsunk.hosts.push((name, id.clone()));
                        }
                    }
                    seen.insert(id.clone());
                    cache.hits += 1;
                    now.extend(digest.map(|d| (d, id)));
                    continue;
                }
                Ok(result) => result,
            };
            let reported = match result {
                Ok((bundle, warnings)) => {
                    for &i in members {
                        bundle_of.insert(&resolution.hosts[i].name, bundle.id.clone());
                        if !failed {
                            let name = resolution.hosts[i].name.clone();
                            unsunk.hosts.push((name, bundle.id.clone()));
                        }
                    }
                    // Only what rendered without a word is taken again unrendered: a warning
                    // is said by every build. Nor a bundle with sealed secrets, which are
                    // sealed to each host from their content, not in OUT's bundle.
                    if warnings.is_empty() && bundle.sealed.is_empty() {
                        now.extend(digest.map(|d| (d, bundle.id.clone())));
                    }
                    if !failed && seen.insert(bundle.id.clone()) {
                        unsunk.bundles.push(bundle);
                    }
                    warnings
                }
                Err(errors) => {
                    failed = true;
                    errors
                }
            };
            let names = members.iter().map(|&i| resolution.hosts[i].name.as_str());
            for d in reported.into_boxed() {
                match index_of.entry(d.to_string()) {
                    std::collections::hash_map::Entry::Occupied(at) => {
                        reports[*at.get()].1.extend(names.clone())
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(reports.len());
                        reports.push((d, names.clone().collect()));
                    }
                }
            }
        }
        if failed {
            unsunk = Chunk::default();
        }
    }
    if !unsunk.is_empty() {
        sink(unsunk)?;
    }
    for (d, mut hosts) in reports {
        let per_host = super::is_template_error(d.as_ref());
        if per_host {
            hosts.sort_unstable();
            diags.push(crate::diagnostic::OnHosts::new(d, &hosts));
        } else {
            diags.push_boxed(d);
        }
    }
    if diags.has_errors() || bundle_of.len() != resolution.hosts.len() {
        return Ok(None);
    }
    now.sort_unstable();
    cache.now = now;
    cache.parts_reused = renderer.parts_reused();
    Ok(Some(bundle_of))
}

/// A sha256 that text is written into.
#[derive(Default)]
struct Digest(sha2::Sha256);

impl std::io::Write for Digest {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(&mut self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Feeds `model` to `d` as its serialised form: every field, by construction (a `Debug` that
/// left one out would let two models share a cached bundle).
fn model_digest(model: &crate::resolve::Model, d: &mut Digest) {
    // Serialising plain data into a hasher cannot fail: no map has a key that is not a string.
    let _ = serde_json::to_writer(d, model);
}

impl std::fmt::Write for Digest {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        sha2::Digest::update(&mut self.0, s.as_bytes());
        Ok(())
    }
}

/// `services.NAME` for templates: every provider, sorted by host name.
pub fn service_endpoints(resolution: &Resolution) -> BTreeMap<String, Vec<ServiceEndpoint>> {
    let mut services: BTreeMap<String, Vec<ServiceEndpoint>> = BTreeMap::new();
    for host in &resolution.hosts {
        for service in &host.model.services {
            services
                .entry(service.name.clone())
                .or_default()
                .push(ServiceEndpoint {
                    host: host.name.clone(),
                    address: host.address.clone(),
                    port: service.port,
                });
        }
    }
    for list in services.values_mut() {
        list.sort_by(|a, b| a.host.cmp(&b.host));
    }
    services
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{
        Model, Origin, ResolvedResource, ResolvedService, ResolvedUses, SysctlValue,
    };
    use crate::source::{FileId, Span};
    use crate::spec::{Kind, Value};

    fn digest(model: &Model) -> String {
        let mut d = Digest(sha2::Sha256::default());
        model_digest(model, &mut d);
        format!("{:x}", sha2::Digest::finalize(d.0))
    }

    /// The render cache shares a bundle between models only when every field is the same.
    #[test]
    fn every_field_of_a_model_is_in_its_digest() {
        let at = |offset| Origin {
            layer: None,
            span: Span {
                file: FileId(0),
                offset,
                len: 1,
            },
        };
        let base = Model {
            layers: vec![0],
            sysctl: Arc::new(BTreeMap::from([(
                "vm/swappiness".to_string(),
                SysctlValue {
                    key: "vm.swappiness".into(),
                    value: "1".into(),
                    origin: at(1),
                },
            )])),
            resources: vec![Arc::new(ResolvedResource {
                kind: Kind::USER,
                name: "ops".into(),
                origin: at(2),
                fields: BTreeMap::from([("shell", (Value::Str("/bin/sh".into()), at(3)))]),
            })],
            services: vec![ResolvedService {
                name: "etcd".into(),
                port: Some(2379),
                origin: at(4),
            }],
            uses: vec![ResolvedUses {
                name: "etcd".into(),
                count: 3,
                runtime: false,
                origin: at(5),
            }],
        };
        type Change<'a> = Box<dyn Fn(&mut Model) + 'a>;
        let changes: Vec<(&str, Change<'_>)> = vec![
            ("layers", Box::new(|m| m.layers.push(1))),
            (
                "a sysctl value",
                Box::new(|m| {
                    let mut sysctl = (*m.sysctl).clone();
                    sysctl.get_mut("vm/swappiness").unwrap().value = "2".into();
                    m.sysctl = Arc::new(sysctl);
                }),
            ),
            (
                "a field's value",
                Box::new(|m| {
                    let mut r = (*m.resources[0]).clone();
                    r.fields
                        .insert("shell", (Value::Str("/bin/bash".into()), at(3)));
                    m.resources[0] = Arc::new(r);
                }),
            ),
            (
                "a resource's kind",
                Box::new(|m| {
                    let mut r = (*m.resources[0]).clone();
                    r.kind = Kind::FILE;
                    m.resources[0] = Arc::new(r);
                }),
            ),
            ("a service's port", Box::new(|m| m.services[0].port = None)),
            ("a use's count", Box::new(|m| m.uses[0].count = 2)),
            (
                "whether a use waits",
                Box::new(|m| m.uses[0].runtime = true),
            ),
        ];
        let same = digest(&base);
        assert_eq!(same, digest(&base.clone()));
        for (what, change) in changes {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(digest(&changed), same, "{what} is not in the digest");
        }
    }
}

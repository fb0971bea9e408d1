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
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
    let groups = group_hosts(resolution, &renderer);
    let followed = followed_services(resolution);
    let fleet_digest = fleet_digest(spec, &services, &followed);
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
            followed: &followed,
            sources,
        };
        let rendered = renderer
            .render_host_ordered(&cx, order, &mut local)
            .map(|bundle| match &seal_key {
                Some(key) => {
                    let mut bundle = super::seal::seal_bundle(bundle, key);
                    if !bundle.sealed.is_empty() {
                        let mut values = (*bundle.values).clone();
                        super::values::name_sealed_secrets(&mut values, &host.model, key);
                        bundle.values = std::sync::Arc::new(values);
                    }
                    bundle
                }
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
    let known = std::mem::take(&mut cache.known);
    let mut gathered = Gathered::new(resolution);
    for chunk in groups.chunks(chunk_len) {
        let pending = std::mem::take(&mut gathered.unsunk);
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
            gathered.take(digest, result, members, &mut cache.hits);
        }
        if gathered.failed {
            gathered.unsunk = Chunk::default();
        }
    }
    if !gathered.unsunk.is_empty() {
        sink(std::mem::take(&mut gathered.unsunk))?;
    }
    let Some((bundle_of, mut now)) = gathered.finish(diags) else {
        return Ok(None);
    };
    now.sort_unstable();
    cache.now = now;
    cache.parts_reused = renderer.parts_reused();
    Ok(Some(bundle_of))
}

/// The hosts grouped by what their bundle is rendered from (model, target, and the host where
/// a template reads it), each group with whether it is one host's, in inventory order so that
/// chunks are the same from run to run (what is written does not depend on it).
fn group_hosts(resolution: &Resolution, renderer: &Renderer) -> Vec<(bool, Vec<usize>)> {
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
    let mut groups: Vec<(bool, Vec<usize>)> = groups
        .into_iter()
        .map(|((_, _, host), members)| (host.is_some(), members))
        .collect();
    groups.sort_unstable_by_key(|(_, members)| members[0]);
    groups
}

/// The start of every group's digest: what all bundles of the fleet are rendered from.
fn fleet_digest(
    spec: &Spec,
    services: &BTreeMap<String, Vec<ServiceEndpoint>>,
    followed: &BTreeSet<String>,
) -> sha2::Sha256 {
    let mut d = Digest::default();
    let _ = write!(
        d,
        "bellc {}\nfleet {:?}\nplaintext {}\nservices {:?}\nfollowed {:?}\n",
        env!("BELLC_BUILD"),
        spec.fleet.name,
        spec.fleet.secrets_plaintext.is_some(),
        services,
        followed
    );
    d.0
}

/// A group's bundle, rendered (with its warnings, or its errors) or, `Err`, the id of the one
/// an earlier build rendered from the same digest.
type GroupResult = Result<Result<(RenderedBundle, Diagnostics), Diagnostics>, String>;

/// What the rendered groups come to, gathered chunk by chunk in inventory order.
struct Gathered<'h> {
    resolution: &'h Resolution,
    /// Bundle ids already handed to the sink (or found in OUT).
    seen: HashSet<String>,
    bundle_of: BTreeMap<&'h str, String>,
    /// The same mistake shows up once per host that has it: it is reported once, naming the
    /// hosts when it is a template's (whose context is the host).
    reports: Vec<(Box<dyn crate::diagnostic::SpecDiagnostic>, Vec<&'h str>)>,
    index_of: HashMap<String, usize>,
    failed: bool,
    /// What the sink is given next.
    unsunk: Chunk,
    /// The digest and bundle of every group a next build may take unrendered.
    now: Vec<(String, String)>,
}

impl<'h> Gathered<'h> {
    fn new(resolution: &'h Resolution) -> Self {
        Gathered {
            resolution,
            seen: HashSet::new(),
            bundle_of: BTreeMap::new(),
            reports: Vec::new(),
            index_of: HashMap::new(),
            failed: false,
            unsunk: Chunk::default(),
            now: Vec::new(),
        }
    }

    /// Gives every member of a group `id` (and the sink its hosts, until something failed).
    fn link(&mut self, members: &[usize], id: &str) {
        for &i in members {
            let name = self.resolution.hosts[i].name.as_str();
            self.bundle_of.insert(name, id.to_owned());
            if !self.failed {
                self.unsunk.hosts.push((name.to_owned(), id.to_owned()));
            }
        }
    }

    fn take(
        &mut self,
        digest: Option<String>,
        result: GroupResult,
        members: &[usize],
        hits: &mut usize,
    ) {
        let result = match result {
            // Rendered by an earlier build, and in OUT as it wrote it.
            Err(id) => {
                self.link(members, &id);
                self.seen.insert(id.clone());
                *hits += 1;
                self.now.extend(digest.map(|d| (d, id)));
                return;
            }
            Ok(result) => result,
        };
        let reported = match result {
            Ok((bundle, warnings)) => {
                self.link(members, &bundle.id);
                // Only what rendered without a word is taken again unrendered: a warning is
                // said by every build. Nor a bundle with sealed secrets, which are sealed to
                // each host from their content, not in OUT's bundle.
                if warnings.is_empty() && bundle.sealed.is_empty() {
                    self.now.extend(digest.map(|d| (d, bundle.id.clone())));
                }
                if !self.failed && self.seen.insert(bundle.id.clone()) {
                    self.unsunk.bundles.push(bundle);
                }
                warnings
            }
            Err(errors) => {
                self.failed = true;
                errors
            }
        };
        let resolution = self.resolution;
        let names = members.iter().map(|&i| resolution.hosts[i].name.as_str());
        for d in reported.into_boxed() {
            match self.index_of.entry(d.to_string()) {
                std::collections::hash_map::Entry::Occupied(at) => {
                    self.reports[*at.get()].1.extend(names.clone())
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(self.reports.len());
                    self.reports.push((d, names.clone().collect()));
                }
            }
        }
    }

    /// Reports what was found into `diags`; the bundle of every host and what a next build
    /// may take unrendered, or `None` when any host failed.
    #[allow(clippy::type_complexity)]
    fn finish(
        self,
        diags: &mut Diagnostics,
    ) -> Option<(BTreeMap<&'h str, String>, Vec<(String, String)>)> {
        for (d, mut hosts) in self.reports {
            if super::is_template_error(d.as_ref()) {
                hosts.sort_unstable();
                diags.push(crate::diagnostic::OnHosts::new(d, &hosts));
            } else {
                diags.push_boxed(d);
            }
        }
        if diags.has_errors() || self.bundle_of.len() != self.resolution.hosts.len() {
            return None;
        }
        Some((self.bundle_of, self.now))
    }
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

/// The services a live file or a `wait-for` of some host follows: their providers publish
/// their health.
pub fn followed_services(resolution: &Resolution) -> BTreeSet<String> {
    let mut followed = BTreeSet::new();
    for model in &resolution.models {
        for res in model.of_kind(crate::spec::Kind::LIVE) {
            if let Some(service) = res.str("service") {
                followed.insert(service.to_string());
            }
        }
        for res in &model.resources {
            followed.extend(res.wait_for().iter().map(|w| w.service.clone()));
        }
    }
    followed
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
                    identity: host.identity.clone(),
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

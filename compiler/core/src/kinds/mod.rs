//! Resource kinds: everything particular to one kind of resource is in its file here, behind
//! [`ResourceKind`]; the registry below lists the kinds, and the stages loop over it instead of
//! naming kinds.
//!
//! A kind file holds its keyword and schema (each field with the check of its value), the check
//! of its name, and what it needs of the later stages. [`Kind`] is the handle
//! the spec types carry; the methods here let every stage ask a kind about itself without
//! importing this module.
//!
//! Adding a kind: its file here, its templates under `stdlib/<kind>/`, one line in `registry!`
//! below, and its rows in the tables of the language reference (`docs/language.md`).

use crate::diagnostic::{Diagnostics, Invalid};
use crate::graph::resources::Implied;
use crate::render::{BundleBuilder, HostContext, Part, PartInputs, Renderer};
use crate::resolve::{Model, ResolvedHost, ResolvedResource};
use crate::source::Sources;
use crate::spec::{FieldSchema, Kind};
use crate::targets::TargetPath;
use std::fmt;

pub mod apparmor;
mod apt;
mod apt_source;
mod confirm;
mod ethtool;
pub mod exec;
mod file;
mod health;
mod kernel_args;
mod limit;
pub mod live;
mod modprobe;
mod mount;
pub mod package;
mod perm;
mod reboot;
pub mod sysctl;
mod unit;
pub mod user;
mod users;

/// What the stages need to know of a resource kind.
pub trait ResourceKind: Sync {
    /// The node name in the language, also the KIND in `KIND:NAME`.
    fn keyword(&self) -> &'static str;

    /// The properties and children the node takes.
    fn schema(&self) -> &'static [FieldSchema];

    /// A settings node (`users`, `apt`) takes no name: there is one per host.
    fn is_setting(&self) -> bool {
        false
    }

    /// What the name argument is, for "missing …" messages.
    fn name_label(&self) -> &'static str {
        "name"
    }

    /// Checks the name against the tool that will read it; the error points at the name.
    fn check_name(&self, _name: &str) -> Result<(), Invalid> {
        Ok(())
    }

    /// The orderings this kind implies for its resources (see [`Implied`]).
    fn implied_order(&self) -> &'static [Implied] {
        &[]
    }

    /// Checks between the valid declarations of one host configuration (two mounts on one
    /// target), made in the first pass beside lowering's, so that one run reports them with
    /// every other mistake instead of after those are fixed.
    fn check_model(&self, _model: &Model, _sources: &Sources, _diags: &mut Diagnostics) {}

    /// Renders every resource of this kind of one host into its bundle: files, scripts,
    /// triggers. A kind whose resources only shape another kind's (a settings node) renders
    /// nothing itself and says which kind reads it.
    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    );

    /// The kinds whose resources `render` reads, when that and the target are all it reads: a
    /// host then gets what another host with the same resources of those kinds got, and the
    /// part is rendered once for both (see `render::parts`). `None` (the default) when it reads
    /// more (the host, the fleet's services) and renders for every bundle; a kind that names
    /// too few kinds here would give a host another host's output.
    fn render_reads(&self) -> Option<&'static [Kind]> {
        None
    }

    /// The template the user wrote for a resource (a file's content), if the kind has one: a
    /// bundle whose templates read `host` is rendered once per host instead of once per model.
    fn user_template<'r>(&self, _resource: &'r ResolvedResource) -> Option<&'r str> {
        None
    }

    /// The directories this kind writes into, which a target profile may move.
    fn target_paths(&self) -> &'static [TargetPath] {
        &[]
    }

    /// What this kind's resources of one configuration tell the release about its hosts (the
    /// repository snapshots they install from, whether their bundle reboots them), written
    /// into `host`. Asked once per resolved configuration.
    fn describe_in_release(&self, _model: &Model, _host: &mut bell_bundle::ReleaseHost) {}
}

/// The registry: one line per kind, `CONSTANT => the kind's definition`. The order is the order
/// resources sort in (and so the tie-break of the apply order): changing it changes bundles.
macro_rules! registry {
    ($($name:ident => $def:expr,)*) => {
        impl Kind {
            registry!(@consts 0u8; $($name,)*);

            /// Every kind, in registry order.
            pub const ALL: &'static [Kind] = &[$(Kind::$name,)*];
        }

        const REGISTRY: &[&dyn ResourceKind] = &[$(&$def,)*];
    };
    (@consts $n:expr; ) => {};
    (@consts $n:expr; $name:ident, $($rest:ident,)*) => {
        pub const $name: Kind = Kind($n);
        registry!(@consts $n + 1; $($rest,)*);
    };
}

registry! {
    LIMIT => limit::Limit,
    MOUNT => mount::Mount,
    ETHTOOL => ethtool::Ethtool,
    USERS => users::Users,
    USER => user::User,
    PACKAGE => package::Package,
    APT => apt::Apt,
    APT_SOURCE => apt_source::AptSource,
    PERM => perm::Perm,
    EXEC => exec::Exec,
    APPARMOR => apparmor::Apparmor,
    FILE => file::File,
    UNIT => unit::Unit,
    MODPROBE => modprobe::Modprobe,
    KERNEL_ARGS => kernel_args::KernelArgs,
    HEALTH => health::Health,
    REBOOT => reboot::Reboot,
    LIVE => live::Live,
    CONFIRM => confirm::Confirm,
}

impl Kind {
    fn definition(self) -> &'static dyn ResourceKind {
        // Kinds are made only by the registry, so the index is always in range.
        REGISTRY[usize::from(self.0)]
    }

    /// The node name in the language, also the KIND in `KIND:NAME`.
    pub fn keyword(self) -> &'static str {
        self.definition().keyword()
    }

    pub fn from_keyword(word: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.keyword() == word)
    }

    /// Settings nodes (`users`, `apt`) take no name: there is one per host.
    pub fn is_setting(self) -> bool {
        self.definition().is_setting()
    }

    pub fn schema(self) -> &'static [FieldSchema] {
        self.definition().schema()
    }

    /// What the name argument is, for "missing …" messages.
    pub fn name_label(self) -> &'static str {
        self.definition().name_label()
    }

    /// Checks a resource's name against the tool that will read it.
    pub fn check_name(self, name: &str) -> Result<(), Invalid> {
        self.definition().check_name(name)
    }

    /// The orderings this kind implies for its resources.
    pub fn implied_order(self) -> &'static [Implied] {
        self.definition().implied_order()
    }

    /// Checks between the declarations of one host configuration (see `check_model`).
    pub fn check_model(self, model: &Model, sources: &Sources, diags: &mut Diagnostics) {
        self.definition().check_model(model, sources, diags);
    }

    /// Renders everything one host's bundle holds: every [`Part`], in order.
    pub fn render_host(
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        for part in Part::all() {
            part.render(r, cx, out, diags);
        }
    }

    /// Makes each resource of the host that says `wait-for` wait in its bundle, with who may provide
    /// each service it waits for: whatever its kind, as `after` is.
    pub fn add_waits(cx: &HostContext, out: &mut BundleBuilder) {
        for res in &cx.host.model.resources {
            let waits = res.wait_for();
            if waits.is_empty() {
                continue;
            }
            let providers = waits
                .iter()
                .map(|w| (w.service.clone(), live::providers(cx, &w.service)))
                .collect();
            let waits = waits
                .iter()
                .map(|w| bell_bundle::live::WaitFor {
                    service: w.service.clone(),
                    count: w.count,
                    timeout: w.timeout,
                })
                .collect();
            out.add_waits(&res.key(), waits, providers);
        }
    }

    /// The template the user wrote for `resource`, if its kind has one.
    pub fn user_template(self, resource: &ResolvedResource) -> Option<&str> {
        self.definition().user_template(resource)
    }

    /// The directories this kind writes into.
    pub fn target_paths(self) -> &'static [TargetPath] {
        self.definition().target_paths()
    }

    /// Fills in what the kinds of `model` tell the release about its hosts (see
    /// `ResourceKind::describe_in_release`).
    pub fn describe_in_release(model: &Model, host: &mut bell_bundle::ReleaseHost) {
        for kind in Kind::ALL {
            kind.definition().describe_in_release(model, host);
        }
    }

    /// The directories any kind (and sysctl) writes into.
    pub fn every_target_path() -> impl Iterator<Item = &'static TargetPath> {
        std::iter::once(&sysctl::SYSCTL_DIR)
            .chain(Kind::ALL.iter().flat_map(|kind| kind.target_paths()))
    }
}

impl Part {
    /// Every part, in the order a bundle is rendered in.
    pub fn all() -> impl Iterator<Item = Part> {
        std::iter::once(Part::Sysctl).chain(Kind::ALL.iter().map(|&kind| Part::Of(kind)))
    }

    /// A number of its own, from 0.
    pub fn index(self) -> usize {
        match self {
            Part::Sysctl => 0,
            Part::Of(kind) => 1 + usize::from(kind.0),
        }
    }

    pub fn render(
        self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        match self {
            Part::Sysctl => sysctl::render(r, cx, out, diags),
            Part::Of(kind) => kind.definition().render(r, cx, out, diags),
        }
    }

    /// What the part reads of `model`; `None` when it reads more than the model's resources
    /// and the target.
    pub fn inputs(self, model: &Model) -> Option<PartInputs> {
        match self {
            Part::Sysctl => Some(PartInputs {
                resources: Vec::new(),
                sysctl: Some(model.sysctl.clone()),
            }),
            Part::Of(kind) => {
                let reads = kind.definition().render_reads()?;
                Some(PartInputs {
                    resources: model
                        .resources
                        .iter()
                        .filter(|r| reads.contains(&r.kind))
                        .cloned()
                        .collect(),
                    sysctl: None,
                })
            }
        }
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kind({})", self.keyword())
    }
}

/// Runs every kind's `check_model` once per distinct host configuration; a mistake shared by
/// many configurations (a base declaration) is reported once.
/// A resource the bundle gets without the spec declaring it, with the reason, shown by
/// `bellc explain` and the build's summary so that nothing lands that a reviewer cannot see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpliedResource {
    /// `KIND:NAME`, as in the bundle.
    pub key: String,
    pub why: String,
    /// The declaration that implies it.
    pub origin: crate::resolve::Origin,
}

/// Every resource implied for a model on a target.
pub fn implied(
    model: &crate::resolve::Model,
    target: &crate::targets::Target,
) -> Vec<ImpliedResource> {
    user::implied(model, target)
}

/// The implied resources of a fleet, each with how many hosts get it (once per distinct
/// model and target: the same for every host that shares them).
pub fn implied_in_fleet(hosts: &[ResolvedHost]) -> Vec<(ImpliedResource, usize)> {
    let mut per_model: std::collections::HashMap<
        (crate::resolve::ModelId, &str),
        Vec<ImpliedResource>,
    > = std::collections::HashMap::new();
    let mut found: Vec<(ImpliedResource, usize)> = Vec::new();
    for host in hosts {
        let key = (host.model_id, host.target.as_str());
        let implied = per_model.entry(key).or_insert_with(|| {
            crate::targets::get(&host.target)
                .map(|t| implied(&host.model, t))
                .unwrap_or_default()
        });
        for one in implied.iter() {
            match found
                .iter_mut()
                .find(|(f, _)| f.key == one.key && f.why == one.why)
            {
                Some((_, n)) => *n += 1,
                None => found.push((one.clone(), 1)),
            }
        }
    }
    found
}

pub fn check_hosts(hosts: &[ResolvedHost], sources: &Sources, diags: &mut Diagnostics) {
    use std::collections::HashSet;
    let mut seen: HashSet<crate::resolve::ModelId> = HashSet::new();
    let mut reported = HashSet::new();
    for host in hosts {
        if !seen.insert(host.model_id) {
            continue;
        }
        let mut local = Diagnostics::new();
        for &kind in Kind::ALL {
            kind.check_model(&host.model, sources, &mut local);
        }
        for d in local.into_boxed() {
            let labels: Vec<(usize, usize)> = d
                .labels()
                .map(|l| l.map(|l| (l.offset(), l.len())).collect())
                .unwrap_or_default();
            let key = (d.code().map(|c| c.to_string()), d.file(), labels);
            if reported.insert(key) {
                diags.push_boxed(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_and_the_handles_agree() {
        assert_eq!(Kind::ALL.len(), REGISTRY.len());
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(usize::from(kind.0), i);
            assert_eq!(Kind::from_keyword(kind.keyword()), Some(*kind));
        }
        let mut keywords: Vec<_> = Kind::ALL.iter().map(|k| k.keyword()).collect();
        keywords.sort_unstable();
        keywords.dedup();
        assert_eq!(keywords.len(), Kind::ALL.len(), "two kinds share a keyword");
    }
}

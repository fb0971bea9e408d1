//! Rendering: one resolved host → its bundle in memory (manifest + file contents).
//!
//! The machinery every kind renders with: the template environment ([`Renderer`], templates
//! from `stdlib/`, embedded by `build.rs`), the [`BundleBuilder`] a kind adds files, scripts and
//! triggers to, and the helpers in [`common`]. Each kind's own rendering is in its file under
//! `kinds/`; a host's bundle is sysctl (the language's own node) and then every kind of the
//! registry, in order. [`render_fleet_streamed`] renders every distinct host configuration once.
//! Values reach templates only through escaping filters (`sh`, `unit`, ...) chosen by the
//! template for its context; the environment auto-escapes nothing, because no single escaping
//! is right for config files, shell scripts and unit files at once.

pub mod budget;
pub mod common;
mod hosts;
pub mod seal;
pub mod stdlib;
mod sysctl;
pub mod undefined;
pub mod values;

pub use hosts::{render_fleet_streamed, service_endpoints, RenderCache};

use crate::diagnostic::Diagnostics;
use crate::graph::ResourceOrder;
use crate::resolve::ResolvedHost;
use crate::source::FileId;
use crate::spec::Kind;
use crate::targets::Target;
use bell_bundle::{File, Manifest, Resource, Script, Trigger};
use miette::{Diagnostic, SourceSpan};
use std::collections::BTreeMap;
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error, Diagnostic)]
pub enum RenderError {
    #[error("template error in `{resource}`: {message}")]
    #[diagnostic(code(bell::render::template))]
    Template {
        resource: String,
        message: String,
        #[label("in this template")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("`{path}` is written by both `{first}` and `{second}`")]
    #[diagnostic(code(bell::render::path_conflict))]
    PathConflict {
        path: String,
        first: String,
        second: String,
        #[label("second writer")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::render::invalid))]
    Invalid {
        message: String,
        #[label("here")]
        span: SourceSpan,
        #[help]
        help: String,
        file: FileId,
    },
    #[error("host `{host}` is given secrets, and has no identity to seal them to")]
    #[diagnostic(
        code(bell::render::secret_without_identity),
        help("give it `identity=\"ssh-ed25519 …\"` (`bell-run identity` prints it on the host, `bellc import known-hosts` reads a known_hosts file), or say secrets=\"plaintext\" on the fleet to ship its secrets in the clear for a trial")
    )]
    SecretWithoutIdentity {
        host: String,
        #[label("this host")]
        span: SourceSpan,
        file: FileId,
    },
    #[error("{message}")]
    #[diagnostic(code(bell::render::clash))]
    Clash {
        message: String,
        #[label("declared here")]
        span: SourceSpan,
        #[label("and first here")]
        first: Option<SourceSpan>,
        #[help]
        help: String,
        file: FileId,
    },
}

impl RenderError {
    fn file_id(&self) -> Option<FileId> {
        match self {
            RenderError::Template { file, .. }
            | RenderError::PathConflict { file, .. }
            | RenderError::Invalid { file, .. }
            | RenderError::SecretWithoutIdentity { file, .. }
            | RenderError::Clash { file, .. } => Some(*file),
        }
    }
}
crate::spec_diagnostic!(RenderError);

/// A bundle in memory: the manifest and the bytes of every file it lists, by their path
/// relative to the bundle directory (`root/etc/...`, `scripts/...`).
#[derive(Debug, Clone)]
pub struct RenderedBundle {
    pub manifest: Manifest,
    pub manifest_json: String,
    pub id: String,
    pub contents: BTreeMap<String, Arc<[u8]>>,
    /// The sha256 of each entry of `contents`, computed once (the manifest carries them too).
    pub sha256: BTreeMap<String, String>,
    /// The content of each sealed entry (`secrets="sealed"`), by the keyed digest that names
    /// it: not in `contents`, since it leaves the build only encrypted to each host.
    pub sealed: BTreeMap<String, Arc<[u8]>>,
    /// The values of the configuration it was rendered from, for `OUT/values/<id>.json`.
    pub values: Arc<values::BundleValues>,
}

/// Interns file contents per thread: bundles of a fleet share most of their files, so equal
/// contents are stored once and hashed once, however many bundles hold them. The fast hash only
/// finds candidates; equality is decided by comparing the bytes.
///
/// The table forgets everything once it holds [`INTERN_LIMIT`] bytes: in a fleet whose hosts
/// each have files of their own, it would otherwise keep every host's files for the whole
/// build, long after their bundles were written (see `render_fleet_streamed`). Forgetting costs
/// only a second hash of the shared files, once per limit's worth of rendering.
fn intern(content: Vec<u8>) -> (Arc<[u8]>, String) {
    use std::cell::RefCell;
    type Seen = (rustc_hash::FxHashMap<Arc<[u8]>, String>, usize);
    thread_local! {
        static SEEN: RefCell<Seen> = RefCell::new((rustc_hash::FxHashMap::default(), 0));
    }
    SEEN.with(|seen| {
        let (seen, bytes_held) = &mut *seen.borrow_mut();
        if let Some((bytes, sha)) = seen.get_key_value(content.as_slice()) {
            return (bytes.clone(), sha.clone());
        }
        if *bytes_held > INTERN_LIMIT {
            seen.clear();
            *bytes_held = 0;
        }
        let sha = bell_bundle::sha256_hex(&content);
        let bytes: Arc<[u8]> = Arc::from(content.into_boxed_slice());
        *bytes_held += bytes.len() + sha.len();
        seen.insert(bytes.clone(), sha.clone());
        (bytes, sha)
    })
}

/// How many bytes of contents one thread's intern table (and stdlib memo) holds before it
/// starts again.
const INTERN_LIMIT: usize = 16 << 20;

type StdlibMemo = (rustc_hash::FxHashMap<String, Result<String, String>>, usize);

thread_local! {
    /// Rendered stdlib templates by name and context, and the bytes they hold.
    static STDLIB_MEMO: std::cell::RefCell<StdlibMemo> = Default::default();
}

/// What a template can see of the fleet besides its own host.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ServiceEndpoint {
    pub host: String,
    pub address: Option<String>,
    pub port: Option<u16>,
}

pub struct HostContext<'a> {
    pub host: &'a ResolvedHost,
    pub target: &'a Target,
    pub fleet: &'a str,
    pub services: &'a BTreeMap<String, Vec<ServiceEndpoint>>,
    /// The spec's text, so that an error inside a multi-line string points at its line.
    pub sources: &'a crate::source::Sources,
}

pub struct Renderer {
    env: minijinja::Environment<'static>,
    /// The same environment in minijinja's debug mode, whose errors carry the failing
    /// expression's range (so that a template error can name the undefined name, see
    /// `render::undefined`). Only a template that failed renders again in it: debug mode
    /// costs about 5 % of rendering a fleet of unique hosts.
    debug_env: std::sync::OnceLock<minijinja::Environment<'static>>,
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer::new()
    }
}

/// The most steps (minijinja instructions) one user template may take: a template that loops
/// over ten thousand hosts takes about a hundred thousand.
pub const MAX_TEMPLATE_STEPS: u64 = 5_000_000;
/// The largest output of one user template.
pub const MAX_TEMPLATE_OUTPUT: usize = 16 << 20;

/// Renders `source` into a string of at most [`MAX_TEMPLATE_OUTPUT`] bytes.
fn render_bounded(
    env: &minijinja::Environment<'static>,
    source: &str,
    ctx: minijinja::Value,
) -> Result<String, minijinja::Error> {
    struct Bounded(Vec<u8>);
    impl std::io::Write for Bounded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + buf.len() > MAX_TEMPLATE_OUTPUT {
                return Err(std::io::Error::other("output too large"));
            }
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let template = env.template_from_str(source)?;
    let mut out = Bounded(Vec::new());
    match template.render_captured_to(ctx, &mut out) {
        Ok(_) => String::from_utf8(out.0).map_err(|_| {
            minijinja::Error::new(
                minijinja::ErrorKind::BadSerialization,
                "output is not UTF-8",
            )
        }),
        Err(e) if e.kind() == minijinja::ErrorKind::WriteFailure => Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            OUTPUT_TOO_LARGE,
        )),
        Err(e) => Err(e),
    }
}

/// The detail of the error of a template whose output outgrew [`MAX_TEMPLATE_OUTPUT`].
pub const OUTPUT_TOO_LARGE: &str = "the output grew past 16 MiB";

/// The second line of a stdlib script that acts on the running system only (the prelude writes
/// it when the template sets `live_only`): with `BELL_OFFLINE=1` the script exits 0 before it
/// changes anything, so its manifest entry is marked `live_only` and bell-run does not start it
/// on an image root. The second line, because nothing a spec holds comes before it.
pub const LIVE_ONLY_LINE: &str =
    "# live only: offline (BELL_OFFLINE=1) this script does nothing, and bell-run does not start it";

fn environment(debug: bool) -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(MAX_TEMPLATE_STEPS));
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_debug(debug);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    stdlib::register_filters(&mut env);
    for (name, source) in stdlib::TEMPLATES {
        // `build.rs` parsed every stdlib template with this same minijinja: none fails here.
        let _ = env.add_template(name, source);
    }
    env
}

impl Renderer {
    pub fn new() -> Renderer {
        Renderer {
            env: environment(false),
            debug_env: std::sync::OnceLock::new(),
        }
    }

    /// Renders a stdlib template. Stdlib templates are pure functions of their context, and
    /// the bundles of a fleet render the same resource again and again, so results are
    /// remembered per thread, keyed by the template and its context as JSON.
    ///
    /// Like the intern table, the memo forgets everything once it holds [`INTERN_LIMIT`]
    /// bytes: a resource of every host's own (a file from a template that reads the host) is
    /// never asked for again, and remembering it made memory grow with the fleet (5 KB a host).
    pub fn stdlib(&self, name: &str, ctx: minijinja::Value) -> Result<String, String> {
        let key = match serde_json::to_string(&ctx) {
            Ok(json) => format!("{name}\0{json}"),
            Err(_) => return self.render_stdlib(name, ctx),
        };
        if let Some(hit) = STDLIB_MEMO.with(|m| m.borrow().0.get(&key).cloned()) {
            return hit;
        }
        let result = self.render_stdlib(name, ctx);
        STDLIB_MEMO.with(|m| {
            let (memo, bytes_held) = &mut *m.borrow_mut();
            if *bytes_held > INTERN_LIMIT {
                memo.clear();
                *bytes_held = 0;
            }
            *bytes_held += key.len() + result.as_ref().map_or_else(String::len, String::len);
            memo.insert(key, result.clone());
        });
        result
    }

    fn render_stdlib(&self, name: &str, ctx: minijinja::Value) -> Result<String, String> {
        let template = self
            .env
            .get_template(name)
            .map_err(|e| format!("stdlib template `{name}`: {e}"))?;
        template
            .render(ctx)
            .map_err(|e| format!("stdlib template `{name}`: {e:#}"))
    }

    /// Whether any template of the model reads `host`, so that its bundle differs per host.
    /// A template that does not parse counts as reading it: rendering reports the error.
    pub fn reads_host(&self, model: &crate::resolve::Model) -> bool {
        model
            .resources
            .iter()
            .filter_map(|r| r.kind.user_template(r))
            .any(|source| match self.env.template_from_str(source) {
                Ok(t) => t.undeclared_variables(false).contains("host"),
                Err(_) => true,
            })
    }

    /// Renders a template written by the user (file content, unit content), within the limits
    /// of a template: [`MAX_TEMPLATE_STEPS`] steps, [`MAX_TEMPLATE_OUTPUT`] bytes of output, and
    /// [`budget::MAX_TEMPLATE_MEMORY`] held while it renders. `place` begins the diagnostic
    /// printed if the memory runs out (`bell.kdl:3:5: the template of ...`), which has to be
    /// written before rendering: when memory runs out, nothing more can be formatted.
    pub fn user_template(
        &self,
        source: &str,
        ctx: minijinja::Value,
        place: &str,
    ) -> Result<String, minijinja::Error> {
        let _guard = budget::Guard::new(
            budget::MAX_TEMPLATE_MEMORY,
            format!(
                "{place} used more than {} of memory while rendering\n  help: a template \
                 writes one file; a string that doubles in a loop grows without end. bellc \
                 stopped without writing anything\n",
                crate::front::read::bytes(budget::MAX_TEMPLATE_MEMORY as u64)
            ),
        );
        render_bounded(&self.env, source, ctx.clone()).or_else(|_| {
            render_bounded(
                self.debug_env.get_or_init(|| environment(true)),
                source,
                ctx,
            )
        })
    }

    /// Renders a host's bundle; `order` is the apply order shared by every host of its model.
    pub fn render_host_ordered(
        &self,
        cx: &HostContext,
        order: &ResourceOrder,
        diags: &mut Diagnostics,
    ) -> Option<RenderedBundle> {
        let mut out = BundleBuilder::new(cx.target, cx.fleet);
        let before = diags.error_count();
        // sysctl is the language's own node (a map of keys), not a kind of the registry.
        sysctl::render(self, cx, &mut out, diags);
        for kind in Kind::ALL {
            kind.render(self, cx, &mut out, diags);
        }
        if diags.error_count() > before {
            return None;
        }
        let mut bundle = out.finish(order);
        bundle.values = Arc::new(values::BundleValues::of(&cx.host.model, &cx.host.target));
        Some(bundle)
    }
}

/// Collects a bundle's resources and files as the kind modules add them.
pub struct BundleBuilder {
    target: String,
    fleet: String,
    resources: Vec<Resource>,
    files: BTreeMap<String, (File, String)>,
    contents: BTreeMap<String, Arc<[u8]>>,
    sha256: BTreeMap<String, String>,
    triggers: Vec<Trigger>,
    probes: Vec<bell_bundle::Probe>,
    batches: Vec<bell_bundle::Batch>,
    snapshots: bell_bundle::Snapshots,
    reboot: Option<bell_bundle::Reboot>,
    /// Values kinds declared secret (password hashes, debconf passwords): any file or script
    /// that holds one is marked secret in the manifest.
    secrets: Vec<String>,
}

pub use bell_bundle::looks_like_private_key;

/// A file a resource (or the bundle) puts on the host.
pub struct NewFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
    pub owner: String,
    pub group: String,
}

impl NewFile {
    pub fn root_owned(path: impl Into<String>, content: impl Into<Vec<u8>>, mode: u32) -> NewFile {
        NewFile {
            path: path.into(),
            content: content.into(),
            mode,
            owner: "root".into(),
            group: "root".into(),
        }
    }
}

/// What a bundle resource is listed as: a kind of the registry, one sysctl key, or a part of a
/// kind's family that the spec does not declare itself (the target's default account, which
/// `user` expires).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    Sysctl,
    Of(Kind),
    Part(&'static str),
}

impl BundleKind {
    /// The KIND of the resource's `KIND:NAME` in the manifest.
    pub fn keyword(self) -> &'static str {
        match self {
            BundleKind::Sysctl => "sysctl",
            BundleKind::Of(kind) => kind.keyword(),
            BundleKind::Part(part) => part,
        }
    }
}

/// How bell-run runs one health probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePolicy {
    pub timeout: u64,
    pub retries: u32,
    pub interval: u64,
    pub offline: bell_bundle::Offline,
}

/// A resource as a kind module describes it, before hashing.
pub struct NewResource {
    pub kind: BundleKind,
    pub name: String,
    pub files: Vec<String>,
    pub after: Vec<String>,
    pub apply: Option<String>,
    pub revert: Option<String>,
    pub exec: Option<bell_bundle::ExecPolicy>,
    /// Reads the live state back for `bell-run check` (exit 0 in sync, 2 drifted).
    pub check: Option<String>,
}

impl BundleBuilder {
    pub fn new(target: &Target, fleet: &str) -> BundleBuilder {
        BundleBuilder {
            target: target.name.clone(),
            fleet: fleet.to_string(),
            resources: Vec::new(),
            files: BTreeMap::new(),
            contents: BTreeMap::new(),
            sha256: BTreeMap::new(),
            triggers: Vec::new(),
            probes: Vec::new(),
            batches: Vec::new(),
            snapshots: BTreeMap::new(),
            reboot: None,
            secrets: Vec::new(),
        }
    }

    /// Declares a value secret: every file and script added from now on that holds it is
    /// marked secret. Kinds call this before they add what carries the value.
    pub fn secret_value(&mut self, value: &str) {
        // A very short one would mark half the bundle; what carries it is private by mode.
        if value.len() >= 6 && !self.secrets.iter().any(|s| s == value) {
            self.secrets.push(value.to_string());
        }
    }

    fn holds_secret(&self, content: &[u8]) -> bool {
        self.secrets
            .iter()
            .any(|secret| memchr::memmem::find(content, secret.as_bytes()).is_some())
    }

    /// Adds a managed file; `owner_key` names the resource that writes it, for conflicts.
    /// Returns the key of the earlier writer when the path is taken.
    pub fn add_file(&mut self, file: NewFile, owner_key: &str) -> Result<(), String> {
        if let Some((_, first)) = self.files.get(&file.path) {
            return Err(first.clone());
        }
        let secret = bell_bundle::private_mode(file.mode)
            || looks_like_private_key(&file.content)
            || self.holds_secret(&file.content);
        let (bytes, sha256) = intern(file.content);
        let size = Some(bytes.len() as u64);
        let rel = format!("{}{}", bell_bundle::ROOT_DIR, file.path);
        self.sha256.insert(rel.clone(), sha256.clone());
        self.contents.insert(rel, bytes);
        let entry = File {
            path: file.path.clone(),
            sha256,
            size,
            mode: format!("{:04o}", file.mode),
            owner: file.owner,
            group: file.group,
            secret,
            sealed: false,
        };
        self.files.insert(file.path, (entry, owner_key.to_string()));
        Ok(())
    }

    /// Adds a script; `from_stdlib` when bellc rendered it (not a user's `exec` script), and
    /// then it is live only when its second line says so.
    fn add_script(
        &mut self,
        kind: &str,
        name: &str,
        role: &str,
        text: String,
        from_stdlib: bool,
    ) -> Script {
        let path = format!("scripts/{kind}/{}.{role}", file_name_for(name));
        let secret = self.holds_secret(text.as_bytes());
        let live_only = from_stdlib && text.lines().nth(1) == Some(LIVE_ONLY_LINE);
        let (bytes, sha256) = intern(text.into_bytes());
        let size = Some(bytes.len() as u64);
        self.contents.insert(path.clone(), bytes);
        self.sha256.insert(path.clone(), sha256.clone());
        Script {
            path,
            sha256,
            size,
            secret,
            sealed: false,
            live_only,
        }
    }

    pub fn add_resource(&mut self, r: NewResource) {
        let kind = r.kind.keyword();
        let from_stdlib = r.exec.is_none();
        let apply = r
            .apply
            .map(|t| self.add_script(kind, &r.name, "apply", t, from_stdlib));
        let revert = r
            .revert
            .map(|t| self.add_script(kind, &r.name, "revert", t, from_stdlib));
        let check = r
            .check
            .map(|t| self.add_script(kind, &r.name, "check", t, from_stdlib));
        self.resources.push(Resource {
            kind: r.kind.keyword().to_string(),
            name: r.name,
            hash: String::new(),
            files: r.files,
            after: r.after,
            order_after: Vec::new(),
            apply,
            revert,
            check,
            batch: None,
            exec: r.exec,
            at_boot: false,
        });
    }

    /// Adds a resource that takes effect at the next boot (see [`Resource::at_boot`]): its
    /// check may say the host needs a reboot.
    pub fn add_boot_resource(&mut self, r: NewResource) {
        self.add_resource(r);
        if let Some(added) = self.resources.last_mut() {
            added.at_boot = true;
        }
    }

    /// Adds a resource that the check of the batch `batch` reads back (see [`Self::add_batch`]).
    pub fn add_batched_resource(&mut self, r: NewResource, batch: &str) {
        self.add_resource(r);
        if let Some(added) = self.resources.last_mut() {
            added.batch = Some(batch.to_string());
        }
    }

    /// Adds a check shared by several resources (see [`bell_bundle::Batch`]); each of them
    /// names it in its `batch`.
    pub fn add_batch(&mut self, name: &str, check: String) {
        let check = self.add_script("batch", name, "check", check, true);
        self.batches.push(bell_bundle::Batch {
            name: name.to_string(),
            check,
        });
    }

    pub fn add_trigger(&mut self, name: &str, paths: Vec<String>, script: String) {
        if self.triggers.iter().any(|t| t.name == name) {
            return;
        }
        let script = self.add_script("trigger", name, "sh", script, true);
        self.triggers.push(Trigger {
            name: name.to_string(),
            paths,
            script,
        });
    }

    /// Records that apt source `source` reads the repository snapshot `snapshot`.
    pub fn add_snapshot(&mut self, source: &str, snapshot: &str) {
        self.snapshots
            .insert(source.to_string(), snapshot.to_string());
    }

    /// Adds a health probe; `script` is its shell text, `policy` its timeout, retries and
    /// interval (the fields of [`bell_bundle::Probe`] besides the name and script).
    pub fn add_probe(&mut self, name: &str, script: String, policy: ProbePolicy) {
        let script = self.add_script("health", name, "sh", script, false);
        self.probes.push(bell_bundle::Probe {
            name: name.to_string(),
            script,
            timeout: policy.timeout,
            retries: policy.retries,
            interval: policy.interval,
            offline: policy.offline,
        });
    }

    /// A `before-reboot` or `after-boot` script: run once, like a probe, within `timeout`.
    pub fn add_reboot_hook(
        &mut self,
        name: &str,
        script: String,
        timeout: u64,
    ) -> bell_bundle::Probe {
        let script = self.add_script("reboot", name, "sh", script, false);
        bell_bundle::Probe {
            name: name.to_string(),
            script,
            timeout,
            retries: 1,
            interval: 1,
            offline: bell_bundle::Offline::Skip,
        }
    }

    /// How the host reboots (the `reboot` setting).
    pub fn set_reboot(&mut self, reboot: bell_bundle::Reboot) {
        self.reboot = Some(reboot);
    }

    /// Puts the resources in the model's apply order and gives each the dependencies the graph
    /// found. A resource a kind module adds that the graph does not know (a part of a larger
    /// resource) stays right after the last known resource added before it.
    pub fn finish(self, order: &ResourceOrder) -> RenderedBundle {
        let files: Vec<File> = self.files.into_values().map(|(f, _)| f).collect();
        let mut resources = self.resources;
        let mut last_known = 0;
        let mut rank: Vec<(usize, usize, usize)> = Vec::with_capacity(resources.len());
        for (seq, r) in resources.iter().enumerate() {
            match order.position(&r.key()) {
                Some(p) => {
                    last_known = p;
                    rank.push((p, 0, seq));
                }
                None => rank.push((last_known, 1, seq)),
            }
        }
        let mut ranked: Vec<_> = rank.into_iter().zip(resources).collect();
        ranked.sort_by_key(|(k, _)| *k);
        resources = ranked.into_iter().map(|(_, r)| r).collect();
        let present: std::collections::HashSet<String> =
            resources.iter().map(|r| r.key()).collect();
        for r in &mut resources {
            let waits = order.after_present(&r.key(), |k| present.contains(k));
            let mut after = waits.needs;
            // Edges a kind module adds itself (inside one resource family) are kept.
            for extra in std::mem::take(&mut r.after) {
                if present.contains(&extra) && !after.contains(&extra) {
                    after.push(extra);
                }
            }
            r.order_after = waits
                .order_only
                .into_iter()
                .filter(|k| !after.contains(k))
                .collect();
            r.after = after;
        }
        let mut resources = stable_topological(resources);
        for r in &mut resources {
            r.hash = r.compute_hash(&files);
        }
        let manifest = Manifest {
            format: bell_bundle::FORMAT,
            target: self.target,
            fleet: self.fleet,
            resources,
            files,
            triggers: self.triggers,
            probes: self.probes,
            batches: self.batches,
            snapshots: self.snapshots,
            reboot: self.reboot,
        };
        let manifest_json = manifest.to_json();
        let id = bell_bundle::sha256_hex(manifest_json.as_bytes());
        RenderedBundle {
            manifest,
            manifest_json,
            id,
            contents: self.contents,
            sha256: self.sha256,
            sealed: BTreeMap::new(),
            values: Arc::new(values::BundleValues {
                format: values::VALUES_FORMAT,
                target: String::new(),
                values: BTreeMap::new(),
            }),
        }
    }
}

/// Reorders resources so that every `after` target comes first, moving as little as possible
/// (among resources that are ready, the earliest goes first). The graph orders the kinds of
/// the language; resources a kind module adds on its own (a default account after the users
/// that replace it) only carry `after` edges, and bell-run requires them to point backwards.
fn stable_topological(resources: Vec<Resource>) -> Vec<Resource> {
    use std::collections::{BTreeSet, HashMap};
    let index: HashMap<String, usize> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| (r.key(), i))
        .collect();
    let mut waiting = vec![0usize; resources.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); resources.len()];
    for (i, r) in resources.iter().enumerate() {
        for dep in r.after.iter().chain(&r.order_after) {
            if let Some(&d) = index.get(dep) {
                waiting[i] += 1;
                dependents[d].push(i);
            }
        }
    }
    let mut ready: BTreeSet<usize> = (0..resources.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(resources.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.insert(d);
            }
        }
    }
    // A cycle (reported by the graph stage for the language's kinds) leaves the rest in place.
    let placed: BTreeSet<usize> = order.iter().copied().collect();
    order.extend((0..resources.len()).filter(|i| !placed.contains(i)));
    let mut slots: Vec<Option<Resource>> = resources.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// A resource name as a file name in `scripts/`: bytes outside `[A-Za-z0-9._-]` (and a
/// leading dot) are percent-encoded, so that distinct names never share a file.
pub fn file_name_for(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let safe = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if safe {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{common, sysctl};
    use crate::spec::Kind;

    /// Every host's own resource renders a stdlib script no other host asks for: the memo of
    /// rendered scripts stays within its limit however many there are.
    #[test]
    fn the_stdlib_memo_forgets_at_its_limit() {
        let renderer = super::Renderer::new();
        let content = "x".repeat(4096);
        let mut rendered = 0;
        for i in 0..10_000 {
            let ctx = minijinja::context! { kind => "file", name => format!("/etc/{i}"), role => "apply", content };
            let text = renderer
                .stdlib("common/prelude.sh.j2", ctx)
                .unwrap_or_default();
            rendered += text.len() + content.len();
        }
        let held = super::STDLIB_MEMO.with(|m| m.borrow().1);
        assert!(rendered > 2 * super::INTERN_LIMIT, "{rendered}");
        assert!(held <= super::INTERN_LIMIT + 2 * 8192, "{held}");
    }

    /// A profile that names a directory no kind writes into has a typo: it would be ignored.
    #[test]
    fn every_profile_path_is_one_a_kind_writes_into() {
        let mut known = vec![&common::UNIT_DIR, &sysctl::SYSCTL_DIR];
        known.extend(Kind::ALL.iter().flat_map(|k| k.target_paths()));
        for target in crate::targets::all().values() {
            for key in target.paths.keys() {
                assert!(
                    known.iter().any(|p| p.key == key),
                    "targets/{}.json: `paths.{key}` is no directory bell writes into",
                    target.name
                );
            }
        }
        let mut keys: Vec<_> = known.iter().map(|p| p.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), known.len(), "a key is listed twice");
    }

    #[test]
    fn script_file_names_are_injective_and_safe() {
        use super::file_name_for;
        assert_eq!(file_name_for("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(file_name_for("/etc/a_b"), "%2Fetc%2Fa_b");
        assert_ne!(file_name_for("/etc/a/b"), file_name_for("/etc/a%2Fb"));
        assert_eq!(file_name_for(".."), "%2E.");
    }
}

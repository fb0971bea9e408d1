//! Rendering: one resolved host → its bundle in memory (manifest + file contents).
//!
//! The machinery every kind renders with: the template environment ([`Renderer`], templates
//! from `stdlib/`, embedded by `build.rs`), the [`BundleBuilder`] a kind adds files, scripts and
//! triggers to, and the helpers in [`common`]. Each kind's own rendering is in its file under
//! `kinds/`; a host's bundle is sysctl (the language's own node) and then every kind of the
//! registry, in order; a part a kind renders from its resources alone is rendered once for
//! every bundle that shares those resources ([`parts`]). [`render_fleet_streamed`] renders
//! every distinct host configuration once.
//! Values reach templates only through escaping filters (`sh`, `unit`, ...) chosen by the
//! template for its context; the environment auto-escapes nothing, because no single escaping
//! is right for config files, shell scripts and unit files at once.

pub mod budget;
mod bundle;
pub mod common;
mod hosts;
mod parts;
pub mod seal;
pub mod stdlib;
pub mod undefined;
pub mod values;

pub use bell_bundle::looks_like_private_key;
pub use bundle::{file_name_for, BundleBuilder, BundleKind, NewFile, NewResource, ProbePolicy};
pub use hosts::{followed_services, render_fleet_streamed, service_endpoints, Chunk, RenderCache};
pub use parts::{Part, PartInputs};

use crate::diagnostic::Diagnostics;
use crate::graph::ResourceOrder;
use crate::resolve::ResolvedHost;
use crate::source::FileId;
use crate::spec::Kind;
use crate::targets::Target;
use bell_bundle::{File, Manifest, Resource, Script, Trigger};
use miette::{Diagnostic, SourceSpan};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use thiserror::Error;

/// Whether `d` is a user template's error (reported once per template, with its hosts), also
/// once it names those hosts.
pub fn is_template_error(d: &dyn crate::diagnostic::SpecDiagnostic) -> bool {
    let d = match d.downcast_ref::<crate::diagnostic::OnHosts>() {
        Some(on_hosts) => on_hosts.inner(),
        None => d,
    };
    matches!(
        d.downcast_ref::<RenderError>(),
        Some(RenderError::Template { .. })
    )
}

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
    #[error("the template of `{resource}` on host `{host}` {what}")]
    #[diagnostic(
        code(bell::render::template_memory),
        help(
            "a template writes one file; a string that doubles in a loop grows without end. \
             Nothing was written"
        )
    )]
    TemplateMemory {
        resource: String,
        host: String,
        /// `used more than 256 MiB of memory while rendering`, or why it was not rendered.
        what: String,
        #[label("this template")]
        span: SourceSpan,
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
            | RenderError::TemplateMemory { file, .. }
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
    type Seen = (foldhash::HashMap<Arc<[u8]>, String>, usize);
    thread_local! {
        static SEEN: RefCell<Seen> = RefCell::new((foldhash::HashMap::default(), 0));
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

type StdlibMemo = (foldhash::HashMap<String, Result<String, String>>, usize);

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
    /// The key its reports are signed with, for the live files that list it; not for templates.
    #[serde(skip)]
    pub identity: Option<String>,
}

pub struct HostContext<'a> {
    pub host: &'a ResolvedHost,
    pub target: &'a Target,
    pub fleet: &'a str,
    pub services: &'a BTreeMap<String, Vec<ServiceEndpoint>>,
    /// The services some host's live file follows: their providers publish their health.
    pub followed: &'a std::collections::BTreeSet<String>,
    /// The spec's text, so that an error inside a multi-line string points at its line.
    pub sources: &'a crate::source::Sources,
}

pub struct Renderer {
    env: Arc<minijinja::Environment<'static>>,
    /// The same environment in minijinja's debug mode, whose errors carry the failing
    /// expression's range (so that a template error can name the undefined name, see
    /// `render::undefined`). Only a template that failed renders again in it: debug mode
    /// costs about 5 % of rendering a fleet of unique hosts.
    debug_env: Arc<std::sync::OnceLock<minijinja::Environment<'static>>>,
    /// Parts of bundles rendered already (see [`parts`]); `None` with `BELLC_PART_MEMO=off`
    /// in the environment, which renders every part of every bundle: for the test that
    /// compares the two, and for anyone who suspects the memo.
    parts: Option<parts::PartMemo>,
    /// The user templates that ran out of memory in this build, by their text.
    exhausted: std::sync::Mutex<HashSet<String>>,
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
/// The detail of the error of a template that held more than its memory budget.
pub const TEMPLATE_MEMORY: &str = "the template held more than its memory while rendering";
/// The detail of the error of a template not rendered because it ran out of memory before.
pub const TEMPLATE_MEMORY_BEFORE: &str = "the template ran out of memory for another host";

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
            env: Arc::new(environment(false)),
            debug_env: Arc::default(),
            parts: match std::env::var_os("BELLC_PART_MEMO") {
                Some(v) if v == "off" => None,
                _ => Some(parts::PartMemo::default()),
            },
            exhausted: Default::default(),
        }
    }

    /// How many parts of bundles were taken from the memo instead of rendered.
    pub fn parts_reused(&self) -> usize {
        self.parts.as_ref().map_or(0, parts::PartMemo::reused)
    }

    /// Renders a stdlib template. Stdlib templates are pure functions of their context, and
    /// the bundles of a fleet render the same resource again and again, so results are
    /// remembered per thread, keyed by the template and its context as JSON.
    ///
    /// Like the intern table, the memo forgets everything once it holds [`INTERN_LIMIT`]
    /// bytes: a resource of every host's own (a file from a template that reads the host) is
    /// never asked for again, and remembering it made memory grow with the fleet (5 KB a host).
    pub fn stdlib(&self, name: &str, ctx: minijinja::Value) -> Result<String, String> {
        match serde_json::to_string(&ctx) {
            Ok(json) => {
                self.remembered(format!("{name}\0{json}"), || self.render_stdlib(name, ctx))
            }
            Err(_) => self.render_stdlib(name, ctx),
        }
    }

    /// [`Self::stdlib`] for a context made of `parts` and nothing else, remembered by the
    /// parts as they are: building the context and writing it as JSON for the key costs more
    /// than the lookup, and a part that renders for every key of every bundle (a sysctl key's
    /// scripts) asks for the same few again and again.
    pub fn stdlib_of_parts(
        &self,
        name: &str,
        parts: &[&str],
        ctx: impl FnOnce() -> minijinja::Value,
    ) -> Result<String, String> {
        // Each part with its length, so that no two lists of parts give one key; and `\0\u{1}`
        // after the name where a JSON key has `\0{`.
        let mut key = format!("{name}\0\u{1}");
        for part in parts {
            key.push_str(&part.len().to_string());
            key.push(':');
            key.push_str(part);
        }
        self.remembered(key, || self.render_stdlib(name, ctx()))
    }

    fn remembered(
        &self,
        key: String,
        render: impl FnOnce() -> Result<String, String>,
    ) -> Result<String, String> {
        if let Some(hit) = STDLIB_MEMO.with(|m| m.borrow().0.get(&key).cloned()) {
            return hit;
        }
        let result = render();
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
        // A live file's entry names its host (for `host` in a template bell-run renders).
        model.of_kind(crate::spec::Kind::LIVE).next().is_some()
            || model
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
    /// [`budget::MAX_TEMPLATE_MEMORY`] held while it renders (on a helper thread, see
    /// [`budget`]). A template that ran out of memory fails with [`TEMPLATE_MEMORY`], and is
    /// not rendered again for another host of the build ([`TEMPLATE_MEMORY_BEFORE`]): each
    /// try would keep its budget held.
    pub fn user_template(
        &self,
        source: &str,
        ctx: minijinja::Value,
    ) -> Result<String, minijinja::Error> {
        let memory_error =
            |detail| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, detail);
        // A lock poisoned by a panic counts the template as spent: it is not tried again.
        if self.exhausted.lock().map_or(true, |s| s.contains(source)) {
            return Err(memory_error(TEMPLATE_MEMORY_BEFORE));
        }
        let (env, debug_env, text) = (
            Arc::clone(&self.env),
            Arc::clone(&self.debug_env),
            source.to_string(),
        );
        let rendered = budget::run_within(budget::MAX_TEMPLATE_MEMORY, move || {
            render_bounded(&env, &text, ctx.clone()).or_else(|_| {
                render_bounded(debug_env.get_or_init(|| environment(true)), &text, ctx)
            })
        });
        match rendered {
            Ok(result) => result,
            Err(budget::Stopped::OverBudget) => {
                if let Ok(mut sources) = self.exhausted.lock() {
                    sources.insert(source.to_string());
                }
                Err(memory_error(TEMPLATE_MEMORY))
            }
            Err(budget::Stopped::Lost) => Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                "the template engine stopped while rendering it",
            )),
        }
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
        match &self.parts {
            Some(memo) => memo.render_host(self, cx, &mut out, diags),
            None => Kind::render_host(self, cx, &mut out, diags),
        }
        if diags.error_count() > before {
            return None;
        }
        Kind::add_waits(cx, &mut out);
        let mut bundle = out.finish(order);
        bundle.values = Arc::new(values::BundleValues::of(&cx.host.model, &cx.host.target));
        Some(bundle)
    }
}

#[cfg(test)]
mod tests;

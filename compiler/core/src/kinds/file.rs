//! `file`: a file bell owns at an absolute path, its content a template.
//!
//! file and unit: arbitrary managed files and systemd units whose content is a minijinja
//! template over the host (`host.name`, `host.address`, `host.labels`), the fleet's services
//! (`services.NAME` → `[{host, address, port}]`) and the fleet name. A template error points at
//! the line inside the spec string; two resources writing one path name both.

use super::ResourceKind;
use crate::diagnostic::Diagnostics;
use crate::diagnostic::Invalid;
use crate::front::validate;
use crate::graph::resources::Implied;
use crate::render::undefined;
use crate::render::{
    common, looks_like_private_key, BundleBuilder, BundleKind, HostContext, NewFile, NewResource,
    RenderError, Renderer,
};
use crate::resolve::{Model, ResolvedResource};
use crate::spec::Kind;
use crate::spec::{FieldSchema, FieldSource::*, FieldType::*};
use minijinja::context;

/// The batch whose one check reads back every unit the spec enables or starts.
const UNIT_BATCH: &str = "unit";

pub struct File;

impl ResourceKind for File {
    fn keyword(&self) -> &'static str {
        "file"
    }

    fn schema(&self) -> &'static [FieldSchema] {
        const SCHEMA: &[FieldSchema] = &[
            FieldSchema::new("mode", Prop, Mode, false),
            FieldSchema::new("owner", Prop, Str, false).checked(validate::unix_user_name),
            FieldSchema::new("group", Prop, Str, false).checked(validate::unix_group_name),
            FieldSchema::new("content", ChildArg, Str, true),
            FieldSchema::AFTER,
        ];
        SCHEMA
    }

    fn name_label(&self) -> &'static str {
        "path"
    }

    fn check_name(&self, name: &str) -> Result<(), Invalid> {
        validate::absolute_path(name)?;
        if name == validate::TRUST_FILE {
            return Ok(());
        }
        validate::not_bell_own(name)
    }

    /// A `file` on what a `user` writes (its authorized_keys, its sudoers drop-in) would be
    /// overwritten by one or the other on every apply, in an order nobody chose.
    fn check_model(&self, model: &Model, _: &crate::source::Sources, diags: &mut Diagnostics) {
        let users: Vec<&ResolvedResource> = model.of_kind(Kind::USER).collect();
        if users.is_empty() {
            return;
        }
        for f in model.of_kind(Kind::FILE) {
            for user in &users {
                if let Some((what, field)) = super::user::writes(user, &f.name) {
                    common::clash(
                        diags,
                        format!(
                            "`{}` is the {what} of user `{}`, which bell writes for the user",
                            f.name, user.name
                        ),
                        user.span_of(field),
                        f.origin.span,
                        format!(
                            "give the user's {what} through the `user` (its `{field}`), or remove this `file`"
                        ),
                    );
                }
            }
        }
    }

    fn render(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let unit_dir = cx.target.path(&common::UNIT_DIR);
        let mut reload = false;
        let mut units = Vec::new();
        for res in cx
            .host
            .model
            .resources
            .iter()
            .filter(|res| matches!(res.kind, Kind::FILE | Kind::UNIT))
        {
            let Some(content) = content(r, cx, res, diags) else {
                continue;
            };
            let path = match res.kind {
                Kind::UNIT => format!("{unit_dir}/{}", res.name),
                _ => res.name.clone(),
            };
            // A unit file is root's, 0644: only a file says otherwise.
            let given = |field| (res.kind == Kind::FILE).then(|| res.str(field)).flatten();
            let mode = given("mode").unwrap_or("0644");
            let owner = given("owner").unwrap_or("root");
            let group = given("group").unwrap_or("root");
            let mode_bits = u32::from_str_radix(mode, 8).unwrap_or(0o644);
            if mode_bits & 0o004 != 0 && looks_like_private_key(content.as_bytes()) {
                // At the mode when the spec gave one, else at the content.
                let field = if given("mode").is_some() {
                    "mode"
                } else {
                    "content"
                };
                common::invalid(
                    diags,
                    res.span_of(field),
                    format!(
                        "`{}` holds a private key but everyone could read it (mode {mode})",
                        res.key()
                    ),
                    "give it `mode=\"0600\"` (or `\"0640\"` with the group that needs it)",
                );
                continue;
            }
            if path == validate::TRUST_FILE && res.kind == Kind::FILE {
                if let Err((field, message, help)) = trust_file(&content, mode_bits, owner, group) {
                    common::invalid(diags, res.span_of(field), message, help);
                    continue;
                }
            }
            let digest = bell_bundle::sha256_hex(content.as_bytes());
            let install_links = install_links(&content);
            let file = NewFile {
                path: path.clone(),
                content: content.into_bytes(),
                // The mode was validated when the spec was lowered.
                mode: mode_bits,
                owner: owner.into(),
                group: group.into(),
            };
            if let Err(first) = out.add_file(file, &res.key()) {
                conflict(cx, diags, res, &path, &first);
                continue;
            }
            reload |= path.starts_with(&format!("{unit_dir}/"));
            // A secret's plain digest would confirm a guess to anyone who reads the served
            // scripts: its scripts name none, and read the content from bell-run's own copy.
            let secret = out.file_is_secret(&path);
            let sha256 = (!secret).then_some(digest);
            let mut batched = false;
            let (kind, scripts) = match res.kind {
                Kind::UNIT => {
                    let enable = res.bool("enable").unwrap_or(false);
                    let start = res.bool("start").unwrap_or(enable);
                    // Reported in the first pass (the unit kind's `check_model`).
                    if (enable || start) && res.name.contains("@.") {
                        continue;
                    }
                    let ctx = context! {
                        unit => res.name, unit_dir, unit_hash => sha256, secret, enable, start, install_links,
                    };
                    // A unit neither enabled nor started has nothing live to read back; the
                    // others are read back by one check (see the template).
                    if enable || start {
                        batched = true;
                        units.push(context! { unit => res.name, enable, start, install_links });
                    }
                    (
                        Kind::UNIT,
                        ["apply", "revert"].map(|role| {
                            common::script(
                                r,
                                "unit",
                                &res.name,
                                role,
                                &format!("unit/{role}.sh.j2"),
                                ctx.clone(),
                            )
                            .map(Some)
                        }),
                    )
                }
                _ => {
                    let ctx = context! { path, sha256, secret, mode, owner, group };
                    let apply =
                        common::script(r, "file", &res.name, "apply", "file/apply.sh.j2", ctx);
                    // bell-run removes a departed file itself; there is nothing else to undo.
                    (Kind::FILE, [apply.map(Some), Ok(None)])
                }
            };
            match scripts {
                [Ok(apply), Ok(revert)] => {
                    let resource = NewResource {
                        kind: BundleKind::Of(kind),
                        name: res.name.clone(),
                        files: vec![path],
                        lines_in: Vec::new(),
                        after: res.list("after").to_vec(),
                        apply,
                        revert,
                        exec: None,
                        check: None,
                    };
                    if batched {
                        out.add_batched_resource(resource, UNIT_BATCH);
                    } else {
                        out.add_resource(resource);
                    }
                }
                [Err(message), _] | [_, Err(message)] => {
                    common::invalid(diags, res.origin.span, message, "")
                }
            }
        }
        if !units.is_empty() {
            let ctx = context! { units, unit_dir };
            match common::script(
                r,
                "batch",
                UNIT_BATCH,
                "check",
                "unit/check-batch.sh.j2",
                ctx,
            ) {
                Ok(check) => out.add_batch(UNIT_BATCH, check, None),
                Err(message) => {
                    common::invalid(diags, cx.host.model.resources[0].origin.span, message, "")
                }
            }
        }
        if reload {
            if let Err(message) = common::daemon_reload_trigger(r, cx, out) {
                common::invalid(diags, cx.host.model.resources[0].origin.span, message, "");
            }
        }
    }

    fn user_template<'r>(&self, resource: &'r ResolvedResource) -> Option<&'r str> {
        resource.str("content")
    }

    fn implied_order(&self) -> &'static [Implied] {
        &[
            Implied::AfterEvery(Kind::PACKAGE, super::package::PACKAGES_FIRST),
            Implied::AfterNamedBy {
                field: "owner",
                kind: Kind::USER,
                why: super::user::OWNER_FIRST,
            },
        ]
    }
}

/// Renders the resource's content template, reporting errors at the template's line.
fn content(
    r: &Renderer,
    cx: &HostContext,
    res: &ResolvedResource,
    diags: &mut Diagnostics,
) -> Option<String> {
    let source = res.str("content")?;
    let host = context! {
        name => cx.host.name, address => cx.host.address, labels => cx.host.labels,
    };
    let ctx = context! { host, services => cx.services, fleet => context! { name => cx.fleet } };
    match r.user_template(source, ctx.clone()) {
        Ok(text) => Some(text),
        Err(e)
            if e.detail() == Some(crate::render::TEMPLATE_MEMORY)
                || e.detail() == Some(crate::render::TEMPLATE_MEMORY_BEFORE) =>
        {
            let field = res.span_of("content");
            let what = match e.detail() {
                Some(crate::render::TEMPLATE_MEMORY) => format!(
                    "used more than {} of memory while rendering",
                    crate::front::read::bytes(crate::render::budget::MAX_TEMPLATE_MEMORY as u64)
                ),
                _ => format!(
                    "was not rendered: it used more than {} of memory for another host",
                    crate::front::read::bytes(crate::render::budget::MAX_TEMPLATE_MEMORY as u64)
                ),
            };
            diags.push(RenderError::TemplateMemory {
                resource: res.key(),
                host: cx.host.name.clone(),
                what,
                span: field.source_span(),
                file: field.file,
            });
            None
        }
        Err(e) => {
            let field = res.span_of("content");
            let mut span = match e.line() {
                Some(line) => common::line_in_string(cx.sources, field, line),
                None => field,
            };
            let expr = e
                .range()
                .and_then(|range| undefined::expression(source, range));
            let missing = (e.kind() == minijinja::ErrorKind::UndefinedError)
                .then(|| expr.and_then(|expr| undefined::undefined(source, expr, &ctx)))
                .flatten();
            let (message, help) = match missing {
                Some(missing) => {
                    // Point at the name itself where the spec spells it as the template does.
                    let text = cx.sources.slice(span);
                    if let Some(at) = expr.and_then(|expr| text.find(expr)) {
                        // The missing step and what leads to it: `service` of `service.etcd`.
                        let len = match expr {
                            Some(expr) if expr.starts_with(&missing.name) => missing.name.len(),
                            Some(expr) => expr.len(),
                            None => 0,
                        };
                        span = crate::source::Span::new(span.file, (span.offset + at, len).into());
                    }
                    undefined_message(&missing)
                }
                None if e.kind() == minijinja::ErrorKind::OutOfFuel => (
                    format!(
                        "the template took more than {} steps",
                        crate::render::MAX_TEMPLATE_STEPS
                    ),
                    "a template writes one file: loop over the hosts and services it names, \
                     not over a range that large"
                        .to_string(),
                ),
                None if e.detail() == Some(crate::render::OUTPUT_TOO_LARGE) => (
                    crate::render::OUTPUT_TOO_LARGE.to_string(),
                    "a managed file holds at most 16 MiB; ship a large file as a package"
                        .to_string(),
                ),
                None => {
                    let detail = e
                        .detail()
                        .map_or_else(|| e.kind().to_string(), str::to_string);
                    (
                        detail,
                        "the template sees `host` (name, address, labels), `services` (NAME → \
                         list of {host, address, port}) and `fleet` (name); undefined names are \
                         errors"
                            .to_string(),
                    )
                }
            };
            let message = match e.line() {
                Some(line) => format!("line {line} of the content: {message}"),
                None => message,
            };
            diags.push(RenderError::Template {
                resource: res.key(),
                message,
                span: span.source_span(),
                help,
                file: span.file,
            });
            None
        }
    }
}

/// `p.adress is undefined` with a did-you-mean among what `p` has.
fn undefined_message(missing: &undefined::Undefined) -> (String, String) {
    let message = format!("`{}` is undefined", missing.name);
    let last = missing.name.rsplit('.').next().unwrap_or(&missing.name);
    let prefix = if missing.within.is_empty() {
        String::new()
    } else {
        format!("{}.", missing.within)
    };
    let there = if missing.within.is_empty() {
        "the template sees".to_string()
    } else {
        format!("`{}` has", missing.within)
    };
    let list = if missing.known.is_empty() {
        format!("{there} nothing")
    } else {
        format!("{there}: {}", missing.known.join(", "))
    };
    let help = match crate::front::validate::did_you_mean(
        last,
        missing.known.iter().map(String::as_str),
    ) {
        Some(closest) => format!("did you mean `{prefix}{closest}`? {list}"),
        None => list,
    };
    (message, help)
}

fn conflict(
    cx: &HostContext,
    diags: &mut Diagnostics,
    res: &ResolvedResource,
    path: &str,
    first: &str,
) {
    let first_decl = cx.host.model.resources.iter().find(|o| o.key() == first);
    match first_decl {
        Some(other) => common::clash(
            diags,
            format!("`{path}` is written by both `{first}` and `{}`", res.key()),
            other.origin.span,
            res.origin.span,
            "one resource per path: remove one of them, or merge their content".into(),
        ),
        None => diags.push(RenderError::PathConflict {
            path: path.to_string(),
            first: first.to_string(),
            second: res.key(),
            span: res.origin.span.source_span(),
            help: format!("bell writes `{path}` for `{first}` itself; choose another path"),
            file: res.origin.span.file,
        }),
    }
}

/// The `[Install]` section of a unit as the symlinks `systemctl enable` makes (directories
/// relative to the unit directory), for enabling while baking an image with no systemd running.
fn install_links(unit: &str) -> Vec<minijinja::Value> {
    let mut section = "";
    let mut dirs = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') && line.ends_with(']') {
            section = line;
            continue;
        }
        if section != "[Install]" {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let suffix = match key.trim() {
            "WantedBy" => "wants",
            "RequiredBy" => "requires",
            "UpheldBy" => "upholds",
            _ => continue,
        };
        // A name systemd would refuse cannot become a directory outside the unit directory.
        for target in value
            .split_whitespace()
            .filter(|t| crate::front::validate::systemd_unit_name(t).is_ok())
        {
            dirs.push(format!("{target}.{suffix}"));
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs.into_iter().map(|dir| context! { dir }).collect()
}

/// The trusted keys file must hold keys a host can read, and nobody but root may be able to
/// change it: bell-run refuses a trust file that is not root's or that group or others can
/// write, and a host refusing its trust file refuses every release. So what would only be
/// found on the host is found here. `Err((field, message, help))`.
fn trust_file(
    content: &str,
    mode: u32,
    owner: &str,
    group: &str,
) -> Result<(), (&'static str, String, &'static str)> {
    let path = validate::TRUST_FILE;
    if owner != "root" {
        return Err((
            "owner",
            format!("`{path}` must belong to root, not `{owner}`"),
            "leave `owner` out: bell-run trusts only a trust file that root owns",
        ));
    }
    if group != "root" && mode & 0o020 != 0 {
        return Err((
            "group",
            format!("`{path}` would be writable by group `{group}`"),
            "leave `group` out, or drop the group's write bit from `mode`",
        ));
    }
    if mode & 0o022 != 0 {
        return Err((
            "mode",
            format!("`{path}` would be writable by others than root (mode {mode:04o})"),
            "give it `mode=\"0644\"`: bell-run refuses a trust file that others can write",
        ));
    }
    let mut keys = 0;
    for line in content.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with("untrusted comment:") {
            continue;
        }
        if !is_minisign_public_key(line) {
            return Err((
                "content",
                format!("`{path}` holds `{line}`, which is not a minisign public key"),
                "paste the `.pub` files of the keys to trust (`bellc keygen` writes them), one \
                 after another",
            ));
        }
        keys += 1;
    }
    if keys == 0 {
        return Err((
            "content",
            format!("`{path}` holds no key: every host would refuse every release"),
            "paste the `.pub` file of at least the key that signs the releases",
        ));
    }
    Ok(())
}

/// minisign's public key line: base64 of `Ed`, an 8-byte key id and a 32-byte Ed25519 key.
fn is_minisign_public_key(line: &str) -> bool {
    use ct_codecs::{Base64, Decoder};
    Base64::decode_to_vec(line, None)
        .is_ok_and(|bytes| bytes.len() == 42 && bytes.starts_with(b"Ed"))
}

//! The nodes that bring in hosts and files: `fleet`, `host`, `inventory` (JSON) and `include`
//! (globs relative to the including file, only inside the spec's own tree, cycles reported).

use super::*;

/// `path` with its `.` and `..` resolved by their names alone (no symlink is followed).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What a node wants to read, for [`Lowerer::read_in_tree`].
pub(super) struct Wanted<'a> {
    pub what: &'static str,
    /// The path as the spec wrote it, relative to the file that names it.
    pub shown: &'a str,
    pub max: u64,
    /// How to name the file right, when it cannot be read.
    pub help: &'a str,
}

impl Lowerer<'_> {
    pub(super) fn fleet(&mut self, file: FileId, node: &KdlNode) {
        let span = self.span(file, node.span());
        if let Some(first) = self.fleet_seen {
            let help = format!("the fleet is first declared at {}", self.location(first));
            self.diags.push(LowerError::Duplicate {
                what: "fleet",
                name: "fleet".into(),
                span: node.name().span(),
                help,
                file,
            });
            return;
        }
        self.fleet_seen = Some(span);
        if let Some((name, _)) = self.name_arg(file, node, "fleet name") {
            self.spec.fleet.name = name;
        }
        self.spec.fleet.span = Some(span);
        for (key, entry) in self.props(node) {
            match key {
                "target" => {
                    if let Some(t) = self.string(file, "target", entry) {
                        self.spec.fleet.target = Some(Spanned {
                            value: t,
                            span: self.span(file, entry.span()),
                        });
                    }
                }
                "overrides" => {
                    if let Some(mode) = self.string(file, "overrides", entry) {
                        match mode.as_str() {
                            "layered" => self.spec.fleet.mode = OverrideMode::Layered,
                            "exclusive" => self.spec.fleet.mode = OverrideMode::Exclusive,
                            _ => self.diags.push(LowerError::InvalidValue {
                                message: format!("unknown override mode `{mode}`"),
                                span: entry.span(),
                                help: "use overrides=\"layered\" (every matching override applies) or overrides=\"exclusive\" (at most one, as in Divingbell)".into(),
                                file,
                            }),
                        }
                    }
                }
                "identities" => {
                    if let Some(mode) = self.string(file, "identities", entry) {
                        match mode.as_str() {
                            "required" => {
                                self.spec.fleet.identities_required =
                                    Some(self.span(file, entry.span()))
                            }
                            "optional" => self.spec.fleet.identities_required = None,
                            _ => self.diags.push(LowerError::InvalidValue {
                                message: format!("`identities` cannot be \"{mode}\""),
                                span: entry.span(),
                                help: "use identities=\"required\" (every host must have an identity) or identities=\"optional\" (the default)".into(),
                                file,
                            }),
                        }
                    }
                }
                "secrets" => {
                    if let Some(mode) = self.string(file, "secrets", entry) {
                        match mode.as_str() {
                            "sealed" => self.spec.fleet.secrets_plaintext = None,
                            "plaintext" => {
                                self.spec.fleet.secrets_plaintext =
                                    Some(self.span(file, entry.span()));
                                self.diags.push(LowerError::PlaintextSecrets {
                                    span: entry.span(),
                                    file,
                                });
                            }
                            _ => self.diags.push(LowerError::InvalidValue {
                                message: format!("`secrets` cannot be \"{mode}\""),
                                span: entry.span(),
                                help: "use secrets=\"sealed\" (the default: each host's secrets are encrypted to its identity) or secrets=\"plaintext\" (in the bundles in the clear, for a trial)".into(),
                                file,
                            }),
                        }
                    }
                }
                _ => self.unknown_prop(
                    file,
                    "fleet",
                    entry,
                    &["target", "overrides", "identities", "secrets"],
                ),
            }
        }
        self.no_children(file, node);
    }

    pub(super) fn host(&mut self, file: FileId, node: &KdlNode) {
        let Some((name, name_span)) = self.name_arg(file, node, "host name") else {
            return;
        };
        if let Err(invalid) = validate::host_name(&name) {
            self.invalid(file, name_span.source_span(), invalid);
        }
        let mut host = Host {
            name,
            address: None,
            target: None,
            labels: Default::default(),
            identity: None,
            accepted: None,
            assigned: Vec::new(),
            span: self.span(file, node.span()),
        };
        let mut ok = true;
        let mut address_span = None;
        for (key, entry) in self.props(node) {
            match key {
                "address" => {
                    host.address = self.string(file, "address", entry);
                    if let Some(address) = &host.address {
                        match validate::host_address(address) {
                            Ok(()) => address_span = Some(self.span(file, entry.span())),
                            // The host stays, so that what matches it is still checked.
                            Err(invalid) => self.invalid(file, entry.span(), invalid),
                        }
                    }
                }
                "identity" => {
                    if let Some(line) = self.string(file, "identity", entry) {
                        match validate::host_identity(&line) {
                            Ok(identity) => host.identity = Some(identity),
                            // The host stays, so that what matches it is still checked.
                            Err(invalid) => {
                                self.invalid(file, entry.span(), invalid);
                                self.spec.rejected_identities.insert(host.name.clone());
                            }
                        }
                    }
                }
                "target" => {
                    host.target = self.string(file, "target", entry).map(|t| Spanned {
                        value: t,
                        span: self.span(file, entry.span()),
                    })
                }
                "host" => {
                    self.diags.push(LowerError::InvalidValue {
                        message: "`host` cannot be a label".into(),
                        span: entry.span(),
                        help: "`match host=\"...\"` matches the host's name; choose another label name".into(),
                        file,
                    });
                    ok = false;
                }
                label => match label_value(entry.value()) {
                    Some(v) => {
                        if let Err(invalid) = validate::label(label, &v) {
                            self.invalid(file, entry.span(), invalid);
                            ok = false;
                            continue;
                        }
                        std::sync::Arc::make_mut(&mut host.labels).insert(label.to_string(), v);
                    }
                    None => {
                        self.wrong_type(
                            file,
                            &format!("label `{label}`"),
                            "a string",
                            entry.value(),
                            entry.span(),
                        );
                        ok = false;
                    }
                },
            }
        }
        self.no_children(file, node);
        if ok {
            self.add_host(file, host, name_span, address_span);
        }
    }

    /// Adds a host unless its name is taken; `address_span` is where its address is written.
    pub(super) fn add_host(
        &mut self,
        file: FileId,
        host: Host,
        name_span: Span,
        address_span: Option<Span>,
    ) {
        if let Some(first) = self.seen_hosts.named(&self.spec.hosts, &host.name) {
            let help = format!(
                "`{}` is first declared at {}; host names must be unique across the spec and its inventories",
                host.name,
                self.location(first)
            );
            self.diags.push(LowerError::Duplicate {
                what: "host",
                name: host.name.clone(),
                span: name_span.source_span(),
                help,
                file,
            });
            return;
        }
        let mut new_address = address_span;
        if let (Some(address), Some(span)) = (&host.address, address_span) {
            if let Some((first, at)) = self.seen_hosts.with_address(&self.spec.hosts, address) {
                new_address = None;
                let help = format!(
                    "`{first}` has it at {}; give each host its own address",
                    self.location(at)
                );
                self.diags.push(LowerError::DuplicateAddress {
                    address: address.clone(),
                    host: host.name.clone(),
                    first: first.to_string(),
                    span: span.source_span(),
                    help,
                    file: span.file,
                });
            }
        }
        self.spec.hosts.push(host);
        let index = self.spec.hosts.len() - 1;
        self.seen_hosts
            .add(&self.spec.hosts, index, name_span, new_address);
    }

    pub(super) fn resolve_relative(&self, file: FileId, relative: &str) -> PathBuf {
        let base = self
            .sources
            .get(file)
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        base.join(relative)
    }

    /// The one path argument of `inventory` and `include`, resolved against the directory of
    /// the file that holds the node.
    pub(super) fn path_arg(
        &mut self,
        file: FileId,
        node: &KdlNode,
        what: &str,
    ) -> Option<(String, Span, PathBuf)> {
        let (relative, span) = self.name_arg(file, node, what)?;
        let keyword = node.name().value().to_string();
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, &keyword, entry, &[]);
        }
        let full = self.resolve_relative(file, &relative);
        Some((relative, span, full))
    }

    /// `ssh-key file="keys/ops.pub"`: the keys of a file in the spec's own tree, one per line
    /// (blank lines and `#` comments skipped, as in authorized_keys), each checked by `check`
    /// at its own line.
    pub(super) fn key_file(
        &mut self,
        file: FileId,
        child: &KdlNode,
        check: Option<ValueCheck>,
    ) -> Option<Vec<String>> {
        let name = child.name().value().to_string();
        self.no_children(file, child);
        for entry in self.args(child) {
            self.diags.push(LowerError::UnexpectedArgument {
                node: name.clone(),
                expected: "either a key or `file=`",
                span: entry.span(),
                help: format!(
                    "write `{name} \"ssh-ed25519 AAAA...\"` or `{name} file=\"keys/ops.pub\"`"
                ),
                file,
            });
        }
        let (relative, span) = self.file_prop(file, &name, child)?;
        let keys_file = self.read_in_tree(
            file,
            span,
            &Wanted {
                what: "ssh key file",
                shown: &relative,
                max: read::MAX_KEY_FILE,
                help: "give one public key per line, as `ssh-keygen` writes it to a `.pub` file",
            },
        )?;
        let text = self.sources.get(keys_file).text.clone();
        let mut keys = Vec::new();
        let mut offset = 0;
        let mut ok = true;
        for line in text.split_inclusive('\n') {
            let at = offset;
            offset += line.len();
            let key = line.trim_end_matches(['\n', '\r']).trim();
            if key.is_empty() || key.starts_with('#') {
                continue;
            }
            if let Some(Err(invalid)) = check.map(|c| c(key)) {
                let start = at + (line.len() - line.trim_start().len());
                self.invalid(keys_file, SourceSpan::new(start.into(), key.len()), invalid);
                ok = false;
                continue;
            }
            keys.push(key.to_string());
        }
        if keys.is_empty() && ok {
            self.diags.push(LowerError::Unreadable {
                what: "ssh key file",
                path: relative,
                reason: "it holds no key".into(),
                span,
                help: "give one public key per line, as `ssh-keygen` writes it to a `.pub` file"
                    .into(),
                file,
            });
            return None;
        }
        ok.then_some(keys)
    }

    pub(super) fn inventory(&mut self, file: FileId, node: &KdlNode) {
        let Some((relative, span, _)) = self.path_arg(file, node, "inventory file path") else {
            return;
        };
        let Some(json_file) = self.read_in_tree(
            file,
            span.source_span(),
            &Wanted {
                what: "inventory",
                shown: &relative,
                max: read::MAX_INVENTORY,
                help: "the path is relative to the directory of this spec file",
            },
        ) else {
            return;
        };
        let text = self.sources.get(json_file).text.clone();
        match inventory::parse(&text) {
            Ok(entries) => {
                self.spec.hosts.reserve(entries.len());
                self.seen_hosts.reserve(&self.spec.hosts, entries.len());
                for entry in entries {
                    let host = Host {
                        name: entry.name,
                        address: entry.address,
                        target: None,
                        labels: entry.labels,
                        identity: None,
                        accepted: entry.accepted,
                        assigned: Vec::new(),
                        span,
                    };
                    let invalid_at = |host: &str, invalid: crate::diagnostic::Invalid| {
                        LowerError::Inventory {
                            message: format!("inventory host `{host}`: {}", invalid.message),
                            span: SourceSpan::new(entry.offset.into(), 1),
                            help: invalid.help,
                            file: json_file,
                        }
                    };
                    // A bad name or label drops the host; a bad address only the address.
                    let invalid = validate::host_name(&host.name).err().or_else(|| {
                        host.labels
                            .iter()
                            .find_map(|(k, v)| validate::label(k, v).err())
                    });
                    if let Some(invalid) = invalid {
                        self.diags.push(invalid_at(&host.name, invalid));
                        continue;
                    }
                    if host.labels.contains_key("host") {
                        self.diags.push(LowerError::Inventory {
                            message: format!("inventory host `{}` has a label named `host`", host.name),
                            span: SourceSpan::new(entry.offset.into(), 1),
                            help: "`match host=\"...\"` matches the host's name; rename the label".into(),
                            file: json_file,
                        });
                        continue;
                    }
                    let name_span = Span {
                        file: json_file,
                        offset: entry.offset,
                        len: 1,
                    };
                    let mut host = host;
                    if let Some(line) = &entry.identity {
                        match validate::host_identity(line) {
                            Ok(identity) => host.identity = Some(identity),
                            Err(invalid) => {
                                self.diags.push(invalid_at(&host.name, invalid));
                                self.spec.rejected_identities.insert(host.name.clone());
                            }
                        }
                    }
                    if let Some(address) = host.address.take() {
                        match validate::host_address(&address) {
                            Ok(()) => host.address = Some(address),
                            Err(invalid) => self.diags.push(invalid_at(&host.name, invalid)),
                        }
                    }
                    self.add_host(json_file, host, name_span, Some(name_span));
                }
            }
            Err(err) => self.diags.push(LowerError::Inventory {
                message: err.message,
                span: SourceSpan::new(err.offset.into(), 1),
                help: "an inventory is a JSON list of {\"name\", \"address\", \"labels\"} objects, or the output of `kubectl get nodes -o json`".into(),
                file: json_file,
            }),
        }
    }

    pub(super) fn include(&mut self, file: FileId, node: &KdlNode) {
        let Some((pattern, span, full)) = self.path_arg(file, node, "file or glob") else {
            return;
        };
        let is_glob = pattern.contains(['*', '?', '[']);
        let outside = |this: &mut Self, pattern: String| {
            this.diags.push(LowerError::Unreadable {
                what: "included files",
                path: pattern,
                reason: "outside the spec's directory".into(),
                span: span.source_span(),
                help: "bellc reads only files of the spec's own tree (symlinks resolved); move the files beside the spec".into(),
                file,
            });
        };
        // A glob that reaches out of the tree is refused before it lists a directory there:
        // the names it would match are not the spec's to print either.
        if is_glob && !self.lexically_inside(file, &pattern) {
            outside(self, pattern);
            return;
        }
        let mut escaped = false;
        let paths: Vec<PathBuf> = if is_glob {
            let full_text = full.to_string_lossy().to_string();
            match glob::glob(&full_text) {
                Ok(paths) => {
                    let mut v: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
                    v.sort();
                    // Matches reached through a symlink out of the tree are reported once,
                    // without their names.
                    let before = v.len();
                    v.retain(|p| self.resolves_inside(p));
                    if v.len() < before {
                        outside(self, pattern.clone());
                        escaped = true;
                    }
                    v
                }
                Err(e) => {
                    self.diags.push(LowerError::InvalidValue {
                        message: format!("invalid glob pattern: {}", e.msg),
                        span: span.source_span(),
                        help: "use `*`, `?` and `[...]` as in a shell".into(),
                        file,
                    });
                    return;
                }
            }
        } else {
            vec![full.clone()]
        };
        if is_glob {
            self.spec.globs.push((full.clone(), paths.clone()));
        }
        if is_glob && paths.is_empty() && !escaped {
            self.diags.push(LowerError::EmptyGlob {
                pattern,
                span: span.source_span(),
                file,
            });
            return;
        }
        // Read in order, parse in parallel (the KDL parser is the slow part of a large spec
        // split into many files), then lower in order, so declaration order is kept.
        let mut included: Vec<FileId> = Vec::new();
        for path in paths {
            let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if let Some(pos) = self.include_stack.iter().position(|(p, _)| {
                std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()) == canonical
            }) {
                let mut chain: Vec<String> = self.include_stack[pos..]
                    .iter()
                    .map(|(p, _)| self.short_name(p))
                    .collect();
                chain.push(self.short_name(&path));
                self.diags.push(LowerError::IncludeCycle {
                    chain: chain.join(" → "),
                    span: span.source_span(),
                    file,
                });
                continue;
            }
            self.included_files += 1;
            if self.included_files > read::MAX_INCLUDED_FILES {
                self.diags.push(LowerError::InvalidValue {
                    message: format!(
                        "the spec includes more than {} files",
                        read::MAX_INCLUDED_FILES
                    ),
                    span: span.source_span(),
                    help: "merge small files; one file may hold many hosts and overrides".into(),
                    file,
                });
                break;
            }
            let shown = if is_glob {
                path.strip_prefix(self.resolve_relative(file, ""))
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| path.display().to_string())
            } else {
                pattern.clone()
            };
            if let Some(id) = self.read_in_tree(
                file,
                span.source_span(),
                &Wanted {
                    what: "included file",
                    shown: &shown,
                    max: read::MAX_SPEC_FILE,
                    help: "the path is relative to the directory of this spec file",
                },
            ) {
                included.push(id);
            }
        }
        // A parsed document takes tens of times the memory of its text: a few files per
        // thread are parsed at once, and each is dropped once lowered, so that a spec split
        // into many files never holds all of their documents.
        let batch = 2 * rayon::current_num_threads();
        for ids in included.chunks(batch) {
            let texts: Vec<std::sync::Arc<String>> = ids
                .iter()
                .map(|&id| self.sources.get(id).text.clone())
                .collect();
            let parsed: Vec<Result<Result<KdlDocument, kdl::KdlError>, (usize, read::Nesting)>> = {
                use rayon::prelude::*;
                texts.par_iter().map(|t| Self::parse_checked(t)).collect()
            };
            for (&id, doc) in ids.iter().zip(parsed) {
                match doc {
                    Ok(doc) => self.parsed_file(id, doc),
                    Err(at) => self.too_deep(id, at),
                }
            }
        }
    }

    /// Whether `shown`, relative to the directory of `file`, names a path in the spec's tree
    /// by its names alone (`..` taken as written; symlinks are checked when the file is read).
    fn lexically_inside(&self, file: FileId, shown: &str) -> bool {
        if Path::new(shown).is_absolute() {
            return false;
        }
        let dir = match self.sources.get(file).path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.canonicalize().ok(),
            _ => Path::new(".").canonicalize().ok(),
        };
        match (dir, &self.tree) {
            (Some(dir), Some(tree)) => lexical(&dir.join(shown)).starts_with(tree),
            _ => false,
        }
    }

    /// Whether `path` exists and lies in the spec's tree with its symlinks resolved.
    fn resolves_inside(&self, path: &Path) -> bool {
        match (path.canonicalize(), &self.tree) {
            (Ok(p), Some(tree)) => p.starts_with(tree),
            _ => false,
        }
    }

    /// The `file=` of `child` (named `name`), its only property, and where it is written;
    /// another property is a diagnostic.
    pub(super) fn file_prop(
        &mut self,
        file: FileId,
        name: &str,
        child: &KdlNode,
    ) -> Option<(String, SourceSpan)> {
        let mut relative = None;
        for (key, entry) in self.props(child) {
            match key {
                "file" => relative = self.string(file, "file", entry).map(|r| (r, entry.span())),
                _ => self.unknown_prop(file, name, entry, &["file"]),
            }
        }
        relative
    }

    /// Reads a file the spec names (`wanted.shown`, relative to the directory of `file`), when
    /// it lies in the spec's own tree after its symlinks are resolved, is a regular file of at
    /// most `wanted.max` bytes, and is UTF-8. Anything else is reported at `span` without a
    /// byte of the file: a spec built in CI must not be a way to print CI's files.
    pub(super) fn read_in_tree(
        &mut self,
        file: FileId,
        span: SourceSpan,
        wanted: &Wanted,
    ) -> Option<FileId> {
        let (path, bytes) = self.read_bytes_in_tree(file, span, wanted)?;
        match read::utf8(bytes) {
            Ok(text) => Some(self.sources.add(&path, text)),
            Err(bad) => {
                let id = self.sources.add(&path, bad.lossy);
                self.diags.push(LowerError::NotUtf8 {
                    what: format!("{} `{}`", wanted.what, wanted.shown),
                    span: SourceSpan::new(bad.offset.into(), '\u{fffd}'.len_utf8()),
                    file: id,
                });
                None
            }
        }
    }

    /// [`Self::read_in_tree`] without the text: the file's path and bytes (an encrypted file).
    pub(super) fn read_bytes_in_tree(
        &mut self,
        file: FileId,
        span: SourceSpan,
        wanted: &Wanted,
    ) -> Option<(PathBuf, Vec<u8>)> {
        let refuse = |this: &mut Self, reason: String, help: String| {
            this.diags.push(LowerError::Unreadable {
                what: wanted.what,
                path: wanted.shown.to_string(),
                reason,
                span,
                help,
                file,
            });
        };
        // Where the file would be read from if it were copied into the tree: the help names the
        // path to copy it to and the name to write, so that following it works.
        let copy_it = |this: &Self| {
            let name = Path::new(wanted.shown)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| wanted.shown.to_string());
            let dir = this.resolve_relative(file, "");
            let dir = match dir.as_os_str().is_empty() {
                true => ".".to_string(),
                false => dir.display().to_string(),
            };
            format!(
                "copy the {} to {}/{name} and write `\"{name}\"`: a path is relative to the \
                 spec's directory",
                wanted.what,
                dir.trim_end_matches('/')
            )
        };
        let outside = |this: &mut Self| {
            refuse(
                this,
                "outside the spec's directory".into(),
                format!(
                    "bellc reads only files of the spec's own tree (symlinks resolved); {}",
                    copy_it(this)
                ),
            )
        };
        // A shell would have expanded it; bellc does not (the spec builds the same anywhere).
        if wanted.shown.starts_with('~') {
            let help = copy_it(self);
            refuse(self, "`~` is not expanded".into(), help);
            return None;
        }
        // Refused before the file system is asked anything about it, so that the answer does
        // not even tell whether such a file exists.
        let path = self.resolve_relative(file, wanted.shown);
        if !self.lexically_inside(file, wanted.shown) {
            outside(self);
            return None;
        }
        let resolved = match path.canonicalize() {
            Ok(p) => p,
            Err(e) => {
                refuse(self, io_reason(&e), wanted.help.into());
                return None;
            }
        };
        if !self.tree.as_ref().is_some_and(|t| resolved.starts_with(t)) {
            outside(self);
            return None;
        }
        match read::read_bounded(&resolved, wanted.max) {
            Ok(bytes) => Some((path, bytes)),
            Err(e) => {
                refuse(self, e.to_string(), wanted.help.into());
                None
            }
        }
    }

    pub(super) fn short_name(&self, path: &Path) -> String {
        match self.sources.find(path) {
            Some(id) => self.sources.get(id).name.clone(),
            None => path.display().to_string(),
        }
    }
}

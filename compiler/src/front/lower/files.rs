//! The nodes that bring in hosts and files: `fleet`, `host`, `inventory` (JSON) and `include`
//! (globs relative to the including file, only inside the spec's own tree, cycles reported).

use super::*;

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
                _ => self.unknown_prop(file, "fleet", entry, &["target", "overrides"]),
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
            labels: BTreeMap::new(),
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
                        host.labels.insert(label.to_string(), v);
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
        if let Some(first) = self.seen_hosts.get(&host.name) {
            let help = format!(
                "`{}` is first declared at {}; host names must be unique across the spec and its inventories",
                host.name,
                self.location(*first)
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
        self.seen_hosts.insert(host.name.clone(), name_span);
        if let (Some(address), Some(span)) = (&host.address, address_span) {
            match self.seen_addresses.get(address) {
                Some((first, at)) => self.diags.push(LowerError::DuplicateAddress {
                    address: address.clone(),
                    host: host.name.clone(),
                    first: first.clone(),
                    span: span.source_span(),
                    help: format!(
                        "`{first}` has it at {}; give each host its own address",
                        self.location(*at)
                    ),
                    file: span.file,
                }),
                None => {
                    self.seen_addresses
                        .insert(address.clone(), (host.name.clone(), span));
                }
            }
        }
        self.spec.hosts.push(host);
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
        let mut relative = None;
        for (key, entry) in self.props(child) {
            match key {
                "file" => relative = self.string(file, "file", entry).map(|r| (r, entry.span())),
                _ => self.unknown_prop(file, &name, entry, &["file"]),
            }
        }
        let (relative, span) = relative?;
        let unreadable = |reason: String, help: &str| LowerError::Unreadable {
            what: "ssh key file",
            path: relative.clone(),
            reason,
            span,
            help: help.into(),
            file,
        };
        let in_tree = "the path is relative to this spec file, inside the spec's own directory";
        let root = self
            .include_stack
            .first()
            .and_then(|(p, _)| p.parent())
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .and_then(|d| d.canonicalize().ok());
        let outside = |this: &mut Self| {
            this.diags.push(unreadable(
                "outside the spec's directory".into(),
                "bellc reads only files of the spec's own tree: copy the public key beside the spec",
            ));
        };
        // Refused before the file system is asked anything about it.
        if Path::new(&relative).is_absolute() {
            outside(self);
            return None;
        }
        let full = self.resolve_relative(file, &relative);
        // Symlinks resolved first: a key file is the spec's, never a file it points out to.
        let resolved = match full.canonicalize() {
            Ok(p) => p,
            Err(e) => {
                self.diags.push(unreadable(super::io_reason(&e), in_tree));
                return None;
            }
        };
        if !root.as_ref().is_some_and(|r| resolved.starts_with(r)) {
            outside(self);
            return None;
        }
        const MAX: u64 = 1 << 20;
        match std::fs::metadata(&resolved) {
            Ok(m) if m.is_file() && m.len() <= MAX => {}
            Ok(m) if m.is_file() => {
                self.diags.push(unreadable(
                    format!("{} bytes; a key file holds at most 1 MiB", m.len()),
                    "give one public key per line",
                ));
                return None;
            }
            Ok(_) => {
                self.diags
                    .push(unreadable("not a regular file".into(), in_tree));
                return None;
            }
            Err(e) => {
                self.diags.push(unreadable(super::io_reason(&e), in_tree));
                return None;
            }
        }
        let text = match std::fs::read_to_string(&resolved) {
            Ok(t) => t,
            Err(e) => {
                self.diags.push(unreadable(super::io_reason(&e), in_tree));
                return None;
            }
        };
        let keys_file = self.sources.add(&full, text);
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
            self.diags.push(unreadable(
                "it holds no key".into(),
                "give one public key per line, as `ssh-keygen` writes it to a `.pub` file",
            ));
            return None;
        }
        ok.then_some(keys)
    }

    pub(super) fn inventory(&mut self, file: FileId, node: &KdlNode) {
        let Some((relative, span, path)) = self.path_arg(file, node, "inventory file path") else {
            return;
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                self.diags.push(LowerError::Unreadable {
                    what: "inventory",
                    path: relative,
                    reason: io_reason(&e),
                    span: span.source_span(),
                    help: "the path is relative to the directory of this spec file".into(),
                    file,
                });
                return;
            }
        };
        let json_file = self.sources.add(&path, text);
        let text = self.sources.get(json_file).text.clone();
        match inventory::parse(&text) {
            Ok(entries) => {
                for entry in entries {
                    let host = Host {
                        name: entry.name,
                        address: entry.address,
                        target: None,
                        labels: entry.labels,
                        span,
                    };
                    if let Err(invalid) = validate::host_name(&host.name) {
                        self.diags.push(LowerError::Inventory {
                            message: format!("inventory host `{}`: {}", host.name, invalid.message),
                            span: SourceSpan::new(entry.offset.into(), 1),
                            help: invalid.help,
                            file: json_file,
                        });
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
                    if let Some(address) = host.address.take() {
                        match validate::host_address(&address) {
                            Ok(()) => host.address = Some(address),
                            Err(invalid) => self.diags.push(LowerError::Inventory {
                                message: format!("inventory host `{}`: {}", host.name, invalid.message),
                                span: SourceSpan::new(entry.offset.into(), 1),
                                help: invalid.help,
                                file: json_file,
                            }),
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
        let paths: Vec<PathBuf> = if is_glob {
            let full_text = full.to_string_lossy().to_string();
            match glob::glob(&full_text) {
                Ok(paths) => {
                    let mut v: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
                    v.sort();
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
        if is_glob && paths.is_empty() {
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
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) => {
                    self.diags.push(LowerError::Unreadable {
                        what: "included file",
                        path: if is_glob {
                            self.short_name(&path)
                        } else {
                            pattern.clone()
                        },
                        reason: io_reason(&e),
                        span: span.source_span(),
                        help: "the path is relative to the directory of this spec file".into(),
                        file,
                    });
                    continue;
                }
            };
            included.push(self.sources.add(&path, text));
        }
        let texts: Vec<std::sync::Arc<String>> = included
            .iter()
            .map(|&id| self.sources.get(id).text.clone())
            .collect();
        let parsed: Vec<Result<KdlDocument, kdl::KdlError>> = {
            use rayon::prelude::*;
            texts.par_iter().map(|t| KdlDocument::parse_v2(t)).collect()
        };
        for (id, doc) in included.into_iter().zip(parsed) {
            self.parsed_file(id, doc);
        }
    }

    pub(super) fn short_name(&self, path: &Path) -> String {
        match self.sources.find(path) {
            Some(id) => self.sources.get(id).name.clone(),
            None => path.display().to_string(),
        }
    }
}

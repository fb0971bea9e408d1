//! Resources: `sysctl` settings and every resource kind's node, its name, properties and
//! children, and how a declaration joins its layer.

use super::*;

/// The fields whose value may come from an encrypted file of the spec's tree (`file=`), by
/// kind.
const SECRET_FIELDS: &[(&str, &str)] = &[("user", "password"), ("file", "content")];

impl Lowerer<'_> {
    pub(super) fn sysctl(&mut self, file: FileId, node: &KdlNode, out: &mut Vec<SysctlSetting>) {
        self.no_args(file, node);
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "sysctl", entry, &[]);
        }
        let Some(children) = node.children() else {
            return;
        };
        for child in children.nodes() {
            let key = child.name().value().to_string();
            let key_span = child.name().span();
            if let Err(invalid) = validate::sysctl_key(&key) {
                self.invalid(file, key_span, invalid);
                continue;
            }
            self.no_children(file, child);
            let mut unknown = false;
            for (name, entry) in self.props(child) {
                if name == "unknown" {
                    unknown = self.bool(file, "sysctl unknown", entry).unwrap_or(false);
                    continue;
                }
                self.diags.push(LowerError::UnexpectedArgument {
                    node: key.clone(),
                    expected: "one value",
                    span: entry.span(),
                    help: "write `KEY VALUE`, such as `net.ipv4.ip_forward 1` (`unknown=#true` \
                           accepts a key the target's kernel does not list)"
                        .into(),
                    file,
                });
            }
            let args = self.args(child);
            let value_span = args.first().map_or(key_span, |entry| entry.span());
            let value = match args.as_slice() {
                [entry] => match entry.value() {
                    KdlValue::Null => None,
                    KdlValue::Integer(i) => Some(i.to_string()),
                    KdlValue::String(s) => {
                        if let Err(reason) = crate::escape::config_field(s) {
                            self.diags.push(LowerError::InvalidValue {
                                message: format!("invalid value for `{key}`: {reason}"),
                                span: entry.span(),
                                help: "a sysctl value is one line; several numbers are separated by spaces or tabs".into(),
                                file,
                            });
                            continue;
                        }
                        Some(s.clone())
                    }
                    other => {
                        self.wrong_type(
                            file,
                            &key,
                            "a number or a string (or `#null` to remove the key)",
                            other,
                            entry.span(),
                        );
                        continue;
                    }
                },
                [] => {
                    self.missing(
                        file,
                        key_span,
                        key.clone(),
                        "value",
                        "write `KEY VALUE`, or `KEY #null` to remove an inherited key",
                    );
                    continue;
                }
                [_, extra, ..] => {
                    self.diags.push(LowerError::UnexpectedArgument {
                        node: key.clone(),
                        expected: "one value",
                        span: extra.span(),
                        help:
                            "a value with several fields is one string: `kernel.printk \"4 4 1 7\"`"
                                .into(),
                        file,
                    });
                    continue;
                }
            };
            out.push(SysctlSetting {
                key,
                value,
                span: self.span(file, child.span()),
                key_span: self.span(file, key_span),
                value_span: self.span(file, value_span),
                unknown,
            });
        }
    }

    // ---- resources -------------------------------------------------------------------------

    pub(super) fn resource(
        &mut self,
        file: FileId,
        node: &KdlNode,
        kind: Kind,
    ) -> Option<ResourceDecl> {
        let keyword = kind.keyword();
        let (name, name_span) = if kind.is_setting() {
            self.no_args(file, node);
            (keyword.to_string(), self.span(file, node.name().span()))
        } else {
            self.name_arg(file, node, kind.name_label())?
        };
        let before = self.diags.error_count();
        self.check_name(file, kind, &name, name_span);
        let schema = kind.schema();
        let mut fields: BTreeMap<&'static str, Field> = BTreeMap::new();
        let prop_names: Vec<&str> = schema
            .iter()
            .filter(|f| f.source == FieldSource::Prop)
            .map(|f| f.name)
            .collect();
        for (key, entry) in self.props(node) {
            match schema
                .iter()
                .find(|f| f.source == FieldSource::Prop && f.name == key)
            {
                Some(field) => {
                    if let Some(value) = self.typed_value(file, keyword, field, entry) {
                        if fields.contains_key(field.name) {
                            self.diags.push(LowerError::Duplicate {
                                what: "property",
                                name: key.to_string(),
                                span: entry.span(),
                                help: "a property may be set once per node".into(),
                                file,
                            });
                        }
                        fields.insert(
                            field.name,
                            Field {
                                value,
                                span: self.span(file, entry.span()),
                            },
                        );
                    }
                }
                None => self.unknown_prop(file, keyword, entry, &prop_names),
            }
        }
        if let Some(children) = node.children() {
            self.resource_children(file, kind, children, &mut fields);
        }
        let decl = ResourceDecl {
            kind,
            name,
            name_span,
            span: self.span(file, node.span()),
            fields,
        };
        // Field checks run even when something else in the node is wrong, so that one run
        // reports every mistake; the node is dropped afterwards.
        self.check_fields(file, &decl);
        if self.diags.error_count() > before {
            self.spec.rejected.insert((decl.kind, decl.name));
            return None;
        }
        Some(decl)
    }

    pub(super) fn resource_children(
        &mut self,
        file: FileId,
        kind: Kind,
        children: &KdlDocument,
        fields: &mut BTreeMap<&'static str, Field>,
    ) {
        let schema = kind.schema();
        let keyword = kind.keyword();
        if let Some(field) = schema.iter().find(|f| f.source == FieldSource::AnyChildren) {
            let map = self.any_children(file, children, fields);
            fields.insert(
                field.name,
                Field {
                    value: Value::Map(map),
                    span: self.span(file, children.span()),
                },
            );
            return;
        }
        for child in children.nodes() {
            let name = child.name().value();
            let Some(field) = schema
                .iter()
                .find(|f| f.name == name && f.source != FieldSource::Prop)
            else {
                self.unknown_child(file, kind, child);
                continue;
            };
            let mut span = self.span(file, child.span());
            let value = match field.source {
                FieldSource::ChildArg
                    if SECRET_FIELDS.contains(&(keyword, field.name))
                        && child.entry("file").is_some() =>
                {
                    self.secret_file(file, field, child, fields, &mut span)
                }
                FieldSource::ChildArg => self.child_arg(file, keyword, field, child, &mut span),
                FieldSource::ChildArgs => self.child_args(file, child).map(Value::List),
                FieldSource::RepeatedChildArg
                    if field.name == "ssh-key" && child.entry("file").is_some() =>
                {
                    self.key_files(file, field, child, fields)
                }
                FieldSource::RepeatedChildArg => {
                    self.repeated_child_arg(file, field, child, fields, &mut span)
                }
                FieldSource::ChildProps => Some(self.child_props(file, child)),
                FieldSource::DebconfChildren => {
                    let mut list = match fields.remove(field.name) {
                        Some(Field {
                            value: Value::Debconf(l),
                            ..
                        }) => l,
                        _ => Vec::new(),
                    };
                    if let Some(d) = self.debconf(file, child) {
                        list.push(d);
                    }
                    Some(Value::Debconf(list))
                }
                FieldSource::WaitForChildren => {
                    let mut list = match fields.remove(field.name) {
                        Some(Field {
                            value: Value::WaitFor(l),
                            ..
                        }) => l,
                        _ => Vec::new(),
                    };
                    if let Some(w) = self.wait_for(file, child) {
                        list.push(w);
                    }
                    Some(Value::WaitFor(list))
                }
                FieldSource::Prop | FieldSource::AnyChildren => None,
            };
            if let Some(value) = value {
                if matches!(
                    field.source,
                    FieldSource::ChildArg | FieldSource::ChildArgs | FieldSource::ChildProps
                ) && fields.contains_key(field.name)
                {
                    self.diags.push(LowerError::Duplicate {
                        what: "child node",
                        name: name.to_string(),
                        span: child.name().span(),
                        help: format!("write `{name}` once"),
                        file,
                    });
                }
                fields.insert(field.name, Field { value, span });
            }
        }
    }

    /// The children of a kind whose every child is `feature on|off` (ethtool), and its `after`.
    fn any_children(
        &mut self,
        file: FileId,
        children: &KdlDocument,
        fields: &mut BTreeMap<&'static str, Field>,
    ) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        for child in children.nodes() {
            let feature = child.name().value();
            if feature == "after" {
                if let Some(v) = self.child_args(file, child) {
                    fields.insert(
                        "after",
                        Field {
                            value: Value::List(v),
                            span: self.span(file, child.span()),
                        },
                    );
                }
                continue;
            }
            if let Err(invalid) = validate::ethtool_feature(feature) {
                self.invalid(file, child.name().span(), invalid);
                continue;
            }
            let args = self.args(child);
            let value = match args.as_slice() {
                [entry] => match entry.value() {
                    KdlValue::String(s) if s == "on" || s == "off" => s.clone(),
                    other => {
                        self.wrong_type(file, feature, "`on` or `off`", other, entry.span());
                        continue;
                    }
                },
                _ => {
                    self.missing(
                        file,
                        child.span(),
                        feature.to_string(),
                        "value `on` or `off`",
                        format!("write `{feature} on` or `{feature} off`"),
                    );
                    continue;
                }
            };
            if map.insert(feature.to_string(), value).is_some() {
                self.diags.push(LowerError::Duplicate {
                    what: "ethtool feature",
                    name: feature.to_string(),
                    span: child.name().span(),
                    help: "set each feature once".into(),
                    file,
                });
            }
        }
        map
    }

    /// Reports a child the kind does not know, with what it does.
    fn unknown_child(&mut self, file: FileId, kind: Kind, child: &KdlNode) {
        let schema = kind.schema();
        let keyword = kind.keyword();
        let name = child.name().value();
        let child_names: Vec<&str> = schema
            .iter()
            .filter(|f| !matches!(f.source, FieldSource::Prop | FieldSource::AnyChildren))
            .map(|f| f.name)
            .collect();
        let as_prop = schema
            .iter()
            .any(|f| f.name == name && f.source == FieldSource::Prop);
        let help = match validate::did_you_mean(name, child_names.iter().copied()) {
            // The YAML habit of one key per line: say where the value goes instead.
            _ if as_prop => format!(
                "`{name}` is a property of `{keyword}`: write it on the `{keyword}` line, \
                 as `{keyword} \"NAME\" {name}=...`"
            ),
            Some(s) => format!("did you mean `{s}`?"),
            // What the switch puts in place with every other file cannot wait for anything.
            None if name == "wait-for" => format!(
                "a `{keyword}` takes effect with the bundle's files, before any script runs, so \
                 nothing could wait; put `wait-for` on what uses it (an `exec`, a `unit`, a \
                 `package`, a `mount`)"
            ),
            None if child_names.is_empty() => format!("`{keyword}` takes no child nodes"),
            None => format!("`{keyword}` knows: {}", child_names.join(", ")),
        };
        self.diags.push(LowerError::UnknownNode {
            name: name.to_string(),
            context: "in this resource",
            span: child.name().span(),
            help,
            file,
        });
    }

    /// A child with one value (`profile "..."`); `span` becomes the value's.
    fn child_arg(
        &mut self,
        file: FileId,
        keyword: &str,
        field: &FieldSchema,
        child: &KdlNode,
        span: &mut Span,
    ) -> Option<Value> {
        let name = child.name().value();
        self.no_children(file, child);
        for (_, entry) in self.props(child) {
            self.unknown_prop(file, name, entry, &[]);
        }
        let args = self.args(child);
        match args.as_slice() {
            [entry] => {
                *span = self.span(file, entry.span());
                self.typed_value(file, keyword, field, entry)
            }
            [] => {
                self.missing(
                    file,
                    child.name().span(),
                    name.to_string(),
                    "value",
                    format!("write `{name} \"...\"`"),
                );
                None
            }
            [_, extra, ..] => {
                self.diags.push(LowerError::UnexpectedArgument {
                    node: name.to_string(),
                    expected: "one value",
                    span: extra.span(),
                    help: format!("write one `{name}` value"),
                    file,
                });
                None
            }
        }
    }

    /// `password file="secrets/ops.hash.age"` (or `content file=…`): the secret an age file of
    /// the spec's own tree holds, opened with `--secrets-key`. Its text never reaches a
    /// diagnostic: a value the field refuses is reported without it.
    fn secret_file(
        &mut self,
        file: FileId,
        field: &FieldSchema,
        child: &KdlNode,
        fields: &BTreeMap<&'static str, Field>,
        span: &mut Span,
    ) -> Option<Value> {
        let name = child.name().value().to_string();
        // A file's content is sealed to its host only when its mode keeps others out: one
        // that came encrypted must not be served in the clear.
        let private = |f: &Field| matches!(&f.value, Value::Str(m) if bell_bundle::parse_mode(m).is_some_and(bell_bundle::private_mode));
        if name == "content" && !fields.get("mode").is_some_and(private) {
            self.diags.push(LowerError::InvalidValue {
                message: "a file whose content is an encrypted secret must keep others out".into(),
                span: child.span(),
                help: "give the file `mode=\"0600\"` (or `0640`): a secret is sealed to its host \
                       only in a file group and others cannot read"
                    .into(),
                file,
            });
            return None;
        }
        self.no_children(file, child);
        for entry in self.args(child) {
            self.diags.push(LowerError::UnexpectedArgument {
                node: name.clone(),
                expected: "either a value or `file=`",
                span: entry.span(),
                help: format!("write `{name} file=\"secrets/NAME.age\"` alone"),
                file,
            });
        }
        let (relative, at) = self.file_prop(file, &name, child)?;
        *span = self.span(file, at);
        let secret = self.open_secret(file, &relative, at)?;
        // Checked as a value written in the spec would be, without the value in the message
        // (a review without the key has nothing to check).
        let check = field
            .check
            .filter(|_| secret != crate::source::UNOPENED_SECRET);
        if let Some(Err(invalid)) = check.map(|check| check(&secret)) {
            self.diags.push(LowerError::SecretUnopened {
                path: relative,
                reason: format!("what it holds is not what `{name}` takes"),
                span: at,
                help: invalid.help,
                file,
            });
            return None;
        }
        // A file's content is a template; a secret's is taken as it is.
        Some(Value::Str(match name.as_str() {
            "content" => literal_template(&secret),
            _ => secret,
        }))
    }

    /// The text of the age file `relative` (at `at` in `file`), opened with `--secrets-key`;
    /// `None` after a diagnostic that names the file and never its content.
    pub(super) fn open_secret(
        &mut self,
        file: FileId,
        relative: &str,
        at: SourceSpan,
    ) -> Option<String> {
        let encrypt =
            format!("encrypt it into the spec's tree with age: `age -e -a -r age1… -o {relative}`");
        let (path, bytes) = self.read_bytes_in_tree(
            file,
            at,
            &files::Wanted {
                what: "encrypted secret",
                shown: relative,
                max: read::MAX_KEY_FILE,
                help: &encrypt,
            },
        )?;
        self.sources
            .add_encrypted(&path, bell_bundle::sha256_hex(&bytes));
        let unopened = |reason: String, help: String| LowerError::SecretUnopened {
            path: relative.to_string(),
            reason,
            span: at,
            help,
            file,
        };
        let named = self.span(file, at);
        self.sources.add_secret_origin(named, relative);
        let Some(keys) = self.sources.secret_keys() else {
            if self.sources.reviews_without_secrets() {
                return Some(crate::source::UNOPENED_SECRET.to_string());
            }
            self.diags.push(unopened(
                "no key to open it was given".into(),
                "give `--secrets-key FILE`: the age identity (`age-keygen`) or OpenSSH Ed25519 \
                 key of one of its recipients, in CI the build's key"
                    .into(),
            ));
            return None;
        };
        let opened = match bell_seal::at_rest::decrypt(&bytes, keys) {
            Ok(secret) => secret,
            Err(e) => {
                let given: Vec<String> = keys.iter().map(|k| k.recipient().describe()).collect();
                let help = match e {
                    bell_seal::SealError::NotForThisKey => format!(
                        "it is not encrypted to the key given ({}): add it to the file's \
                         recipients with `bellc secrets rekey`, run by someone who can open it",
                        given.join(", ")
                    ),
                    _ => encrypt.clone(),
                };
                self.diags.push(unopened(e.to_string(), help));
                return None;
            }
        };
        let Ok(secret) = String::from_utf8(opened) else {
            self.diags.push(unopened(
                "what it holds is not UTF-8 text".into(),
                format!("a secret is text; {encrypt}"),
            ));
            return None;
        };
        Some(secret)
    }

    /// `ssh-key file="..."`: the keys of a file, added to those already read.
    fn key_files(
        &mut self,
        file: FileId,
        field: &FieldSchema,
        child: &KdlNode,
        fields: &mut BTreeMap<&'static str, Field>,
    ) -> Option<Value> {
        let keys = self.key_file(file, child, field.check)?;
        let mut all = match fields.remove(field.name) {
            Some(Field {
                value: Value::List(l),
                ..
            }) => l,
            _ => Vec::new(),
        };
        all.extend(keys);
        Some(Value::List(all))
    }

    /// A child written once per value (`ssh-key "..."`), added to those already read; `span`
    /// becomes the value's.
    fn repeated_child_arg(
        &mut self,
        file: FileId,
        field: &FieldSchema,
        child: &KdlNode,
        fields: &mut BTreeMap<&'static str, Field>,
        span: &mut Span,
    ) -> Option<Value> {
        let name = child.name().value();
        if let [entry] = self.args(child).as_slice() {
            *span = self.span(file, entry.span());
            // Each key is checked where it is written, not after the list is merged.
            if let (Some(check), KdlValue::String(value)) = (field.check, entry.value()) {
                if let Err(invalid) = check(value) {
                    self.invalid(file, entry.span(), invalid);
                    return None;
                }
            }
        }
        let args = self.child_args(file, child);
        match args {
            Some(list) if list.len() == 1 => {
                let mut all = match fields.remove(field.name) {
                    Some(Field {
                        value: Value::List(l),
                        ..
                    }) => l,
                    _ => Vec::new(),
                };
                all.extend(list);
                Some(Value::List(all))
            }
            Some(_) => {
                self.diags.push(LowerError::UnexpectedArgument {
                    node: name.to_string(),
                    expected: "one value",
                    span: child.span(),
                    help: format!("write one `{name}` node per value"),
                    file,
                });
                None
            }
            None => None,
        }
    }

    /// A child whose properties are a map (`labels a="b"`).
    fn child_props(&mut self, file: FileId, child: &KdlNode) -> Value {
        self.no_args(file, child);
        self.no_children(file, child);
        let mut map = BTreeMap::new();
        for (key, entry) in self.props(child) {
            if let Some(v) = label_value(entry.value()) {
                map.insert(key.to_string(), v);
            } else {
                self.wrong_type(file, key, "a string", entry.value(), entry.span());
            }
        }
        Value::Map(map)
    }

    pub(super) fn child_args(&mut self, file: FileId, child: &KdlNode) -> Option<Vec<String>> {
        self.no_children(file, child);
        let name = child.name().value().to_string();
        for (_, entry) in self.props(child) {
            self.unknown_prop(file, &name, entry, &[]);
        }
        let mut out = Vec::new();
        let mut ok = true;
        for entry in self.args(child) {
            match entry.value() {
                KdlValue::String(s) => out.push(s.clone()),
                other => {
                    self.wrong_type(file, &name, "a string", other, entry.span());
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}

/// Adds a resource to a layer; the same kind and name twice in one layer is an error.
pub(super) fn push_resource(
    layer: &mut Layer,
    decl: ResourceDecl,
    diags: &mut Diagnostics,
    sources: &Sources,
) {
    if let Some(first) = layer
        .resources
        .iter()
        .find(|r| r.kind == decl.kind && r.name == decl.name)
    {
        let help = if decl.kind.is_setting() {
            format!(
                "`{}` is first set at {}; set all its properties on one node",
                decl.kind.keyword(),
                sources.location(first.name_span)
            )
        } else {
            format!(
                "`{}:{}` is first declared at {}; merge the two, or change one in an `override`",
                decl.kind.keyword(),
                decl.name,
                sources.location(first.name_span)
            )
        };
        diags.push(LowerError::Duplicate {
            what: "resource",
            name: format!("{}:{}", decl.kind.keyword(), decl.name),
            span: decl.name_span.source_span(),
            help,
            file: decl.name_span.file,
        });
        return;
    }
    layer.resources.push(decl);
}

/// Several `sysctl` blocks in one layer are one map; a key set twice in it is an error.
pub(super) fn merge_sysctl_into(
    into: &mut Vec<SysctlSetting>,
    new: Vec<SysctlSetting>,
    diags: &mut Diagnostics,
    sources: &Sources,
) {
    for setting in new {
        let canonical = validate::sysctl_path(&setting.key);
        if let Some(first) = into
            .iter()
            .find(|s| validate::sysctl_path(&s.key) == canonical)
        {
            diags.push(LowerError::Duplicate {
                what: "sysctl key",
                name: setting.key.clone(),
                span: setting.span.source_span(),
                help: format!(
                    "`{}` is first set at {}; set each key once per layer",
                    first.key,
                    sources.location(first.span)
                ),
                file: setting.span.file,
            });
            continue;
        }
        into.push(setting);
    }
}

/// A template that renders to `text` exactly: inside one `raw` block, or, when `text` could end
/// one, as a string literal.
fn literal_template(text: &str) -> String {
    if !text.contains("endraw") {
        return format!("{{% raw %}}{text}{{% endraw %}}");
    }
    let mut literal = String::from("{{ \"");
    for c in text.chars() {
        match c {
            '"' => literal.push_str("\\\""),
            '\\' => literal.push_str("\\\\"),
            '\n' => literal.push_str("\\n"),
            '\r' => literal.push_str("\\r"),
            '\t' => literal.push_str("\\t"),
            c if c.is_control() => literal.push_str(&format!("\\u{:04x}", c as u32)),
            c => literal.push(c),
        }
    }
    literal.push_str("\" }}");
    literal
}

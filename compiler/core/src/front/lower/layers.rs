//! Overrides and their contents that are not resources (`match`, `remove`, `service`, `uses`),
//! and the fleet's `rollout` policy.

use super::*;

impl Lowerer<'_> {
    pub(super) fn override_node(&mut self, file: FileId, node: &KdlNode) {
        let Some((name, name_span)) = self.name_arg(file, node, "override name") else {
            return;
        };
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "override", entry, &[]);
        }
        if let Some(first) = self.seen_overrides.get(&name) {
            let help = format!(
                "`{name}` is first declared at {}; give each override its own name",
                self.location(*first)
            );
            self.diags.push(LowerError::Duplicate {
                what: "override",
                name,
                span: name_span.source_span(),
                help,
                file,
            });
            return;
        }
        self.seen_overrides.insert(name.clone(), name_span);
        let mut ov = Override {
            name,
            span: self.span(file, node.span()),
            matches: Vec::new(),
            layer: Layer::default(),
        };
        let Some(children) = node.children() else {
            self.missing(
                file,
                node.name().span(),
                "override",
                "block with `match` and settings",
                "write `override \"NAME\" { match role=\"compute\"; sysctl { ... } }`",
            );
            return;
        };
        for child in children.nodes() {
            match child.name().value() {
                "match" => {
                    if let Some(m) = self.match_node(file, child) {
                        ov.matches.push(m);
                    }
                }
                "sysctl" => {
                    let mut settings = Vec::new();
                    self.sysctl(file, child, &mut settings);
                    merge_sysctl_into(&mut ov.layer.sysctl, settings, self.diags, self.sources);
                }
                "remove" => self.remove(file, child, &mut ov.layer),
                "service" => self.service(file, child, &mut ov.layer),
                "uses" => self.uses(file, child, &mut ov.layer),
                other => match Kind::from_keyword(other) {
                    Some(kind) => {
                        if let Some(decl) = self.resource(file, child, kind) {
                            push_resource(&mut ov.layer, decl, self.diags, self.sources);
                        }
                    }
                    None => self.unknown_node(file, child, &allowed(true), "inside `override`"),
                },
            }
        }
        if ov.matches.is_empty() {
            self.missing(file, node.name().span(), format!("override \"{}\"", ov.name), "`match`", "add `match LABEL=\"VALUE\"` (or `match host=\"NAME\"`) to say which hosts it applies to");
        }
        self.spec.overrides.push(ov);
    }

    pub(super) fn match_node(&mut self, file: FileId, node: &KdlNode) -> Option<Match> {
        self.no_args(file, node);
        self.no_children(file, node);
        let mut conditions = Vec::new();
        for (key, entry) in self.props(node) {
            match label_value(entry.value()) {
                Some(value) => conditions.push(Condition {
                    label: key.to_string(),
                    value,
                    span: self.span(file, entry.span()),
                }),
                None => self.wrong_type(
                    file,
                    &format!("match `{key}`"),
                    "a string",
                    entry.value(),
                    entry.span(),
                ),
            }
        }
        if conditions.is_empty() {
            self.missing(
                file,
                node.name().span(),
                "match",
                "label condition",
                "write `match LABEL=\"VALUE\"`; several properties must all hold",
            );
            return None;
        }
        Some(Match {
            conditions,
            span: self.span(file, node.span()),
        })
    }

    pub(super) fn remove(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        for (_, entry) in self.props(node) {
            self.unknown_prop(file, "remove", entry, &[]);
        }
        let args = self.args(node);
        if args.is_empty() {
            self.missing(
                file,
                node.name().span(),
                "remove",
                "`KIND:NAME` argument",
                "write `remove \"mount:mnt\" \"package:htop\"`",
            );
        }
        for entry in args {
            let Some(text) = self.string(file, "remove", entry) else {
                continue;
            };
            match parse_ref(&text) {
                Ok((kind, name)) => layer.removes.push(Removal {
                    kind,
                    name: name.to_string(),
                    span: self.span(file, entry.span()),
                }),
                Err(invalid) => self.invalid(file, entry.span(), invalid),
            }
        }
    }

    pub(super) fn service(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        let Some((name, _)) = self.name_arg(file, node, "service name") else {
            return;
        };
        let mut port = None;
        for (key, entry) in self.props(node) {
            match key {
                "port" => match entry.value() {
                    KdlValue::Integer(i) if (1..=65535).contains(i) => port = Some(*i as u16),
                    KdlValue::Integer(_) => self.diags.push(LowerError::InvalidValue {
                        message: "port out of range".into(),
                        span: entry.span(),
                        help: "a port is a number from 1 to 65535".into(),
                        file,
                    }),
                    other => self.wrong_type(file, "port", "a number", other, entry.span()),
                },
                _ => self.unknown_prop(file, "service", entry, &["port"]),
            }
        }
        layer.services.push(ServiceDecl {
            name,
            port,
            span: self.span(file, node.span()),
        });
    }

    pub(super) fn uses(&mut self, file: FileId, node: &KdlNode, layer: &mut Layer) {
        self.no_children(file, node);
        let Some((name, _)) = self.name_arg(file, node, "service name") else {
            return;
        };
        let mut uses = UsesDecl {
            name,
            count: 1,
            runtime: true,
            span: self.span(file, node.span()),
        };
        for (key, entry) in self.props(node) {
            match key {
                "count" => match entry.value() {
                    KdlValue::Integer(i) if (0..=u32::MAX as i128).contains(i) => {
                        uses.count = *i as u32
                    }
                    other => {
                        self.wrong_type(file, "count", "a non-negative number", other, entry.span())
                    }
                },
                "runtime" => {
                    if let Some(b) = self.bool(file, "runtime", entry) {
                        uses.runtime = b;
                    }
                }
                _ => self.unknown_prop(file, "uses", entry, &["count", "runtime"]),
            }
        }
        layer.uses.push(uses);
    }

    pub(super) fn rollout(&mut self, file: FileId, node: &KdlNode) {
        if self.rollout_seen {
            self.diags.push(LowerError::Duplicate {
                what: "rollout",
                name: "rollout".into(),
                span: node.name().span(),
                help: "a fleet has one rollout policy; keep one `rollout` node".into(),
                file,
            });
            return;
        }
        self.rollout_seen = true;
        self.no_args(file, node);
        self.no_children(file, node);
        let mut rollout = Rollout {
            batch_by: None,
            max_unavailable: MaxUnavailable::Count(1),
            span: self.span(file, node.span()),
        };
        for (key, entry) in self.props(node) {
            match key {
                "batch-by" => rollout.batch_by = self.string(file, "batch-by", entry),
                "max-unavailable" => match entry.value() {
                    KdlValue::Integer(i) if (1..=u32::MAX as i128).contains(i) => {
                        rollout.max_unavailable = MaxUnavailable::Count(*i as u32)
                    }
                    KdlValue::String(s) if parse_percent(s).is_some() => {
                        rollout.max_unavailable =
                            MaxUnavailable::Percent(parse_percent(s).unwrap_or(1))
                    }
                    other => self.wrong_type(
                        file,
                        "max-unavailable",
                        "a count of at least 1 or a percentage such as \"10%\"",
                        other,
                        entry.span(),
                    ),
                },
                _ => self.unknown_prop(file, "rollout", entry, &["batch-by", "max-unavailable"]),
            }
        }
        self.spec.rollout = Some(rollout);
    }
}

impl Lowerer<'_> {
    /// `assign LABEL="VALUE" [count=N] { match ... }`.
    pub(super) fn assign(&mut self, file: FileId, node: &KdlNode) {
        self.no_args(file, node);
        let help = "write `assign role=\"control\" count=3 { match disk=\"ssd\" }` (the first 3 \
                    matching hosts), or `assign role=\"node\"` (every host without a role)";
        let mut label: Option<(String, String)> = None;
        let mut count = None;
        // A mistake in a property drops the node (reported once, not again as a clash).
        let mut ok = true;
        for (key, entry) in self.props(node) {
            if key == "count" {
                match entry.value() {
                    KdlValue::Integer(i) if (1..=1_000_000).contains(i) => count = Some(*i as u32),
                    other => {
                        ok = false;
                        self.wrong_type(
                            file,
                            "assign count",
                            "a count from 1 to 1000000",
                            other,
                            entry.span(),
                        )
                    }
                }
                continue;
            }
            let Some(value) = label_value(entry.value()) else {
                ok = false;
                self.wrong_type(
                    file,
                    &format!("assign `{key}`"),
                    "a string",
                    entry.value(),
                    entry.span(),
                );
                continue;
            };
            if label.is_some() {
                ok = false;
                self.diags.push(LowerError::UnexpectedArgument {
                    node: "assign".into(),
                    expected: "one label",
                    span: entry.span(),
                    help: "each `assign` gives one label; write another `assign` for another"
                        .into(),
                    file,
                });
                continue;
            }
            let invalid = validate::label(key, &value).err().or_else(|| {
                (key == "host").then(|| validate::Invalid {
                    message: "`host` is the host's name, not a label to assign".into(),
                    help: "assign a label such as `role`".into(),
                })
            });
            if let Some(invalid) = invalid {
                ok = false;
                self.invalid(file, entry.span(), invalid);
                continue;
            }
            label = Some((key.to_string(), value));
        }
        let mut matches = Vec::new();
        if let Some(children) = node.children() {
            for child in children.nodes() {
                if child.name().value() == "match" {
                    if let Some(m) = self.match_node(file, child) {
                        matches.push(m);
                    }
                } else {
                    self.unknown_node(file, child, &["match"], "inside `assign`");
                }
            }
        }
        let Some((label, value)) = label else {
            if ok {
                self.missing(file, node.name().span(), "assign", "label", help);
            }
            return;
        };
        if !ok {
            return;
        }
        let span = self.span(file, node.span());
        if count.is_some() {
            if let Some(twin) = self
                .spec
                .assigns
                .iter()
                .find(|a| a.count.is_some() && a.label == label && a.value == value)
            {
                self.diags.push(LowerError::Duplicate {
                    what: "assign",
                    name: format!("{label}={value}"),
                    span: node.name().span(),
                    help: format!(
                        "already assigned by count at {}; keep one counted `assign` for each \
                         value of a label",
                        self.location(twin.span)
                    ),
                    file,
                });
                return;
            }
        } else if let Some(twin) = self
            .spec
            .assigns
            .iter()
            .find(|a| a.count.is_none() && a.label == label && a.matches.is_empty())
        {
            self.diags.push(LowerError::Duplicate {
                what: "assign",
                name: format!("{label}={value}"),
                span: node.name().span(),
                help: format!(
                    "`assign {label}=\"{}\"` at {} gives `{label}` to every host without one \
                     already, so this one gives nothing; add a `match` to the first, or keep one",
                    twin.value,
                    self.location(twin.span)
                ),
                file,
            });
            return;
        }
        self.spec.assigns.push(Assign {
            label,
            value,
            count,
            matches,
            span,
            hosts: Vec::new(),
        });
    }
}

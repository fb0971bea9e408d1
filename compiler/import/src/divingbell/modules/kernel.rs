//! sysctl, limits, mounts and ethtool: keys and named entries as bellc writes them.

use super::*;

impl Mapper {
    pub(super) fn sysctl(&mut self, conf: &Node, path: &str) {
        for (key, value) in self.entries(conf, path) {
            let Some(name) = key.scalar() else { continue };
            let Some(text) = self.text(value, &format!("{path}.{name}")) else {
                continue;
            };
            let rendered = number_or_string(&text);
            self.out.decls.push(Decl {
                id: format!("sysctl:{}", sysctl_path(name)),
                place: Place::Sysctl,
                removable: true,
                fields: BTreeMap::from([
                    ("key".to_string(), ident(name)),
                    ("value".to_string(), rendered.clone()),
                ]),
                text: format!("{} {rendered}", ident(name)),
                secret: false,
                defaults: BTreeMap::new(),
                head_len: 0,
                span: key.span,
                parts: Vec::new(),
            });
        }
    }

    pub(super) fn limits(&mut self, conf: &Node, path: &str) {
        const FIELDS: &[(&str, &str)] = &[
            ("domain", "domain"),
            ("type", "type"),
            ("item", "item"),
            ("value", "value"),
        ];
        self.named(conf, path, "limit", FIELDS);
    }

    pub(super) fn mounts(&mut self, conf: &Node, path: &str) {
        const FIELDS: &[(&str, &str)] = &[
            ("mnt_tgt", "target"),
            ("device", "device"),
            ("type", "type"),
            ("options", "options"),
            ("before", "before"),
            ("after", "after"),
        ];
        self.named(conf, path, "mount", FIELDS);
    }

    /// Entries by name whose fields are properties: each a `KIND "NAME"` node, `fields` the
    /// Divingbell key and the property it becomes. A `value` that is a whole number stays one.
    fn named(
        &mut self,
        conf: &Node,
        path: &str,
        kind: &'static str,
        fields: &[(&str, &'static str)],
    ) {
        let known: Vec<&str> = fields.iter().map(|(yaml, _)| *yaml).collect();
        for (name_key, entry) in self.entries(conf, path) {
            let Some(name) = name_key.scalar() else {
                continue;
            };
            let here = format!("{path}.{name}");
            let mut node = NodeText::new(kind, name);
            for (key, value) in self.entries(entry, &here) {
                let field = key.scalar().unwrap_or_default();
                let Some((_, prop)) = fields.iter().find(|(yaml, _)| *yaml == field) else {
                    self.unknown(key, &here, &known);
                    continue;
                };
                let Some(text) = self.text(value, &format!("{here}.{field}")) else {
                    continue;
                };
                let rendered = if *prop == "value" {
                    number_or_string(&text)
                } else {
                    string(&text)
                };
                node.from(value.span);
                node.prop(prop, rendered);
            }
            self.out.decls.push(node.decl(name_key.span));
        }
    }

    pub(super) fn ethtool(&mut self, conf: &Node, path: &str) {
        for (interface_key, settings) in self.entries(conf, path) {
            let name_span = interface_key.span;
            let Some(interface) = interface_key.scalar() else {
                continue;
            };
            let here = format!("{path}.{interface}");
            let mut node = NodeText::new("ethtool", interface);
            for (feature_key, value) in self.entries(settings, &here) {
                let Some(feature) = feature_key.scalar() else {
                    continue;
                };
                let at = format!("{here}.{feature}");
                let Some(on) = boolean(value) else {
                    // Divingbell's script stops at it on every host ("Expected 'on' or 'off'").
                    self.refuse(value, &at, "it takes on or off");
                    continue;
                };
                node.from(feature_key.span);
                node.child(
                    "",
                    format!("{} {}", ident(feature), if on { "on" } else { "off" }),
                );
            }
            self.out.decls.push(node.decl(name_span));
        }
    }
}

//! apparmor profiles and perm entries.

use super::*;

impl Mapper {
    pub(super) fn apparmor(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["complain_mode", "profiles"];
        let mut complain = false;
        let mut profiles = Vec::new();
        for (key, value) in self.entries(conf, path) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{path}.{field}");
            match field {
                "complain_mode" => complain = self.boolean(value, &at).unwrap_or(false),
                "profiles" => {
                    for (name_key, profile) in self.entries(value, &at) {
                        let Some(name) = name_key.scalar() else {
                            continue;
                        };
                        if let Some(text) = self.text(profile, &format!("{at}.{name}")) {
                            profiles.push((name.to_string(), text, name_key.span));
                        }
                    }
                }
                _ => self.unknown(key, path, KNOWN),
            }
        }
        for (name, text, span) in profiles {
            let mut node = NodeText::new("apparmor", &name);
            if complain {
                node.prop("mode", string("complain"));
            }
            node.child("profile", block(&text, "    "));
            self.out.decls.push(node.decl(span));
        }
    }

    /// `conf.perm`: `paths` with `rerun_policy` and `rerun_interval` beside them (Divingbell's
    /// current chart), or the list of paths alone (its older one).
    pub(super) fn perm(&mut self, conf: &Node, path: &str) {
        if conf.entries().is_some() {
            const KNOWN: &[&str] = &["paths", "rerun_policy", "rerun_interval"];
            let mut policy = None;
            let mut finite_interval = None;
            for (key, value) in self.entries(conf, path) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{path}.{field}");
                match field {
                    "paths" => self.perm_paths(value, &at),
                    "rerun_policy" | "rerun_interval" => {
                        let valid = if field == "rerun_policy" {
                            let known = matches!(
                                value.scalar(),
                                Some("always" | "never" | "once_successfully")
                            );
                            if known {
                                policy = value.scalar().map(|p| (p.to_string(), value));
                            } else {
                                self.refuse(value, &at, POLICIES);
                            }
                            known
                        } else {
                            let seconds = self.interval(value, &at);
                            if seconds.as_deref().is_some_and(|s| s != "\"infinite\"") {
                                finite_interval = Some(value);
                            }
                            seconds.is_some()
                        };
                        if valid {
                            self.note(
                                key.span,
                                format!("`{at}`: bellc sets permissions on every apply and its check reports drift between applies; kept as a comment"),
                                "a periodic `bell-run apply` (or `bell-run check`) replaces Divingbell's reruns",
                            );
                        }
                    }
                    _ => self.unknown(key, path, KNOWN),
                }
            }
            // Divingbell's rule for every module with reruns: a finite interval reruns always.
            if let (Some(interval), Some((policy, _))) = (finite_interval, &policy) {
                if policy != "always" {
                    self.refuse(
                        interval,
                        &format!("{path}.rerun_interval"),
                        &format!("a finite `rerun_interval` needs `rerun_policy: always`, and it is `{policy}`"),
                    );
                }
            }
        } else {
            self.perm_paths(conf, path);
        }
    }

    fn perm_paths(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &["path", "owner", "group", "permissions"];
        for (i, perm) in self.items(conf, path).iter().enumerate() {
            let here = format!("{path}[{i}]");
            let Some(target) = perm.get("path").and_then(Node::scalar) else {
                self.shape(perm, &here, "an entry with a `path`");
                continue;
            };
            let mut node = NodeText::new("perm", target);
            for (key, value) in self.entries(perm, &here) {
                let field = key.scalar().unwrap_or_default();
                let at = format!("{here}.{field}");
                let prop = match field {
                    "path" => continue,
                    "owner" => "owner",
                    "group" => "group",
                    "permissions" => "mode",
                    _ => {
                        self.unknown(key, &here, KNOWN);
                        continue;
                    }
                };
                if let Some(mut text) = self.text(value, &at) {
                    // chmod reads `644` as `0644`; bell writes modes with four digits.
                    if prop == "mode"
                        && text.len() == 3
                        && text.bytes().all(|b| (b'0'..=b'7').contains(&b))
                    {
                        text.insert(0, '0');
                    }
                    node.from(value.span);
                    node.prop(prop, string(&text));
                }
            }
            self.out.decls.push(node.decl(perm.span));
        }
    }
}

//! apt: packages (a list, or a mapping of lists), blacklisted packages, repositories, and
//! the current chart's global `allow_downgrade`, `strict` and `whitelistpkgs`.

use super::*;

impl Mapper {
    pub(super) fn apt(&mut self, conf: &Node, path: &str) {
        const KNOWN: &[&str] = &[
            "upgrade",
            "allow_downgrade",
            "strict",
            "packages",
            "blacklistpkgs",
            "whitelistpkgs",
            "repositories",
        ];
        let mut apt = NodeText::singleton("apt");
        let mut downgrade = false;
        // Divingbell installs `packages`, then purges `blacklistpkgs`: one in both ends absent.
        let blacklisted: Vec<&str> = conf
            .get("blacklistpkgs")
            .and_then(Node::items)
            .unwrap_or_default()
            .iter()
            .filter_map(|item| item.get("name").unwrap_or(item).scalar())
            .collect();
        for (key, value) in self.entries(conf, path) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{path}.{field}");
            match field {
                "upgrade" => {
                    if let Some(upgrade) = self.boolean(value, &at) {
                        apt.prop("upgrade", format!("#{upgrade}"));
                    }
                }
                // The current chart's global form, for every package it installs.
                "allow_downgrade" => {
                    if let Some(allow) = self.boolean(value, &at) {
                        downgrade |= allow;
                    }
                }
                "strict" => {
                    if self.boolean(value, &at) == Some(true) {
                        self.note(
                            key.span,
                            format!("`{at}`: Divingbell purges every installed package `packages` does not name (but `whitelistpkgs`); bellc removes only what it installed and the spec no longer names, so the spec keeps the other packages of a host"),
                            "declare `package NAME absent=#true` for each package that must go",
                        );
                    }
                }
                // Spared by the purges of strict mode and of packages that leave the list;
                // bellc never purges a package it did not install, so there is nothing to say.
                "whitelistpkgs" => {
                    self.words(value, &at);
                }
                "packages" => {
                    // A list, or (current chart) a mapping of lists, installed in key order.
                    let packages: Vec<(String, &Node)> = match &value.value {
                        Value::Map(groups) => {
                            let mut groups: Vec<&(Node, Node)> = groups.iter().collect();
                            groups.sort_by(|a, b| a.0.scalar().cmp(&b.0.scalar()));
                            groups
                                .into_iter()
                                .flat_map(|(group, list)| {
                                    let group = group.scalar().unwrap_or_default().to_string();
                                    let at = format!("{at}.{group}");
                                    self.items(list, &at)
                                        .iter()
                                        .enumerate()
                                        .map(move |(i, p)| (format!("{at}[{i}]"), p))
                                        .collect::<Vec<_>>()
                                })
                                .collect()
                        }
                        _ => self
                            .items(value, &at)
                            .iter()
                            .enumerate()
                            .map(|(i, p)| (format!("{at}[{i}]"), p))
                            .collect(),
                    };
                    for (here, package) in packages {
                        match package.get("name").and_then(Node::scalar) {
                            Some(name) if blacklisted.contains(&name) => self.note(
                                package.span,
                                format!("`{here}` is `{name}`, which `{path}.blacklistpkgs` names too: Divingbell installs it and then removes it, so the spec keeps it absent"),
                                "take it out of one of the two lists",
                            ),
                            _ => downgrade |= self.package(package, &here),
                        }
                    }
                }
                "blacklistpkgs" => {
                    for (i, item) in self.items(value, &at).iter().enumerate() {
                        let here = format!("{at}[{i}]");
                        let name = match item.get("name") {
                            Some(name) => self.text(name, &format!("{here}.name")),
                            None => self.text(item, &here),
                        };
                        if let Some(name) = name {
                            let mut node = NodeText::new("package", &name);
                            node.prop("absent", "#true".into());
                            self.out.decls.push(node.decl(item.span));
                        }
                    }
                }
                // A mapping by name in Divingbell's current chart, a list in its older one.
                "repositories" => match &value.value {
                    Value::Map(repos) => {
                        for (name, repo) in repos {
                            let name = name.scalar().unwrap_or_default();
                            self.repository(repo, &format!("{at}.{name}"), name);
                        }
                    }
                    _ => {
                        for (i, repo) in self.items(value, &at).iter().enumerate() {
                            let name = format!("repository-{}", i + 1);
                            self.repository(repo, &format!("{at}[{i}]"), &name);
                        }
                    }
                },
                _ => self.unknown(key, path, KNOWN),
            }
        }
        if downgrade {
            apt.prop("allow-downgrade", "#true".into());
        }
        if !apt.props.is_empty() {
            self.out.decls.push(apt.decl(conf.span));
        }
    }

    /// A package; whether it allows a downgrade.
    fn package(&mut self, package: &Node, here: &str) -> bool {
        const KNOWN: &[&str] = &["name", "version", "allow_downgrade", "debconf", "repo"];
        let Some(name) = package.get("name").and_then(Node::scalar) else {
            self.shape(package, here, "a package with a `name`");
            return false;
        };
        let mut node = NodeText::new("package", name);
        let mut downgrade = false;
        for (key, value) in self.entries(package, here) {
            let field = key.scalar().unwrap_or_default();
            let at = format!("{here}.{field}");
            node.from(value.span);
            match field {
                "name" => {}
                "version" => {
                    if let Some(version) = self.text(value, &at) {
                        node.prop("version", string(&version));
                    }
                }
                "allow_downgrade" => {
                    if self.boolean(value, &at) == Some(true) {
                        downgrade = true;
                        self.note(
                            key.span,
                            format!("`{at}`: bellc allows downgrades for every package or none; the spec allows them for all (`apt allow-downgrade=#true`)"),
                            "keep it if the fleet may go back to an older version of any managed package",
                        );
                    }
                }
                "repo" => self.note(
                    key.span,
                    format!("`{at}`: bellc has no target release per package (`apt-get -t`); kept as a comment"),
                    "pin the version with `version=`, or give the release's source as an `apt-source`",
                ),
                "debconf" => {
                    for (i, answer) in self.items(value, &at).iter().enumerate() {
                        let here = format!("{at}[{i}]");
                        let get = |k: &str| answer.get(k).and_then(Node::scalar).map(str::to_string);
                        match (get("question"), get("question_type"), get("answer")) {
                            (Some(q), Some(t), Some(a)) => {
                                node.from(answer.span);
                                node.child(
                                    "debconf",
                                    format!("{} type={} value={}", string(&q), string(&t), string(&a)),
                                )
                            }
                            _ => self.shape(answer, &here, "a `question`, `question_type` and `answer`"),
                        }
                    }
                }
                _ => self.unknown(key, here, KNOWN),
            }
        }
        self.out
            .decls
            .push(node.decl(package.get("name").map_or(package.span, |n| n.span)));
        downgrade
    }

    fn repository(&mut self, repo: &Node, here: &str, name: &str) {
        const KNOWN: &[&str] = &["url", "distributions", "components", "subrepos", "gpgkey"];
        let Some(url) = repo.get("url").and_then(Node::scalar) else {
            self.shape(repo, here, "a repository with a `url`");
            return;
        };
        let mut suites = Vec::new();
        let mut components = Vec::new();
        let mut subrepos = Vec::new();
        let mut key = None;
        for (k, value) in self.entries(repo, here) {
            let field = k.scalar().unwrap_or_default();
            let at = format!("{here}.{field}");
            match field {
                "url" => {}
                "distributions" => suites = self.words(value, &at),
                "components" => components = self.words(value, &at),
                "subrepos" => subrepos = self.words(value, &at),
                "gpgkey" => key = self.text(value, &at),
                _ => self.unknown(k, here, KNOWN),
            }
        }
        // Divingbell writes `deb URL DIST COMPONENTS` and one line per `DIST-SUBREPO`.
        let mut all = suites.clone();
        for suite in &suites {
            all.extend(subrepos.iter().map(|s| format!("{suite}-{s}")));
        }
        let mut node = NodeText::new("apt-source", name);
        node.prop("url", string(url));
        node.prop("suites", string(&all.join(" ")));
        if !components.is_empty() {
            node.prop("components", string(&components.join(" ")));
        }
        if let Some(key) = key {
            node.child("key", block(&key, "    "));
        }
        self.out.decls.push(node.decl(repo.span));
    }
}

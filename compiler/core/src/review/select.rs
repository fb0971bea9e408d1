//! Which hosts a review command is about, said the same way everywhere: host names or globs
//! (`web-*`), and label conditions as `match` writes them (`--where role=db,rack=r01`: every
//! condition must hold; `host=NAME` is the host's name, as in `match`).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Names or globs; a host is selected when any matches (none given: every host).
    patterns: Vec<glob::Pattern>,
    /// `LABEL=VALUE` conditions, all of which must hold.
    conditions: Vec<(String, String)>,
}

impl Selector {
    /// `patterns` as given on the command line, `wheres` each a comma-separated list of
    /// `LABEL=VALUE` (the option may be repeated).
    pub fn parse(patterns: &[String], wheres: &[String]) -> Result<Selector, String> {
        let mut selector = Selector::default();
        for text in patterns {
            let pattern = glob::Pattern::new(text)
                .map_err(|e| format!("`{text}` is not a host name or glob: {e}"))?;
            selector.patterns.push(pattern);
        }
        for text in wheres {
            for part in text.split(',') {
                let (label, value) = part.split_once('=').ok_or_else(|| {
                    format!(
                        "`{part}` in `--where {text}` is not LABEL=VALUE (as `match` writes \
                         it: `--where role=db,rack=r01`)"
                    )
                })?;
                if label.is_empty() {
                    return Err(format!("`{part}` in `--where {text}` names no label"));
                }
                selector
                    .conditions
                    .push((label.to_string(), value.to_string()));
            }
        }
        Ok(selector)
    }

    /// Whether a host of this name and labels is selected.
    pub fn selects(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        let named = self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(name));
        named
            && self.conditions.iter().all(|(label, value)| {
                if label == "host" {
                    name == value
                } else {
                    labels.get(label) == Some(value)
                }
            })
    }

    pub fn has_conditions(&self) -> bool {
        !self.conditions.is_empty()
    }

    pub fn is_everything(&self) -> bool {
        self.patterns.is_empty() && self.conditions.is_empty()
    }

    /// As a person wrote it: `web-* where role=db`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.patterns.iter().map(|p| p.to_string()).collect();
        if !self.conditions.is_empty() {
            let conditions: Vec<String> = self
                .conditions
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            parts.push(format!("where {}", conditions.join(",")));
        }
        if parts.is_empty() {
            "every host".to_string()
        } else {
            parts.join(" ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Selector;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_globs_and_label_conditions() {
        let db = labels(&[("role", "db"), ("rack", "r01")]);
        let web = labels(&[("role", "web"), ("rack", "r01")]);
        let all = Selector::parse(&[], &[]).unwrap();
        assert!(all.is_everything() && all.selects("x", &db));
        let glob = Selector::parse(&["web-*".into()], &[]).unwrap();
        assert!(glob.selects("web-1", &web) && !glob.selects("db-1", &db));
        let where_ = Selector::parse(&[], &["role=db,rack=r01".into()]).unwrap();
        assert!(where_.selects("db-1", &db) && !where_.selects("web-1", &web));
        let host = Selector::parse(&[], &["host=db-1".into()]).unwrap();
        assert!(host.selects("db-1", &db) && !host.selects("db-2", &db));
        assert_eq!(
            Selector::parse(&["db-?".into()], &["rack=r01".into()])
                .unwrap()
                .describe(),
            "db-? where rack=r01"
        );
        assert!(Selector::parse(&[], &["role".into()])
            .unwrap_err()
            .contains("LABEL=VALUE"));
        assert!(Selector::parse(&["[".into()], &[]).is_err());
    }
}

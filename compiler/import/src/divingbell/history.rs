//! What Divingbell did differently over its chart's history, where the import knows it.
//!
//! Sites pinned the chart at a commit and kept it for years: treasuremap's 2018 documents ran a
//! chart that refuses what its 2020 chart takes, and expires the image's account on another
//! rule. `--divingbell-version` names the chart a site ran; each rule below is the behaviour
//! before and since the commit that changed it, and the newest chart is the default.

/// One change of behaviour: the commit that made it and what it changed.
pub struct Change {
    /// The chart commit (abbreviated as the chart's log shows it).
    pub commit: &'static str,
    pub what: &'static str,
}

/// The changes the import follows, oldest first (the chart at 77be358's successors still
/// refuses `[]`: 4c6ac47 is the later of the two).
pub const CHANGES: &[Change] = &[
    Change {
        commit: "77be358",
        what: "uamlite expires the image's account only when some other sudo user has a password and some other sudo user has ssh keys (before: whenever another sudo user is declared)",
    },
    Change {
        commit: "4c6ac47",
        what: "`user_sshkeys: []` leaves a user's authorized_keys unmanaged, as `[ Unmanaged ]` does (before: the chart fails to render it)",
    },
];

/// The rules of one chart version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// How many of `CHANGES` the chart has (`CHANGES.len()` for the newest).
    since: usize,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            since: CHANGES.len(),
        }
    }
}

/// When uamlite expires the image's built-in account (`ubuntu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultAccountRule {
    /// Another user with `user_sudo: true` is declared.
    AnySudoUser,
    /// Another sudo user has a password and another (or the same) sudo user has ssh keys.
    SudoPasswordAndSudoKeys,
}

impl Rules {
    /// The rules of the chart at `reference`: `newest`, `oldest`, or one of `CHANGES`'
    /// commits (a prefix of at least 7 hex digits), meaning the chart with that change and
    /// every one before it.
    pub fn at(reference: &str) -> Result<Rules, String> {
        let known = || {
            let commits: Vec<&str> = CHANGES.iter().map(|c| c.commit).collect();
            format!("give `newest`, `oldest`, or the newest of these chart commits your chart includes: {} (oldest first; `bellc import divingbell --help` says what each changed)", commits.join(", "))
        };
        match reference {
            "newest" => return Ok(Rules::default()),
            "oldest" => return Ok(Rules { since: 0 }),
            _ => {}
        }
        let hex = reference.len() >= 7 && reference.chars().all(|c| c.is_ascii_hexdigit());
        if !hex {
            return Err(format!(
                "`{reference}` is not a Divingbell chart version the import knows; {}",
                known()
            ));
        }
        let lower = reference.to_ascii_lowercase();
        match CHANGES
            .iter()
            .position(|c| lower.starts_with(c.commit) || c.commit.starts_with(&lower))
        {
            Some(i) => Ok(Rules { since: i + 1 }),
            None => Err(format!(
                "`{reference}` is not a chart commit whose behaviour the import knows; {}",
                known()
            )),
        }
    }

    fn has(self, commit: &str) -> bool {
        CHANGES[..self.since].iter().any(|c| c.commit == commit)
    }

    pub fn default_account(self) -> DefaultAccountRule {
        if self.has("77be358") {
            DefaultAccountRule::SudoPasswordAndSudoKeys
        } else {
            DefaultAccountRule::AnySudoUser
        }
    }

    /// `user_sshkeys: []` is unmanaged; before, the chart refuses it.
    pub fn empty_ssh_keys_unmanaged(self) -> bool {
        self.has("4c6ac47")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_names_the_chart_with_that_change_and_those_before() {
        let at = Rules::at("4c6ac47").unwrap();
        assert!(at.empty_ssh_keys_unmanaged());
        assert_eq!(
            at.default_account(),
            DefaultAccountRule::SudoPasswordAndSudoKeys
        );
        let oldest = Rules::at("oldest").unwrap();
        assert_eq!(oldest.default_account(), DefaultAccountRule::AnySudoUser);
        assert!(!oldest.empty_ssh_keys_unmanaged());
        assert_eq!(Rules::at("newest").unwrap(), Rules::default());
        assert!(Rules::at("4C6AC470").is_ok());
        for wrong in ["2019-01-01", "abc", "1234567"] {
            let e = Rules::at(wrong).unwrap_err();
            assert!(e.contains("77be358, 4c6ac47"), "{e}");
        }
    }
}

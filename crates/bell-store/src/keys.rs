//! Where things are in etcd, named here once for the writers, the readers and the
//! least-privilege roles alike: every key bell writes is built by a function of this module,
//! a key read back is told apart by [`Key::parse`], and what each party of a fleet may read
//! and write ([`host_grants`], [`controller_grants`], [`enroll_grants`], [`reader_grants`]) is
//! granted from the same functions, so a key cannot move without its grant.
//!
//! ```text
//! /bell/FLEET/current_version             the published release          controller
//! /bell/FLEET/desired/HOST                the bundle HOST should run      controller
//! /bell/FLEET/running/HOST                HOST's last apply (or pull)     HOST
//! /bell/FLEET/reports/COMMAND/HOST        HOST's last COMMAND (check)     HOST
//! /bell/FLEET/reports/health/HOST         HOST's health, for live files   HOST (a provider)
//! /bell/FLEET/reports/live/HOST           HOST's live files, between runs HOST (a consumer)
//! /bell/FLEET/status/CATEGORY/HOST        each category's state           HOST
//! /bell/FLEET/alive/HOST                  on HOST's lease                 HOST
//! /bell/FLEET/holds/HOST                  an operator's hold              controller
//! /bell/FLEET/discovery/HOST              a machine's registration        HOST, enroll
//! /bell/FLEET/discovery-rejected/HOST     an operator's refusal           controller
//! /bell/FLEET/rollout/...                 progress, pause, lease, history controller
//! PREFIX/groups/GROUP/v1/semaphore        a rollout group's slots         its hosts
//! PREFIX/groups/GROUP/v1/holders/HOST     who holds one                   HOST
//! ```

use bell_wire::etcd::{Access, Permission};

/// The categories a report files a state under (`status/CATEGORY/HOST`), the ones a pull's
/// report sets (see `bell-run`'s `report::from_apply`).
pub const STATUS_CATEGORIES: [&str; 3] = ["apply", "check", "health"];

/// The commands whose last report a host keeps: `apply` (and `pull`) under `running/`,
/// `check` under `reports/check/`.
pub const REPORTED_COMMANDS: [&str; 2] = ["apply", "check"];

/// The command a provider files its health under (`reports/health/HOST`), for the live files
/// of its services' consumers (see [`crate::ready`]).
pub const HEALTH_COMMAND: &str = "health";

/// The command `bell-run live` files what its live files list under (`reports/live/HOST`),
/// between the host's runs.
pub const LIVE_COMMAND: &str = "live";

/// The reports a host files beside its runs' ([`REPORTED_COMMANDS`]): read into its view, but
/// never taken for its last run, nor for the state of one of its categories.
pub const SIDE_COMMANDS: [&str; 2] = [HEALTH_COMMAND, LIVE_COMMAND];

/// Everything of the fleet's, `/bell/FLEET/`: what its readers read.
pub fn fleet_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}/")
}

pub fn running_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/running/{host}")
}

/// Where the last report of `command` is: an apply's (or pull's) under `running/`, the others
/// under `reports/COMMAND/`, so that a host that alternates pulls and checks compares each
/// with the last of its kind and writes nothing when neither changed.
pub fn report_key(fleet: &str, command: &str, host: &str) -> String {
    if command == "apply" {
        running_key(fleet, host)
    } else {
        format!("/bell/{fleet}/reports/{command}/{host}")
    }
}

pub fn status_key(fleet: &str, category: &str, host: &str) -> String {
    format!("{}{category}/{host}", status_prefix(fleet))
}

/// Every state of every category, `/bell/FLEET/status/`.
pub fn status_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}/status/")
}

/// Bound to the host's lease: there while the host runs (see [`Store::keep_alive`]).
pub fn alive_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/alive/{host}")
}

pub fn desired_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/desired/{host}")
}

/// Every host's desired bundle, `/bell/FLEET/desired/`.
pub fn desired_prefix(fleet: &str) -> String {
    desired_key(fleet, "")
}

pub fn version_key(fleet: &str) -> String {
    format!("/bell/{fleet}/current_version")
}

/// An operator's hold of `host` (`bellc hold`); `host` empty: the prefix of every hold.
pub fn hold_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/holds/{host}")
}

/// The gateway's word that `host` has been over its rate for a while (`bellc gateway`);
/// `host` empty: the prefix of every one.
pub fn throttled_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/throttled/{host}")
}

/// The key a gateway replica writes to learn that its watch has caught up with etcd (see
/// `bell_ops::watch::Cache::start_marking`): its write is an event of the fleet's range at a
/// revision etcd names, where a revision learned by reading may be another fleet's.
pub fn sync_key(fleet: &str) -> String {
    format!("/bell/{fleet}/sync")
}

/// A machine's registration (`bell-run register`); `host` empty: the prefix of every one.
pub fn registration_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/discovery/{host}")
}

/// An operator's refusal of `host`'s registration; `host` empty: the prefix of every one.
pub fn rejection_key(fleet: &str, host: &str) -> String {
    format!("/bell/{fleet}/discovery-rejected/{host}")
}

/// The registrations and the refusals together: the refusals' prefix starts with the
/// registrations' name, so one range reads both.
pub fn enrollment_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}/discovery")
}

/// The rollout controller's part of the store: its progress, pause, lease and history.
pub fn rollout_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}/rollout/")
}

pub fn progress_key(fleet: &str) -> String {
    format!("{}progress", rollout_prefix(fleet))
}

/// An operator's pause of the fleet's rollout (`bellc rollout --pause`).
pub fn pause_key(fleet: &str) -> String {
    format!("{}paused", rollout_prefix(fleet))
}

/// On the lease of the controller that moves the fleet: two never run at once.
pub fn controller_key(fleet: &str) -> String {
    format!("{}controller", rollout_prefix(fleet))
}

/// One entry per rollout, by when it started.
pub fn history_prefix(fleet: &str) -> String {
    format!("{}history/", rollout_prefix(fleet))
}

/// The default prefix: the fleet's own part of the store.
pub fn default_prefix(fleet: &str) -> String {
    format!("/bell/{fleet}")
}

/// Where the rollout groups' semaphores of hosts pulling with `--lock-prefix PREFIX` are.
pub fn groups_prefix(prefix: &str) -> String {
    format!("{prefix}/groups/")
}

pub fn semaphore_key(prefix: &str, group: &str) -> String {
    format!("{prefix}/groups/{}/v1/semaphore", query_escape(group))
}

pub fn holder_key(prefix: &str, group: &str, host: &str) -> String {
    format!("{prefix}/groups/{}/v1/holders/{host}", query_escape(group))
}

/// A key of a fleet's part of the store, read back: which it is, and whose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'k> {
    Version,
    Desired {
        host: &'k str,
    },
    /// The last report of `command` (`apply` for `running/`).
    Report {
        command: &'k str,
        host: &'k str,
    },
    Status {
        category: &'k str,
        host: &'k str,
    },
    Alive {
        host: &'k str,
    },
    Hold {
        host: &'k str,
    },
    Registration {
        host: &'k str,
    },
    Throttled {
        host: &'k str,
    },
    Rejection {
        host: &'k str,
    },
    /// A gateway's mark of its watch (see [`sync_key`]): no reader's business.
    Sync,
    /// Anything under `rollout/`.
    Rollout {
        rest: &'k str,
    },
}

impl<'k> Key<'k> {
    /// What `key` is in `fleet`'s part of the store; `None` for a key outside it, or one no
    /// function here builds. A host's name is what follows its kind's prefix, as written.
    pub fn parse(fleet: &str, key: &'k str) -> Option<Key<'k>> {
        let rest = key
            .strip_prefix("/bell/")?
            .strip_prefix(fleet)?
            .strip_prefix('/')?;
        if rest == "current_version" {
            return Some(Key::Version);
        }
        if rest == "sync" {
            return Some(Key::Sync);
        }
        let (kind, tail) = rest.split_once('/')?;
        Some(match kind {
            "desired" => Key::Desired { host: tail },
            "running" => Key::Report {
                command: "apply",
                host: tail,
            },
            "reports" => {
                let (command, host) = tail.split_once('/')?;
                Key::Report { command, host }
            }
            "status" => {
                let (category, host) = tail.split_once('/')?;
                Key::Status { category, host }
            }
            "alive" => Key::Alive { host: tail },
            "holds" => Key::Hold { host: tail },
            "throttled" => Key::Throttled { host: tail },
            "discovery" => Key::Registration { host: tail },
            "discovery-rejected" => Key::Rejection { host: tail },
            "rollout" => Key::Rollout { rest: tail },
            _ => return None,
        })
    }
}

/// What a host may read and write: its own desired bundle, hold and the published version
/// (read); its own reports, states, liveness key and registration, its rollout group's
/// semaphore (airlock's format shares one key per group) and its own holder record. Exact
/// keys, never a host's prefix: a prefix `running/web-1` would also cover `web-10`.
pub fn host_grants(fleet: &str, host: &str, lock_prefix: &str, group: &str) -> Vec<Permission> {
    let mut grants = vec![
        Permission::key(Access::Read, &desired_key(fleet, host)),
        Permission::key(Access::Read, &version_key(fleet)),
        // Whether an operator holds it, read with its desired bundle.
        Permission::key(Access::Read, &hold_key(fleet, host)),
        Permission::key(Access::ReadWrite, &alive_key(fleet, host)),
        Permission::key(Access::ReadWrite, &semaphore_key(lock_prefix, group)),
        Permission::key(Access::ReadWrite, &holder_key(lock_prefix, group, host)),
        // Its registration, filed again when a fact changes.
        Permission::key(Access::ReadWrite, &registration_key(fleet, host)),
    ];
    // Its runs' reports, its health (for the live files of its services' consumers, `ready`)
    // and what its live files list.
    for command in REPORTED_COMMANDS.iter().chain(&SIDE_COMMANDS) {
        grants.push(Permission::key(
            Access::ReadWrite,
            &report_key(fleet, command, host),
        ));
    }
    // Every host's health and liveness, read by a consumer's live files: the names of the
    // fleet's hosts, their probes and whether they pass, nothing of their configuration.
    grants.push(Permission::prefix(
        Access::Read,
        &report_key(fleet, HEALTH_COMMAND, ""),
    ));
    grants.push(Permission::prefix(Access::Read, &alive_key(fleet, "")));
    for category in STATUS_CATEGORIES {
        grants.push(Permission::key(
            Access::ReadWrite,
            &status_key(fleet, category, host),
        ));
    }
    grants.sort();
    grants
}

/// What a reader (`bellc serve`, `status`) may read: the fleet's part, and the semaphores
/// when `--lock-prefix` put them elsewhere.
pub fn reader_grants(fleet: &str, lock_prefix: &str) -> Vec<Permission> {
    let fleet_prefix = fleet_prefix(fleet);
    let groups = groups_prefix(lock_prefix);
    let mut grants = vec![Permission::prefix(Access::Read, &fleet_prefix)];
    if !groups.starts_with(&fleet_prefix) {
        grants.push(Permission::prefix(Access::Read, &groups));
    }
    grants.sort();
    grants
}

/// What the controller may write besides what a reader reads: the desired map, the version,
/// the rollout's records, holds (`bellc hold`, `unhold`), and registrations and refusals
/// (`bellc hosts reject` removes one and records the other).
pub fn controller_grants(fleet: &str, lock_prefix: &str) -> Vec<Permission> {
    let mut grants = reader_grants(fleet, lock_prefix);
    grants.extend([
        Permission::prefix(Access::ReadWrite, &desired_prefix(fleet)),
        Permission::prefix(Access::ReadWrite, &rollout_prefix(fleet)),
        Permission::key(Access::ReadWrite, &version_key(fleet)),
        Permission::prefix(Access::ReadWrite, &hold_key(fleet, "")),
        Permission::prefix(Access::ReadWrite, &registration_key(fleet, "")),
        Permission::prefix(Access::ReadWrite, &rejection_key(fleet, "")),
    ]);
    grants.sort();
    grants
}

/// What the fleet's gateway (`bellc gateway`) may do as the one user all hosts' requests pass
/// through: what every host may write, by prefix (each request is held to its own host's
/// [`host_grants`] by the gateway before it is sent). Never the desired map's writes, the
/// version's, the rollout's records or a hold: a gateway taken over can delay and withhold,
/// never move the fleet.
pub fn gateway_grants(fleet: &str, lock_prefix: &str) -> Vec<Permission> {
    // All of the fleet's part read, and watched: the gateway answers hosts' reads from its
    // cache of it.
    let mut grants = vec![
        Permission::prefix(Access::Read, &fleet_prefix(fleet)),
        Permission::prefix(Access::ReadWrite, &alive_key(fleet, "")),
        Permission::prefix(Access::ReadWrite, &registration_key(fleet, "")),
        Permission::prefix(Access::ReadWrite, &groups_prefix(lock_prefix)),
        Permission::prefix(Access::ReadWrite, &status_prefix(fleet)),
        Permission::prefix(Access::ReadWrite, &throttled_key(fleet, "")),
        Permission::key(Access::ReadWrite, &sync_key(fleet)),
    ];
    for command in REPORTED_COMMANDS.iter().chain(&SIDE_COMMANDS) {
        grants.push(Permission::prefix(
            Access::ReadWrite,
            &report_key(fleet, command, ""),
        ));
    }
    grants.sort();
    grants.dedup();
    grants
}

/// What the machines not in the fleet yet share: filing registrations, nothing else. Each is
/// signed by the identity it names, so one machine overwriting another's shows as invalid or
/// as another identity, never as it.
pub fn enroll_grants(fleet: &str) -> Vec<Permission> {
    vec![Permission::prefix(
        Access::ReadWrite,
        &registration_key(fleet, ""),
    )]
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space becomes `+`, every other
/// byte `%XX`.
pub fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The inverse of [`query_escape`] (`%XX` and `+`).
pub fn query_unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = text
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key a host writes reads back as that host's, and is granted to it and to no other
    /// host (`web-1`'s grants do not reach `web-10`'s keys).
    #[test]
    fn a_hosts_keys_read_back_as_its_own_and_are_granted_to_it_alone() {
        let written = [
            (
                report_key("f", "apply", "web-1"),
                Key::Report {
                    command: "apply",
                    host: "web-1",
                },
            ),
            (
                report_key("f", "check", "web-1"),
                Key::Report {
                    command: "check",
                    host: "web-1",
                },
            ),
            (
                status_key("f", "health", "web-1"),
                Key::Status {
                    category: "health",
                    host: "web-1",
                },
            ),
            (alive_key("f", "web-1"), Key::Alive { host: "web-1" }),
            (
                registration_key("f", "web-1"),
                Key::Registration { host: "web-1" },
            ),
        ];
        let grants = host_grants("f", "web-1", &default_prefix("f"), "default");
        let other = host_grants("f", "web-10", &default_prefix("f"), "default");
        let allows = |grants: &[Permission], key: &str| {
            grants.iter().any(|p| {
                p.access == Access::ReadWrite
                    && if p.range_end.is_empty() {
                        p.key == key.as_bytes()
                    } else {
                        key.as_bytes() >= &p.key[..] && key.as_bytes() < &p.range_end[..]
                    }
            })
        };
        for (key, kind) in &written {
            assert_eq!(Key::parse("f", key), Some(*kind), "{key}");
            assert!(allows(&grants, key), "web-1 may not write {key}");
            assert!(!allows(&other, key), "web-10 may write {key}");
        }
        for key in [
            desired_key("f", "web-1"),
            version_key("f"),
            hold_key("f", "web-1"),
            // The gateway's own, which it writes as itself.
            sync_key("f"),
        ] {
            assert!(!allows(&grants, &key), "a host may write {key}");
            assert!(Key::parse("f", &key).is_some(), "{key}");
        }
    }

    #[test]
    fn keys_of_another_fleet_or_of_no_kind_are_not_read_as_ours() {
        assert_eq!(Key::parse("f", &alive_key("f2", "h")), None);
        assert_eq!(Key::parse("f2", &alive_key("f", "h")), None);
        assert_eq!(Key::parse("f", "/bell/f/elsewhere/h"), None);
        assert_eq!(Key::parse("f", &version_key("f")), Some(Key::Version));
        assert_eq!(Key::parse("f", &sync_key("f")), Some(Key::Sync));
        assert_eq!(
            Key::parse("f", &progress_key("f")),
            Some(Key::Rollout { rest: "progress" })
        );
        assert_eq!(
            Key::parse("f", &rejection_key("f", "h")),
            Some(Key::Rejection { host: "h" })
        );
    }
}

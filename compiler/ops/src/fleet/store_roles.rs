//! The etcd users and roles a fleet needs, each allowed no more than its part: a host reads
//! its own desired bundle and the published version and writes its own reports, states,
//! liveness key and holder record, and the semaphore of its rollout group (airlock's format
//! shares one key per group); the controller writes the desired map, the version and the
//! rollout's records; `serve` and `status` only read.

use bell_bundle::Release;
use bell_store::keys;
use bell_wire::etcd::Permission;

/// One etcd user, with a role of the same name that holds its permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// `host/FLEET/HOST`, `controller/FLEET`, `enroll/FLEET` or `serve/FLEET`: the user and its role.
    pub name: String,
    /// Where `--passwords DIR` keeps its password: the host's name, `controller`, `enroll` or
    /// `serve`.
    pub password_file: String,
    /// Sorted.
    pub permissions: Vec<Permission>,
}

/// Every role of `release`'s fleet, hosts first in name order, then the controller and serve.
/// `lock_prefix` is where the hosts' semaphores are (`bell-run pull --lock-prefix`). The
/// grants are `bell_store::keys`'s, beside the keys they name.
pub fn plan(release: &Release, lock_prefix: &str) -> Vec<Role> {
    let fleet = &release.fleet;
    let mut roles = Vec::new();
    for (host, entry) in &release.hosts {
        let group = match &release.rollout {
            Some(rollout) => rollout.group_name(entry),
            None => bell_bundle::DEFAULT_GROUP,
        };
        roles.push(Role {
            name: format!("host/{fleet}/{host}"),
            password_file: host.clone(),
            permissions: keys::host_grants(fleet, host, lock_prefix, group),
        });
    }
    roles.push(Role {
        name: format!("controller/{fleet}"),
        password_file: "controller".into(),
        permissions: keys::controller_grants(fleet, lock_prefix),
    });
    // A machine not in the fleet yet has no user of its own: new machines share this one.
    roles.push(Role {
        name: format!("enroll/{fleet}"),
        password_file: "enroll".into(),
        permissions: keys::enroll_grants(fleet),
    });
    // The hosts' door (`bellc gateway`): what they all may, each request held to its host's.
    roles.push(Role {
        name: format!("gateway/{fleet}"),
        password_file: "gateway".into(),
        permissions: keys::gateway_grants(fleet, lock_prefix),
    });
    roles.push(Role {
        name: format!("serve/{fleet}"),
        password_file: "serve".into(),
        permissions: keys::reader_grants(fleet, lock_prefix),
    });
    roles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(hosts: &[&str]) -> Release {
        let mut text =
            String::from(r#"{"format":1,"fleet":"f","version":"v","created_by":"t","hosts":{"#);
        let entries: Vec<String> = hosts
            .iter()
            .map(|h| format!(r#""{h}":{{"bundle":"b","address":null,"labels":{{}}}}"#))
            .collect();
        text.push_str(&entries.join(","));
        text.push_str("}}");
        serde_json::from_str(&text).expect("a release")
    }

    #[test]
    fn a_host_gets_exact_keys_so_web_1_is_not_web_10() {
        let roles = plan(&release(&["web-1", "web-10"]), "/bell/f");
        let web1 = &roles[0];
        assert_eq!(web1.name, "host/f/web-1");
        let described: Vec<String> = web1.permissions.iter().map(|p| p.describe()).collect();
        // What it writes and its own keys: exact keys. A prefix only to read every host's
        // health and liveness, for its live files.
        let prefixes: Vec<&String> = web1
            .permissions
            .iter()
            .zip(&described)
            .filter(|(p, _)| !p.range_end.is_empty())
            .map(|(_, d)| d)
            .collect();
        assert_eq!(
            prefixes,
            [
                "READ /bell/f/alive/ (prefix)",
                "READ /bell/f/reports/health/ (prefix)"
            ],
            "{described:?}"
        );
        assert!(described.contains(&"READWRITE /bell/f/running/web-1".to_string()));
        assert!(described.contains(&"READ /bell/f/desired/web-1".to_string()));
        assert!(described.contains(&"READWRITE /bell/f/groups/default/v1/semaphore".to_string()));
        assert!(
            !described.iter().any(|d| d.contains("web-10")),
            "{described:?}"
        );
        assert!(
            !described.iter().any(|d| d.contains("rollout")),
            "{described:?}"
        );
    }

    #[test]
    fn the_controller_writes_the_map_and_serve_only_reads() {
        let roles = plan(&release(&["a"]), "com.coreos.airlock");
        let controller = roles
            .iter()
            .find(|r| r.name == "controller/f")
            .expect("controller");
        let serve = roles.iter().find(|r| r.name == "serve/f").expect("serve");
        assert!(serve
            .permissions
            .iter()
            .all(|p| p.access == bell_wire::etcd::Access::Read));
        let described: Vec<String> = controller
            .permissions
            .iter()
            .map(|p| p.describe())
            .collect();
        assert!(described.contains(&"READWRITE /bell/f/desired/ (prefix)".to_string()));
        assert!(described.contains(&"READ com.coreos.airlock/groups/ (prefix)".to_string()));
        assert!(
            !described.iter().any(|d| d.contains("running")),
            "{described:?}"
        );
    }
}

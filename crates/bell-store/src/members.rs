//! Each member of an etcd cluster asked about itself (etcd's maintenance status, one request
//! per endpoint): whether it answers, whether it knows a leader, what it reports wrong. A
//! cluster of three with one member dead still answers every request bell makes, so only
//! asking every member shows the dead one before a second death costs the quorum.

use crate::Etcd;
use bell_wire::etcd::number;
use serde::Serialize;

/// One member as it answered (or did not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    /// `HOST:PORT`, as the store URL names it.
    pub endpoint: String,
    /// It answered and knows a leader, with no error of its own: it can serve requests.
    pub up: bool,
    /// It is the cluster's leader.
    pub leader: bool,
    /// etcd's version, as the member says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The size of its database file, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size: Option<u64>,
    /// Why it is not up: the request's failure, "no leader", or the errors (alarms) it reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every endpoint of `etcd`, asked at once (a member that does not answer costs its connect
/// timeout, not one per member), in the order the store URL gives them.
pub fn members(etcd: &Etcd) -> Vec<Member> {
    let endpoints = etcd.endpoints();
    std::thread::scope(|scope| {
        let asked: Vec<_> = (0..endpoints.len())
            .map(|at| {
                scope.spawn(move || {
                    etcd.call_member(at, "/v3/maintenance/status", &serde_json::json!({}))
                })
            })
            .collect();
        asked
            .into_iter()
            .zip(endpoints)
            .map(|(answer, endpoint)| {
                let answer = answer
                    .join()
                    .unwrap_or_else(|_| Err("the request's thread panicked".to_string()));
                member(endpoint, answer)
            })
            .collect()
    })
}

/// A member from its status answer.
fn member(endpoint: &str, answer: Result<serde_json::Value, String>) -> Member {
    let mut member = Member {
        endpoint: endpoint.to_string(),
        up: false,
        leader: false,
        version: None,
        db_size: None,
        error: None,
    };
    let status = match answer {
        Ok(status) => status,
        Err(error) => {
            member.error = Some(error);
            return member;
        }
    };
    member.version = status
        .get("version")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    member.db_size = number(status.get("dbSize")).and_then(|n| u64::try_from(n).ok());
    let id = member_id(status.get("header").and_then(|h| h.get("member_id")));
    let leader = member_id(status.get("leader")).filter(|&id| id != 0);
    member.leader = id.is_some() && id == leader;
    let errors: Vec<String> = status
        .get("errors")
        .and_then(|e| e.as_array())
        .into_iter()
        .flatten()
        .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
        .collect();
    member.error = if !errors.is_empty() {
        Some(errors.join("; "))
    } else if leader.is_none() {
        Some("it knows no leader (cut off from the quorum)".to_string())
    } else {
        None
    };
    member.up = member.error.is_none();
    member
}

/// A member id: 64 bits unsigned, sent as a decimal string (past `i64::MAX` for half of them).
fn member_id(value: Option<&serde_json::Value>) -> Option<u64> {
    match value? {
        serde_json::Value::String(text) => text.parse().ok(),
        other => other.as_u64(),
    }
}

#[cfg(test)]
mod tests {
    use super::member;

    #[test]
    fn a_member_is_up_when_it_answers_with_a_leader_and_no_error() {
        let status = serde_json::json!({
            "header": { "member_id": "42" }, "version": "3.4.23", "dbSize": "20480",
            "leader": "42",
        });
        let m = member("127.0.0.1:2379", Ok(status));
        assert!(m.up && m.leader, "{m:?}");
        assert_eq!(m.db_size, Some(20480));
        assert_eq!(m.version.as_deref(), Some("3.4.23"));

        // Ids are unsigned 64-bit: half of them do not fit an i64.
        let big = serde_json::json!({
            "header": { "member_id": "10276657743932975437" }, "leader": "10276657743932975437",
        });
        let m = member("a:1", Ok(big));
        assert!(m.up && m.leader, "{m:?}");

        let follower = serde_json::json!({ "header": { "member_id": "7" }, "leader": "42" });
        let m = member("a:1", Ok(follower));
        assert!(m.up && !m.leader);

        let alone = serde_json::json!({ "header": { "member_id": "7" }, "leader": "0" });
        let m = member("a:1", Ok(alone));
        assert!(!m.up);
        assert!(m.error.unwrap().contains("no leader"));

        let alarm = serde_json::json!({
            "header": { "member_id": "7" }, "leader": "7", "errors": ["NOSPACE"],
        });
        let m = member("a:1", Ok(alarm));
        assert_eq!((m.up, m.error.as_deref()), (false, Some("NOSPACE")));

        let dead = member("a:1", Err("connection refused".into()));
        assert_eq!(
            (dead.up, dead.error.as_deref()),
            (false, Some("connection refused"))
        );
    }
}

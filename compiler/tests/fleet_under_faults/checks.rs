//! The checkers: each guarantee of the fleet side, as a function of the recorded history (and
//! etcd's own history of the semaphores), returning what broke it with the part of the history
//! that shows it. None of them looks at the fleet while it runs.

use super::history::{Ended, Ending, Run, Seen};
use std::collections::{BTreeMap, BTreeSet};

/// A guarantee broken: which, how, and the lines of the history that show it.
#[derive(Debug)]
pub struct Finding {
    pub check: &'static str,
    pub what: String,
    pub history: Vec<String>,
}

/// One version of a group's semaphore in etcd's history: the revision that wrote it, and its
/// holders (`None`: deleted).
#[derive(Debug, Clone)]
pub struct SemaphoreVersion {
    pub revision: i64,
    pub group: String,
    pub holders: Option<Vec<String>>,
    pub total_slots: Option<u64>,
}

/// The disruption budget, from every version of every group's semaphore: at no revision more
/// holders than the slots the spec gives the group, and every version one host away from the
/// one before (a write that did not compare the version it read would drop a holder that
/// another host had just added, and both would change at once with one slot between them).
pub fn budget(versions: &[SemaphoreVersion], slots: u64) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut last: BTreeMap<&str, (&SemaphoreVersion, BTreeSet<&str>)> = BTreeMap::new();
    for version in versions {
        let holders: BTreeSet<&str> = version
            .holders
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let line = |v: &SemaphoreVersion| {
            format!(
                "revision {} group {}: {:?} of {:?} slots",
                v.revision, v.group, v.holders, v.total_slots
            )
        };
        if holders.len() as u64 > slots {
            findings.push(Finding {
                check: "budget",
                what: format!(
                    "group {} had {} holders with {slots} slots",
                    version.group,
                    holders.len()
                ),
                history: vec![line(version)],
            });
        }
        if let Some((before, held)) = last.get(version.group.as_str()) {
            let changed = held.symmetric_difference(&holders).count();
            if changed > 1 {
                findings.push(Finding {
                    check: "budget",
                    what: format!(
                        "group {}'s semaphore changed {changed} holders in one write (a write \
                         over a version it did not read)",
                        version.group
                    ),
                    history: vec![line(before), line(version)],
                });
            }
        }
        last.insert(&version.group, (version, holders));
    }
    findings
}

/// What the key signed, read from the served directory and verified: each release file's
/// sha256, with its sequence and the bundle it gives each host.
pub struct Signed {
    pub releases: BTreeMap<String, (u64, BTreeMap<String, String>)>,
}

impl Signed {
    fn bundles_of(&self, host: &str) -> BTreeSet<&str> {
        self.releases
            .values()
            .filter_map(|(_, hosts)| hosts.get(host).map(String::as_str))
            .collect()
    }
}

/// No host applied a release older than one it had accepted (its accepted sequence never goes
/// down from one run to the next), accepted a release the key did not sign, or ran a bundle
/// that no signed release gives it.
pub fn releases(runs: &[Run], signed: &Signed) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut by_host: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for run in runs {
        by_host.entry(&run.host).or_default().push(run);
    }
    for (host, runs) in by_host {
        let allowed = signed.bundles_of(host);
        let mut newest: Option<&Run> = None;
        for run in runs {
            if let Some((sequence, sha)) = &run.after.accepted {
                match signed.releases.get(sha) {
                    None => findings.push(Finding {
                        check: "releases",
                        what: format!("{host} accepted a release file ({sha}) the key never signed"),
                        history: vec![run.to_string()],
                    }),
                    Some((signed_sequence, _)) if signed_sequence != sequence => {
                        findings.push(Finding {
                            check: "releases",
                            what: format!(
                                "{host} recorded sequence {sequence} for a release signed as {signed_sequence}"
                            ),
                            history: vec![run.to_string()],
                        })
                    }
                    Some(_) => {}
                }
                if let Some(before) = newest {
                    let (had, _) = before.after.accepted.as_ref().expect("newest has one");
                    if sequence < had {
                        findings.push(Finding {
                            check: "releases",
                            what: format!(
                                "{host} went back from release sequence {had} to {sequence}"
                            ),
                            history: vec![before.to_string(), run.to_string()],
                        });
                    }
                }
                if newest
                    .and_then(|n| n.after.accepted.as_ref())
                    .is_none_or(|(had, _)| sequence >= had)
                {
                    newest = Some(run);
                }
            }
            for generation in run.after.generation.iter().chain(&run.after.applied) {
                if !allowed.contains(generation.as_str()) {
                    findings.push(Finding {
                        check: "releases",
                        what: format!(
                            "{host} ran bundle {generation}, which no signed release gives it"
                        ),
                        history: vec![run.to_string()],
                    });
                }
            }
        }
    }
    findings
}

/// No host ended a run with a mix of two generations: after every run that was not killed,
/// `current` is the state's generation and every managed file holds what the state records.
/// (A killed run is judged by the next one, which must finish the switch or take it back.)
pub fn generations(runs: &[Run], last: &BTreeMap<String, Seen>) -> Vec<Finding> {
    let mut findings = Vec::new();
    for run in runs {
        if let (Ended::Exited(_), Some(mixed)) = (&run.ended, &run.after.mixed) {
            findings.push(Finding {
                check: "generations",
                what: format!("{} ended a run on a mix of generations: {mixed}", run.host),
                history: vec![run.to_string()],
            });
        }
    }
    for (host, seen) in last {
        if let Some(mixed) = &seen.mixed {
            findings.push(Finding {
                check: "generations",
                what: format!("{host} ended the test on a mix of generations: {mixed}"),
                history: Vec::new(),
            });
        }
    }
    findings
}

/// Every rollout that was not aborted ended with every host on its target, and every aborted
/// one with the hosts back where they were; and every rollout ended.
pub fn rollouts(endings: &[Ending], released: u32) -> Vec<Finding> {
    let mut findings = Vec::new();
    for ending in endings {
        let off: Vec<String> = ending
            .want
            .iter()
            .filter(|(host, want)| ending.on.get(*host).and_then(Option::as_deref) != Some(want))
            .map(|(host, want)| format!("{host} on {:?}, not {want}", ending.on.get(host)))
            .collect();
        if !off.is_empty() {
            findings.push(Finding {
                check: "rollouts",
                what: format!(
                    "release {} ended {} at {:.1} s with hosts elsewhere",
                    ending.number,
                    ending.how,
                    ending.at.as_secs_f64()
                ),
                history: off,
            });
        }
    }
    let ended: BTreeSet<u32> = endings.iter().map(|e| e.number).collect();
    for number in 1..=released {
        if !ended.contains(&number) {
            findings.push(Finding {
                check: "rollouts",
                what: format!("the rollout of release {number} never ended"),
                history: Vec::new(),
            });
        }
    }
    findings
}

/// No report was lost: each host's last report in the store (its bytes as stored) is its own
/// (signed by the identity `identities` gives it, when the fleet gives it one: a report
/// garbled or forged in the store was written over) and says what its last run left (the
/// bundle, the release and the result its state records). A run that finds what the one
/// before found writes nothing (the store stays quiet), so the report may be older than the
/// last run, never different from it.
pub fn reports(
    last: &BTreeMap<String, Seen>,
    stored: &BTreeMap<String, Option<Vec<u8>>>,
    identities: &BTreeMap<String, String>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (host, seen) in last {
        let mut found = |what: String, history: Vec<String>| {
            findings.push(Finding {
                check: "reports",
                what,
                history,
            })
        };
        let Some(raw) = stored.get(host).cloned().flatten() else {
            found(format!("{host} has no report in the store"), Vec::new());
            continue;
        };
        let shown = String::from_utf8_lossy(&raw).chars().take(300).collect();
        let (Ok(report), Ok(typed)) = (
            serde_json::from_slice::<serde_json::Value>(&raw),
            serde_json::from_slice::<bell_store::Report>(&raw),
        ) else {
            found(
                format!("{host}'s report in the store is not one"),
                vec![shown],
            );
            continue;
        };
        if let Some(identity) = identities.get(host) {
            let identity = bell_store::proof::Identity::parse(identity).expect("an identity");
            let proof = bell_store::proof::check(&raw, &typed, host, Some(&identity));
            if !matches!(proof, bell_store::proof::Proof::Signed { .. }) {
                found(
                    format!("{host}'s report in the store is not its own: {proof:?}"),
                    vec![shown],
                );
                continue;
            }
        }
        let bundle = report["bundle"].as_str().map(str::to_string);
        let release = report["release"].as_str().map(str::to_string);
        let finished = report["finished_at"].as_u64().unwrap_or(0);
        let result = match seen.result.as_deref() {
            Some("ok") => "success",
            Some(other) => other,
            None => "",
        };
        if bundle != seen.generation || release != seen.release || report["result"] != result {
            found(
                format!("{host}'s last report is not of its last apply"),
                vec![
                    format!(
                        "state: generation {:?} release {:?} applied at {:?}",
                        seen.generation, seen.release, seen.applied_at
                    ),
                    format!(
                        "report: bundle {bundle:?} release {release:?} finished at {finished} \
                         result {}",
                        report["result"]
                    ),
                ],
            );
        }
    }
    findings
}

//! The fault schedule: drawn from a seed, so that a run that broke a guarantee can be run again
//! with the same faults at the same moments (the fleet's own timing still varies, as it does
//! in Jepsen's and etcd's functional tests; the schedule and the seed are printed with every
//! failure).

use std::fmt;
use std::time::Duration;

/// splitmix64: small, and the same numbers for a seed on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A span between `lo` and `hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Which etcd member a fault takes: the leader at that moment, or one by its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Leader,
    Index(usize),
}

/// Where a killed host's bell-run dies: at one of its named crash points (`BELL_RUN_FAILPOINT`,
/// SIGKILL there, mid-apply when the pull applies), or a SIGKILL from outside after a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillAt {
    Failpoint(&'static str),
    After(Duration),
}

/// bell-run's crash points, in the order an apply reaches them (runner/src/failpoint.rs).
pub const FAILPOINTS: [&str; 11] = [
    "before-revert",
    "after-revert",
    "staging-journal",
    "mid-stage",
    "staged",
    "committed",
    "mid-switch",
    "switched",
    "switch-recorded",
    "before-apply",
    "after-apply",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL, then started again on its data at the window's end.
    EtcdKill(Member),
    /// SIGSTOP, SIGCONT at the end: a member that neither answers nor closes its connections.
    EtcdPause(Member),
    /// The rollout controller SIGKILLed wherever it is (once, at the window's start); the
    /// operator resumes it.
    ControllerKill,
    MirrorDown,
    MirrorTrickle,
    /// The host's bell-runs die (each that reaches the crash point, or each after a while).
    HostKill(usize, KillAt),
    /// The host's clock (`BELL_RUN_NOW`) ahead (or behind) by this many seconds.
    HostClock(usize, i64),
    /// The host's root's file system filled to its last byte.
    DiskFull(usize),
    /// The host's report in the store written over (once, at the window's start).
    ReportGarbled(usize, Garble),
}

/// How a report is garbled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Garble {
    /// Cut in half: no reader can parse it.
    Junk,
    /// Changed after it was signed, to say the host is healthy on what the mirror serves.
    Forged,
}

impl Fault {
    fn is_etcd(&self) -> bool {
        matches!(self, Fault::EtcdKill(_) | Fault::EtcdPause(_))
    }

    fn is_mirror(&self) -> bool {
        matches!(self, Fault::MirrorDown | Fault::MirrorTrickle)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Duration,
    pub length: Duration,
    pub fault: Fault,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>7.1}s +{:>5.1}s  {:?}",
            self.start.as_secs_f64(),
            self.length.as_secs_f64(),
            self.fault
        )
    }
}

/// The faults of a run of `span` over `hosts` hosts: one every one to four seconds, each
/// lasting two to twelve. They overlap freely, except that at most one etcd member is down or
/// paused at a time (two of three would be a cluster without quorum, which stalls the fleet
/// rather than tests it) and one mirror fault at a time.
pub fn draw(seed: u64, span: Duration, hosts: usize) -> Vec<Window> {
    let mut rng = Rng::new(seed);
    let mut windows: Vec<Window> = Vec::new();
    let mut at = rng.millis(500, 3000);
    while at < span {
        let length = rng.millis(2000, 12_000).min(span - at);
        let host = rng.below(hosts as u64) as usize;
        let member = if rng.chance(40) {
            Member::Leader
        } else {
            Member::Index(rng.below(3) as usize)
        };
        let fault = match rng.below(11) {
            0 => Fault::EtcdKill(member),
            1 => Fault::EtcdPause(member),
            2 => Fault::ControllerKill,
            3 => Fault::MirrorDown,
            4 => Fault::MirrorTrickle,
            5 | 6 => Fault::HostKill(
                host,
                if rng.chance(60) {
                    KillAt::Failpoint(FAILPOINTS[rng.below(FAILPOINTS.len() as u64) as usize])
                } else {
                    KillAt::After(rng.millis(20, 1500))
                },
            ),
            9 => Fault::DiskFull(host),
            10 => Fault::ReportGarbled(
                host,
                if rng.chance(50) {
                    Garble::Junk
                } else {
                    Garble::Forged
                },
            ),
            _ => {
                let seconds = 30 + rng.below(3600) as i64;
                Fault::HostClock(host, if rng.chance(50) { seconds } else { -seconds })
            }
        };
        let busy = |w: &Window, same: fn(&Fault) -> bool| {
            same(&w.fault) && same(&fault) && w.start + w.length > at
        };
        let clashes = windows
            .iter()
            .any(|w| busy(w, Fault::is_etcd) || busy(w, Fault::is_mirror));
        if !clashes {
            windows.push(Window {
                start: at,
                length,
                fault,
            });
        }
        at += rng.millis(1000, 4000);
    }
    windows
}

#[test]
fn a_seed_draws_one_schedule() {
    let span = Duration::from_secs(600);
    let first = draw(7, span, 12);
    let again = draw(7, span, 12);
    assert_eq!(format!("{first:?}"), format!("{again:?}"));
    assert_ne!(format!("{first:?}"), format!("{:?}", draw(8, span, 12)));
    // Every kind comes in a long enough run, and etcd's faults never overlap.
    for kind in [
        "EtcdKill",
        "EtcdPause",
        "ControllerKill",
        "MirrorDown",
        "MirrorTrickle",
        "HostKill",
        "HostClock",
        "DiskFull",
        "ReportGarbled",
    ] {
        assert!(
            first
                .iter()
                .any(|w| format!("{:?}", w.fault).starts_with(kind)),
            "{kind}"
        );
    }
    let etcd: Vec<&Window> = first.iter().filter(|w| w.fault.is_etcd()).collect();
    for pair in etcd.windows(2) {
        assert!(pair[0].start + pair[0].length <= pair[1].start, "{pair:?}");
    }
    assert!(first.iter().all(|w| w.start + w.length <= span));
}

//! `bell-run apply --timings`: where the time of one apply went, per phase (verify, plan,
//! stage, revert, switch, triggers, scripts, reboot (the checks of what takes effect at boot), state, health) and, inside the phases, per kind of
//! resource whose scripts ran. Measured always (a clock read per script is nothing beside the
//! script), printed only when asked.

use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    pub total_ms: f64,
    /// In the order they ran; together they are the whole apply.
    pub phases: Vec<Phase>,
    /// Scripts run and their time, per kind, whichever phase ran them.
    pub kinds: Vec<KindTime>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: &'static str,
    pub ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct KindTime {
    pub kind: String,
    pub scripts: usize,
    pub ms: f64,
}

/// Laps of one apply. Scripts are timed through a shared reference (the context that runs
/// them is shared), phases by the apply itself.
pub struct Clock {
    start: Instant,
    last: Cell<Instant>,
    phases: RefCell<Vec<Phase>>,
    scripts: RefCell<BTreeMap<String, (usize, Duration)>>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Clock {
    pub fn start() -> Clock {
        let now = Instant::now();
        Clock {
            start: now,
            last: Cell::new(now),
            phases: RefCell::new(Vec::new()),
            scripts: RefCell::new(BTreeMap::new()),
        }
    }

    /// Ends the phase `name`: the time since the last lap is its own.
    pub fn lap(&self, name: &'static str) {
        let now = Instant::now();
        self.phases.borrow_mut().push(Phase {
            name,
            ms: ms(now - self.last.get()),
        });
        self.last.set(now);
    }

    /// One script of a resource of `kind` ran for `took`.
    pub fn script(&self, kind: &str, took: Duration) {
        let mut scripts = self.scripts.borrow_mut();
        let entry = scripts.entry(kind.to_string()).or_default();
        entry.0 += 1;
        entry.1 += took;
    }

    pub fn finish(&self) -> Timings {
        Timings {
            total_ms: ms(self.last.get() - self.start),
            phases: self.phases.borrow().clone(),
            kinds: self
                .scripts
                .borrow()
                .iter()
                .map(|(kind, (scripts, took))| KindTime {
                    kind: kind.clone(),
                    scripts: *scripts,
                    ms: ms(*took),
                })
                .collect(),
        }
    }
}

impl Timings {
    /// The table `bell-run apply --timings` prints.
    pub fn table(&self) -> String {
        let mut out = format!("timings: {:.1} ms\n", self.total_ms);
        for phase in &self.phases {
            out.push_str(&format!("  {:<9} {:>8.1} ms\n", phase.name, phase.ms));
        }
        if !self.kinds.is_empty() {
            out.push_str("  scripts by kind:\n");
            for kind in &self.kinds {
                out.push_str(&format!(
                    "    {:<16} {:>3} × {:>8.1} ms\n",
                    kind.kind, kind.scripts, kind.ms
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_to_the_total_and_scripts_group_by_kind() {
        let clock = Clock::start();
        std::thread::sleep(Duration::from_millis(2));
        clock.lap("verify");
        clock.script("sysctl", Duration::from_millis(3));
        clock.script("sysctl", Duration::from_millis(4));
        clock.script("user", Duration::from_millis(5));
        clock.lap("scripts");
        let t = clock.finish();
        let sum: f64 = t.phases.iter().map(|p| p.ms).sum();
        assert!((sum - t.total_ms).abs() < 1e-6, "{sum} vs {}", t.total_ms);
        assert!(t.phases[0].ms >= 2.0);
        assert_eq!(t.kinds.len(), 2);
        assert_eq!(
            (t.kinds[0].kind.as_str(), t.kinds[0].scripts),
            ("sysctl", 2)
        );
        assert!((t.kinds[0].ms - 7.0).abs() < 1e-6);
        assert!(t.table().contains("sysctl"));
    }
}

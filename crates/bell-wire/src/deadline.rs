//! When an exchange must be over. Every connection and every read waits at most what is left
//! of one deadline: a server that sends a byte every few seconds never trips a read timeout,
//! and without a deadline for the whole it would hold a pull, a report or a rollout for ever.
//! A deadline is a value passed to each call, never a global, so that two exchanges of one
//! process (a pull's fetch and its report) each keep their own.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
    /// What a caller is told once the deadline has passed: whose time ran out, in the words of
    /// the command (`the fetch ran out of time (--fetch-timeout)`).
    says: &'static str,
}

impl Deadline {
    /// `within` from now.
    pub fn after(within: Duration, says: &'static str) -> Deadline {
        Deadline::at(Instant::now() + within, says)
    }

    pub fn at(at: Instant, says: &'static str) -> Deadline {
        Deadline { at, says }
    }

    /// This deadline, or `other` when that comes first (with `other`'s words).
    pub fn or_sooner(self, other: Option<Deadline>) -> Deadline {
        match other {
            Some(other) if other.at < self.at => other,
            _ => self,
        }
    }

    pub fn instant(&self) -> Instant {
        self.at
    }

    pub fn says(&self) -> &'static str {
        self.says
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }

    /// How long one step may wait: `limit`, or less when the deadline is nearer; what the
    /// deadline says once it has passed (a socket refuses a zero timeout, and `None` would
    /// mean no limit at all).
    pub fn wait(&self, limit: Duration) -> Result<Duration, String> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.says.to_string());
        }
        Ok(left.min(limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_waits_at_most_what_is_left() {
        let soon = Deadline::after(Duration::from_secs(5), "soon");
        assert!(soon.wait(Duration::from_secs(60)).unwrap() <= Duration::from_secs(5));
        assert_eq!(
            soon.wait(Duration::from_secs(1)).unwrap(),
            Duration::from_secs(1)
        );
        let gone = Deadline::at(Instant::now() - Duration::from_secs(1), "gone");
        assert_eq!(gone.wait(Duration::from_secs(1)).unwrap_err(), "gone");
        assert!(gone.passed());
        assert_eq!(soon.or_sooner(Some(gone)).says(), "gone");
        assert_eq!(gone.or_sooner(Some(soon)).says(), "gone");
        assert_eq!(soon.or_sooner(None).says(), "soon");
    }
}

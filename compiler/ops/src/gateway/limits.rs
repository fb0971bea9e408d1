//! What one host may spend: requests and bytes per second, each a token bucket with a burst,
//! per identity (the fairness key, as the Kubernetes API server's priority and fairness uses
//! the user). A host over its rate is answered 429 with a `Retry-After` that doubles for every
//! refusal in a row, so a host that keeps pushing is told to wait longer, and one that waits
//! as told is served again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The limits of every host (the same for all: a host's word counts only about itself).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Requests per second, and how many may come at once after a quiet while.
    pub requests_per_second: f64,
    pub request_burst: f64,
    /// Bytes of request bodies per second, and the burst.
    pub bytes_per_second: f64,
    pub byte_burst: f64,
    /// The largest value a host may write (a report is a few KiB; a registration less).
    pub max_value: usize,
}

impl Default for Limits {
    /// A pull every minute or so files a handful of requests of a few KiB each: these leave a
    /// host ten times that, and cap what a runaway or hostile one can put into etcd at about
    /// 64 KiB a second (5.5 GiB a day across a 1,000-host fleet only if every host pushes at
    /// once, which `bell_host_throttled` shows within a minute).
    fn default() -> Limits {
        Limits {
            requests_per_second: 5.0,
            request_burst: 60.0,
            bytes_per_second: 64.0 * 1024.0,
            byte_burst: 1024.0 * 1024.0,
            max_value: 256 * 1024,
        }
    }
}

/// The longest wait a refusal asks for.
const MAX_RETRY_AFTER: u64 = 300;

struct Bucket {
    requests: f64,
    bytes: f64,
    at: Instant,
    /// Refusals in a row.
    strikes: u32,
    /// When the host was last refused, and since when it has been refused without a pause.
    refused_at: Option<Instant>,
    throttled_since: Option<Instant>,
    refusals: u64,
}

/// The buckets of every host the gateway heard from.
pub struct Buckets {
    limits: Limits,
    hosts: HashMap<String, Bucket>,
}

/// A host that is being refused, for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Throttled {
    pub host: String,
    pub refusals: u64,
    /// Seconds since its refusals began, without a minute's pause.
    pub for_seconds: u64,
}

impl Buckets {
    pub fn new(limits: Limits) -> Buckets {
        Buckets {
            limits,
            hosts: HashMap::new(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Takes one request of `bytes` from `host`'s buckets at `now`: `Err(seconds)` to wait when
    /// either is empty (and nothing is taken).
    pub fn take(&mut self, host: &str, bytes: usize, now: Instant) -> Result<(), u64> {
        let limits = self.limits;
        let bucket = self.hosts.entry(host.to_string()).or_insert(Bucket {
            requests: limits.request_burst,
            bytes: limits.byte_burst,
            at: now,
            strikes: 0,
            refused_at: None,
            throttled_since: None,
            refusals: 0,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.at = now;
        bucket.requests =
            (bucket.requests + elapsed * limits.requests_per_second).min(limits.request_burst);
        bucket.bytes = (bucket.bytes + elapsed * limits.bytes_per_second).min(limits.byte_burst);
        // A body larger than the whole burst could never pass: it is charged the burst.
        let cost = (bytes as f64).min(limits.byte_burst);
        if bucket.requests >= 1.0 && bucket.bytes >= cost {
            bucket.requests -= 1.0;
            bucket.bytes -= cost;
            bucket.strikes = 0;
            if bucket
                .refused_at
                .is_some_and(|at| now.saturating_duration_since(at) > Duration::from_secs(60))
            {
                bucket.throttled_since = None;
            }
            return Ok(());
        }
        let wait_requests = (1.0 - bucket.requests).max(0.0) / limits.requests_per_second;
        let wait_bytes = (cost - bucket.bytes).max(0.0) / limits.bytes_per_second;
        let wait = wait_requests.max(wait_bytes).ceil().max(1.0) as u64;
        let grown = wait.saturating_mul(1 << bucket.strikes.min(8));
        bucket.strikes = bucket.strikes.saturating_add(1);
        bucket.refused_at = Some(now);
        bucket.throttled_since.get_or_insert(now);
        bucket.refusals += 1;
        Err(grown.min(MAX_RETRY_AFTER))
    }

    /// The hosts refused within the last minute, by name.
    pub fn throttled(&self, now: Instant) -> Vec<Throttled> {
        let mut out: Vec<Throttled> = self
            .hosts
            .iter()
            .filter_map(|(host, b)| {
                let at = b.refused_at?;
                if now.saturating_duration_since(at) > Duration::from_secs(60) {
                    return None;
                }
                Some(Throttled {
                    host: host.clone(),
                    refusals: b.refusals,
                    for_seconds: b
                        .throttled_since
                        .map_or(0, |s| now.saturating_duration_since(s).as_secs()),
                })
            })
            .collect();
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_over_its_rate_waits_longer_each_time_and_others_do_not_wait() {
        let limits = Limits {
            requests_per_second: 1.0,
            request_burst: 3.0,
            ..Limits::default()
        };
        let mut buckets = Buckets::new(limits);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(buckets.take("h1", 10, t0), Ok(()));
        }
        let waits: Vec<u64> = (0..4)
            .map(|_| buckets.take("h1", 10, t0).unwrap_err())
            .collect();
        assert_eq!(waits, vec![1, 2, 4, 8]);
        assert_eq!(buckets.take("h2", 10, t0), Ok(()));
        assert_eq!(buckets.throttled(t0)[0].host, "h1");
        // Having waited, h1 is served again, and its waits start over.
        let later = t0 + Duration::from_secs(2);
        assert_eq!(buckets.take("h1", 10, later), Ok(()));
        assert_eq!(buckets.take("h1", 10, later), Ok(()));
        assert_eq!(buckets.take("h1", 10, later), Err(1));
        assert!(buckets
            .throttled(later + Duration::from_secs(61))
            .is_empty());
    }

    #[test]
    fn bytes_are_limited_apart_from_requests() {
        let limits = Limits {
            bytes_per_second: 1000.0,
            byte_burst: 2000.0,
            ..Limits::default()
        };
        let mut buckets = Buckets::new(limits);
        let t0 = Instant::now();
        assert_eq!(buckets.take("h1", 1500, t0), Ok(()));
        assert_eq!(buckets.take("h1", 1500, t0), Err(1));
        assert_eq!(buckets.take("h1", 400, t0), Ok(()));
    }
}

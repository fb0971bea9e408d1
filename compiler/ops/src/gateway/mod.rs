//! `bellc gateway`: the hosts' one way into the fleet's store. A stateless HTTPS service, run
//! as several replicas behind any load balancer, that takes the part of etcd's API `bell-run`
//! speaks, checks each request against the host that signed it, and passes it on to etcd as
//! one user of its own.
//!
//! A request counts only when the host's identity signed it, the identity the release names
//! for that host (the release is read from OUT and believed only with the fleet's signature:
//! nothing in etcd says who a host is). It may touch only the keys the host's etcd role would
//! allow (`bell_store::keys::host_grants`, the same table `bellc store roles` grants from), one
//! field at a time as [`request`] reads it, and only as fast as [`limits`] lets one host go:
//! a host that floods its own key fills nothing but its own bucket, and etcd stays under its
//! quota for everyone else.
//!
//! The gateway holds no signing key. A gateway that is taken over can withhold, delay or
//! forge what hosts read from the store, as etcd's writer can, never what they apply: the
//! release and the bundles are checked on the host against the fleet's key.

pub mod cache;
pub mod limits;
pub mod request;
mod server;

use crate::fleet::trusted::TrustedKeys;
use crate::serve::Out;
use bell_store::gateway::Signed;
use bell_store::proof::Identity;
use bell_wire::etcd::{Access, Etcd, Permission};
use limits::{Buckets, Limits};
use request::{Request, Verb};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

pub use server::{run, Listen};

/// What a gateway replica is told.
pub struct Config {
    /// The build output whose signed release names the hosts and their identities.
    pub out: Out,
    pub trust: TrustedKeys,
    /// The store, as the gateway's own etcd user.
    pub etcd: Etcd,
    /// Where the hosts' semaphores are, as `bellc store roles --lock-prefix` has it; `None`
    /// for the fleet's own.
    pub lock_prefix: Option<String>,
    pub limits: Limits,
    /// Whether reads are answered from a watch cache of the fleet's keys ([`cache`]).
    pub cache: bool,
    /// How long a host is refused for its rate before the store says so (`throttled` in
    /// `bellc status`).
    pub throttled_after: std::time::Duration,
}

/// The hosts this replica has said in the store it throttles, and the lease their keys are
/// bound to (so that they go when the replica does).
#[derive(Default)]
pub struct Flagged {
    lease: Option<i64>,
    hosts: std::collections::BTreeSet<String>,
}

/// The nonces of the requests accepted within [`bell_store::gateway::MAX_SKEW`] either way,
/// with their time, and when the old ones were last swept out.
#[derive(Default)]
struct Nonces {
    seen: HashMap<(String, String), u64>,
    swept: u64,
}

/// One host as the release names it.
struct Member {
    identity: Identity,
    grants: Arc<[Permission]>,
}

/// Who a request is from, once its signature is checked.
struct Caller {
    host: String,
    /// What it may touch: a member's grants (shared, not copied per request), or an
    /// enrolling machine's registration key.
    grants: Arc<[Permission]>,
    /// A machine the release does not name, known only by the identity it signs with (and
    /// the fleet it may register in).
    enrolling: Option<(Identity, String)>,
    /// Whose rate it spends: the host's, or an enrolling identity's.
    bucket: String,
}

/// The release's hosts, and what each may do.
struct Fleet {
    name: String,
    version: String,
    members: HashMap<String, Member>,
}

/// A gateway replica's state: nothing that another replica needs, nothing that survives it.
pub struct Gateway {
    config: Config,
    fleet: RwLock<Option<Arc<Fleet>>>,
    buckets: Mutex<Buckets>,
    /// The nonces of the requests accepted within [`bell_store::gateway::MAX_SKEW`] either
    /// way, with their time: a request seen once is refused the second time.
    nonces: Mutex<Nonces>,
    /// Leases granted to (or found bound only to keys of) each host.
    leases: Mutex<HashMap<i64, String>>,
    /// How many long-polls each host has open here.
    waits: Arc<Mutex<HashMap<String, usize>>>,
    /// The fleet's keys, once the release named the fleet.
    cache: std::sync::OnceLock<Arc<cache::Cache>>,
    served: AtomicU64,
    refused: AtomicU64,
    throttled: AtomicU64,
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// Seconds, for a 429.
    pub retry_after: Option<u64>,
}

impl Answer {
    fn json(value: &serde_json::Value) -> Answer {
        Answer {
            status: 200,
            body: value.to_string().into_bytes(),
            retry_after: None,
        }
    }

    /// A refusal, as etcd words one (`message`), so that bell-run's client shows it as is.
    pub fn refusal(status: u16, message: &str) -> Answer {
        Answer {
            status,
            body: serde_json::json!({ "error": message, "message": message })
                .to_string()
                .into_bytes(),
            retry_after: None,
        }
    }
}

/// What the gateway does with a request.
pub enum Decision {
    Now(Answer),
    /// A read answered from the cache once it is fresh enough ([`cache::CachedRead`]).
    Read(cache::CachedRead),
    /// A request etcd answers ([`Gateway::carry_out`]).
    Etcd(ForEtcd),
    /// A long-poll: answered when [`Waiting::wait`] sees a change, or at its timeout.
    Wait(Waiting),
}

/// An admitted request for etcd, from `host`.
pub struct ForEtcd {
    host: String,
    path: String,
    request: Request,
}

/// A host's long-poll, holding one of its [`MAX_WAITS`] places until it is answered.
pub struct Waiting {
    pub wait: cache::Wait,
    pub timeout: std::time::Duration,
    _slot: WaitSlot,
}

impl Waiting {
    /// The answer, from what [`cache::Wait::changed`] or [`cache::Wait::until`] found.
    pub fn answer(&self, (changed, revision): (bool, i64)) -> Answer {
        Answer::json(&serde_json::json!({
            "header": { "revision": revision.to_string() },
            "changed": changed,
        }))
    }
}

/// The most long-polls one host has at a gateway replica at once: bell-run has one; a few
/// more allow for a request the load balancer has not yet seen end.
const MAX_WAITS: usize = 2;

/// One of a host's places to wait, given back when dropped.
struct WaitSlot {
    waits: Arc<Mutex<HashMap<String, usize>>>,
    host: String,
}

impl WaitSlot {
    fn take(waits: &Arc<Mutex<HashMap<String, usize>>>, host: &str) -> Option<WaitSlot> {
        let mut all = waits.lock().ok()?;
        let count = all.entry(host.to_string()).or_default();
        if *count >= MAX_WAITS {
            return None;
        }
        *count += 1;
        Some(WaitSlot {
            waits: Arc::clone(waits),
            host: host.to_string(),
        })
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        if let Ok(mut all) = self.waits.lock() {
            if let Some(count) = all.get_mut(&self.host) {
                *count -= 1;
                if *count == 0 {
                    all.remove(&self.host);
                }
            }
        }
    }
}

/// The bucket every machine not in the fleet spends from as well as its own.
const ENROLLING: &str = "(enrolling)";

/// The longest a lease a host asks for may live: a liveness lease is a few pull periods.
const MAX_LEASE_TTL: i64 = 24 * 3600;

impl Gateway {
    pub fn new(config: Config) -> Gateway {
        let limits = config.limits;
        Gateway {
            config,
            fleet: RwLock::new(None),
            buckets: Mutex::new(Buckets::new(limits)),
            nonces: Mutex::default(),
            leases: Mutex::new(HashMap::new()),
            waits: Arc::default(),
            cache: std::sync::OnceLock::new(),
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }
    }

    /// Reads OUT's release again, believed only with the fleet's signature. A release that
    /// cannot be read or verified leaves the one the gateway had.
    pub fn load_release(&self) -> Result<(), String> {
        let out = &self.config.out;
        let release = crate::fleet::trusted::verified_release(
            |rel| out.read(rel),
            &out.describe(),
            &self.config.trust,
        )?;
        bell_store::check_name("fleet", &release.fleet)?;
        let same = self
            .fleet
            .read()
            .ok()
            .and_then(|f| {
                f.as_ref()
                    .map(|f| f.version == release.version && f.name == release.fleet)
            })
            .unwrap_or(false);
        if same {
            return Ok(());
        }
        let lock_prefix = self
            .config
            .lock_prefix
            .clone()
            .unwrap_or_else(|| bell_store::semaphore::default_prefix(&release.fleet));
        let identities = bell_store::identities_of(&release);
        let mut members = HashMap::new();
        let host_role = format!("host/{}/", release.fleet);
        for role in crate::fleet::store_roles::plan(&release, &lock_prefix) {
            let Some(host) = role.name.strip_prefix(&host_role) else {
                continue;
            };
            // A host without an identity cannot sign: it has no way in.
            if let Some(identity) = identities.get(host) {
                members.insert(
                    host.to_string(),
                    Member {
                        identity: identity.clone(),
                        grants: role.permissions.into(),
                    },
                );
            }
        }
        if self.config.cache {
            let prefix = bell_store::keys::fleet_prefix(&release.fleet).into_bytes();
            let end = bell_wire::etcd::prefix_end(&prefix);
            let etcd = self.config.etcd.clone();
            let mark = bell_store::keys::sync_key(&release.fleet).into_bytes();
            self.cache
                .get_or_init(|| cache::Cache::start_marking(etcd, prefix, end, mark));
        }
        let fleet = Fleet {
            name: release.fleet.clone(),
            version: release.version.clone(),
            members,
        };
        if let Ok(mut kept) = self.fleet.write() {
            *kept = Some(Arc::new(fleet));
        }
        Ok(())
    }

    /// Decides one request and, when it may pass, passes it on to etcd and answers with etcd's
    /// answer. Blocking: etcd is asked synchronously.
    /// The answer to one request; a long-poll is answered with what it would find now.
    pub fn handle(&self, path: &str, authorization: Option<&str>, body: &[u8], now: u64) -> Answer {
        match self.receive(path, authorization, body, now) {
            Decision::Now(answer) => answer,
            Decision::Wait(waiting) => waiting.answer(waiting.wait.changed()),
            Decision::Read(read) => read.answer_blocking(),
            Decision::Etcd(sent) => self.carry_out(sent),
        }
    }

    /// What to do with one request: answer it, or (a long-poll) wait for a change first.
    pub fn receive(
        &self,
        path: &str,
        authorization: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Decision {
        let decision = match self.admit(path, authorization, body, now) {
            Ok((caller, Request::Wait(wait))) => self.begin_wait(&caller, &wait),
            Ok((caller, request)) => match self.cached_read(&request) {
                Some(read) => Decision::Read(read),
                None => Decision::Etcd(ForEtcd {
                    host: caller.host,
                    path: path.to_string(),
                    request,
                }),
            },
            Err(answer) => Decision::Now(answer),
        };
        match &decision {
            Decision::Now(answer) => self.count(answer),
            // What etcd answers is counted when it has.
            Decision::Etcd(_) => {}
            Decision::Read(_) | Decision::Wait(_) => {
                self.served.fetch_add(1, Ordering::Relaxed);
            }
        }
        decision
    }

    fn count(&self, answer: &Answer) {
        let counter = match answer.status {
            200 => &self.served,
            429 => &self.throttled,
            _ => &self.refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The caller and its request, once it is signed, within its rate, well-formed and about
    /// keys it may touch; the refusal otherwise.
    fn admit(
        &self,
        path: &str,
        authorization: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Result<(Caller, Request), Answer> {
        let Some(fleet) = self.fleet.read().ok().and_then(|f| f.clone()) else {
            return Err(Answer::refusal(
                503,
                "the gateway has not read a signed release yet",
            ));
        };
        let caller = self
            .authenticate(&fleet, path, authorization, body, now)
            .map_err(|why| Answer::refusal(401, &why))?;
        let host = caller.host.as_str();
        let taken = match self.buckets.lock() {
            Ok(mut buckets) => {
                // Machines not in the fleet share one bucket besides their own: fresh keys
                // are free to make, and must not add up to a flood.
                let all = match caller.enrolling {
                    Some(_) => buckets.take(ENROLLING, body.len(), Instant::now()),
                    None => Ok(()),
                };
                all.and_then(|()| buckets.take(&caller.bucket, body.len(), Instant::now()))
            }
            Err(_) => Ok(()),
        };
        if let Err(wait) = taken {
            let mut answer = Answer::refusal(
                429,
                &format!(
                    "host `{host}` is over its rate at the gateway; wait {wait} s (every \
                     request sent before then makes the wait longer)"
                ),
            );
            answer.retry_after = Some(wait);
            return Err(answer);
        }
        let request = Request::parse(path, body).map_err(|why| Answer::refusal(400, &why))?;
        self.authorize(&caller, &request)?;
        Ok((caller, request))
    }

    /// A long-poll of the caller's, registered with the cache; refused past the host's
    /// [`MAX_WAITS`] at once (each holds a connection).
    fn begin_wait(&self, caller: &Caller, wait: &request::Wait) -> Decision {
        let Some(cache) = self.cache.get() else {
            return Decision::Now(Answer::refusal(
                501,
                "this gateway runs without its watch cache (`--no-cache`): pull on a timer",
            ));
        };
        // A key the cache does not hold (a semaphore under a `--lock-prefix` of its own) is
        // not waited on: the host's timer sees it change.
        let keys: Vec<Vec<u8>> = wait
            .keys
            .iter()
            .filter_map(|k| bell_wire::from_base64(k))
            .filter(|k| cache.holds(k))
            .collect();
        if keys.is_empty() {
            return Decision::Now(Answer::refusal(400, "a wait is for keys of the fleet"));
        }
        let slot = match WaitSlot::take(&self.waits, &caller.host) {
            Some(slot) => slot,
            None => {
                let mut answer = Answer::refusal(
                    429,
                    &format!(
                        "host `{}` waits at this gateway {MAX_WAITS} times at once already",
                        caller.host
                    ),
                );
                answer.retry_after = Some(1);
                return Decision::Now(answer);
            }
        };
        let seconds = wait
            .timeout
            .0
            .clamp(0, bell_store::gateway::MAX_WAIT as i64);
        match cache.wait(keys, wait.revision.0) {
            Ok(registered) => Decision::Wait(Waiting {
                wait: registered,
                timeout: std::time::Duration::from_secs(seconds as u64),
                _slot: slot,
            }),
            Err(why) => Decision::Now(Answer::refusal(503, &why)),
        }
    }

    /// Answers an admitted request that is not a read the cache answers: etcd does (and the
    /// caller waits for it, on a thread that may block).
    pub fn carry_out(&self, sent: ForEtcd) -> Answer {
        let answer = self.ask_etcd(sent);
        self.count(&answer);
        answer
    }

    fn ask_etcd(&self, sent: ForEtcd) -> Answer {
        let ForEtcd {
            host,
            path,
            mut request,
        } = sent;
        let (host, path) = (host.as_str(), path.as_str());
        if let Request::LeaseGrant(grant) = &mut request {
            if !(1..=MAX_LEASE_TTL).contains(&grant.ttl.0) {
                return Answer::refusal(
                    400,
                    &format!("a lease lives 1 to {MAX_LEASE_TTL} seconds"),
                );
            }
            grant.id = Some(request::Int(random_lease_id()));
        }
        match self.config.etcd.forward(path, &request.to_json()) {
            Ok(value) => {
                if let Request::LeaseGrant(grant) = &request {
                    if let (Some(id), Ok(mut leases)) = (grant.id, self.leases.lock()) {
                        leases.insert(id.0, host.to_string());
                    }
                }
                Answer::json(&value)
            }
            Err((true, why)) => Answer::refusal(400, &why),
            Err((false, why)) => Answer::refusal(503, &why),
        }
    }

    /// Who signed the request: a host the release names, with the identity it gives it, or a
    /// machine it does not name that signs with the identity it says it has (which may only
    /// register); and only when the request is timely and new.
    fn authenticate(
        &self,
        fleet: &Fleet,
        path: &str,
        authorization: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Result<Caller, String> {
        let header = authorization.ok_or(
            "the gateway takes only requests a host signs with its identity (`bell-run \
             --gateway`)",
        )?;
        let signed = Signed::parse(header)?;
        let host = signed.host.clone();
        let caller = match fleet.members.get(&host) {
            Some(member) if member.identity != signed.identity => {
                return Err(format!(
                    "the request is not signed by host `{host}`'s identity ({}), the one the \
                     release names",
                    member.identity.fingerprint()
                ))
            }
            Some(member) => Caller {
                grants: Arc::clone(&member.grants),
                enrolling: None,
                bucket: host.clone(),
                host: host.clone(),
            },
            None if path == "/v3/kv/range" || path == "/v3/kv/put" => Caller {
                grants: Arc::new([Permission::key(
                    Access::ReadWrite,
                    &bell_store::keys::registration_key(&fleet.name, &host),
                )]),
                bucket: format!("{ENROLLING} {}", signed.identity.fingerprint()),
                enrolling: Some((signed.identity.clone(), fleet.name.clone())),
                host: host.clone(),
            },
            None => {
                return Err(format!(
                    "host `{host}` is not in release {} of fleet `{}` with an identity (a \
                     machine not in the fleet may only register)",
                    fleet.version, fleet.name
                ))
            }
        };
        if !signed.is_timely(now) {
            return Err(format!(
                "the request was signed at {} and the gateway's clock says {now}: more than {} \
                 s apart (set the host's clock, or this is a request played again)",
                signed.time,
                bell_store::gateway::MAX_SKEW
            ));
        }
        if !signed.verifies_itself(path, body) {
            return Err(format!(
                "the request is not signed by the identity it names ({})",
                signed.identity.fingerprint()
            ));
        }
        let mut nonces = self.nonces.lock().map_err(|_| "the gateway is failing")?;
        // Those too old to be played again go, once a second at most: a busy replica holds
        // more than this many within the window, and must not sweep them on every request.
        if nonces.seen.len() > 100_000 && nonces.swept != now {
            let skew = bell_store::gateway::MAX_SKEW;
            nonces.seen.retain(|_, time| time.abs_diff(now) <= skew);
            nonces.swept = now;
        }
        if nonces
            .seen
            .insert((host.clone(), signed.nonce.clone()), signed.time)
            .is_some()
        {
            return Err(format!(
                "this request of host `{host}` was made once already (nonce {}): a replay",
                signed.nonce
            ));
        }
        Ok(caller)
    }

    /// Whether the caller may make `request`: every key within its grants, every value within
    /// the cap, every lease its own; a machine not in the fleet files only a registration
    /// signed by the identity it signs requests with.
    fn authorize(&self, caller: &Caller, request: &Request) -> Result<(), Answer> {
        let host = caller.host.as_str();
        let max = self.config.limits.max_value;
        let largest = request.largest_value();
        if largest > max {
            return Err(Answer::refusal(
                413,
                &format!("a value of {largest} bytes is over the gateway's cap of {max} bytes"),
            ));
        }
        let keys = request.keys().map_err(|why| Answer::refusal(400, &why))?;
        for (verb, key) in &keys {
            if !caller.grants.iter().any(|g| covers(g, *verb, key)) {
                let verb = match verb {
                    Verb::Read => "read",
                    Verb::Write => "write",
                };
                return Err(Answer::refusal(
                    403,
                    &format!(
                        "permission denied: host `{host}` may not {verb} `{}`",
                        request::show_key(key)
                    ),
                ));
            }
        }
        if let (Some((identity, fleet)), Request::Put(put)) = (&caller.enrolling, request) {
            let value = bell_wire::from_base64(&put.value).unwrap_or_default();
            let filed = bell_store::discovery::check(host, &value);
            if !filed.is_ok_and(|(filed, by)| by == *identity && filed.fleet == *fleet) {
                return Err(Answer::refusal(
                    403,
                    &format!(
                        "permission denied: a machine not in the fleet files only its \
                         registration as `{host}`, signed by the identity it signs its requests \
                         with"
                    ),
                ));
            }
        }
        for lease in request.leases() {
            self.check_lease(caller, lease)?;
        }
        Ok(())
    }

    /// A lease a host binds a key to, renews or ends is one granted to it, or one bound only to
    /// keys it may write (granted by another replica).
    fn check_lease(&self, caller: &Caller, lease: i64) -> Result<(), Answer> {
        let host = caller.host.as_str();
        let known = self.leases.lock().ok().and_then(|l| l.get(&lease).cloned());
        match known {
            Some(owner) if owner == host => return Ok(()),
            Some(_) => {
                return Err(Answer::refusal(
                    403,
                    &format!("permission denied: lease {lease} is not host `{host}`'s"),
                ))
            }
            None => {}
        }
        let body = serde_json::json!({ "ID": lease.to_string(), "keys": true });
        let answer = match self.config.etcd.forward("/v3/lease/timetolive", &body) {
            Ok(answer) => answer,
            Err((_, why)) => return Err(Answer::refusal(503, &why)),
        };
        let keys: Vec<Vec<u8>> = answer
            .get("keys")
            .and_then(|k| k.as_array())
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().and_then(bell_wire::from_base64))
            .collect();
        // An unknown lease (TTL -1) is etcd's to refuse; one with nobody's keys is harmless.
        if keys
            .iter()
            .all(|k| caller.grants.iter().any(|g| covers(g, Verb::Write, k)))
        {
            if !keys.is_empty() {
                if let Ok(mut leases) = self.leases.lock() {
                    leases.insert(lease, host.to_string());
                }
            }
            return Ok(());
        }
        Err(Answer::refusal(
            403,
            &format!("permission denied: lease {lease} holds keys that are not host `{host}`'s"),
        ))
    }

    /// A read of keys the cache holds (a key, or a transaction of reads alone), to answer from
    /// memory; `None` for anything else.
    fn cached_read(&self, request: &Request) -> Option<cache::CachedRead> {
        let cache = self.cache.get()?;
        let ranges: Vec<&request::Range> = match request {
            Request::Range(range) => vec![range],
            Request::Txn(txn) if txn.compare.is_empty() && txn.failure.is_empty() => txn
                .success
                .iter()
                .map(|op| match op {
                    request::TxnOp::Range(range) => Some(range),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?,
            _ => return None,
        };
        let keys: Vec<Vec<u8>> = ranges
            .iter()
            .map(|r| bell_wire::from_base64(&r.key))
            .collect::<Option<Vec<_>>>()?;
        if keys.is_empty() || !keys.iter().all(|k| cache.holds(k)) {
            return None;
        }
        Some(cache::CachedRead {
            cache: Arc::clone(cache),
            shapes: ranges.iter().map(|r| (r.keys_only, r.count_only)).collect(),
            keys,
            txn: matches!(request, Request::Txn(_)),
        })
    }

    /// Says in the store which hosts this replica has refused for their rate for
    /// [`Config::throttled_after`] or longer (`/bell/FLEET/throttled/HOST`, on a lease of the
    /// replica's), and takes back what it said of a host it serves again.
    pub fn flag_throttled(&self, flagged: &mut Flagged) -> Result<(), String> {
        let Some(fleet) = self
            .fleet
            .read()
            .ok()
            .and_then(|f| f.as_ref().map(|f| f.name.clone()))
        else {
            return Ok(());
        };
        let after = self.config.throttled_after.as_secs();
        let now: std::collections::BTreeSet<String> = match self.buckets.lock() {
            Ok(buckets) => buckets
                .throttled(Instant::now())
                .into_iter()
                .filter(|t| t.for_seconds >= after)
                .map(|t| t.host)
                .collect(),
            Err(_) => return Ok(()),
        };
        let etcd = &self.config.etcd;
        if now.is_empty() && flagged.hosts.is_empty() {
            return Ok(());
        }
        let alive = match flagged.lease {
            Some(lease) => etcd.keep_alive(lease)?,
            None => false,
        };
        if !alive {
            flagged.lease = Some(etcd.grant_lease(30)?);
            // Bound to a lease that is gone: said again.
            flagged.hosts.clear();
        }
        let lease = flagged.lease.unwrap_or(0);
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .saturating_sub(after);
        for host in now.difference(&flagged.hosts.clone()) {
            let said = format!(
                "a gateway has answered its requests 429 (over its rate) since about unix {since}"
            );
            let key = bell_store::keys::throttled_key(&fleet, host);
            etcd.put_with_lease(&key, said.as_bytes(), lease)?;
            flagged.hosts.insert(host.clone());
        }
        for host in flagged.hosts.clone().difference(&now) {
            etcd.delete(&bell_store::keys::throttled_key(&fleet, host))?;
            flagged.hosts.remove(host);
        }
        Ok(())
    }

    /// The gateway's counters and the hosts over their rate, in Prometheus' text format.
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        for (name, help, counter) in [
            (
                "bell_gateway_requests_served_total",
                "Requests passed on to etcd.",
                &self.served,
            ),
            (
                "bell_gateway_requests_refused_total",
                "Requests refused (not signed, not the host's, malformed).",
                &self.refused,
            ),
            (
                "bell_gateway_requests_throttled_total",
                "Requests answered 429.",
                &self.throttled,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                counter.load(Ordering::Relaxed)
            ));
        }
        let cached = |counter: fn(&cache::Cache) -> &AtomicU64| {
            self.cache
                .get()
                .map_or(0, |c| counter(c).load(Ordering::Relaxed))
        };
        for (name, help, value) in [
            (
                "bell_gateway_cache_reads_total",
                "Reads answered from the watch cache.",
                cached(|c| &c.reads),
            ),
            (
                "bell_gateway_cache_marks_total",
                "Writes of the fleet's sync key, to learn that the watch caught up with etcd \
                 (another fleet's writes moved its revision).",
                cached(|c| &c.marks),
            ),
            (
                "bell_gateway_etcd_requests_total",
                "Requests this replica sent to etcd (passed on, the cache's, its revision checks).",
                self.config.etcd.requests(),
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
        let waiting: usize = self.waits.lock().map_or(0, |w| w.values().sum());
        out.push_str(&format!(
            "# HELP bell_gateway_waiting Hosts' long-polls this replica holds now.\n\
             # TYPE bell_gateway_waiting gauge\nbell_gateway_waiting {waiting}\n"
        ));
        out.push_str(
            "# HELP bell_host_throttled Seconds a host has been refused for its rate (without a \
             minute's pause).\n# TYPE bell_host_throttled gauge\n",
        );
        if let Ok(buckets) = self.buckets.lock() {
            for t in buckets.throttled(Instant::now()) {
                out.push_str(&format!(
                    "bell_host_throttled{{host=\"{}\"}} {}\n",
                    t.host, t.for_seconds
                ));
            }
        }
        out
    }
}

/// Whether `grant` lets `verb` touch `key`.
fn covers(grant: &Permission, verb: Verb, key: &[u8]) -> bool {
    let allowed = match verb {
        Verb::Read => matches!(grant.access, Access::Read | Access::ReadWrite),
        Verb::Write => matches!(grant.access, Access::Write | Access::ReadWrite),
    };
    let within = if grant.range_end.is_empty() {
        grant.key == key
    } else {
        grant.key.as_slice() <= key && key < grant.range_end.as_slice()
    };
    allowed && within
}

/// A lease id no host can guess: 62 random bits (positive, never 0).
fn random_lease_id() -> i64 {
    let mut bytes = [0u8; 8];
    if bell_seal::random_bytes(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        bytes = now.to_le_bytes();
    }
    let id = (u64::from_le_bytes(bytes) >> 2) as i64;
    id.max(1)
}

#[cfg(test)]
mod tests;

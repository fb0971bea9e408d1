//! The `bellc` command line. Owns the terminal: printing, colours and exit codes
//! (the table in `EXIT_CODES`: 0 ok, 1 spec errors or differences, 2 I/O errors, 64 usage).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
mod enroll;
mod import;
mod query;
mod review;
mod rollout;
mod store_roles;

use bellc::diagnostic::Diagnostics;
use bellc::emit::incremental::Found;
use bellc::fleet::signing;
use bellc::source::Sources;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const EXIT_CODES: &str = "\
Exit codes:
   0  ok: built, checked, no difference, the gate passed
   1  the spec has errors (every one printed), or diff and build --diff found changes
   2  an input or output could not be used: a file cannot be read or written, etcd cannot be
      reached, a directory is not a build output
   3  status: a host is in a --fail-on state (default forged, failed, unhealthy, unaccounted); the
      rollout gate (--hosts … --version …) failed
  64  usage: an unknown command or option, a missing or wrong argument (sysexits EX_USAGE)";

/// sysexits' EX_USAGE, apart from the codes a run decides.
const USAGE_ERROR: u8 = 64;

/// Why a command could not run: the command line itself, or what it named.
enum Failure {
    Usage(String),
    Io(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Io(message)
    }
}

#[derive(Parser)]
#[command(
    name = "bellc",
    version,
    about = "Compile a fleet spec (KDL) into per-host bundles of exactly the files that will land",
    long_about = "bellc resolves a fleet spec — inventory, label and host overrides, services — and \
writes for every host a content-addressed bundle: the files that will land on it and the apply \
and revert scripts that bring each resource live. bell-run applies bundles on hosts.\n\n\
SPEC defaults to ./bell.kdl everywhere.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Treat warnings as errors (for CI).
    #[arg(long, global = true)]
    deny_warnings: bool,
    /// Print diagnostics one per line (`file:line:col: error[code]: message`, then its help).
    #[arg(long, global = true)]
    short: bool,
    /// Accept sysctl keys the target's kernel list does not have (keys of out-of-tree
    /// modules); `unknown=#true` on a key accepts just that one.
    #[arg(long, global = true)]
    allow_unknown_sysctl: bool,
}

#[derive(clap::Args)]
struct SignArgs {
    /// Sign release.json with this minisign secret key (release.json.minisig); an encrypted
    /// key's password is read from BELLC_KEY_PASSWORD.
    #[arg(long, value_name = "KEY")]
    sign_key: Option<PathBuf>,
    /// How long hosts accept the signed release as their newest, as `30d` or `12h`; sign
    /// again before then.
    #[arg(long, value_name = "SPAN", requires = "sign_key", value_parser = span)]
    expires: Option<u64>,
}

/// The hosts a review command is about, and the spec: names or globs and the spec among the
/// words (in any order), label conditions as `match` writes them.
#[derive(clap::Args)]
struct Selection {
    /// Host names or globs (`'web-*'`; every host when none), and the spec (default
    /// `bell.kdl`).
    #[arg(value_name = "HOST|GLOB|SPEC")]
    words: Vec<String>,
    /// Only hosts with these labels, as `match` writes them (`role=db,rack=r01`;
    /// repeatable: all must hold).
    #[arg(long = "where", value_name = "LABEL=VALUE,...")]
    wheres: Vec<String>,
}

impl Selection {
    /// The spec (checked to be readable), the names or globs, and the selector.
    fn parse(&self) -> Result<(PathBuf, Vec<String>, bellc::review::select::Selector), Failure> {
        let (spec, patterns) = query::spec_and_patterns(&self.words);
        let selector = bellc::review::select::Selector::parse(&patterns, &self.wheres)
            .map_err(Failure::Usage)?;
        read_check(&spec)?;
        Ok((spec, patterns, selector))
    }
}

/// The hosts `hold` and `unhold` act on, and where their holds are.
#[derive(clap::Args)]
struct HeldHosts {
    #[arg(value_name = "HOST", required_unless_present = "selector")]
    hosts: Vec<String>,
    /// Every host of OUT's release with this label (`rack=r01`; repeatable: all must hold).
    #[arg(long = "where", value_name = "LABEL=VALUE", value_parser = key_value, requires = "out")]
    selector: Vec<(String, String)>,
    /// The build output whose release says the hosts' labels, for `--where`.
    #[arg(long, value_name = "OUT")]
    out: Option<PathBuf>,
    /// `etcd://HOST:PORT[,HOST:PORT...]`.
    #[arg(long, value_parser = etcd_url)]
    store: String,
    #[arg(long)]
    fleet: String,
    #[command(flatten)]
    tls: StoreTls,
}

impl HeldHosts {
    /// The hosts named, and those of OUT's release whose labels match every `--where`; a
    /// selector that matches no host is an error rather than a silent no-op.
    fn selected(&self) -> Result<Vec<String>, Failure> {
        let mut all = self.hosts.clone();
        if let (false, Some(out)) = (self.selector.is_empty(), &self.out) {
            let release = read_release(out)?;
            let matched: Vec<String> = release
                .hosts
                .iter()
                .filter(|(_, h)| {
                    self.selector
                        .iter()
                        .all(|(k, v)| h.labels.get(k) == Some(v))
                })
                .map(|(name, _)| name.clone())
                .collect();
            if matched.is_empty() {
                let wanted: Vec<String> = self
                    .selector
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                return Err(Failure::Usage(format!(
                    "no host of {}'s release has {}",
                    out.display(),
                    wanted.join(" and ")
                )));
            }
            all.extend(matched);
        }
        all.sort();
        all.dedup();
        Ok(all)
    }

    fn etcd(&self) -> Result<bell_store::Etcd, String> {
        bell_store::Etcd::open(&self.store, &self.tls.access())
    }
}

/// Whose rollout groups: a fleet's (under `/bell/FLEET`) or those under another prefix.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct LockScope {
    /// The fleet, whose semaphores are under `/bell/FLEET/groups/`.
    #[arg(long)]
    fleet: Option<String>,
    /// The prefix the hosts were given (`bell-run pull --lock-prefix`), such as airlock's
    /// `com.coreos.airlock`.
    #[arg(long, value_name = "PREFIX")]
    lock_prefix: Option<String>,
}

impl LockScope {
    fn prefix(&self) -> String {
        match (&self.lock_prefix, &self.fleet) {
            (Some(prefix), _) => prefix.clone(),
            (None, fleet) => {
                bell_store::semaphore::default_prefix(fleet.as_deref().unwrap_or_default())
            }
        }
    }
}

/// How to reach an `etcds://` store: what its members' certificates are verified against,
/// the client certificate, where the members ask for one, and the etcd user.
#[derive(clap::Args, Default)]
struct StoreTls {
    /// The CA the store's members' certificates are signed by (default: the system's CAs).
    #[arg(long, value_name = "FILE")]
    store_ca: Option<PathBuf>,
    /// A client certificate (PEM) for members that ask for one; with `--store-key`.
    #[arg(long, value_name = "FILE", requires = "store_key")]
    store_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, readable by its owner alone).
    #[arg(long, value_name = "FILE", requires = "store_cert")]
    store_key: Option<PathBuf>,
    /// The etcd user to log in as (over `etcds://` only), such as `controller` or `serve`
    /// (`bellc store roles`).
    #[arg(long, value_name = "NAME", requires = "store_password_file")]
    store_user: Option<String>,
    /// The user's password, on one line of a file readable by its owner alone.
    #[arg(long, value_name = "FILE", requires = "store_user")]
    store_password_file: Option<PathBuf>,
}

impl StoreTls {
    fn access(&self) -> bell_store::Access {
        bell_store::Access {
            tls: bell_store::tls::TlsFiles {
                ca: self.store_ca.clone(),
                cert: self.store_cert.clone(),
                key: self.store_key.clone(),
            },
            user: self.store_user.clone(),
            password_file: self.store_password_file.clone(),
        }
    }
}

#[derive(Subcommand)]
enum StoreCommand {
    /// The etcd users and roles that let each host write only its own keys and the
    /// controller only the fleet's; printed, or made so with `--apply`.
    Roles {
        /// The build output whose release names the hosts and their rollout groups.
        out: PathBuf,
        /// Where the hosts' semaphores are (`bell-run pull --lock-prefix`).
        #[arg(long, value_name = "PREFIX")]
        lock_prefix: Option<String>,
        /// Make the users and roles so in the store, with an admin's credentials (etcd's
        /// `root`); a new user's password is written to `--passwords DIR`, never printed.
        #[arg(long, requires_all = ["store", "passwords"])]
        apply: bool,
        /// `etcds://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url, requires = "apply")]
        store: Option<String>,
        #[command(flatten)]
        tls: StoreTls,
        /// Where each new user's password goes, one 0600 file each: `DIR/HOST`,
        /// `DIR/controller`, `DIR/serve`.
        #[arg(long, value_name = "DIR", requires = "apply")]
        passwords: Option<PathBuf>,
        #[arg(long, conflicts_with = "apply")]
        json: bool,
    },
}

#[derive(Subcommand)]
enum LockCommand {
    /// Every rollout group's semaphore: its slots, who holds them and since when, how many
    /// are free.
    Status {
        /// A build output (a directory or the URL that serves it): its release names the
        /// fleet's hosts and their identities, and each holder is then told `proven` (its
        /// record signed by the host), `foreign` (not a host of the release: airlock's),
        /// `claiming` (a host's name without its signature) or `unverified`.
        out: Option<PathBuf>,
        /// `etcd://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[command(flatten)]
        tls: StoreTls,
        #[command(flatten)]
        scope: LockScope,
        #[arg(long)]
        json: bool,
    },
    /// Free every slot HOST holds: a host that died holding one, or one whose failure was
    /// looked at. Exit 1 when it holds none.
    Release {
        host: String,
        /// `etcd://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[command(flatten)]
        tls: StoreTls,
        #[command(flatten)]
        scope: LockScope,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Validate a spec without writing anything.
    Check {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
        /// Also run the consumers installed on this machine over what they can check at build
        /// time: every AppArmor profile is compiled by `apparmor_parser` (not loaded).
        #[arg(long)]
        strict: bool,
    },
    /// Build every host's bundle into OUT (default ./out).
    Build {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
        /// Output directory.
        #[arg(short, long, default_value = "out")]
        out: PathBuf,
        /// Build in memory and compare with OUT instead of writing; exit 1 naming every host
        /// whose bundle differs (keeps checked-in snapshots honest in CI).
        #[arg(long)]
        check: bool,
        /// Print how long each stage took, what was written and the peak memory, as one JSON
        /// line on stderr starting with `timings: ` (the benchmark reads it).
        #[arg(long)]
        timings: bool,
        /// Rebuild even when the inputs are unchanged since the last build into OUT.
        #[arg(long)]
        force: bool,
        /// After building, show what changed against the build output OLD (may be OUT itself);
        /// exit 1 when something did.
        #[arg(long, value_name = "OLD")]
        diff: Option<PathBuf>,
        /// With --diff: compare values instead of files (old → new, the hosts, and where the
        /// spec sets each new value).
        #[arg(long, requires = "diff")]
        values: bool,
        /// With `secrets="sealed"`: the key that names secrets in bundles and seals them, a
        /// file of at least 32 random bytes (`head -c 32 /dev/urandom`) kept as the signing key
        /// is. Without it, the key is derived from `--sign-key`.
        #[arg(long, value_name = "FILE")]
        seal_key: Option<PathBuf>,
        #[command(flatten)]
        signing: SignArgs,
    },
    /// Write an Ed25519 key pair in minisign's format: NAME.key (0600) and NAME.pub.
    ///
    /// The secret key is plain (for CI's secret store) unless `--encrypt` is given; then it is
    /// encrypted with the password in the environment variable BELLC_KEY_PASSWORD, which
    /// signing reads too. Keys made by `minisign -G` work as well.
    Keygen {
        /// Path and name of the pair, without suffix.
        name: PathBuf,
        /// Encrypt the secret key with the password in BELLC_KEY_PASSWORD.
        #[arg(long)]
        encrypt: bool,
    },
    /// List the releases a build output keeps (oldest first): version, sequence, signature,
    /// expiry, hosts and bundles.
    Releases {
        out: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Remove all but the newest N kept releases (release.json's is always kept), and the
    /// bundles only they name.
    Prune {
        out: PathBuf,
        #[arg(long, value_name = "N")]
        keep: usize,
    },
    /// Show what a release changes: hosts added, removed and changed, grouped by bundle change,
    /// with file diffs. Exit 0 without changes, 1 with.
    Diff {
        /// The earlier build output (release.json, bundles/, hosts/).
        old: PathBuf,
        /// The later build output.
        new: PathBuf,
        #[arg(long)]
        json: bool,
        /// Compare values instead of files: each value that changed, old → new, and the hosts
        /// it changes on.
        #[arg(long)]
        values: bool,
        /// With --values: the spec NEW was built from, to say where each new value was set
        /// (layer and file:line).
        #[arg(long, value_name = "SPEC", requires = "values")]
        spec: Option<PathBuf>,
    },
    /// Sign a build output's release (`--sign-key`) and make it the fleet's desired release
    /// in etcd (`--store`); at least one of the two.
    Publish {
        out: PathBuf,
        /// `etcd://HOST:PORT`, or every endpoint of a cluster: `etcd://A:2379,B:2379,C:2379`.
        #[arg(long, value_parser = etcd_url, required_unless_present = "sign_key")]
        store: Option<String>,
        #[command(flatten)]
        tls: StoreTls,
        #[command(flatten)]
        signing: SignArgs,
    },
    /// Roll OUT's release out wave by wave: each wave's release signed into OUT and published,
    /// the next given only when every host of the last reports up to date and healthy. Exit 0
    /// when done, 1 when it halted (a host failed, or a wave did not converge in time).
    Rollout {
        /// The build output the hosts' source serves: the waves' releases are written into it.
        #[arg(required_unless_present_any = ["status", "pause", "unpause", "history"])]
        out: Option<PathBuf>,
        /// `etcd://HOST:PORT[,HOST:PORT...]`: where the hosts pull from and report to.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[command(flatten)]
        tls: StoreTls,
        #[command(flatten)]
        signing: SignArgs,
        /// How long a wave may take to converge before the rollout halts (`90s`, `30m`).
        #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = span)]
        wave_timeout: u64,
        /// Continue the rollout the store holds (after a halt, or a controller that died).
        #[arg(long, conflicts_with_all = ["abort", "status"])]
        resume: bool,
        /// Give the hosts the rollout moved their previous bundle back, as a newer release.
        #[arg(long, conflicts_with = "status")]
        abort: bool,
        /// Show where the fleet's rollout stands.
        #[arg(long)]
        status: bool,
        /// Pause the fleet's rollout: no new wave is given (hosts given theirs finish) until
        /// `--continue`; it survives the controller's death. With `--reason`, `--by`.
        #[arg(long, conflicts_with_all = ["resume", "abort", "status", "unpause"])]
        pause: bool,
        /// Take a pause away: the waiting controller gives the next wave.
        #[arg(long = "continue", conflicts_with_all = ["resume", "abort", "status"])]
        unpause: bool,
        /// Why it is paused.
        #[arg(long, requires = "pause")]
        reason: Option<String>,
        /// Who pauses it, or starts the rollout (for the history; default: the CI job the
        /// environment names, else `$USER@HOSTNAME`).
        #[arg(long)]
        by: Option<String>,
        /// The fleet's last rollouts, newest first: from and to, who, when, each wave's hosts
        /// and times, how it ended.
        #[arg(long, conflicts_with_all = ["resume", "abort", "status", "pause", "unpause"])]
        history: bool,
        /// The fleet, for `--status` without OUT.
        #[arg(long)]
        fleet: Option<String>,
        /// One JSON event per line on stdout (wave-started, host-converged, host-failed,
        /// halted, done) instead of a progress display.
        #[arg(long)]
        json: bool,
    },
    /// One row per host, from the reports hosts filed: a summary state (forged, failed,
    /// unhealthy, unaccounted, drifted, pending, deferred, up-to-date, unknown) and every
    /// condition that holds. Each report is checked against the identity the release gives
    /// its host. Exit 3 when a host is in a `--fail-on` state.
    Status {
        /// The build output whose release.json says what each host should run (a directory,
        /// or the http:// URL that serves it); with `--store`, the store's published release
        /// when left out (give `--fleet`).
        out: Option<PathBuf>,
        /// A directory that `bell-run --report DIR` wrote.
        #[arg(long, conflicts_with = "store", required_unless_present = "store")]
        reports: Option<PathBuf>,
        /// `etcd://HOST:PORT[,HOST:PORT...]` that `bell-run --report etcd://...` wrote.
        #[arg(long)]
        store: Option<String>,
        #[command(flatten)]
        tls: StoreTls,
        /// The fleet whose published release the store holds (without OUT).
        #[arg(long)]
        fleet: Option<String>,
        /// Reports in a directory: one older than this many minutes marks its host stale
        /// (default 45). In etcd, liveness is the host's lease.
        #[arg(long, value_name = "MINUTES")]
        stale: Option<u64>,
        #[arg(long)]
        json: bool,
        /// List every host, up to date ones included.
        #[arg(long)]
        all: bool,
        /// Exit 3 when a host's state or one of its flags is one of these (comma-separated:
        /// forged, failed, unhealthy, unaccounted, unreadable, stale, drifted, pending,
        /// waiting, deferred, unverified).
        #[arg(
            long,
            value_name = "STATES",
            default_value = "forged,failed,unhealthy,unaccounted,unreadable"
        )]
        fail_on: String,
        /// A rollout gate: exit 0 only if these hosts (comma-separated) are up to date on
        /// `--version`, else 3.
        #[arg(long, requires = "version")]
        hosts: Option<String>,
        #[arg(long, requires = "hosts")]
        version: Option<String>,
    },
    /// A read-only status page of the fleet: the release, the rollout, the disruption budget,
    /// every host's state and its last report, in a browser and as JSON under `/api/v1/`
    /// (`/api/v1/status` is `bellc status OUT --store … --json`). Reads the store once per
    /// refresh, with one request; runs until stopped.
    Serve {
        /// The build output whose release.json says what each host should run (read again
        /// when a new build lands in it): a directory, or the http:// URL that serves it.
        out: String,
        /// `etcd://HOST:PORT[,HOST:PORT...]` that the hosts report to.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[command(flatten)]
        tls: StoreTls,
        /// Where to listen. Loopback unless told otherwise: the page has no login.
        #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:8080")]
        listen: String,
        /// The spec OUT was built from, to show each host's resolved configuration with
        /// the file and line of every value (`bellc explain`).
        #[arg(long, value_name = "SPEC")]
        spec: Option<PathBuf>,
        /// Seconds between two readings of the store (and between two reloads of a page).
        #[arg(long, value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
        refresh: u64,
    },
    /// The fleet's store itself: its users and roles.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// The disruption budget: the semaphore of each rollout group that pulling hosts take a
    /// slot of before they change.
    Lock {
        #[command(subcommand)]
        command: LockCommand,
    },
    /// Show the resolved configuration of hosts (names, globs, `--where`; every host when none
    /// is named), with the layer and line of every value; hosts that share a configuration
    /// are shown once, with their names.
    Explain {
        #[command(flatten)]
        selection: Selection,
        /// Beside each value, the values earlier layers gave it, and where.
        #[arg(long)]
        overridden: bool,
        /// List the hosts override NAME applies to, instead of their configuration.
        #[arg(long = "override", value_name = "NAME")]
        override_name: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One value across hosts (`sysctl:vm.swappiness`, `user:ops.shell`, `limit:*`): for each
    /// value, the hosts that get it and the layer and `file:line` that set it, then the hosts
    /// without it. Reads the resolved spec: no build.
    Query {
        /// `KIND:NAME[.FIELD]`, `sysctl:KEY`, a setting's `KIND.FIELD`, or `KIND:*`.
        what: String,
        #[command(flatten)]
        selection: Selection,
        #[arg(long)]
        json: bool,
    },
    /// Show the rollout waves: providers before their consumers, one batch (rack) at a time,
    /// at most `max-unavailable` hosts per wave.
    Plan {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
        /// Plan only the hosts whose bundle differs from the release in this output directory
        /// (reads OLD_OUT/release.json).
        #[arg(long, value_name = "OLD_OUT")]
        against: Option<PathBuf>,
        /// Print the waves as JSON.
        #[arg(long)]
        json: bool,
        /// The key OLD_OUT's sealed secrets were named with (as `build --seal-key`); by
        /// default bellc's own, when it has made one. With another key every sealed secret
        /// looks changed.
        #[arg(long, value_name = "FILE")]
        seal_key: Option<PathBuf>,
    },
    /// Write a fleet spec from another tool's configuration.
    Import {
        #[command(subcommand)]
        from: ImportFrom,
    },
    /// Leave hosts alone: a held host keeps its bundle; the rollout controller leaves it out of
    /// its waves and `bell-run pull` on it applies nothing new (it still reports). A hold is
    /// read from the store, which is not trusted: one forged there can only delay a host,
    /// never move it.
    Hold {
        #[command(flatten)]
        hosts: HeldHosts,
        /// Why, for whoever finds the host held.
        #[arg(long)]
        reason: Option<String>,
        /// Who holds it (default: `$USER@HOSTNAME`).
        #[arg(long)]
        by: Option<String>,
    },
    /// Take hosts' holds away: they take their release again (a rollout that left them out
    /// moves them when it is run again).
    Unhold {
        #[command(flatten)]
        hosts: HeldHosts,
    },
    /// List hosts: name, bundle id (short), labels. `hosts pending` lists hosts that
    /// registered (`bell-run register`) and are not in the inventory yet.
    #[command(args_conflicts_with_subcommands = true)]
    Hosts {
        #[command(subcommand)]
        command: Option<HostsCommand>,
        #[command(flatten)]
        selection: Selection,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum HostsCommand {
    /// Registrations (`bell-run register`) of hosts the spec's inventory does not have: name,
    /// identity fingerprint, facts; and claims on a name the inventory gives another
    /// identity, flagged. Exit 0 either way.
    Pending {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
        /// `etcd://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[command(flatten)]
        tls: StoreTls,
        #[arg(long)]
        json: bool,
    },
    /// Add registered hosts to a JSON inventory the spec includes, each with the identity it
    /// registered with, its first address and `--label`s, as `puppetserver ca sign` does.
    /// Written atomically, sorted, one host per line. All or nothing: a host that has not
    /// registered, or whose registration is not signed by its identity, or one the inventory
    /// already has with another identity, stops the whole acceptance.
    Accept {
        /// Host names; `NAME=SHA256:...` accepts only the identity with that fingerprint
        /// (the one `hosts pending` showed you).
        #[arg(required = true, value_name = "NAME[=FINGERPRINT]")]
        hosts: Vec<String>,
        /// The inventory file to add to (made when missing).
        #[arg(long, value_name = "FILE")]
        inventory: PathBuf,
        /// A label for the accepted hosts, `KEY=VALUE` (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE", value_parser = key_value)]
        labels: Vec<(String, String)>,
        /// `etcd://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[arg(long)]
        fleet: String,
        #[command(flatten)]
        tls: StoreTls,
        #[arg(long)]
        json: bool,
    },
    /// Refuse hosts' registrations: each is removed, and the identity it named is recorded as
    /// refused, so that registering again with it shows `rejected`, not `pending`.
    Reject {
        #[arg(required = true, value_name = "NAME")]
        hosts: Vec<String>,
        /// `etcd://HOST:PORT[,HOST:PORT...]`.
        #[arg(long, value_parser = etcd_url)]
        store: String,
        #[arg(long)]
        fleet: String,
        #[command(flatten)]
        tls: StoreTls,
    },
}

#[derive(Subcommand)]
enum ImportFrom {
    /// An Airship Divingbell values file (the Helm values of its chart), every module and
    /// override: the spec gives every host what Divingbell gives it.
    Divingbell {
        /// The values files, merged in order as `helm -f A -f B` merges them.
        #[arg(required = true)]
        values: Vec<PathBuf>,
        /// Hosts from `kubectl get nodes -o json` (or bellc's JSON inventory), written into
        /// the spec with their labels.
        #[arg(long, value_name = "NODES.json")]
        inventory: Option<PathBuf>,
        /// Where to write the spec.
        #[arg(short, long, default_value = "bell.kdl")]
        output: PathBuf,
        /// The fleet's name (default: the values file's name without its extension).
        #[arg(long)]
        name: Option<String>,
        /// The hosts' release.
        #[arg(long, default_value = "ubuntu-24.04")]
        target: String,
        /// Replace OUTPUT when it exists.
        #[arg(long)]
        force: bool,
        /// Resolve every host under Divingbell's rules and under the written spec, and fail on
        /// any difference (the inventory's hosts, or hosts that exercise every override).
        #[arg(long)]
        verify: bool,
        /// Add a script that removes, once per host, the files Divingbell leaves behind
        /// (its sysctl.d, limits.d and sudoers drop-ins, its AppArmor links, /var/divingbell).
        #[arg(long)]
        retire_divingbell: bool,
        /// The chart version the site ran, where Divingbell's behaviour changed: `newest`,
        /// `oldest`, or the newest of these commits the chart includes: 77be358 (the image's
        /// account is expired only when a sudo user has a password and a sudo user has ssh
        /// keys; before, whenever another sudo user is declared), 4c6ac47 (`user_sshkeys: []`
        /// is unmanaged; before, the chart refuses it).
        #[arg(long, value_name = "REF", default_value = "newest")]
        divingbell_version: String,
        /// Host lines keep the labels the overrides match; `inventory` keeps every label of
        /// every host in a JSON inventory beside the spec (OUTPUT's name, `.nodes.json`),
        /// `used` leaves the others out.
        #[arg(long, value_name = "inventory|used", default_value = "inventory", value_parser = ["inventory", "used"])]
        labels: String,
    },
    /// Host identities from `ssh-keyscan` output or `known_hosts` files (`-` reads stdin): a
    /// JSON inventory of the hosts' names, addresses and Ed25519 keys, or, with
    /// `--inventory`, that inventory with each host's identity filled in.
    KnownHosts {
        /// The files: `ssh-keyscan -t ed25519 HOST… | bellc import known-hosts -`, or
        /// `~/.ssh/known_hosts`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// An inventory (a JSON list of hosts, or `kubectl get nodes -o json`) whose hosts
        /// get their identity by name or address (kubectl's as the `bell/identity`
        /// annotation); everything else in it is kept.
        #[arg(long, value_name = "HOSTS.json")]
        inventory: Option<PathBuf>,
        /// Where to write the inventory (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Replace OUTPUT when it exists.
        #[arg(long)]
        force: bool,
    },
}

/// Counts what a rendering template holds, so that a template that would exhaust memory stops
/// bellc with a diagnostic instead of an abort (see `bellc::render::budget`).
#[global_allocator]
static ALLOCATOR: bellc::render::budget::Budgeted = bellc::render::budget::Budgeted;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(USAGE_ERROR)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if !matches!(cli.command, Command::Serve { .. }) {
        quiet_on_a_closed_pipe();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut sources = Sources::with_base(cwd);
    let mut diags = Diagnostics::new();
    let code = run(&cli, &mut sources, &mut diags);
    let warnings_fail = cli.deny_warnings && diags.warning_count() > 0;
    let has_errors = diags.has_errors();
    let ok_line = match &cli.command {
        Command::Check { spec, .. } if code.is_ok() => Some(format!("{}: ok", spec.display())),
        _ => None,
    };
    print_diagnostics(diags, &sources, cli.short, ok_line);
    match code {
        Ok(code) if has_errors || warnings_fail => ExitCode::from(code.max(1)),
        Ok(code) => ExitCode::from(code),
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}\n\nFor more information, try '--help'.");
            ExitCode::from(USAGE_ERROR)
        }
        Err(Failure::Io(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Prints the diagnostics and the line that ends the run: `1 error and 2 warnings`, or, when a
/// check found no error, `SPEC: ok, 2 warnings` (never a bare "ok" above warnings).
fn print_diagnostics(
    mut diags: Diagnostics,
    sources: &Sources,
    short: bool,
    ok_line: Option<String>,
) {
    if diags.is_empty() {
        if let Some(ok) = ok_line {
            eprintln!("{ok}");
        }
        return;
    }
    diags.sort();
    let (errors, warnings) = (diags.error_count(), diags.warning_count());
    if short {
        for (line, help) in diags.to_short(sources) {
            eprintln!("{line}");
            if let Some(help) = help {
                eprintln!("  help: {help}");
            }
        }
    } else {
        for report in diags.into_reports(sources) {
            eprintln!("{report:?}");
        }
    }
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if errors > 0 {
        eprintln!(
            "{} and {}",
            plural(errors, "error"),
            plural(warnings, "warning")
        );
    } else if let Some(ok) = ok_line {
        eprintln!("{ok}, {}", plural(warnings, "warning"));
    } else {
        eprintln!("{}", plural(warnings, "warning"));
    }
}

/// The process's peak resident set (VmHWM), from /proc; 0 where there is no /proc.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn read_check(spec: &Path) -> Result<(), String> {
    match std::fs::metadata(spec) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("{} is not a file", spec.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "no spec at {} (bellc reads ./bell.kdl when no spec is named)",
            spec.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", spec.display())),
    }
}

/// `bellc status | head -1`: when the reader goes away, end as `ls` does (killed by SIGPIPE,
/// quietly) instead of panicking in `println!`. Rust ignores SIGPIPE so that a write to a
/// closed pipe returns an error; the commands print with `println!`, which panics on one.
/// Not for `serve`, whose clients may hang up at any time.
#[allow(unsafe_code)]
fn quiet_on_a_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn read_release(dir: &Path) -> Result<bell_bundle::Release, String> {
    let path = dir.join("release.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a release: {e}", path.display()))
}

/// Loads and analyses a spec with the checks the command line chose.
fn frontend(
    cli: &Cli,
    path: &Path,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Option<bellc::Frontend> {
    let mut spec = bellc::front::lower::load(path, sources, diags)?;
    spec.allow_unknown_sysctl = cli.allow_unknown_sysctl;
    Some(bellc::analyse(spec, sources, diags))
}

/// [`frontend`], then rendering and the release, when the front end found no error.
fn compile(
    cli: &Cli,
    path: &Path,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Option<bellc::Compiled> {
    let front = frontend(cli, path, sources, diags)?;
    if diags.has_errors() {
        bellc::template_errors(front, sources, diags);
        return None;
    }
    bellc::compile_frontend(front, sources, diags)
}

fn run(cli: &Cli, sources: &mut Sources, diags: &mut Diagnostics) -> Result<u8, Failure> {
    match &cli.command {
        Command::Check { spec, strict } => {
            read_check(spec)?;
            if let Some(front) = frontend(cli, spec, sources, diags) {
                if *strict {
                    bellc::kinds::apparmor::check_profiles_with_parser(
                        &front.spec,
                        sources,
                        diags,
                    )?;
                }
                if diags.has_errors() {
                    bellc::template_errors(front, sources, diags);
                } else {
                    bellc::compile_frontend(front, sources, diags);
                }
            }
            // "ok" is said by `print_diagnostics`, after the warnings, with their count.
            Ok(0)
        }
        Command::Diff {
            old,
            new,
            json,
            values: false,
            ..
        } => Ok(review::diff_dirs(old, new, *json)?),
        Command::Diff {
            old,
            new,
            json,
            values: true,
            spec,
        } => {
            let old = bellc::review::diff::DirSide::open(old)?;
            let new = bellc::review::diff::DirSide::open(new)?;
            // Where values were set needs the spec resolved, not its graph or its bundles.
            let resolved = match spec {
                Some(path) => {
                    read_check(path)?;
                    let Some(mut tree) = bellc::front::lower::load(path, sources, diags) else {
                        return Ok(1);
                    };
                    tree.allow_unknown_sysctl = cli.allow_unknown_sysctl;
                    let resolution =
                        bellc::resolve::resolve(&tree, &bellc::targets::names(), diags);
                    if diags.has_errors() {
                        return Ok(1);
                    }
                    Some((tree, resolution))
                }
                None => None,
            };
            let locator = resolved.as_ref().map(|(tree, resolution)| {
                bellc::review::value_diff::Locator::new(tree, resolution, sources)
            });
            let d = bellc::review::value_diff::diff(&old, &new, locator)?;
            Ok(review::show_values(&d, *json)?)
        }
        Command::Publish {
            out,
            store,
            tls,
            signing,
        } => {
            if let Some(key) = load_sign_key(signing)? {
                sign_out(out, &key, signing.expires)?;
            }
            match store {
                Some(store) => Ok(review::publish(out, store, &tls.access())?),
                None => Ok(0),
            }
        }
        Command::Keygen { name, encrypt } => {
            let password = match std::env::var(signing::PASSWORD_VAR) {
                Ok(p) if *encrypt && !p.is_empty() => Some(p),
                _ if *encrypt => return Err(signing::SigningError::NoPassword.to_string().into()),
                _ => None,
            };
            let files = signing::generate(name, password).map_err(|e| e.to_string())?;
            println!(
                "wrote {} ({}, 0600; keep it secret) and {} (key id {})",
                files.secret.display(),
                if files.encrypted {
                    "encrypted"
                } else {
                    "not encrypted"
                },
                files.public.display(),
                files.key_id
            );
            Ok(0)
        }
        Command::Releases { out, json } => Ok(review::releases(out, *json)?),
        Command::Prune { out, keep } => {
            bellc::emit::out_dir::check_writable(out)?;
            Ok(review::prune(out, *keep)?)
        }
        Command::Store { command } => match command {
            StoreCommand::Roles {
                out,
                lock_prefix,
                apply,
                store,
                tls,
                passwords,
                json,
            } => {
                let release = read_release(out)?;
                let prefix = lock_prefix
                    .clone()
                    .unwrap_or_else(|| bell_store::semaphore::default_prefix(&release.fleet));
                let apply = match (apply, store, passwords) {
                    (true, Some(store), Some(passwords)) => Some(store_roles::Apply {
                        etcd: bell_store::Etcd::open(store, &tls.access())?,
                        passwords,
                    }),
                    _ => None,
                };
                Ok(store_roles::run(&release, &prefix, apply, *json)?)
            }
        },
        Command::Lock { command } => match command {
            LockCommand::Status {
                out,
                store,
                tls,
                scope,
                json,
            } => Ok(review::lock_status(
                store,
                &tls.access(),
                &scope.prefix(),
                scope.fleet.as_deref(),
                out.as_deref(),
                *json,
            )?),
            LockCommand::Release {
                host,
                store,
                tls,
                scope,
            } => Ok(review::lock_release(
                store,
                &tls.access(),
                &scope.prefix(),
                host,
            )?),
        },
        Command::Rollout {
            out,
            store,
            tls,
            signing,
            wave_timeout,
            resume,
            abort,
            status,
            pause,
            unpause,
            reason,
            by,
            history,
            fleet,
            json,
        } => {
            // `--history`, `--pause`, `--continue` and `--status` name the fleet by `--fleet`
            // or by OUT's release.
            let fleet_of = |what: &str| -> Result<String, Failure> {
                match (fleet, out) {
                    (Some(fleet), _) => Ok(fleet.clone()),
                    (None, Some(out)) => Ok(read_release(out)?.fleet),
                    (None, None) => Err(Failure::Usage(format!("{what} OUT or `--fleet`"))),
                }
            };
            if *history {
                let fleet = fleet_of("`--history` needs")?;
                return Ok(rollout::history(store, &tls.access(), &fleet, *json)?);
            }
            if *pause || *unpause {
                let fleet = fleet_of("`--pause` and `--continue` need")?;
                return Ok(rollout::pause(
                    store,
                    &tls.access(),
                    &fleet,
                    pause.then_some((reason.as_deref(), by.as_deref())),
                )?);
            }
            if *status {
                let fleet = fleet_of("`--status` needs")?;
                return Ok(rollout::status(store, &tls.access(), &fleet, *json)?);
            }
            let Some(out) = out else {
                return Err(Failure::Usage("OUT is required".into()));
            };
            let key = load_sign_key(signing)?;
            if key.is_none() {
                let fleet = read_release(out)?.fleet;
                if signing::out_is_signed(out, Some(&fleet)) {
                    return Err(Failure::Usage(format!(
                        "{} holds signed releases, and the waves' and the abort's releases \
                         must be signed as well: give `--sign-key KEY` (nothing was changed)\n  \
                         help: {}",
                        out.display(),
                        rollout::command(
                            out,
                            store,
                            &tls.access(),
                            Some(Path::new("KEY")),
                            if *abort {
                                "--abort"
                            } else if *resume {
                                "--resume"
                            } else {
                                ""
                            }
                        )
                    )));
                }
            }
            Ok(rollout::run(&rollout::Args {
                out,
                store,
                access: &tls.access(),
                key_path: signing.sign_key.as_deref(),
                key: key.as_ref(),
                expires_in: signing.expires,
                wave_timeout: *wave_timeout,
                resume: *resume,
                abort: *abort,
                json: *json,
                by: by.as_deref(),
            })?)
        }
        Command::Status {
            out,
            reports,
            store,
            tls,
            fleet,
            stale,
            json,
            all,
            fail_on,
            hosts,
            version,
        } => {
            let fail_on: Vec<String> = fail_on
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            const NAMES: [&str; 12] = [
                "forged",
                "failed",
                "unhealthy",
                "unaccounted",
                "unreadable",
                "stale",
                "drifted",
                "pending",
                "waiting",
                "deferred",
                "unknown",
                "unverified",
            ];
            if let Some(bad) = fail_on.iter().find(|s| !NAMES.contains(&s.as_str())) {
                return Err(Failure::Usage(format!(
                    "`--fail-on {bad}`: not a state or flag; use {}",
                    NAMES.join(", ")
                )));
            }
            if out.is_none() && reports.is_some() {
                return Err(Failure::Usage(
                    "a report directory holds no release: give OUT, the build output".into(),
                ));
            }
            let source = match (reports, store) {
                (Some(dir), _) => dir.display().to_string(),
                (None, Some(url)) => url.clone(),
                (None, None) => {
                    return Err(Failure::Usage(
                        "give `--reports DIR` or `--store etcd://…`".into(),
                    ))
                }
            };
            Ok(review::status(&review::StatusArgs {
                out: out.as_deref(),
                fleet: fleet.as_deref(),
                source: &source,
                access: &tls.access(),
                stale_minutes: *stale,
                json: *json,
                all: *all,
                fail_on: &fail_on,
                hosts: hosts.as_deref(),
                version: version.as_deref(),
            })?)
        }
        Command::Serve {
            out,
            store,
            tls,
            listen,
            spec,
            refresh,
        } => serve(
            cli,
            out,
            store,
            &tls.access(),
            listen,
            spec.as_deref(),
            *refresh,
            sources,
            diags,
        ),
        Command::Build {
            spec,
            out,
            check,
            timings,
            force,
            diff,
            values,
            seal_key,
            signing,
        } => {
            read_check(spec)?;
            if !*check {
                bellc::emit::out_dir::check_writable(out)?;
            }
            // A key that cannot sign stops the build before anything is written.
            let sign_key = load_sign_key(signing)?;
            // The key that names and seals secrets: given, derived from the signing key, or
            // bellc's own (with its bytes when it is new, to keep once it sealed something).
            let (seal_key, new_seal_key) = match (seal_key, &sign_key) {
                (Some(path), _) => (load_seal_key(path)?, None),
                (None, Some(sign_key)) => (sign_key.seal_key(), None),
                (None, None) => own_seal_key()?,
            };
            let clock = std::time::Instant::now();
            let found = bellc::emit::incremental::found(
                spec,
                out,
                cli.allow_unknown_sysctl,
                cli.deny_warnings,
                &seal_key,
            );
            if !*check && !*force && diff.is_none() && found == Found::Current {
                if *timings {
                    eprintln!(
                        "timings: {}",
                        serde_json::json!({"total_s": clock.elapsed().as_secs_f64(), "skipped": true, "peak_rss_kib": peak_rss_kib()})
                    );
                }
                diags.append(bellc::emit::incremental::kept_warnings(spec, out, sources));
                eprintln!(
                    "{}: up to date (inputs unchanged since the last build)",
                    out.display()
                );
                if let Some(key) = &sign_key {
                    sign_out(out, key, signing.expires)?;
                    bellc::emit::incremental::refresh(out).map_err(|e| {
                        format!("cannot record the build's inputs in {}: {e}", out.display())
                    })?;
                }
                return Ok(0);
            }
            // An unsigned release.json over a signed one (and its kept copy unsigned) would
            // make every host that trusts the key refuse every pull.
            // (Unchanged inputs make the same release, whose signature the build keeps.)
            if !*check
                && sign_key.is_none()
                && found != Found::Current
                && signing::out_is_signed(out, None)
            {
                return Err(Failure::Usage(format!(
                    "{} holds signed releases: a build into it must be signed as well; give \
                     `--sign-key KEY` (nothing was changed)\n  help: bellc build {} -o {} \
                     --sign-key KEY",
                    out.display(),
                    spec.display(),
                    out.display()
                )));
            }
            // Each phase's time, and the peak memory by its end (what a phase holds shows as
            // the growth over the one before).
            let mut phases: Vec<(&str, f64, u64)> = Vec::new();
            let lap = |name: &'static str, phases: &mut Vec<(&str, f64, u64)>| {
                let total: f64 = phases.iter().map(|(_, t, _)| t).sum();
                phases.push((name, clock.elapsed().as_secs_f64() - total, peak_rss_kib()));
            };
            let Some(mut spec_tree) = bellc::front::lower::load(spec, sources, diags) else {
                return Ok(1);
            };
            spec_tree.allow_unknown_sysctl = cli.allow_unknown_sysctl;
            lap("parse", &mut phases);
            let front = bellc::analyse(spec_tree, sources, diags);
            lap("resolve", &mut phases);
            if diags.has_errors() {
                bellc::template_errors(front, sources, diags);
                return Ok(1);
            }
            let sealing = front.spec.fleet.secrets_plaintext.is_none();
            let seal_with = Some(&seal_key).filter(|_| sealing);
            let mut sealed = bellc::emit::secrets::SealedContents::new();
            let mut keep_sealed = |bundle: &bellc::render::RenderedBundle| {
                if !bundle.sealed.is_empty() {
                    sealed.insert(bundle.id.clone(), bundle.sealed.clone());
                }
            };
            if *check {
                let Some(mut compiled) =
                    bellc::compile_frontend_sealed(front, sources, diags, seal_with.cloned())
                else {
                    return Ok(1);
                };
                compiled.bundles.values().for_each(&mut keep_sealed);
                let mut differing = match seal_with {
                    Some(key) => {
                        bellc::emit::secrets::check(out, &mut compiled.release, &sealed, key)
                            .map_err(|e| e.to_string())?
                    }
                    None => Default::default(),
                };
                differing.extend(bellc::emit::check(
                    out,
                    &compiled.bundles,
                    &compiled.release,
                ));
                if differing.is_empty() {
                    eprintln!(
                        "{}: up to date ({} hosts)",
                        out.display(),
                        compiled.release.hosts.len()
                    );
                    return Ok(0);
                }
                eprintln!(
                    "{} differs from a fresh build of {} for {} host(s):",
                    out.display(),
                    spec.display(),
                    differing.len()
                );
                for host in differing {
                    eprintln!("  {host}");
                }
                eprintln!(
                    "run `bellc build {} -o {}` and commit the result",
                    spec.display(),
                    out.display()
                );
                return Ok(1);
            }
            // The old side is read before the write, which may replace it (OLD = OUT).
            let old = match diff {
                Some(old) => Some(bellc::review::diff::DirSide::open(old)?),
                None => None,
            };
            // A forced build trusts nothing it finds in OUT.
            let trust = if found == Found::Unknown || *force {
                bellc::emit::Trust::Verify
            } else {
                bellc::emit::Trust::Kept
            };
            let mut writer =
                bellc::emit::BundleWriter::open(out, trust).map_err(|e| e.to_string())?;
            let mut cache = bellc::render::RenderCache {
                seal: seal_with.cloned(),
                ..Default::default()
            };
            let (changes, built) = match &old {
                // A diff compares the whole new build with OLD before anything is written.
                Some(old) => {
                    let Some(compiled) =
                        bellc::compile_frontend_sealed(front, sources, diags, seal_with.cloned())
                    else {
                        return Ok(1);
                    };
                    compiled.bundles.values().for_each(&mut keep_sealed);
                    let new = bellc::review::diff::MemorySide {
                        release: &compiled.release,
                        bundles: &compiled.bundles,
                    };
                    let changes = if *values {
                        let locator = bellc::review::value_diff::Locator::new(
                            &compiled.spec,
                            &compiled.resolution,
                            sources,
                        );
                        review::Changes::Values(bellc::review::value_diff::diff(
                            old,
                            &new,
                            Some(locator),
                        )?)
                    } else {
                        review::Changes::Files(bellc::review::diff::diff(old, &new)?)
                    };
                    bellc::emit::incremental::forget(out);
                    writer
                        .write(compiled.bundles.values())
                        .map_err(|e| e.to_string())?;
                    let built = bellc::Streamed {
                        bundle_ids: compiled.bundles.keys().cloned().collect(),
                        spec: compiled.spec,
                        resolution: compiled.resolution,
                        release: compiled.release,
                        layers: compiled.layers,
                    };
                    (Some(changes), built)
                }
                // Otherwise bundles are written as they are rendered, and dropped.
                None => {
                    // What the last build rendered, unless OUT may have changed since.
                    if trust == bellc::emit::Trust::Kept {
                        cache.known = bellc::emit::incremental::load_render_cache(out);
                    }
                    let mut forgotten = false;
                    let mut sink = |chunk: Vec<bellc::render::RenderedBundle>| {
                        if !forgotten {
                            bellc::emit::incremental::forget(out);
                            forgotten = true;
                        }
                        chunk.iter().for_each(&mut keep_sealed);
                        writer.write(&chunk)
                    };
                    match bellc::compile_streamed(front, sources, diags, &mut cache, &mut sink) {
                        Ok(Some(built)) => (None, built),
                        Ok(None) => {
                            // A host failed: OUT goes back to what it was.
                            writer.abandon().map_err(|e| e.to_string())?;
                            return Ok(1);
                        }
                        Err(e) => {
                            let _ = writer.abandon();
                            return Err(e.to_string().into());
                        }
                    }
                }
            };
            lap("render", &mut phases);
            bellc::emit::incremental::forget(out);
            let mut built = built;
            if let Some(key) = seal_with {
                if let (Some(material), false) = (&new_seal_key, sealed.is_empty()) {
                    keep_own_seal_key(material)?;
                }
                let kept = trust == bellc::emit::Trust::Kept;
                bellc::emit::secrets::write(out, &mut built.release, &sealed, key, kept)
                    .map_err(|e| e.to_string())?;
            }
            let stats = writer
                .finish(|id| built.bundle_ids.contains(id), &built.release)
                .map_err(|e| e.to_string())?;
            if let Some(key) = &sign_key {
                sign_out(out, key, signing.expires)?;
            }
            bellc::emit::incremental::save_render_cache(out, &cache.now).map_err(|e| {
                format!("cannot record the build's inputs in {}: {e}", out.display())
            })?;
            bellc::emit::incremental::record(
                spec,
                &built.spec,
                sources,
                out,
                &built.release,
                seal_with.filter(|_| !sealed.is_empty()),
                diags,
            )
            .map_err(|e| format!("cannot record the build's inputs in {}: {e}", out.display()))?;
            if stats.bundles_repaired > 0 {
                eprintln!(
                    "{}: {} bundle(s) differed from their id (changed since they were written) and were written again",
                    out.display(),
                    stats.bundles_repaired
                );
            }
            lap("write", &mut phases);
            if *timings {
                let mut line = serde_json::Map::new();
                for (name, secs, rss) in &phases {
                    line.insert(format!("{name}_s"), serde_json::json!(secs));
                    line.insert(format!("{name}_peak_rss_kib"), serde_json::json!(rss));
                }
                line.insert(
                    "total_s".into(),
                    serde_json::json!(clock.elapsed().as_secs_f64()),
                );
                line.insert("hosts".into(), serde_json::json!(built.release.hosts.len()));
                line.insert("bundles".into(), serde_json::json!(built.bundle_ids.len()));
                line.insert("groups_unrendered".into(), serde_json::json!(cache.hits));
                line.insert(
                    "bundles_written".into(),
                    serde_json::json!(stats.bundles_written),
                );
                line.insert(
                    "files_written".into(),
                    serde_json::json!(stats.files_written),
                );
                line.insert(
                    "links_written".into(),
                    serde_json::json!(stats.links_written),
                );
                line.insert(
                    "links_removed".into(),
                    serde_json::json!(stats.links_removed),
                );
                line.insert(
                    "release_written".into(),
                    serde_json::json!(stats.release_written),
                );
                line.insert("peak_rss_kib".into(), serde_json::json!(peak_rss_kib()));
                eprintln!("timings: {}", serde_json::Value::Object(line));
            }
            eprintln!(
                "built {} hosts into {} bundles in {} ({} bundles written, {} unchanged, {} removed)",
                built.release.hosts.len(),
                built.bundle_ids.len(),
                out.display(),
                stats.bundles_written,
                stats.bundles_kept,
                stats.bundles_removed
            );
            // Said once per build, so that what the spec does not name is still seen.
            for (implied, hosts) in bellc::kinds::implied_in_fleet(&built.resolution.hosts) {
                eprintln!(
                    "implied: {} on {hosts} host{}: {}",
                    implied.key,
                    if hosts == 1 { "" } else { "s" },
                    implied.why
                );
            }
            match changes {
                Some(changes) => Ok(changes.show(false)?),
                None => Ok(0),
            }
        }
        Command::Explain {
            selection,
            overridden,
            override_name,
            json,
        } => {
            let (spec, patterns, selector) = selection.parse()?;
            let Some(front) = frontend(cli, &spec, sources, diags) else {
                return Ok(1);
            };
            let selected =
                query::selected(&front, &selector, &patterns, &spec).map_err(Failure::Usage)?;
            match override_name {
                Some(name) => query::print_override(&front, sources, &selected, name, *json)
                    .map_err(Failure::Usage)?,
                None => query::print_explain(&front, sources, &selected, *overridden, *json)?,
            }
            Ok(0)
        }
        Command::Query {
            what,
            selection,
            json,
        } => {
            let target = bellc::review::query::Target::parse(what).map_err(Failure::Usage)?;
            let (spec, _, selector) = selection.parse()?;
            let Some(front) = frontend(cli, &spec, sources, diags) else {
                return Ok(1);
            };
            query::print(&front, sources, what, &target, &selector, *json)
                .map_err(Failure::Usage)?;
            Ok(0)
        }
        Command::Plan {
            spec,
            against,
            json,
            seal_key,
        } => {
            read_check(spec)?;
            let old = match against {
                Some(dir) => Some(read_release(dir)?),
                None => None,
            };
            let seal = match seal_key {
                Some(path) => Some(load_seal_key(path)?),
                None => own_seal_key_if_made(),
            };
            let Some(front) = frontend(cli, spec, sources, diags) else {
                return Ok(1);
            };
            if diags.has_errors() {
                bellc::template_errors(front, sources, diags);
                return Ok(1);
            }
            let Some(compiled) = bellc::compile_frontend_sealed(front, sources, diags, seal) else {
                return Ok(1);
            };
            let policy = bellc::graph::waves::Policy::from_spec(compiled.spec.rollout.as_ref());
            let new = &compiled.release.hosts;
            let changed = |h: &bellc::resolve::ResolvedHost| match &old {
                None => true,
                Some(old) => {
                    old.hosts.get(&h.name).map(|o| &o.bundle) != new.get(&h.name).map(|n| &n.bundle)
                }
            };
            let waves = bellc::graph::waves::plan(
                &compiled.resolution.hosts,
                &compiled.layers,
                &policy,
                changed,
            );
            if *json {
                let text = serde_json::to_string_pretty(&waves).map_err(|e| e.to_string())?;
                println!("{text}");
            } else if waves.is_empty() {
                println!("nothing to roll out: no host's bundle changed");
            } else {
                print!("{}", bellc::review::plan::table(&waves, &policy));
            }
            let planned: usize = waves.iter().map(|w| w.hosts.len()).sum();
            eprintln!("{planned} of {} hosts in {} waves", new.len(), waves.len());
            if let Some(dir) = against {
                // Run-once scripts this rollout runs again, so that nobody learns it on a host.
                let old = bellc::review::diff::DirSide::open(dir)?;
                let new = bellc::review::diff::MemorySide {
                    release: &compiled.release,
                    bundles: &compiled.bundles,
                };
                let diff = bellc::review::diff::diff(&old, &new)?;
                for change in &diff.changes {
                    for r in change.resources.iter().filter(|r| r.runs_again) {
                        eprintln!(
                            "{} runs again on {}: its script, arguments, environment or policy \
                             changed",
                            r.key,
                            change.hosts.join(",")
                        );
                    }
                }
            }
            Ok(0)
        }
        Command::Import {
            from:
                ImportFrom::Divingbell {
                    values,
                    inventory,
                    output,
                    name,
                    target,
                    force,
                    verify,
                    retire_divingbell,
                    divingbell_version,
                    labels,
                },
        } => {
            let rules = bellc::import::divingbell::Rules::at(divingbell_version)
                .map_err(|e| Failure::Usage(format!("--divingbell-version: {e}")))?;
            let request = import::Request {
                rules,
                keep_labels: labels == "inventory",
                deny_warnings: cli.deny_warnings,
                values,
                inventory: inventory.as_deref(),
                output,
                name: name.as_deref(),
                target,
                force: *force,
                verify: *verify,
                retire: *retire_divingbell,
            };
            Ok(import::divingbell(&request, sources, diags)?)
        }
        Command::Import {
            from:
                ImportFrom::KnownHosts {
                    files,
                    inventory,
                    output,
                    force,
                },
        } => Ok(import::known_hosts(
            files,
            inventory.as_deref(),
            output.as_deref(),
            *force,
        )?),
        Command::Hosts {
            command:
                Some(HostsCommand::Pending {
                    spec,
                    store,
                    tls,
                    json,
                }),
            ..
        } => {
            read_check(spec)?;
            // Lowered only: the hosts it declares are all that counts here, and a spec whose
            // `assign` waits for hosts to accept does not build until they are.
            let mut own = Diagnostics::new();
            let Some(lowered) = bellc::front::lower::load(spec, sources, &mut own) else {
                diags.append(own);
                return Ok(1);
            };
            if own.has_errors() {
                eprintln!(
                    "warning: the spec has errors (`bellc check` shows them); a host it drops \
                     shows as pending"
                );
            }
            let identities: std::collections::HashMap<&str, Option<&str>> = lowered
                .hosts
                .iter()
                .map(|h| (h.name.as_str(), h.identity.as_deref()))
                .collect();
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            let fleet = &lowered.fleet.name;
            let (filed, rejected) = bell_store::discovery::read(&etcd, fleet)?;
            enroll::print_pending(
                &bellc::fleet::enroll::pending_among(
                    &|name| identities.get(name).copied(),
                    &filed,
                    &rejected,
                ),
                *json,
            )?;
            Ok(0)
        }
        Command::Hosts {
            command:
                Some(HostsCommand::Accept {
                    hosts,
                    inventory,
                    labels,
                    store,
                    fleet,
                    tls,
                    json,
                }),
            ..
        } => {
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            let labels = labels.iter().cloned().collect();
            Ok(enroll::accept(
                &etcd, fleet, hosts, inventory, &labels, *json,
            )?)
        }
        Command::Hosts {
            command:
                Some(HostsCommand::Reject {
                    hosts,
                    store,
                    fleet,
                    tls,
                }),
            ..
        } => {
            let etcd = bell_store::Etcd::open(store, &tls.access())?;
            Ok(enroll::reject(&etcd, fleet, hosts)?)
        }
        Command::Hold { hosts, reason, by } => Ok(enroll::hold(
            &hosts.etcd()?,
            &hosts.fleet,
            &hosts.selected()?,
            reason.as_deref(),
            by.as_deref(),
        )?),
        Command::Unhold { hosts } => Ok(enroll::unhold(
            &hosts.etcd()?,
            &hosts.fleet,
            &hosts.selected()?,
        )?),
        Command::Hosts {
            command: None,
            selection,
            json,
        } => {
            let (spec, _, selector) = selection.parse()?;
            let Some(compiled) = compile(cli, &spec, sources, diags) else {
                return Ok(1);
            };
            let hosts: std::collections::BTreeMap<&String, &bell_bundle::ReleaseHost> = compiled
                .release
                .hosts
                .iter()
                .filter(|(name, host)| selector.selects(name, &host.labels))
                .collect();
            if hosts.is_empty() && !selector.is_everything() {
                return Err(Failure::Usage(format!(
                    "no host of {} is selected by {}",
                    spec.display(),
                    selector.describe()
                )));
            }
            if *json {
                let text = serde_json::to_string_pretty(&hosts).map_err(|e| e.to_string())?;
                println!("{text}");
            } else {
                for (name, host) in &hosts {
                    let labels: Vec<String> = host
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    println!("{name}\t{}\t{}", &host.bundle[..12], labels.join(" "));
                }
            }
            Ok(0)
        }
    }
}

fn span(value: &str) -> Result<u64, String> {
    signing::parse_span(value)
}

/// The key a build without `--seal-key` or `--sign-key` seals secrets with: bellc's own, kept
/// in its state directory (`seal.key`, 0600) as ssh keeps a host key, so that builds on this
/// machine name the same secrets alike. CI gives its signing key instead. When none is kept
/// yet, a new one, with the bytes [`keep_own_seal_key`] keeps once a build has sealed with it
/// (a fleet without secrets leaves nothing behind).
fn own_seal_key() -> Result<(bell_seal::SealKey, Option<[u8; 32]>), Failure> {
    if let Some(key) = own_seal_key_if_made() {
        return Ok((key, None));
    }
    use std::io::Read;
    let mut material = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut material))
        .map_err(|e| Failure::Io(format!("cannot read /dev/urandom: {e}")))?;
    Ok((seal_key_from(&material), Some(material)))
}

/// Keeps a new own seal key that a build sealed secrets with. Without a state directory (no
/// `HOME`) it is not kept: that build is right, only the next one names its secrets anew.
fn keep_own_seal_key(material: &[u8; 32]) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(dir) = bellc::fleet::witness::state_dir() else {
        return Ok(());
    };
    let path = dir.join("seal.key");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Io(format!("cannot create {}: {e}", dir.display())))?;
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(material));
    match made {
        // Another build kept one meanwhile: the next build seals with that one.
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(Failure::Io(format!("cannot write {}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}

/// bellc's own seal key when a build has kept it (never made here).
fn own_seal_key_if_made() -> Option<bell_seal::SealKey> {
    let path = bellc::fleet::witness::state_dir()?.join("seal.key");
    std::fs::symlink_metadata(&path).ok()?;
    load_seal_key(&path).ok()
}

fn seal_key_from(material: &[u8]) -> bell_seal::SealKey {
    bell_seal::SealKey::derive(material, "bellc secrets, from --seal-key")
}

/// `--seal-key FILE`: at least 32 bytes of secret material.
fn load_seal_key(path: &Path) -> Result<bell_seal::SealKey, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Io(format!("cannot read the seal key {}: {e}", path.display())))?;
    if bytes.len() < 32 {
        return Err(Failure::Usage(format!(
            "the seal key {} holds {} bytes, fewer than 32\n  help: make one with `head -c 32 /dev/urandom > {}` and keep it as the signing key is kept",
            path.display(),
            bytes.len(),
            path.display()
        )));
    }
    Ok(seal_key_from(&bytes))
}

fn load_sign_key(args: &SignArgs) -> Result<Option<signing::SigningKey>, Failure> {
    let Some(path) = &args.sign_key else {
        return Ok(None);
    };
    let password = std::env::var(signing::PASSWORD_VAR).ok();
    signing::load(path, password)
        .map(Some)
        .map_err(|e| Failure::Io(e.to_string()))
}

fn sign_out(out: &Path, key: &signing::SigningKey, expires: Option<u64>) -> Result<(), Failure> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let signed = signing::sign_release(out, key, expires, now_ms).map_err(|e| e.to_string())?;
    let until = match signed.expires {
        Some(at) => format!(", valid until {}", bell_bundle::utc(at)),
        None => String::new(),
    };
    eprintln!(
        "signed release {} (sequence {}{until}) with key {}",
        signed.version, signed.sequence, key.key_id
    );
    Ok(())
}

/// `--store` of `publish`: only etcd holds a fleet's desired release.
/// `bellc serve`: returns only when it cannot start (or the spec has errors).
#[allow(clippy::too_many_arguments)]
fn serve(
    cli: &Cli,
    out: &str,
    store: &str,
    access: &bell_store::Access,
    listen: &str,
    spec: Option<&Path>,
    refresh: u64,
    sources: &mut Sources,
    diags: &mut Diagnostics,
) -> Result<u8, Failure> {
    use bellc::serve::{http, pages::Pages, Board, Explain, Out};
    use std::sync::Arc;
    let etcd = bell_store::Etcd::open(store, access)?;
    let out = Out::parse(out).map_err(Failure::Usage)?;
    let explain: Option<Explain> = match spec {
        None => None,
        Some(spec) => {
            read_check(spec)?;
            let Some(front) = frontend(cli, spec, sources, diags) else {
                return Ok(1);
            };
            if diags.has_errors() {
                return Ok(1);
            }
            let sources = std::mem::take(sources);
            Some(Box::new(move |host: &str| {
                let h = front.resolution.hosts.iter().find(|h| h.name == host)?;
                Some(bellc::review::explain::explain(&front.spec, h, &sources))
            }))
        }
    };
    let board = Board::new(out, etcd, std::time::Duration::from_secs(refresh), explain)
        .map_err(|e| format!("{e}\n  help: {}", e.help()))?;
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| listen.to_string());
    let board = Arc::new(board);
    board.refresh(bellc::serve::unix_now());
    if let Some(outage) = board.outage() {
        eprintln!("warning: {}: {}", board.store_url(), outage.error);
    }
    eprintln!(
        "bellc serve: fleet {} on http://{address}/ (store {}, read every {refresh} s)",
        board.fleet(),
        board.store_url()
    );
    if !listener.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
        eprintln!(
            "warning: listening beyond loopback: anyone who reaches {address} sees the fleet's \
             status (the page has no login)"
        );
    }
    Arc::clone(&board).keep_refreshing();
    let pages = Pages::new()?;
    http::serve(listener, move |request| pages.answer(&board, request));
    Ok(0)
}

fn key_value(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err("give `KEY=VALUE`".to_string()),
    }
}

fn etcd_url(value: &str) -> Result<String, String> {
    if value.starts_with("etcd://") || value.starts_with("etcds://") {
        Ok(value.to_string())
    } else {
        Err("needs an etcd store (`--store etcd://HOST:PORT`, or `etcds://` for TLS)".to_string())
    }
}

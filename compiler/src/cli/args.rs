//! The command line as clap reads it: every command, its arguments and their help text. What
//! each command does is in `main.rs` and the modules beside it.

use crate::{query, read_check, read_release, Failure};
use bellc_core::emit::signing;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

pub const EXIT_CODES: &str = "\
Exit codes:
   0  ok: built, checked, no difference, the gate passed
   1  the spec has errors (every one printed), or diff and build --diff found changes
   2  an input or output could not be used: a file cannot be read or written, etcd cannot be
      reached, a directory is not a build output
   3  status: a host is in a --fail-on state (default forged, failed, unhealthy, unaccounted); the
      rollout gate (--hosts … --version …) failed
  64  usage: an unknown command or option, a missing or wrong argument (sysexits EX_USAGE)";

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
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Treat warnings as errors (for CI).
    #[arg(long, global = true)]
    pub deny_warnings: bool,
    /// Print diagnostics one per line (`file:line:col: error[code]: message`, then its help).
    #[arg(long, global = true)]
    pub short: bool,
    /// Accept sysctl keys the target's kernel list does not have (keys of out-of-tree
    /// modules); `unknown=#true` on a key accepts just that one.
    #[arg(long, global = true)]
    pub allow_unknown_sysctl: bool,
    /// Open the spec's encrypted secret files (`password file="secrets/x.age"`) with this
    /// key: an age identity file (`age-keygen`) or an OpenSSH Ed25519 private key, readable
    /// by its owner only. In CI, the build's key.
    #[arg(long, global = true, value_name = "FILE")]
    pub secrets_key: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct SignArgs {
    /// Sign release.json with this minisign secret key (release.json.minisig); an encrypted
    /// key's password is read from BELLC_KEY_PASSWORD.
    #[arg(long, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,
    /// How long hosts accept the signed release as their newest, as `30d` or `12h`; sign
    /// again before then.
    #[arg(long, value_name = "SPAN", requires = "sign_key", value_parser = span)]
    pub expires: Option<u64>,
}

/// The key a build named its sealed secrets with, for the commands that compute bundle ids
/// without writing a build (`hosts`, `plan`): a secret's name in a bundle is keyed, so a host
/// with a secret has the build's bundle id only under the build's key.
#[derive(clap::Args)]
pub struct SealedBy {
    /// The key the build sealed secrets with (`build --seal-key FILE`).
    #[arg(long, value_name = "FILE", conflicts_with = "sign_key")]
    pub seal_key: Option<PathBuf>,
    /// The key the build signed with (`build --sign-key KEY` without `--seal-key`: its seal
    /// key is derived from this one). Without either, bellc's own seal key, as a build on this
    /// machine without them uses.
    #[arg(long, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,
}

/// The hosts a review command is about, and the spec: names or globs and the spec among the
/// words (in any order), label conditions as `match` writes them.
#[derive(clap::Args)]
pub struct Selection {
    /// Host names or globs (`'web-*'`; every host when none), and the spec (default
    /// `bell.kdl`).
    #[arg(value_name = "HOST|GLOB|SPEC")]
    pub words: Vec<String>,
    /// Only hosts with these labels, as `match` writes them (`role=db,rack=r01`;
    /// repeatable: all must hold).
    #[arg(long = "where", value_name = "LABEL=VALUE,...")]
    pub wheres: Vec<String>,
}

impl Selection {
    /// The spec (checked to be readable), the names or globs, and the selector.
    pub fn parse(
        &self,
    ) -> Result<(PathBuf, Vec<String>, bellc_core::review::select::Selector), Failure> {
        let (spec, patterns) = query::spec_and_patterns(&self.words);
        let selector = bellc_core::review::select::Selector::parse(&patterns, &self.wheres)
            .map_err(Failure::Usage)?;
        read_check(&spec)?;
        Ok((spec, patterns, selector))
    }
}

/// The hosts `hold` and `unhold` act on, and where their holds are.
#[derive(clap::Args)]
pub struct HeldHosts {
    #[arg(value_name = "HOST", required_unless_present = "selector")]
    pub hosts: Vec<String>,
    /// Every host of OUT's release with this label (`rack=r01`; repeatable: all must hold).
    #[arg(long = "where", value_name = "LABEL=VALUE", value_parser = key_value, requires = "out")]
    pub selector: Vec<(String, String)>,
    /// The build output whose release says the hosts' labels, for `--where`.
    #[arg(long, value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// `etcd://HOST:PORT[,HOST:PORT...]`.
    #[arg(long, value_parser = etcd_url)]
    pub store: String,
    #[arg(long)]
    pub fleet: String,
    #[command(flatten)]
    pub tls: StoreTls,
}

impl HeldHosts {
    /// The hosts named, and those of OUT's release whose labels match every `--where`; a
    /// selector that matches no host is an error rather than a silent no-op.
    pub fn selected(&self) -> Result<Vec<String>, Failure> {
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

    pub fn etcd(&self) -> Result<bell_store::Etcd, String> {
        bell_store::Etcd::open(&self.store, &self.tls.access())
    }
}

/// Whose rollout groups: a fleet's (under `/bell/FLEET`) or those under another prefix.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
pub struct LockScope {
    /// The fleet, whose semaphores are under `/bell/FLEET/groups/`.
    #[arg(long)]
    pub fleet: Option<String>,
    /// The prefix the hosts were given (`bell-run pull --lock-prefix`), such as airlock's
    /// `com.coreos.airlock`.
    #[arg(long, value_name = "PREFIX")]
    pub lock_prefix: Option<String>,
}

impl LockScope {
    pub fn prefix(&self) -> String {
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
pub struct StoreTls {
    /// The CA the store's members' certificates are signed by (default: the system's CAs).
    #[arg(long, value_name = "FILE")]
    pub store_ca: Option<PathBuf>,
    /// A client certificate (PEM) for members that ask for one; with `--store-key`.
    #[arg(long, value_name = "FILE", requires = "store_key")]
    pub store_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, readable by its owner alone).
    #[arg(long, value_name = "FILE", requires = "store_cert")]
    pub store_key: Option<PathBuf>,
    /// The etcd user to log in as (over `etcds://` only), such as `controller` or `serve`
    /// (`bellc store roles`).
    #[arg(long, value_name = "NAME", requires = "store_password_file")]
    pub store_user: Option<String>,
    /// The user's password, on one line of a file readable by its owner alone.
    #[arg(long, value_name = "FILE", requires = "store_user")]
    pub store_password_file: Option<PathBuf>,
}

impl StoreTls {
    pub fn access(&self) -> bell_store::Access {
        bell_store::Access {
            tls: bell_wire::tls::TlsFiles {
                ca: self.store_ca.clone(),
                cert: self.store_cert.clone(),
                key: self.store_key.clone(),
            },
            user: self.store_user.clone(),
            password_file: self.store_password_file.clone(),
            signer: None,
        }
    }
}

#[derive(Subcommand)]
pub enum SecretsCommand {
    /// Fails unless every encrypted file the spec reads is named in `secrets.kdl` and can be
    /// opened by exactly the recipients it names there, and the build's key (for CI).
    Check {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
    },
    /// Encrypts every file `secrets.kdl` names again, to exactly the recipients it names: after
    /// a key was added or taken away. Run by someone whose key opens them.
    Rekey {
        #[arg(default_value = "bell.kdl")]
        spec: PathBuf,
    },
    /// Opens FILE (as `secrets.kdl` names it) in `$VISUAL` or `$EDITOR` from a private
    /// temporary file (in memory, /dev/shm, when there is one), then encrypts what was saved to
    /// its recipients; the plaintext is never written into the repository and is removed after.
    /// A new file needs no `--secrets-key`.
    Edit {
        /// The encrypted file, relative to the spec's directory (`secrets/ops.hash.age`).
        file: String,
        #[arg(long, default_value = "bell.kdl")]
        spec: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum StoreCommand {
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
pub enum LockCommand {
    /// Every rollout group's semaphore: its slots, who holds them and since when, how many
    /// are free.
    Status {
        /// A build output (a directory or the URL that serves it): its release names the
        /// fleet's hosts and their identities, and each holder is then told `proven` (its
        /// record signed by the host), `foreign` (not a host of the release: airlock's),
        /// `claiming` (a host's name without its signature) or `unverified`.
        out: Option<PathBuf>,
        /// The minisign public key(s) the hosts trust (`bell-run --trust`): OUT's release is
        /// read only when one of them signed it, and refused (naming OUT) when none did.
        /// Without it, a URL OUT is whatever its mirror serves.
        #[arg(long, value_name = "FILE")]
        trust: Option<PathBuf>,
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
pub enum Command {
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
    Build(BuildArgs),
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
    Rollout(RolloutArgs),
    /// One row per host, from the reports hosts filed: a summary state (forged, failed,
    /// unhealthy, unaccounted, drifted, pending, deferred, up-to-date, unknown) and every
    /// condition that holds. Each report is checked against the identity the release gives
    /// its host. Exit 3 when a host is in a `--fail-on` state.
    Status(StatusArgs),
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
        /// The minisign public key(s) the hosts trust (`bell-run --trust`): OUT's release is
        /// read only when one of them signed it, and refused (naming OUT) when none did.
        /// Without it, a URL OUT is whatever its mirror serves.
        #[arg(long, value_name = "FILE")]
        trust: Option<PathBuf>,
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
    /// The hosts' one door to the fleet's store: an HTTPS service (run several behind a load
    /// balancer) that checks each request against the identity the signed release names for
    /// its host, the keys that host may touch and its rate, and passes it on to etcd as one
    /// user. Hosts use it with `bell-run pull --gateway`, and hold no store password.
    Gateway(GatewayArgs),
    /// The spec's encrypted secret files and who can open them (`secrets.kdl` beside the
    /// spec); each needs `--secrets-key`, a key that opens them.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
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
        #[command(flatten)]
        sealed_by: SealedBy,
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
    Hosts(HostsArgs),
    /// Print the completion script of a shell for bellc, from the same definitions that parse
    /// its command line: `bellc completions bash > /etc/bash_completion.d/bellc` (the Debian
    /// package installs bash's, zsh's and fish's).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages, from the same definitions that parse the command line: bellc.1 and
    /// one page per command (bellc-rollout.1, bellc-store-roles.1, …) into DIR.
    ManPages {
        /// The directory to write them into (made when missing).
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum HostsCommand {
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
pub enum ImportFrom {
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
        /// Write the values' password hashes and debconf passwords into age files beside the
        /// spec (`secrets/NAME.age`, encrypted to these recipients: `age1…` or `ssh-ed25519
        /// …`, the first CI's build key) and a `secrets.kdl` naming them, instead of into the
        /// spec.
        #[arg(long, value_name = "RECIPIENT")]
        secrets_recipient: Vec<String>,
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

pub fn span(value: &str) -> Result<u64, String> {
    signing::parse_span(value)
}

pub fn key_value(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err("give `KEY=VALUE`".to_string()),
    }
}

pub fn etcd_url(value: &str) -> Result<String, String> {
    if value.starts_with("etcd://") || value.starts_with("etcds://") {
        Ok(value.to_string())
    } else {
        Err("needs an etcd store (`--store etcd://HOST:PORT`, or `etcds://` for TLS)".to_string())
    }
}

/// `bellc build`'s arguments.
#[derive(clap::Args)]
pub struct BuildArgs {
    #[arg(default_value = "bell.kdl")]
    pub spec: PathBuf,
    /// Output directory.
    #[arg(short, long, default_value = "out")]
    pub out: PathBuf,
    /// Build in memory and compare with OUT instead of writing; exit 1 naming every host
    /// whose bundle differs (keeps checked-in snapshots honest in CI).
    #[arg(long)]
    pub check: bool,
    /// Print how long each stage took, what was written and the peak memory, as one JSON
    /// line on stderr starting with `timings: ` (the benchmark reads it).
    #[arg(long)]
    pub timings: bool,
    /// Rebuild even when the inputs are unchanged since the last build into OUT.
    #[arg(long)]
    pub force: bool,
    /// After building, show what changed against the build output OLD (may be OUT itself);
    /// exit 1 when something did.
    #[arg(long, value_name = "OLD")]
    pub diff: Option<PathBuf>,
    /// With --diff: compare values instead of files (old → new, the hosts, and where the
    /// spec sets each new value).
    #[arg(long, requires = "diff")]
    pub values: bool,
    /// With `secrets="sealed"`: the key that names secrets in bundles and seals them, a
    /// file of at least 32 random bytes (`head -c 32 /dev/urandom`) kept as the signing key
    /// is. Without it, the key is derived from `--sign-key`.
    #[arg(long, value_name = "FILE")]
    pub seal_key: Option<PathBuf>,
    #[command(flatten)]
    pub signing: SignArgs,
}

/// `bellc rollout`'s arguments.
#[derive(clap::Args)]
pub struct RolloutArgs {
    /// The build output the hosts' source serves: the waves' releases are written into it.
    #[arg(required_unless_present_any = ["status", "pause", "unpause", "history"])]
    pub out: Option<PathBuf>,
    /// `etcd://HOST:PORT[,HOST:PORT...]`: where the hosts pull from and report to.
    #[arg(long, value_parser = etcd_url)]
    pub store: String,
    #[command(flatten)]
    pub tls: StoreTls,
    #[command(flatten)]
    pub signing: SignArgs,
    /// How long a wave may take to converge before the rollout halts (`90s`, `30m`).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = span)]
    pub wave_timeout: u64,
    /// Continue the rollout the store holds (after a halt, or a controller that died).
    #[arg(long, conflicts_with_all = ["abort", "status"])]
    pub resume: bool,
    /// Give the hosts the rollout moved their previous bundle back, as a newer release.
    #[arg(long, conflicts_with = "status")]
    pub abort: bool,
    /// Show where the fleet's rollout stands.
    #[arg(long)]
    pub status: bool,
    /// Pause the fleet's rollout: no new wave is given (hosts given theirs finish) until
    /// `--continue`; it survives the controller's death. With `--reason`, `--by`.
    #[arg(long, conflicts_with_all = ["resume", "abort", "status", "unpause"])]
    pub pause: bool,
    /// Take a pause away: the waiting controller gives the next wave.
    #[arg(long = "continue", conflicts_with_all = ["resume", "abort", "status"])]
    pub unpause: bool,
    /// Why it is paused.
    #[arg(long, requires = "pause")]
    pub reason: Option<String>,
    /// Who pauses it, or starts the rollout (for the history; default: the CI job the
    /// environment names, else `$USER@HOSTNAME`).
    #[arg(long)]
    pub by: Option<String>,
    /// The fleet's last rollouts, newest first: from and to, who, when, each wave's hosts
    /// and times, how it ended.
    #[arg(long, conflicts_with_all = ["resume", "abort", "status", "pause", "unpause"])]
    pub history: bool,
    /// The fleet, for `--status` without OUT.
    #[arg(long)]
    pub fleet: Option<String>,
    /// One JSON event per line on stdout (wave-started, host-converged, host-failed,
    /// halted, done) instead of a progress display.
    #[arg(long)]
    pub json: bool,
}

/// `bellc status`'s arguments.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// The build output whose release.json says what each host should run (a directory,
    /// or the http:// URL that serves it); with `--store`, the store's published release
    /// when left out (give `--fleet`).
    pub out: Option<PathBuf>,
    /// A directory that `bell-run --report DIR` wrote.
    #[arg(long, conflicts_with = "store", required_unless_present = "store")]
    pub reports: Option<PathBuf>,
    /// `etcd://HOST:PORT[,HOST:PORT...]` that `bell-run --report etcd://...` wrote.
    #[arg(long)]
    pub store: Option<String>,
    #[command(flatten)]
    pub tls: StoreTls,
    /// The minisign public key(s) the hosts trust (`bell-run --trust`): OUT's release is
    /// read only when one of them signed it, and refused (naming OUT) when none did.
    /// Without it, a URL OUT is whatever its mirror serves.
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// Without OUT: the mirror (an http:// URL or a directory) that serves the release
    /// the store names, read from there (verified with `--trust`) for the identities
    /// reports are checked against.
    #[arg(long, value_name = "URL|DIR", conflicts_with = "out")]
    pub source: Option<String>,
    /// The fleet whose published release the store holds (without OUT).
    #[arg(long)]
    pub fleet: Option<String>,
    /// Reports in a directory: one older than this many minutes marks its host stale
    /// (default 45). In etcd, liveness is the host's lease.
    #[arg(long, value_name = "MINUTES")]
    pub stale: Option<u64>,
    #[arg(long)]
    pub json: bool,
    /// List every host, up to date ones included.
    #[arg(long)]
    pub all: bool,
    /// Exit 3 when a host's state or one of its flags is one of these (comma-separated:
    /// forged, failed, unhealthy, unaccounted, unreadable, stale, drifted, pending,
    /// waiting, deferred, held, unverified). A host an operator holds is `held` rather
    /// than pending or unaccounted: not trouble by default.
    /// Default: forged, failed, unhealthy, unaccounted, unreadable, and unverified when
    /// no verified release is at hand and the fleet's hosts sign their reports.
    #[arg(long, value_name = "STATES")]
    pub fail_on: Option<String>,
    /// A rollout gate: exit 0 only if these hosts (comma-separated) are up to date on
    /// `--version`, else 3.
    #[arg(long, requires = "version")]
    pub hosts: Option<String>,
    #[arg(long, requires = "hosts")]
    pub version: Option<String>,
}

/// `bellc hosts`'s arguments.
#[derive(clap::Args)]
pub struct HostsArgs {
    #[command(subcommand)]
    pub command: Option<HostsCommand>,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub sealed_by: SealedBy,
    #[arg(long)]
    pub json: bool,
}

/// `bellc gateway`.
#[derive(clap::Args)]
pub struct GatewayArgs {
    /// The build output whose signed release names the hosts and their identities (read again
    /// every `--refresh` seconds): a directory, or the http:// URL that serves it.
    pub out: String,
    /// The fleet's minisign public key(s): a release is believed only with its signature.
    #[arg(long, value_name = "FILE")]
    pub trust: PathBuf,
    /// `etcds://HOST:PORT[,HOST:PORT...]`: the store, reached as the gateway's own user.
    #[arg(long, value_parser = etcd_url)]
    pub store: String,
    #[command(flatten)]
    pub tls: StoreTls,
    /// Where to listen for the hosts.
    #[arg(long, value_name = "ADDRESS:PORT")]
    pub listen: String,
    /// The certificate chain the gateway presents (the hosts verify it with `--store-ca`).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: PathBuf,
    /// The certificate's private key.
    #[arg(long, value_name = "FILE")]
    pub tls_key: PathBuf,
    /// Where the hosts' semaphores are, as they were given it (`bell-run pull --lock-prefix`);
    /// the fleet's own by default.
    #[arg(long, value_name = "PREFIX")]
    pub lock_prefix: Option<String>,
    /// Requests a second each host may send, on average.
    #[arg(long, value_name = "N", default_value_t = 5.0)]
    pub rate: f64,
    /// Requests a host may send at once after a quiet while.
    #[arg(long, value_name = "N", default_value_t = 60.0)]
    pub burst: f64,
    /// Bytes a second each host may send, on average (bursts of 16 times as many).
    #[arg(long, value_name = "BYTES", default_value_t = 65536.0)]
    pub bytes_rate: f64,
    /// The largest value a host may write.
    #[arg(long, value_name = "BYTES", default_value_t = 262144)]
    pub max_value: usize,
    /// Seconds between two readings of OUT's release.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub refresh: u64,
    /// Seconds a host is refused for its rate before `bellc status` flags it `throttled`.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub throttled_after: u64,
}

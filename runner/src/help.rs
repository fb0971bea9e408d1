//! `bell-run CMD --help` (and `bell-run help CMD`): what one command does and every option it
//! takes, so that a reader on a host need not find the README. The exit codes and markers are
//! said where they apply.

pub(crate) const USAGE: &str = "\
usage: bell-run apply BUNDLE [--root DIR] [--offline] [--dry-run] [--json] [--timings] [--timeout SECS]
                      [--identity FILE]
                      [--report DIR|etcd://HOST:PORT[,HOST:PORT...] [--alive-ttl SECS]]
                      [--host NAME] [--release VERSION] [--metrics FILE]
       bell-run check [--root DIR] [--offline] [--json] [--timeout SECS] [--report DEST]
                      [--alive-ttl SECS] [--host NAME] [--release VERSION] [--metrics FILE]
       bell-run pull --source http[s]://HOST[:PORT]/PATH/|DIR [--source-ca FILE] [--host NAME]
                      [--root DIR] [--trust FILE] [--store etcd[s]://HOST:PORT [--lock-prefix PREFIX]]
                      [--gateway https://HOST:PORT[,HOST:PORT...] [--wait SECS]]
                      [--fleet NAME] [--offline] [--json] [--timeout SECS] [--report DEST]
                      [--alive-ttl SECS] [--metrics FILE] [--fetch-timeout SECS]
                      [--identity FILE]
       bell-run pending --store etcd[s]://HOST:PORT [--host NAME] [--root DIR] [--fleet NAME] [--json]
       bell-run register --store etcd[s]://HOST:PORT|--gateway https://HOST:PORT --fleet NAME
                      [--host NAME] [--root DIR] [--json]
       bell-run status [--root DIR] [--json]
       bell-run generations [--root DIR] [--json]
       bell-run rollback [--to GENERATION] [--root DIR] [--offline] [--dry-run] [--json]
                      [--timeout SECS]
       bell-run remove (--yes|--dry-run) [--root DIR] [--offline] [--json] [--timeout SECS]
       bell-run verify BUNDLE [--json]
       bell-run identity [--root DIR] [--init] [--host NAME] [--json]
       bell-run recover [--root DIR]
       bell-run live --store etcd[s]://HOST:PORT|--gateway https://HOST:PORT [--root DIR]
                      [--host NAME] [--every SECS] [--identity FILE]
       bell-run install-timer [--root DIR] [--exec PATH] [--interval SPAN]
                      [--source http[s]://HOST[:PORT]/PATH/|DIR [--trust FILE] [--store etcd[s]://HOST:PORT]
                       [--fleet NAME] [--host NAME] [--report DEST] [--alive-ttl SECS]
                       [--metrics FILE] [--timeout SECS] [--fetch-timeout SECS]
                       [--lock-prefix PREFIX] [--source-ca FILE] [--gateway URL [--wait SECS]]]
every command that takes --store or --report etcds://… also takes
                      [--store-ca FILE] [--store-cert FILE --store-key FILE]
                      [--store-user NAME --store-password-file FILE]

exit codes:
   0  done: applied, in sync (check), up to date (pending), verified
   1  refused, nothing was changed (a bad bundle or root, a lock held, ...); check: a check
      script could not tell
   2  check: drift found (printed)
   3  apply, rollback, remove: applied with failures (each named; the rest applied), or
      stopped after changes began
   4  apply, pull, check: the configuration applied (or is in sync) but a health probe fails
  10  pending: the store holds a release this host has not applied; pull: it waits for a
      slot of its rollout group (nothing was changed)
  64  usage: an unknown command or option, a missing or extra argument (sysexits EX_USAGE)";

/// What the first column of `apply`, `rollback` and `--dry-run` means; printed by `--help`.
pub(crate) const MARKERS: &str = "\
markers (apply, rollback, --dry-run), one per resource line:
   +  created: the host has not had this resource before
   ~  changed: the bundle changed it since the last apply
   =  unchanged: as the last apply left it; nothing was run
   *  drifted: unchanged in the bundle, but one of its files was changed on the host; put back
   !  retry: unchanged, but its last apply failed or was skipped behind a failure
   ^  trigger: ran once because a path under it changed (a daemon-reload after a unit file)
   -  departed: no longer in the bundle; its revert script ran (--dry-run: will run)
each apply line then says what happened: ok, failed, skipped (a resource it depends on
failed), halted (an exec with on-failure=halt failed before it), deferred (to the first live
apply: an offline apply to an image root starts no service and loads no sysctl), not-due (an
exec whose rerun policy says not now), started (an exec in the background)
on a root other than /, exec scripts and health probes run inside that root (a private mount
namespace with it as /), never on this machine; offline= in the spec chooses defer, skip or
root (this machine read-only but for the root and a private /tmp)";

const REPORTING: &str = concat!(
    "  --report DIR|etcd://HOST:PORT[,HOST:PORT...]\n",
    "                     file a report of the run there (the fleet's status reads it);\n",
    "                     etcds:// for TLS\n",
    "  --store-ca FILE    the CA an etcds:// store's certificates are verified against\n",
    "                     (default: the system's, /etc/ssl/certs/ca-certificates.crt)\n",
    "  --store-cert FILE, --store-key FILE\n",
    "                     a client certificate and its key (0600), for members that ask\n",
    "  --store-user NAME, --store-password-file FILE\n",
    "                     the etcd user this host is (host/FLEET/HOST, from `bellc store\n",
    "                     roles`) and its password's file (0600, root's); etcds:// only\n",
    "  --alive-ttl SECS   how long the host's alive key outlives the run (etcd; default 2700, >= 10)\n",
    "  --host NAME        the host this root is (default: its host name)\n",
    "  --release VERSION  the release this bundle was applied for, kept for later reports\n",
    "  --metrics FILE     write Prometheus textfile metrics of the run",
);

const TIMEOUT: &str = concat!(
    "  --timeout SECS     bound each generated apply, revert and trigger script (default 900);\n",
    "                     exec scripts carry their own timeout",
);

const IDENTITY: &str =
    "  --identity FILE    the host's key (OpenSSH's private key format, 0600) that opens the
                     bundle's sealed secrets and signs its reports, for an image whose own
                     key is not in its root yet; by default the root's SSH host key or
                     /etc/bell/identity.key";
const ROOT: &str = "  --root DIR         the root to act on (default /); any other root is offline";

fn markers() -> &'static str {
    MARKERS
}

/// The help of `command`, or `None` when there is no such command.
pub fn of(command: &str) -> Option<String> {
    let text = match command {
        "apply" => format!(
            "usage: bell-run apply BUNDLE [options]

Applies a bundle (a directory `bellc build` wrote: OUT/hosts/NAME or OUT/bundles/ID) to this
host or to an image root: verifies every file against the manifest, switches the managed files
at once, reverts what the applied bundle had and this one has not, runs each resource's apply
script in dependency order, then the health probes. Nothing changes when it refuses.

options:
{ROOT}
  --offline          run as on an image: start nothing, load nothing (BELL_OFFLINE=1)
  --dry-run          print the plan (every resource and file action) and change nothing
  --json             one JSON report on stdout
  --timings          say where the time went, by phase and by kind
{IDENTITY}
{TIMEOUT}
{REPORTING}

exit: 0 applied, 1 refused (nothing changed), 3 applied with failures, 4 applied but a
health probe fails

{}",
            markers()
        ),
        "check" => format!(
            "usage: bell-run check [options]

Compares the host with the applied generation: every managed file (content, mode, owner) and
each resource's check script. Changes nothing; takes the lock, so it never reads a half-applied
host. The next apply puts back what it finds (`*` drifted → put back).

options:
{ROOT}
  --offline          check as on an image (live-only checks are skipped)
  --json             one JSON report on stdout
{TIMEOUT}
{REPORTING}

exit: 0 in sync, 1 nothing applied or a check could not tell, 2 drift found, 4 a health
probe fails"
        ),
        "pull" => format!(
            "usage: bell-run pull --source http://HOST[:PORT]/PATH/|DIR [options]

One reconciliation step: fetches the release the source (or, with --store, the fleet's
desired map) names for this host, checks it end to end against the trusted key (signature,
fleet, host, bundle id, every file's sha256 as it streams in), then applies it as `apply`
does. With --store it takes a slot of its rollout group first and waits (exit 10) when the
group is full.

When the host then needs a reboot and its bundle's `reboot` setting allows one (a window that
is open now), it keeps (or takes) its slot, runs `before-reboot`, files its report and reboots
(`systemctl reboot`, or `kexec -l` with the new command line and `systemctl kexec`). The first
pull of the next boot runs `after-boot` and the probes, and gives the slot back only when the
reasons are gone and the host is healthy. Only a running system (ROOT /) reboots.

A bundle with `confirm` keeps a new generation only once the host reaches its store and its
mirror again with its probes passing (from a third of the timeout on, by the timeout; and
again in the next boot when the generation needs one); else it applies the generation before
again, reports `reverted` (exit 3) and refuses that release from then on.

options:
  --source SRC       a build output served over http:// or https://, or a directory
  --source-ca FILE   the CA an https:// source's certificate is verified against
                     (default: the system's)
{ROOT}
  --trust FILE       minisign public keys (default ROOT/etc/bell/trusted.pub when present)
  --store etcd://HOST:PORT[,HOST:PORT...]
                     the fleet's store: desired map, rollout slots, reports (etcds:// for
                     TLS, with --store-ca, --store-cert and --store-key as below)
  --gateway https://HOST:PORT[,HOST:PORT...]
                     the fleet's store through its gateway (`bellc gateway`) instead of
                     --store: each request signed with the host's identity, no store user
                     or password (--store-ca names the gateway's CA)
  --lock-prefix P    where the rollout semaphores live (airlock's is com.coreos.airlock)
  --fleet NAME       the fleet this host belongs to (default: the one it accepted last)
  --fetch-timeout SECS
                     bound the whole fetch, first connection to last byte (default 300)
  --wait SECS        with --gateway: after the pull, wait at the gateway for the store to
                     change what it decided on (the release, the host's bundle, its hold,
                     the slot it waits for) and pull again when it does, until SECS pass
                     without a change (a new release reaches the host in a second or two)
  --offline          apply as on an image
  --json             one JSON report on stdout
{IDENTITY}
{TIMEOUT}
{REPORTING}

exit: 0 applied, 1 refused (nothing changed), 3 applied with failures, 4 unhealthy, 10 waits
for a slot of its rollout group"
        ),
        "register" => "usage: bell-run register --store etcd://HOST:PORT --fleet NAME [options]

Files this host's facts (interfaces with their MAC and IP addresses, CPUs, memory, disks with
size, model and serial, the OS release, the kernel) under the fleet's discovery prefix,
signed by its identity (made first when it has none), for an operator to accept with
`bellc hosts accept`. Files again only when a fact or the identity changed. The facts are read
from ROOT's sys, proc and etc/os-release, never through a link out of ROOT.

options:
  --store etcd://HOST:PORT[,HOST:PORT...]
                     the fleet's store (etcds:// for TLS, with --store-ca, --store-cert,
                     --store-key, --store-user, --store-password-file as for `pull`)
  --fleet NAME       the fleet it asks to join
  --host NAME        the name it asks for (default: its host name)
  --root DIR         the root whose facts are read (default /)
  --json             what was filed, as JSON on stdout

exit: 0 registered (or registered already), 1 refused"
            .to_string(),
        "pending" => "usage: bell-run pending (--store etcd://HOST:PORT | --gateway https://HOST:PORT) [options]

Asks the fleet's store whether the published release wants another bundle on this host.
Changes nothing. --store or --gateway (with its --store-ca and --identity), --fleet and --host
default to what the pulling timer was installed with.

options:
  --store etcd://HOST:PORT[,HOST:PORT...]
                     (etcds:// for TLS)
  --gateway https://HOST:PORT[,HOST:PORT...]
                     the fleet's gateway, each request signed with the host's identity
  --identity FILE    the host's key for --gateway (default: its SSH host key, else bell's own)
  --store-ca FILE, --store-cert FILE, --store-key FILE
                     TLS for an etcds:// store, as for `pull`
  --store-user NAME, --store-password-file FILE
                     the etcd user, as for `pull`
  --host NAME        the host this root is (default: its host name)
  --fleet NAME       the fleet this host belongs to
  --root DIR         the root whose applied bundle is compared (default /)
  --json             one JSON answer on stdout

exit: 0 up to date, 1 refused, 10 a release this host has not applied is pending"
            .to_string(),
        "status" => "usage: bell-run status [--root DIR] [--json]

The applied generation, when and how its apply ended, every resource's result, reverts and
triggers still owed, and whether an interrupted file switch is pending. Changes nothing.

options:
  --root DIR         the root to read (default /)
  --json             the state as JSON on stdout"
            .to_string(),
        "generations" => "usage: bell-run generations [--root DIR] [--json]

Lists the generations (bundles this root applied) whose copy bell-run keeps, oldest first by
their first apply: id, when last applied, how that ended, and the release it was for. Any of
them can be applied again with `bell-run rollback --to ID`. bell-run keeps the applied one and
the last 5 others. Changes nothing.

options:
  --root DIR         the root to read (default /)
  --json             the list as JSON on stdout (full ids, unix times)"
            .to_string(),
        "rollback" => format!(
            "usage: bell-run rollback [--to GENERATION] [options]

Applies a kept generation again from bell-run's own copy (the source bundle may be gone), as
`apply` would. Without --to it goes to the generation first applied before the applied one,
so a second rollback goes further back, as NixOS's does; `bell-run generations` lists them.

options:
  --to GENERATION    the generation: its bundle id, or the first characters of it
{ROOT}
  --offline          apply as on an image
  --dry-run          print the plan and change nothing
  --json             one JSON report on stdout
{TIMEOUT}

exit: as `apply`; 1 when there is no such generation (nothing changed)

{}",
            markers()
        ),
        "remove" => format!(
            "usage: bell-run remove --yes [options]
       bell-run remove --dry-run [options]

Takes bell off this host or image root: reverts every resource bell manages (in reverse
order, as a bundle without them would), gives every file bell took over its original back and
removes the files bell created, then removes bell-run's timer units and its own directory
(ROOT/var/lib/bell: state, logs, kept generations, originals). Accounts bell created are
expired and locked by their revert, not deleted (a home may hold someone's work); they are
named. When a revert fails, bell's state stays, so the removal can be run again.

options:
  --yes              do it
  --dry-run          print what would be reverted, restored and removed; change nothing
{ROOT}
  --offline          revert as on an image
  --json             one JSON report on stdout
{TIMEOUT}

exit: 0 removed (or planned), 1 refused (nothing changed), 3 a revert failed (bell stays),
64 neither --yes nor --dry-run"
        ),
        "verify" => "usage: bell-run verify BUNDLE [--json]

Checks a bundle's integrity without a root: the manifest is canonical and its sha256 is the
bundle id, and every file is listed with its size and sha256, with nothing else beside them.

exit: 0 verified, 1 refused"
            .to_string(),
        "identity" => format!(
            "usage: bell-run identity [--root DIR] [--init] [--host NAME] [--json]

Prints this host's identity, the Ed25519 key every report it files is signed with, as one line
of OpenSSH's format (`ssh-ed25519 AAAA… HOST`): the value of its host entry's `identity=` in the
spec. The key is the SSH host key ({ssh}) when there is one, else bell's own ({bell}, 0600).
Changes nothing unless --init is given.

options:
{ROOT}
  --init             make bell's own key when the root has neither (once; never replaced)
  --host NAME        the name to print after the key (default: ROOT/etc/hostname)
  --json             identity, fingerprint, host, key file and whether it was made now

exit: 0 printed, 1 refused (no key without --init; an unreadable or group-readable key)",
            ssh = crate::identity::SSH_HOST_KEY,
            bell = crate::identity::BELL_KEY,
        ),
        "live" => format!(
            "usage: bell-run live --store etcd[s]://HOST:PORT|--gateway https://HOST:PORT [options]

The live layer's long-running mode, beside the pull timer (install-timer with an etcd --store
or a --gateway writes its unit, bell-run-live.service). On a provider of a service some live
file follows, it runs the health probes every --every seconds and files the host's health,
signed, when what fails changes. On a consumer it reads its live files' providers (a long-poll
at the gateway, a read every --every seconds from etcd) and, once a file's ready set has been
still for its `wait min` (at the latest `wait max` after it changed), renders it and runs its
apply, which puts it in place and runs its reload. It follows the applied generation, read
again each round, and takes the host's lock for each probe and each apply, so it never
interleaves with a pull.

options:
{ROOT}
  --host NAME        the host's name (default: the root's /etc/hostname)
  --every SECS       how often it probes and reads without a gateway (default {every})
{IDENTITY}

exit: runs until stopped; 1 when the store cannot be opened",
            every = crate::live_mode::DEFAULT_EVERY
        ),
        "recover" => "usage: bell-run recover [--root DIR]

Completes or undoes a file switch that a crash interrupted, and nothing else (`apply` does this
by itself first).

exit: 0 done (or nothing to do), 1 refused"
            .to_string(),
        "install-timer" => "usage: bell-run install-timer [--root DIR] [--exec PATH] [--interval SPAN] [--source SRC ...]

Writes bell-run.service and bell-run.timer into ROOT/etc/systemd/system; enable them with
`systemctl daemon-reload && systemctl enable --now bell-run.timer`. Every --interval (default
15min, with a random delay of up to a minute) the service re-applies the current generation,
which runs nothing unless something is due; with --source it runs `bell-run pull` with the
pull options given here (--trust, --store or --gateway, --fleet, --host, --report, --metrics,
--timeout, --fetch-timeout, --wait, --lock-prefix, --source-ca, --store-ca, --store-cert,
--store-key, --store-user, --store-password-file), each checked now; with --gateway the pull
waits for a change until a minute before the next tick (--wait, unless given); enabled too (`systemctl enable
bell-run.service`), that service pulls once at every boot, which sees a reboot bell-run made
through (the bundle's `reboot` setting). With an etcd --store and --fleet it writes
bell-run-register.service as well (`systemctl enable bell-run-register.service`): at every
boot, before the pull, `bell-run register` with the pull's store options, so that a new machine
announces itself (`bellc hosts pending`) and a changed one files its facts again. `bell-run
remove` takes them away.

options:
  --root DIR         the root to write into (default /)
  --exec PATH        bell-run's path on the host (default /usr/local/sbin/bell-run)
  --interval SPAN    a systemd time span (default 15min)

exit: 0 written, 1 refused, 64 a bad option"
            .to_string(),
        _ => return None,
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_of_the_usage_has_its_help() {
        let usage = super::USAGE;
        let commands: Vec<&str> = usage
            .lines()
            .filter_map(|l| {
                l.trim_start()
                    .strip_prefix("usage: ")
                    .or(Some(l.trim_start()))
            })
            .filter_map(|l| l.strip_prefix("bell-run "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(commands.len() >= 11, "{commands:?}");
        for command in commands {
            let help = super::of(command).unwrap_or_else(|| panic!("no help for `{command}`"));
            assert!(
                help.starts_with(&format!("usage: bell-run {command}")),
                "{command}: {help}"
            );
        }
        assert!(super::of("frobnicate").is_none());
    }

    /// A default said in the help or the guide is the one the code has: the help once said
    /// `--alive-ttl` lasts 900 s while the code gave 2700.
    #[test]
    fn defaults_said_in_help_and_readme_are_the_codes() {
        let guide = [
            include_str!("../../docs/reviewing.md"),
            include_str!("../../docs/security-model.md"),
        ]
        .concat();
        let readme = guide.as_str();
        let alive = crate::report::DEFAULT_ALIVE_TTL;
        let script = crate::apply::DEFAULT_SCRIPT_TIMEOUT;
        let fetch = crate::fetch::DEFAULT_FETCH_TIMEOUT.as_secs();
        for (text, said) in [
            (super::REPORTING, format!("default {alive}, >= 10")),
            (readme, format!("(`--alive-ttl SECS`, default {alive}:")),
            (super::TIMEOUT, format!("(default {script});")),
            (readme, format!("(`--fetch-timeout`, {fetch} s by default;")),
        ] {
            assert!(text.contains(&said), "`{said}` is not said");
        }
        let pull = super::of("pull").expect("pull's help");
        assert!(
            pull.contains(&format!("last byte (default {fetch})")),
            "{pull}"
        );
    }
}

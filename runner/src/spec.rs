//! bell-run's command line as data: every command, the options it takes and what each does.
//! It is the one definition: the parser takes an option for a command only when it is listed
//! here, `bell-run CMD --help` prints it, and the man pages and shell completions are made from
//! it (runner/manual, with clap_mangen and clap_complete), so none of them can drift from what
//! bell-run parses. The way ripgrep keeps its flags: bell-run itself parses with no dependency.

/// One `--long [VALUE]` option of a command.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    /// Without its dashes.
    pub long: &'static str,
    /// What its value is called; `None` for a switch.
    pub value: Option<&'static str>,
    /// What it does, one sentence, wrapped when printed.
    pub help: &'static str,
}

/// One command: `bell-run NAME`.
#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    /// One line for the man page's NAME and a completion's description.
    pub summary: &'static str,
    /// The usage line(s), after `usage: `.
    pub usage: &'static str,
    /// Its one positional argument, when it takes one.
    pub operand: Option<&'static str>,
    /// What it does, in paragraphs.
    pub description: &'static str,
    /// Its options, in the order help prints them, in groups that several commands share.
    pub flags: &'static [&'static [Flag]],
    /// What its exit codes mean, when it says more than the table of all.
    pub exit: Option<&'static str>,
    /// Whether its output has the resource markers ([`MARKERS`]).
    pub markers: bool,
}

impl Command {
    pub fn flag(&self, long: &str) -> Option<&'static Flag> {
        self.options().find(|f| f.long == long)
    }

    /// Every option, in order.
    pub fn options(&self) -> impl Iterator<Item = &'static Flag> {
        self.flags.iter().flat_map(|group| group.iter())
    }

    /// `bell-run NAME --help`: the usage, what it does, its options, its exit codes.
    pub fn help(&self) -> String {
        let mut text = format!("usage: {}\n\n{}", self.usage, self.description);
        if self.options().next().is_some() {
            text.push_str("\n\noptions:\n");
            text.push_str(&options(self.options()));
        }
        if let Some(exit) = self.exit {
            text.push_str("\n\nexit: ");
            text.push_str(exit);
        }
        if self.markers {
            text.push_str("\n\n");
            text.push_str(MARKERS);
        }
        text
    }
}

/// The command called `name`.
pub fn command(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// Where an option's help begins: its name and value on the same line when they fit.
const HELP_COLUMN: usize = 21;
const WIDTH: usize = 95;

/// The options, one per line (`  --root DIR         the root ...`), each help wrapped at
/// [`WIDTH`] and indented to [`HELP_COLUMN`].
fn options<'a>(flags: impl Iterator<Item = &'a Flag>) -> String {
    let mut lines: Vec<String> = Vec::new();
    for flag in flags {
        let head = match flag.value {
            Some(value) => format!("  --{} {value}", flag.long),
            None => format!("  --{}", flag.long),
        };
        let mut line = if head.len() < HELP_COLUMN - 1 {
            format!("{head:HELP_COLUMN$}")
        } else {
            lines.push(head);
            " ".repeat(HELP_COLUMN)
        };
        let mut fresh = true;
        for word in flag.help.split(' ') {
            if !fresh && line.len() + 1 + word.len() > WIDTH {
                lines.push(std::mem::replace(&mut line, " ".repeat(HELP_COLUMN)));
                fresh = true;
            }
            if !fresh {
                line.push(' ');
            }
            line.push_str(word);
            fresh = false;
        }
        lines.push(line);
    }
    lines.join("\n")
}

pub const USAGE: &str = "\
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
pub const MARKERS: &str = "\
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

const ROOT: Flag = Flag {
    long: "root",
    value: Some("DIR"),
    help: "the root to act on (default /); any other root is offline",
};

const TIMEOUT: Flag = Flag {
    long: "timeout",
    value: Some("SECS"),
    help: "bound each generated apply, revert and trigger script (default 900); exec scripts carry their own timeout",
};

const IDENTITY: Flag = Flag {
    long: "identity",
    value: Some("FILE"),
    help: "the host's key (OpenSSH's private key format, 0600) that opens the bundle's sealed secrets and signs its reports, for an image whose own key is not in its root yet; by default the root's SSH host key or /etc/bell/identity.key",
};

const JSON: Flag = Flag {
    long: "json",
    value: None,
    help: "one JSON report on stdout",
};

const STORE_CA: Flag = Flag {
    long: "store-ca",
    value: Some("FILE"),
    help: "the CA an etcds:// store's (or the gateway's) certificates are verified against (default: the system's, /etc/ssl/certs/ca-certificates.crt)",
};

const STORE_CERT: Flag = Flag {
    long: "store-cert",
    value: Some("FILE"),
    help: "a client certificate, for members that ask (its key with --store-key)",
};

const STORE_KEY: Flag = Flag {
    long: "store-key",
    value: Some("FILE"),
    help: "the client certificate's key (0600)",
};

const STORE_USER: Flag = Flag {
    long: "store-user",
    value: Some("NAME"),
    help: "the etcd user this host is (host/FLEET/HOST, from `bellc store roles`); etcds:// only",
};

const STORE_PASSWORD_FILE: Flag = Flag {
    long: "store-password-file",
    value: Some("FILE"),
    help: "the etcd user's password's file (0600, root's)",
};

const TIMINGS: Flag = Flag {
    long: "timings",
    value: None,
    help: "say where the time went, by phase and by kind",
};

/// How an `etcds://` store (or the gateway) is reached: its CA, a client certificate, the
/// etcd user.
const STORE_ACCESS: &[Flag] = &[
    STORE_CA,
    STORE_CERT,
    STORE_KEY,
    STORE_USER,
    STORE_PASSWORD_FILE,
];

/// What a filed report says besides the run: how long the host's alive key lasts, the host
/// and the release; and the run's metrics file.
const REPORTED: &[Flag] = &[ALIVE_TTL, HOST, RELEASE, METRICS];

/// `--store` where the command needs no more said of it than that it is the fleet's.
const FLEET_STORE: Flag = Flag {
    long: "store",
    value: Some("etcd://HOST:PORT[,HOST:PORT...]"),
    help: "the fleet's store (etcds:// for TLS)",
};

/// `--gateway` where the command needs no more said of it than how it is used.
const SIGNED_GATEWAY: Flag = Flag {
    long: "gateway",
    value: Some("https://HOST:PORT[,HOST:PORT...]"),
    help: "the fleet's gateway instead of --store, each request signed with the host's identity",
};

/// `--root` of a command that only reads.
const READ_ROOT: Flag = Flag {
    long: "root",
    value: Some("DIR"),
    help: "the root to read (default /)",
};

const REPORT: Flag = Flag {
    long: "report",
    value: Some("DIR|etcd://HOST:PORT[,HOST:PORT...]"),
    help: "file a report of the run there (the fleet's status reads it); etcds:// for TLS",
};

const ALIVE_TTL: Flag = Flag {
    long: "alive-ttl",
    value: Some("SECS"),
    help: "how long the host's alive key outlives the run (etcd; default 2700, >= 10)",
};

const HOST: Flag = Flag {
    long: "host",
    value: Some("NAME"),
    help: "the host this root is (default: its host name)",
};

const RELEASE: Flag = Flag {
    long: "release",
    value: Some("VERSION"),
    help: "the release this bundle was applied for, kept for later reports",
};

const METRICS: Flag = Flag {
    long: "metrics",
    value: Some("FILE"),
    help: "write Prometheus textfile metrics of the run",
};

const STORE: Flag = Flag {
    long: "store",
    value: Some("etcd://HOST:PORT[,HOST:PORT...]"),
    help: "the fleet's store: desired map, rollout slots, reports (etcds:// for TLS, with --store-ca, --store-cert and --store-key)",
};

const GATEWAY: Flag = Flag {
    long: "gateway",
    value: Some("https://HOST:PORT[,HOST:PORT...]"),
    help: "the fleet's store through its gateway (`bellc gateway`) instead of --store: each request signed with the host's identity, no store user or password (--store-ca names the gateway's CA)",
};

const SOURCE: Flag = Flag {
    long: "source",
    value: Some("URL|DIR"),
    help: "a build output served over http:// or https://, or a directory",
};

const SOURCE_CA: Flag = Flag {
    long: "source-ca",
    value: Some("FILE"),
    help: "the CA an https:// source's certificate is verified against (default: the system's)",
};

const TRUST: Flag = Flag {
    long: "trust",
    value: Some("FILE"),
    help: "minisign public keys (default ROOT/etc/bell/trusted.pub when present)",
};

const LOCK_PREFIX: Flag = Flag {
    long: "lock-prefix",
    value: Some("PREFIX"),
    help: "where the rollout semaphores live (airlock's is com.coreos.airlock)",
};

const FLEET: Flag = Flag {
    long: "fleet",
    value: Some("NAME"),
    help: "the fleet this host belongs to (default: the one it accepted last)",
};

const FETCH_TIMEOUT: Flag = Flag {
    long: "fetch-timeout",
    value: Some("SECS"),
    help: "bound the whole fetch, first connection to last byte (default 300)",
};

const WAIT: Flag = Flag {
    long: "wait",
    value: Some("SECS"),
    help: "with --gateway: after the pull, wait at the gateway for the store to change what it decided on (the release, the host's bundle, its hold, the slot it waits for) and pull again when it does, until SECS pass without a change (a new release reaches the host in a second or two)",
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "apply",
        summary: "apply a bundle to this host or an image root",
        usage: "bell-run apply BUNDLE [options]",
        operand: Some("BUNDLE"),
        description: "Applies a bundle (a directory `bellc build` wrote: OUT/hosts/NAME or OUT/bundles/ID) to this
host or to an image root: verifies every file against the manifest, switches the managed files
at once, reverts what the applied bundle had and this one has not, runs each resource's apply
script in dependency order, then the health probes. Nothing changes when it refuses.",
        flags: &[
            &[
                ROOT,
                Flag {
                    long: "offline",
                    value: None,
                    help: "run as on an image: start nothing, load nothing (BELL_OFFLINE=1)",
                },
                Flag {
                    long: "dry-run",
                    value: None,
                    help: "print the plan (every resource and file action) and change nothing",
                },
                JSON,
                TIMINGS,
                IDENTITY,
                TIMEOUT,
                REPORT,
            ],
            STORE_ACCESS,
            REPORTED,
        ],
        exit: Some("0 applied, 1 refused (nothing changed), 3 applied with failures, 4 applied but a
health probe fails"),
        markers: true,
    },
    Command {
        name: "check",
        summary: "compare the host with the applied generation and find drift",
        usage: "bell-run check [options]",
        operand: None,
        description: "Compares the host with the applied generation: every managed file (content, mode, owner) and
each resource's check script. Changes nothing; takes the lock, so it never reads a half-applied
host. The next apply puts back what it finds (`*` drifted → put back).",
        flags: &[
            &[
                ROOT,
                Flag {
                    long: "offline",
                    value: None,
                    help: "check as on an image (live-only checks are skipped)",
                },
                JSON,
                IDENTITY,
                TIMEOUT,
                REPORT,
            ],
            STORE_ACCESS,
            REPORTED,
        ],
        exit: Some("0 in sync, 1 nothing applied or a check could not tell, 2 drift found, 4 a health
probe fails"),
        markers: false,
    },
    Command {
        name: "pull",
        summary: "fetch the release the fleet names for this host, verify it and apply it",
        usage: "bell-run pull --source http://HOST[:PORT]/PATH/|DIR [options]",
        operand: None,
        description: "One reconciliation step: fetches the release the source (or, with --store, the fleet's
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
again, reports `reverted` (exit 3) and refuses that release from then on.",
        flags: &[
            &[
                SOURCE,
                SOURCE_CA,
                ROOT,
                TRUST,
                STORE,
                GATEWAY,
                LOCK_PREFIX,
                FLEET,
                FETCH_TIMEOUT,
                WAIT,
                Flag {
                    long: "offline",
                    value: None,
                    help: "apply as on an image",
                },
                JSON,
                IDENTITY,
                TIMEOUT,
                REPORT,
            ],
            STORE_ACCESS,
            &[
                ALIVE_TTL,
                HOST,
                METRICS,
            ],
        ],
        exit: Some("0 applied, 1 refused (nothing changed), 3 applied with failures, 4 unhealthy, 10 waits
for a slot of its rollout group"),
        markers: false,
    },
    Command {
        name: "pending",
        summary: "ask the fleet's store whether a new release waits for this host",
        usage: "bell-run pending (--store etcd://HOST:PORT | --gateway https://HOST:PORT) [options]",
        operand: None,
        description: "Asks the fleet's store whether the published release wants another bundle on this host.
Changes nothing. --store or --gateway (with its --store-ca and --identity), --fleet and --host
default to what the pulling timer was installed with (install-timer's record, or else
BELL_RUN_PULL in the package's /etc/default/bell-run).",
        flags: &[
            &[
                FLEET_STORE,
                SIGNED_GATEWAY,
                Flag {
                    long: "identity",
                    value: Some("FILE"),
                    help: "the host's key for --gateway (default: its SSH host key, else bell's own)",
                },
            ],
            STORE_ACCESS,
            &[
                HOST,
                Flag {
                    long: "fleet",
                    value: Some("NAME"),
                    help: "the fleet this host belongs to",
                },
                Flag {
                    long: "root",
                    value: Some("DIR"),
                    help: "the root whose applied bundle is compared (default /)",
                },
                Flag {
                    long: "json",
                    value: None,
                    help: "one JSON answer on stdout",
                },
            ],
        ],
        exit: Some("0 up to date, 1 refused, 10 a release this host has not applied is pending"),
        markers: false,
    },
    Command {
        name: "register",
        summary: "file this machine's facts with the fleet, for an operator to accept",
        usage: "bell-run register --store etcd://HOST:PORT --fleet NAME [options]",
        operand: None,
        description: "Files this host's facts (interfaces with their MAC and IP addresses, CPUs, memory, disks with
size, model and serial, the OS release, the kernel) under the fleet's discovery prefix,
signed by its identity (made first when it has none), for an operator to accept with
`bellc hosts accept`. Files again only when a fact or the identity changed. The facts are read
from ROOT's sys, proc and etc/os-release, never through a link out of ROOT.",
        flags: &[
            &[
                Flag {
                    long: "store",
                    value: Some("etcd://HOST:PORT[,HOST:PORT...]"),
                    help: "the fleet's store (etcds:// for TLS, with the options below as for `pull`)",
                },
                SIGNED_GATEWAY,
                Flag {
                    long: "fleet",
                    value: Some("NAME"),
                    help: "the fleet it asks to join",
                },
                Flag {
                    long: "host",
                    value: Some("NAME"),
                    help: "the name it asks for (default: its host name)",
                },
                Flag {
                    long: "root",
                    value: Some("DIR"),
                    help: "the root whose facts are read (default /)",
                },
                Flag {
                    long: "json",
                    value: None,
                    help: "what was filed, as JSON on stdout",
                },
                Flag {
                    long: "identity",
                    value: Some("FILE"),
                    help: "the host's key (default: its SSH host key, else bell's own, made when it has none)",
                },
            ],
            STORE_ACCESS,
        ],
        exit: Some("0 registered (or registered already), 1 refused"),
        markers: false,
    },
    Command {
        name: "status",
        summary: "show the applied generation and how its apply ended",
        usage: "bell-run status [--root DIR] [--json]",
        operand: None,
        description: "The applied generation, when and how its apply ended, every resource's result, reverts and
triggers still owed, and whether an interrupted file switch is pending. Changes nothing.",
        flags: &[
            &[
                READ_ROOT,
                Flag {
                    long: "json",
                    value: None,
                    help: "the state as JSON on stdout",
                },
            ],
        ],
        exit: None,
        markers: false,
    },
    Command {
        name: "generations",
        summary: "list the generations bell-run keeps",
        usage: "bell-run generations [--root DIR] [--json]",
        operand: None,
        description: "Lists the generations (bundles this root applied) whose copy bell-run keeps, oldest first by
their first apply: id, when last applied, how that ended, and the release it was for. Any of
them can be applied again with `bell-run rollback --to ID`. bell-run keeps the applied one and
the last 5 others. Changes nothing.",
        flags: &[
            &[
                READ_ROOT,
                Flag {
                    long: "json",
                    value: None,
                    help: "the list as JSON on stdout (full ids, unix times)",
                },
            ],
        ],
        exit: None,
        markers: false,
    },
    Command {
        name: "rollback",
        summary: "apply a kept generation again",
        usage: "bell-run rollback [--to GENERATION] [options]",
        operand: None,
        description: "Applies a kept generation again from bell-run's own copy (the source bundle may be gone), as
`apply` would. Without --to it goes to the generation first applied before the applied one,
so a second rollback goes further back, as NixOS's does; `bell-run generations` lists them.",
        flags: &[
            &[
                Flag {
                    long: "to",
                    value: Some("GENERATION"),
                    help: "the generation: its bundle id, or the first characters of it",
                },
                ROOT,
                Flag {
                    long: "offline",
                    value: None,
                    help: "apply as on an image",
                },
                Flag {
                    long: "dry-run",
                    value: None,
                    help: "print the plan and change nothing",
                },
                JSON,
                TIMINGS,
                IDENTITY,
                TIMEOUT,
                REPORT,
            ],
            STORE_ACCESS,
            REPORTED,
        ],
        exit: Some("as `apply`; 1 when there is no such generation (nothing changed)"),
        markers: true,
    },
    Command {
        name: "remove",
        summary: "take bell off this host or image root",
        usage: "bell-run remove --yes [options]
       bell-run remove --dry-run [options]",
        operand: None,
        description: "Takes bell off this host or image root: reverts every resource bell manages (in reverse
order, as a bundle without them would), gives every file bell took over its original back and
removes the files bell created, then disables bell-run's units (and removes those
install-timer wrote; the Debian package's stay, dpkg's to remove) and removes its own directory
(ROOT/var/lib/bell: state, logs, kept generations, originals). Accounts bell created are
expired and locked by their revert, not deleted (a home may hold someone's work); they are
named. When a revert fails, bell's state stays, so the removal can be run again.",
        flags: &[
            &[
                Flag {
                    long: "yes",
                    value: None,
                    help: "do it",
                },
                Flag {
                    long: "dry-run",
                    value: None,
                    help: "print what would be reverted, restored and removed; change nothing",
                },
                ROOT,
                Flag {
                    long: "offline",
                    value: None,
                    help: "revert as on an image",
                },
                JSON,
                TIMEOUT,
            ],
        ],
        exit: Some("0 removed (or planned), 1 refused (nothing changed), 3 a revert failed (bell stays),
64 neither --yes nor --dry-run"),
        markers: false,
    },
    Command {
        name: "verify",
        summary: "check a bundle's integrity without a root",
        usage: "bell-run verify BUNDLE [--json]",
        operand: Some("BUNDLE"),
        description: "Checks a bundle's integrity without a root: the manifest is canonical and its sha256 is the
bundle id, and every file is listed with its size and sha256, with nothing else beside them.",
        flags: &[
            &[
                Flag {
                    long: "json",
                    value: None,
                    help: "the result as JSON on stdout",
                },
            ],
        ],
        exit: Some("0 verified, 1 refused"),
        markers: false,
    },
    Command {
        name: "identity",
        summary: "print this host's identity, the key its reports are signed with",
        usage: "bell-run identity [--root DIR] [--init] [--host NAME] [--json]",
        operand: None,
        description: "Prints this host's identity, the Ed25519 key every report it files is signed with, as one line
of OpenSSH's format (`ssh-ed25519 AAAA… HOST`): the value of its host entry's `identity=` in the
spec. The key is the SSH host key (/etc/ssh/ssh_host_ed25519_key) when there is one, else bell's own (/etc/bell/identity.key, 0600).
Changes nothing unless --init is given.",
        flags: &[
            &[
                ROOT,
                Flag {
                    long: "init",
                    value: None,
                    help: "make bell's own key when the root has neither (once; never replaced)",
                },
                Flag {
                    long: "host",
                    value: Some("NAME"),
                    help: "the name to print after the key (default: ROOT/etc/hostname)",
                },
                Flag {
                    long: "json",
                    value: None,
                    help: "identity, fingerprint, host, key file and whether it was made now",
                },
            ],
        ],
        exit: Some("0 printed, 1 refused (no key without --init; an unreadable or group-readable key)"),
        markers: false,
    },
    Command {
        name: "recover",
        summary: "complete or undo a file switch a crash interrupted",
        usage: "bell-run recover [--root DIR]",
        operand: None,
        description: "Completes or undoes a file switch that a crash interrupted, and nothing else (`apply` does this
by itself first).",
        flags: &[
            &[
                ROOT,
            ],
        ],
        exit: Some("0 done (or nothing to do), 1 refused"),
        markers: false,
    },
    Command {
        name: "live",
        summary: "follow the providers of this host's live files and publish its health",
        usage: "bell-run live --store etcd[s]://HOST:PORT|--gateway https://HOST:PORT [options]",
        operand: None,
        description: "The live layer's long-running mode, beside the pull timer (install-timer with an etcd --store
or a --gateway writes its unit, bell-run-live.service). On a provider of a service some live
file follows, it runs the health probes every --every seconds and files the host's health,
signed, when what fails changes. On a consumer it reads its live files' providers (a long-poll
at the gateway, a read every --every seconds from etcd) and, once a file's ready set has been
still for its `wait min` (at the latest `wait max` after it changed), renders it and runs its
apply, which puts it in place and runs its reload. It follows the applied generation, read
again each round, and takes the host's lock for each probe and each apply, so it never
interleaves with a pull.",
        flags: &[
            &[
                FLEET_STORE,
                SIGNED_GATEWAY,
                ROOT,
                Flag {
                    long: "host",
                    value: Some("NAME"),
                    help: "the host's name (default: the root's /etc/hostname)",
                },
                Flag {
                    long: "every",
                    value: Some("SECS"),
                    help: "how often it probes and reads without a gateway (default 2)",
                },
                IDENTITY,
            ],
            STORE_ACCESS,
        ],
        exit: Some("runs until stopped; 1 when the store cannot be opened"),
        markers: false,
    },
    Command {
        name: "install-timer",
        summary: "write systemd units that pull or re-apply periodically, for a custom layout",
        usage: "bell-run install-timer [--root DIR] [--exec PATH] [--interval SPAN] [--source SRC ...]",
        operand: None,
        description: "The Debian package installs bell-run's units under /usr/lib/systemd/system, their options in
/etc/default/bell-run; install-timer is for a layout of your own. It writes bell-run.service
and bell-run.timer into ROOT/etc/systemd/system (which take precedence); enable them with
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
remove` takes them away.",
        flags: &[
            &[
                Flag {
                    long: "root",
                    value: Some("DIR"),
                    help: "the root to write into (default /)",
                },
                Flag {
                    long: "exec",
                    value: Some("PATH"),
                    help: "bell-run's path on the host (default /usr/local/sbin/bell-run)",
                },
                Flag {
                    long: "interval",
                    value: Some("SPAN"),
                    help: "a systemd time span (default 15min)",
                },
                SOURCE,
                SOURCE_CA,
                TRUST,
                STORE,
                GATEWAY,
                WAIT,
                FLEET,
                HOST,
                REPORT,
            ],
            STORE_ACCESS,
            &[
                ALIVE_TTL,
                METRICS,
                TIMEOUT,
                FETCH_TIMEOUT,
                LOCK_PREFIX,
            ],
        ],
        exit: Some("0 written, 1 refused, 64 a bad option"),
        markers: false,
    },
];

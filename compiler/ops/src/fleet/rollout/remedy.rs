//! What puts a refused rollout right. Every refusal of the controller names one, as a value
//! rather than words in its message, so the command line can print it as complete commands
//! (this OUT, this store, this key) and a test can hold every refusal to having one.

/// The way out of a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// `--resume` continues the rollout, `--abort` takes it back.
    ResumeOrAbort,
    /// Only `--abort`: an abort is underway, or OUT's release is no longer the rollout's.
    Abort,
    /// The same command without `--resume`.
    Start,
    /// The store's unfinished rollout was begun from another build output: finish it there.
    FromItsOwnOut,
    /// OUT is not a build output (or not a whole one): build into it.
    Build,
    /// A release OUT keeps is missing, unsigned or not the one the key signed: put back the
    /// copy the controller signed there (only a backup of OUT has it: the build output's copy
    /// has an older sequence, which the controller refuses as a replay).
    Restore { version: String },
    /// Going back after a finished rollout is a rollout of the earlier spec's build.
    RollOutEarlier,
    /// The spec's `fleet` is not a name the store can hold.
    RenameFleet,
    /// A command to run as it is (as etcd's root), then the same rollout command again.
    Run(String),
}

/// How the controller was called, for remedies written as whole commands.
pub struct Call {
    /// OUT as the user gave it, quoted for a shell.
    pub out: String,
    /// `--store URL` and the access flags, quoted.
    pub store: String,
    /// `--sign-key PATH`, quoted, or empty for a fleet whose releases are not signed.
    pub key: String,
    /// The fleet, when known (the store's status command names it).
    pub fleet: Option<String>,
}

impl Call {
    /// The placeholders the library's own help uses, for callers that have no command line.
    pub fn placeholder() -> Call {
        Call {
            out: "OUT".into(),
            store: "--store URL".into(),
            key: "--sign-key KEY".into(),
            fleet: None,
        }
    }

    fn rollout(&self, out: &str, what: &str) -> String {
        let mut text = format!("bellc rollout {out} {}", self.store);
        if !self.key.is_empty() {
            text.push(' ');
            text.push_str(&self.key);
        }
        if !what.is_empty() {
            text.push(' ');
            text.push_str(what);
        }
        text
    }

    /// `bellc rollout OUT --store … [--sign-key …] WHAT`, this call's command with `what`.
    pub fn here(&self, what: &str) -> String {
        self.rollout(&self.out, what)
    }

    fn build(&self) -> String {
        let key = if self.key.is_empty() {
            "--sign-key KEY"
        } else {
            &self.key
        };
        format!("bellc build SPEC -o {} {key}", self.out)
    }

    fn status(&self) -> String {
        let fleet = self.fleet.as_deref().unwrap_or("FLEET");
        format!("bellc rollout --status {} --fleet {fleet}", self.store)
    }
}

impl Remedy {
    /// The help line: what to do, with each command whole.
    pub fn help(&self, call: &Call) -> String {
        match self {
            Remedy::ResumeOrAbort => format!(
                "continue: `{}`; take back: `{}`",
                call.here("--resume"),
                call.here("--abort")
            ),
            Remedy::Abort => format!("take it back: `{}`", call.here("--abort")),
            Remedy::Start => format!("start one: `{}`", call.here("")),
            Remedy::FromItsOwnOut => format!(
                "`{}` says which release it is; from the build output of that release, \
                 continue: `{}`, or take back: `{}`",
                call.status(),
                call.rollout("THAT_OUT", "--resume"),
                call.rollout("THAT_OUT", "--abort")
            ),
            Remedy::Build => format!(
                "build the fleet's spec into it: `{}`, then run this command again",
                call.build()
            ),
            Remedy::Restore { version } => format!(
                "put release {}'s file and signature back as the controller signed them, from \
                 a backup of OUT (a build output's copy is older than what the controller \
                 gave): `cp -p BACKUP/releases/{version}.json \
                 BACKUP/releases/{version}.json.minisig {}/releases/`, then run this command \
                 again (`bellc releases DIR` lists what a directory keeps)",
                bell_bundle::short_id(version),
                call.out,
            ),
            Remedy::RollOutEarlier => format!(
                "to go back, build the earlier spec (`{}`) and roll that out: `{}`",
                call.build(),
                call.here("")
            ),
            Remedy::RenameFleet => format!(
                "give the spec's `fleet` a name of letters, digits, `-`, `_` and `.`, then \
                 `{}`",
                call.build()
            ),
            Remedy::Run(command) => {
                format!(
                    "`{command}`, then run this command again: `{}`",
                    call.here("")
                )
            }
        }
    }
}

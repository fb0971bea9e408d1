//! The disruption budget as a pull meets it: the slot of its rollout group a host takes before
//! it changes anything and gives back once it is healthy again (`bell_store::semaphore`), and
//! which group that was, remembered in `ROOT/var/lib/bell/slot.json` so that the next pull can
//! read the group's semaphore in its first request (see `bell_store::prefetch`).

use crate::context::Refusal;
use crate::rootfs::{self, Root};
use crate::state;
use bell_bundle::Release;
use bell_store::prefetch::Prefetched;
use bell_store::semaphore::{self, Slot};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

/// The host's rollout group in the fleet store, and how many of it may change at once.
pub struct Budget<'a> {
    etcd: &'a bell_store::Etcd,
    pub prefix: String,
    pub group: String,
    slots: u32,
    key: Option<crate::identity::HostKey>,
    /// The group's semaphore as the pull's first request read it.
    read: Option<&'a Prefetched>,
    /// A slot was asked for in this pull: what `read` says of the semaphore is older than that.
    asked: Cell<bool>,
}

/// Which group a host's last pull was in, of which store.
#[derive(Serialize, Deserialize, PartialEq, Eq)]
struct Remembered {
    store: String,
    prefix: String,
    group: String,
}

const REMEMBERED_FILE: &str = "slot.json";

/// The lock prefix and group the host's last pull from `store` was in, when it remembers one.
pub fn remembered(root: &Root, store: &str) -> Option<(String, String)> {
    let text = rootfs::read_record(&root.bell_dir().join(REMEMBERED_FILE))
        .ok()
        .flatten()?;
    let known: Remembered = serde_json::from_str(&text).ok()?;
    (known.store == store).then_some((known.prefix, known.group))
}

impl<'a> Budget<'a> {
    pub fn of(
        etcd: &'a bell_store::Etcd,
        lock_prefix: Option<&str>,
        release: &Release,
        entry: &bell_bundle::ReleaseHost,
        key: Option<crate::identity::HostKey>,
        read: Option<&'a Prefetched>,
    ) -> Budget<'a> {
        // A release from before bellc wrote the budget: one group, one host at a time.
        let (group, slots) = release.rollout.as_ref().map_or_else(
            || (bell_bundle::DEFAULT_GROUP.to_string(), 1),
            |rollout| rollout.group_of(entry),
        );
        let prefix = lock_prefix
            .map(str::to_string)
            .unwrap_or_else(|| semaphore::default_prefix(&release.fleet));
        Budget {
            etcd,
            prefix,
            group,
            slots,
            key,
            read,
            asked: Cell::new(false),
        }
    }

    /// Remembers this group for the next pull, when it is not the one remembered already.
    pub fn remember(&self, root: &Root) {
        let store = self.etcd.url();
        if remembered(root, &store).as_ref() == Some(&(self.prefix.clone(), self.group.clone())) {
            return;
        }
        let known = Remembered {
            store,
            prefix: self.prefix.clone(),
            group: self.group.clone(),
        };
        let text = serde_json::to_string(&known).unwrap_or_default();
        let path = root.bell_dir().join(REMEMBERED_FILE);
        // Only a guess for the next pull's first request: one that is not kept costs a read.
        if let Err(e) = rootfs::write_atomic(&path, text.as_bytes()) {
            errln!("warning: cannot write {}: {e}", path.display());
        }
    }

    /// A slot, or a refusal that says the host waits for one.
    pub fn take(&self, host: &str) -> Result<String, Refusal> {
        self.asked.set(true);
        let slot = semaphore::acquire(
            self.etcd,
            &self.prefix,
            &self.group,
            host,
            u64::from(self.slots),
            state::now(),
            self.key.as_ref().map(|k| &k.key),
        )
        .map_err(|e| {
            Refusal::new(format!("cannot take a slot of group `{}`: {e}", self.group))
                .help("nothing was changed; the next pull tries again")
        })?;
        match slot {
            Slot::Taken => Ok(format!("took a slot of group `{}`", self.group)),
            Slot::Held { .. } => Ok(format!("holds a slot of group `{}` already", self.group)),
            Slot::Full { total, holders } => Err(Refusal::new(format!(
                "waiting for a slot: all {total} of group `{}` are held ({})",
                self.group,
                holders.join(", ")
            ))
            .help(
                "nothing was changed; a slot comes free when its holder is healthy after its \
                 apply, or with `bellc lock release HOST`",
            )
            .waiting()),
        }
    }

    /// Gives back the host's slot, if it holds one: `Ok(true)` when it did.
    pub fn give_back(&self, host: &str) -> Result<bool, String> {
        let read = self.read.filter(|_| !self.asked.get());
        semaphore::release_with(self.etcd, &self.prefix, &self.group, host, read)
    }
}

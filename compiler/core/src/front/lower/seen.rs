//! The hosts declared so far, found by name and by address, for the duplicate checks.
//!
//! An inventory declares a million hosts and each is looked up once. The tables hold a host's
//! place in `spec.hosts` and where it was written, not copies of its name and address: with
//! String keys and SipHash the checks were half of reading a million-host spec, most of it
//! hashing, allocating the copies and faulting in the pages that held them.

use crate::source::Span;
use crate::spec::Host;
use hashbrown::HashTable;
use std::hash::BuildHasher;

#[derive(Default)]
pub(super) struct SeenHosts {
    /// Seeded per run: names and addresses come from files a host may have had a hand in
    /// (`kubectl get nodes`), so no one can choose names that collide.
    hasher: foldhash::fast::RandomState,
    /// A host's index in `spec.hosts` and where its name is written.
    names: HashTable<(usize, Span)>,
    /// The index of the first host with an address, and where that address is written.
    addresses: HashTable<(usize, Span)>,
}

/// The hash a host's name is kept under; `hash_one` of the same `str` finds it.
fn name_hash(hasher: &foldhash::fast::RandomState, host: &Host) -> u64 {
    hasher.hash_one(host.name.as_str())
}

/// The hash a host's address is kept under (only hosts with one are in the table).
fn address_hash(hasher: &foldhash::fast::RandomState, host: &Host) -> u64 {
    hasher.hash_one(host.address.as_deref().unwrap_or_default())
}

impl SeenHosts {
    /// Room for `additional` more hosts, so that a large inventory grows each table once.
    pub(super) fn reserve(&mut self, hosts: &[Host], additional: usize) {
        let hasher = &self.hasher;
        self.names
            .reserve(additional, |&(i, _)| name_hash(hasher, &hosts[i]));
        self.addresses
            .reserve(additional, |&(i, _)| address_hash(hasher, &hosts[i]));
    }

    /// Where the host named `name` was declared, if one was.
    pub(super) fn named(&self, hosts: &[Host], name: &str) -> Option<Span> {
        let hash = self.hasher.hash_one(name);
        self.names
            .find(hash, |&(i, _)| hosts[i].name == name)
            .map(|&(_, span)| span)
    }

    /// The first host declared with `address`, and where it wrote it.
    pub(super) fn with_address<'h>(
        &self,
        hosts: &'h [Host],
        address: &str,
    ) -> Option<(&'h str, Span)> {
        let hash = self.hasher.hash_one(address);
        self.addresses
            .find(hash, |&(i, _)| hosts[i].address.as_deref() == Some(address))
            .map(|&(i, span)| (hosts[i].name.as_str(), span))
    }

    /// Records `hosts[index]`, whose name no host had, written at `name`; and, when
    /// `new_address` says where, its address, which the caller found no host had (asking
    /// `with_address` again here would look every address up twice).
    pub(super) fn add(
        &mut self,
        hosts: &[Host],
        index: usize,
        name: Span,
        new_address: Option<Span>,
    ) {
        let hasher = &self.hasher;
        let host = &hosts[index];
        self.names
            .insert_unique(name_hash(hasher, host), (index, name), |&(i, _)| {
                name_hash(hasher, &hosts[i])
            });
        if let (Some(_), Some(span)) = (&host.address, new_address) {
            self.addresses
                .insert_unique(address_hash(hasher, host), (index, span), |&(i, _)| {
                    address_hash(hasher, &hosts[i])
                });
        }
    }
}

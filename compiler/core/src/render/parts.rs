//! Rendering a bundle a part at a time, each part once for every host that has the same inputs
//! for it.
//!
//! A fleet's distinct bundles are mostly alike: a host with an override of its own differs from
//! its neighbours in one or two resources and shares the rest, by identity (models share a
//! resource until a layer changes it). A part (the sysctl keys, or one kind's resources, see
//! [`Part`]) whose kind renders from its resources and the target alone is rendered once into a
//! builder of its own and remembered by those inputs; the next bundle with the same inputs gets
//! a copy merged in. Rendering the parts anew was three quarters of rendering a million hosts
//! with ten thousand distinct bundles.
//!
//! What the merged bundle holds is what rendering every part into it would have given: a part is
//! keyed also by the secrets declared before it (which mark what it adds), a part that said
//! anything (a warning, an error) is not remembered, and a part whose path another part took
//! already is a conflict, for which the whole bundle is rendered again without the memo, so that
//! the conflict is reported by the kind that found it. The test `parts_render_as_a_whole` builds
//! every example and generator shape both ways and compares the bytes.

use super::{BundleBuilder, HostContext, Renderer};
use crate::diagnostic::Diagnostics;
use crate::resolve::{ResolvedResource, SysctlValue};
use crate::spec::Kind;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One part of a host's bundle, rendered on its own: the sysctl keys (the language's own node,
/// a map rather than a kind of the registry), or one kind's resources. A bundle is its parts
/// rendered in the order of `Part::all` (with the kinds: its methods are theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Sysctl,
    Of(Kind),
}

/// What a part reads of a host's model, when that and the target are all it reads (see
/// `ResourceKind::render_reads`). Hosts whose parts have the same inputs (the same shared
/// resources, by identity: models share them until a layer changes one) get the same part.
#[derive(Debug, Default)]
pub struct PartInputs {
    pub resources: Vec<Arc<ResolvedResource>>,
    pub sysctl: Option<Arc<BTreeMap<String, SysctlValue>>>,
}

/// Parts rendered, by their inputs.
#[derive(Default)]
pub(super) struct PartMemo {
    table: Mutex<Table>,
    reused: AtomicUsize,
}

#[derive(Default)]
struct Table {
    parts: foldhash::HashMap<Key, Arc<Remembered>>,
    weight: usize,
    /// Hashes of keys rendered once and not kept. A part is kept when it is rendered the
    /// second time: in a fleet where one host in a hundred has an override of its own, most
    /// parts rendered are used once, and keeping each filled the table to its limit every
    /// two thousand bundles, after which every shared part was rendered again.
    seen_once: foldhash::HashSet<u64>,
}

/// What a part is rendered from. The resources are named by address: [`Remembered`] holds them,
/// so that no other resource is given the address while the key is in the table.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    part: usize,
    target: String,
    resources: Vec<usize>,
    sysctl: usize,
    secrets: Vec<String>,
}

struct Remembered {
    built: BundleBuilder,
    _inputs: PartInputs,
}

/// How much the table holds (roughly, see `BundleBuilder::weight`) before it starts again: a
/// fleet whose every host has a part of its own would otherwise keep every host's.
const MEMO_LIMIT: usize = 64 << 20;

/// How many keys seen once are told apart before they are forgotten (8 bytes each).
const SEEN_ONCE_LIMIT: usize = 1 << 20;

impl PartMemo {
    /// How many parts were taken from the memo instead of rendered.
    pub(super) fn reused(&self) -> usize {
        self.reused.load(Ordering::Relaxed)
    }

    /// Renders every part of `cx`'s bundle into `out` (a new builder), as `Kind::render_host`
    /// would.
    pub(super) fn render_host(
        &self,
        r: &Renderer,
        cx: &HostContext,
        out: &mut BundleBuilder,
        diags: &mut Diagnostics,
    ) {
        let mut said = Diagnostics::new();
        let mut reused = 0;
        for part in Part::all() {
            let Some(inputs) = part.inputs(&cx.host.model) else {
                part.render(r, cx, out, &mut said);
                continue;
            };
            let key = Key {
                part: part.index(),
                target: cx.target.name.clone(),
                resources: inputs
                    .resources
                    .iter()
                    .map(|r| Arc::as_ptr(r) as usize)
                    .collect(),
                sysctl: inputs
                    .sysctl
                    .as_ref()
                    .map_or(0, |s| Arc::as_ptr(s) as usize),
                secrets: out.secrets().to_vec(),
            };
            let found = self.lock().parts.get(&key).cloned();
            let merged = match found {
                Some(remembered) => {
                    reused += 1;
                    out.merge(&remembered.built)
                }
                None => {
                    let mut built = out.for_part();
                    let mut own = Diagnostics::new();
                    part.render(r, cx, &mut built, &mut own);
                    let merged = out.merge(&built);
                    if own.is_empty() {
                        self.remember(key, built, inputs);
                    } else {
                        said.append(own);
                    }
                    merged
                }
            };
            if merged.is_err() {
                *out = BundleBuilder::new(cx.target, cx.fleet);
                Kind::render_host(r, cx, out, diags);
                return;
            }
        }
        self.reused.fetch_add(reused, Ordering::Relaxed);
        diags.append(said);
    }

    fn remember(&self, key: Key, built: BundleBuilder, inputs: PartInputs) {
        let weight = built.weight();
        let mut table = self.lock();
        // Only the decision rests on the hash: a collision keeps a part early, and the
        // table's own lookup still compares whole keys.
        let hash = table.parts.hasher().hash_one(&key);
        if !table.seen_once.remove(&hash) {
            if table.seen_once.len() >= SEEN_ONCE_LIMIT {
                table.seen_once.clear();
            }
            table.seen_once.insert(hash);
            return;
        }
        if table.weight > MEMO_LIMIT {
            table.parts.clear();
            table.weight = 0;
        }
        table.weight += weight;
        table.parts.insert(
            key,
            Arc::new(Remembered {
                built,
                _inputs: inputs,
            }),
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // A thread that panicked while holding it left the table whole: every change to it
        // is one insert or one clear.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

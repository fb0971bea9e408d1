//! A memory budget for rendering one user template.
//!
//! A template is a small program the spec's authors write, and minijinja bounds only some of
//! what a program can do: fuel bounds its steps and the output is bounded by the writer, but
//! `{% set s = s ~ s %}` thirty times asks for 8 GiB in thirty steps, and an allocation that
//! fails aborts the process. So while a user template renders, the allocator counts what the
//! rendering thread holds, and past the budget it stops bellc with a diagnostic that names the
//! template (prepared before rendering, since nothing may be allocated at that point) and exit
//! code 1, instead of an abort.
//!
//! The count is kept only when the binary installs [`Budgeted`] as its global allocator
//! (`bellc` does); a library user without it renders unbounded, as before.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

/// The most memory one template may hold while it renders.
pub const MAX_TEMPLATE_MEMORY: usize = 256 << 20;

thread_local! {
    /// The budget of the template rendering on this thread; 0 when none renders.
    static LIMIT: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread since the rendering began.
    static HELD: Cell<isize> = const { Cell::new(0) };
    /// The diagnostic to print when the budget is exceeded (owned by the [`Guard`]).
    static MESSAGE: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// mimalloc, counting what a rendering template holds.
///
/// mimalloc rather than glibc's malloc because a build allocates and frees small strings and
/// maps by the million on every thread, and frees a chunk's bundles on another thread than the
/// one that rendered them: glibc serialised those frees on its arena locks and kept what they
/// freed in that arena's free lists (a streamed build needed a `malloc_trim` after every
/// chunk, or it grew by about 4 KB a host). mimalloc hands a block freed elsewhere back to the
/// thread that owns it without a lock. Measured on a million hosts of about 10,000 distinct
/// bundles: a quarter less CPU, 21.7 → 18.2 s (`docs/performance.md`, "Scale").
pub struct Budgeted;

// SAFETY: every method forwards to `MiMalloc` with the same arguments; the counting around it
// touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        charge(layout.size() as isize);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        charge(layout.size() as isize);
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        charge(-(layout.size() as isize));
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        charge(new_size as isize - layout.size() as isize);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

fn charge(bytes: isize) {
    // `try_with`: a thread being torn down has no thread-locals left, and renders nothing.
    let _ = LIMIT.try_with(|limit| {
        let limit = limit.get();
        if limit == 0 {
            return;
        }
        let held = HELD.with(|held| {
            let now = held.get().saturating_add(bytes);
            held.set(now);
            now
        });
        if held > limit as isize {
            over_budget();
        }
    });
}

/// Prints the prepared diagnostic and ends the process, without allocating.
fn over_budget() -> ! {
    let (ptr, len) = MESSAGE.with(Cell::get);
    if !ptr.is_null() {
        // SAFETY: the pointer and length are those of the `Guard`'s message, which lives
        // until the guard is dropped, and the guard clears them before it drops it.
        unsafe {
            libc::write(2, ptr.cast(), len);
        }
    }
    // SAFETY: `_exit` ends the process at once; nothing of bellc's output has been written
    // while rendering, so there is nothing to finish.
    unsafe { libc::_exit(1) }
}

/// While it lives, this thread's allocations count against `limit`; past it, `message` is
/// printed and bellc exits with code 1.
pub struct Guard {
    message: Box<[u8]>,
}

impl Guard {
    pub fn new(limit: usize, message: String) -> Guard {
        let message = message.into_bytes().into_boxed_slice();
        MESSAGE.with(|m| m.set((message.as_ptr(), message.len())));
        HELD.with(|h| h.set(0));
        LIMIT.with(|l| l.set(limit));
        Guard { message }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        LIMIT.with(|l| l.set(0));
        MESSAGE.with(|m| m.set((std::ptr::null(), 0)));
        // `self.message` is freed after this, with the budget off.
        let _ = self.message.len();
    }
}

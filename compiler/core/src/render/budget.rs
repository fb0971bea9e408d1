//! A memory budget for rendering one user template.
//!
//! A template is a small program the spec's authors write, and minijinja bounds only some of
//! what a program can do: fuel bounds its steps and the output is bounded by the writer, but
//! `{% set s = s ~ s %}` thirty times asks for 8 GiB in thirty steps, and an allocation that
//! fails aborts the process. So a user template renders on a helper thread of its own
//! ([`run_within`]), and the allocator counts what that thread holds. Past the budget the
//! allocation is never answered: the helper thread stops for good where it is (it can neither
//! fail the allocation, which aborts, nor unwind out of an allocator), and the thread that
//! asked for the rendering sees it stop and gets [`OverBudget`], which the build reports as a
//! diagnostic of the template, as any other error of the build: the library never exits, and
//! a build that fails leaves its output as it was. The stopped thread keeps what it held, at
//! most the budget, until the process ends.
//!
//! The count is kept only when the binary installs [`Budgeted`] as its global allocator
//! (`bellc` does); a library user without it renders unbounded, as before.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// The most memory one template may hold while it renders.
pub const MAX_TEMPLATE_MEMORY: usize = 256 << 20;

thread_local! {
    /// The budget of the template rendering on this thread; 0 when none renders.
    static LIMIT: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated minus bytes freed on this thread since the rendering began.
    static HELD: Cell<isize> = const { Cell::new(0) };
    /// On a helper thread: the flag it raises when it went over its budget (owned by the
    /// thread's own loop, which never ends once it is raised).
    static OVER: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
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

/// Raises this helper thread's flag and stops the thread for good, without allocating.
fn over_budget() -> ! {
    LIMIT.with(|l| l.set(0));
    let flag = OVER.with(Cell::get);
    if !flag.is_null() {
        // SAFETY: the flag is an `Arc` the helper thread's loop holds for as long as the
        // thread runs, and this thread never returns from here.
        unsafe { (*flag).store(true, Ordering::SeqCst) };
    }
    loop {
        // SAFETY: `pause` only waits for a signal.
        unsafe {
            libc::pause();
        }
    }
}

/// The template held more than its budget of memory; its thread was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    OverBudget,
    /// The helper thread ended without an answer (a panic in the template engine).
    Lost,
}

type Job = Box<dyn FnOnce() + Send>;

/// A calling thread's helper: where its templates render.
struct Helper {
    jobs: mpsc::Sender<(usize, Job)>,
    over: Arc<AtomicBool>,
}

impl Helper {
    fn spawn() -> Option<Helper> {
        let (jobs, queue) = mpsc::channel::<(usize, Job)>();
        let over = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&over);
        std::thread::Builder::new()
            .name("bellc-template".into())
            .spawn(move || {
                OVER.with(|o| o.set(Arc::as_ptr(&flag)));
                for (limit, job) in queue {
                    HELD.with(|h| h.set(0));
                    LIMIT.with(|l| l.set(limit));
                    job();
                    LIMIT.with(|l| l.set(0));
                }
            })
            .ok()?;
        Some(Helper { jobs, over })
    }
}

thread_local! {
    static HELPER: RefCell<Option<Helper>> = const { RefCell::new(None) };
}

/// Runs `job` on this thread's helper thread while what the helper holds counts against
/// `limit`: its result, or [`Stopped::OverBudget`] when it went over (the helper is then left
/// stopped, and the next call starts another).
pub fn run_within<T: Send + 'static>(
    limit: usize,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Stopped> {
    let (answer, answered) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = answer.send(job());
    });
    let over = HELPER.with(|cell| {
        let mut helper = cell.borrow_mut();
        if helper.is_none() {
            *helper = Helper::spawn();
        }
        let Some(h) = helper.as_ref() else {
            return Err(Stopped::Lost);
        };
        match h.jobs.send((limit, job)) {
            Ok(()) => Ok(Arc::clone(&h.over)),
            Err(_) => {
                *helper = None;
                Err(Stopped::Lost)
            }
        }
    })?;
    let stopped = loop {
        match answered.recv_timeout(Duration::from_millis(20)) {
            Ok(value) => return Ok(value),
            Err(mpsc::RecvTimeoutError::Timeout) if over.load(Ordering::SeqCst) => {
                break Stopped::OverBudget;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break Stopped::Lost,
        }
    };
    // The helper is stopped (or gone): the next template gets a new one.
    HELPER.with(|cell| cell.borrow_mut().take());
    Err(stopped)
}

//! A persistent CPU worker pool for the ops of a model forward (decode and prefill): one dispatch
//! per op, a static contiguous split of the op's items (output rows) over the threads, the
//! calling thread working too.
//!
//! Why not rayon for these ops: a decode token runs ~200 small parallel loops (each GEMV streams
//! 0.6-4 MB). rayon's fork-join from a thread outside its pool injects the job, wakes a sleeping
//! worker, lets the work spread by stealing (one wake-up per thread) and puts the caller to sleep
//! on a latch, so every op pays several futex round trips besides its work. Here
//! the workers wait on one atomic word: they spin on it for [`SPIN`], then yield the core until
//! [`YIELD`] has passed, and only then park; a dispatch writes the word and unparks only the
//! workers that have parked. Completion is one atomic counter the caller waits on the same way.
//! Spinning only pays when every thread has a core of its own: with more threads than the
//! process may run at once ([`std::thread::available_parallelism`]), a spinning thread takes the
//! core a thread with work needs, so such a pool parks at once ([`Waiting::Park`]).
//! The split is fixed by the item count and the thread count (one part per thread, balanced by
//! items, in multiples of the op's SIMD tile), so each thread streams one contiguous block of
//! weight rows, and the per-item arithmetic is whatever the op's closure does for that item,
//! independent of the split. Which thread runs which part is not fixed: each thread (the caller
//! first) claims the next unclaimed part from one atomic counter until none is left, so a worker
//! the OS has not scheduled yet delays nothing (its part is taken by a thread that is running).
//!
//! A dispatch allocates nothing: the job lives on the caller's stack and the workers read it
//! through a pointer published with the epoch. One dispatch runs at a time: concurrent callers
//! take turns (a mutex), and a closure that dispatches again (from the caller or a worker) runs
//! that inner loop on its own thread. A panic in any part is caught, the other parts still finish
//! (the caller must not return while a worker borrows its closure), and it comes back to the
//! caller as [`WorkerPanic`].

use std::any::Any;
use std::cell::Cell;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long a waiting thread spins on the atomic word before yielding the core: longer than the
/// serial gap between two ops of a decode step, so a warm worker sees the next op at once.
const SPIN: Duration = Duration::from_micros(20);
/// How long a waiting thread keeps yielding before it parks (a parked worker costs the next
/// dispatch a futex wake); yielding lets other threads (rayon's image ops, other processes)
/// have the core meanwhile.
const YIELD: Duration = Duration::from_micros(100);
/// Spin iterations between two clock reads while spinning.
const SPINS_PER_CLOCK_READ: u32 = 64;

/// How the threads of a pool wait for a dispatch or its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Spin for [`SPIN`], yield until [`YIELD`], then park: each thread has its own core.
    SpinThenPark,
    /// Park at once: more threads than cores.
    Park,
}

impl Waiting {
    /// [`Waiting::SpinThenPark`] when `threads` fit the cores this process may use.
    pub fn for_threads(threads: usize) -> Self {
        match thread::available_parallelism() {
            Ok(cores) if threads <= cores.get() => Waiting::SpinThenPark,
            Ok(_) => Waiting::Park,
            // Unknown core count: parking is correct everywhere, spinning only fast on idle cores.
            Err(_) => Waiting::Park,
        }
    }
}

/// How an op's items are split into parts, one per thread.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// Part boundaries fall on multiples of this (the op's SIMD tile of output rows).
    align: usize,
    /// No part gets fewer items than this unless there is only one part: below it a thread
    /// costs more than its share of the work.
    min_items_per_part: usize,
    /// Parts per thread: 1 for items of equal cost; more when the cost varies along the items
    /// (the threads then balance it by claiming parts as they finish).
    parts_per_thread: usize,
}

impl Split {
    /// Parts aligned to `align` items, each at least `min_items_per_part` items (both >= 1).
    pub const fn new(align: usize, min_items_per_part: usize) -> Self {
        let align = if align == 0 { 1 } else { align };
        let min_items_per_part = if min_items_per_part == 0 { 1 } else { min_items_per_part };
        Self { align, min_items_per_part, parts_per_thread: 1 }
    }

    /// This split with `parts_per_thread` parts per thread (at least 1).
    pub const fn parts_per_thread(self, parts_per_thread: usize) -> Self {
        let parts_per_thread = if parts_per_thread == 0 { 1 } else { parts_per_thread };
        Self { parts_per_thread, ..self }
    }

    /// The number of parts `n_items` items are split into on `threads` threads.
    fn parts(self, n_items: usize, threads: usize) -> usize {
        let units = n_items.div_ceil(self.align);
        threads.saturating_mul(self.parts_per_thread).min(units).min(n_items / self.min_items_per_part).max(1)
    }

    /// Items of part `part` of `parts`: whole aligned units, balanced to within one unit.
    fn range(self, n_items: usize, parts: usize, part: usize) -> Range<usize> {
        let units = n_items.div_ceil(self.align);
        let unit_begin = part * units / parts;
        let unit_end = (part + 1) * units / parts;
        (unit_begin * self.align).min(n_items)..(unit_end * self.align).min(n_items)
    }
}

/// A part of a dispatch panicked; `message` is its panic message.
#[derive(Debug)]
pub struct WorkerPanic {
    pub message: String,
}

impl std::fmt::Display for WorkerPanic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a CPU pool thread panicked: {}", self.message)
    }
}

impl std::error::Error for WorkerPanic {}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_string()
    }
}

/// One dispatch, on the caller's stack while it runs.
struct Job<'a> {
    body: &'a (dyn Fn(Range<usize>) + Sync),
    n_items: usize,
    split: Split,
    parts: usize,
}

impl Job<'_> {
    /// Runs part `part`; a panic is recorded in `shared` instead of unwinding.
    fn run_part(&self, part: usize, shared: &Shared) {
        let range = self.split.range(self.n_items, self.parts, part);
        if range.is_empty() {
            return;
        }
        let result = catch_unwind(AssertUnwindSafe(|| {
            IN_DISPATCH.set(true);
            (self.body)(range);
        }));
        IN_DISPATCH.set(false);
        if let Err(payload) = result {
            let mut first = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert(panic_message(payload.as_ref()));
        }
    }
}

/// The words the workers wait on and claim parts from hold a dispatch sequence number (high bits)
/// and a part count or index (low bits): a worker reads the job only after claiming a part of the
/// dispatch it belongs to, while that dispatch waits for the part and so keeps its job alive.
const PARTS_BITS: u32 = 20;
const PARTS_MASK: u64 = (1 << PARTS_BITS) - 1;

struct Shared {
    /// `sequence << PARTS_BITS | parts` of the latest dispatch.
    epoch: AtomicU64,
    /// The latest dispatch's job (a `Job` on the caller's stack), valid while parts are running.
    job: AtomicPtr<Job<'static>>,
    /// `sequence << PARTS_BITS | next unclaimed part` of the latest dispatch.
    claims: AtomicU64,
    /// Parts of the current dispatch not finished yet.
    remaining: AtomicUsize,
    /// Set by a worker before it parks (the dispatcher unparks only those).
    worker_parked: Box<[AtomicBool]>,
    /// The dispatching thread, when it parks waiting for `remaining` to reach 0.
    caller_parked: AtomicBool,
    caller: Mutex<Option<Thread>>,
    waiting: Waiting,
    /// The first panic message of the current dispatch.
    panic: Mutex<Option<String>>,
    shutdown: AtomicBool,
}

thread_local! {
    /// Whether this thread is running a part of a dispatch (a nested dispatch then runs inline).
    static IN_DISPATCH: Cell<bool> = const { Cell::new(false) };
}

/// Spins, then yields, then parks until `done()` holds. `parked` is the flag the waker reads
/// to know whether it must unpark this thread; `done` is re-checked after setting it, so a wake
/// between the check and the park is never lost (the waker sets its condition before reading
/// `parked`; all SeqCst).
fn wait_until(waiting: Waiting, parked: &AtomicBool, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if done() {
            return;
        }
        spins = spins.wrapping_add(1);
        if waiting == Waiting::SpinThenPark && spins % SPINS_PER_CLOCK_READ != 0 {
            std::hint::spin_loop();
            continue;
        }
        let waited = if waiting == Waiting::Park { SPIN + YIELD } else { start.elapsed() };
        if waited < SPIN {
            std::hint::spin_loop();
        } else if waited < SPIN + YIELD {
            thread::yield_now();
        } else {
            parked.store(true, SeqCst);
            if !done() {
                thread::park();
            }
            parked.store(false, SeqCst);
        }
    }
}

/// A pool of `threads - 1` workers plus the dispatching thread.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<(Thread, Option<JoinHandle<()>>)>,
    /// Serialises dispatches from different threads.
    dispatch: Mutex<()>,
    sequence: AtomicU64,
}

impl Pool {
    /// A pool running each dispatch on `threads` threads (the caller and `threads - 1` workers),
    /// waiting as [`Waiting::for_threads`] chooses.
    pub fn new(threads: usize) -> std::io::Result<Self> {
        Self::with_waiting(threads, Waiting::for_threads(threads))
    }

    /// [`Pool::new`] with an explicit way of waiting.
    pub fn with_waiting(threads: usize, waiting: Waiting) -> std::io::Result<Self> {
        let threads = threads.clamp(1, 1 << 12);
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            claims: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
            worker_parked: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            caller_parked: AtomicBool::new(false),
            caller: Mutex::new(None),
            waiting,
            panic: Mutex::new(None),
            shutdown: AtomicBool::new(false),
        });
        let mut pool =
            Pool { shared, workers: Vec::new(), dispatch: Mutex::new(()), sequence: AtomicU64::new(0) };
        for index in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let handle = thread::Builder::new()
                .name(format!("bonsai-cpu-{index}"))
                .spawn(move || worker_loop(&shared, index))?;
            pool.workers.push((handle.thread().clone(), Some(handle)));
        }
        Ok(pool)
    }

    /// Threads a dispatch runs on (the caller included).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// How the pool's threads wait.
    pub fn waiting(&self) -> Waiting {
        self.shared.waiting
    }

    /// Calls `body` once per part of `0..n_items` (parts as `split` and the thread count give;
    /// together they cover every item exactly once), in parallel, and returns when all have run.
    pub fn try_for_each_part(
        &self,
        n_items: usize,
        split: Split,
        body: &(dyn Fn(Range<usize>) + Sync),
    ) -> Result<(), WorkerPanic> {
        if n_items == 0 {
            return Ok(());
        }
        let parts = split.parts(n_items, self.threads()).min(PARTS_MASK as usize);
        if parts == 1 || IN_DISPATCH.get() {
            return catch_unwind(AssertUnwindSafe(|| body(0..n_items)))
                .map_err(|payload| WorkerPanic { message: panic_message(payload.as_ref()) });
        }
        let _turn = self.dispatch.lock().unwrap_or_else(|e| e.into_inner());
        let shared = &*self.shared;
        let job = Job { body, n_items, split, parts };
        let sequence = self.sequence.fetch_add(1, SeqCst) + 1;
        shared.remaining.store(parts, SeqCst);
        // The pointer is only read by threads that claimed a part of this dispatch, all of which
        // finish (the wait below) before `job` goes out of scope.
        shared.job.store(&job as *const Job<'_> as *mut Job<'static>, SeqCst);
        shared.claims.store(sequence << PARTS_BITS, SeqCst);
        shared.epoch.store(sequence << PARTS_BITS | parts as u64, SeqCst);
        // Wake as many parked workers as there are parts besides the caller's first one (worker
        // i waits on flag i + 1; flag 0 belongs to no thread).
        for (i, (thread, _)) in self.workers.iter().enumerate().take(parts - 1) {
            if shared.worker_parked[i + 1].load(SeqCst) {
                thread.unpark();
            }
        }
        while let Some(part) = claim(shared, sequence, parts) {
            job.run_part(part, shared);
            shared.remaining.fetch_sub(1, SeqCst);
        }
        if shared.remaining.load(SeqCst) != 0 {
            *shared.caller.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread::current());
            wait_until(shared.waiting, &shared.caller_parked, || shared.remaining.load(SeqCst) == 0);
        }
        shared.job.store(std::ptr::null_mut(), SeqCst);
        match shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(message) => Err(WorkerPanic { message }),
            None => Ok(()),
        }
    }
}

/// The next unclaimed part of dispatch `sequence` (of `parts`), now claimed by this thread; None
/// when all are claimed or a newer dispatch has begun.
fn claim(shared: &Shared, sequence: u64, parts: usize) -> Option<usize> {
    let mut claims = shared.claims.load(SeqCst);
    loop {
        let next = (claims & PARTS_MASK) as usize;
        if claims >> PARTS_BITS != sequence || next >= parts {
            return None;
        }
        match shared.claims.compare_exchange_weak(claims, claims + 1, SeqCst, SeqCst) {
            Ok(_) => return Some(next),
            Err(now) => claims = now,
        }
    }
}

fn worker_loop(shared: &Shared, index: usize) {
    let mut seen_sequence = 0u64;
    loop {
        let mut word = 0;
        wait_until(shared.waiting, &shared.worker_parked[index], || {
            word = shared.epoch.load(SeqCst);
            word >> PARTS_BITS != seen_sequence || shared.shutdown.load(SeqCst)
        });
        if shared.shutdown.load(SeqCst) {
            return;
        }
        seen_sequence = word >> PARTS_BITS;
        let parts = (word & PARTS_MASK) as usize;
        while let Some(part) = claim(shared, seen_sequence, parts) {
            // SAFETY: this thread claimed a part of dispatch `seen_sequence`, so the dispatcher
            // waits for it, and the job it published before the claim counter is alive until
            // the decrement below.
            let job = unsafe { &*shared.job.load(SeqCst) };
            job.run_part(part, shared);
            if shared.remaining.fetch_sub(1, SeqCst) == 1 && shared.caller_parked.load(SeqCst) {
                if let Some(caller) = shared.caller.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    caller.unpark();
                }
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        for (thread, handle) in &mut self.workers {
            thread.unpark();
            if let Some(handle) = handle.take() {
                // A worker never unwinds (parts run under catch_unwind), so join only fails if
                // the thread was killed; nothing is left to clean up either way.
                let _ = handle.join();
            }
        }
    }
}

/// The process's pool, made on first use with rayon's thread count (`RAYON_NUM_THREADS`, else
/// one per core), so both pools follow the one setting.
pub fn global() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = rayon::current_num_threads();
        Pool::new(threads).unwrap_or_else(|e| panic!("cannot start {threads} CPU pool threads: {e}"))
    })
}

/// Threads of the global pool.
pub fn threads() -> usize {
    global().threads()
}

/// [`Pool::try_for_each_part`] on the global pool; a panic in a part panics the caller with its
/// message (as a panic inside a rayon loop does).
pub fn for_each_part(n_items: usize, split: Split, body: &(dyn Fn(Range<usize>) + Sync)) {
    if let Err(e) = global().try_for_each_part(n_items, split, body) {
        panic!("{e}");
    }
}

/// A mutable slice that the parts of one dispatch write at disjoint rows.
struct RowsMut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: only a pointer + length; `rows` hands out disjoint ranges (see its contract), so the
// parts may hold them on different threads at once when T may be sent between threads.
unsafe impl<T: Send> Send for RowsMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for RowsMut<T> {}

impl<T> RowsMut<T> {
    fn new(data: &mut [T]) -> Self {
        Self { ptr: data.as_mut_ptr(), len: data.len() }
    }

    /// Rows `rows` (each `row_len` long).
    ///
    /// # Safety
    /// No other live reference may overlap these rows, and the slice given to [`RowsMut::new`]
    /// must outlive the result.
    #[allow(clippy::mut_from_ref)]
    unsafe fn rows(&self, rows: &Range<usize>, row_len: usize) -> &mut [T] {
        let (begin, end) = (rows.start * row_len, rows.end * row_len);
        assert!(begin <= end && end <= self.len, "rows {rows:?} of {row_len} outside {} elements", self.len);
        // SAFETY: in bounds (checked above); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(begin), end - begin) }
    }
}

/// [`for_each_part`] over the rows of `data` (rows of `row_len`; `data.len()` a multiple of it),
/// each part getting its row range and those rows of `data`, mutable.
pub fn for_each_rows_mut<T: Send>(
    data: &mut [T],
    row_len: usize,
    split: Split,
    body: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    for_each_rows_mut2(data, &mut [0u8; 0], row_len, 0, split, &|rows, a, _| body(rows, a));
}

/// [`for_each_rows_mut`] over two buffers with the same row count (rows of `a_row_len` in `a`,
/// of `b_row_len` in `b`), each part getting its rows of both.
pub fn for_each_rows_mut2<T: Send, U: Send>(
    a: &mut [T],
    b: &mut [U],
    a_row_len: usize,
    b_row_len: usize,
    split: Split,
    body: &(dyn Fn(Range<usize>, &mut [T], &mut [U]) + Sync),
) {
    assert!(a_row_len > 0 && a.len() % a_row_len == 0, "{} elements are not rows of {a_row_len}", a.len());
    let n_rows = a.len() / a_row_len;
    assert_eq!(b.len(), n_rows * b_row_len, "second buffer: {n_rows} rows of {b_row_len}");
    let (a, b) = (RowsMut::new(a), RowsMut::new(b));
    for_each_part(n_rows, split, &|rows| {
        // SAFETY: the parts of one dispatch get disjoint row ranges, and both buffers are
        // borrowed mutably for the whole dispatch.
        let (a_rows, b_rows) = unsafe { (a.rows(&rows, a_row_len), b.rows(&rows, b_row_len)) };
        body(rows, a_rows, b_rows);
    });
}

/// Fewest elements a pool thread handles in the element- and row-wise ops (norms, adds,
/// activations, copies): 64 KB of f32, a few us of work, below which waking another thread
/// costs more than it saves.
pub const MIN_ELEMENTS_PER_PART: usize = 1 << 14;

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;

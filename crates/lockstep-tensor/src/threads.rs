//! lockstep's own thread pool: `set_num_threads` / `get_num_threads`, and [`Par`], the handle
//! dispatch passes to kernels so that no kernel looks up a thread count itself.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

type Pools = Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>;
static POOLS: OnceLock<Pools> = OnceLock::new();
/// The process-wide thread count; 0 when never set. An atomic, not a mutex: every op reads it.
static GLOBAL_THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LOCAL_THREADS: Cell<Option<usize>> = const { Cell::new(None) };
    /// How many kernels run through dispatch are running on this thread (nested ops count):
    /// the tripwire of [`Par::current`] and [`get_num_threads`] in debug builds.
    static IN_KERNEL: Cell<usize> = const { Cell::new(0) };
    /// Whether this thread is one of the team's standing helpers.
    static TEAM_HELPER: Cell<bool> = const { Cell::new(false) };
    /// The pool this thread used last: every op asks for one, almost always the same.
    static LAST_POOL: core::cell::RefCell<Option<(usize, Arc<rayon::ThreadPool>)>> =
        const { core::cell::RefCell::new(None) };
}

fn default_threads() -> usize {
    // Read once: `available_parallelism` reads cgroup files on every call.
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Sets the number of threads lockstep's kernels use, process-wide (`torch.set_num_threads`).
/// Values below 1 are taken as 1.
pub fn set_num_threads(n: usize) {
    GLOBAL_THREADS.store(n.max(1), Ordering::Relaxed);
}

/// The number of threads kernels called from this thread use (`torch.get_num_threads`):
/// a [`with_num_threads`] override, else [`set_num_threads`], else the machine's core count.
///
/// Not for kernels: they use the [`Par`] dispatch hands them. In debug builds, a call from
/// inside a kernel run through dispatch panics (a tripwire for that rule).
pub fn get_num_threads() -> usize {
    tripwire("get_num_threads");
    num_threads()
}

/// [`get_num_threads`] without the tripwire (dispatch's own lookup).
#[inline]
fn num_threads() -> usize {
    LOCAL_THREADS.with(|l| l.get()).unwrap_or_else(|| {
        match GLOBAL_THREADS.load(Ordering::Relaxed) {
            0 => default_threads(),
            n => n,
        }
    })
}

/// Runs `f` with `n` threads for kernels called from this thread (tests use this to compare
/// 1, 2, 3 and 8 threads side by side).
pub fn with_num_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LOCAL_THREADS.with(|l| l.set(self.0));
        }
    }
    let _r = Restore(LOCAL_THREADS.with(|l| l.replace(Some(n.max(1)))));
    f()
}

fn pool(n: usize) -> Arc<rayon::ThreadPool> {
    let cached = LAST_POOL.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(k, _)| *k == n)
            .map(|(_, p)| p.clone())
    });
    if let Some(p) = cached {
        return p;
    }
    let p = shared_pool(n);
    LAST_POOL.with(|c| *c.borrow_mut() = Some((n, p.clone())));
    p
}

fn shared_pool(n: usize) -> Arc<rayon::ThreadPool> {
    let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
    let mut pools = pools.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return p.clone();
    }
    let p = Arc::new(build_pool(n));
    pools.push((n, p.clone()));
    p
}

/// The most kernel threads lockstep starts: more is refused by [`resolve_num_threads`] and
/// capped by [`Par::new`] (2^64 − 1 once started 65,535 threads).
pub const MAX_THREADS: usize = 1024;

/// Checks a thread count given by a user (a `--threads` flag): 0 means all cores, above
/// [`MAX_THREADS`] is an error; also starts that pool now, so that a machine that cannot
/// start the threads says so here rather than at the first op. Returns the count to use.
///
/// # Errors
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than [`MAX_THREADS`], or
/// if not even one thread can be started.
pub fn resolve_num_threads(n: usize) -> crate::Result<usize> {
    let n = if n == 0 { default_threads() } else { n };
    if n > MAX_THREADS {
        return Err(crate::error::invalid(
            "set_num_threads",
            "threads",
            format!("{n} threads is more than lockstep starts ({MAX_THREADS})"),
        ));
    }
    try_build_pool(1).map_err(|e| {
        crate::error::invalid(
            "set_num_threads",
            "threads",
            format!("cannot start a thread: {e}"),
        )
    })?;
    Ok(n)
}

fn try_build_pool(n: usize) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("lockstep-{n}-{i}"))
        .build()
}

/// A pool of `n` threads or, when the system refuses to start that many, of as many as it
/// starts (halving), with a warning: fewer threads never change a deterministic result.
fn build_pool(n: usize) -> rayon::ThreadPool {
    let mut k = n;
    loop {
        match try_build_pool(k) {
            Ok(p) => {
                if k < n {
                    log::warn!("lockstep: could not start {n} kernel threads; using {k}");
                }
                return p;
            }
            Err(e) if k == 1 => {
                // Nothing to fall back to: an op cannot run without a thread to run on.
                panic!("lockstep: cannot start a single kernel thread: {e}")
            }
            Err(_) => k = k.div_ceil(2).min(k - 1),
        }
    }
}

/// Whether this thread is running a kernel called by dispatch or is a team helper (running a
/// piece of one): a region started here would find the team busy.
#[inline]
pub(crate) fn team_busy_here() -> bool {
    IN_KERNEL.with(|k| k.get()) > 0 || TEAM_HELPER.with(|h| h.get())
}

/// Runs `f`, a kernel called by dispatch, with the tripwire armed on this thread: in debug
/// builds [`Par::current`] and [`get_num_threads`] panic inside it.
#[inline]
pub(crate) fn in_kernel<R>(f: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_KERNEL.with(|k| k.set(k.get() - 1));
        }
    }
    IN_KERNEL.with(|k| k.set(k.get() + 1));
    let _leave = Leave;
    f()
}

/// Panics (debug builds only) when called from inside a kernel run by dispatch: kernels take
/// the thread team as a parameter and never look it up.
#[inline]
fn tripwire(what: &str) {
    if cfg!(debug_assertions) && IN_KERNEL.with(|k| k.get()) > 0 {
        panic!(
            "lockstep: {what}() called inside a kernel run by dispatch; a kernel uses the `&Par` \
             dispatch hands it"
        );
    }
}

/// The parallelism a kernel may use: a thread count and the pool that has that many threads
/// (started on first use: a `Par` costs nothing until a region runs in the pool).
/// Deterministic kernels must not let their results depend on [`Par::threads`].
#[derive(Clone)]
pub struct Par {
    threads: usize,
    pool: OnceLock<Arc<rayon::ThreadPool>>,
}

impl core::fmt::Debug for Par {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Par({})", self.threads)
    }
}

impl Par {
    /// `n` threads (at least 1, at most [`MAX_THREADS`]).
    pub fn new(n: usize) -> Self {
        Self {
            threads: n.clamp(1, MAX_THREADS),
            pool: OnceLock::new(),
        }
    }

    /// What [`get_num_threads`] says for the calling thread. Not for kernels (the same
    /// tripwire as [`get_num_threads`]): dispatch hands them their team.
    pub fn current() -> Self {
        tripwire("Par::current");
        Self::new(num_threads())
    }

    /// The calling thread's team, for dispatch (no tripwire: a kernel may call ops, and each
    /// op's dispatch reads the context).
    #[inline]
    pub(crate) fn for_dispatch() -> Self {
        Self::new(num_threads())
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` inside the pool, so rayon's parallel iterators in `f` use these threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.get_or_init(|| pool(self.threads)).install(f)
    }

    /// Runs `f(p)` exactly once for every `p < parts`, returning when all are done, on at most
    /// `min(parts, self.threads())` threads in all, the caller's included (one thread: the
    /// caller runs them in order). The calling thread runs pieces itself beside standing helper
    /// threads: a region costs no sleep and wake of the caller, which [`Par::install`] pays
    /// (~100 µs on a busy 2-core VM, as much as the work of one LSTM step's region). An idle
    /// helper spins for the next job for 200 µs (environment variable `LOCKSTEP_SPIN_US`, read
    /// once), then parks until a job wakes it: short gaps between regions cost no wake-up, long
    /// ones no core, and the caller takes the pieces a helper still waking has not claimed. The
    /// caller, done with its pieces, spins 200 µs (`LOCKSTEP_WAIT_US`) for the helpers' ones,
    /// then parks until the last finishes. While another thread's job holds the helpers, the
    /// pieces run in the pool instead. Which thread runs a piece is
    /// unspecified, so deterministic kernels must make each piece's result independent of it.
    /// A panic in a piece reaches the caller after every other piece is done.
    pub fn run_parts(&self, parts: usize, f: impl Fn(usize) + Sync) {
        if parts <= 1 || self.threads == 1 {
            let mut panic = None;
            for p in 0..parts {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(p)));
                if let Err(e) = r {
                    panic.get_or_insert(e);
                }
            }
            if let Some(e) = panic {
                std::panic::resume_unwind(e);
            }
            return;
        }
        if team::run(parts, parts.min(self.threads), &f) {
            return;
        }
        // Every piece runs even when one panics, as on the helpers.
        use rayon::prelude::*;
        let panic = Mutex::new(None);
        self.install(|| {
            (0..parts).into_par_iter().for_each(|p| {
                if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(p))) {
                    panic
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            })
        });
        if let Some(e) = panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            std::panic::resume_unwind(e);
        }
    }

    /// Runs `f(i, c)` exactly once for every chunk `c` of `out.chunks_mut(chunk)`, `i` its
    /// index (what `out.par_chunks_mut(chunk).enumerate()` gives), through [`Par::run_parts`]:
    /// at most `4 · threads` parts, each a contiguous range of chunks, the ranges fixed by the
    /// chunk count and the thread count (several parts per thread: a thread done early, or
    /// started early, takes over parts of a late one); serial in chunk order at one thread.
    /// Which chunks share a thread is not part of the result: a deterministic `f` must compute
    /// chunk `i` from `i` alone. A panic in `f` reaches the caller once the other parts are
    /// done (the chunks after it in its own part are skipped). Panics if `chunk` is 0 (as
    /// `chunks_mut`).
    pub fn for_each_chunk_mut<T: Send>(
        &self,
        out: &mut [T],
        chunk: usize,
        f: impl Fn(usize, &mut [T]) + Sync,
    ) {
        assert!(chunk > 0, "for_each_chunk_mut: chunk size 0");
        let n = out.len().div_ceil(chunk);
        let parts = match self.threads {
            1 => 1,
            t => n.min(4 * t),
        };
        if parts <= 1 {
            for (i, c) in out.chunks_mut(chunk).enumerate() {
                f(i, c);
            }
            return;
        }
        let len = out.len();
        let base = SyncPtr(out.as_mut_ptr());
        self.run_parts(parts, |p| {
            let (c0, c1) = (p * n / parts, (p + 1) * n / parts);
            let (e0, e1) = (c0 * chunk, (c1 * chunk).min(len));
            // SAFETY: the parts' element ranges are disjoint and inside `out`, which stays
            // borrowed mutably until `run_parts` returns.
            let part = unsafe { core::slice::from_raw_parts_mut(base.get().add(e0), e1 - e0) };
            for (i, c) in part.chunks_mut(chunk).enumerate() {
                f(c0 + i, c);
            }
        });
    }
}

/// Standing helper threads for [`Par::run_parts`]: the caller publishes a job of `parts`
/// pieces, every thread (the caller too) claims pieces by an atomic counter until none is left,
/// and the caller waits for all of them to finish. Idle helpers spin for a short while after
/// each job (no yielding), then park; the caller spins a while for the last pieces, then parks
/// until the thread that finishes the last one unparks it.
mod team {
    use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, OnceLock, TryLockError};
    use std::thread::Thread;
    use std::time::{Duration, Instant};

    /// How long an idle helper looks for the next job before it parks (`LOCKSTEP_SPIN_US`
    /// overrides, read once). Spinning through a gap burns a core for its whole length; a
    /// parked helper joins late, which costs the wall time of small regions (an LSTM step
    /// measured ~5–10% slower at 50 µs, within noise of 1 ms at 200 µs).
    const SPIN_US: u64 = 200;
    /// How long the caller spins for pieces that helpers are still running before it parks
    /// (`LOCKSTEP_WAIT_US` overrides, read once): a wake-up delays the caller, so longer.
    const WAIT_US: u64 = 200;

    fn knob(var: &str, default: u64, cell: &'static OnceLock<Duration>) -> Duration {
        *cell.get_or_init(|| {
            let us = std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default);
            Duration::from_micros(us)
        })
    }

    fn spin_limit() -> Duration {
        static S: OnceLock<Duration> = OnceLock::new();
        knob("LOCKSTEP_SPIN_US", SPIN_US, &S)
    }

    fn wait_limit() -> Duration {
        static S: OnceLock<Duration> = OnceLock::new();
        knob("LOCKSTEP_WAIT_US", WAIT_US, &S)
    }

    /// Spins until `ready()` or until `limit` has passed (checking the clock every 64 spins);
    /// whether `ready()` held.
    #[inline]
    fn spin_until(limit: Duration, ready: impl Fn() -> bool) -> bool {
        let since = Instant::now();
        let mut spins = 0u32;
        loop {
            if ready() {
                return true;
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && since.elapsed() > limit {
                return false;
            }
            core::hint::spin_loop();
        }
    }

    struct Job {
        next: AtomicUsize,
        done: AtomicUsize,
        parts: usize,
        /// Helpers that may still join (the job's thread count less the caller): a helper
        /// takes a seat before working, so a crew started by a wider job stays within this one.
        seats: AtomicUsize,
        panicked: AtomicBool,
        /// The first panic's payload, handed to the caller as the other paths hand it.
        panic: Mutex<Option<Box<dyn core::any::Any + Send>>>,
        /// The caller, and whether it parks waiting for `done` (then whoever finishes the
        /// last piece unparks it).
        caller: Thread,
        caller_parked: AtomicBool,
        /// Lifetime erased: dereferenced only by a thread that claimed a range, and the
        /// publisher does not return before every claimed range is done.
        f: *const (dyn Fn(usize) + Sync),
    }
    // SAFETY: `f` is `Sync` and used only as documented on the field.
    unsafe impl Send for Job {}
    unsafe impl Sync for Job {}

    impl Job {
        /// Takes a helper's seat; `false` when the job has all the threads it may use.
        fn seat(&self) -> bool {
            self.seats
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| s.checked_sub(1))
                .is_ok()
        }

        /// Claims and runs ranges until none is left.
        fn work(&self) {
            loop {
                let p = self.next.fetch_add(1, Ordering::Relaxed);
                if p >= self.parts {
                    return;
                }
                // SAFETY: range `p` is claimed and not yet done, so the publisher is still
                // waiting and `f` is alive.
                let f = unsafe { &*self.f };
                if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(p))) {
                    self.panic
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    self.panicked.store(true, Ordering::Relaxed);
                }
                // SeqCst with the caller's `caller_parked` store and `done` reload: either it
                // sees the last piece done, or this sees it parked and wakes it.
                if self.done.fetch_add(1, Ordering::SeqCst) + 1 == self.parts
                    && self.caller_parked.load(Ordering::SeqCst)
                {
                    self.caller.unpark();
                }
            }
        }

        /// The caller's wait for every piece: spin a while, then park.
        fn wait(&self) {
            let all = || self.done.load(Ordering::Acquire) >= self.parts;
            if spin_until(wait_limit(), all) {
                return;
            }
            self.caller_parked.store(true, Ordering::SeqCst);
            while self.done.load(Ordering::SeqCst) < self.parts {
                std::thread::park();
            }
        }
    }

    /// One standing helper, as the caller sees it.
    struct Helper {
        thread: Thread,
        /// Set (SeqCst) before the helper rechecks `epoch` and parks.
        parked: AtomicBool,
    }

    struct Team {
        /// Bumped for every job (under `slot`'s lock).
        epoch: AtomicU64,
        slot: Mutex<Option<Arc<Job>>>,
    }

    /// The helpers started so far; locked by the thread whose job runs.
    struct Crew {
        team: Arc<Team>,
        helpers: Vec<Arc<Helper>>,
    }

    fn crew() -> &'static Mutex<Crew> {
        static CREW: OnceLock<Mutex<Crew>> = OnceLock::new();
        CREW.get_or_init(|| {
            Mutex::new(Crew {
                team: Arc::new(Team {
                    epoch: AtomicU64::new(0),
                    slot: Mutex::new(None),
                }),
                helpers: Vec::new(),
            })
        })
    }

    fn helper(team: Arc<Team>, me: Arc<Helper>, mut seen: u64) {
        super::TEAM_HELPER.with(|h| h.set(true));
        let spin = spin_limit();
        loop {
            let fresh = || team.epoch.load(Ordering::Acquire) != seen;
            if !spin_until(spin, fresh) {
                // SeqCst with the publisher's epoch bump and `parked` load: either this sees
                // the new epoch, or the publisher sees `parked` and unparks.
                me.parked.store(true, Ordering::SeqCst);
                while team.epoch.load(Ordering::SeqCst) == seen {
                    std::thread::park();
                }
                me.parked.store(false, Ordering::Relaxed);
            }
            let job = {
                let slot = team.slot.lock().unwrap_or_else(|e| e.into_inner());
                seen = team.epoch.load(Ordering::Acquire);
                slot.clone()
            };
            if let Some(job) = job.filter(|j| j.seat()) {
                job.work();
            }
        }
    }

    /// Runs `f(p)` for every `p < parts` on this thread and at most `threads − 1` helpers
    /// (`2 <= threads <= parts`); `false` (and nothing run) when another thread's job holds
    /// the helpers or they cannot be started.
    pub(super) fn run(parts: usize, threads: usize, f: &(dyn Fn(usize) + Sync)) -> bool {
        let mut crew = match crew().try_lock() {
            Ok(c) => c,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        while crew.helpers.len() + 1 < threads {
            let team = crew.team.clone();
            let seen = team.epoch.load(Ordering::Acquire);
            let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<Helper>>(1);
            let started = std::thread::Builder::new()
                .name(format!("lockstep-team-{}", crew.helpers.len()))
                .spawn(move || {
                    if let Ok(me) = rx.recv() {
                        helper(team, me, seen);
                    }
                });
            let Ok(handle) = started else {
                return false;
            };
            let me = Arc::new(Helper {
                thread: handle.thread().clone(),
                parked: AtomicBool::new(false),
            });
            if tx.send(me.clone()).is_err() {
                return false;
            }
            crew.helpers.push(me);
        }
        // SAFETY (lifetime erasure): see `Job::f`; this function waits below for every range.
        let f: *const (dyn Fn(usize) + Sync + '_) = f;
        let f: *const (dyn Fn(usize) + Sync + 'static) = unsafe { core::mem::transmute(f) };
        let job = Arc::new(Job {
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            parts,
            seats: AtomicUsize::new(threads - 1),
            panicked: AtomicBool::new(false),
            panic: Mutex::new(None),
            caller: std::thread::current(),
            caller_parked: AtomicBool::new(false),
            f,
        });
        let team = &crew.team;
        {
            let mut slot = team.slot.lock().unwrap_or_else(|e| e.into_inner());
            *slot = Some(job.clone());
            team.epoch.fetch_add(1, Ordering::SeqCst);
        }
        // Wake only as many parked helpers as the job has seats for.
        let mut woken = 0;
        for h in &crew.helpers {
            if woken + 1 >= threads {
                break;
            }
            if h.parked.load(Ordering::SeqCst) {
                h.thread.unpark();
                woken += 1;
            }
        }
        job.work();
        job.wait();
        *team.slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        drop(crew);
        if job.panicked.load(Ordering::Relaxed) {
            let e = job.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
            resume_unwind(e.unwrap_or_else(|| Box::new("a piece of a lockstep kernel panicked")));
        }
        true
    }
}

/// A raw pointer shared by parallel tasks that write disjoint elements (or write atomically):
/// each use documents why no two tasks touch the same element. The one such wrapper of the
/// workspace (the training layer's optimizers use it too): making one is safe, and every
/// access through it is `unsafe`.
pub struct SyncPtr<T>(pub *mut T);

// Copy whatever `T` is (a derive would ask `T: Copy`): it is only a pointer.
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SyncPtr`, not its field).
    #[inline(always)]
    pub fn get(self) -> *mut T {
        self.0
    }

    /// The pointer `off` elements on.
    #[inline(always)]
    pub fn at(self, off: usize) -> *mut T {
        self.0.wrapping_add(off)
    }

    /// `len` elements from `at`, as a slice.
    ///
    /// # Safety
    /// They lie inside the buffer, and no other task touches them while the slice lives.
    #[allow(clippy::mut_from_ref, clippy::wrong_self_convention)]
    #[inline(always)]
    pub unsafe fn rows<'a>(self, at: usize, len: usize) -> &'a mut [T] {
        // SAFETY: as documented.
        unsafe { core::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

impl<T: Copy> SyncPtr<T> {
    /// Copies `src` to `self + off`.
    ///
    /// # Safety
    /// `off + src.len()` elements must be inside the buffer, and no other task writes them.
    #[inline(always)]
    pub unsafe fn put(self, off: usize, src: &[T]) {
        // SAFETY: as documented.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.0.add(off), src.len()) }
    }
}
// SAFETY: used only where each element is written by one task (documented at each use) or
// atomically.
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SyncPtr<T> {}

#[cfg(test)]
mod tests {
    use super::Par;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every piece once, whoever runs it: three callers at once, so some go to the pool.
    #[test]
    fn run_parts_runs_every_piece_once() {
        let check = || {
            for threads in [1, 2, 3, 8] {
                let par = Par::new(threads);
                for parts in [0, 1, 2, 5, 17] {
                    let seen: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
                    par.run_parts(parts, |p| {
                        seen[p].fetch_add(1, Ordering::Relaxed);
                    });
                    assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(check);
            }
        });
    }

    /// A panicking piece reaches the caller after every other piece is done, and the helpers
    /// keep working.
    #[test]
    fn a_panicking_piece_reaches_the_caller() {
        let par = Par::new(3);
        let done = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            par.run_parts(3, |p| {
                if p == 1 {
                    panic!("piece 1");
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 2);
        let n = AtomicUsize::new(0);
        par.run_parts(30, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 30);
    }

    /// The caller gets the piece's own panic payload on every path (serial, helpers, pool).
    #[test]
    fn a_panic_keeps_its_payload() {
        for threads in [1, 2, 3, 8] {
            for _ in 0..20 {
                let r = std::panic::catch_unwind(|| {
                    Par::new(threads).run_parts(5, |p| {
                        if p == 3 {
                            panic!("piece {p}");
                        }
                    })
                });
                let e = r.expect_err("the panic reaches the caller");
                let msg = e.downcast_ref::<String>().map(String::as_str);
                assert_eq!(msg, Some("piece 3"), "threads = {threads}");
            }
        }
    }

    /// `run_parts` inside a piece (the helpers are taken: the inner job goes to the pool) and
    /// from a pool thread, at several thread counts, runs every piece once and returns.
    #[test]
    fn nested_run_parts_completes() {
        for (outer, inner) in [(2, 2), (3, 2), (2, 8), (8, 3)] {
            let n = AtomicUsize::new(0);
            Par::new(outer).run_parts(7, |_| {
                Par::new(inner).run_parts(5, |_| {
                    n.fetch_add(1, Ordering::Relaxed);
                });
            });
            assert_eq!(n.load(Ordering::Relaxed), 35);
            let m = AtomicUsize::new(0);
            let par = Par::new(outer);
            par.install(|| {
                use rayon::prelude::*;
                (0..4).into_par_iter().for_each(|_| {
                    Par::new(inner).run_parts(6, |_| {
                        m.fetch_add(1, Ordering::Relaxed);
                    });
                })
            });
            assert_eq!(m.load(Ordering::Relaxed), 24);
        }
    }

    /// A job runs on at most `min(parts, threads)` threads, also when a wider job started
    /// more helpers before it.
    #[test]
    fn run_parts_stays_within_its_threads() {
        use std::collections::HashSet;
        use std::sync::Mutex;
        Par::new(8).run_parts(8, |_| {});
        for threads in [1, 2, 3] {
            let par = Par::new(threads);
            for parts in [2, 3, 40] {
                for _ in 0..20 {
                    let ids = Mutex::new(HashSet::new());
                    par.run_parts(parts, |_| {
                        ids.lock().unwrap().insert(std::thread::current().id());
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    });
                    assert!(ids.into_inner().unwrap().len() <= parts.min(threads));
                }
            }
        }
    }

    /// Every chunk once, with its index and its length, at 1, 2, 3 and 8 threads, with three
    /// callers at once.
    #[test]
    fn for_each_chunk_mut_visits_every_chunk_once() {
        let check = || {
            for threads in [1, 2, 3, 8] {
                let par = Par::new(threads);
                for (len, chunk) in [(0, 4), (1, 4), (7, 3), (12, 3), (100, 7), (5, 100)] {
                    let mut out = vec![0usize; len];
                    par.for_each_chunk_mut(&mut out, chunk, |i, c| {
                        assert_eq!(c.len(), chunk.min(len - i * chunk));
                        for (j, v) in c.iter_mut().enumerate() {
                            *v += i * chunk + j + 1;
                        }
                    });
                    assert!(out.iter().enumerate().all(|(k, &v)| v == k + 1));
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(check);
            }
        });
    }

    /// A panicking piece reaches the caller after the other pieces ran, at any thread count.
    #[test]
    fn a_panic_comes_after_the_other_pieces() {
        for threads in [1, 2, 3] {
            let out: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(0)).collect();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Par::new(threads).run_parts(10, |i| {
                    if i == 0 {
                        panic!("piece 0");
                    }
                    out[i].store(1, Ordering::Relaxed);
                })
            }));
            assert!(r.is_err());
            assert!(out[1..].iter().all(|o| o.load(Ordering::Relaxed) == 1));
        }
    }
}

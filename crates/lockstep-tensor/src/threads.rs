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
pub fn get_num_threads() -> usize {
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

/// The parallelism a kernel may use: a thread count and the pool that has that many threads.
/// Deterministic kernels must not let their results depend on [`Par::threads`].
#[derive(Clone)]
pub struct Par {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
}

impl core::fmt::Debug for Par {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Par({})", self.threads)
    }
}

impl Par {
    /// `n` threads (at least 1, at most [`MAX_THREADS`]).
    pub fn new(n: usize) -> Self {
        let n = n.clamp(1, MAX_THREADS);
        Self {
            threads: n,
            pool: pool(n),
        }
    }

    /// What [`get_num_threads`] says for the calling thread.
    pub fn current() -> Self {
        Self::new(get_num_threads())
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` inside the pool, so rayon's parallel iterators in `f` use these threads.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }
}

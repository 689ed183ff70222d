//! lockstep's own thread pool: `set_num_threads` / `get_num_threads`, and [`Par`], the handle
//! dispatch passes to kernels so that no kernel looks up a thread count itself.

use std::cell::Cell;
use std::sync::{Arc, Mutex, OnceLock};

type Pools = Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>;
static POOLS: OnceLock<Pools> = OnceLock::new();
static GLOBAL_THREADS: Mutex<Option<usize>> = Mutex::new(None);

thread_local! {
    static LOCAL_THREADS: Cell<Option<usize>> = const { Cell::new(None) };
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Sets the number of threads lockstep's kernels use, process-wide (`torch.set_num_threads`).
/// Values below 1 are taken as 1.
pub fn set_num_threads(n: usize) {
    *GLOBAL_THREADS.lock().unwrap_or_else(|e| e.into_inner()) = Some(n.max(1));
}

/// The number of threads kernels called from this thread use (`torch.get_num_threads`):
/// a [`with_num_threads`] override, else [`set_num_threads`], else the machine's core count.
pub fn get_num_threads() -> usize {
    LOCAL_THREADS.with(|l| l.get()).unwrap_or_else(|| {
        GLOBAL_THREADS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(default_threads)
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
    let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
    let mut pools = pools.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return p.clone();
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("lockstep-{n}-{i}"))
            .build()
            .expect("building a thread pool"),
    );
    pools.push((n, p.clone()));
    p
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
    /// `n` threads (at least 1).
    pub fn new(n: usize) -> Self {
        let n = n.max(1);
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

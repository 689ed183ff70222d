//! The tuning policy's state, which dispatch ([`crate::dispatch`]) reads and
//! [`crate::autotune`] sets: benchmark mode, the convolution flags, the algorithms pinned on
//! this thread, the tuning cache and the tunable ops seen so far.
//!
//! It sits below dispatch and knows no op: everything that needs the list of built-in ops
//! (checking a pinned name, loading a tuning file) lives in [`crate::autotune`], above the op
//! files. The public switches are re-exported there; this module is their one home.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

static BENCHMARK: AtomicBool = AtomicBool::new(false);
static CONV_DETERMINISTIC: AtomicBool = AtomicBool::new(false);
static ALLOW_FAST_CONV: AtomicBool = AtomicBool::new(false);
/// (op, shape key) → algorithm id.
static CACHE: Mutex<BTreeMap<(String, String), String>> = Mutex::new(BTreeMap::new());
/// Tunable ops seen by a tunable call or [`register`] in this process (user-defined ones
/// included): op name → its algorithm ids.
static KNOWN: Mutex<BTreeMap<&'static str, Vec<&'static str>>> = Mutex::new(BTreeMap::new());

/// One pin of [`with_pin`]: the algorithm id and whether some registration of its op has it
/// (decided where the pin is made, which can see every op).
#[derive(Clone, Copy)]
pub(crate) struct Pin {
    pub algo: &'static str,
    pub known: bool,
}

thread_local! {
    /// Algorithms pinned on this thread, innermost last.
    static PINNED: core::cell::RefCell<Vec<Pin>> = const { core::cell::RefCell::new(Vec::new()) };
    /// This thread's override of [`ALLOW_FAST_CONV`], set by [`with_allow_fast_conv`].
    static FAST_CONV: core::cell::Cell<Option<bool>> = const { core::cell::Cell::new(None) };
}

/// `torch.backends.cudnn.allow_tf32 = on`, for convolution on the CPU: whether the heuristic
/// and benchmark mode may choose convolution algorithms that trade accuracy for speed
/// (today `*.winograd_f4x3`, whose errors are about ten times a direct sum's). Off by default:
/// a convolution then gives PyTorch-level accuracy. The process-wide default; see
/// [`with_allow_fast_conv`] for a scoped, per-thread setting. Either way the fast algorithms
/// stay deterministic and thread-invariant; only their rounding differs.
pub fn set_allow_fast_conv(on: bool) {
    ALLOW_FAST_CONV.store(on, Ordering::SeqCst);
}

/// Whether fast, less accurate convolution algorithms may be chosen on this thread: the
/// innermost [`with_allow_fast_conv`] around the call, else [`set_allow_fast_conv`]'s value.
pub fn allow_fast_conv() -> bool {
    FAST_CONV
        .with(|f| f.get())
        .unwrap_or_else(|| ALLOW_FAST_CONV.load(Ordering::SeqCst))
}

/// Runs `f` with [`allow_fast_conv`] set to `on` for the calls it makes on this thread (the
/// previous setting is restored afterwards, also on panic). Safe under `cargo test`'s parallel
/// threads: other threads keep their own setting.
pub fn with_allow_fast_conv<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FAST_CONV.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FAST_CONV.with(|c| c.replace(Some(on))));
    f()
}

/// `torch.backends.cudnn.benchmark = on`: time the candidates once per shape and keep the
/// fastest. Off by default.
pub fn set_benchmark(on: bool) {
    BENCHMARK.store(on, Ordering::SeqCst);
}

/// Whether benchmark mode is on.
pub fn benchmark() -> bool {
    BENCHMARK.load(Ordering::SeqCst)
}

/// `torch.backends.cudnn.deterministic = on`: restricts convolution (only) to deterministic
/// algorithms, without the rest of `use_deterministic_algorithms`.
pub fn set_conv_deterministic(on: bool) {
    CONV_DETERMINISTIC.store(on, Ordering::SeqCst);
}

/// Whether convolution is restricted to deterministic algorithms.
pub fn conv_deterministic() -> bool {
    CONV_DETERMINISTIC.load(Ordering::SeqCst)
}

/// Runs `f` with `pin` innermost on this thread's pin stack (popped afterwards, also on
/// panic).
pub(crate) fn with_pin<R>(pin: Pin, f: impl FnOnce() -> R) -> R {
    struct Unpin;
    impl Drop for Unpin {
        fn drop(&mut self) {
            PINNED.with(|p| p.borrow_mut().pop());
        }
    }
    PINNED.with(|p| p.borrow_mut().push(pin));
    let _unpin = Unpin;
    f()
}

/// The innermost pin on this thread for `op` (an id's op is the part before its last `.`).
pub(crate) fn pinned(op: &str) -> Option<Pin> {
    PINNED.with(|p| {
        p.borrow()
            .iter()
            .rev()
            .copied()
            .find(|a| a.algo.rsplit_once('.').is_some_and(|(o, _)| o == op))
    })
}

/// Records the tunable op `name` with its algorithm ids `algos` (the first registration of a
/// name stays).
pub(crate) fn register(name: &'static str, algos: impl FnOnce() -> Vec<&'static str>) {
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(name)
        .or_insert_with(algos);
}

/// The algorithm ids of the registered op `op`, if it is one.
pub(crate) fn registered(op: &str) -> Option<Vec<&'static str>> {
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(op)
        .cloned()
}

pub(crate) fn cache() -> MutexGuard<'static, BTreeMap<(String, String), String>> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cached or loaded choice for `(op, key)`, if any (read by dispatch in benchmark mode).
pub(crate) fn cached(op: &str, key: &str) -> Option<String> {
    cache().get(&(op.to_string(), key.to_string())).cloned()
}

/// Caches `algo` as the choice for `(op, key)` (dispatch, after timing the candidates).
pub(crate) fn cache_choice(op: &str, key: &str, algo: &str) {
    cache().insert((op.to_string(), key.to_string()), algo.to_string());
}

//! The determinism switch: PyTorch's `use_deterministic_algorithms`, with scoped overrides that
//! are safe under `cargo test`'s parallel threads.
//!
//! Settings have a process-wide default (the `use_*` functions) and a per-thread override set
//! by [`scope`] / [`allow_nondeterministic`] for the duration of a closure. Dispatch reads the
//! effective setting on the calling thread; kernels never read it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static DETERMINISTIC: AtomicBool = AtomicBool::new(false);
static WARN_ONLY: AtomicBool = AtomicBool::new(false);
static FILL_UNINITIALIZED: AtomicBool = AtomicBool::new(true);

#[derive(Clone, Default)]
struct Local {
    mode: Option<(bool, bool)>,
    allowed: Vec<String>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// Switches deterministic algorithms on or off for the whole process (warn-only off), as
/// `torch.use_deterministic_algorithms(mode)`: ops then use a thread-invariant implementation,
/// or return [`Error::Nondeterministic`](crate::Error::Nondeterministic) naming the op.
pub fn use_deterministic_algorithms(mode: bool) {
    use_deterministic_algorithms_warn_only(mode, false);
}

/// `torch.use_deterministic_algorithms(mode, warn_only=warn_only)`: with `warn_only`, an op
/// without a deterministic implementation logs a warning (once per op, through `log`) and runs.
pub fn use_deterministic_algorithms_warn_only(mode: bool, warn_only: bool) {
    DETERMINISTIC.store(mode, Ordering::SeqCst);
    WARN_ONLY.store(warn_only, Ordering::SeqCst);
}

/// Whether deterministic algorithms are on for the calling thread.
pub fn are_deterministic_algorithms_enabled() -> bool {
    mode().0
}

/// Whether deterministic mode only warns, for the calling thread.
pub fn is_deterministic_algorithms_warn_only_enabled() -> bool {
    mode().1
}

/// `(deterministic, warn_only)` in effect on this thread.
pub(crate) fn mode() -> (bool, bool) {
    LOCAL.with(|l| l.borrow().mode).unwrap_or_else(|| {
        (
            DETERMINISTIC.load(Ordering::SeqCst),
            WARN_ONLY.load(Ordering::SeqCst),
        )
    })
}

/// Whether `op` is exempted from deterministic mode on this thread.
pub(crate) fn is_allowed_nondeterministic(op: &str) -> bool {
    LOCAL.with(|l| l.borrow().allowed.iter().any(|a| a == op))
}

struct Restore(Local);
impl Drop for Restore {
    fn drop(&mut self) {
        let old = core::mem::take(&mut self.0);
        LOCAL.with(|l| *l.borrow_mut() = old);
    }
}

/// Runs `f` with deterministic mode set to `mode` (warn-only `warn_only`) on this thread only,
/// restoring the previous setting afterwards, also if `f` panics.
///
/// ```
/// use lockstep_tensor::{are_deterministic_algorithms_enabled, deterministic};
/// let before = are_deterministic_algorithms_enabled();
/// deterministic::scope(true, false, || {
///     assert!(are_deterministic_algorithms_enabled());
///     deterministic::scope(false, false, || assert!(!are_deterministic_algorithms_enabled()));
///     assert!(are_deterministic_algorithms_enabled()); // the inner scope is undone
/// });
/// assert_eq!(are_deterministic_algorithms_enabled(), before); // and so is this one
/// ```
pub fn scope<R>(mode: bool, warn_only: bool, f: impl FnOnce() -> R) -> R {
    let old = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let old = l.clone();
        l.mode = Some((mode, warn_only));
        old
    });
    let _restore = Restore(old);
    f()
}

/// Runs `f` with deterministic mode lifted for `op` alone on this thread: "deterministic
/// everywhere except this op".
///
/// ```
/// use lockstep_tensor::dispatch::{Guarantee, Impl, Op};
/// use lockstep_tensor::{Error, deterministic};
///
/// // An op of your own whose only implementation is not thread-invariant.
/// static MY_OP: Op<fn(f32) -> f32> = Op {
///     name: "my_op",
///     impls: &[Impl { algo: "my_op.atomic", guarantee: Guarantee::NotGuaranteed, f: |x| x }],
/// };
/// deterministic::scope(true, false, || {
///     let refused = MY_OP.select().err();
///     assert_eq!(refused, Some(Error::Nondeterministic { op: "my_op".into() }));
///     deterministic::allow_nondeterministic("my_op", || assert!(MY_OP.select().is_ok()));
/// });
/// ```
pub fn allow_nondeterministic<R>(op: &str, f: impl FnOnce() -> R) -> R {
    let old = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let old = l.clone();
        l.allowed.push(op.to_string());
        old
    });
    let _restore = Restore(old);
    f()
}

/// `torch.utils.deterministic.fill_uninitialized_memory`: when on (the default) and
/// deterministic mode is on, [`Tensor::empty`](crate::Tensor::empty) fills its memory with NaN
/// or the integer maximum.
pub fn set_fill_uninitialized_memory(on: bool) {
    FILL_UNINITIALIZED.store(on, Ordering::SeqCst);
}

/// Whether `fill_uninitialized_memory` is on.
pub fn fill_uninitialized_memory() -> bool {
    FILL_UNINITIALIZED.load(Ordering::SeqCst)
}

/// Ops already warned about in warn-only mode (once per op per process, as Python's default
/// warnings filter shows a `UserWarning` once per call site).
static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Warn-only mode's warning for `op`, the first time only: through `log` when a logger takes
/// warnings (`log::max_level()` at least `Warn`), else on standard error as PyTorch's
/// `warnings.warn` prints it, so it never vanishes. Returns whether it warned now.
pub(crate) fn warn_nondeterministic(op: &str) -> bool {
    let mut w = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !w.get_or_insert_with(HashSet::new).insert(op.to_string()) {
        return false;
    }
    drop(w);
    let msg = format!(
        "{op} does not have a deterministic implementation, but you set \
         'use_deterministic_algorithms(true, warn_only=true)'; running the nondeterministic one"
    );
    if log::max_level() >= log::LevelFilter::Warn {
        log::warn!("{msg}");
    } else {
        eprintln!("UserWarning: {msg}");
    }
    true
}

/// Whether warn-only mode has warned about `op` in this process.
pub fn warned_nondeterministic(op: &str) -> bool {
    WARNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|w| w.contains(op))
}

pub(crate) fn fill_uninitialized_memory_active() -> bool {
    fill_uninitialized_memory() && are_deterministic_algorithms_enabled()
}

//! The single dispatch point. Every op declares its implementations in an [`Op`], each with
//! the guarantee it gives, and reaches its kernel through one call, [`Op::run`] (a tunable op:
//! [`Op::tuned`]`(key)…`[`.run`](Tuned::run); an in-place one: [`Op::run_inplace`]). That call
//! is the only place that
//!
//! 1. applies the policy read from the calling thread's context: deterministic mode, warn-only
//!    mode, per-op exemptions ([`allow_nondeterministic`](crate::deterministic::allow_nondeterministic)),
//!    pins ([`with_algorithm`](crate::autotune::with_algorithm)), and for tunable ops benchmark
//!    mode, the tuning cache, [`set_conv_deterministic`](crate::autotune::set_conv_deterministic)
//!    and [`set_allow_fast_conv`](crate::autotune::set_allow_fast_conv);
//! 2. hands the kernel the implementation chosen and its thread team ([`Par`](crate::threads::Par));
//! 3. records the call in the trace ([`crate::trace`]) when tracing is on.
//!
//! Kernels never read global flags nor look the thread count up: in debug builds, a kernel run
//! through dispatch that calls [`Par::current`](crate::threads::Par::current) or
//! [`get_num_threads`](crate::threads::get_num_threads) panics (a tripwire for the rule).
//!
//! User code can declare its own ops the same way (a `static` [`Op`] and a call to
//! [`Op::run`]), and they then take part in deterministic mode, pins and tracing like built-in
//! ops. [`Op::select`] (the policy's choice and a [`Par`](crate::threads::Par), without running or tracing anything)
//! stays for code that runs and records its kernel itself; it is a thin wrapper over the same
//! policy.
//!
//! The dispatch call and the types it works with are defined in `op.rs`, which the op files
//! build on; this module publishes them with the list of every built-in op, which needs the op
//! files and so sits above them.

pub use crate::op::{Choice, Guarantee, Heuristic, Impl, Op, OpInfo, Output, Tuned};

/// Every built-in op of this crate registered with dispatch, and the single-implementation
/// families that do not go through it yet (random draws, `cat`), under the algorithm ids their
/// traces show: the lists each op family exports, collected by [`crate::ops::builtin_ops`].
/// (`lockstep_nn::builtin_ops` lists the training layer's own.)
pub fn builtin_ops() -> Vec<OpInfo> {
    crate::ops::builtin_ops()
}

/// The registration whose implementations include `algo`, and that implementation's guarantee.
pub fn find_algo(algo: &str) -> Option<(OpInfo, Guarantee)> {
    builtin_ops().into_iter().find_map(|o| {
        let g = o.impls.iter().find(|(a, _)| *a == algo)?.1;
        Some((o, g))
    })
}

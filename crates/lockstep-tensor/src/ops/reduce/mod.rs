//! Reductions. `sum` is the model every reduction follows:
//!
//! * the deterministic kernel cuts the input into fixed-size chunks ([`CHUNK`] elements, a
//!   constant), sums each chunk with [`LANES`] independent accumulators (element `i` goes to
//!   lane `i mod LANES`) folded by a fixed tree, and combines the chunk sums with a fixed
//!   pairwise tree — the order of every addition depends on the length only, so the bits are
//!   the same at any thread count;
//! * the nondeterministic kernel gives each thread a contiguous range and adds the per-thread
//!   sums in the order the threads finish.
//!
//! The lane sums have explicit AVX-512 and AVX2 paths (one vector register per group of
//! lanes, software prefetch for long slices) chosen at run time; each lane is still one chain
//! of additions in index order, so every path gives the bits of the portable loop (tested).
//! Softmax likewise runs one generic line kernel compiled for each instruction set, with no
//! fused operations: the same bits everywhere.

//!
//! Layout: `lanes` (the fixed-order primitives), `sum` (whole-tensor and per-dimension sums),
//! `blocks` (the sum over dimension 0 in blocks of rows, the blocks added in a fixed tree),
//! `dim` (mean, var/std, max/min along a dimension), `softmax` (logsumexp, softmax,
//! log_softmax), `cumsum`; `real` holds the float trait the last three share, `buf` the output
//! buffers every op file uses.

mod blocks;
mod buf;
mod causal_softmax;
mod cumsum;
mod dim;
mod lanes;
mod real;
mod softmax;
pub(crate) mod sum;
#[cfg(test)]
mod tests;

pub use blocks::SUM_DIM0_BLOCKS;
pub(crate) use buf::{advise_huge, dense};
pub use buf::{copied_vec, zeroed_vec};
pub use causal_softmax::{CAUSAL_SOFTMAX, CAUSAL_SOFTMAX_BACKWARD};
pub(crate) use causal_softmax::{backward_row, forward_row};
pub use cumsum::CUMSUM;
pub use dim::{MAX, MEAN_DIM, MIN, RedArgs, RedFn, STD, VAR};
/// [`LaneSum`]'s name before the float traits became one family (issue 29).
#[doc(hidden)]
pub use lanes::LaneSum as Float;
pub use lanes::{CHUNK, LANES, LaneSum, fold_lanes, fold_lanes_into, sum_lanes, tree_sum};
pub use real::{Real, exp_f32_slice};
pub use softmax::{LOG_SOFTMAX, LOGSUMEXP, SOFTMAX};
pub use sum::{SUM, SUM_DIM, sum_det, sum_nondet};

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![
        SUM.info(),
        SUM_DIM.info(),
        SUM_DIM0_BLOCKS.info(),
        MEAN_DIM.info(),
        VAR.info(),
        STD.info(),
        MAX.info(),
        MIN.info(),
        LOGSUMEXP.info(),
        SOFTMAX.info(),
        LOG_SOFTMAX.info(),
        CAUSAL_SOFTMAX.info(),
        CAUSAL_SOFTMAX_BACKWARD.info(),
        CUMSUM.info(),
    ]
}

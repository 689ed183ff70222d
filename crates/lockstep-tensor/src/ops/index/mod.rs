//! Indexing: `index_select`, `gather`, `scatter_add`, `index_add`, `index_put`, `embedding`
//! (and its dense backward), `embedding_bag`, `bincount`, `histc`.
//!
//! Index tensors are `i64`. Every index is checked before any kernel runs: an index out of
//! range (or negative where PyTorch forbids it) is
//! [`Error::IndexOutOfRange`](crate::Error::IndexOutOfRange), never a panic.
//!
//! The accumulating ops have two kernels:
//!
//! * **nondeterministic** (`NotGuaranteed`, registered first): parallel over the *source*; each
//!   thread adds into a private buffer merged into the output in the order the threads finish,
//!   or, when the destination is too large for a buffer per thread, adds with atomic
//!   compare-and-swap on the float's bits;
//! * **deterministic** (`ThreadInvariant`): *destination-partitioned* — each task owns a range
//!   of destination rows (and, for wide rows, a block of columns) and scans the sources in
//!   order, adding only those that land in its range. Every destination element therefore adds
//!   its contributions in source order, exactly as a sequential loop does, whatever the number
//!   of threads. `bincount` with float weights does the same with bins as the destination:
//!   every bin adds its weights in index order starting from +0 (the sequential loop, and
//!   PyTorch's one-thread order); on one thread it *is* the sequential loop, on several each
//!   thread owns a contiguous range of bins and scans the whole input. Integer counts
//!   (`bincount` without weights, `histc`) are exact in any order and take the per-thread
//!   buffer kernel in both modes.
//!
//! One file per family: `select.rs` (`index_select`, `gather`), `scatter.rs` (`scatter_add`
//! and its element-index kernels), `add_put.rs` (`index_add`, `index_put`), `embedding.rs`
//! (`embedding`, its dense backward, `embedding_bag`) and `histogram.rs` (`bincount`,
//! `histc`); `rows.rs` holds the row kernels that `index_add`, `index_put` and the embedding
//! backward share, and `common.rs` the accumulation trait and the argument checks.

mod add_put;
mod common;
mod embedding;
mod histogram;
mod rows;
mod scatter;
mod select;
#[cfg(test)]
mod tests;

pub use add_put::{INDEX_ADD, INDEX_PUT, INDEX_PUT_ACCUMULATE};
pub use common::AccElem;
pub use embedding::{BagMode, EMBEDDING, EMBEDDING_BACKWARD, EMBEDDING_BAG, EmbeddingBagFn};
pub use histogram::{BINCOUNT, HISTC, HistFn, HistInput, HistKernels};
pub use rows::{RowAddFn, RowGeomPub};
pub use scatter::SCATTER_ADD;
pub use select::{GATHER, GatherFn, INDEX_SELECT, IndexSelectFn};

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![
        INDEX_ADD.info(),
        INDEX_PUT.info(),
        INDEX_PUT_ACCUMULATE.info(),
        SCATTER_ADD.info(),
        EMBEDDING_BACKWARD.info(),
        EMBEDDING_BAG.info(),
        INDEX_SELECT.info(),
        GATHER.info(),
        BINCOUNT.info(),
        HISTC.info(),
        EMBEDDING.info(),
    ]
}

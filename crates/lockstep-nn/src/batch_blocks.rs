//! One pass over a whole batch that gives the parameter gradients of separate micro-shards.
//!
//! `--seeding invariant` defines a step's gradient as the sum, in a fixed binary tree over
//! micro-shard index, of the gradients of micro-shards of `m` samples, each computed on its
//! own. Running every micro-shard as its own forward and backward pays every op's fixed cost
//! `B / m` times. Inside [`with_batch_blocks`] a model runs once over the whole batch and
//! the ops that reduce over the batch into a parameter's gradient compute that reduction
//! block by block — the rows of micro-shard `k`, with the kernel call the micro-shard's own
//! backward makes, on the same shapes — and add the blocks in the same tree. Every other
//! value is a function of its own sample's rows (the row-producing kernels give each row the
//! same bits for any number of rows), so the gradients are the micro-shards' bits.
//!
//! Which ops read the context, when they are recorded inside it: [`Var::linear`](crate::Var::linear) and
//! [`functional::conv2d`](crate::functional::conv2d) (weight and bias gradients, when the
//! input's first dimension is the batch), and BatchNorm in training mode (its statistics'
//! partial moments and gradient sums per block, merged in the tree as
//! [`SyncStep`](crate::sync_batch_norm::SyncStep) merges micro-shards), and an LSTM layer's
//! fused ops (`lstm_input`, `lstm_layer`: `W_ih`, `b_ih`, `W_hh`, `b_hh`, when the
//! time-major input's dimension 1 is the batch; their sums over time × samples gather each
//! block's rows step by step, the order of the block's own backward). What it does not
//! cover: a parameter used more than once in one pass (its per-use block sums would be added
//! in another order than one micro-shard's accumulated gradient), GRU and Elman RNN layers
//! (their weight gradients sum over time inside one kernel), and ops reducing over the batch
//! outside those listed (normalisations over the batch other than BatchNorm). Callers use it
//! for models made of the listed ops and per-sample ops only (the CLI: its mlp, cnn and lstm).

use crate::error::invalid;
use lockstep_tensor::{Result, Tensor};
use std::cell::Cell;

/// A batch of `batch` samples cut into blocks of `block` samples (the last one shorter when
/// `block` does not divide `batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchBlocks {
    /// Samples in the batch.
    pub batch: usize,
    /// Samples per block (a micro-shard).
    pub block: usize,
}

impl BatchBlocks {
    /// The blocks `(first sample, samples)` in order (none when `block` is zero).
    pub fn ranges(self) -> impl Iterator<Item = (usize, usize)> {
        let Self { batch, block } = self;
        let count = batch
            .checked_div(block)
            .map_or(0, |_| batch.div_ceil(block));
        (0..count).map(move |k| (k * block, block.min(batch - k * block)))
    }
}

thread_local! {
    static BLOCKS: Cell<Option<BatchBlocks>> = const { Cell::new(None) };
}

/// Runs `f` with ops recorded in it reducing the batch dimension of their parameter gradients
/// in blocks of `block` samples added in the fixed tree (see the module docs); the setting
/// is restored afterwards, however `f` ends. The graph keeps what the ops read when they were
/// recorded: a backward may run outside.
///
/// # Errors
/// `batch` or `block` zero.
pub fn with_batch_blocks<R>(
    batch: usize,
    block: usize,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    if batch == 0 || block == 0 {
        return Err(invalid(
            "with_batch_blocks",
            if batch == 0 { "batch" } else { "block" },
            format!("a batch of {batch} samples in blocks of {block}: both must be positive"),
        ));
    }
    struct Restore(Option<BatchBlocks>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BLOCKS.with(|b| b.set(self.0));
        }
    }
    let _r = Restore(BLOCKS.with(|b| b.replace(Some(BatchBlocks { batch, block }))));
    f()
}

/// The blocks in force on this thread, if any.
pub fn current() -> Option<BatchBlocks> {
    BLOCKS.with(Cell::get)
}

/// The blocks for an input whose first dimension has `leading` entries: the context's when
/// that is its batch, else `None` (the op reduces as usual).
pub(crate) fn for_batch(leading: usize) -> Option<BatchBlocks> {
    current().filter(|b| b.batch == leading)
}

/// `Σ_k part(first_k, samples_k)` over the blocks, added in the fixed binary tree over block
/// index: `sum(lo..hi) = sum(lo..mid) + sum(mid..hi)`, `mid = lo + ceil((hi − lo) / 2)`, element
/// by element (the tree of `lockstep train`'s micro-shard sum).
pub(crate) fn tree_sum_blocks(
    blocks: BatchBlocks,
    mut part: impl FnMut(usize, usize) -> Result<Tensor>,
) -> Result<Tensor> {
    let parts = blocks
        .ranges()
        .map(|(s, n)| part(s, n))
        .collect::<Result<Vec<_>>>()?;
    tree_sum(parts)
}

/// The fixed-tree sum of `parts` (at least one, equal shapes and dtypes).
pub(crate) fn tree_sum(parts: Vec<Tensor>) -> Result<Tensor> {
    tree_reduce(parts, &mut |mut a: Tensor, b: Tensor| {
        a.add_(&b, 1.0)?;
        Ok::<_, lockstep_tensor::Error>(a)
    })?
    .ok_or_else(|| invalid("batch blocks", "parts", "a sum of no blocks"))
}

/// `items` combined by `add` in the fixed binary tree over their indices that defines
/// invariant seeding's micro-shard sum: `sum(lo..hi) = add(sum(lo..mid), sum(mid..hi))` with
/// `mid = lo + ⌈(hi − lo) / 2⌉`. The order of the calls depends on `items.len()` only; `None`
/// for no items. The one tree of the workspace: the per-block tensor sums here and the CLI's
/// sum of the micro-shards' gradient vectors both use it.
///
/// # Errors
/// The first error of `add`.
pub fn tree_reduce<T, E>(
    mut items: Vec<T>,
    add: &mut impl FnMut(T, T) -> core::result::Result<T, E>,
) -> core::result::Result<Option<T>, E> {
    if items.len() <= 1 {
        return Ok(items.pop());
    }
    let right = items.split_off(items.len().div_ceil(2));
    match (tree_reduce(items, add)?, tree_reduce(right, add)?) {
        (Some(a), Some(b)) => add(a, b).map(Some),
        (a, b) => Ok(a.or(b)),
    }
}

/// Rows `first·r .. (first + n)·r` of `t` viewed as `[rows, …]` where each sample has `r`
/// rows (`t`'s first dimension is samples × `r`).
pub(crate) fn rows(t: &Tensor, per_sample: usize, first: usize, n: usize) -> Result<Tensor> {
    t.narrow(0, first * per_sample, n * per_sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_batch_in_order() {
        let b = BatchBlocks {
            batch: 30,
            block: 8,
        };
        let r: Vec<_> = b.ranges().collect();
        assert_eq!(r, [(0, 8), (8, 8), (16, 8), (24, 6)]);
        let zero = BatchBlocks { batch: 8, block: 0 };
        assert_eq!(zero.ranges().count(), 0);
    }

    #[test]
    fn the_tree_adds_halves() {
        // Values whose f32 sum depends on the order: ((0+1)+(2+3)) + ((4+5)+6).
        let v = [1.0f32, 1e8, -1e8, 1.0, 0.5, 0.25, 3.0];
        let parts: Vec<Tensor> = v
            .iter()
            .map(|&x| Tensor::from_vec(vec![x], &[1]).unwrap())
            .collect();
        let s = tree_sum(parts).unwrap().to_vec::<f32>().unwrap();
        let want = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + v[6]);
        let in_order = v.iter().fold(0.0f32, |a, &x| a + x);
        assert_ne!(
            want.to_bits(),
            in_order.to_bits(),
            "the case must tell orders apart"
        );
        assert_eq!(s[0].to_bits(), want.to_bits());
    }

    #[test]
    fn the_setting_is_scoped_and_checked() {
        assert!(current().is_none());
        let seen = with_batch_blocks(16, 8, || Ok(current())).unwrap();
        assert_eq!(
            seen,
            Some(BatchBlocks {
                batch: 16,
                block: 8
            })
        );
        assert!(current().is_none());
        assert!(with_batch_blocks(0, 8, || Ok(())).is_err());
        assert!(with_batch_blocks(8, 0, || Ok(())).is_err());
        let _ = with_batch_blocks(4, 2, || -> Result<()> { Err(invalid("t", "t", "t")) });
        assert!(current().is_none());
    }

    #[test]
    fn tree_reduce_records_the_tree() {
        let mut add = |a: String, b: String| Ok::<_, ()>(format!("({a}+{b})"));
        let items = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
        assert_eq!(tree_reduce(items(0), &mut add), Ok(None));
        assert_eq!(tree_reduce(items(1), &mut add), Ok(Some("0".into())));
        assert_eq!(
            tree_reduce(items(7), &mut add),
            Ok(Some("(((0+1)+(2+3))+((4+5)+6))".into()))
        );
        assert_eq!(
            tree_reduce(items(5), &mut add),
            Ok(Some("(((0+1)+2)+(3+4))".into()))
        );
    }
}

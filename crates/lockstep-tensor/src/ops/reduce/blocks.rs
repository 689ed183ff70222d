//! `sum_dim0_blocks`: the sum over dimension 0 cut into blocks of rows, each block summed as
//! its own [`Tensor::sum_dim`] call would sum it, the blocks added in a fixed binary tree — in
//! one call.
//!
//! Invariant seeding (`lockstep train --seeding invariant`) defines a bias gradient as the
//! fixed-tree sum of the micro-shards' own column sums. Computing them as one `sum_dim(0)` per
//! micro-shard and a tensor addition per pair pays each call's dispatch and allocation; here
//! the block sums go into one buffer and the tree runs in place.
//!
//! # Order of operations
//! Block `t` covers rows `k0 = t·block .. k1 = min(k0 + block, n)`. Its column `j` is the
//! fixed-order sum [`SUM_DIM`](super::SUM_DIM) gives for a `[k1 − k0, …]` input: the bits of
//! [`sum_det`](super::sum_det) over `x[k0..k1][j]`. Then `C = S(0, T)` with
//! `S(lo, hi) = S(lo, mid) + S(mid, hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`, one rounding per
//! addition, the left operand first. Threads only decide which blocks they sum, so the bits
//! depend on the shape, `block` and the values only.

use super::buf::dense;
use super::lanes::LaneSum;
use super::sum::{SERIAL_MAX, col_sums_into, tree_blocks};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::threads::Par;
use crate::{Tensor, invalid};
use std::sync::Mutex;

const OP: &str = "sum_dim0_blocks";

/// `sum_dim0_blocks` (see [`Tensor::sum_dim0_blocks`]): one thread-invariant implementation.
/// Through dispatch so that it can be traced and counted like every op.
pub static SUM_DIM0_BLOCKS: Op<()> = Op {
    name: OP,
    impls: &[Impl {
        algo: "sum_dim0_blocks.fixed_tree",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// The block sums of an `[n, inner]` slice (see the [module docs](self)), then their tree.
fn kernel<T: LaneSum>(x: &[T], n: usize, inner: usize, block: usize, par: &Par) -> Result<Vec<T>> {
    let blocks = n.div_ceil(block);
    let mut parts = crate::try_filled_vec(OP, blocks.max(1) * inner, T::default())?;
    if inner == 0 || blocks <= 1 {
        // One block (or none: zeros): `sum_dim`'s own sums.
        col_sums_into(x, 1, n, inner, par, &mut parts)?;
        return Ok(parts);
    }
    let one = |t: usize, dst: &mut [T], p: &Par| {
        let (k0, k1) = (t * block, ((t + 1) * block).min(n));
        col_sums_into(&x[k0 * inner..k1 * inner], 1, k1 - k0, inner, p, dst)
    };
    if par.threads() == 1 || x.len() <= SERIAL_MAX {
        for (t, dst) in parts.chunks_mut(inner).enumerate() {
            one(t, dst, par)?;
        }
    } else {
        // Runs of whole blocks per thread, each block summed on its thread.
        let per = blocks.div_ceil(par.threads());
        let serial = Par::new(1);
        let failed = Mutex::new(None);
        par.for_each_chunk_mut(&mut parts, per * inner, |i, run| {
            for (j, dst) in run.chunks_mut(inner).enumerate() {
                if let Err(e) = one(i * per + j, dst, &serial) {
                    failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    return;
                }
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
    }
    tree_blocks(&mut parts, blocks, inner);
    parts.truncate(inner);
    Ok(parts)
}

impl Tensor {
    /// `Σ` over dimension 0 with the rows cut into blocks of `block` (the last one shorter
    /// when `block` does not divide the length): each block's sum has the bits of
    /// `self.narrow(0, k0, kb).sum_dim(0, false)`, and the blocks are added in the fixed
    /// binary tree over block index (`sum(lo..hi) = sum(lo..mid) + sum(mid..hi)`,
    /// `mid = lo + ⌈(hi − lo) / 2⌉`, left operand first), element by element. One call
    /// instead of one `sum_dim` per block and the additions;
    /// the bits depend on the shape, `block` and the values only, at any thread count. The
    /// result has `self`'s shape without dimension 0; an empty dimension 0 gives zeros.
    ///
    /// # Errors
    /// A 0-d or non-float tensor, `block == 0`, or an output too large for memory.
    pub fn sum_dim0_blocks(&self, block: usize) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Err(invalid(OP, "self", "expected at least one dimension"));
        }
        if !self.dtype().is_float() {
            return Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got: self.dtype(),
            });
        }
        if block == 0 {
            return Err(invalid(
                OP,
                "block",
                "blocks of rows must be at least 1 long",
            ));
        }
        let shape = self.shape();
        let (n, out_shape) = (shape[0], shape[1..].to_vec());
        let inner: usize = out_shape.iter().product();
        let x = self.contiguous_for(OP)?;
        SUM_DIM0_BLOCKS.run(&[self], |_, par| match x.dtype() {
            DType::F32 => {
                Tensor::from_vec(kernel(dense::<f32>(&x)?, n, inner, block, par)?, &out_shape)
            }
            _ => Tensor::from_vec(kernel(dense::<f64>(&x)?, n, inner, block, par)?, &out_shape),
        })
    }
}

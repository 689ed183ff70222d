//! Embeddings: `embedding` (a row gather), its dense backward (gradient rows summed per token,
//! on the row kernels) and `embedding_bag`.

use super::common::{AccElem, acc_op, check_indices, index_tensor, one_dim, with_acc};
use super::rows::{ROW_ATOMIC, ROW_DET, ROW_NONDET, RowAddFn, RowGeomPub, run_rows};
use super::select::{IndexSelectFn, index_select_kernel};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::reduce::dense;
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;

acc_op!(
    /// `embedding_dense_backward`: gradient rows summed per token id.
    EMBEDDING_BACKWARD: RowAddFn, "embedding_backward", "embedding_backward.source_parallel",
    "embedding_backward.dest_partitioned", "embedding_backward.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);

/// `torch.nn.functional.embedding`: a copy of each selected row (index_select's kernel, no
/// accumulation, so thread-invariant), under its own name for exemptions, pins and traces.
pub static EMBEDDING: Op<IndexSelectFn> = Op {
    name: "embedding",
    impls: &[Impl {
        algo: "embedding.row_copy",
        guarantee: Guarantee::ThreadInvariant,
        f: index_select_kernel,
    }],
};

/// Element types whose all-zero bit pattern is the value zero (private: only these two).
trait ZeroBits {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}

/// `n` zeros for an output of `op`, or [`Error::OutOfMemory`]. The zeros come from the
/// allocator's zeroed memory (fresh pages from the system for large outputs), advised as huge
/// pages: no single-threaded memset of the whole output before the kernel, and the rows no
/// token touches (about half of a 50k-row vocabulary for 32k tokens) are never written at all.
fn try_zeroed<T: ZeroBits>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let oom = || Error::OutOfMemory {
        op,
        bytes: n as u128 * core::mem::size_of::<T>() as u128,
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| oom())?;
    // SAFETY: `layout` has a non-zero size. A non-null result is an allocation of `n` zeroed
    // elements (`ZeroBits`: all-zero bits are the value +0) from the global allocator
    // with the layout `Vec<T>` uses for capacity `n`, so the vector may own and free it.
    let v = unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            return Err(oom());
        }
        Vec::from_raw_parts(ptr, n, n)
    };
    crate::ops::reduce::advise_huge(&v);
    Ok(v)
}

/// Reduction of `embedding_bag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BagMode {
    /// Sum of the bag's rows.
    Sum,
    /// Mean of the bag's rows (zeros for an empty bag).
    Mean,
    /// Elementwise maximum of the bag's rows (zeros for an empty bag).
    Max,
}

/// Kernel of `embedding_bag`: `(weight, indices, bag starts, mode, par)`.
pub type EmbeddingBagFn = fn(&Tensor, &[i64], &[usize], BagMode, &Par) -> Result<Tensor>;

fn embedding_bag_kernel(
    w: &Tensor,
    idx: &[i64],
    starts: &[usize],
    mode: BagMode,
    par: &Par,
) -> Result<Tensor> {
    let d = w.shape()[1];
    let nbags = starts.len();
    let wc = w.contiguous_for("embedding_bag")?;
    with_acc!("embedding_bag", w.dtype(), T => {
        let wd = dense::<T>(&wc)?;
        let mut out = vec![T::default(); nbags * d];
        if d > 0 {
            par.install(|| {
                out.par_chunks_mut(d).enumerate().for_each(|(b, o)| {
                    let lo = starts[b];
                    let hi = if b + 1 < nbags { starts[b + 1] } else { idx.len() };
                    for (j, &r) in idx[lo..hi].iter().enumerate() {
                        let row = &wd[r as usize * d..(r as usize + 1) * d];
                        if mode == BagMode::Max {
                            for (o, &v) in o.iter_mut().zip(row) {
                                if j == 0 || v > *o || v.partial_cmp(&v).is_none() { *o = v; }
                            }
                        } else {
                            for (o, &v) in o.iter_mut().zip(row) {
                                *o = T::add(*o, v);
                            }
                        }
                    }
                    if mode == BagMode::Mean && hi > lo {
                        let c = (hi - lo) as f64;
                        for o in o.iter_mut() {
                            *o = T::from_f64(o.to_f64() / c);
                        }
                    }
                })
            });
        }
        Tensor::from_vec(out, &[nbags, d])
    })
}

/// `torch.nn.functional.embedding_bag`: each bag reduces its rows in order (thread-invariant).
pub static EMBEDDING_BAG: Op<EmbeddingBagFn> = Op {
    name: "embedding_bag",
    impls: &[Impl {
        algo: "embedding_bag.per_bag",
        guarantee: Guarantee::ThreadInvariant,
        f: embedding_bag_kernel,
    }],
};

impl Tensor {
    /// `torch.nn.functional.embedding(indices, weight)` with `self` the `[V, D]` weight: the
    /// rows `indices` (any shape) → `[*indices.shape, D]`.
    ///
    /// # Errors
    /// `self` not 2-d; a non-`i64` index; an index outside `0..V`.
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        const OP: &str = "embedding";
        if self.ndim() != 2 {
            return Err(invalid(
                OP,
                "weight",
                format!("expected a 2-d weight, got shape {:?}", self.shape()),
            ));
        }
        let ic = index_tensor(OP, indices)?;
        let idx = dense::<i64>(&ic)?;
        EMBEDDING.run(&[self, indices], |imp, par| {
            check_indices(OP, idx, self.shape()[0], par)?;
            let out = (imp.f)(self, 0, idx, par)?;
            // The rows are dense: a view in the indices' shape.
            let mut shape: Vec<isize> = indices.shape().iter().map(|&d| d as isize).collect();
            shape.push(self.shape()[1] as isize);
            out.reshape(&shape)
        })
    }

    /// `embedding_dense_backward(grad, indices, num_weights)`: the gradient of the weight,
    /// `[num_weights, D]`, with row `v` the sum (in token order, deterministically) of the rows
    /// of `grad` (`[*indices.shape, D]`) whose token is `v`.
    ///
    /// # Errors
    /// A non-`i64` index; `grad` not float or not shaped `[*indices.shape, D]`; an index outside
    /// `0..num_weights`.
    pub fn embedding_backward(
        grad: &Tensor,
        indices: &Tensor,
        num_weights: usize,
    ) -> Result<Tensor> {
        const OP: &str = "embedding_backward";
        let ic = index_tensor(OP, indices)?;
        if !grad.dtype().is_float() {
            return Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got: grad.dtype(),
            });
        }
        if grad.ndim() != indices.ndim() + 1 || grad.shape()[..indices.ndim()] != *indices.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: indices.shape().to_vec(),
                rhs: grad.shape().to_vec(),
            });
        }
        let idx = dense::<i64>(&ic)?;
        let d = *grad.shape().last().unwrap_or(&0);
        // `num_weights` comes from the caller: refuse sizes that overflow or cannot be had.
        let n = num_weights.checked_mul(d).ok_or(Error::OutOfMemory {
            op: OP,
            bytes: num_weights as u128 * d as u128 * 8,
        })?;
        let mut out = match grad.dtype() {
            DType::F32 => Tensor::from_vec(try_zeroed::<f32>(OP, n)?, &[num_weights, d])?,
            _ => Tensor::from_vec(try_zeroed::<f64>(OP, n)?, &[num_weights, d])?,
        };
        let g = RowGeomPub {
            outer: 1,
            n: num_weights,
            m: idx.len(),
            inner: d,
        };
        run_rows(&EMBEDDING_BACKWARD, &mut out, grad, idx, g, true)?;
        Ok(out)
    }

    /// `torch.nn.functional.embedding_bag(indices, weight, offsets, mode)` with `self` the
    /// `[V, D]` weight, `indices` 1-d and `offsets` 1-d (bag `b` is
    /// `indices[offsets[b]..offsets[b+1]]`, the last bag runs to the end) → `[B, D]`.
    ///
    /// # Errors
    /// `self` not a 2-d float tensor; non-`i64` or multi-dimensional indices/offsets; offsets
    /// not starting at 0, decreasing, or past the end; an index outside `0..V`.
    pub fn embedding_bag(
        &self,
        indices: &Tensor,
        offsets: &Tensor,
        mode: BagMode,
    ) -> Result<Tensor> {
        const OP: &str = "embedding_bag";
        if self.ndim() != 2 || !self.dtype().is_float() {
            return Err(invalid(
                OP,
                "weight",
                format!(
                    "expected a 2-d float weight, got {:?} {:?}",
                    self.shape(),
                    self.dtype()
                ),
            ));
        }
        let ic = index_tensor(OP, indices)?;
        one_dim(OP, "indices", indices)?;
        let oc = index_tensor(OP, offsets)?;
        one_dim(OP, "offsets", offsets)?;
        let idx = dense::<i64>(&ic)?;
        let offs = dense::<i64>(&oc)?;
        if let Some(&f) = offs.first()
            && f != 0
        {
            return Err(invalid(
                OP,
                "offsets",
                format!("offsets[0] has to be 0, got {f}"),
            ));
        }
        let mut starts = Vec::with_capacity(offs.len());
        let mut prev = 0i64;
        for &o in offs {
            if o < prev || o as u64 > idx.len() as u64 {
                return Err(invalid(
                    OP,
                    "offsets",
                    format!(
                        "offsets must be non-decreasing and at most {}, got {o} after {prev}",
                        idx.len()
                    ),
                ));
            }
            prev = o;
            starts.push(o as usize);
        }
        EMBEDDING_BAG.run(&[self, indices], |imp, par| {
            check_indices(OP, idx, self.shape()[0], par)?;
            (imp.f)(self, idx, &starts, mode, par)
        })
    }
}

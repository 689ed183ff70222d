//! `index_select` and `gather`: no accumulation, so one thread-invariant kernel each.

use super::common::{check_index_shape, check_indices, dim_of, geom, index_tensor, one_dim};
use crate::Tensor;
use crate::error::Result;
use crate::layout::contiguous_strides;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::reduce::{dense, zeroed_vec};
use crate::threads::Par;
use rayon::prelude::*;

pub(super) fn index_select_kernel(
    x: &Tensor,
    dim: usize,
    idx: &[i64],
    par: &Par,
) -> Result<Tensor> {
    let (outer, n, inner) = geom(x.shape(), dim);
    let m = idx.len();
    let mut shape = x.shape().to_vec();
    if shape.is_empty() {
        shape.push(m);
    } else {
        shape[dim] = m;
    }
    let _ = n;
    let xc = x.contiguous_for("index_select")?;
    crate::with_dtype!(x.dtype(), T => {
        let s = dense::<T>(&xc)?;
        let mut out = zeroed_vec::<T>(outer * m * inner);
        if !out.is_empty() {
            let min_rows = ((1 << 12) / inner.max(1)).max(1);
            par.install(|| {
                out.par_chunks_mut(inner).enumerate().with_min_len(min_rows).for_each(|(l, d)| {
                    let (o, k) = (l / m, l % m);
                    let r = idx[k] as usize;
                    let b = (o * n + r) * inner;
                    d.copy_from_slice(&s[b..b + inner]);
                })
            });
        }
        Tensor::from_vec(out, &shape)
    })
}

fn gather_kernel(x: &Tensor, dim: usize, index: &Tensor, idx: &[i64], par: &Par) -> Result<Tensor> {
    let ishape = index.shape().to_vec();
    let xs = contiguous_strides(x.shape());
    let nd = ishape.len();
    let last = ishape.last().copied().unwrap_or(1);
    let xc = x.contiguous_for("gather")?;
    crate::with_dtype!(x.dtype(), T => {
        let s = dense::<T>(&xc)?;
        let mut out = zeroed_vec::<T>(idx.len());
        if !out.is_empty() && last > 0 {
            let min_rows = ((1 << 12) / last).max(1);
            par.install(|| {
                out.par_chunks_mut(last).enumerate().with_min_len(min_rows).for_each(|(row, d)| {
                    // Base offset of this row in x, without the `dim` component.
                    let mut rem = row;
                    let mut base = 0;
                    for a in (0..nd.saturating_sub(1)).rev() {
                        let p = rem % ishape[a];
                        rem /= ishape[a];
                        if a != dim {
                            base += p * xs[a];
                        }
                    }
                    let ir = &idx[row * last..(row + 1) * last];
                    if nd == 0 {
                        d[0] = s[ir[0] as usize];
                    } else if dim == nd - 1 {
                        for (d, &i) in d.iter_mut().zip(ir) {
                            *d = s[base + i as usize];
                        }
                    } else {
                        let st = xs[dim];
                        for (j, (d, &i)) in d.iter_mut().zip(ir).enumerate() {
                            *d = s[base + j + i as usize * st];
                        }
                    }
                })
            });
        }
        Tensor::from_vec(out, &ishape)
    })
}

/// Kernel of `index_select`: `(x, dim, indices)`.
pub type IndexSelectFn = fn(&Tensor, usize, &[i64], &Par) -> Result<Tensor>;
/// Kernel of `gather`: `(x, dim, index, index values)`.
pub type GatherFn = fn(&Tensor, usize, &Tensor, &[i64], &Par) -> Result<Tensor>;

/// `torch.index_select`: one copy per selected row (no accumulation, so thread-invariant).
pub static INDEX_SELECT: Op<IndexSelectFn> = Op {
    name: "index_select",
    impls: &[Impl {
        algo: "index_select.row_copy",
        guarantee: Guarantee::ThreadInvariant,
        f: index_select_kernel,
    }],
};

/// `torch.gather`: one read per output element (thread-invariant).
pub static GATHER: Op<GatherFn> = Op {
    name: "gather",
    impls: &[Impl {
        algo: "gather.elementwise",
        guarantee: Guarantee::ThreadInvariant,
        f: gather_kernel,
    }],
};

impl Tensor {
    /// `torch.index_select(x, dim, index)`: the rows `index` (a 0-d or 1-d `i64` tensor) along
    /// `dim`.
    ///
    /// # Errors
    /// A bad `dim`, a non-`i64` or multi-dimensional index, or an index outside `0..size`.
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        one_dim(OP, "index", index)?;
        let idx = dense::<i64>(&ic)?;
        INDEX_SELECT.run(&[self, index], |imp, par| {
            check_indices(OP, idx, geom(self.shape(), d).1, par)?;
            (imp.f)(self, d, idx, par)
        })
    }

    /// `torch.gather(x, dim, index)`: `out[p] = x[p with dim replaced by index[p]]`; the
    /// output has `index`'s shape.
    ///
    /// # Errors
    /// A bad `dim`, a non-`i64` index, an index with another number of dimensions or a larger
    /// size than `x` outside `dim`, or an index outside `0..x.size(dim)`.
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "gather";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        check_index_shape(OP, self.shape(), index.shape(), d, None)?;
        let idx = dense::<i64>(&ic)?;
        GATHER.run(&[self, index], |imp, par| {
            check_indices(OP, idx, geom(self.shape(), d).1, par)?;
            (imp.f)(self, d, &ic, idx, par)
        })
    }
}

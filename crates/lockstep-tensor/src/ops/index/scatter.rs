//! `scatter_add`: its element-index kernels (destination `[outer, n, inner]`, index and source
//! `[outer, m, inner]`), its registration and its `Tensor` method.

use super::common::{
    AccElem, acc_op, check_index_shape, check_indices, dense_mut, dim_of, fresh_copy, geom,
    index_tensor, same_dtype, with_acc,
};
use super::rows::{RowAddFn, RowGeom, RowGeomPub, Task, line_shift, rg, row_fns, run_rows, tasks};
use crate::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::contiguous_strides;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::ops::reduce::{dense, zeroed_vec};
use crate::threads::Par;
use rayon::prelude::*;
use std::sync::Mutex;

pub(super) fn scatter_det<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    par: &Par,
) {
    let RowGeom { outer, n, m, inner } = g;
    if dst.is_empty() || src.is_empty() {
        return;
    }
    let nb = scatter_blocks(g);
    if nb > 1 {
        return scatter_det_blocks(dst, src, idx, g, nb, par);
    }
    let threads = if src.len() < 1 << 15 {
        1
    } else {
        par.threads()
    };
    let ts = tasks(outer, n, inner, threads, true, line_shift(dst));
    let dp = SyncPtr(dst.as_mut_ptr());
    let run = |t: &Task| {
        let (r0, r1) = t.r;
        let (c0, c1) = t.c;
        for o in t.o.0..t.o.1 {
            for k in 0..m {
                let base = (o * m + k) * inner;
                let ir = &idx[base + c0..base + c1];
                let sr = &src[base + c0..base + c1];
                let dbase = o * n * inner + c0;
                for (j, (&r, &s)) in ir.iter().zip(sr).enumerate() {
                    let r = r as usize;
                    if r >= r0 && r < r1 {
                        // SAFETY: in bounds (indices checked); this task alone owns rows
                        // r0..r1 × columns c0..c1 of its outer range.
                        unsafe {
                            let p = dp.get().add(dbase + r * inner + j);
                            *p = T::add(*p, s);
                        }
                    }
                }
            }
        }
    };
    if ts.len() <= 1 {
        ts.iter().for_each(run);
    } else {
        par.install(|| ts.par_iter().for_each(run));
    }
}

/// Number of source blocks of the deterministic scatter kernel (a function of the shapes only):
/// partials when there are at least 16 source elements per destination element, 8192 source
/// rows per block, up to 16 blocks. More blocks than [`row_blocks`](super::rows::row_blocks)
/// gives: the blocks are the only parallelism of [`scatter_det_blocks`].
fn scatter_blocks(g: RowGeom) -> usize {
    let src = g.outer * g.m * g.inner;
    let dst = (g.outer * g.n * g.inner).max(1);
    (src / (8 * dst)).min(g.m / 8192).clamp(1, 16)
}

/// [`rows_det_blocks`](super::rows::rows_det_blocks) per element: source-row blocks fixed by
/// the shapes, each summed in order into a private buffer, the partials added per element in
/// block order.
fn scatter_det_blocks<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    nb: usize,
    par: &Par,
) {
    let RowGeom { outer, n, m, inner } = g;
    let len = dst.len();
    let mut parts = zeroed_vec::<T>(nb * len);
    par.install(|| {
        parts.par_chunks_mut(len).enumerate().for_each(|(b, p)| {
            let (k0, k1) = (m * b / nb, m * (b + 1) / nb);
            for o in 0..outer {
                let dbase = o * n * inner;
                for k in k0..k1 {
                    let base = (o * m + k) * inner;
                    let ir = &idx[base..base + inner];
                    let sr = &src[base..base + inner];
                    for (j, (&r, &v)) in ir.iter().zip(sr).enumerate() {
                        let q = dbase + r as usize * inner + j;
                        p[q] = T::add(p[q], v);
                    }
                }
            }
        })
    });
    combine_blocks(dst, &parts, nb, par);
}

/// `dst[e] += parts[0][e] + … + parts[nb-1][e]`, one addition at a time in block order.
fn combine_blocks<T: AccElem>(dst: &mut [T], parts: &[T], nb: usize, par: &Par) {
    let len = dst.len();
    const C: usize = 1 << 12;
    par.install(|| {
        dst.par_chunks_mut(C).enumerate().for_each(|(c, d)| {
            let lo = c * C;
            for b in 0..nb {
                let p = &parts[b * len + lo..b * len + lo + d.len()];
                for (d, &v) in d.iter_mut().zip(p) {
                    *d = T::add(*d, v);
                }
            }
        })
    });
}

/// As [`rows_nondet`](super::rows::rows_nondet), per element.
fn scatter_nondet<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    par: &Par,
    atomic: bool,
) {
    let RowGeom { outer, n, m, inner } = g;
    let threads = par.threads();
    if threads == 1 || src.len() < 1 << 15 || dst.is_empty() {
        return scatter_det(dst, src, idx, g, par);
    }
    let buffers = dst.len() * threads <= src.len();
    if !atomic && !buffers {
        return scatter_det(dst, src, idx, g, par);
    }
    // Source rows (o, k) flattened, one contiguous range per thread; `add(q, v)` adds `v` at
    // destination element `q`.
    let rows = outer * m;
    let per = rows.div_ceil(threads);
    /// Calls `add(destination element, value)` for source rows `r0..r1` in order.
    #[inline(always)]
    fn visit<T: Copy>(
        (idx, src): (&[i64], &[T]),
        (r0, r1): (usize, usize),
        (m, n, inner): (usize, usize, usize),
        mut add: impl FnMut(usize, T),
    ) {
        for row in r0..r1 {
            let dbase = (row / m) * n * inner;
            let ir = &idx[row * inner..(row + 1) * inner];
            let sr = &src[row * inner..(row + 1) * inner];
            for (j, (&r, &v)) in ir.iter().zip(sr).enumerate() {
                add(dbase + r as usize * inner + j, v);
            }
        }
    }
    let range = |t: usize| (t * per, ((t + 1) * per).min(rows));
    if !atomic {
        let total = Mutex::new(dst);
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                let mut buf = vec![T::default(); outer * n * inner];
                visit((idx, src), range(t), (m, n, inner), |q, v| {
                    buf[q] = T::add(buf[q], v)
                });
                let mut out = total.lock().unwrap_or_else(|e| e.into_inner());
                for (d, &b) in out.iter_mut().zip(&buf) {
                    *d = T::add(*d, b);
                }
            })
        });
    } else {
        let dp = SyncPtr(dst.as_mut_ptr());
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                // SAFETY: in bounds (indices checked); all concurrent access is atomic.
                visit((idx, src), range(t), (m, n, inner), |q, v| unsafe {
                    T::atomic_add(dp.get().add(q), v)
                });
            })
        });
    }
}

/// Sequential scatter for index shapes smaller than `src`/`self` in some dimension: visits the
/// index positions in row-major order (the order both policies' kernels use).
fn scatter_general<T: AccElem>(
    dst: &mut [T],
    dshape: &[usize],
    src: &[T],
    sshape: &[usize],
    idx: &[i64],
    ishape: &[usize],
    dim: usize,
) {
    let ds = contiguous_strides(dshape);
    let ss = contiguous_strides(sshape);
    let nd = ishape.len();
    let mut pos = vec![0usize; nd];
    for &r in idx {
        let mut so = 0;
        let mut d_o = 0;
        for d in 0..nd {
            so += pos[d] * ss[d];
            d_o += if d == dim { r as usize } else { pos[d] } * ds[d];
        }
        dst[d_o] = T::add(dst[d_o], src[so]);
        for d in (0..nd).rev() {
            pos[d] += 1;
            if pos[d] < ishape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
}

pub(super) fn scatter_buffers<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    scatter_nondet(d, s, i, g, p, false);
}
pub(super) fn scatter_atomic<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    scatter_nondet(d, s, i, g, p, true);
}

const SCATTER_ATOMIC: RowAddFn = row_fns!(scatter_atomic);
const SCATTER_NONDET: RowAddFn = row_fns!(scatter_buffers);
const SCATTER_DET: RowAddFn = row_fns!(scatter_det);

acc_op!(
    /// `Tensor.scatter_add`: source elements added at the positions the index names.
    SCATTER_ADD: RowAddFn, "scatter_add", "scatter_add.source_parallel", "scatter_add.dest_partitioned", "scatter_add.atomic", SCATTER_NONDET, SCATTER_DET, SCATTER_ATOMIC
);

impl Tensor {
    /// `Tensor.scatter_add(dim, index, src)`: a copy of `self` with `src[p]` added at
    /// `p with dim replaced by index[p]` for every position `p` of `index`.
    ///
    /// # Errors
    /// A bad `dim`; a non-`i64` index; `src` of another dtype; `index` with another number of
    /// dimensions, larger than `src` anywhere or than `self` outside `dim`; an index outside
    /// `0..self.size(dim)`; [`Error::Nondeterministic`] cannot happen.
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "scatter_add";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        same_dtype(OP, self.dtype(), src)?;
        check_index_shape(OP, self.shape(), index.shape(), d, Some(src.shape()))?;
        let idx = dense::<i64>(&ic)?;
        let (outer, n, inner) = geom(self.shape(), d);
        let mut out = fresh_copy(OP, self)?;
        let fast = index.ndim() == 0
            || (index.shape() == src.shape()
                && (0..index.ndim()).all(|a| a == d || index.shape()[a] == self.shape()[a]));
        if fast {
            let m = if index.ndim() == 0 {
                1
            } else {
                index.shape()[d]
            };
            let g = RowGeomPub { outer, n, m, inner };
            run_rows(&SCATTER_ADD, &mut out, src, idx, g, true)?;
        } else {
            let sc = src.contiguous_for("scatter_add")?;
            let (ds, ss, is) = (
                self.shape().to_vec(),
                src.shape().to_vec(),
                index.shape().to_vec(),
            );
            SCATTER_ADD.run_inplace(&mut out, &[index, src], |_, par, out| {
                check_indices(OP, idx, n, par)?;
                with_acc!(OP, self.dtype(), T => {
                    scatter_general(dense_mut::<T>(out)?, &ds, dense::<T>(&sc)?, &ss, idx, &is, d);
                Ok::<(), Error>(())
                })
            })?;
        }
        Ok(out)
    }
}

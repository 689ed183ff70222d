//! `sum` over the whole tensor (a deterministic fixed-tree kernel and a completion-order one)
//! and `sum` along a dimension (strided lines summed in the same fixed order), with `mean`.

use super::buf::dense;
use super::lanes::{CHUNK, LANES, LaneSum, sum_lanes, tree_sum};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::resolve_dim;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::matmul::Isa;
use crate::threads::Par;
use crate::{Tensor, invalid};
use std::sync::Mutex;

/// [`sum_lanes`] of each [`CHUNK`]-element piece of `x` (the last may be shorter), into
/// `out` (one value per piece), four pieces at a time where [`LaneSum::lane_sums4`] has a path.
pub(super) fn piece_sums<T: LaneSum>(x: &[T], out: &mut [T], isa: Isa) {
    let mut quads = x.chunks_exact(4 * CHUNK);
    let mut o = 0;
    for q in &mut quads {
        match T::lane_sums4(q, isa) {
            Some(l) => {
                for mut l in l {
                    out[o] = tree_sum(&mut l);
                    o += 1;
                }
            }
            None => {
                for c in q.chunks(CHUNK) {
                    out[o] = sum_lanes(c);
                    o += 1;
                }
            }
        }
    }
    for c in quads.remainder().chunks(CHUNK) {
        out[o] = sum_lanes(c);
        o += 1;
    }
}

/// Deterministic sum of a slice using `par`: identical bits at any thread count. The pieces'
/// sums are independent, so the threads take contiguous runs of pieces (long sequential
/// streams for the prefetchers) and [`tree_sum`] combines them in index order.
pub fn sum_det<T: LaneSum>(x: &[T], par: &Par) -> T {
    if x.len() <= CHUNK {
        return sum_lanes(x);
    }
    let pieces = x.len().div_ceil(CHUNK);
    let mut partials = vec![T::default(); pieces];
    let isa = Isa::best();
    let threads = par.threads().min(pieces / 4).max(1);
    if threads == 1 {
        piece_sums(x, &mut partials, isa);
    } else {
        // Runs of whole quads of pieces, so that the split changes no piece.
        let per = pieces.div_ceil(threads).next_multiple_of(4);
        par.for_each_chunk_mut(&mut partials, per, |i, o| {
            let lo = i * per * CHUNK;
            piece_sums(&x[lo..(lo + per * CHUNK).min(x.len())], o, isa)
        });
    }
    tree_sum(&mut partials)
}

/// Nondeterministic sum: one contiguous range per thread (each summed as [`sum_det`] sums a
/// slice, so as accurately), the per-thread sums added in completion order.
pub fn sum_nondet<T: LaneSum>(x: &[T], par: &Par) -> T {
    let threads = par.threads();
    if threads == 1 || x.len() <= 4 * CHUNK {
        return sum_det(x, par);
    }
    let total = Mutex::new(T::default());
    let per = x.len().div_ceil(threads).next_multiple_of(CHUNK);
    par.run_parts(x.len().div_ceil(per), |i| {
        let c = &x[i * per..((i + 1) * per).min(x.len())];
        let mut p = vec![T::default(); c.len().div_ceil(CHUNK)];
        piece_sums(c, &mut p, Isa::best());
        let s = tree_sum(&mut p);
        let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
        *t = *t + s;
    });
    total.into_inner().unwrap_or_else(|e| e.into_inner())
}

type SumFn = fn(&Tensor, &Par) -> Result<Tensor>;

fn full_sum(x: &Tensor, par: &Par, det: bool) -> Result<Tensor> {
    let x = x.contiguous_for("sum")?;
    match x.dtype() {
        DType::F32 => {
            let d = dense::<f32>(&x)?;
            Ok(Tensor::scalar(if det {
                sum_det(d, par)
            } else {
                sum_nondet(d, par)
            }))
        }
        DType::F64 => {
            let d = dense::<f64>(&x)?;
            Ok(Tensor::scalar(if det {
                sum_det(d, par)
            } else {
                sum_nondet(d, par)
            }))
        }
        DType::I64 | DType::U8 | DType::Bool => {
            // Integer sums are exact in any order: one kernel serves both policies.
            let v = x.to_f64_vec();
            let s: i64 = match x.dtype() {
                DType::I64 => dense::<i64>(&x)?
                    .iter()
                    .fold(0i64, |a, &b| a.wrapping_add(b)),
                _ => v.iter().map(|&f| f as i64).sum(),
            };
            Ok(Tensor::scalar(s))
        }
    }
}

/// `torch.sum(x)`: the sum of all elements (integers sum to `i64`, floats in their own dtype).
pub static SUM: Op<SumFn> = Op {
    name: "sum",
    impls: &[
        Impl {
            algo: "sum.completion_order",
            guarantee: Guarantee::NotGuaranteed,
            f: |x, par| full_sum(x, par, false),
        },
        Impl {
            algo: "sum.fixed_tree",
            guarantee: Guarantee::ThreadInvariant,
            f: |x, par| full_sum(x, par, true),
        },
    ],
};

/// `torch.sum(x, dim)`: one implementation, each output the fixed-order sum of its line (the
/// bits of [`sum_det`] over the line, whatever its stride: [`CHUNK`]-element pieces, each in
/// [`LANES`] lanes folded by a fixed tree, the pieces combined by [`tree_sum`]) — so its error
/// grows like a pairwise sum's, not like a sequential one's, and it gives the bits of
/// [`Tensor::mean_dim`] times the count. Thread-invariant. Through dispatch so that it can be
/// traced and counted like every op.
pub static SUM_DIM: Op<()> = Op {
    name: "sum_dim",
    impls: &[Impl {
        algo: "sum_dim.fixed_tree",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// Inputs of at most this many elements are reduced on the calling thread (a pool hop costs
/// more); a function of the shape only, and no kernel's order depends on it.
pub(super) const SERIAL_MAX: usize = 1 << 15;

/// Column tile of [`col_sums`] in bytes per lane row: [`LANES`] rows of this many bytes (16 KiB
/// in all) stay in L1 while the rows stream past. Speed only: no order depends on it.
const COL_TILE_BYTES: usize = 1 << 10;

/// The pairwise tree of [`tree_sum`] applied column by column to `rows` rows of `w` elements
/// (row `r` at `v[r * w..]`); the result is left in row 0. Computed in place with a doubling
/// stride (level `s` adds row `(2i + 1)·s` into row `2i·s`), which pairs the same partial sums
/// in the same operand order as moving each level's results down to rows `0..⌈n / 2⌉` would
/// (an odd level's last sum passes through), so every row addition is one [`add_into`].
///
/// Rows `live..rows` are taken to be `+0` and are never read: an addition whose right operand
/// covers only such rows is skipped, which leaves the bits unchanged because `a + (+0) = a` for
/// every `a` but `-0`, and a sum that starts from `+0` is never `-0` (round to nearest gives
/// `-0` only for `-0 + -0`). Sums of fewer rows than [`LANES`] so skip most of the tree.
fn tree_rows<T: LaneSum>(v: &mut [T], rows: usize, w: usize, live: usize) {
    let (mut n, mut stride) = (rows, 1);
    while n > 1 {
        for i in 0..n / 2 {
            if (2 * i + 1) * stride >= live {
                break;
            }
            let (lo, hi) = v.split_at_mut((2 * i + 1) * stride * w);
            add_into(&mut lo[2 * i * stride * w..][..w], &hi[..w]);
        }
        n = n.div_ceil(2);
        stride *= 2;
    }
}

/// `acc[i] = acc[i] + v[i]` over the shorter length, built for the widest vectors the path in
/// use allows: each element's one addition, so every build gives the same bits.
#[inline]
pub(crate) fn add_into<T: LaneSum>(acc: &mut [T], v: &[T]) {
    #[inline(always)]
    fn imp<T: LaneSum>(acc: &mut [T], v: &[T]) {
        for (a, &x) in acc.iter_mut().zip(v) {
            *a = *a + x;
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn w512<T: LaneSum>(acc: &mut [T], v: &[T]) {
            imp(acc, v)
        }
        #[target_feature(enable = "avx2")]
        fn w256<T: LaneSum>(acc: &mut [T], v: &[T]) {
            imp(acc, v)
        }
        if Isa::Avx512.enabled() && Isa::Avx512.available() {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { w512(acc, v) };
        }
        if Isa::Avx2.enabled() && Isa::Avx2.available() {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { w256(acc, v) };
        }
    }
    imp(acc, v)
}

/// `s[..w] = S(0, blocks)` for `blocks` rows of `w` elements (row `t` at `s[t·w..]`): the
/// fixed binary tree over row index, `S(lo, hi) = S(lo, mid) + S(mid, hi)` with
/// `mid = lo + ⌈(hi − lo) / 2⌉`, the left operand first, one addition per element (so every
/// path gives the same bits); rows past the first are left holding partial sums. The micro-shard
/// tree of `matmul_k_blocks` and `sum_dim0_blocks`: the instruction set is chosen once for the
/// whole tree, not once per row addition (the rows are short, a tile or a bias).
pub(crate) fn tree_blocks<T: LaneSum>(s: &mut [T], blocks: usize, w: usize) {
    macro_rules! tree_fn {
        ($name:ident $(, $feat:literal)?) => {
            $(#[target_feature(enable = $feat)])?
            fn $name<T: LaneSum>(s: &mut [T], lo: usize, hi: usize, w: usize) {
                if hi - lo <= 1 {
                    return;
                }
                let mid = lo + (hi - lo).div_ceil(2);
                $name(s, lo, mid, w);
                $name(s, mid, hi, w);
                let (left, right) = s.split_at_mut(mid * w);
                for (a, &x) in left[lo * w..(lo + 1) * w].iter_mut().zip(&right[..w]) {
                    *a = *a + x;
                }
            }
        };
    }
    assert!(
        s.len() >= blocks * w,
        "tree_blocks: fewer than {blocks} rows of {w}"
    );
    #[cfg(target_arch = "x86_64")]
    {
        tree_fn!(w512, "avx512f");
        tree_fn!(w256, "avx2");
        if Isa::Avx512.enabled() && Isa::Avx512.available() {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { w512(s, 0, blocks, w) };
        }
        if Isa::Avx2.enabled() && Isa::Avx2.available() {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { w256(s, 0, blocks, w) };
        }
    }
    tree_fn!(portable);
    portable(s, 0, blocks, w)
}

/// Fixed-order sums of rows `k0..k1` (at most [`CHUNK`]) of an `[n, inner]` slab, for the
/// columns `c0..c0 + w`, into `dst` (`w` elements): row `k` goes to lane `(k - k0) mod LANES`
/// of its column, each lane in row order from `+0`, then the lanes are folded by the tree of
/// [`tree_sum`] — per column exactly the additions of [`sum_lanes`] over that column's piece.
/// `acc` is scratch of `LANES * w` elements.
#[allow(clippy::too_many_arguments)]
fn col_piece<T: LaneSum>(
    slab: &[T],
    inner: usize,
    c0: usize,
    w: usize,
    k0: usize,
    k1: usize,
    acc: &mut [T],
    dst: &mut [T],
) {
    let acc = &mut acc[..LANES * w];
    // Lanes past the rows' count stay +0 and are never read (see `tree_rows`).
    let live = (k1 - k0).min(LANES);
    acc[..live * w].fill(T::default());
    if w == inner {
        // Whole rows: a group of LANES rows is one contiguous block of LANES * inner elements,
        // added element by element to the lanes (row l of the group to lane l).
        let block = &slab[k0 * inner..k1 * inner];
        let mut groups = block.chunks_exact(LANES * inner);
        for g in &mut groups {
            add_into(acc, g);
        }
        add_into(acc, groups.remainder());
    } else {
        for k in k0..k1 {
            let l = (k - k0) % LANES;
            let row = &slab[k * inner + c0..k * inner + c0 + w];
            add_into(&mut acc[l * w..(l + 1) * w], row);
        }
    }
    tree_rows(acc, LANES, w, live);
    dst.copy_from_slice(&acc[..w]);
}

/// Sums `[outer, n, inner]` over `n` into `[outer, inner]`: each output the bits of
/// [`sum_det`] over its line at any thread count (parallel over outer slices, pieces of
/// [`CHUNK`] rows and column tiles; the pieces of a line combined by [`tree_rows`]).
fn col_sums<T: LaneSum>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    par: &Par,
) -> Result<Vec<T>> {
    let mut out = crate::try_filled_vec("sum_dim", outer * inner, T::default())?;
    col_sums_into(x, outer, n, inner, par, &mut out)?;
    Ok(out)
}

/// [`col_sums`] into `out` (`outer * inner` elements, every one written; `+0` where `n` is 0).
pub(super) fn col_sums_into<T: LaneSum>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    par: &Par,
    out: &mut [T],
) -> Result<()> {
    if n == 0 || out.is_empty() {
        out.fill(T::default());
        return Ok(());
    }
    let tile = (COL_TILE_BYTES / core::mem::size_of::<T>()).max(1);
    let pieces = n.div_ceil(CHUNK);
    // Partials laid out [outer][piece][inner]; with one piece they are the output itself.
    let mut parts = if pieces == 1 {
        Vec::new()
    } else {
        crate::try_filled_vec("sum_dim", outer * pieces * inner, T::default())?
    };
    let buf: &mut [T] = if pieces == 1 { &mut *out } else { &mut parts };
    let work = |r: usize, row: &mut [T], acc: &mut Vec<T>| {
        let (o, p) = (r / pieces, r % pieces);
        let slab = &x[o * n * inner..(o + 1) * n * inner];
        let (k0, k1) = (p * CHUNK, ((p + 1) * CHUNK).min(n));
        let w = if inner <= 2 * tile { inner } else { tile };
        acc.resize(LANES * w, T::default());
        for (t, dst) in row.chunks_mut(w).enumerate() {
            col_piece(slab, inner, t * w, dst.len(), k0, k1, acc, dst);
        }
    };
    let rows = buf.len() / inner;
    if par.threads() == 1 || x.len() <= SERIAL_MAX {
        let mut acc = Vec::new();
        for (r, row) in buf.chunks_mut(inner).enumerate() {
            work(r, row, &mut acc);
        }
    } else if rows < par.threads() && inner >= 2 * LANES {
        // Fewer output rows than threads (a bias gradient: one row): each row's columns in
        // ranges, one per thread. A column's sum does not depend on its neighbours (see
        // `col_piece`): the same bits.
        let cols = inner.div_ceil(par.threads()).next_multiple_of(LANES);
        for (r, row) in buf.chunks_mut(inner).enumerate() {
            let (o, p) = (r / pieces, r % pieces);
            let slab = &x[o * n * inner..(o + 1) * n * inner];
            let (k0, k1) = (p * CHUNK, ((p + 1) * CHUNK).min(n));
            par.for_each_chunk_mut(row, cols, |i, dst| {
                let mut acc = Vec::new();
                for (t, d) in dst.chunks_mut(tile).enumerate() {
                    acc.resize(LANES * d.len(), T::default());
                    col_piece(
                        slab,
                        inner,
                        i * cols + t * tile,
                        d.len(),
                        k0,
                        k1,
                        &mut acc,
                        d,
                    );
                }
            });
        }
    } else {
        // Contiguous runs of rows, one scratch per run.
        let per = rows.div_ceil(par.threads());
        par.for_each_chunk_mut(buf, per * inner, |i, run| {
            let mut acc = Vec::new();
            for (j, row) in run.chunks_mut(inner).enumerate() {
                work(i * per + j, row, &mut acc);
            }
        });
    }
    if pieces > 1 {
        for (o, dst) in out.chunks_mut(inner).enumerate() {
            let p = &mut parts[o * pieces * inner..(o + 1) * pieces * inner];
            tree_rows(p, pieces, inner, pieces);
            dst.copy_from_slice(&p[..inner]);
        }
    }
    Ok(())
}

/// Sums `[outer, n, inner]` over `n` (see [`SUM_DIM`]): lines of stride 1 with [`sum_det`],
/// others with [`col_sums`] (the same order).
pub(super) fn sum_dim_kernel<T: LaneSum>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    par: &Par,
) -> Result<Vec<T>> {
    if inner != 1 {
        return col_sums(x, outer, n, inner, par);
    }
    let mut out = crate::try_filled_vec("sum_dim", outer, T::default())?;
    if par.threads() == 1 || outer == 1 || x.len() <= SERIAL_MAX {
        for (o, dst) in out.iter_mut().enumerate() {
            *dst = sum_det(&x[o * n..(o + 1) * n], par);
        }
    } else {
        let per = (SERIAL_MAX / n.max(1)).max(1);
        par.for_each_chunk_mut(&mut out, per, |i, run| {
            for (j, dst) in run.iter_mut().enumerate() {
                let o = i * per + j;
                *dst = sum_det(&x[o * n..(o + 1) * n], par);
            }
        });
    }
    Ok(out)
}

impl Tensor {
    /// `torch.sum(x)`: the sum of every element, through dispatch (`sum`).
    ///
    /// # Errors
    /// [`Error::Nondeterministic`] cannot happen (a deterministic kernel exists).
    pub fn sum(&self) -> Result<Tensor> {
        SUM.run(&[self], |imp, par| (imp.f)(self, par))
    }

    /// `torch.sum(x, dim, keepdim)`: deterministic at any thread count; each output is the
    /// fixed-order (blocked pairwise) sum of its line described at [`SUM_DIM`], the same bits
    /// as [`mean_dim`](Self::mean_dim) times the count would have before rounding.
    ///
    /// # Errors
    /// If `dim` is out of range, or the dtype is not a float.
    pub fn sum_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let d = resolve_dim("sum", dim, self.ndim())?;
        let shape = self.shape().to_vec();
        let outer: usize = shape[..d].iter().product();
        let inner: usize = shape[d + 1..].iter().product();
        let n = shape[d];
        let mut out_shape = shape.clone();
        if keepdim {
            out_shape[d] = 1;
        } else {
            out_shape.remove(d);
        }
        let x = self.contiguous_for("sum_dim")?;
        SUM_DIM.run(&[self], |_, par| match x.dtype() {
            DType::F32 => Tensor::from_vec(
                sum_dim_kernel(dense::<f32>(&x)?, outer, n, inner, par)?,
                &out_shape,
            ),
            DType::F64 => Tensor::from_vec(
                sum_dim_kernel(dense::<f64>(&x)?, outer, n, inner, par)?,
                &out_shape,
            ),
            got => Err(Error::DType {
                op: "sum",
                expected: DType::F32,
                got,
            }),
        })
    }

    /// `torch.mean(x)`: [`sum`](Self::sum) divided by the number of elements (floats only).
    ///
    /// # Errors
    /// If the dtype is not a float, or the tensor is empty.
    pub fn mean(&self) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::DType {
                op: "mean",
                expected: DType::F32,
                got: self.dtype(),
            });
        }
        if self.numel() == 0 {
            return Err(invalid("mean", "self", "mean of an empty tensor"));
        }
        let s = self.sum()?;
        let n = self.numel() as f64;
        match s.dtype() {
            DType::F32 => Ok(Tensor::scalar(s.item::<f32>()? / n as f32)),
            _ => Ok(Tensor::scalar(s.item::<f64>()? / n)),
        }
    }
}

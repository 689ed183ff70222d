//! The softmax family: logsumexp, softmax and log_softmax, one generic line kernel compiled
//! for each instruction set, with no fused operations (the same bits everywhere).

use super::buf::{dense, zeroed_vec};
use super::dim::{
    Geom, RedArgs, RedFn, det_op, dim_args, float_only, geom, one, red_geom, reduce_lines, run_red,
    with_float,
};
use super::lanes::{LANES, fold_lanes, fold_lanes_into, tree_sum};
use super::real::Real;
use super::sum::SERIAL_MAX;
use crate::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::matmul::Isa;
use crate::ops::matmul::kernel::prefetch;
use crate::threads::Par;

/// Same-shape output, line by line: `f(line_in, line_out)`.
fn map_lines<T: Real>(
    x: &[T],
    g: Geom,
    par: &Par,
    f: impl Fn(&[T], &mut [T]) + Sync + Send,
) -> Vec<T> {
    let mut out = zeroed_vec::<T>(x.len());
    let Geom { n, inner, .. } = g;
    if x.is_empty() || n == 0 {
        return out;
    }
    // On the team (no hop into rayon's pool), small inputs in one chunk (the caller alone):
    // every line is computed alone, so which thread runs it cannot change its bits.
    if inner == 1 {
        let lines = match par.threads() == 1 || x.len() <= SERIAL_MAX {
            true => x.len() / n,
            false => ((1 << 14) / n).max(1),
        };
        par.for_each_chunk_mut(&mut out, lines * n, |c, o| {
            let x = &x[c * lines * n..];
            for (o, i) in o.chunks_mut(n).zip(x.chunks(n)) {
                f(i, o);
            }
        });
    } else {
        par.for_each_chunk_mut(&mut out, n * inner, |c, ob| {
            let xb = &x[c * n * inner..(c + 1) * n * inner];
            let mut a = vec![T::default(); n];
            let mut b = vec![T::default(); n];
            for i in 0..inner {
                for k in 0..n {
                    a[k] = xb[k * inner + i];
                }
                f(&a, &mut b);
                for k in 0..n {
                    ob[k * inner + i] = b[k];
                }
            }
        });
    }
    out
}

/// Max of a line, NaN-propagating, in lanes (a value for shifting exponentials: order-free).
#[inline(always)]
pub(super) fn line_max_value<T: Real>(x: &[T]) -> T {
    let acc = fold_lanes(
        x,
        T::NEG_INFINITY,
        |a, v| if v > a || v.is_nan() { v } else { a },
    );
    let mut m = acc[0];
    for &v in &acc[1..] {
        m = if v > m || v.is_nan() { v } else { m };
        if m.is_nan() {
            return m;
        }
    }
    m
}

/// `ln Σ exp(x - m) + m`: the exponentials a block at a time, summed in lanes on the fly (the
/// bits of [`sum_lanes`] over all of them, without a buffer the size of the line).
fn line_logsumexp<T: Real>(x: &[T]) -> T {
    if x.is_empty() {
        return T::NEG_INFINITY;
    }
    let m = line_max_value(x);
    // As PyTorch: an infinite maximum is not subtracted (so all -inf gives -inf, +inf gives +inf).
    let m = if m == T::INFINITY || m == T::NEG_INFINITY {
        T::default()
    } else {
        m
    };
    const B: usize = 256;
    let (mut a, mut e) = ([T::default(); B], [T::default(); B]);
    let mut acc = [T::default(); LANES];
    for xc in x.chunks(B) {
        let (a, e) = (&mut a[..xc.len()], &mut e[..xc.len()]);
        for (a, &v) in a.iter_mut().zip(xc) {
            *a = v - m;
        }
        T::exp_slice(a, e);
        fold_lanes_into(&mut acc, e, |p, q| p + q);
    }
    tree_sum(&mut acc).ln() + m
}

/// Softmax (or log-softmax) of one line in three passes: the max (NaN-propagating, in lanes),
/// then `exp(x - m)` into `out` a block at a time with the lane sums taken on the fly (the
/// blocks are multiples of [`LANES`], so the lanes — and the bits — are those of
/// [`sum_lanes`] over `out`), then the scaling. The line stays in L1 after the first pass.
///
/// With `next`, the line that follows `x` in memory (the next one of a contiguous batch) is
/// prefetched during the exp pass, which is compute-bound, so that its max pass reads cache
/// instead of memory (measured 20 % faster on 4096 × 4096).
#[inline(always)]
fn softmax_line_generic<T: Real>(x: &[T], out: &mut [T], log: bool, next: bool) {
    let m = line_max_value(x);
    const B: usize = 256;
    let mut buf = [T::default(); B];
    let mut acc = [T::default(); LANES];
    let nx = x.as_ptr_range().end.cast::<u8>();
    for (j, (xc, oc)) in x.chunks(B).zip(out.chunks_mut(B)).enumerate() {
        if next {
            let blk = B * core::mem::size_of::<T>();
            prefetch(nx.wrapping_add(j * blk), 0..blk.div_ceil(64), true);
        }
        let b = &mut buf[..xc.len()];
        for (b, &v) in b.iter_mut().zip(xc) {
            *b = v - m;
        }
        T::exp_inline(b, oc);
        fold_lanes_into(&mut acc, oc, |a, v| a + v);
    }
    let s = tree_sum(&mut acc);
    if log {
        // (x - m) - ln Σ exp(x - m).
        let ls = s.ln();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - m) - ls;
        }
    } else {
        // Multiplied by the reciprocal, as PyTorch's vectorised kernel does.
        let inv = T::from_f64(1.0) / s;
        for o in out.iter_mut() {
            *o = *o * inv;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn softmax_line_avx2<T: Real>(x: &[T], out: &mut [T], log: bool, next: bool) {
    softmax_line_generic(x, out, log, next);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn softmax_line_avx512<T: Real>(x: &[T], out: &mut [T], log: bool, next: bool) {
    softmax_line_generic(x, out, log, next);
}

/// Softmax (or log-softmax) of one line, numerically stable (the max is subtracted first),
/// with the instructions of `isa` (a path the CPU supports; the same bits on every path: no
/// operation is fused and the lanes are fixed); `next`: prefetch the memory after `x` (the
/// next line).
pub(super) fn softmax_line<T: Real>(x: &[T], out: &mut [T], log: bool, isa: Isa, next: bool) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: the caller passes a path the CPU supports (`Isa::best`).
        Isa::Avx512 => return unsafe { softmax_line_avx512(x, out, log, next) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { softmax_line_avx2(x, out, log, next) },
        Isa::Portable => {}
    }
    let _ = isa;
    softmax_line_generic(x, out, log, next);
}

fn logsumexp_kernel(x: &Tensor, a: &RedArgs, par: &Par) -> Result<Vec<Tensor>> {
    let (g, shape) = red_geom(x, a);
    let xc = x.contiguous_for("logsumexp")?;
    with_float!("logsumexp", x, T => {
        let d = dense::<T>(&xc)?;
        let v = reduce_lines(d, g, par, line_logsumexp);
        Ok(vec![Tensor::from_vec(v, &shape)?])
    })
}

fn softmax_kernel(x: &Tensor, a: &RedArgs, par: &Par, log: bool) -> Result<Vec<Tensor>> {
    let g = match a.dim {
        Some(d) => geom(x.shape(), d),
        None => Geom {
            outer: 1,
            n: x.numel(),
            inner: 1,
        },
    };
    let xc = x.contiguous_for(if log { "log_softmax" } else { "softmax" })?;
    let isa = Isa::best();
    with_float!(if log { "log_softmax" } else { "softmax" }, x, T => {
        let data = dense::<T>(&xc)?;
        let next = g.inner == 1;
        let v = map_lines(data, g, par, |i, o| softmax_line(i, o, log, isa, next));
        Ok(vec![Tensor::from_vec(v, x.shape())?])
    })
}

det_op!(
    /// `torch.logsumexp`: max-shifted, fixed-order sum of exponentials.
    LOGSUMEXP, "logsumexp", "logsumexp.fixed_lanes", logsumexp_kernel
);
det_op!(
    /// `torch.softmax`: per line, max-shifted, fixed-order sum.
    SOFTMAX, "softmax", "softmax.fixed_lanes", |x, a, p| softmax_kernel(x, a, p, false)
);
det_op!(
    /// `torch.log_softmax`: per line, `x - max - ln Σ exp(x - max)`.
    LOG_SOFTMAX, "log_softmax", "log_softmax.fixed_lanes", |x, a, p| softmax_kernel(x, a, p, true)
);

impl Tensor {
    /// `torch.logsumexp(x, dim, keepdim)`: `ln Σ exp(x)`, computed as `m + ln Σ exp(x - m)`.
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn logsumexp(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let a = dim_args("logsumexp", self, dim, keepdim, 0.0)?;
        float_only("logsumexp", self)?;
        run_red(&LOGSUMEXP, self, a).map(one)
    }

    /// `torch.softmax(x, dim)`.
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        let a = dim_args("softmax", self, dim, false, 0.0)?;
        float_only("softmax", self)?;
        run_red(&SOFTMAX, self, a).map(one)
    }

    /// `torch.log_softmax(x, dim)`.
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        let a = dim_args("log_softmax", self, dim, false, 0.0)?;
        float_only("log_softmax", self)?;
        run_red(&LOG_SOFTMAX, self, a).map(one)
    }
}

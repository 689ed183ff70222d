//! Histograms: `bincount` and `histc` (many inputs, few bins), with their fixed-block
//! deterministic kernel and their per-thread-buffer kernel.

use super::common::{AccElem, acc_op, index_tensor};
use crate::dispatch::{Guarantee, Impl, Op};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::reduce::dense;
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::Mutex;

/// Number of blocks the deterministic histogram cuts `n` inputs into for `bins` bins: a
/// function of the shapes only (at least 2^16 inputs per block, at most 64 blocks, and the
/// block partials together at most half as many values as the input).
fn hist_blocks(n: usize, bins: usize) -> usize {
    let by_len = (n >> 16).clamp(1, 64);
    let by_mem = (n / bins.max(1).saturating_mul(2)).max(1);
    by_len.min(by_mem)
}

/// What a histogram counts.
#[derive(Clone, Copy, Debug)]
pub enum HistInput<'a> {
    /// Values that are bin numbers already (`bincount`; checked non-negative).
    Bins(&'a [i64]),
    /// `f32` values binned in `bins` equal bins over `[lo, hi]` (`histc`).
    F32 {
        /// The values.
        x: &'a [f32],
        /// Left edge.
        lo: f32,
        /// Right edge.
        hi: f32,
    },
    /// `f64` values binned in `bins` equal bins over `[lo, hi]` (`histc`).
    F64 {
        /// The values.
        x: &'a [f64],
        /// Left edge.
        lo: f64,
        /// Right edge.
        hi: f64,
    },
}

/// Kernel of a histogram: `(input, weights or None for counts, number of bins, par)`; fails
/// with [`Error::OutOfMemory`] when the bins (or the kernel's buffers) cannot be allocated.
pub type HistFn<W> = fn(&HistInput<'_>, Option<&[W]>, usize, &Par) -> Result<Vec<W>>;

/// The op named by an allocation failure of the histogram kernels.
const OP_BUF: &str = "bincount/histc";

/// Deterministic histogram: fixed blocks, each counted in order, partials added per bin in
/// block order.
fn hist_det_g<W: AccElem>(
    bin: &(impl Fn(usize) -> usize + Sync),
    n: usize,
    w: &(impl Fn(usize) -> W + Sync),
    nbins: usize,
    par: &Par,
) -> Result<Vec<W>> {
    let nb = hist_blocks(n, nbins);
    let count = |lo: usize, hi: usize, out: &mut [W]| {
        for i in lo..hi {
            let b = bin(i);
            if b < nbins {
                out[b] = W::add(out[b], w(i));
            }
        }
    };
    let mut out = crate::try_filled_vec(OP_BUF, nbins, W::default())?;
    if nb == 1 || nbins == 0 {
        count(0, n, &mut out);
        return Ok(out);
    }
    if par.threads() == 1 {
        // The same additions with one partial buffer reused: block 0 counts straight into
        // `out` (`+0 + p0` is `p0`: a sum from `+0` is never `-0`), each later block into the
        // zeroed buffer, then added bin by bin in block order. Less memory touched than one
        // buffer per block.
        count(0, n / nb, &mut out);
        let mut buf = crate::try_filled_vec(OP_BUF, nbins, W::default())?;
        for b in 1..nb {
            if b > 1 {
                buf.fill(W::default());
            }
            count(n * b / nb, n * (b + 1) / nb, &mut buf);
            for (o, &v) in out.iter_mut().zip(&buf) {
                *o = W::add(*o, v);
            }
        }
        return Ok(out);
    }
    let len = nb.checked_mul(nbins).ok_or(Error::OutOfMemory {
        op: OP_BUF,
        bytes: nb as u128 * nbins as u128 * core::mem::size_of::<W>() as u128,
    })?;
    let mut parts = crate::try_filled_vec(OP_BUF, len, W::default())?;
    par.install(|| {
        parts
            .par_chunks_mut(nbins)
            .enumerate()
            .for_each(|(b, p)| count(n * b / nb, n * (b + 1) / nb, p))
    });
    par.install(|| {
        out.par_chunks_mut(1 << 12).enumerate().for_each(|(c, o)| {
            let lo = c << 12;
            for b in 0..nb {
                let p = &parts[b * nbins + lo..b * nbins + lo + o.len()];
                for (o, &v) in o.iter_mut().zip(p) {
                    *o = W::add(*o, v);
                }
            }
        })
    });
    Ok(out)
}

/// Nondeterministic histogram: one contiguous range per thread, buffers merged as threads
/// finish.
fn hist_nondet_g<W: AccElem>(
    bin: &(impl Fn(usize) -> usize + Sync),
    n: usize,
    w: &(impl Fn(usize) -> W + Sync),
    nbins: usize,
    par: &Par,
) -> Result<Vec<W>> {
    let t = par.threads();
    let count = |lo: usize, hi: usize, out: &mut [W]| {
        for i in lo..hi {
            let b = bin(i);
            if b < nbins {
                out[b] = W::add(out[b], w(i));
            }
        }
    };
    let mut out = crate::try_filled_vec(OP_BUF, nbins, W::default())?;
    if t == 1 || n < 1 << 15 {
        count(0, n, &mut out);
        return Ok(out);
    }
    let total = Mutex::new(out);
    par.install(|| {
        (0..t).into_par_iter().try_for_each(|k| {
            let mut buf = crate::try_filled_vec(OP_BUF, nbins, W::default())?;
            count(n * k / t, n * (k + 1) / t, &mut buf);
            let mut o = total.lock().unwrap_or_else(|e| e.into_inner());
            for (o, &b) in o.iter_mut().zip(&buf) {
                *o = W::add(*o, b);
            }
            Ok::<(), Error>(())
        })
    })?;
    Ok(total.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// `histc`'s bin of `v` (PyTorch's formula, in the input's precision); `usize::MAX` outside
/// `[lo, hi]` or NaN.
macro_rules! histc_bin {
    ($T:ty, $x:expr, $lo:expr, $hi:expr, $bins:expr) => {{
        let (x, lo, hi, bins) = ($x, $lo, $hi, $bins);
        let span = hi - lo;
        move |i: usize| {
            let v = x[i];
            if !(v >= lo && v <= hi) {
                return usize::MAX;
            }
            let p = ((v - lo) * bins as $T / span) as usize;
            if p >= bins { bins - 1 } else { p }
        }
    }};
}

fn hist_run<W: AccElem>(
    inp: &HistInput<'_>,
    w: Option<&[W]>,
    nbins: usize,
    par: &Par,
    det: bool,
) -> Result<Vec<W>> {
    macro_rules! go {
        ($bin:expr, $n:expr) => {{
            let bin = $bin;
            match w {
                Some(w) => {
                    let wf = |i: usize| w[i];
                    if det {
                        hist_det_g(&bin, $n, &wf, nbins, par)
                    } else {
                        hist_nondet_g(&bin, $n, &wf, nbins, par)
                    }
                }
                None => {
                    let wf = |_: usize| W::ONE;
                    if det {
                        hist_det_g(&bin, $n, &wf, nbins, par)
                    } else {
                        hist_nondet_g(&bin, $n, &wf, nbins, par)
                    }
                }
            }
        }};
    }
    match *inp {
        HistInput::Bins(x) => go!(|i: usize| x[i] as usize, x.len()),
        HistInput::F32 { x, lo, hi } => go!(histc_bin!(f32, x, lo, hi, nbins), x.len()),
        HistInput::F64 { x, lo, hi } => go!(histc_bin!(f64, x, lo, hi, nbins), x.len()),
    }
}

fn hist_det<W: AccElem>(
    inp: &HistInput<'_>,
    w: Option<&[W]>,
    nbins: usize,
    par: &Par,
) -> Result<Vec<W>> {
    hist_run(inp, w, nbins, par, true)
}

fn hist_nondet<W: AccElem>(
    inp: &HistInput<'_>,
    w: Option<&[W]>,
    nbins: usize,
    par: &Par,
) -> Result<Vec<W>> {
    hist_run(inp, w, nbins, par, false)
}

/// The histogram kernels of each weight type.
#[derive(Clone, Copy)]
pub struct HistKernels {
    f32: HistFn<f32>,
    f64: HistFn<f64>,
    i64: HistFn<i64>,
}

const HIST_NONDET: HistKernels = HistKernels {
    f32: hist_nondet,
    f64: hist_nondet,
    i64: hist_nondet,
};
const HIST_DET: HistKernels = HistKernels {
    f32: hist_det,
    f64: hist_det,
    i64: hist_det,
};

acc_op!(
    /// `torch.bincount`: counts (or summed weights) per value.
    BINCOUNT: HistKernels, "bincount", "bincount.thread_buffers", "bincount.fixed_blocks", HIST_NONDET, HIST_DET
);
acc_op!(
    /// `torch.histc`: equal-width bins between `min` and `max` (integer counts, so both
    /// kernels give the same values; the deterministic one is still the one deterministic mode
    /// picks).
    HISTC: HistKernels, "histc", "histc.thread_buffers", "histc.fixed_blocks", HIST_NONDET, HIST_DET
);

impl Tensor {
    /// `torch.bincount(x, weights, minlength)`: `x` 1-d non-negative `i64`; the count of each
    /// value (`i64`), or the sum of the weights at each value (`f32` for `f32` weights, else
    /// `f64`), of length `max(max(x) + 1, minlength)`.
    ///
    /// # Errors
    /// `x` not 1-d `i64`, a negative value, weights of another length.
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: usize) -> Result<Tensor> {
        const OP: &str = "bincount";
        let xc = index_tensor(OP, self)?;
        if self.ndim() != 1 {
            return Err(invalid(
                OP,
                "self",
                format!(
                    "bincount only supports 1-d non-negative integral inputs, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        let x = dense::<i64>(&xc)?;
        // One pass for the smallest (must be >= 0) and the largest value (the bin count).
        let minmax = |c: &[i64]| {
            c.iter()
                .fold((i64::MAX, i64::MIN), |(a, b), &v| (a.min(v), b.max(v)))
        };
        let (mn, mx) = if x.len() > 1 << 20 {
            let par = crate::threads::Par::current();
            par.install(|| {
                x.par_chunks(1 << 18)
                    .map(minmax)
                    .reduce(|| (i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)))
            })
        } else {
            minmax(x)
        };
        if !x.is_empty() && mn < 0 {
            return Err(invalid(
                OP,
                "self",
                format!("bincount only supports non-negative inputs, got {mn}"),
            ));
        }
        // `mx + 1` bins (2^63 for i64::MAX: refused below as out of memory, not a panic).
        let nbins = if x.is_empty() { 0 } else { mx as usize + 1 }.max(minlength);
        let inp = HistInput::Bins(x);
        let c = BINCOUNT.select()?;
        let out = match weights {
            None => {
                let v = (c.imp.f.i64)(&inp, None, nbins, &c.par)?;
                Tensor::from_vec(v, &[nbins])
            }
            Some(w) => {
                if w.shape() != self.shape() {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        lhs: self.shape().to_vec(),
                        rhs: w.shape().to_vec(),
                    });
                }
                let wc = w.contiguous();
                if w.dtype() == DType::F32 {
                    let wd = dense::<f32>(&wc)?;
                    let v = (c.imp.f.f32)(&inp, Some(wd), nbins, &c.par)?;
                    Tensor::from_vec(v, &[nbins])
                } else {
                    let wd = wc.to_f64_vec();
                    let v = (c.imp.f.f64)(&inp, Some(&wd), nbins, &c.par)?;
                    Tensor::from_vec(v, &[nbins])
                }
            }
        };
        crate::trace::traced(OP, c.imp.algo, &[self], out)
    }

    /// `torch.histc(x, bins, min, max)`: counts in `bins` equal-width bins over `[min, max]`
    /// (values outside, and NaN, ignored; `min == max` takes the data's range), in `x`'s dtype.
    ///
    /// # Errors
    /// `x` not a float tensor, `bins == 0`, `min > max`, or a non-finite range.
    pub fn histc(&self, bins: usize, min: f64, max: f64) -> Result<Tensor> {
        const OP: &str = "histc";
        if bins == 0 {
            return Err(invalid(OP, "bins", "bins must be > 0"));
        }
        if min > max {
            return Err(invalid(
                OP,
                "max",
                format!("max must be larger than min, got min={min}, max={max}"),
            ));
        }
        let c = HISTC.select()?;
        let xc = self.contiguous();
        macro_rules! go {
            ($T:ty, $V:ident) => {{
                let x = dense::<$T>(&xc)?;
                let (mut lo, mut hi) = (min as $T, max as $T);
                if lo == hi && !x.is_empty() {
                    lo = x.iter().copied().fold(<$T>::INFINITY, <$T>::min);
                    hi = x.iter().copied().fold(<$T>::NEG_INFINITY, <$T>::max);
                }
                if lo == hi {
                    lo -= 1.0;
                    hi += 1.0;
                }
                if !(lo.is_finite() && hi.is_finite()) {
                    return Err(invalid(
                        OP,
                        "min",
                        format!("range of [{lo}, {hi}] is not finite"),
                    ));
                }
                let inp = HistInput::$V { x, lo, hi };
                let v = (c.imp.f.i64)(&inp, None, bins, &c.par)?;
                let mut o: Vec<$T> = Vec::new();
                o.try_reserve_exact(bins).map_err(|_| Error::OutOfMemory {
                    op: OP,
                    bytes: bins as u128 * core::mem::size_of::<$T>() as u128,
                })?;
                o.extend(v.into_iter().map(|c| c as $T));
                Tensor::from_vec(o, &[bins])
            }};
        }
        let out = match self.dtype() {
            DType::F32 => go!(f32, F32),
            DType::F64 => go!(f64, F64),
            got => Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got,
            }),
        };
        crate::trace::traced(OP, c.imp.algo, &[self], out)
    }
}

//! Histograms: `bincount` and `histc` (many inputs, few bins), with their deterministic kernel
//! (each bin summed in index order, threads owning ranges of bins) and their per-thread-buffer
//! kernel.

use super::common::{AccElem, acc_op, index_tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::matmul::Isa;
use crate::ops::matmul::kernel::prefetch;
use crate::ops::reduce::dense;
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::Mutex;

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

/// Inputs below this many are counted on the calling thread by the plain sequential loop, in
/// both kernels (a pool hop costs more).
const SERIAL_MAX: usize = 1 << 15;

/// Inputs per block of [`count_range`]: the compacted block (bins and weights) stays in L1.
const RANGE_BLOCK: usize = 1024;

/// Bins of more than this many bytes are not expected in L2: [`count_seq`] prefetches the bin
/// [`PF_AHEAD`] inputs ahead (speed only; 16Mi inputs into 10^6 f32 bins on one thread took
/// 79 ms with it, 80 to 92 ms without; [`count_range`]'s smaller ranges did not gain).
const PF_BINS_BYTES: usize = 1 << 20;
/// How many inputs ahead the bin is prefetched.
const PF_AHEAD: usize = 16;

/// Adds to `out[b]` the weight of every input `i < n` whose bin is `b < out.len()`, in index
/// order: the plain sequential loop.
#[inline(always)]
fn count_seq<W: AccElem>(
    bin: &impl Fn(usize) -> usize,
    n: usize,
    w: &impl Fn(usize) -> W,
    out: &mut [W],
) {
    if core::mem::size_of_val(out) > PF_BINS_BYTES && n > PF_AHEAD {
        for i in 0..n - PF_AHEAD {
            prefetch(out.as_ptr().wrapping_add(bin(i + PF_AHEAD)), 0..1, true);
            let b = bin(i);
            if b < out.len() {
                out[b] = W::add(out[b], w(i));
            }
        }
        for i in n - PF_AHEAD..n {
            let b = bin(i);
            if b < out.len() {
                out[b] = W::add(out[b], w(i));
            }
        }
        return;
    }
    for i in 0..n {
        let b = bin(i);
        if b < out.len() {
            out[b] = W::add(out[b], w(i));
        }
    }
}

/// Compacts the inputs `s..e` (at most [`RANGE_BLOCK`]) whose bin `b` lies in
/// `lo..lo + len`: `b - lo` into `rel` and the weight into `wt`, in index order; returns how
/// many.
type Compact<'a, W> = dyn Fn(usize, usize, usize, usize, &mut [usize; RANGE_BLOCK], &mut [W; RANGE_BLOCK]) -> usize
    + Sync
    + 'a;

/// The portable [`Compact`]: no branch per input (a branch would be mispredicted half the
/// time with two ranges).
#[inline(always)]
fn compact_scalar<W: AccElem>(
    bin: &impl Fn(usize) -> usize,
    w: &impl Fn(usize) -> W,
    (s, e, lo, len): (usize, usize, usize, usize),
    rel: &mut [usize; RANGE_BLOCK],
    wt: &mut [W; RANGE_BLOCK],
) -> usize {
    let mut c = 0;
    for i in s..e {
        // Bins outside the range (and `usize::MAX`, histc's "no bin") wrap past `len`.
        let r = bin(i).wrapping_sub(lo);
        // `c <= i - s < RANGE_BLOCK`: the masks only spare the bounds checks.
        rel[c & (RANGE_BLOCK - 1)] = r;
        wt[c & (RANGE_BLOCK - 1)] = w(i);
        c += usize::from(r < len);
    }
    c
}

/// [`Compact`] for `bincount` with weights: AVX-512 compress where the path is enabled and
/// the weights are `f32` or `f64` (the same inputs in the same order as [`compact_scalar`]).
fn compact_bins<W: AccElem>(
    x: &[i64],
    w: &[W],
    simd: bool,
    (s, e, lo, len): (usize, usize, usize, usize),
    rel: &mut [usize; RANGE_BLOCK],
    wt: &mut [W; RANGE_BLOCK],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if simd {
        let (x, q) = (&x[s..e], rel.as_mut_ptr());
        match W::DTYPE {
            // SAFETY: `simd` is set only where AVX-512F is available; the dtype says `W` is
            // `f32` (`f64` below), so the casts reinterpret nothing; `x` and `w[s..e]` have
            // `e - s <= RANGE_BLOCK` elements, the size of `rel` and `wt`.
            DType::F32 => unsafe {
                let w = core::slice::from_raw_parts(w[s..e].as_ptr().cast::<f32>(), e - s);
                return x86::compact_f32(x, w, lo, len, q, wt.as_mut_ptr().cast());
            },
            // SAFETY: as above.
            DType::F64 => unsafe {
                let w = core::slice::from_raw_parts(w[s..e].as_ptr().cast::<f64>(), e - s);
                return x86::compact_f64(x, w, lo, len, q, wt.as_mut_ptr().cast());
            },
            _ => {}
        }
    }
    let _ = simd;
    compact_scalar(&|i| x[i] as usize, &|i| w[i], (s, e, lo, len), rel, wt)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    macro_rules! compact {
        ($name:ident, $t:ty, $load:expr, $compress:ident, $store:expr) => {
            /// [`super::compact_bins`] on one block: `x` and `w` of equal length, at most
            /// the length of `rel` and `wt`.
            ///
            /// # Safety
            /// AVX-512F; `rel` and `wt` valid for `x.len()` writes.
            #[target_feature(enable = "avx512f")]
            pub(super) unsafe fn $name(
                x: &[i64],
                w: &[$t],
                lo: usize,
                len: usize,
                rel: *mut usize,
                wt: *mut $t,
            ) -> usize {
                let (lov, lenv) = (_mm512_set1_epi64(lo as i64), _mm512_set1_epi64(len as i64));
                let mut c = 0;
                let mut i = 0;
                while i + 8 <= x.len() {
                    // SAFETY: i + 8 <= x.len() == w.len(), and c <= i, so the 8 stores at
                    // c stay within the x.len() the caller provides.
                    unsafe {
                        let r = _mm512_sub_epi64(_mm512_loadu_si512(x.as_ptr().add(i).cast()), lov);
                        let k = _mm512_cmplt_epu64_mask(r, lenv);
                        _mm512_storeu_si512(rel.add(c).cast(), _mm512_maskz_compress_epi64(k, r));
                        let v = $compress(k.into(), $load(w.as_ptr().add(i)));
                        $store(wt.add(c), v);
                        c += k.count_ones() as usize;
                    }
                    i += 8;
                }
                for (&b, &v) in x[i..].iter().zip(&w[i..]) {
                    let r = (b as usize).wrapping_sub(lo);
                    // SAFETY: c <= the index of this input < x.len().
                    unsafe {
                        *rel.add(c) = r;
                        *wt.add(c) = v;
                    }
                    c += usize::from(r < len);
                }
                c
            }
        };
    }
    compact!(
        compact_f32,
        f32,
        |p: *const f32| _mm512_castps256_ps512(_mm256_loadu_ps(p)),
        _mm512_maskz_compress_ps,
        |q: *mut f32, v: __m512| _mm256_storeu_ps(q, _mm512_castps512_ps256(v))
    );
    compact!(
        compact_f64,
        f64,
        |p: *const f64| _mm512_loadu_pd(p),
        _mm512_maskz_compress_pd,
        |q: *mut f64, v: __m512d| _mm512_storeu_pd(q, v)
    );
}

/// Adds to `out[b - lo]` the weight of every input `i < n` whose bin `b` lies in
/// `lo..lo + out.len()`, in index order: per bin, the additions of [`count_seq`]. The input is
/// scanned in blocks of [`RANGE_BLOCK`], each first compacted to the inputs in range, which
/// are then added in order.
fn count_range<W: AccElem>(n: usize, lo: usize, out: &mut [W], compact: &Compact<'_, W>) {
    let len = out.len();
    let mut rel = [0usize; RANGE_BLOCK];
    let mut wt = [W::default(); RANGE_BLOCK];
    let mut s = 0;
    while s < n {
        let e = (s + RANGE_BLOCK).min(n);
        let c = compact(s, e, lo, len, &mut rel, &mut wt);
        for (&r, &v) in rel[..c].iter().zip(&wt[..c]) {
            out[r] = W::add(out[r], v);
        }
        s = e;
    }
}

/// Deterministic histogram: each bin the sum of its inputs' weights in index order from `+0`,
/// exactly the plain sequential loop (and PyTorch's one-thread `bincount`), at any thread
/// count. With several threads each owns a contiguous range of bins and scans the whole input,
/// adding only its own bins ([`count_range`]): threads split the bins, never a bin's
/// additions, so no partial buffers are zeroed or merged. Integer weights (counts) are exact in
/// any order, so they take the nondeterministic kernel, which gives the same values.
fn hist_det_g<W: AccElem>(
    bin: &(impl Fn(usize) -> usize + Sync),
    n: usize,
    w: &(impl Fn(usize) -> W + Sync),
    nbins: usize,
    par: &Par,
    compact: &Compact<'_, W>,
) -> Result<Vec<W>> {
    if W::DTYPE == DType::I64 {
        return hist_nondet_g(bin, n, w, nbins, par);
    }
    let mut out = crate::try_filled_vec(OP_BUF, nbins, W::default())?;
    let t = par.threads().min(nbins);
    if t <= 1 || n < SERIAL_MAX {
        count_seq(bin, n, w, &mut out);
        return Ok(out);
    }
    let per = nbins.div_ceil(t);
    par.install(|| {
        out.par_chunks_mut(per)
            .enumerate()
            .for_each(|(k, o)| count_range(n, k * per, o, compact))
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
    if t == 1 || n < SERIAL_MAX {
        count_seq(bin, n, w, &mut out);
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
                        match *inp {
                            HistInput::Bins(x) => {
                                let simd = Isa::Avx512.enabled();
                                let c = |s, e, lo, len, r: &mut _, v: &mut _| {
                                    compact_bins(x, w, simd, (s, e, lo, len), r, v)
                                };
                                hist_det_g(&bin, $n, &wf, nbins, par, &c)
                            }
                            _ => {
                                let c = |s, e, lo, len, r: &mut _, v: &mut _| {
                                    compact_scalar(&bin, &wf, (s, e, lo, len), r, v)
                                };
                                hist_det_g(&bin, $n, &wf, nbins, par, &c)
                            }
                        }
                    } else {
                        hist_nondet_g(&bin, $n, &wf, nbins, par)
                    }
                }
                None => {
                    let wf = |_: usize| W::ONE;
                    if det {
                        let c = |s, e, lo, len, r: &mut _, v: &mut _| {
                            compact_scalar(&bin, &wf, (s, e, lo, len), r, v)
                        };
                        hist_det_g(&bin, $n, &wf, nbins, par, &c)
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
        BINCOUNT.run(&[self], |imp, par| {
            // One pass for the smallest (must be >= 0) and the largest value (the bin count).
            let minmax = |c: &[i64]| {
                c.iter()
                    .fold((i64::MAX, i64::MIN), |(a, b), &v| (a.min(v), b.max(v)))
            };
            let (mn, mx) = if x.len() > 1 << 20 {
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
            match weights {
                None => {
                    let v = (imp.f.i64)(&inp, None, nbins, par)?;
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
                    let wc = w.contiguous_for(OP)?;
                    if w.dtype() == DType::F32 {
                        let wd = dense::<f32>(&wc)?;
                        let v = (imp.f.f32)(&inp, Some(wd), nbins, par)?;
                        Tensor::from_vec(v, &[nbins])
                    } else {
                        let wd = wc.to_f64_vec();
                        let v = (imp.f.f64)(&inp, Some(&wd), nbins, par)?;
                        Tensor::from_vec(v, &[nbins])
                    }
                }
            }
        })
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
        let xc = self.contiguous_for(OP)?;
        HISTC.run(&[self], |imp, par| {
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
                    let v = (imp.f.i64)(&inp, None, bins, par)?;
                    let mut o: Vec<$T> = crate::tensor::try_with_capacity(OP, bins)?;
                    o.extend(v.into_iter().map(|c| c as $T));
                    Tensor::from_vec(o, &[bins])
                }};
            }
            match self.dtype() {
                DType::F32 => go!(f32, F32),
                DType::F64 => go!(f64, F64),
                got => Err(Error::DType {
                    op: OP,
                    expected: DType::F32,
                    got,
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deterministic::scope;
    use crate::threads::with_num_threads;

    fn mix(n: usize, seed: u64) -> impl Iterator<Item = u64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n).map(move |_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
    }

    /// Deterministic `bincount` with weights above [`SERIAL_MAX`] inputs (the bin-range path
    /// with several threads): the bits of the plain sequential loop at 1, 2, 3 and 8 threads,
    /// for few and many bins, skewed inputs (a quarter in bin 0), f32 and f64 weights.
    #[test]
    fn det_bincount_is_the_sequential_sum_at_any_thread_count() {
        let n = 3 * SERIAL_MAX + 17;
        // 300_000 f32 bins: past PF_BINS_BYTES (the prefetching loop).
        for bins in [7usize, 1000, 70_000, 300_000] {
            let idx: Vec<i64> = mix(n, bins as u64)
                .map(|r| {
                    if r % 4 == 0 {
                        0
                    } else {
                        (r >> 8) as i64 % bins as i64
                    }
                })
                .collect();
            let w: Vec<f32> = mix(n, 99)
                .map(|r| (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                .collect();
            let mut want = vec![0f32; bins + 3];
            let mut want64 = vec![0f64; bins + 3];
            for (&b, &v) in idx.iter().zip(&w) {
                want[b as usize] += v;
                want64[b as usize] += f64::from(v) * 1.5;
            }
            let x = Tensor::from_vec(idx, &[n]).unwrap();
            let wt = Tensor::from_vec(w.clone(), &[n]).unwrap();
            let w64: Vec<f64> = w.iter().map(|&v| f64::from(v) * 1.5).collect();
            let wt64 = Tensor::from_vec(w64, &[n]).unwrap();
            for t in [1, 2, 3, 8] {
                let (got, got64) = scope(true, false, || {
                    with_num_threads(t, || {
                        (
                            x.bincount(Some(&wt), bins + 3).unwrap(),
                            x.bincount(Some(&wt64), bins + 3).unwrap(),
                        )
                    })
                });
                let got: Vec<u32> = got
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "f32, {bins} bins, {t} threads");
                let got64: Vec<u64> = got64
                    .to_vec::<f64>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                let want64: Vec<u64> = want64.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got64, want64, "f64, {bins} bins, {t} threads");
            }
        }
    }

    /// `count_range` over ranges that tile the bins gives the bits of one `count_seq`, also
    /// with inputs outside every range (histc's `usize::MAX`) and a partial last block.
    #[test]
    fn count_range_tiles_count_seq() {
        let n = 5 * RANGE_BLOCK + 3;
        let bins: Vec<usize> = mix(n, 5)
            .map(|r| {
                if r % 7 == 0 {
                    usize::MAX
                } else {
                    (r >> 9) as usize % 101
                }
            })
            .collect();
        let w: Vec<f32> = mix(n, 6).map(|r| (r >> 41) as f32 - 1e6).collect();
        let (bin, wf) = (|i: usize| bins[i], |i: usize| w[i]);
        let mut want = vec![0f32; 101];
        count_seq(&bin, n, &wf, &mut want);
        for per in [1usize, 10, 50, 101] {
            let mut got = vec![0f32; 101];
            for (k, o) in got.chunks_mut(per).enumerate() {
                let c = |s, e, lo, len, r: &mut _, v: &mut _| {
                    compact_scalar(&bin, &wf, (s, e, lo, len), r, v)
                };
                count_range(n, k * per, o, &c);
            }
            assert_eq!(got, want, "ranges of {per} bins");
        }
    }
}

//! Batch normalisation's kernels: the per-channel f64 sums and the elementwise passes.
//!
//! # Same bits everywhere
//! Each channel's sum is one serial chain of f64 additions in index order (sample by sample,
//! each plane in order), exactly the loop `acc += term(k)`. The kernels run 8 channels' chains
//! side by side (one per vector lane, after an 8×8 transpose of loaded blocks, or 8 scalar
//! accumulators on the portable path), which changes when each addition happens but not which
//! additions happen in which order: every lane is the same IEEE operation on its own channel.
//! The elementwise passes are one formula per element (no fused multiply-adds: Rust never
//! contracts `a * b + c`), vectorised by the compiler. So the bits do not depend on the
//! instruction set, on how channels are grouped, or on the thread count: channels are split
//! over threads whole, elements by contiguous plane ranges.

use crate::Element;
use crate::isa::Isa;
use crate::threads::Par;
use core::mem::MaybeUninit;
use std::sync::Mutex;

/// `Σ x` per channel.
pub(super) const SUM_X: u8 = 0;
/// `Σ (x − mean)²` per channel.
pub(super) const SUM_SQDEV: u8 = 1;
/// `Σ g` and `Σ g·((x − mean)·invstd)` per channel.
pub(super) const SUM_GRAD: u8 = 2;

/// Channels whose chains run side by side.
const BLOCK: usize = 8;

/// Values (elements read, counting `x` and `g`) below which a pass stays on the calling
/// thread: handing half of it to a helper thread costs more than it saves.
const PAR_MIN: usize = 1 << 15;

/// The element types of batch normalisation: `f32` has vector kernels, `f64` the portable
/// ones (same bits either way).
pub(super) trait BnElem: Element {
    /// The sums of [`block_portable`] for channels `c0..c0 + 8` with the vector path, or `None`
    /// where there is none.
    #[allow(clippy::too_many_arguments)]
    fn block_simd<const MODE: u8>(
        x: &[Self],
        g: &[Self],
        mean: &[f64; BLOCK],
        invstd: &[f64; BLOCK],
        n: usize,
        c: usize,
        s: usize,
        c0: usize,
    ) -> Option<[[f64; BLOCK]; 2]> {
        let _ = (x, g, mean, invstd, n, c, s, c0);
        None
    }
}

impl BnElem for f64 {}

impl BnElem for f32 {
    fn block_simd<const MODE: u8>(
        x: &[f32],
        g: &[f32],
        mean: &[f64; BLOCK],
        invstd: &[f64; BLOCK],
        n: usize,
        c: usize,
        s: usize,
        c0: usize,
    ) -> Option<[[f64; BLOCK]; 2]> {
        // The loads below read rows `(i·c + c0 + j)·s .. + s` for every sample `i` and `j < 8`.
        let needed = if n == 0 {
            0
        } else {
            ((n - 1) * c + c0 + BLOCK) * s
        };
        if x.len() < needed || (MODE == SUM_GRAD && g.len() < needed) || s < BLOCK {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        match Isa::best() {
            // SAFETY: the CPU supports the path (`Isa::best` is always available) and the
            // lengths are checked above.
            Isa::Avx512 => {
                return Some(unsafe { x86::block_avx512::<MODE>(x, g, mean, invstd, n, c, s, c0) });
            }
            // SAFETY: as above.
            Isa::Avx2 => {
                return Some(unsafe { x86::block_avx2::<MODE>(x, g, mean, invstd, n, c, s, c0) });
            }
            Isa::Portable => {}
        }
        None
    }
}

/// One chain step of `MODE` on `x` (and `g`) with the channel's `mean` and `invstd`: the
/// formulas of the reference loop, operation by operation.
#[inline(always)]
fn step<const MODE: u8>(a: &mut [f64; 2], x: f64, g: f64, mean: f64, invstd: f64) {
    match MODE {
        SUM_X => a[0] += x,
        SUM_SQDEV => {
            let d = x - mean;
            a[0] += d * d;
        }
        _ => {
            a[0] += g;
            a[1] += g * ((x - mean) * invstd);
        }
    }
}

/// Channels `c0..c0 + k` (`k ≤ 8`), their chains side by side in scalar registers.
#[allow(clippy::too_many_arguments)]
fn block_portable<T: Element, const MODE: u8>(
    x: &[T],
    g: &[T],
    mean: &[f64],
    invstd: &[f64],
    (n, c, s): (usize, usize, usize),
    c0: usize,
    k: usize,
    out: &mut [[f64; 2]],
) {
    let mut acc = [[0.0f64; 2]; BLOCK];
    let (mut mu, mut is) = ([0.0; BLOCK], [0.0; BLOCK]);
    if MODE != SUM_X {
        mu[..k].copy_from_slice(&mean[c0..c0 + k]);
    }
    if MODE == SUM_GRAD {
        is[..k].copy_from_slice(&invstd[c0..c0 + k]);
    }
    for i in 0..n {
        let base = (i * c + c0) * s;
        let xb = &x[base..base + k * s];
        let gb = if MODE == SUM_GRAD {
            &g[base..base + k * s]
        } else {
            &[]
        };
        for t in 0..s {
            for j in 0..k {
                let gv = if MODE == SUM_GRAD {
                    gb[j * s + t].to_f64()
                } else {
                    0.0
                };
                step::<MODE>(&mut acc[j], xb[j * s + t].to_f64(), gv, mu[j], is[j]);
            }
        }
    }
    out[..k].copy_from_slice(&acc[..k]);
}

/// The sums of `MODE` for channels `ch0..ch1` into `out` (one entry per channel): blocks of 8
/// on the vector path where there is one, the rest side by side in scalar registers.
fn channel_range<T: BnElem, const MODE: u8>(
    x: &[T],
    g: &[T],
    mean: &[f64],
    invstd: &[f64],
    (n, c, s): (usize, usize, usize),
    (ch0, ch1): (usize, usize),
    out: &mut [[f64; 2]],
) {
    let mut c0 = ch0;
    while c0 < ch1 {
        let k = (ch1 - c0).min(BLOCK);
        let o = &mut out[c0 - ch0..];
        if k == BLOCK {
            let (mut mu, mut is) = ([0.0; BLOCK], [0.0; BLOCK]);
            if MODE != SUM_X {
                mu.copy_from_slice(&mean[c0..c0 + BLOCK]);
            }
            if MODE == SUM_GRAD {
                is.copy_from_slice(&invstd[c0..c0 + BLOCK]);
            }
            if let Some([a0, a1]) = T::block_simd::<MODE>(x, g, &mu, &is, n, c, s, c0) {
                for j in 0..BLOCK {
                    o[j] = [a0[j], a1[j]];
                }
                c0 += BLOCK;
                continue;
            }
        }
        block_portable::<T, MODE>(x, g, mean, invstd, (n, c, s), c0, k, o);
        c0 += k;
    }
}

/// The per-channel sums of `MODE` over `x` (and `g`) of shape `[n, c, s]`: `[Σ₀, Σ₁]` per
/// channel (`Σ₁` only for [`SUM_GRAD`]), each one chain in index order. Channels are split
/// over threads in whole blocks when the work pays for it; the bits never depend on that.
pub(super) fn channel_sums<T: BnElem, const MODE: u8>(
    x: &[T],
    g: &[T],
    mean: &[f64],
    invstd: &[f64],
    (n, c, s): (usize, usize, usize),
    par: &Par,
) -> Vec<[f64; 2]> {
    let mut out = vec![[0.0; 2]; c];
    let blocks = c.div_ceil(BLOCK);
    let work = (n * c * s).saturating_mul(if MODE == SUM_GRAD { 2 } else { 1 });
    let parts = if work < PAR_MIN {
        1
    } else {
        par.threads().min(blocks)
    };
    if parts <= 1 {
        channel_range::<T, MODE>(x, g, mean, invstd, (n, c, s), (0, c), &mut out);
        return out;
    }
    // Part p takes blocks `p·blocks/parts ..`: whole channels, each computed as above.
    let bounds: Vec<usize> = (0..=parts)
        .map(|p| (p * blocks / parts * BLOCK).min(c))
        .collect();
    let mut slots = Vec::with_capacity(parts);
    let mut rest = out.as_mut_slice();
    for p in 0..parts {
        let (a, b) = rest.split_at_mut(bounds[p + 1] - bounds[p]);
        slots.push(Mutex::new(a));
        rest = b;
    }
    par.run_parts(parts, |p| {
        let mut o = slots[p].lock().unwrap_or_else(|e| e.into_inner());
        channel_range::<T, MODE>(
            x,
            g,
            mean,
            invstd,
            (n, c, s),
            (bounds[p], bounds[p + 1]),
            &mut o,
        );
    });
    drop(slots);
    out
}

/// What an elementwise pass computes per element, given the channel's parameters.
#[derive(Clone, Copy)]
pub(super) enum Pass {
    /// `y = ((x − mean)·invstd)·w + b`.
    Forward,
    /// `gx = scale·(m·g − Σg − x̂·Σgx̂)` with `x̂ = (x − mean)·invstd` (batch statistics).
    BackwardBatch,
    /// `gx = g·w·invstd` (running statistics).
    BackwardRunning,
}

/// One channel's constants of an elementwise pass.
#[derive(Clone, Copy)]
pub(super) struct ChannelConst {
    pub(super) mean: f64,
    pub(super) invstd: f64,
    /// Forward: the weight; backward: `w·invstd/m` (batch) or the weight (running).
    pub(super) scale: f64,
    /// Forward: the bias; backward (batch): `Σg`.
    pub(super) a: f64,
    /// Backward (batch): `Σgx̂`.
    pub(super) b: f64,
    /// Backward (batch): `m`.
    pub(super) m: f64,
}

/// One plane of a pass: `x` and `g` in, `o` out (all of one length).
#[inline(always)]
fn plane<T: Element>(pass: Pass, k: &ChannelConst, x: &[T], g: &[T], o: &mut [MaybeUninit<T>]) {
    let (mu, is) = (k.mean, k.invstd);
    match pass {
        Pass::Forward => {
            let (wc, bc) = (k.scale, k.a);
            for (o, &v) in o.iter_mut().zip(x) {
                let xhat = (v.to_f64() - mu) * is;
                o.write(T::from_f64(xhat * wc + bc));
            }
        }
        Pass::BackwardBatch => {
            let (scale, a, b, m) = (k.scale, k.a, k.b, k.m);
            for ((o, &gv), &xv) in o.iter_mut().zip(g).zip(x) {
                let xhat = (xv.to_f64() - mu) * is;
                o.write(T::from_f64(scale * (m * gv.to_f64() - a - xhat * b)));
            }
        }
        Pass::BackwardRunning => {
            let wc = k.scale;
            for (o, &gv) in o.iter_mut().zip(g) {
                o.write(T::from_f64(gv.to_f64() * wc * is));
            }
        }
    }
}

/// Planes `p0..` of a pass into `o` (whole planes of `s` elements).
#[inline(always)]
fn planes<T: Element>(
    pass: Pass,
    consts: &[ChannelConst],
    x: &[T],
    g: &[T],
    s: usize,
    p0: usize,
    o: &mut [MaybeUninit<T>],
) {
    let c = consts.len();
    for (q, o) in o.chunks_exact_mut(s).enumerate() {
        let p = p0 + q;
        let r = p * s..(p + 1) * s;
        let k = &consts[p % c];
        match pass {
            Pass::Forward => plane(pass, k, &x[r], &[], o),
            Pass::BackwardBatch => plane(pass, k, &x[r.clone()], &g[r], o),
            Pass::BackwardRunning => plane(pass, k, &[], &g[r], o),
        }
    }
}

/// [`planes`] built for the instruction set in use (the compiler vectorises the loops).
fn planes_isa<T: Element>(
    pass: Pass,
    consts: &[ChannelConst],
    x: &[T],
    g: &[T],
    s: usize,
    p0: usize,
    o: &mut [MaybeUninit<T>],
) {
    #[cfg(target_arch = "x86_64")]
    {
        // One template, built once per instruction set.
        macro_rules! build {
            ($name:ident, $feat:literal) => {
                #[target_feature(enable = $feat)]
                fn $name<T: Element>(
                    pass: Pass,
                    consts: &[ChannelConst],
                    x: &[T],
                    g: &[T],
                    s: usize,
                    p0: usize,
                    o: &mut [MaybeUninit<T>],
                ) {
                    planes(pass, consts, x, g, s, p0, o)
                }
            };
        }
        build!(avx512, "avx512f");
        build!(avx2, "avx2");
        match Isa::best() {
            // SAFETY: `Isa::best` is always a path the CPU supports.
            Isa::Avx512 => return unsafe { avx512(pass, consts, x, g, s, p0, o) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(pass, consts, x, g, s, p0, o) },
            Isa::Portable => {}
        }
    }
    planes(pass, consts, x, g, s, p0, o)
}

/// An elementwise pass over `[n, c, s]` (`consts` per channel): `x` read for
/// [`Pass::Forward`] and [`Pass::BackwardBatch`], `g` for the backward passes. Split over
/// threads by contiguous plane ranges when the work pays for it.
pub(super) fn elementwise<T: Element>(
    pass: Pass,
    consts: &[ChannelConst],
    x: &[T],
    g: &[T],
    (n, c, s): (usize, usize, usize),
    par: &Par,
) -> Vec<T> {
    let len = n * c * s;
    let mut out: Vec<T> = Vec::with_capacity(len);
    let planes_n = n * c;
    if len > 0 {
        let dst = &mut out.spare_capacity_mut()[..len];
        let parts = if len < PAR_MIN {
            1
        } else {
            par.threads().min(planes_n)
        };
        if parts <= 1 {
            planes_isa(pass, consts, x, g, s, 0, dst);
        } else {
            let bounds: Vec<usize> = (0..=parts).map(|p| p * planes_n / parts).collect();
            let mut slots = Vec::with_capacity(parts);
            let mut rest = dst;
            for p in 0..parts {
                let (a, b) = rest.split_at_mut((bounds[p + 1] - bounds[p]) * s);
                slots.push(Mutex::new(a));
                rest = b;
            }
            par.run_parts(parts, |p| {
                let mut o = slots[p].lock().unwrap_or_else(|e| e.into_inner());
                planes_isa(pass, consts, x, g, s, bounds[p], &mut o);
            });
        }
    }
    // SAFETY: every one of the `len` elements was written above (whole planes, `n·c` of them).
    unsafe { out.set_len(len) };
    out
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BLOCK, SUM_GRAD, SUM_SQDEV, SUM_X};
    use core::arch::x86_64::*;

    /// The two paths' loads and chain steps, stamped from one template each: the same
    /// operations in the same order, at 8 lanes (AVX-512) or 4 (AVX2).
    macro_rules! widening_load {
        ($name:ident, $feat:literal, $v:ty, $n:literal, $zero:ident, $cvt:ident, $loadu:ident,
         $transpose:path) => {
            /// Rows `base + j·s + t ..` (`j <` the lane count, as many positions) of `p`,
            /// widened to f64 and transposed.
            ///
            /// # Safety
            /// Every row must be in bounds.
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn $name(p: *const f32, base: usize, s: usize, t: usize) -> [$v; $n] {
                let mut r = [$zero(); $n];
                for (j, r) in r.iter_mut().enumerate() {
                    // SAFETY: the caller's bounds.
                    *r = $cvt(unsafe { $loadu(p.add(base + j * s + t)) });
                }
                $transpose(r)
            }
        };
    }

    /// One chain step of `MODE` on one vector of positions: [`step`](super::step)'s formulas,
    /// lane by lane, with the path's add/sub/mul.
    macro_rules! chain_step {
        ($mode:expr, $a0:expr, $a1:expr, $x:expr, $g:expr, $mu:expr, $is:expr,
         $add:ident, $sub:ident, $mul:ident) => {
            match $mode {
                SUM_X => $a0 = $add($a0, $x),
                SUM_SQDEV => {
                    let d = $sub($x, $mu);
                    $a0 = $add($a0, $mul(d, d));
                }
                _ => {
                    $a0 = $add($a0, $g);
                    let xhat = $mul($sub($x, $mu), $is);
                    $a1 = $add($a1, $mul($g, xhat));
                }
            }
        };
    }

    /// `r[j]` holds channel `j`'s values at 8 positions; the result's `[q]` holds position
    /// `q` of every channel (lane `j` = channel `j`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose8(r: [__m512d; 8]) -> [__m512d; 8] {
        let t0 = _mm512_unpacklo_pd(r[0], r[1]);
        let t1 = _mm512_unpackhi_pd(r[0], r[1]);
        let t2 = _mm512_unpacklo_pd(r[2], r[3]);
        let t3 = _mm512_unpackhi_pd(r[2], r[3]);
        let t4 = _mm512_unpacklo_pd(r[4], r[5]);
        let t5 = _mm512_unpackhi_pd(r[4], r[5]);
        let t6 = _mm512_unpacklo_pd(r[6], r[7]);
        let t7 = _mm512_unpackhi_pd(r[6], r[7]);
        let u0 = _mm512_shuffle_f64x2::<0x88>(t0, t2);
        let u1 = _mm512_shuffle_f64x2::<0xDD>(t0, t2);
        let u2 = _mm512_shuffle_f64x2::<0x88>(t1, t3);
        let u3 = _mm512_shuffle_f64x2::<0xDD>(t1, t3);
        let u4 = _mm512_shuffle_f64x2::<0x88>(t4, t6);
        let u5 = _mm512_shuffle_f64x2::<0xDD>(t4, t6);
        let u6 = _mm512_shuffle_f64x2::<0x88>(t5, t7);
        let u7 = _mm512_shuffle_f64x2::<0xDD>(t5, t7);
        [
            _mm512_shuffle_f64x2::<0x88>(u0, u4),
            _mm512_shuffle_f64x2::<0x88>(u2, u6),
            _mm512_shuffle_f64x2::<0x88>(u1, u5),
            _mm512_shuffle_f64x2::<0x88>(u3, u7),
            _mm512_shuffle_f64x2::<0xDD>(u0, u4),
            _mm512_shuffle_f64x2::<0xDD>(u2, u6),
            _mm512_shuffle_f64x2::<0xDD>(u1, u5),
            _mm512_shuffle_f64x2::<0xDD>(u3, u7),
        ]
    }

    widening_load!(
        load8,
        "avx512f",
        __m512d,
        8,
        _mm512_setzero_pd,
        _mm512_cvtps_pd,
        _mm256_loadu_ps,
        transpose8
    );

    /// The tail of a row block (`rem < 8` positions from `t`), through a zero-padded copy.
    ///
    /// # Safety
    /// Positions `t..t + rem` of every row must be in bounds.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load8_tail(
        p: *const f32,
        base: usize,
        s: usize,
        t: usize,
        rem: usize,
    ) -> [__m512d; 8] {
        let mut buf = [[0f32; 8]; 8];
        for (j, b) in buf.iter_mut().enumerate() {
            // SAFETY: the caller's bounds.
            unsafe { core::ptr::copy_nonoverlapping(p.add(base + j * s + t), b.as_mut_ptr(), rem) };
        }
        let mut r = [_mm512_setzero_pd(); 8];
        for (r, b) in r.iter_mut().zip(&buf) {
            // SAFETY: `b` holds 8 values.
            *r = _mm512_cvtps_pd(unsafe { _mm256_loadu_ps(b.as_ptr()) });
        }
        transpose8(r)
    }

    /// `cnt` chain steps of `MODE` (positions `q < cnt` of the transposed blocks).
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn accumulate<const MODE: u8>(
        a0: &mut __m512d,
        a1: &mut __m512d,
        xc: &[__m512d; 8],
        gc: &[__m512d; 8],
        cnt: usize,
        mu: __m512d,
        is: __m512d,
    ) {
        for q in 0..cnt {
            chain_step!(
                MODE,
                *a0,
                *a1,
                xc[q],
                gc[q],
                mu,
                is,
                _mm512_add_pd,
                _mm512_sub_pd,
                _mm512_mul_pd
            );
        }
    }

    /// Channels `c0..c0 + 8` of `[n, c, s]` (`s ≥ 8`): lane `j` is channel `c0 + j`'s chain.
    ///
    /// # Safety
    /// AVX-512F, and rows `(i·c + c0 + j)·s .. + s` of `x` (and of `g` for `SUM_GRAD`) in
    /// bounds for every `i < n`, `j < 8`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_avx512<const MODE: u8>(
        x: &[f32],
        g: &[f32],
        mean: &[f64; BLOCK],
        invstd: &[f64; BLOCK],
        n: usize,
        c: usize,
        s: usize,
        c0: usize,
    ) -> [[f64; BLOCK]; 2] {
        // SAFETY: 8 values each.
        let (mu, is) = unsafe {
            (
                _mm512_loadu_pd(mean.as_ptr()),
                _mm512_loadu_pd(invstd.as_ptr()),
            )
        };
        let (mut a0, mut a1) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let (xp, gp) = (x.as_ptr(), g.as_ptr());
        let zero = [_mm512_setzero_pd(); 8];
        for i in 0..n {
            let base = (i * c + c0) * s;
            let mut t = 0;
            while t + 8 <= s {
                // SAFETY: positions t..t + 8 ≤ s of every row (the caller's bounds).
                let xc = unsafe { load8(xp, base, s, t) };
                let gc = if MODE == SUM_GRAD {
                    // SAFETY: as above, for `g`.
                    unsafe { load8(gp, base, s, t) }
                } else {
                    zero
                };
                accumulate::<MODE>(&mut a0, &mut a1, &xc, &gc, 8, mu, is);
                t += 8;
            }
            if t < s {
                let rem = s - t;
                // SAFETY: as above.
                let xc = unsafe { load8_tail(xp, base, s, t, rem) };
                let gc = if MODE == SUM_GRAD {
                    // SAFETY: as above.
                    unsafe { load8_tail(gp, base, s, t, rem) }
                } else {
                    zero
                };
                accumulate::<MODE>(&mut a0, &mut a1, &xc, &gc, rem, mu, is);
            }
        }
        let mut out = [[0.0; BLOCK]; 2];
        // SAFETY: 8 values each.
        unsafe {
            _mm512_storeu_pd(out[0].as_mut_ptr(), a0);
            _mm512_storeu_pd(out[1].as_mut_ptr(), a1);
        }
        out
    }

    widening_load!(
        load4,
        "avx2",
        __m256d,
        4,
        _mm256_setzero_pd,
        _mm256_cvtps_pd,
        _mm_loadu_ps,
        crate::ops::matmul::kernel::x86::transpose4x4_pd
    );

    /// [`block_avx512`] with two 4-lane halves: lane `j` of half `h` is channel
    /// `c0 + 4h + j`'s chain.
    ///
    /// # Safety
    /// As [`block_avx512`], with AVX2.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_avx2<const MODE: u8>(
        x: &[f32],
        g: &[f32],
        mean: &[f64; BLOCK],
        invstd: &[f64; BLOCK],
        n: usize,
        c: usize,
        s: usize,
        c0: usize,
    ) -> [[f64; BLOCK]; 2] {
        // SAFETY: 8 values each.
        let (mu, is) = unsafe {
            (
                [
                    _mm256_loadu_pd(mean.as_ptr()),
                    _mm256_loadu_pd(mean.as_ptr().add(4)),
                ],
                [
                    _mm256_loadu_pd(invstd.as_ptr()),
                    _mm256_loadu_pd(invstd.as_ptr().add(4)),
                ],
            )
        };
        let mut a0 = [_mm256_setzero_pd(); 2];
        let mut a1 = [_mm256_setzero_pd(); 2];
        let (xp, gp) = (x.as_ptr(), g.as_ptr());
        let zero = [_mm256_setzero_pd(); 4];
        for i in 0..n {
            let mut t = 0;
            while t < s {
                // A tail goes through a zero-padded copy of the last positions.
                let cnt = (s - t).min(4);
                for h in 0..2 {
                    let base = (i * c + c0 + 4 * h) * s;
                    let (xc, gc);
                    if cnt == 4 {
                        // SAFETY: positions t..t + 4 ≤ s of every row.
                        xc = unsafe { load4(xp, base, s, t) };
                        gc = if MODE == SUM_GRAD {
                            // SAFETY: as above.
                            unsafe { load4(gp, base, s, t) }
                        } else {
                            zero
                        };
                    } else {
                        let mut bx = [[0f32; 4]; 4];
                        let mut bg = [[0f32; 4]; 4];
                        for j in 0..4 {
                            let r = base + j * s + t;
                            bx[j][..cnt].copy_from_slice(&x[r..r + cnt]);
                            if MODE == SUM_GRAD {
                                bg[j][..cnt].copy_from_slice(&g[r..r + cnt]);
                            }
                        }
                        // SAFETY: the copies hold 4 rows of 4 values.
                        xc = unsafe { load4(bx.as_ptr().cast(), 0, 4, 0) };
                        // SAFETY: as above.
                        gc = unsafe { load4(bg.as_ptr().cast(), 0, 4, 0) };
                    }
                    for q in 0..cnt {
                        chain_step!(
                            MODE,
                            a0[h],
                            a1[h],
                            xc[q],
                            gc[q],
                            mu[h],
                            is[h],
                            _mm256_add_pd,
                            _mm256_sub_pd,
                            _mm256_mul_pd
                        );
                    }
                }
                t += cnt;
            }
        }
        let mut out = [[0.0; BLOCK]; 2];
        // SAFETY: 8 values each.
        unsafe {
            _mm256_storeu_pd(out[0].as_mut_ptr(), a0[0]);
            _mm256_storeu_pd(out[0].as_mut_ptr().add(4), a0[1]);
            _mm256_storeu_pd(out[1].as_mut_ptr(), a1[0]);
            _mm256_storeu_pd(out[1].as_mut_ptr().add(4), a1[1]);
        }
        out
    }
}

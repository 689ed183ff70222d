//! The fixed-order primitives every reduction is built from: [`LANES`] lane accumulators,
//! their explicit-SIMD paths (the same bits as the portable loop), and the fixed pairwise
//! tree ([`tree_sum`]).

use crate::dtype::Float;
use crate::ops::matmul::Isa;
use crate::ops::matmul::kernel::prefetch;

/// Elements per chunk of the deterministic reductions (a constant: never derived from the
/// thread count or cache sizes).
pub const CHUNK: usize = 1 << 14;
/// Independent accumulators per chunk (lets the compiler use vector registers).
pub const LANES: usize = 16;

/// A float type the reductions accumulate in (`f32` sums in `f32`, as PyTorch does): the
/// [`Float`] sub-trait with the lane sums' SIMD paths.
pub trait LaneSum: Float {
    /// [`LANES`] lane sums of `x` (element `i` added to lane `i mod LANES`, each lane in index
    /// order, from `+0`) computed with the instructions of `isa` — the same bits on every
    /// path, since each lane is one chain of additions in the same order. A path the CPU does
    /// not support ([`Isa::available`]) falls back to the portable loop.
    #[doc(hidden)]
    fn lane_sums(x: &[Self], isa: Isa) -> [Self; LANES] {
        let _ = isa;
        fold_lanes(x, Self::default(), |a, v| a + v)
    }

    /// The lane sums of four [`CHUNK`]-element pieces `x[j * CHUNK..(j + 1) * CHUNK]` at once
    /// (`x.len() == 4 * CHUNK`): the bits of [`lane_sums`](Self::lane_sums) on each piece, with
    /// four independent chains of additions in flight instead of one (a single chain is bound
    /// by the add latency, not by memory). `None` where no such path exists.
    #[doc(hidden)]
    fn lane_sums4(x: &[Self], isa: Isa) -> Option<[[Self; LANES]; 4]> {
        let _ = (x, isa);
        None
    }
}
impl LaneSum for f32 {
    #[inline]
    fn lane_sums4(x: &[Self], isa: Isa) -> Option<[[Self; LANES]; 4]> {
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512 && isa.available() && x.len() == 4 * CHUNK {
            // SAFETY: the CPU supports AVX-512F and the length is checked.
            return Some(unsafe { x86::sums4_f32_avx512(x) });
        }
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx2 && isa.available() && x.len() == 4 * CHUNK {
            // SAFETY: the CPU supports AVX2 and the length is checked.
            return Some(unsafe { x86::sums4_f32_avx2(x) });
        }
        let _ = (x, isa);
        None
    }
    #[inline]
    fn lane_sums(x: &[Self], isa: Isa) -> [Self; LANES] {
        #[cfg(target_arch = "x86_64")]
        match isa {
            // SAFETY: the CPU supports the path (checked by `available`).
            Isa::Avx512 if isa.available() => return unsafe { x86::sums_f32_avx512(x) },
            // SAFETY: as above.
            Isa::Avx2 if isa.available() => return unsafe { x86::sums_f32_avx2(x) },
            _ => {}
        }
        let _ = isa;
        fold_lanes(x, 0.0, |a, v| a + v)
    }
}
impl LaneSum for f64 {
    #[inline]
    fn lane_sums(x: &[Self], isa: Isa) -> [Self; LANES] {
        #[cfg(target_arch = "x86_64")]
        match isa {
            // SAFETY: as for `f32`.
            Isa::Avx512 if isa.available() => return unsafe { x86::sums_f64_avx512(x) },
            // SAFETY: as for `f32`.
            Isa::Avx2 if isa.available() => return unsafe { x86::sums_f64_avx2(x) },
            _ => {}
        }
        let _ = isa;
        fold_lanes(x, 0.0, |a, v| a + v)
    }
}

/// The explicit-SIMD lane sums: one vector register per group of lanes, so each lane is the
/// same chain of additions as in [`fold_lanes`]. Streaming sums are limited by memory, not by
/// the adds: a software prefetch [`x86::PF`] bytes ahead keeps loads in flight across 4 KiB
/// page boundaries, where the hardware prefetchers stop (measured 10–25 % faster on 256 MiB).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{LANES, prefetch};
    use core::arch::x86_64::*;

    /// Prefetch distance in bytes. Short on purpose: [`sums4_f32_avx512`] reads four streams
    /// 64 KiB apart (the same L1 sets), and 4 × 8 KiB ahead evicted prefetched lines before
    /// their use (measured per-thread CPU time on 256 MiB and 1 GiB, 1 and 2 threads: 2 KiB
    /// 7–12 % faster than 8 KiB, 1 KiB within 1 %); still far enough to cross each 4 KiB page
    /// before the loads do.
    pub(super) const PF: usize = 2048;
    /// Slices shorter than this (bytes) are assumed cached: no prefetch.
    const PF_MIN: usize = 16384;

    macro_rules! lane_kernel {
        ($name:ident, $feat:literal, $t:ty, $v:ty, $w:literal, $zero:ident, $load:ident, $add:ident, $store:ident) => {
            /// Lane sums of `x` (see [`super::LaneSum::lane_sums`]).
            ///
            /// # Safety
            /// The CPU must support the target feature.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name(x: &[$t]) -> [$t; LANES] {
                const G: usize = LANES / $w;
                let n = x.len() / LANES;
                let p = x.as_ptr();
                let mut a: [$v; G] = [$zero(); G];
                let pf = core::mem::size_of_val(x) >= PF_MIN;
                for k in 0..n {
                    let q = p.wrapping_add(k * LANES);
                    if pf {
                        // The lines `PF` bytes ahead of this group of lanes.
                        let bytes = LANES * core::mem::size_of::<$t>();
                        prefetch(q.cast::<u8>().wrapping_add(PF), 0..bytes.div_ceil(64), true);
                    }
                    for (g, a) in a.iter_mut().enumerate() {
                        // SAFETY: (k + 1) * LANES <= x.len(), so the load is in bounds.
                        *a = $add(*a, unsafe { $load(q.add(g * $w)) });
                    }
                }
                let mut acc = [0.0; LANES];
                for (g, a) in a.iter().enumerate() {
                    // SAFETY: `acc` holds LANES = G * $w elements.
                    unsafe { $store(acc.as_mut_ptr().add(g * $w), *a) };
                }
                for (l, &v) in x[n * LANES..].iter().enumerate() {
                    acc[l] += v;
                }
                acc
            }
        };
    }

    /// Lane sums of the four [`super::CHUNK`]-element pieces of `x` (see
    /// [`super::LaneSum::lane_sums4`]): four chains, one per piece, each the chain of
    /// `sums_f32_avx512` on its piece.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and `x.len()` must be `4 * CHUNK`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sums4_f32_avx512(x: &[f32]) -> [[f32; LANES]; 4] {
        use super::CHUNK;
        debug_assert_eq!(x.len(), 4 * CHUNK);
        let p = x.as_ptr();
        let (p0, p1, p2, p3) = (
            p,
            p.wrapping_add(CHUNK),
            p.wrapping_add(2 * CHUNK),
            p.wrapping_add(3 * CHUNK),
        );
        let (mut a0, mut a1, mut a2, mut a3) = (
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
        );
        let mut k = 0;
        while k < CHUNK {
            for q in [p0, p1, p2, p3] {
                prefetch(q.cast::<u8>().wrapping_add(k * 4 + PF), 0..1, true);
            }
            // SAFETY: k + 16 <= CHUNK, so each load lies inside its piece.
            unsafe {
                a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p0.add(k)));
                a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p1.add(k)));
                a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p2.add(k)));
                a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p3.add(k)));
            }
            k += LANES;
        }
        let mut out = [[0f32; LANES]; 4];
        for (o, a) in out.iter_mut().zip([a0, a1, a2, a3]) {
            // SAFETY: `o` holds 16 floats.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), a) };
        }
        out
    }

    /// [`sums4_f32_avx512`] with 256-bit vectors: each piece's 16 lanes are two registers, so
    /// eight chains of additions are in flight (a single piece's two chains are bound by the add
    /// latency at about the read bandwidth, and fall behind it on AVX2-only CPUs).
    ///
    /// # Safety
    /// The CPU must support AVX2 and `x.len()` must be `4 * CHUNK`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sums4_f32_avx2(x: &[f32]) -> [[f32; LANES]; 4] {
        use super::CHUNK;
        debug_assert_eq!(x.len(), 4 * CHUNK);
        let p = x.as_ptr();
        let q = [
            p,
            p.wrapping_add(CHUNK),
            p.wrapping_add(2 * CHUNK),
            p.wrapping_add(3 * CHUNK),
        ];
        let mut lo = [_mm256_setzero_ps(); 4];
        let mut hi = [_mm256_setzero_ps(); 4];
        let mut k = 0;
        while k < CHUNK {
            for q in q {
                prefetch(q.cast::<u8>().wrapping_add(k * 4 + PF), 0..1, true);
            }
            for j in 0..4 {
                // SAFETY: k + 16 <= CHUNK, so both loads lie inside piece j.
                unsafe {
                    lo[j] = _mm256_add_ps(lo[j], _mm256_loadu_ps(q[j].add(k)));
                    hi[j] = _mm256_add_ps(hi[j], _mm256_loadu_ps(q[j].add(k + 8)));
                }
            }
            k += LANES;
        }
        let mut out = [[0f32; LANES]; 4];
        for (j, o) in out.iter_mut().enumerate() {
            // SAFETY: `o` holds 16 floats.
            unsafe {
                _mm256_storeu_ps(o.as_mut_ptr(), lo[j]);
                _mm256_storeu_ps(o.as_mut_ptr().add(8), hi[j]);
            }
        }
        out
    }

    lane_kernel!(
        sums_f32_avx512,
        "avx512f",
        f32,
        __m512,
        16,
        _mm512_setzero_ps,
        _mm512_loadu_ps,
        _mm512_add_ps,
        _mm512_storeu_ps
    );
    lane_kernel!(
        sums_f32_avx2,
        "avx2",
        f32,
        __m256,
        8,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_add_ps,
        _mm256_storeu_ps
    );
    lane_kernel!(
        sums_f64_avx512,
        "avx512f",
        f64,
        __m512d,
        8,
        _mm512_setzero_pd,
        _mm512_loadu_pd,
        _mm512_add_pd,
        _mm512_storeu_pd
    );
    lane_kernel!(
        sums_f64_avx2,
        "avx2",
        f64,
        __m256d,
        4,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_add_pd,
        _mm256_storeu_pd
    );
}

/// Folds `x` into [`LANES`] accumulators: element `i` goes to lane `i mod LANES`, each lane in
/// index order. The lanes are kept as four groups of four so that the compiler maps each group
/// to one vector register (a plain `[T; 16]` loop is only partly vectorised).
#[inline(always)]
pub fn fold_lanes<T: Copy>(x: &[T], init: T, f: impl Fn(T, T) -> T) -> [T; LANES] {
    let mut acc = [init; LANES];
    fold_lanes_into(&mut acc, x, f);
    acc
}

/// [`fold_lanes`] continuing from `acc`; `x` may end with a partial group of lanes only if it
/// is the last piece of the line (so a line folded block by block, in blocks that are
/// multiples of [`LANES`], gives the same lanes as one [`fold_lanes`] over the line).
#[inline(always)]
pub fn fold_lanes_into<T: Copy>(acc: &mut [T; LANES], x: &[T], f: impl Fn(T, T) -> T) {
    let mut a0 = [acc[0], acc[1], acc[2], acc[3]];
    let mut a1 = [acc[4], acc[5], acc[6], acc[7]];
    let mut a2 = [acc[8], acc[9], acc[10], acc[11]];
    let mut a3 = [acc[12], acc[13], acc[14], acc[15]];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..4 {
            a0[l] = f(a0[l], c[l]);
            a1[l] = f(a1[l], c[4 + l]);
            a2[l] = f(a2[l], c[8 + l]);
            a3[l] = f(a3[l], c[12 + l]);
        }
    }
    acc[..4].copy_from_slice(&a0);
    acc[4..8].copy_from_slice(&a1);
    acc[8..12].copy_from_slice(&a2);
    acc[12..].copy_from_slice(&a3);
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] = f(acc[l], v);
    }
}

/// Sum of a slice in a fixed order: lanes, then a fixed tree over the lanes (the same bits on
/// every [`Isa`]).
#[inline]
pub fn sum_lanes<T: LaneSum>(x: &[T]) -> T {
    let mut acc = T::lane_sums(x, Isa::best());
    tree_sum(&mut acc)
}

/// Pairwise sum of `v` in place: `(v0+v1) + (v2+v3)`, … — a fixed tree for a given length.
pub fn tree_sum<T: LaneSum>(v: &mut [T]) -> T {
    if let Ok(lanes) = <&[T; LANES]>::try_from(&*v) {
        return tree_lanes(lanes);
    }
    if v.is_empty() {
        return T::default();
    }
    tree_loop(v)
}

/// [`tree_sum`]'s tree as a loop over a non-empty slice (the one-lane-group case unrolled in
/// [`tree_lanes`] is this loop's order).
pub(super) fn tree_loop<T: LaneSum>(v: &mut [T]) -> T {
    let mut n = v.len();
    while n > 1 {
        let half = n / 2;
        for i in 0..half {
            v[i] = v[2 * i] + v[2 * i + 1];
        }
        if n % 2 == 1 {
            v[half] = v[n - 1];
            n = half + 1;
        } else {
            n = half;
        }
    }
    v[0]
}

/// [`tree_sum`] of one lane group, unrolled (the loop costs more than the adds of a short
/// line's sum): the same pairs in the same order.
#[inline]
fn tree_lanes<T: LaneSum>(v: &[T; LANES]) -> T {
    const { assert!(LANES == 16) };
    let a: [T; 8] = core::array::from_fn(|i| v[2 * i] + v[2 * i + 1]);
    let b: [T; 4] = core::array::from_fn(|i| a[2 * i] + a[2 * i + 1]);
    (b[0] + b[1]) + (b[2] + b[3])
}

//! Micro-kernels that read A in place (rows contiguous, `lda` apart) instead of from packed
//! panels, for products with few rows of A (an LM head's 64 rows): packing such an A costs a
//! gather per element from rows far apart, half the time of 64×50257×128. Each kernel also
//! issues a list of L2 prefetches (the memory the driver touches next: the next B block's
//! source, the next A block, the next tile of C) spread evenly over its steps, so that the loads
//! from memory overlap the multiply-adds instead of stalling in bursts between kernel calls.
//!
//! The fma chain per element is the one every kernel of [`kernel`](super::kernel) computes
//! (`c = fma(a[i][p], b[p][j], c)`, `p` increasing, from `+0.0` or from the value in C), so the
//! bits are the packed path's.

/// A direct-A entry point: `(kc, a, lda, b_panel, c, rsc, load, prefetch)`: `rows` rows of a
/// tile from A's rows `a + i * lda` (`kc` contiguous elements each), a packed B panel of `kc`
/// steps (`b[p * NR + j]`), C as for [`KernelFn`](super::kernel::KernelFn) (`rows` rows
/// written); the lines in `prefetch` are fetched into L2 along the way.
///
/// # Safety
/// `a + i * lda + p` must be readable for `i < rows`, `p < kc`; `b` must hold `kc * NR`
/// elements and the `rows × NR` tile at `c` must be writable; the CPU must support the
/// kernel's target features. `prefetch` may hold any addresses (a prefetch never faults).
pub type DirectFn<T> =
    unsafe fn(usize, *const T, usize, *const T, *mut T, usize, bool, &[*const i8]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use core::arch::x86_64::*;

    /// `MR` rows (`1..=12`) × 32 columns of f32, A read in place (see the module docs).
    ///
    /// # Safety
    /// See [`DirectFn`](super::DirectFn).
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512_f32_direct<const MR: usize>(
        kc: usize,
        a: *const f32,
        lda: usize,
        mut b: *const f32,
        c: *mut f32,
        rsc: usize,
        load: bool,
        pf: &[*const i8],
    ) {
        const NV: usize = 2;
        const LANES: usize = 16;
        const NR: usize = NV * LANES;
        // A row's elements this far ahead are fetched into L1 (two lines: from L2 or memory).
        const PFA: usize = 32;
        // SAFETY (whole body): the caller guarantees bounds and CPU features; prefetches of
        // addresses past A's rows do not fault (wrapping arithmetic, never dereferenced).
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NV]; MR];
            if load {
                for (i, row) in acc.iter_mut().enumerate() {
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = _mm512_loadu_ps(c.add(i * rsc + v * LANES));
                    }
                }
            }
            // One prefetch of the list every `every` steps.
            let every = match pf.len() {
                0 => usize::MAX,
                n => (kc / n).max(1),
            };
            let (mut cnt, mut next) = (every, 0);
            for p in 0..kc {
                // Each row's next lines, one row per step (a row advances a line every 16).
                let r = p & 15;
                if r < MR {
                    _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(r * lda + p + PFA) as *const i8);
                }
                cnt -= 1;
                if cnt == 0 {
                    cnt = every;
                    if next < pf.len() {
                        _mm_prefetch::<_MM_HINT_T1>(*pf.get_unchecked(next));
                        next += 1;
                    }
                }
                let b0 = _mm512_loadu_ps(b);
                let b1 = _mm512_loadu_ps(b.add(LANES));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.add(i * lda + p));
                    row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                    row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
                }
                b = b.add(NR);
            }
            for &q in &pf[next.min(pf.len())..] {
                _mm_prefetch::<_MM_HINT_T1>(q);
            }
            for (i, row) in acc.iter().enumerate() {
                for (v, x) in row.iter().enumerate() {
                    _mm512_storeu_ps(c.add(i * rsc + v * LANES), *x);
                }
            }
        }
    }

    /// The AVX-512 f32 direct kernels by row count: entry `r - 1` computes `r` rows.
    pub const F32: [super::DirectFn<f32>; 12] = [
        avx512_f32_direct::<1>,
        avx512_f32_direct::<2>,
        avx512_f32_direct::<3>,
        avx512_f32_direct::<4>,
        avx512_f32_direct::<5>,
        avx512_f32_direct::<6>,
        avx512_f32_direct::<7>,
        avx512_f32_direct::<8>,
        avx512_f32_direct::<9>,
        avx512_f32_direct::<10>,
        avx512_f32_direct::<11>,
        avx512_f32_direct::<12>,
    ];
}
